"""Salvage and analyze on a real local Spark (one session for the run) over the fleet of
pipeline_fixtures.build_fleet: the exact set of salvaged messages, reruns, refusals, analysis."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from harness import tree_hash
from pipeline_fixtures import BORN6, FILE_SIZE, T_LONG, Fleet

pytestmark = pytest.mark.spark

# label -> (uniqKey, topic, crcOk, copies): what the source B lacks of A's and C's tails, plus B's own
# tail past its max offset. Not there: a0 (B holds its retry, same UNIQ_KEY), a3 (B holds a copy
# without a key: same born host, born time, body), a6 (structurally damaged), C's copies of a1/a2.
EXPECTED = {
    "a1": ("K-a1", "orders", True, 2),
    "a2": (None, "orders", True, 2),
    "a4": ("K-a4", T_LONG, True, 1),
    "a5": ("K-a5", "orders", False, 1),
    "a7": ("K-a7", "big", True, 1),
    **{f"a{i}": (f"K-a{i}", "orders", True, 1) for i in range(8, 13)},
    "b4": ("K-b4", "orders", False, 1),
}


def salvaged(spark, out: Path) -> dict[tuple[str, int], dict]:
    rows = spark.read.parquet(str(out / "messages")).collect()
    return {(Path(r["store"]).name, r["physicalOffset"]): r.asDict() for r in rows}


def expected_keys(fleet: Fleet) -> set[tuple[str, int]]:
    return {("B" if k.startswith("b") else "A", fleet.offsets[k]) for k in EXPECTED}


def test_salvage_exact_set_independent_of_range_size(
    spark, fleet: Fleet, tmp_path: Path, monkeypatch
) -> None:
    from mqctl.pipeline import salvage as salvage_mod
    from mqctl.pipeline.salvage import prepare, run_salvage

    stores = fleet.paths("A", "B", "C", "D", "E")
    doc = run_salvage(spark, prepare(stores, range_size=200), tmp_path / "small", show_progress=False)
    rows = salvaged(spark, tmp_path / "small")
    assert set(rows) == expected_keys(fleet)
    for label, (uniq, topic, crc_ok, copies) in EXPECTED.items():
        m = fleet.messages[label]
        r = rows[("B" if label.startswith("b") else "A", fleet.offsets[label])]
        assert (r["uniqKey"], r["topic"], r["crcOk"], r["copies"]) == (uniq, topic, crc_ok, copies), label
        assert (r["clusterName"], r["brokerName"]) == ("cluster-a", "broker-set-a")
        assert r["epoch"] == (2 if label.startswith("b") else 1)
        assert r["brokerId"] == (2 if label.startswith("b") else 1)
        assert (r["queueId"], r["queueOffset"], r["bornTimestamp"]) == (
            m.queue_id,
            m.queue_offset,
            m.born_timestamp,
        )
        assert r["properties"] == dict(m.properties)
        if crc_ok:
            assert bytes(r["body"]) == m.body
    a2 = rows[("A", fleet.offsets["a2"])]
    assert a2["bornHost"] == f"[{BORN6[0]}]:{BORN6[1]}" and a2["storeHost"] == "[fd00::100]:10911"
    assert a2["messageKey"] == f"born:[{BORN6[0]}]:{BORN6[1]}/5002/{a2['bodyCrc']}"
    a4 = rows[("A", fleet.offsets["a4"])]
    assert (a4["version"], a4["keys"], a4["tags"]) == (2, "order-4 order-44", "tagA")

    s = json.loads((tmp_path / "small" / "summary.json").read_text())
    assert s == {k: v for k, v in doc.items() if k not in ("out", "dryRun", "backup")}
    assert s["messages"] == len(EXPECTED)
    (set_a,) = [x for x in s["brokerSets"] if x["brokerName"] == "broker-set-a"]
    reps = {Path(r["store"]).name: r for r in set_a["replicas"]}
    ra = reps["A"]
    assert (ra["recordsPastTruncateTo"], ra["alreadyOnSource"], ra["salvaged"]) == (12, 2, 10)
    assert (
        reps["C"]["recordsPastTruncateTo"],
        reps["C"]["alreadyOnSource"],
        reps["C"]["copiesOnOtherReplicas"],
        reps["C"]["salvaged"],
    ) == (3, 1, 2, 0)
    assert (reps["B"]["truncateTo"], reps["B"]["salvaged"]) == (fleet.offsets["b4"], 1)
    assert {t["topic"]: t["messages"] for t in set_a["topics"]} == {"orders": 9, "big": 1, T_LONG: 1}
    (set_b,) = [x for x in s["brokerSets"] if x["brokerName"] == "broker-set-b"]
    assert set_b["messages"] == 0
    kinds = [(Path(p["store"]).name, p["offset"], p["kind"]) for p in s["problems"]]
    assert kinds == [
        ("A", fleet.offsets["a5"], "crc"),
        ("A", fleet.offsets["a6"], "corrupt"),
        ("B", fleet.offsets["b4"], "crc"),
    ]
    a6 = s["problems"][1]
    assert a6["file"].endswith("/A/commitlog/00000000000000000000") and a6["position"] == fleet.offsets["a6"]
    assert s["skippedBytes"] == ra["skippedBytes"] == a6["length"] > 0 and reps["C"]["skippedBytes"] == 0

    # one range per file: the same rows, byte for byte
    run_salvage(spark, prepare(stores, range_size=FILE_SIZE), tmp_path / "big", show_progress=False)
    assert tree_hash(tmp_path / "big", metadata=False) == tree_hash(tmp_path / "small", metadata=False)
    # the local engine (no JVM): the same files, byte for byte, and the same summary
    local = run_salvage(None, prepare(stores, range_size=300), tmp_path / "local", show_progress=False)
    assert tree_hash(tmp_path / "local", metadata=False) == tree_hash(tmp_path / "small", metadata=False)
    assert {k: v for k, v in local.items() if k != "out"} == {k: v for k, v in doc.items() if k != "out"}

    # more source keys than BROADCAST_KEYS: the shuffle join path (no automatic broadcast either) gives
    # the same files
    monkeypatch.setattr(salvage_mod, "BROADCAST_KEYS", 0)
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
    try:
        run_salvage(spark, prepare(stores, range_size=FILE_SIZE), tmp_path / "joined", show_progress=False)
    finally:
        spark.conf.unset("spark.sql.autoBroadcastJoinThreshold")
        monkeypatch.undo()
    assert tree_hash(tmp_path / "joined", metadata=False) == tree_hash(tmp_path / "small", metadata=False)

    # comparing with the whole source changes nothing here (no duplicate before truncateTo)
    full = run_salvage(
        spark,
        prepare(stores, range_size=FILE_SIZE, full_source=True),
        None,
        dry_run=True,
        show_progress=False,
    )
    assert full["messages"] == len(EXPECTED) and full["dryRun"] is True
    assert [x["comparedFrom"] for x in full["brokerSets"]] == [0, 0]


def test_salvage_cli_rerun_backup_refusals(spark, fleet: Fleet, cli, tmp_path: Path) -> None:
    out = tmp_path / "salvage"
    stores = fleet.paths("A", "B", "C")
    r = cli("recover", "salvage", *stores, "--out", str(out), "--range-size", "512")
    assert r.code == 0, r.err
    assert f"wrote {len(EXPECTED)} messages" in r.out and "broker-set-a" in r.out
    assert "recover salvage on engine local (" in r.err  # auto, a small fleet: no JVM
    before = tree_hash(out, metadata=False)
    # a previous output is replaced only with --overwrite
    r = cli("recover", "salvage", *stores, "--out", str(out))
    assert r.code == 2 and "holds a previous salvage; add --overwrite" in r.err
    r = cli(
        "recover",
        "salvage",
        *stores,
        "--out",
        str(out),
        "--range-size",
        "1K",
        "-o",
        "json",
        "--overwrite",
        "-q",
    )
    assert r.code == 0, r.err
    assert "engine" not in r.err
    doc = r.json()
    assert doc["backup"] is None and tree_hash(out, metadata=False) == before, "a rerun gives the same files"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["salvage"], "nothing written beside DIR"

    # dry run: nothing written anywhere
    r = cli("recover", "salvage", *stores, "--out", str(tmp_path / "dry"), "--dry-run")
    assert r.code == 0, r.err
    assert f"dry run: would write {len(EXPECTED)} messages" in r.out
    assert not (tmp_path / "dry").exists()

    # a different result never overwrites the previous one: it moves to a backup inside DIR first
    r = cli("recover", "salvage", *fleet.paths("A", "B"), "--out", str(out), "-o", "json", "--overwrite")
    assert r.code == 0, r.err
    backup = Path(r.json()["backup"])
    assert backup.parent == out and backup.name.startswith(".mqctl-backup-")
    assert json.loads((backup / "summary.json").read_text())["digest"] == doc["digest"]
    assert r.json()["digest"] != doc["digest"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["salvage"], "nothing written beside DIR"

    # refusals: a foreign directory (even with --overwrite), no parent, a bad size, a bad engine
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("mine")
    for extra in ((), ("--overwrite",)):
        r = cli("recover", "salvage", *stores, "--out", str(foreign), *extra)
        assert r.code == 2 and "not empty and not the output of a previous salvage" in r.err
    assert [p.name for p in foreign.iterdir()] == ["keep.txt"]
    r = cli("recover", "salvage", *stores, "--out", str(tmp_path / "no" / "such"))
    assert r.code == 2 and "no such directory" in r.err and not (tmp_path / "no").exists()
    r = cli("recover", "salvage", *stores, "--out", str(out), "--range-size", "lots")
    assert r.code == 2 and "--range-size" in r.err
    r = cli("recover", "salvage", *stores, "--out", str(out), "--engine", "fast")
    assert r.code == 2 and "--engine" in r.err


def test_analyze_cli(spark, fleet: Fleet, cli, tmp_path: Path) -> None:
    from mqctl.store.commitlog import COMMITLOG_DIR, CommitLog, encode_record

    out = tmp_path / "analysis"
    r = cli(
        "analyze",
        "commitlog",
        *fleet.paths("A", "C"),
        str(tmp_path / "nothing"),
        "--range-size",
        "300",
        "--out",
        str(out),
        "-o",
        "json",
        "--engine",
        "spark",
    )
    assert r.code == 0, r.err
    doc = r.json()
    assert doc["notAnalyzed"] == [{"store": str(tmp_path / "nothing"), "reason": "no commitlog directory"}]
    # expected per (store, topic, queue), from C's sequential read and A's written messages (a6 unreadable)
    want: dict[tuple[str, str, int], list] = {}
    for r_ in CommitLog(fleet.stores["C"] / COMMITLOG_DIR).iter_records():
        want.setdefault(("C", r_.topic, r_.queue_id), []).append(
            (r_.offset, r_.size, r_.store_timestamp, r_.queue_offset)
        )
    for r_ in CommitLog(fleet.stores["A"] / COMMITLOG_DIR).iter_records():
        if r_.offset >= 1000:
            break
        want.setdefault(("A", r_.topic, r_.queue_id), []).append(
            (r_.offset, r_.size, r_.store_timestamp, r_.queue_offset)
        )
    for k in fleet.offsets:
        if k.startswith("a") and k != "a6":
            m = fleet.messages[k]
            want.setdefault(("A", m.topic, m.queue_id), []).append(
                (fleet.offsets[k], len(encode_record(m, 0)), m.store_timestamp, m.queue_offset)
            )
    got = {(Path(q["store"]).name, q["topic"], q["queueId"]): q for q in doc["queues"]}
    assert set(got) == set(want)
    for key, recs in want.items():
        q = got[key]
        assert (q["messages"], q["bytes"]) == (len(recs), sum(x[1] for x in recs)), key
        assert (q["firstStoreTimestamp"], q["lastStoreTimestamp"]) == (
            min(x[2] for x in recs),
            max(x[2] for x in recs),
        ), key
        assert (q["minQueueOffset"], q["maxQueueOffset"]) == (
            min(x[3] for x in recs),
            max(x[3] for x in recs),
        ), key
        assert (q["minPhysicalOffset"], q["maxPhysicalOffset"]) == (
            min(x[0] for x in recs),
            max(x[0] for x in recs),
        )
        assert q["crcErrors"] == (1 if key == ("A", "orders", 1) else 0), key
    probs = [(Path(p["store"]).name, Path(p["file"]).name, p["position"], p["kind"]) for p in doc["problems"]]
    assert probs == [
        ("A", "00000000000000000000", fleet.offsets["a5"], "crc"),
        ("A", "00000000000000000000", fleet.offsets["a6"], "corrupt"),
    ]
    assert {s["store"]: s["problems"] for s in doc["stores"]} == {
        str(fleet.stores["A"]): 2,
        str(fleet.stores["C"]): 0,
    }
    a6 = doc["problems"][1]
    assert [s["skippedBytes"] for s in doc["stores"]] == [a6["length"], 0]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["kind"] == "mqctl-analyze" and summary["queues"] == doc["queues"]
    assert sorted(p.name for p in out.iterdir()) == ["problems", "queues", "summary.json"]
    assert spark.read.parquet(str(out / "queues")).count() == len(want)
    # the local engine: the same files and document
    r = cli(
        "analyze",
        "commitlog",
        *fleet.paths("A", "C"),
        str(tmp_path / "nothing"),
        "--out",
        str(tmp_path / "local"),
        "-o",
        "json",
        "--engine",
        "local",
    )
    assert r.code == 0, r.err
    assert tree_hash(tmp_path / "local", metadata=False) == tree_hash(out, metadata=False)
    assert {k: v for k, v in r.json().items() if k != "out"} == {k: v for k, v in doc.items() if k != "out"}

    r = cli("analyze", "commitlog", str(fleet.stores["A"]))
    assert r.code == 0, r.err
    assert "damaged records" in r.out and "PHYSICALOFFSET field says" in r.out


def test_salvage_in_a_separate_process_is_the_same_result(spark, fleet: Fleet, tmp_path: Path) -> None:
    """`mqctl recover salvage` as its own process (the local engine, --quiet: stderr stays empty) finds
    the result the in-process Spark run wrote and moves nothing to a backup."""
    import os
    import subprocess
    import sys

    from mqctl.pipeline.salvage import prepare, run_salvage

    out = tmp_path / "salvage"
    stores = fleet.paths("A", "B", "C")
    first = run_salvage(spark, prepare(stores), out, show_progress=False)
    cmd = [
        str(Path(sys.executable).with_name("mqctl")),
        "recover",
        "salvage",
        *stores,
        "--out",
        str(out),
        "-o",
        "json",
        "--overwrite",
        "--quiet",
    ]
    second = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=dict(os.environ))
    assert second.returncode == 0 and second.stderr == "", second.stderr
    b = json.loads(second.stdout)
    assert b["backup"] is None and b["digest"] == first["digest"]


def test_partition_values_are_where_sparks_hash_sends_them(spark) -> None:
    """The writer tasks' partition values are found without a Spark job (`spark_hash_long`): its hash is
    Spark's own hash() of a bigint, extremes and negatives included, and each value lands in its
    partition under `repartition(n, col)`."""
    from pyspark.sql import functions as F

    from mqctl.pipeline.salvage import _SparkJob, spark_hash_long

    values = [*range(-300, 300), 2**31 - 1, 2**31, -(2**31) - 1, 2**63 - 1, -(2**63), 123456789012345]
    df = spark.createDataFrame([(v,) for v in values], "v long")
    assert [r["h"] for r in df.select(F.hash("v").alias("h")).collect()] == [
        spark_hash_long(v) for v in values
    ]
    for n in (1, 2, 3, 8, 13):
        want = _SparkJob._partition_values(None, n)  # type: ignore[arg-type]  # uses no session
        got = (
            spark.createDataFrame([(v,) for v in want], "v long")
            .repartition(n, "v")
            .select("v", F.spark_partition_id().alias("p"))
            .collect()
        )
        assert sorted((r["p"], r["v"]) for r in got) == list(enumerate(want))
