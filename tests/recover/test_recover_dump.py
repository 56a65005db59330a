"""`mqctl recover dump`: one line per commitlog record with the epoch whose range holds it; it streams."""

from __future__ import annotations

import json
import struct
from pathlib import Path

from mqctl.recover.dump import dump_records
from mqctl.store.build import build_store

HISTORY = [(0, 0), (1, 900), (2, 1200)]


def store(tmp_path: Path) -> Path:
    return build_store(tmp_path / "s", history=HISTORY, max_offset=1500, file_size=1000)


def test_every_record_with_its_epoch(tmp_path: Path, cli, unchanged) -> None:
    s = store(tmp_path)
    with unchanged(s):
        r = cli("recover", "dump", str(s), "-o", "json")
    assert r.code == 0, r.err
    rows = [json.loads(ln) for ln in r.out.splitlines()]
    assert [(d["offset"], d["epoch"]) for d in rows][:2] == [(0, 0), (100, 0)]
    # records tile the log, files roll over with RocketMQ's blank marker (file size 1000)
    assert [d["offset"] for d in rows] == [*range(0, 1000, 100), *range(1000, 1500, 100)]
    assert rows[9]["size"] == 92  # then the blank marker: the next record did not fit
    assert rows[-1]["offset"] + rows[-1]["size"] == 1500
    for d in rows:
        assert d["epoch"] == (0 if d["offset"] < 900 else 1 if d["offset"] < 1200 else 2)
        assert d["crcOk"] is True and d["topic"] == "T" and d["storeHost"] == "127.0.0.1:10911"
        assert d["queueOffset"] == d["offset"] and "body" not in d
    r = cli("recover", "dump", str(s), "--from", "900", "--to", "1200", "--body")
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert [ln.split()[0] for ln in lines] == ["900", "1000", "1100"]
    assert lines[1] == (
        "1000 size=100 topic=T queue=0 queueOffset=1000 store=2023-11-14T22:13:21.000Z "
        "born=127.0.0.1:0 stored=127.0.0.1:10911 crc=ok epoch=1 body='e1@1000;'"
    )
    assert all(" epoch=1 " in ln for ln in lines)
    r = cli("recover", "dump", str(s), "--max-bytes", "250", "-o", "json")
    assert [json.loads(ln)["offset"] for ln in r.out.splitlines()] == [0, 100]


def test_bad_crc_and_a_corrupt_record_after_streamed_lines(tmp_path: Path, cli) -> None:
    s = store(tmp_path)
    log = s / "commitlog" / f"{0:020d}"
    data = bytearray(log.read_bytes())
    data[190] ^= 0xFF  # a body byte of the record at 100 (its body: 188..195)
    struct.pack_into(">I", data, 304, 0x12345678)  # the MAGICCODE of the record at 300
    log.write_bytes(bytes(data))
    # streams: the first records come out of the generator before the walker reaches the corrupt one
    it = dump_records(s)
    assert next(it)["offset"] == 0 and next(it)["crcOk"] is False
    r = cli("recover", "dump", str(s))
    assert r.code == 4
    assert [ln.split()[0] for ln in r.out.splitlines()] == ["0", "100", "200"]
    assert " crc=BAD " in r.out.splitlines()[1]
    assert r.err.startswith(f"mqctl: error: {log} offset 300: ")


def test_usage(tmp_path: Path, cli) -> None:
    s = store(tmp_path)
    r = cli("recover", "dump", str(s), "--from", "950")
    assert (r.code, r.err) == (
        2,
        "mqctl: error: --from 950 is not a record boundary; nearest boundaries: 900 and 992\n",
    )  # 992: the blank end-of-file marker
    r = cli("recover", "dump", str(s), "--to", "5", "--max-bytes", "5")
    assert (r.code, r.err) == (2, "mqctl: error: --to and --max-bytes: give one of them\n")
    r = cli("recover", "dump", str(s), "-o", "yaml")
    assert r.code == 2 and "-o table or -o json (JSON Lines)" in r.err
    r = cli("recover", "dump", str(tmp_path / "none"))
    assert r.code == 4 and "no such directory" in r.err
