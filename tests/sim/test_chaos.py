"""Chaos, bounded and seeded: two broker sets of three replicas (allAckInSyncStateSet) against a real
three-node controller group, brokers crashed, restarted and isolated and controller nodes SIGKILLed at
random while messages flow. Every invariant of mqctl.sim.invariants is checked at the end.

Reproduce a run with ``MQCTL_CHAOS_SEED=<seed> pytest tests/sim/test_chaos.py`` (the fault plan is a
pure function of the seed; thread timing, and so the exact offsets, vary between runs).
"""

from __future__ import annotations

import os

import pytest

from mqctl.sim.cluster import SimSettings, Simulation
from mqctl.sim.faults import MASTER, describe, plan_faults

pytestmark = pytest.mark.slow

SEED = int(os.environ.get("MQCTL_CHAOS_SEED", "11"))
DURATION = float(os.environ.get("MQCTL_CHAOS_SECONDS", "40"))


def test_chaos_invariants_hold(tmp_path) -> None:
    settings = SimSettings(sets=2, replicas=3, controllers=3, rate=25.0, base_dir=str(tmp_path / "run"))
    plan = plan_faults(SEED, DURATION, settings.sets, settings.replicas, settings.controllers, interval=3.0)
    kinds = {f.kind for f in plan}
    if SEED == 11:  # the default plan exercises every kind of fault, masters included
        assert kinds == {"crash_broker", "isolate_broker", "kill_controller"}, plan
        assert any(f.target == MASTER and f.kind == "crash_broker" for f in plan), plan
    events: list[str] = []
    with Simulation(settings, on_event=events.append) as sim:
        sim.start()
        sim.start_producer()
        sim.run(DURATION, plan)
        problems = sim.settle(60)
        report = sim.report(problems, seed=SEED)
    summary = "\n".join(
        [f"seed {SEED}, stats {report.stats}"]
        + [c.line() for c in report.checks]
        + ["plan:"]
        + [describe(f) for f in plan]
        + ["events:"]
        + events[-60:]
    )
    assert report.ok, summary
    assert [c.name for c in report.checks] == [
        "every set settled",
        "one master per (broker set, masterEpoch)",
        "masterEpoch never goes back",
        "epoch files ordered",
        "controller nodes agree (state hash)",
        "no acknowledged message lost",
        "every replica is a prefix of its master",
    ], summary
    # the run did what the plan said: faults applied, failovers seen, messages acknowledged throughout
    skipped = sum(e.startswith(("fault skipped", "no controller leader", "not killing")) for e in events)
    assert report.stats["faults"] + skipped == len(plan) and skipped <= len(plan) // 2, summary
    if any(f.kind == "crash_broker" and f.target == MASTER and f.duration >= 2.5 for f in plan):
        assert report.stats["failovers"] >= 1, summary  # down for longer than its 1.5 s lease
    assert report.stats["acknowledged"] > DURATION * settings.rate, summary
    assert any("SIGKILL controller" in e for e in events) == ("kill_controller" in kinds), summary
