"""Fault schedules for the simulator: a pure function of a seed, so that a chaos run can be repeated.

A fault is applied at ``at`` seconds after the run starts and healed ``duration`` seconds later
(the broker restarted, the isolation lifted, the controller node restarted). The plan keeps the
cluster able to make progress: at most one broker fault per broker set at a time, with a gap
after each heal so that the set is back before the next one, and at most a minority of the
controller nodes down at once. Targets that depend on the moment (the master of a set, the
controller leader) are resolved when the fault is applied, and the run's event log names them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

__all__ = ["KEYS", "KINDS", "Fault", "describe", "plan_faults"]

# kind -> what is done at ``at`` / at ``at + duration``
KINDS = {
    "crash_broker": ("crash (no cleanup)", "restart"),
    "isolate_broker": ("isolate from controllers and peers", "reconnect"),
    "kill_controller": ("SIGKILL", "restart"),
}

MASTER = -1  # broker target: whoever is the set's master when the fault is applied
LEADER = -1  # controller target: whichever node leads when the fault is applied

# Keyboard of `mqctl sim` (a live run): key -> (action, help). Actions are Simulation.perform's.
KEYS: dict[str, tuple[str, str]] = {
    "k": ("crash_master", "crash the selected set's master"),
    "s": ("crash_slave", "crash a slave of the selected set"),
    "i": ("isolate_master", "isolate the selected set's master"),
    "r": ("restart_brokers", "restart the selected set's crashed brokers"),
    "c": ("kill_controller_leader", "SIGKILL the controller leader"),
    "C": ("restart_controllers", "restart dead controller nodes"),
    "h": ("heal_all", "heal everything (reconnect, restart)"),
    "q": ("quit", "stop: settle, check, report"),
}


@dataclass(frozen=True)
class Fault:
    at: float
    duration: float
    kind: str  # a key of KINDS
    set_index: int = -1  # broker faults: which broker set
    target: int = MASTER  # replica index or MASTER; controller node index or LEADER

    @property
    def end(self) -> float:
        return self.at + self.duration


def describe(f: Fault, set_names: list[str] | None = None) -> str:
    if f.kind == "kill_controller":
        who = "the controller leader" if f.target == LEADER else f"controller node{f.target}"
    else:
        name = set_names[f.set_index] if set_names else f"set {f.set_index}"
        who = f"the master of {name}" if f.target == MASTER else f"replica {f.target} of {name}"
    return f"t={f.at:.1f}s {KINDS[f.kind][0]} {who} for {f.duration:.1f}s"


def plan_faults(
    seed: int,
    duration: float,
    sets: int,
    replicas: int,
    controllers: int = 0,
    *,
    interval: float = 4.0,
    min_fault: float = 1.5,
    max_fault: float = 5.0,
    gap: float = 3.0,
    warmup: float = 2.0,
    quiet_tail: float = 2.0,
) -> list[Fault]:
    """A reproducible schedule: faults start about every ``interval`` seconds (exponential gaps) in
    ``[warmup, duration - quiet_tail)``, each lasting ``min_fault``..``max_fault`` seconds and healed
    by ``duration``. ``controllers`` = 0: no controller faults (the group was not started by us)."""
    if sets <= 0 or replicas <= 0 or duration <= 0 or interval <= 0:
        return []
    rng = random.Random(seed)
    busy_until = [0.0] * sets  # per set: free for a new fault after this time
    ctl_down: list[float] = []  # end times of controller faults in progress
    max_ctl_down = (controllers - 1) // 2
    kinds = ["crash_broker", "crash_broker", "isolate_broker"]
    if max_ctl_down > 0:
        kinds.append("kill_controller")
    out: list[Fault] = []
    t = warmup
    last_start = duration - quiet_tail - min_fault
    while True:
        t += rng.expovariate(1.0 / interval)
        if t >= last_start:
            break
        kind = rng.choice(kinds)
        length = min(rng.uniform(min_fault, max_fault), duration - quiet_tail - t)
        if kind == "kill_controller":
            ctl_down = [e for e in ctl_down if e > t]
            if len(ctl_down) >= max_ctl_down:
                continue
            target = LEADER if rng.random() < 0.6 else rng.randrange(controllers)
            ctl_down.append(t + length)
            out.append(Fault(round(t, 3), round(length, 3), kind, -1, target))
            continue
        free = [i for i in range(sets) if busy_until[i] <= t]
        if not free:
            continue
        s = rng.choice(free)
        target = MASTER if replicas == 1 or rng.random() < 0.6 else rng.randrange(replicas)
        busy_until[s] = t + length + gap
        out.append(Fault(round(t, 3), round(length, 3), kind, s, target))
    return out
