"""What a simulation records while it runs, and the invariants checked on it (pure: no I/O).

``History`` is filled by the simulator's observers (agents' status every few tens of milliseconds,
the controller's view of every set) and by the producer (every acknowledged write). The checks take
it, plus the final logs, and say what holds and what does not, with the evidence.

Sampling cannot see a role that lasts less than one sample; a second master at the same masterEpoch
would not go away by itself (nothing fences it but a newer epoch), so sampling finds it.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

__all__ = [
    "AckedMessage",
    "Check",
    "History",
    "LogView",
    "check_acked",
    "check_epoch_files",
    "check_epochs_monotonic",
    "check_one_master",
    "check_prefix",
    "check_state_hashes",
]


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str

    def line(self) -> str:
        return f"[{'ok' if self.ok else 'FAILED'}] {self.name}: {self.detail}"


@dataclass(frozen=True)
class AckedMessage:
    offset: int
    end: int
    body: bytes
    master_epoch: int


@dataclass(frozen=True)
class LogView:
    """One replica's log at the end: its max offset and, with commitlog storage, its records
    ``(offset, body)`` in order (None for offsets-only logs, which hold no bodies)."""

    name: str
    max_offset: int
    records: tuple[tuple[int, bytes], ...] | None = None
    epochs: tuple[tuple[int, int], ...] = ()


@dataclass
class History:
    """Thread-safe record of a run."""

    # (broker set, masterEpoch) -> {broker id: where it was seen ("agent r1", "controller")}
    master_claims: dict[tuple[str, int], dict[int, set[str]]] = field(default_factory=dict)
    # key (e.g. "controller broker-a", "agent broker-a r0 #2") -> last masterEpoch seen
    last_epoch: dict[str, int] = field(default_factory=dict)
    regressions: list[tuple[str, int, int]] = field(default_factory=list)
    acked: dict[str, list[AckedMessage]] = field(default_factory=dict)
    samples: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def claim(self, broker_set: str, master_epoch: int, broker_id: int, source: str) -> None:
        with self._lock:
            ids = self.master_claims.setdefault((broker_set, master_epoch), {})
            ids.setdefault(broker_id, set()).add(source)

    def epoch(self, key: str, master_epoch: int) -> None:
        """Note a masterEpoch seen under ``key``; a value below the last one is a regression."""
        with self._lock:
            last = self.last_epoch.get(key)
            if last is not None and master_epoch < last:
                self.regressions.append((key, last, master_epoch))
            if last is None or master_epoch > last:
                self.last_epoch[key] = master_epoch

    def ack(self, broker_set: str, msg: AckedMessage) -> None:
        with self._lock:
            self.acked.setdefault(broker_set, []).append(msg)

    def acked_count(self, broker_set: str | None = None) -> int:
        with self._lock:
            if broker_set is not None:
                return len(self.acked.get(broker_set, ()))
            return sum(len(v) for v in self.acked.values())


def check_one_master(history: History) -> Check:
    with history._lock:
        claims = {k: {b: set(s) for b, s in v.items()} for k, v in history.master_claims.items()}
    bad = {k: v for k, v in claims.items() if len(v) > 1}
    if bad:
        (name, epoch), ids = sorted(bad.items())[0]
        who = "; ".join(f"id {b} ({', '.join(sorted(s))})" for b, s in sorted(ids.items()))
        return Check(
            "one master per (broker set, masterEpoch)",
            False,
            f"{len(bad)} (set, epoch) pairs with two masters, e.g. {name} epoch {epoch}: {who}",
        )
    return Check(
        "one master per (broker set, masterEpoch)",
        True,
        f"{len(claims)} (set, epoch) pairs seen, each with one master",
    )


def check_epochs_monotonic(history: History) -> Check:
    with history._lock:
        regressions = list(history.regressions)
        keys = len(history.last_epoch)
    if regressions:
        key, last, now = regressions[0]
        return Check(
            "masterEpoch never goes back",
            False,
            f"{len(regressions)} regressions, e.g. {key}: {last} -> {now}",
        )
    return Check(
        "masterEpoch never goes back",
        True,
        f"{keys} sequences (controller per set, agent per incarnation), none decreasing",
    )


def check_epoch_files(logs: Mapping[str, Sequence[LogView]]) -> Check:
    """Every replica's epoch file: epochs strictly increasing, start offsets non-decreasing."""
    bad = []
    for name, views in sorted(logs.items()):
        for v in views:
            e = list(v.epochs)
            if any(b[0] <= a[0] or b[1] < a[1] for a, b in itertools.pairwise(e)):
                bad.append(f"{name}/{v.name}: {e}")
    if bad:
        return Check("epoch files ordered", False, f"{len(bad)} out of order, e.g. {bad[0]}")
    return Check("epoch files ordered", True, f"{sum(len(v) for v in logs.values())} epoch files")


def check_state_hashes(hashes: Mapping[str, str], expected_nodes: int) -> Check:
    values = set(hashes.values())
    detail = ", ".join(f"{n}={h[:12]}" for n, h in sorted(hashes.items()))
    if len(hashes) < expected_nodes:
        return Check(
            "controller nodes agree (state hash)",
            False,
            f"only {len(hashes)}/{expected_nodes} nodes answered: {detail or 'none'}",
        )
    if len(values) != 1:
        return Check("controller nodes agree (state hash)", False, f"hashes differ: {detail}")
    return Check(
        "controller nodes agree (state hash)", True, f"{len(hashes)} nodes, hash {values.pop()[:16]}"
    )


def check_acked(history: History, masters: Mapping[str, LogView | None]) -> Check:
    """Every acknowledged message is on its set's final master, at its offset, with its body (for an
    offsets-only log: below the master's max offset)."""
    with history._lock:
        acked = {k: list(v) for k, v in history.acked.items()}
    total = sum(len(v) for v in acked.values())
    missing: list[str] = []
    for name, msgs in sorted(acked.items()):
        view = masters.get(name)
        if view is None:
            if msgs:
                missing.append(f"{name}: no final master ({len(msgs)} acknowledged messages unaccounted)")
            continue
        if view.records is not None:
            by_offset = dict(view.records)
            lost = [m for m in msgs if by_offset.get(m.offset) != m.body]
        else:
            lost = [m for m in msgs if m.end > view.max_offset]
        if lost:
            m = lost[0]
            missing.append(f"{name}: {len(lost)} lost, first at offset {m.offset} (epoch {m.master_epoch})")
    if missing:
        return Check("no acknowledged message lost", False, "; ".join(missing))
    return Check(
        "no acknowledged message lost",
        True,
        f"{total} acknowledged messages, all on their set's final master",
    )


def check_prefix(masters: Mapping[str, LogView | None], replicas: Mapping[str, Sequence[LogView]]) -> Check:
    """Every replica's log is a prefix of, or equal to, its master's (records when there are bodies)."""
    bad: list[str] = []
    equal = 0
    count = 0
    for name, views in sorted(replicas.items()):
        master = masters.get(name)
        for v in views:
            count += 1
            if master is None:
                bad.append(f"{name}/{v.name}: no master to compare with")
                continue
            if v.max_offset > master.max_offset:
                bad.append(f"{name}/{v.name}: log end {v.max_offset} past the master's {master.max_offset}")
                continue
            if v.records is not None and master.records is not None:
                n = len(v.records)
                if tuple(master.records[:n]) != v.records:
                    first = next(
                        i for i in range(n) if i >= len(master.records) or master.records[i] != v.records[i]
                    )
                    bad.append(
                        f"{name}/{v.name}: differs from the master at record {first} "
                        f"(offset {v.records[first][0]})"
                    )
                    continue
            equal += v.max_offset == master.max_offset
    if bad:
        return Check("every replica is a prefix of its master", False, f"{len(bad)} bad: {bad[0]}")
    return Check(
        "every replica is a prefix of its master",
        True,
        f"{count} replicas checked, {equal} equal to their master",
    )
