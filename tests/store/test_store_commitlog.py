"""Commitlog: record bytes, v1/v2, IPv4/IPv6, blank marker and file rollover, torn and corrupt tails,
parse_range resynchronisation, and readers that never write."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqctl.errors import StoreError
from mqctl.store.commitlog import (
    BLANK_MAGIC,
    MAGIC_V1,
    MAGIC_V2,
    CommitLog,
    CommitLogWriter,
    Message,
    decode_record,
    encode_record,
    file_name,
    scan_buffer,
)
from mqctl.store.walker import parse_byte_range


def walk(data: bytes, base: int, start: int = 0, end: int | None = None, **kw) -> list[int]:
    """Absolute offsets of the records the one walker finds in data[start:end) (data: a whole file)."""
    pr = parse_byte_range(data, base, start, len(data) if end is None else end, **kw)
    return pr.offset.tolist()


def test_file_name() -> None:
    assert file_name(0) == "00000000000000000000"
    assert file_name(1073741824) == "00000000001073741824"


def test_v1_ipv4_layout() -> None:
    m = Message(
        "TopicTest",
        b"hello",
        {"KEYS": "k1"},
        queue_id=3,
        flag=7,
        queue_offset=11,
        born_timestamp=5,
        born_host=("127.0.0.1", 5555),
        store_timestamp=6,
        store_host=("127.0.0.1", 10911),
        reconsume_times=2,
        prepared_tx_offset=9,
    )
    b = encode_record(m, 4096)
    props = b"KEYS\x01k1\x02"
    assert len(b) == 91 + 5 + 9 + len(props)
    total, magic, crc, qid, flag, qoff, phys, sysflag, born_ts = struct.unpack_from(">iIiiiqqiq", b)
    assert (total, magic, qid, flag, qoff, phys, sysflag, born_ts) == (len(b), MAGIC_V1, 3, 7, 11, 4096, 0, 5)
    assert crc == zlib.crc32(b"hello") & 0x7FFFFFFF
    assert b[48:56] == bytes([127, 0, 0, 1]) + struct.pack(">i", 5555)
    assert b.endswith(b"\x09TopicTest" + struct.pack(">h", len(props)) + props)
    r = decode_record(b, 0, 4096)
    assert (r.offset, r.topic, r.body, r.born_host, r.store_host, r.queue_offset, r.version) == (
        4096,
        "TopicTest",
        b"hello",
        ("127.0.0.1", 5555),
        ("127.0.0.1", 10911),
        11,
        1,
    )
    assert r.properties_dict() == {"KEYS": "k1"}
    assert r.to_dict()["bornHost"] == "127.0.0.1:5555"


def test_v2_and_ipv6() -> None:
    topic = "t" * 200
    m = Message(topic, b"x", born_host=("::1", 1), store_host=("fe80::2", 2))
    b = encode_record(m, 0)
    assert struct.unpack_from(">I", b, 4)[0] == MAGIC_V2
    assert struct.unpack_from(">i", b, 36)[0] == 0x30
    assert len(b) == 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 20 + 8 + 20 + 4 + 8 + 4 + 1 + 2 + 200 + 2
    r = decode_record(b, 0, 0)
    assert (r.version, r.topic, r.born_host, r.store_host) == (2, topic, ("::1", 1), ("fe80::2", 2))
    assert r.to_dict()["storeHost"] == "[fe80::2]:2"
    with pytest.raises(ValueError):
        encode_record(Message(topic, version=1), 0)


def test_forced_v2_short_topic() -> None:
    r = decode_record(encode_record(Message("ab", b"", version=2), 0), 0, 0)
    assert r.version == 2 and r.topic == "ab"


hosts = st.one_of(st.ip_addresses(v=4).map(str), st.ip_addresses(v=6).map(str))
messages = st.builds(
    Message,
    topic=st.text(min_size=1, max_size=300).filter(lambda t: len(t.encode()) <= 300),
    body=st.binary(max_size=300),
    properties=st.dictionaries(
        st.text(alphabet="abcdefgh", min_size=1, max_size=5),
        st.text(alphabet="xyz0123", max_size=5),
        max_size=3,
    ),
    queue_id=st.integers(0, 2**31 - 1),
    queue_offset=st.integers(0, 2**62),
    born_host=st.tuples(hosts, st.integers(0, 65535)),
    store_host=st.tuples(hosts, st.integers(0, 65535)),
    born_timestamp=st.integers(0, 2**62),
    store_timestamp=st.integers(0, 2**62),
)


@settings(deadline=None)
@given(messages, st.integers(0, 2**50))
def test_record_property_round_trip(m: Message, off: int) -> None:
    b = encode_record(m, off)
    r = decode_record(b, 0, off)
    assert r.size == len(b) and r.physical_offset == off and r.body == m.body and r.topic == m.topic
    assert r.properties_dict() == dict(m.properties)  # type: ignore[arg-type]
    assert r.crc_ok()


@settings(max_examples=30, deadline=None)
@given(st.lists(messages, min_size=1, max_size=25), st.integers(400, 3000))
def test_writer_reader_property(tmp_path_factory, msgs: list[Message], file_size: int) -> None:
    d = tmp_path_factory.mktemp("cl")
    offsets = []
    with CommitLogWriter(d, file_size) as w:
        for m in msgs:
            if len(encode_record(m, 0)) + 8 > file_size:
                continue
            offsets.append(w.append(m))
        end = w.offset
    log = CommitLog(d)
    recs = list(log.iter_records())
    assert [r.offset for r in recs] == offsets
    scan = log.scan(deep=True)
    assert scan.max_offset == end and scan.records == len(offsets) and scan.problems == []
    # every file is exactly file_size, and every non-last file ends with a blank marker after its records
    for f in log.files[:-1]:
        data = f.path.read_bytes()
        last = max((r for r in recs if r.offset < f.start + file_size), key=lambda r: r.offset)
        pos = last.end - f.start
        assert struct.unpack_from(">iI", data, pos) == (file_size - pos, BLANK_MAGIC)
    # the walker over each file gives the same records
    again = []
    for f in log.files:
        again += walk(f.path.read_bytes(), f.start)
    assert again == offsets


def test_rollover_strict_rule(tmp_path: Path) -> None:
    m = Message("T", b"x" * 8)  # 100 bytes
    with CommitLogWriter(tmp_path / "a", 308) as w:
        offs = [w.append(m) for _ in range(4)]
    # 0,100,200 fit (remaining 108 before the third: 100 + 8 > 108 is false); then remaining 8 -> blank
    assert offs == [0, 100, 200, 308]
    data = (tmp_path / "a" / file_name(0)).read_bytes()
    assert struct.unpack_from(">iI", data, 300) == (8, BLANK_MAGIC)
    with CommitLogWriter(tmp_path / "b", 307) as w:
        offs = [w.append(m) for _ in range(3)]
    assert offs == [0, 100, 307]  # remaining 107 before the third: 108 > 107 -> blank of 107
    data = (tmp_path / "b" / file_name(0)).read_bytes()
    assert struct.unpack_from(">iI", data, 200) == (107, BLANK_MAGIC)


def test_writer_resumes_after_last_record(tmp_path: Path) -> None:
    with CommitLogWriter(tmp_path, 1000) as w:
        w.append(Message("T", b"a"))
    with CommitLogWriter(tmp_path, 1000) as w:
        assert w.offset == 93
        w.append(Message("T", b"b"))
    assert [r.body for r in CommitLog(tmp_path).iter_records()] == [b"a", b"b"]


def _store(tmp_path: Path, n: int = 12, file_size: int = 1000) -> Path:
    d = tmp_path / "commitlog"
    with CommitLogWriter(d, file_size) as w:
        for i in range(n):
            w.append(Message("T", bytes([65 + i]) * 100, queue_offset=i))
    return d


def test_scan_and_boundaries(tmp_path: Path, unchanged) -> None:
    d = _store(tmp_path)  # records of 192 bytes, 5 per 1000-byte file (960 + blank)
    with unchanged(tmp_path):
        log = CommitLog(d)
        s = log.scan(deep=True)
        assert (s.max_offset, s.records, s.stop, s.problems) == (2384, 12, "zero", [])
        assert [f.path.name for f in log.files] == [file_name(0), file_name(1000), file_name(2000)]
        assert log.boundaries_around(2192, s.max_offset) == (2192, 2192)
        assert log.boundaries_around(2200, s.max_offset) == (2192, 2384)
        assert log.boundaries_around(2400, s.max_offset) == (2384, None)
        assert log.boundaries_around(200, s.max_offset) == (192, 384)
        assert log.boundaries_around(970, s.max_offset) == (960, 1000)


def test_torn_tail_is_found(tmp_path: Path, unchanged) -> None:
    d = _store(tmp_path)
    p = d / file_name(2000)
    data = bytearray(p.read_bytes())
    data[192 + 150 : 192 + 188] = bytes(38)  # the last record lost its end: the CRC catches it
    p.write_bytes(bytes(data))
    with unchanged(tmp_path):
        s = CommitLog(d).scan()
    assert s.max_offset == 2192 and s.stop == "corrupt"
    assert s.problems == [
        f"{p} offset 2192: BODYCRC mismatch: field says {zlib.crc32(b'L' * 100) & 0x7FFFFFFF},"
        f" body gives {zlib.crc32(b'L' * 62 + bytes(38)) & 0x7FFFFFFF}; the valid data ends there"
    ]


def test_wrong_crc_strict_reader(tmp_path: Path, unchanged) -> None:
    d = _store(tmp_path)
    p = d / file_name(1000)
    data = bytearray(p.read_bytes())
    data[192 + 8 : 192 + 12] = struct.pack(">i", 1)
    p.write_bytes(bytes(data))
    with unchanged(tmp_path):
        with pytest.raises(StoreError) as ei:
            list(CommitLog(d).iter_records())
        assert (
            str(ei.value) == f"{p} offset 1192: BODYCRC mismatch: field says 1, body gives "
            f"{zlib.crc32(b'G' * 100) & 0x7FFFFFFF}"
        )
        s = CommitLog(d).scan(deep=True)
        assert s.max_offset == 1192 and s.records == 6
        assert s.bytes_beyond == 1000
        assert (
            s.problems[-1] == f"1 file(s) after offset 1192 hold data that recovery would drop, first "
            f"{d / file_name(2000)}"
        )


def test_wrong_physical_offset(tmp_path: Path, unchanged) -> None:
    d = _store(tmp_path)
    p = d / file_name(0)
    data = bytearray(p.read_bytes())
    data[384 + 28 : 384 + 36] = struct.pack(">q", 999)
    p.write_bytes(bytes(data))
    with unchanged(tmp_path), pytest.raises(StoreError) as ei:
        list(CommitLog(d).iter_records())
    assert str(ei.value) == f"{p} offset 384: PHYSICALOFFSET field says 999, record is at 384"


def test_garbage_bytes(tmp_path: Path, unchanged) -> None:
    d = tmp_path / "commitlog"
    d.mkdir()
    p = d / file_name(0)
    p.write_bytes(b"\x00\x00\x00\x10garbage!" + bytes(1000))
    with unchanged(tmp_path):
        with pytest.raises(StoreError) as ei:
            list(CommitLog(d).iter_records())
        assert str(ei.value) == f"{p} offset 0: bad MAGICCODE 0x67617262"
        s = CommitLog(d).scan(deep=True)
        assert (s.max_offset, s.stop) == (0, "corrupt")


def test_truncated_file(tmp_path: Path, unchanged) -> None:
    d = _store(tmp_path)
    p = d / file_name(1000)
    p.write_bytes(p.read_bytes()[:500])
    with unchanged(tmp_path), pytest.raises(StoreError) as ei:
        CommitLog(d)
    assert str(ei.value) == f"{p} offset 500: file is 500 bytes, expected 1000 (truncated or wrong file size)"


def test_truncated_last_file_mid_record(tmp_path: Path, unchanged) -> None:
    d = _store(tmp_path)
    p = d / file_name(2000)
    p.write_bytes(p.read_bytes()[:300])
    with unchanged(tmp_path):
        log = CommitLog(d)
        s = log.scan()
        assert s.max_offset == 2192 and s.stop == "corrupt"
        assert (
            s.problems[-1] == f"{p} offset 2192: torn record: TOTALSIZE 192 but only 108 bytes remain; "
            f"the valid data ends there"
        )
        with pytest.raises(StoreError) as ei:
            list(log.iter_records())
        assert str(ei.value) == f"{p} offset 2192: torn record: TOTALSIZE 192 but only 108 bytes remain"


def test_empty_directory(tmp_path: Path, unchanged) -> None:
    d = tmp_path / "commitlog"
    d.mkdir()
    with unchanged(tmp_path), pytest.raises(StoreError) as ei:
        CommitLog(d)
    assert str(ei.value) == f"{d}: empty directory: no commitlog files"


def test_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(StoreError) as ei:
        CommitLog(tmp_path / "nope")
    assert str(ei.value) == f"{tmp_path / 'nope'}: no such directory"


def test_gap_between_files(tmp_path: Path, unchanged) -> None:
    d = _store(tmp_path)
    (d / file_name(1000)).rename(d / file_name(5000))
    with unchanged(tmp_path), pytest.raises(StoreError) as ei:
        CommitLog(d)
    assert str(ei.value) == (
        f"{d / file_name(2000)} offset 0: expected the file after {file_name(0)} to start "
        f"at 1000 (file size 1000)"
    )


def test_walker_resyncs_mid_record(tmp_path: Path) -> None:
    d = _store(tmp_path)
    data = (d / file_name(0)).read_bytes()
    assert walk(data, 0, 250) == [384, 576, 768]
    # only records starting before `end`, the last one read past it
    assert walk(data, 0, 0, 400) == [0, 192, 384]


def test_walker_skips_corrupt_record_and_reports_it(tmp_path: Path) -> None:
    d = _store(tmp_path)
    data = bytearray((d / file_name(0)).read_bytes())
    data[192 + 100] ^= 0xFF
    pr = parse_byte_range(bytes(data), 0, 0, len(data))
    assert pr.offset.tolist() == [0, 192, 384, 576, 768] and pr.crc_ok.tolist() == [1, 0, 1, 1, 1]
    (p,) = pr.problems
    assert (p.offset, p.length, p.kind) == (192, 192, "crc") and p.reason.startswith("BODYCRC mismatch")
    data[192 + 30] ^= 0xFF  # PHYSICALOFFSET: not a record any more
    pr = parse_byte_range(bytes(data), 0, 0, len(data))
    assert pr.offset.tolist() == [0, 384, 576, 768]
    assert [(p.offset, p.length, p.kind) for p in pr.problems] == [(192, 192, "corrupt")]
    # stop_at_damage (RocketMQ's recovery rule): the walk ends there, nothing reported about it
    pr = parse_byte_range(bytes(data), 0, 0, len(data), stop_at_damage=True)
    assert (pr.offset.tolist(), pr.walk_end, pr.problems) == ([0], 192, [])


def test_scan_buffer_pure() -> None:
    buf = b"".join(encode_record(Message("T", b"x"), o) for o in (0, 93, 186)) + bytes(50)
    s = scan_buffer(buf, 0)
    assert (s.end, s.records, s.stop, s.last_record) == (279, 3, "zero", 186)
    s = scan_buffer(buf, 7)
    assert s.stop == "corrupt" and s.error is not None
    assert s.error.reason == "PHYSICALOFFSET field says 0, record is at 7"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=200), min_size=1, max_size=30), st.data())
def test_walker_resync_property(bodies: list[bytes], data) -> None:
    buf = bytearray()
    offsets = []
    for b in bodies:
        offsets.append(len(buf))
        buf += encode_record(Message("T", b, queue_offset=len(offsets)), 10_000 + len(buf))
    buf += bytes(16)
    cut = data.draw(st.integers(0, len(buf) - 1))
    assert walk(bytes(buf), 10_000, cut, head_owned=False) == [10_000 + o for o in offsets if o >= cut]


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.binary(max_size=150),
            st.sampled_from([MAGIC_V1, MAGIC_V2]),
            st.binary(max_size=150),
            st.sampled_from(["magic", "head", "record"]),
        ),
        min_size=1,
        max_size=40,
    ),
    st.data(),
)
def test_walker_chain_skips_magic_bytes_inside_bodies(parts, data) -> None:
    """Bodies holding MAGICCODE bytes (alone, with a plausible TOTALSIZE before them, or a whole
    encoded record) give the vectorized chain walk candidates that are not records: the walk, from the
    start or resynchronising from any cut, and the recovery scan find exactly the records written."""
    buf = bytearray()
    offsets = []
    for pre, magic, post, kind in parts:
        inner = {
            "magic": struct.pack(">I", magic) + post,
            "head": struct.pack(">iI", 8 + len(post), magic) + post,
            "record": encode_record(Message("T", post), 0),
        }[kind]
        offsets.append(len(buf))
        buf += encode_record(Message("T", pre + inner, queue_offset=len(offsets)), 10_000 + len(buf))
    end = len(buf)
    buf += bytes(16)
    assert walk(bytes(buf), 10_000) == [10_000 + o for o in offsets]
    cut = data.draw(st.integers(0, len(buf) - 1))
    assert walk(bytes(buf), 10_000, cut, head_owned=False) == [10_000 + o for o in offsets if o >= cut]
    s = scan_buffer(bytes(buf), 10_000)
    assert (s.records, s.end, s.stop) == (len(offsets), end, "zero")


# --------------------------------------------------------------------------- RocketMQ's recovery at the end
# CommitLog.recoverNormally/recoverAbnormally: checkMessageAndReturnSize answers size 0 for the blank
# marker and the recovery switches to the next file; with no next file it stops, and processOffset (the
# max physical offset) stays at the marker, the end of the last message. tests/recover/
# test_rocketmq_broker_store.py checks the same against a real RocketMQ broker.


def _marker_store(tmp_path: Path) -> tuple[Path, int]:
    """Files 0 and 1000 of a 1000-byte log; file 1000 ends with the blank marker after its records and
    there is no file 2000 (as when it could not be created, or a slave's copy stopped at the file end)."""
    d = _store(tmp_path, n=11)  # 5 records of 192 bytes per file, blank marker at 960
    (d / file_name(2000)).unlink()  # the 11th record
    return d, 1960


def test_blank_marker_in_the_last_file_ends_the_log_at_the_marker(tmp_path: Path, unchanged) -> None:
    d, marker = _marker_store(tmp_path)
    assert sorted(x.name for x in d.iterdir()) == [file_name(0), file_name(1000)]
    assert struct.unpack_from(">iI", (d / file_name(1000)).read_bytes(), 960) == (40, BLANK_MAGIC)
    with unchanged(tmp_path):
        log = CommitLog(d)
        for deep in (False, True):
            s = log.scan(deep=deep)
            assert (s.max_offset, s.records, s.stop, s.problems, s.bytes_beyond) == (
                marker,
                10,
                "blank-eof",
                [],
                0,
            )
        assert s.last_record_offset == marker - 192
        assert [r.offset for r in log.iter_records()][-1] == marker - 192
        assert log.boundaries_around(marker, marker) == (marker, marker)
        assert log.boundaries_around(1999, marker) == (marker, None)


def test_empty_next_file_after_the_marker_counts_to_the_file_end(tmp_path: Path) -> None:
    """A next file that exists (RocketMQ preallocates it) but holds no record: the recovery switches to
    it and stops at its first byte, so the max offset is that file's start."""
    d, _ = _marker_store(tmp_path)
    (d / file_name(2000)).write_bytes(bytes(1000))
    s = CommitLog(d).scan()
    assert (s.max_offset, s.stop, s.problems) == (2000, "zero", [])


def test_empty_last_file_is_not_part_of_the_log(tmp_path: Path, unchanged) -> None:
    """RocketMQ deletes a 0-byte last file when it loads the commitlog (MappedFileQueue.doLoad): the file
    before it is the last one, ending with its marker."""
    d, marker = _marker_store(tmp_path)
    (d / file_name(2000)).write_bytes(b"")
    with unchanged(tmp_path):
        log = CommitLog(d)
        assert [f.start for f in log.files] == [0, 1000]
        s = log.scan()
        assert (s.max_offset, s.stop) == (marker, "blank-eof")
        assert s.problems == [
            f"{d / file_name(2000)}: empty file (0 bytes) at the end of the commitlog; "
            f"RocketMQ deletes it when it loads the commitlog"
        ]
    only = tmp_path / "only"
    only.mkdir()
    (only / file_name(0)).write_bytes(b"")
    with pytest.raises(StoreError) as ei:
        CommitLog(only)
    assert str(ei.value) == (
        f"{only}: no commitlog files: only {file_name(0)}, an empty file (0 bytes) that "
        f"RocketMQ deletes when it loads them"
    )


def test_writer_resumes_at_the_marker_like_rocketmq(tmp_path: Path) -> None:
    """RocketMQ's truncateDirtyFiles puts the write position at the recovered offset: the next message
    overwrites the marker when it fits, else a new marker goes there and the message to the next file."""
    d, marker = _marker_store(tmp_path)
    with CommitLogWriter(d, 1000) as w:
        assert w.offset == marker
        small = w.append(Message("T", b"s"))  # 93 bytes: 93 + 8 > 40, so a new marker at 1960
    assert small == 2000
    log = CommitLog(d)
    assert struct.unpack_from(">iI", (d / file_name(1000)).read_bytes(), 960) == (40, BLANK_MAGIC)
    assert log.scan(deep=True).max_offset == 2093
