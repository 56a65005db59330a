"""check and plan offline: alignment with byte counts, running brokers, identity and epoch files."""

from __future__ import annotations

from pathlib import Path

from harness import run_cli, tree_hash
from upgrade_fixtures import LockHolder

from mqctl.recover.inspect import inspect_store
from mqctl.store.build import build_store
from mqctl.upgrade.align import align


def stores(tmp_path: Path, *specs: tuple[list[tuple[int, int]], int]) -> list[Path]:
    return [
        build_store(tmp_path / f"s{i}", history=h, max_offset=m, broker_id=None)
        for i, (h, m) in enumerate(specs)
    ]


def check(*paths: Path, extra: tuple[str, ...] = ()) -> tuple[int, dict]:
    args = ["upgrade", "check", *[x for p in paths for x in ("--store", str(p))], "-o", "json", *extra]
    r = run_cli(*args)
    return r.code, r.json()


def by(doc: dict, name: str) -> list[dict]:
    return [c for c in doc["checks"] if c["check"] == name]


def test_aligned_stores_pass_and_check_writes_nothing(tmp_path: Path) -> None:
    a, b = stores(tmp_path, ([(1, 0), (2, 3000)], 6000), ([(1, 0), (2, 3000)], 6000))
    before = tree_hash(tmp_path)
    code, doc = check(a, b)
    assert code == 0, doc
    assert doc["ok"] and doc["next"] == 6 and doc["phase"] == "stop-brokers"
    [al] = by(doc, "aligned")
    assert al["status"] == "ok" and "max offset 6000 on every store" in al["detail"]
    assert [c["status"] for c in by(doc, "stopped")] == ["ok", "ok"]
    assert by(doc, "controller")[0]["status"] == "skip"
    r = run_cli("upgrade", "plan", "--store", str(a), "--store", str(b))
    assert r.code == 0 and "next: step 6" in r.out
    assert tree_hash(tmp_path) == before


def test_slave_behind_reported_with_byte_counts(tmp_path: Path) -> None:
    a, b = stores(tmp_path, ([(1, 0), (2, 3000)], 6000), ([(1, 0), (2, 3000)], 4500))
    code, doc = check(a, b)
    assert code == 7 and not doc["ok"]
    [al] = by(doc, "aligned")
    assert al["status"] == "FAIL" and f"{a} 6000, {b} 4500" in al["detail"]
    text = "\n".join(al["lines"])
    assert f"{a} is 1500 bytes ahead of {b}" in text
    assert f"if {b} starts as master: {a} loses 1500 bytes (offsets 4500-6000)" in text
    assert f"if {a} starts as master: no store loses data" in text
    r = run_cli("upgrade", "check", "--store", str(a), "--store", str(b))
    assert r.code == 7 and "FAIL aligned" in r.out and "mqctl: error: 1 check(s) failed" in r.err


def test_diverged_stores_reported_with_byte_counts(tmp_path: Path) -> None:
    # both took epoch 2 at different offsets: bytes differ from 3000 on (a split brain)
    a, b = stores(tmp_path, ([(1, 0), (2, 3000)], 6000), ([(1, 0), (2, 4000)], 5000))
    al = align([inspect_store(a), inspect_store(b)])
    assert not al.aligned
    # records of epoch 1 are identical up to 3000, then the bodies differ (seeded by epoch)
    p = al.prefixes[(str(a), str(b))]
    assert 3000 <= p < 3100
    assert al.losses[str(a)][str(b)] == 5000 - p
    assert al.losses[str(b)][str(a)] == 6000 - p
    assert al.best == str(a)
    code, doc = check(a, b)
    text = "\n".join(by(doc, "aligned")[0]["lines"])
    assert code == 7 and f"identical up to offset {p}, then their bytes differ ({5000 - p} bytes" in text


def test_same_length_different_tail_is_not_aligned(tmp_path: Path) -> None:
    a, b = stores(tmp_path, ([(1, 0), (2, 3000)], 6000), ([(1, 0), (3, 3000)], 6000))
    al = align([inspect_store(a), inspect_store(b)])
    assert not al.aligned
    assert al.losses[str(a)][str(b)] == 6000 - al.prefixes[(str(a), str(b))] > 0


def test_running_broker_fails_check_before_clear(tmp_path: Path) -> None:
    a, b = stores(tmp_path, ([(1, 0)], 3000), ([(1, 0)], 3000))
    with LockHolder(b) as h:
        code, doc = check(a, b)
        assert code == 7
        st = {c["subject"]: c for c in by(doc, "stopped")}
        assert st[str(a)]["status"] == "ok"
        assert st[str(b)]["status"] == "FAIL" and f"process {h.proc.pid}" in st[str(b)]["detail"]
        assert "stop the slaves first" in st[str(b)]["fix"]
        plan = run_cli("upgrade", "plan", "--store", str(a), "--store", str(b), "-o", "json").json()
        status = {s["id"]: s["status"] for s in plan["steps"]}
        assert status["stop-slaves"] == "pending" and status["stop-master"] == "done"
        assert plan["next"] == 4


def test_not_a_store_fails(tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    code, doc = check(tmp_path / "x")
    assert code == 7 and by(doc, "store")[0]["status"] == "FAIL"


def test_unreachable_controller_in_controller_phase(tmp_path: Path) -> None:
    from mqctl.localgroup import free_port

    a, b = stores(tmp_path, ([(1, 0)], 3000), ([(1, 0)], 3000))
    addr = f"127.0.0.1:{free_port()}"
    plan = run_cli("upgrade", "plan", "--store", str(a), "--store", str(b), "-a", addr, "-o", "json").json()
    status = {s["id"]: s["status"] for s in plan["steps"]}
    assert status["stop-controllers"] == "done" and status["clear-controller-data"] == "unknown"
    assert plan["next"] == 2 and plan["controller"]["reachable"] is False
    code, doc = check(a, b, extra=("-a", addr))
    assert code == 0 and doc["phase"] == "controller"
    assert by(doc, "controller")[0]["status"] == "ok"


def test_abort_pid_alive_is_a_warning_not_a_refusal(tmp_path: Path) -> None:
    (tmp_path / "other").mkdir()
    with LockHolder(tmp_path / "other") as other:
        a = build_store(
            tmp_path / "a", history=[(1, 0)], max_offset=3000, broker_id=None, abort=str(other.proc.pid)
        )
        code, doc = check(a)
        assert code == 0
        [st] = by(doc, "stopped")
        assert st["status"] == "warn"
        assert f"abort names pid {other.proc.pid}, which is alive" in st["lines"][0]
        assert run_cli("upgrade", "clear-epochs", "--store", str(a), "--dry-run").code == 0
