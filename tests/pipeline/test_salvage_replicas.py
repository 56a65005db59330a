"""`recover salvage` lists every replica of the plan in summary.json (issue 12), those with nothing to read
too: a zero-filled commitlog, an empty commitlog directory, no commitlog directory, a lone 0-byte file
(RocketMQ deletes it when it loads the commitlog), and a broker set whose stores are all empty."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pipeline_fixtures import FILE_SIZE

from mqctl.store.build import build_store
from mqctl.store.commitlog import COMMITLOG_DIR, file_name
from mqctl.store.epochfile import EpochEntry, write_epoch_file
from mqctl.store.identity import BrokerIdentity, write_identity


def stores(root: Path) -> dict[str, Path]:
    s = {
        "A": build_store(
            root / "A", history=[(0, 0), (1, 1000)], max_offset=1500, file_size=FILE_SIZE, broker_id=1
        ),
        "B": build_store(
            root / "B",
            history=[(0, 0), (2, 1000)],
            max_offset=1300,
            file_size=FILE_SIZE,
            broker_id=2,
            abort=True,
        ),
        "zeros": build_store(root / "zeros", history=[], max_offset=0, file_size=FILE_SIZE, broker_id=3),
    }
    for name, bid in (("nofiles", 4), ("nodir", 5), ("zerobytes", 6)):
        p = root / name
        p.mkdir()
        write_identity(p, BrokerIdentity("cluster-a", "broker-set-a", bid))
        write_epoch_file(p, [EpochEntry(0, 0)])
        s[name] = p
    (s["nofiles"] / COMMITLOG_DIR).mkdir()
    (s["zerobytes"] / COMMITLOG_DIR).mkdir()
    (s["zerobytes"] / COMMITLOG_DIR / file_name(0)).write_bytes(b"")
    s["lone"] = build_store(root / "lone", history=[], max_offset=0, file_size=FILE_SIZE, broker="broker-b")
    return s


EMPTY = ("zeros", "nofiles", "nodir", "zerobytes")


def test_prepare_lists_every_replica(tmp_path: Path) -> None:
    from mqctl.pipeline.salvage import prepare

    s = stores(tmp_path)
    inp = prepare([str(p) for p in s.values()], range_size=1024)
    assert inp.not_salvaged == []
    b, a = inp.sets  # sorted by (clusterName, brokerName)
    assert (a["brokerName"], a["source"], a["comparedFrom"], a["comparedTo"]) == (
        "broker-set-a",
        str(s["A"]),
        0,
        1500,
    )
    rows = {Path(r["store"]).name: r for r in a["replicas"]}
    assert set(rows) == {"A", "B", *EMPTY}
    assert (rows["B"]["truncateTo"], rows["B"]["bytesRead"]) == (1000, FILE_SIZE - 1000)
    for name in EMPTY:
        assert {k: rows[name][k] for k in ("state", "truncateTo", "maxOffset")} == {
            "state": "empty",
            "truncateTo": 0,
            "maxOffset": 0,
        }, name
    assert rows["zeros"]["bytesRead"] == FILE_SIZE  # read, nothing found
    assert [rows[n]["bytesRead"] for n in ("nofiles", "nodir", "zerobytes")] == [0, 0, 0]
    assert (b["brokerName"], b["source"], b["comparedFrom"], b["comparedTo"]) == (
        "broker-b",
        None,
        None,
        None,
    )
    assert [(Path(r["store"]).name, r["truncateTo"], r["bytesRead"]) for r in b["replicas"]] == [
        ("lone", None, 0)
    ]


@pytest.mark.spark
def test_summary_lists_every_replica(spark, cli, tmp_path: Path) -> None:
    from mqctl.pipeline.salvage import prepare, run_salvage

    s = stores(tmp_path / "stores")
    out = tmp_path / "out"
    doc = run_salvage(spark, prepare([str(p) for p in s.values()]), out, show_progress=False)
    summary = json.loads((out / "summary.json").read_text())
    assert summary == {k: v for k, v in doc.items() if k not in ("out", "dryRun", "backup")}
    b, a = summary["brokerSets"]
    rows = {Path(r["store"]).name: r for r in a["replicas"]}
    assert set(rows) == {"A", "B", *EMPTY}
    assert (rows["B"]["recordsPastTruncateTo"], rows["B"]["salvaged"]) == (3, 3)
    assert a["messages"] == summary["messages"] == 3
    counts = (
        "recordsPastTruncateTo",
        "alreadyOnSource",
        "copiesOnOtherReplicas",
        "salvaged",
        "salvagedBytes",
    )
    for name in EMPTY:
        assert [rows[name][k] for k in counts] == [0] * len(counts), name
    assert (b["source"], b["messages"], b["topics"]) == (None, 0, [])
    assert [Path(r["store"]).name for r in b["replicas"]] == ["lone"]
    assert summary["notSalvaged"] == [] and summary["problems"] == []
    r = cli("recover", "salvage", *(str(p) for p in s.values()), "--out", str(tmp_path / "dry"), "--dry-run")
    assert r.code == 0, r.err
    assert "cluster-a/broker-b: every store is empty, nothing to salvage" in r.out
