"""The per-range parser without Spark: any way of cutting the files into ranges gives the same records
and the same damage reports as one range per file, which are what the writer wrote."""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path

import pytest

pytest.importorskip("numpy")

from pipeline_fixtures import BORN6, FILE_SIZE, T_LONG, Fleet

from mqctl.pipeline.ranges import store_ranges
from mqctl.pipeline.tasks import (
    analyze_rows,
    message_key,
    open_file,
    parse_task,
    property_value,
)
from mqctl.store.commitlog import COMMITLOG_DIR, CommitLog, decode_properties
from mqctl.store.walker import parse_byte_range


def parse_store(store: Path, range_size: int, chains=None, **kw):
    recs, problems = [], []
    for br in store_ranges(store, range_size=range_size, **kw):
        pr = parse_task(br, extract=("bodies", "properties", "hosts"), known=(chains or {}).get(br.path))
        recs += list(
            zip(
                pr.offset.tolist(),
                pr.topics,
                pr.bodies,
                pr.properties,
                pr.born_hosts,
                pr.store_hosts,
                pr.version.tolist(),
                pr.crc_ok.tolist(),
                pr.queue_offset.tolist(),
                strict=True,
            )
        )
        problems += [(p.offset, p.length, p.kind, p.reason) for p in pr.problems]
    return recs, problems


CUTS = [64, 91, 100, 127, 200, 256, 333, 512, 1000, 1500, FILE_SIZE]


def test_every_cut_finds_what_the_writer_wrote(fleet: Fleet) -> None:
    # C is undamaged: compare with the store module's sequential reader, field by field
    store = fleet.stores["C"]
    ref = [
        (
            r.offset,
            r.topic,
            r.body,
            r.properties,
            f"{r.born_host[0]}:{r.born_host[1]}"
            if ":" not in r.born_host[0]
            else f"[{r.born_host[0]}]:{r.born_host[1]}",
        )
        for r in CommitLog(store / COMMITLOG_DIR).iter_records()
    ]
    assert len(ref) == 13  # 10 prefix records + a0..a2
    for cut in CUTS:
        recs, problems = parse_store(store, cut)
        assert [r[:5] for r in recs] == ref, cut
        assert problems == [], cut
    recs, _ = parse_store(store, 256)
    a2 = next(r for r in recs if r[0] == fleet.offsets["a2"])
    assert a2[4] == f"[{BORN6[0]}]:{BORN6[1]}" and a2[5] == "[fd00::100]:10911"


def test_damage_is_reported_once_whatever_the_cut(fleet: Fleet) -> None:
    store = fleet.stores["A"]
    o = fleet.offsets
    whole, whole_problems = parse_store(store, FILE_SIZE)
    # a6 (PHYSICALOFFSET smashed) is skipped up to a7, the next record; a5 is read with crcOk False
    assert [p[:3] for p in whole_problems] == [
        (o["a5"], o["a6"] - o["a5"], "crc"),
        (o["a6"], o["a7"] - o["a6"], "corrupt"),
    ]
    assert "BODYCRC mismatch" in whole_problems[0][3]
    reason = whole_problems[1][3]
    assert reason.startswith("PHYSICALOFFSET field says") and reason.endswith(f"record is at {o['a6']}")
    offsets = [r[0] for r in whole]
    tail = [k for k in o if k.startswith("a") and k != "a6"]
    assert [x for x in offsets if x >= 1000] == [o[k] for k in tail]
    assert {r[0]: r[7] for r in whole}[o["a5"]] is False
    v2 = next(r for r in whole if r[0] == o["a4"])
    assert v2[1] == T_LONG and v2[6] == 2
    assert decode_properties(v2[3]) == {"KEYS": "order-4 order-44", "TAGS": "tagA", "UNIQ_KEY": "K-a4"}
    for cut in CUTS:
        recs, problems = parse_store(store, cut)
        assert recs == whole and problems == whole_problems, cut


def test_record_split_across_a_range_boundary_belongs_to_the_range_it_starts_in(fleet: Fleet) -> None:
    store = fleet.stores["A"]
    a7 = fleet.offsets["a7"]
    size = fleet.offsets["a8"] - a7
    assert size > 1500
    path = str(store / COMMITLOG_DIR / "00000000000000000000")
    with open_file(path) as buf:
        first = parse_byte_range(buf, 0, a7 - 10, a7 + 100)  # starts in a6's damage, holds a7's head
        middle = parse_byte_range(buf, 0, a7 + 100, a7 + 700)  # entirely inside a7
        after = parse_byte_range(buf, 0, a7 + 700, a7 + size + 1)  # a7's end and a8's first byte
    assert first.offset.tolist() == [a7] and int(first.size[0]) == size
    assert middle.offset.tolist() == [] and middle.problems == []
    assert after.offset.tolist() == [a7 + size]
    assert first.problems == []  # the bytes before the first boundary belong to the previous range


def test_zero_gap_followed_by_records_is_reported(tmp_path: Path) -> None:
    from mqctl.store.build import build_store

    store = build_store(tmp_path / "s", history=[(0, 0)], max_offset=1000, file_size=FILE_SIZE)
    f = store / COMMITLOG_DIR / "00000000000000000000"
    data = bytearray(f.read_bytes())
    data[300:400] = bytes(100)  # one 100-byte record zeroed: recovery would stop at 300
    f.write_bytes(bytes(data))
    for cut in (64, 150, 1000, FILE_SIZE):
        recs, problems = parse_store(store, cut)
        assert [r[0] for r in recs] == [x for x in range(0, 1000, 100) if x != 300], cut
        assert problems == [(300, 100, "gap", "100 zero bytes before the record at 400")], cut


def test_a_range_region_starting_at_damage_reports_it(fleet: Fleet) -> None:
    # salvage starts reading at truncateTo; here a region that starts right at a6's damage
    o = fleet.offsets
    _recs, problems = parse_store(fleet.stores["A"], 128, from_offset=o["a6"])
    assert [p[0] for p in problems] == [o["a6"]]


@pytest.mark.parametrize("name", ["A", "B", "C"])
def test_a_walk_that_reuses_the_recovery_scan_finds_the_same(fleet: Fleet, name: str) -> None:
    # salvage's pass 1 takes the records the plan's recovery scan found (up to its first damage: A's
    # a5 has a bad BODYCRC) and walks on from there itself: same records, crcOk and problems
    store = fleet.stores[name]
    scan = CommitLog(store / COMMITLOG_DIR).scan(deep=True, keep_chains=True)
    assert scan.chains and all(c.crc_checked for c in scan.chains.values())
    if name == "A":
        assert next(iter(scan.chains.values())).end == fleet.offsets["a5"]
    for cut in CUTS:
        for frm in (None, fleet.offsets["a1"], fleet.offsets["a6"]):
            assert parse_store(store, cut, scan.chains, from_offset=frm) == parse_store(
                store, cut, from_offset=frm
            ), (cut, frm)


@pytest.mark.parametrize("name", ["A", "B", "C"])
def test_a_scan_in_pieces_by_two_processes_is_the_sequential_scan(
    fleet: Fleet, name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `recover inspect --deep` walks pieces of the files in worker processes, then goes on sequentially
    # from where the stitched chain ends (A: a5's bad BODYCRC): the same scan as one process's
    from mqctl.store import commitlog
    from mqctl.store.commitlog import scan_buffer, scan_chains

    log = CommitLog(fleet.stores[name] / COMMITLOG_DIR)
    for piece in (64, 100, 333, 1000, FILE_SIZE):
        chains = scan_chains(log.files, workers=2, piece=piece)
        for lf in log.files:
            data = lf.path.read_bytes()
            one, two = scan_buffer(data, lf.start), scan_buffer(data, lf.start, known=chains[str(lf.path)])
            assert (two.end, two.records, two.stop, str(two.error), two.last_record) == (
                one.end,
                one.records,
                one.stop,
                str(one.error),
                one.last_record,
            ), (piece, lf.path)
        monkeypatch.setattr(commitlog, "PIECE_BYTES", piece)
        assert log.scan(deep=True, workers=2) == log.scan(deep=True), piece
    if name == "A":
        assert chains[str(log.files[0].path)].end == fleet.offsets["a5"]


@pytest.mark.parametrize("name", ["A", "B", "C"])
def test_fields_gathered_in_blocks_are_those_of_one_block(
    fleet: Fleet, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the walker gathers a range's fields a block of records at a time (parse_byte_range joins the
    # blocks, parse_task_blocks gives them one by one): whatever the block, the same records, columns,
    # topics and problems as one block, with and without the recovery scan's chains (BODYCRC known for
    # the first records only: A's chain ends at a5)
    from mqctl.pipeline.tasks import parse_task_blocks
    from mqctl.store import walker

    store = fleet.stores[name]
    chains = CommitLog(store / COMMITLOG_DIR).scan(deep=True, keep_chains=True).chains

    def rows(pr, extract: bool) -> tuple:
        cols = tuple(getattr(pr, c).tolist() for c in walker._COLUMNS)
        more = (pr.properties, pr.born_hosts, pr.store_hosts, pr.bodies) if extract else ()
        return cols, pr.topics, more

    def walk(cut: int, known: dict) -> list:
        out = []
        for br in store_ranges(store, range_size=cut):
            k = known.get(br.path)
            whole = parse_task(br, known=k)
            blocks = list(parse_task_blocks(br, extract=("bodies", "properties", "hosts"), known=k))
            joined = [[v for b in blocks for v in getattr(b, c).tolist()] for c in walker._COLUMNS]
            out.append(
                (
                    rows(whole, False),
                    sorted((p for b in blocks for p in b.problems), key=lambda p: p.position),
                    joined,
                    [t for b in blocks for t in b.topics],
                    [x for b in blocks for x in zip(*rows(b, True)[2], strict=True)],
                    whole.problems,
                )
            )
        return out

    for known in ({}, chains):
        for cut in (100, 333, FILE_SIZE):
            monkeypatch.setattr(walker, "BLOCK_RECORDS", 1 << 20)
            one = walk(cut, known)
            for block in (1, 2, 3, 7):
                monkeypatch.setattr(walker, "BLOCK_RECORDS", block)
                assert walk(cut, known) == one, (cut, block, bool(known))
            for (cols, topics, _), problems, joined, btopics, _items, wproblems in one:
                # the blocks of one range, joined, are what the whole range gives
                assert joined == [list(c) for c in cols] and btopics == topics
                assert problems == wproblems


def test_task_rows_and_keys(fleet: Fleet) -> None:
    assert property_value(b"A\x01x\x02UNIQ_KEY\x01k1\x02", b"UNIQ_KEY") == "k1"
    assert property_value(b"XUNIQ_KEY\x01no\x02", b"UNIQ_KEY") is None
    assert message_key("k", "h:1", 5, 7) == "uniq:k" and message_key(None, "h:1", 5, 7) == "born:h:1/5/7"
    q = [
        r[1]
        for br in store_ranges(fleet.stores["C"], range_size=200)
        for r in analyze_rows(br)
        if r[0] == "q"
    ]
    assert sum(x[5] for x in q) == 13


def test_salvage_passes_give_the_decoded_records(fleet: Fleet) -> None:
    """Pass 1 (`candidate_keys`: one row per record, no body) and pass 2 (`kept_rows` and
    `message_batch`: the records read back at their positions) hold exactly what the store module's
    decoder reads, whatever the cut; properties in the record's own order; no epoch before the first
    epoch entry is a null."""
    import numpy as np

    pa = pytest.importorskip("pyarrow")
    from mqctl.pipeline.tasks import (
        candidate_keys,
        kept_rows,
        key_arrow,
        key_hashes,
        message_batch,
        message_key,
        unpack_ord,
    )
    from mqctl.store.commitlog import decode_record
    from mqctl.store.walker import fmt_host

    meta = {
        "clusterName": "c",
        "brokerName": "b",
        "store": "A",
        "brokerId": 1,
        "rank": 1,
        "epochs": [(1500, 1)],
        "setId": 3,
        "storeId": 5,
    }
    want = [k for k in fleet.offsets if k.startswith("a") and k != "a6"]
    for size in (300, FILE_SIZE):
        ranges = store_ranges(fleet.stores["A"], from_offset=1000, range_size=size, meta=meta)
        batches, probs = zip(*(candidate_keys(br) for br in ranges), strict=True)
        cand = pa.Table.from_batches(batches)
        rank, offs, crc_ok = unpack_ord(cand.column("ord").to_numpy())
        assert offs.tolist() == [fleet.offsets[k] for k in want], size
        assert set(rank.tolist()) == {1} and crc_ok.tolist() == [k != "a5" for k in want]
        assert [(p[5], p[7]) for ps in probs for p in ps] == [
            (fleet.offsets["a5"], "crc"),
            (fleet.offsets["a6"], "corrupt"),
        ], size
        assert set(cand.column("setId").to_pylist()) == {3}
        kept = kept_rows(
            cand.column("setId").to_numpy(),
            cand.column("ord").to_numpy(),
            np.full(cand.num_rows, 2),
            ranges,
            1 << 30,
        )
        assert sorted(kept.column("physicalOffset").to_pylist()) == offs.tolist()
        rows = pa.Table.from_batches(
            [message_batch(b, ranges) for b in kept.to_batches(max_chunksize=3)]
        ).to_pylist()
        order = [
            (-1 if r["epoch"] is None else r["epoch"], r["topic"], r["queueId"], r["physicalOffset"])
            for r in rows
        ]
        assert order == sorted(order), "the write order: part (epoch), topic, queueId, physicalOffset"
        by_off = {r["physicalOffset"]: r for r in rows}
        rows = [by_off[o] for o in offs.tolist()]
        keys = []
        for r in rows:
            (at,) = [br for br in ranges if br.offset <= r["physicalOffset"] < br.offset + br.length]
            data = Path(at.path).read_bytes()
            rec = decode_record(data, r["physicalOffset"] - at.file_start, at.file_start, check_crc=False)
            key = message_key(
                rec.properties_dict().get("UNIQ_KEY"),
                fmt_host(*_packed(rec.born_host)),
                rec.born_timestamp,
                rec.body_crc,
            )
            keys.append(key)
            assert (r["clusterName"], r["brokerName"], r["store"], r["brokerId"], r["messageKey"]) == (
                "c",
                "b",
                "A",
                1,
                key,
            )
            assert (
                r["topic"],
                r["queueId"],
                r["queueOffset"],
                r["body"],
                r["rawProperties"],
                r["version"],
                r["bornTimestamp"],
                r["bodyCrc"],
                r["copies"],
            ) == (
                rec.topic,
                rec.queue_id,
                rec.queue_offset,
                rec.body,
                rec.properties,
                rec.version,
                rec.born_timestamp,
                rec.body_crc,
                2,
            )
            assert r["bornHost"] == fmt_host(*_packed(rec.born_host))
            assert list(dict(r["properties"])) == list(decode_properties(rec.properties))
            assert r["epoch"] == (1 if r["physicalOffset"] >= 1500 else None)
            assert r["crcOk"] == rec.crc_ok() and r["uniqKey"] == rec.properties_dict().get("UNIQ_KEY")
        # the 128 bits the dedupe compares: the same for the same key, on either side
        hi, lo = key_hashes(pa.array(keys))
        assert list(zip(hi.tolist(), lo.tolist(), strict=True)) == list(
            zip(cand.column("keyHi").to_pylist(), cand.column("keyLo").to_pylist(), strict=True)
        )
        assert len(set(zip(hi.tolist(), lo.tolist(), strict=True))) == len(set(keys))
        src = pa.Table.from_batches([key_arrow(br) for br in ranges])
        assert src.column("setId").to_pylist() == [3] * len(keys)
        assert src.column("keyHi").to_pylist() == hi.tolist()
        assert src.column("keyLo").to_pylist() == lo.tolist()


def test_key_hashes_differ_for_different_keys_and_follow_the_bytes() -> None:
    pa = pytest.importorskip("pyarrow")
    from mqctl.pipeline.tasks import key_hashes

    keys = [
        "",
        "a",
        "a\x00",
        "uniq:7F0000010B5C1B6D1F0F5F3A2C3E0000",
        "uniq:7F0000010B5C1B6D1F0F5F3A2C3E0001",
        "born:127.0.0.1:40000/5/7",
        "born:127.0.0.1:40000/5/8",
        "x" * 300,
        "x" * 299 + "y",
        "ü" * 9,
    ]
    keys += [f"uniq:{i:032X}" for i in range(100_000)]
    arr = pa.array(keys)
    hi, lo = key_hashes(arr)
    pairs = list(zip(hi.tolist(), lo.tolist(), strict=True))
    assert len(set(pairs)) == len(keys)
    assert len(set(hi.tolist())) == len(keys) and len(set(lo.tolist())) == len(keys)
    # a slice of an array, and the same strings in another array, hash the same
    h2, l2 = key_hashes(arr.slice(3, 7))
    assert list(zip(h2.tolist(), l2.tolist(), strict=True)) == pairs[3:10]
    h3, l3 = key_hashes(pa.array(list(reversed(keys[:10]))))
    assert list(zip(h3.tolist(), l3.tolist(), strict=True))[::-1] == pairs[:10]
    alone = key_hashes(pa.array(["a"]))  # not padded to the longest key of its block
    assert (int(alone[0][0]), int(alone[1][0])) == pairs[1]


@pytest.mark.skipif(
    importlib.util.find_spec("mqctl.store._cwalker") is None, reason="the compiled walker is not built"
)
def test_key_hashes_of_the_compiled_walker_equal_numpys() -> None:
    # issue 32: with the compiled walker the hashes are computed in C; the dedupe of a job must not
    # depend on the walker (Spark's executors and the driver could differ)
    pa = pytest.importorskip("pyarrow")
    from walker_corpus import using

    from mqctl.pipeline.tasks import key_hashes

    rng = random.Random(32)
    keys = ["", "a", "a\x00", "x" * 7, "x" * 8, "x" * 9, "ü" * 9, "\x00" * 16]
    keys += [
        "".join(
            chr(rng.choice((0, 1, 65, 0xE9, 0x4E2D, rng.randrange(32, 0x3000))))
            for _ in range(rng.choice((0, 1, 7, 8, 9, 16, 17, rng.randrange(300))))
        )
        for _ in range(3000)
    ]
    arr = pa.array(keys)
    for part in (arr, arr.slice(1), arr.slice(5, 100), arr.slice(2999)):
        with using("c"):
            c = key_hashes(part)
        with using("numpy"):
            ref = key_hashes(part)
        assert c[0].tolist() == ref[0].tolist() and c[1].tolist() == ref[1].tolist()


def _packed(host: tuple[str, int]) -> tuple[bytes, int]:
    import ipaddress

    return ipaddress.ip_address(host[0]).packed, host[1]


def test_parquet_writer_cuts_row_groups_by_the_rows_not_the_batches(tmp_path) -> None:
    """The local engine and Spark's executors feed the same rows in different batches: the files must be
    the same bytes (row groups cut every ROW_GROUP_ROWS rows or ROW_GROUP_BYTES of `size`)."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    from mqctl.pipeline import outdir
    from mqctl.pipeline.outdir import tree_digest, write_parquet

    # bodies of 30 KB: several Parquet data pages per row group, which must not break where batches did
    table = pa.table(
        {
            "size": pa.array(list(range(1, 101)), pa.int32()),
            "body": [bytes([i % 251, 7]) * (i * 150) for i in range(100)],
        }
    )
    schema = table.schema
    for name, chunk in (("a", 7), ("b", 100), ("c", 1)):
        (tmp_path / name).mkdir()
        write_parquet(tmp_path / name / "p.parquet", schema, table.to_batches(max_chunksize=chunk), "size")
    a = (tmp_path / "a" / "p.parquet").read_bytes()
    assert a == (tmp_path / "b" / "p.parquet").read_bytes() == (tmp_path / "c" / "p.parquet").read_bytes()
    assert tree_digest(tmp_path / "a") == tree_digest(tmp_path / "b")
    # 64 MiB of `size` ends a row group as well as 32,768 rows
    old = outdir.ROW_GROUP_BYTES
    try:
        outdir.ROW_GROUP_BYTES = 100
        write_parquet(tmp_path / "a" / "p.parquet", schema, table.to_batches(max_chunksize=7), "size")
    finally:
        outdir.ROW_GROUP_BYTES = old
    groups = pq.ParquetFile(tmp_path / "a" / "p.parquet").metadata
    assert groups.num_row_groups > 1 and groups.row_group(0).num_rows == 14  # 1 + ... + 14 = 105 >= 100
    assert tree_digest(tmp_path / "a") != tree_digest(tmp_path / "b")


def test_properties_with_arrow_kernels_follow_decode_properties() -> None:
    """Salvage's vectorised properties give what `decode_properties` gives; a record that is not UTF-8 or
    repeats a key sends the batch to the per-record path, which is `decode_properties` itself."""
    pa = pytest.importorskip("pyarrow")
    from mqctl.pipeline.tasks import _properties, _properties_py

    raws = [
        b"KEYS\x01k1 k2\x02UNIQ_KEY\x01u1\x02TAGS\x01t\x02",
        b"",
        b"A\x01\x02B\x02",
        b"X\x01a\x01b\x02",
        b"UNIQ_KEY\x01\x02",
        b"Y\x01line\nbreak",
        b"K",  # a key without \x01: its value ""
        b"\x01v",  # an empty key
        b"a\x01\x01\x02\x02Z\x01z\x01",
        b"K\x01other record, same key",
    ]
    fast = _properties(pa, pa.array(raws, pa.binary()))
    slow = _properties_py(pa, raws)
    assert fast is not None
    for k in ("uniqKey", "keys", "tags", "properties"):
        assert fast[k].to_pylist() == slow[k].to_pylist(), k
    assert slow["properties"].to_pylist()[3] == [("X", "a\x01b")]
    assert slow["uniqKey"].to_pylist() == ["u1", *[None] * 9]
    assert fast["properties"].to_pylist()[6:9] == [[("K", "")], [("", "v")], [("a", "\x01"), ("Z", "z\x01")]]
    assert _properties(pa, pa.array([b"K\x01a\x02K\x01b\x02"], pa.binary())) is None
    assert _properties(pa, pa.array([b"A\x01a", b"K\x01a\x02B\x02K"], pa.binary())) is None
    assert _properties(pa, pa.array([b"K\x01\xff\x02"], pa.binary())) is None
    assert _properties_py(pa, [b"K\x01a\x02K\x01b\x02"])["properties"].to_pylist() == [[("K", "b")]]


def test_message_keys_with_arrow_kernels_follow_message_key(fleet: Fleet) -> None:
    """Pass 1's vectorised message keys are `message_key(property_value(...))` of every record."""
    pa = pytest.importorskip("pyarrow")
    from mqctl.pipeline.tasks import _message_keys

    for store in ("A", "B", "C"):
        for br in store_ranges(fleet.stores[store], range_size=700):
            pr = parse_task(br, extract=("properties", "hosts"))
            want = [
                message_key(property_value(raw, b"UNIQ_KEY"), born, ts, crc)
                for raw, born, ts, crc in zip(
                    pr.properties,
                    pr.born_hosts,
                    pr.born_timestamp.tolist(),
                    pr.body_crc.tolist(),
                    strict=True,
                )
            ]
            assert _message_keys(pa, pr).to_pylist() == want


@pytest.mark.skipif(
    importlib.util.find_spec("mqctl.store._cwalker") is None, reason="the compiled walker is not built"
)
def test_salvage_and_analyze_write_the_same_bytes_with_either_walker(
    fleet: Fleet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # issue 32: the compiled walker and the numpy walker, the local engine, several range sizes, its
    # ranges and row groups one at a time or in threads
    pytest.importorskip("pyarrow")
    from harness import tree_hash
    from walker_corpus import using

    from mqctl.pipeline import outdir
    from mqctl.pipeline.analyze import prepare_analyze, run_analyze
    from mqctl.pipeline.salvage import prepare, run_salvage

    stores = fleet.paths("A", "B", "C", "D", "E")
    hashes, docs = {}, {}
    monkeypatch.setattr(outdir, "ROW_GROUP_ROWS", 2)  # parts of several row groups: threads make them
    for name in ("c", "numpy"):
        for size in (200, FILE_SIZE):
            with using(name):
                for threads in ("1", "3"):
                    monkeypatch.setenv("MQCTL_LOCAL_THREADS", threads)
                    out = tmp_path / f"salvage-{name}-{size}-{threads}"
                    doc = run_salvage(None, prepare(stores, range_size=size), out, show_progress=False)
                    hashes[name, size, threads] = tree_hash(out, metadata=False)
                    docs[name, size, threads] = {k: v for k, v in doc.items() if k != "out"}
                a_out = tmp_path / f"analyze-{name}-{size}"
                a_doc = run_analyze(
                    None, prepare_analyze(stores, range_size=size), a_out, show_progress=False
                )
                hashes["analyze", name, size] = tree_hash(a_out, metadata=False)
                docs["analyze", name, size] = {k: v for k, v in a_doc.items() if k != "out"}
    assert docs["c", 200, "1"]["messages"] > 5
    for size in (200, FILE_SIZE):
        assert hashes["c", size, "1"] == hashes["numpy", size, "1"] == hashes["c", 200, "1"]
        assert hashes["c", size, "3"] == hashes["numpy", size, "3"] == hashes["c", 200, "1"]
        assert (
            docs["c", size, "1"]
            == docs["numpy", size, "1"]
            == docs["c", size, "3"]
            == docs["numpy", size, "3"]
        )
        assert hashes["analyze", "c", size] == hashes["analyze", "numpy", size]
        assert docs["analyze", "c", size] == docs["analyze", "numpy", size]
