"""`mqctl demo`: the newcomer's tour as a script over ``Simulation`` (the CLI only renders).

Three controller nodes, two broker sets of three replicas with ``allAckInSyncStateSet``, messages
flowing. broker-a's master is cut off (it still takes writes; none is acknowledged, because no slave
gets them), then killed. The controller elects a new master once the old one's lease ends, and every
replica follows it. The old master comes back, truncates what nobody acknowledged and follows too.
The verdict: every acknowledged message is on its set's final master, and the other invariants hold.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from mqctl.broker.agent import Role
from mqctl.sim.cluster import Report, SimSettings, Simulation

__all__ = ["VERDICT_FAILED", "VERDICT_OK", "DemoResult", "demo_settings", "run_demo"]

VERDICT_OK = "VERDICT: no acknowledged message was lost"
VERDICT_FAILED = "VERDICT: FAILED"


@dataclass
class DemoResult:
    report: Report
    failover_seconds: float
    truncated_bytes: int
    verdict: str

    @property
    def ok(self) -> bool:
        return self.report.ok


def demo_settings(base_dir: str | None = None) -> SimSettings:
    return SimSettings(
        sets=2, replicas=3, controllers=3, cluster_name="DemoCluster", rate=20.0, base_dir=base_dir
    )


def run_demo(sim: Simulation, say: Callable[[str], None], pace: float = 1.0) -> DemoResult:
    """The tour on a fresh ``Simulation`` (not started yet). ``say`` gets the narration; ``pace`` scales
    the pauses in which messages just flow (1.0: about a minute in all)."""

    def dwell(seconds: float) -> None:
        end = time.monotonic() + seconds * pace
        while time.monotonic() < end:
            time.sleep(0.05)

    say("Step 1/6: a three-node controller group (Raft) and two broker sets of three replicas")
    sim.start()
    say("Step 2/6: messages flow; a write is acknowledged only once every SyncStateSet member has it")
    sim.start_producer()
    dwell(15)
    bs = sim.sets[0]
    old = bs.master()
    if old is None or old.agent is None:
        raise RuntimeError(f"{bs.name} lost its master before the demo could cut it off")
    agent = old.agent
    old_epoch, old_id = agent.master_epoch, agent.broker_id
    say(
        f"Step 3/6: {bs.name}'s master {old.name} (id {old_id}) is cut off from the network. It still "
        f"takes writes, but no slave gets them, so none is acknowledged"
    )
    sim.isolate(old)
    cut = time.monotonic()
    slaves = [r.agent for r in bs.replicas if r is not old and r.agent is not None]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and agent.max_offset <= max(s.max_offset for s in slaves):
        time.sleep(0.05)
    if agent.max_offset <= max(s.max_offset for s in slaves):
        r = agent.put(b"written to the cut-off master", timeout=0.3)  # the producer found no gap: make one
        say(f"  a direct write to the cut-off master: {r.status}")
    tail = agent.max_offset - max(s.max_offset for s in slaves)
    say(
        f"  {old.name} now holds {tail} bytes that no slave has; a write there waits for "
        "acks that never come and ends FLUSH_SLAVE_TIMEOUT"
    )
    say(
        f"Step 4/6: {old.name} is killed. It has sent no heartbeat since it was cut off: the controller "
        f"elects a new master when its {sim.settings.heartbeat_timeout_ms} ms lease ends"
    )
    sim.crash(old)
    new, _ = sim.wait_failover(bs, old_epoch, timeout=30)
    seconds = time.monotonic() - cut
    assert new.agent is not None
    followers = [r.name for r in bs.replicas if r is not new and r.alive]
    say(
        f"  new master {new.name} (id {new.agent.broker_id}) at masterEpoch {new.agent.master_epoch}, "
        f"followed by {', '.join(followers)}, {seconds:.1f} s after the old one went silent"
    )
    dwell(12)
    say(
        f"Step 5/6: {old.name} comes back with its store: it compares epochs with the new master, "
        "truncates what nobody acknowledged and follows"
    )
    before = old.total_truncations()[1]
    sim.restart(old)
    back = old.agent
    assert back is not None
    back.wait_role(Role.SLAVE, 30)
    deadline = time.monotonic() + 30  # caught up to within a few records (the producer keeps writing)
    while time.monotonic() < deadline and new.agent.max_offset - back.max_offset > 2048:
        time.sleep(0.05)
    truncated = old.total_truncations()[1] - before
    say(
        f"  {old.name} (id {back.broker_id}) is a slave of id {back.master_id} at masterEpoch "
        f"{back.master_epoch}; it truncated {truncated} bytes"
    )
    dwell(12)
    say("Step 6/6: the producer stops, every replica catches up, and the invariants are checked")
    problems = sim.settle(60)
    report = sim.report(problems)
    acked = report.stats["acknowledged"]
    if report.ok:
        verdict = (
            f"{VERDICT_OK}: {acked} acknowledged messages, every one on its set's final master; "
            f"{len(report.checks)} checks hold"
        )
    else:
        failed = [c.name for c in report.checks if not c.ok]
        verdict = f"{VERDICT_FAILED}: {', '.join(failed)}"
    return DemoResult(report, seconds, truncated, verdict)
