"""The deterministic simulator of a controller group (issue 30): `python -m mqctl.dsim`.

A 3- or 5-node group runs in one process, on one thread, with the real Raft fork
(mqctl/raft/syncobj.py), journal (mqctl/raft/journal.py, on a simulated disk with the crash
simulator's semantics), raftlog, core and records; the clock, the network and the disks are
simulated and driven by one seed, so a seed replays byte for byte. docs/raft-safety.md says what
it checks and how to run it; mqctl/sim is the other simulator (real processes, real brokers).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypedDict, Unpack


@dataclass
class Outcome:
    seed: int
    ok: bool
    violation: str
    digest: str
    stats: dict[str, int] = field(default_factory=dict)
    tail: list[str] = field(default_factory=list)
    sim_seconds: float = 0.0


class WorldOptions(TypedDict, total=False):
    """What a run is made of: World's keyword parameters (its defaults are the only ones)."""

    nodes: int
    brokers: int
    replicas: int
    faults: bool
    membership: bool
    mutation: str | None
    trace_keep: int
    full_trace: bool


def run_seed(seed: int, *, seconds: float = 120.0, **options: Unpack[WorldOptions]) -> tuple[Outcome, Any]:
    """One run; returns its outcome and the world (its trace, checker)."""
    from mqctl.dsim.world import Violation, World  # lazy: pysyncobj, the raft fork

    world = World(seed, **options)
    violation = ""
    try:
        world.run(seconds)
    except Violation as exc:
        violation = str(exc)
    return Outcome(
        seed,
        not violation,
        violation,
        world.trace_digest,
        dict(world.stats),
        list(world.trace_tail),
        world.now,
    ), world
