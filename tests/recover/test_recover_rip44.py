"""The six truncation cases of RIP-44's example (seed 001), built with the writers, checked through the CLI:
compare's consistent point, plan's source / truncateTo / bytesToDrop, then truncate and re-compare."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqctl.recover.inspect import inspect_store
from mqctl.store.build import build_store
from mqctl.store.epochfile import EpochEntry, read_epoch_file

# (name, {store: (history, maxOffset)}, source, {replica: truncateTo}, consistent point of A and B)
CASES = [
    # (1) A, old master, wrote epoch 0 to 1000; B had 900 and became master of epoch 1 at 900.
    ("1", {"A": ([(0, 0)], 1000), "B": ([(0, 0), (1, 900)], 1200)}, "B", {"A": 900}, 900),
    # (2) A lost 900-1000 (async flush); B had 1000 and leads epoch 1 from 1000: A loses nothing.
    ("2", {"A": ([(0, 0)], 900), "B": ([(0, 0), (1, 1000)], 1200)}, "B", {"A": 900}, 900),
    # (3) epoch 1 ends at 1200 in both: no real truncation.
    (
        "3",
        {"A": ([(0, 0), (1, 900)], 1200), "B": ([(0, 0), (1, 900), (2, 1200)], 1500)},
        "B",
        {"A": 1200},
        1200,
    ),
    # (4) A led epochs 0 (to 1000) and 1; B had 900 of epoch 0 and leads epoch 2 from 900.
    ("4", {"A": ([(0, 0), (1, 1000)], 1200), "B": ([(0, 0), (2, 900)], 1100)}, "B", {"A": 900}, 900),
    # (5) A leads epoch 2 from 800; B and C (epoch 1 from 500) both cut back to 800.
    (
        "5",
        {
            "A": ([(0, 0), (1, 500), (2, 800)], 1000),
            "B": ([(0, 0), (1, 500)], 900),
            "C": ([(0, 0), (1, 500)], 950),
        },
        "A",
        {"B": 800, "C": 800},
        800,
    ),
    # (6) epoch 0 ends at 1000 in B (epoch 1 from 1000) and 1100 in A (epoch 2 from 1100): min is 1000.
    ("6", {"A": ([(0, 0), (2, 1100)], 1300), "B": ([(0, 0), (1, 1000)], 1200)}, "A", {"B": 1000}, 1000),
]


def _build(tmp_path: Path, stores: dict) -> dict[str, str]:
    paths = {}
    for i, (name, (hist, mx)) in enumerate(sorted(stores.items()), 1):
        p = tmp_path / name
        build_store(p, history=hist, max_offset=mx, broker_id=i, abort=True)
        paths[name] = str(p)
    return paths


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_rip44_case(tmp_path: Path, cli, case) -> None:
    _, stores, source, truncs, cp_ab = case
    paths = _build(tmp_path, stores)

    c = cli("recover", "compare", paths["A"], paths["B"], "-o", "json")
    assert c.code == 0, c.err
    doc = c.json()
    (ha, ma), (hb, mb) = stores["A"], stores["B"]
    assert doc["sameBrokerSet"] is True and doc["reasons"] == []
    assert doc["consistentPoint"] == cp_ab
    assert (doc["aBytesBeyond"], doc["bBytesBeyond"]) == (ma - cp_ab, mb - cp_ab)
    assert (doc["aLastEpoch"], doc["aMaxOffset"], doc["bLastEpoch"], doc["bMaxOffset"]) == (
        ha[-1][0],
        ma,
        hb[-1][0],
        mb,
    )
    assert doc["fresher"] == paths[source] or source not in ("A", "B")
    assert doc["splitBrain"] == [] and doc["warnings"] == []

    p = cli("recover", "plan", *paths.values(), "-o", "json")
    assert p.code == 0, p.err
    plan = p.json()
    assert plan["unmatched"] == []
    assert len(plan["brokerSets"]) == 1
    s = plan["brokerSets"][0]
    assert (s["clusterName"], s["brokerName"], s["source"], s["sourceClean"]) == (
        "cluster-a",
        "broker-set-a",
        paths[source],
        False,
    )
    assert s["warnings"] == [
        f"no clean store: {paths[source]} is the freshest; confirm it and run "
        f"`mqctl recover mark-clean {paths[source]}` before restarting"
    ]
    rows = {r["store"]: r for r in s["replicas"]}
    assert s["replicas"][0]["store"] == paths[source]
    assert rows[paths[source]]["bytesToDrop"] == 0
    assert rows[paths[source]]["truncateTo"] == stores[source][1]
    for name, to in truncs.items():
        r = rows[paths[name]]
        hist, mx = stores[name]
        assert r == {
            "store": paths[name],
            "brokerId": sorted(stores).index(name) + 1,
            "state": "dirty",
            "lastEpoch": hist[-1][0],
            "maxOffset": mx,
            "truncateTo": to,
            "bytesToDrop": mx - to,
        }

    # apply: every replica truncated to its point, its epoch file corrected like a slave does
    for name, to in truncs.items():
        hist, mx = stores[name]
        t = cli(
            "recover",
            "truncate",
            paths[name],
            "--to",
            str(to),
            "--yes",
            "-o",
            "json",
            "--backup-dir",
            str(tmp_path / f"bk-{name}"),
        )
        assert t.code == 0, t.err
        td = t.json()
        expect_epochs = [f"{e}-{s}" for e, s in hist if s < to]
        if mx == to and expect_epochs == [f"{e}-{s}" for e, s in hist]:
            assert td["files"] == [] and td["backupDir"] is None
        else:
            assert td["bytesToDrop"] == mx - to
            assert td["epochsAfter"] == expect_epochs
            assert td["backupDir"] == str(tmp_path / f"bk-{name}")
        rep = inspect_store(paths[name], deep=True)
        assert rep.max_offset == to
        assert rep.epochs == [EpochEntry(e, s) for e, s in hist if s < to]
        assert read_epoch_file(paths[name]).entries == rep.epochs
        # now the replica is a prefix of the source: nothing beyond the consistent point
        c2 = cli("recover", "compare", paths[source], paths[name], "-o", "json").json()
        assert c2["consistentPoint"] == to and c2["bBytesBeyond"] == 0


def test_epoch_start_beyond_max_offset(tmp_path: Path, cli) -> None:
    """A store whose last epoch entry starts past its data (the tail it had when the entry was written was
    lost, RIP-44 case (2)'s async flush): RocketMQ leaves that epoch's end at Long.MAX_VALUE, but no store
    holds bytes past its own max offset, so the consistent point, bytesBeyond, truncateTo and bytesToDrop
    stop there, and no split brain is claimed for an epoch the store holds nothing of."""
    a = build_store(tmp_path / "a", history=[(1, 0), (2, 5000)], max_offset=6000, broker_id=1, abort=True)
    b = build_store(tmp_path / "b", history=[(1, 0), (2, 5000)], max_offset=4000, broker_id=2, abort=True)
    d = cli("recover", "compare", str(a), str(b), "-o", "json").json()
    assert (d["consistentPoint"], d["aBytesBeyond"], d["bBytesBeyond"]) == (4000, 2000, 0)
    assert d["sameBrokerSet"] is True and d["splitBrain"] == [] and d["warnings"] == []
    rows = {
        r["store"]: r
        for r in cli("recover", "plan", str(a), str(b), "-o", "json").json()["brokerSets"][0]["replicas"]
    }
    assert (rows[str(b)]["truncateTo"], rows[str(b)]["bytesToDrop"]) == (4000, 0)
    t = cli("recover", "truncate", str(b), "--to", str(rows[str(b)]["truncateTo"]), "--dry-run")
    assert t.code == 0, t.err

    # the clean source lost its tail: the dirty replica's bytes past the source's end are dropped
    c = build_store(tmp_path / "c", history=[(1, 0), (2, 5000)], max_offset=4000, broker_id=3, clean=True)
    p = cli("recover", "plan", str(c), str(a), "-o", "json").json()["brokerSets"][0]
    assert p["source"] == str(c)
    rows = {r["store"]: r for r in p["replicas"]}
    assert (rows[str(a)]["truncateTo"], rows[str(a)]["bytesToDrop"]) == (4000, 2000)

    # epoch 2 started at 5000 in b (which holds nothing of it) and at 4500 in e: no split brain
    e = build_store(tmp_path / "e", history=[(1, 0), (2, 4500)], max_offset=6000, broker_id=4, abort=True)
    d = cli("recover", "compare", str(b), str(e), "-o", "json").json()
    assert (d["consistentPoint"], d["aBytesBeyond"], d["bBytesBeyond"]) == (4000, 0, 2000)
    assert d["splitBrain"] == [] and d["warnings"] == []
