"""Pure parts of the simulator: seeded fault plans (reproducible, within their limits) and the invariant
checks (each one must fail on a history that breaks it)."""

from __future__ import annotations

import pytest

from mqctl.sim.faults import LEADER, MASTER, plan_faults
from mqctl.sim.invariants import (
    AckedMessage,
    History,
    LogView,
    check_acked,
    check_epoch_files,
    check_epochs_monotonic,
    check_one_master,
    check_prefix,
    check_state_hashes,
)


@pytest.mark.parametrize("seed", range(20))
def test_plan_is_reproducible_and_keeps_the_cluster_alive(seed: int) -> None:
    plan = plan_faults(seed, 60, 3, 3, 3, interval=2)
    assert plan == plan_faults(seed, 60, 3, 3, 3, interval=2)
    assert plan, "a minute at one fault every 2 s plans some faults"
    for f in plan:
        assert f.at >= 2 and f.end <= 58 + 1e-6, f
        assert f.duration > 0
    # at most one broker fault per set at a time (with a gap after the heal), at most one controller down
    for i, f in enumerate(plan):
        for g in plan[i + 1 :]:
            overlap = g.at < f.end and f.at < g.end
            if f.kind != "kill_controller" and g.kind != "kill_controller" and f.set_index == g.set_index:
                assert g.at >= f.end + 3 - 1e-6, (f, g)
            if f.kind == g.kind == "kill_controller":
                assert not overlap, (f, g)
    for f in plan:
        if f.kind == "kill_controller":
            assert f.target == LEADER or 0 <= f.target < 3
        else:
            assert 0 <= f.set_index < 3 and (f.target == MASTER or 0 <= f.target < 3)


def test_plan_without_controllers_has_no_controller_faults() -> None:
    for seed in range(10):
        assert all(f.kind != "kill_controller" for f in plan_faults(seed, 60, 2, 3, 0, interval=1))
        assert all(f.kind != "kill_controller" for f in plan_faults(seed, 60, 2, 3, 1, interval=1))
    assert plan_faults(1, 60, 2, 3, 3, interval=2) != plan_faults(2, 60, 2, 3, 3, interval=2)


def test_one_master_check() -> None:
    h = History()
    h.claim("a", 1, 1, "agent a/r0")
    h.claim("a", 1, 1, "controller")
    h.claim("a", 2, 2, "controller")
    h.claim("b", 1, 2, "agent b/r1")
    assert check_one_master(h).ok
    h.claim("a", 2, 3, "agent a/r2")
    c = check_one_master(h)
    assert not c.ok and "a epoch 2" in c.detail and "id 3" in c.detail


def test_epochs_monotonic_check() -> None:
    h = History()
    for e in (0, 1, 1, 2, 5):
        h.epoch("controller a", e)
    assert check_epochs_monotonic(h).ok
    h.epoch("controller a", 4)
    c = check_epochs_monotonic(h)
    assert not c.ok and "5 -> 4" in c.detail


def test_epoch_files_check() -> None:
    good = {"a": [LogView("r0", 10, None, ((1, 0), (2, 10), (4, 10)))]}
    assert check_epoch_files(good).ok
    assert not check_epoch_files({"a": [LogView("r0", 10, None, ((1, 0), (1, 10)))]}).ok
    assert not check_epoch_files({"a": [LogView("r0", 10, None, ((1, 5), (2, 3)))]}).ok


def test_state_hash_check() -> None:
    assert check_state_hashes({"n0": "x", "n1": "x", "n2": "x"}, 3).ok
    assert not check_state_hashes({"n0": "x", "n1": "y", "n2": "x"}, 3).ok
    assert not check_state_hashes({"n0": "x", "n1": "x"}, 3).ok


def test_acked_check_bodies_and_offsets() -> None:
    h = History()
    h.ack("a", AckedMessage(0, 10, b"m0", 1))
    h.ack("a", AckedMessage(10, 20, b"m1", 1))
    master = LogView("r1", 20, ((0, b"m0"), (10, b"m1")))
    assert check_acked(h, {"a": master}).ok
    lost = LogView("r1", 20, ((0, b"m0"), (10, b"other")))  # same offset, another message
    c = check_acked(h, {"a": lost})
    assert not c.ok and "offset 10" in c.detail
    assert not check_acked(h, {"a": None}).ok
    assert check_acked(h, {"a": LogView("r1", 20)}).ok  # offsets only: by end offset
    assert not check_acked(h, {"a": LogView("r1", 15)}).ok


def test_prefix_check() -> None:
    master = LogView("m", 30, ((0, b"a"), (10, b"b"), (20, b"c")))
    ok = [LogView("r0", 20, ((0, b"a"), (10, b"b"))), LogView("r1", 30, master.records)]
    c = check_prefix({"s": master}, {"s": ok})
    assert c.ok and "1 equal" in c.detail
    diverged = [LogView("r0", 20, ((0, b"a"), (10, b"x")))]
    assert not check_prefix({"s": master}, {"s": diverged}).ok
    longer = [LogView("r0", 40, master.records + ((30, b"d"),))]
    assert not check_prefix({"s": master}, {"s": longer}).ok
    assert not check_prefix({"s": LogView("m", 30)}, {"s": [LogView("r0", 31)]}).ok
