"""The election policy (RocketMQ DefaultElectPolicy) as pure functions.

Differences from RocketMQ (docs/controller-rules.md):

* Candidates are ordered by a *total* key ``(-epoch, -max_offset, election_priority, broker_id)``.
  RocketMQ sorts with a TreeSet whose comparator returns 0 for equal (epoch, maxOffset, priority),
  so it silently drops tied candidates, and compares offsets with ``(int)(o2 - o1)``, which
  overflows for gaps of 2**31 or more and then prefers the broker with *less* data; its epoch and
  priority differences overflow ``int`` the same way at the int32 limits (difference 14). Python's
  ints compare exactly.
* A candidate without a heartbeat row sorts as (epoch -1, max_offset -1, priority 2**31-1).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

DEFAULT_ELECTION_PRIORITY = 2**31 - 1


class LiveRow(Protocol):
    """What the policy reads from a heartbeat row (core.LiveInfo satisfies it)."""

    @property
    def epoch(self) -> int: ...

    @property
    def max_offset(self) -> int: ...

    @property
    def election_priority(self) -> int: ...


ElectionKey = tuple[int, int, int, int]


def election_key(broker_id: int, row: LiveRow | None) -> ElectionKey:
    """Total order: higher epoch, then higher max_offset, then lower priority, then lower id."""
    if row is None:
        return (1, 1, DEFAULT_ELECTION_PRIORITY, broker_id)
    return (-row.epoch, -row.max_offset, row.election_priority, broker_id)


def order_candidates(broker_ids: Iterable[int], live: Mapping[int, LiveRow]) -> list[int]:
    """All candidates, best first. Never drops ties."""
    return sorted(set(broker_ids), key=lambda b: election_key(b, live.get(b)))


def freshest(broker_ids: Iterable[int], live: Mapping[int, LiveRow]) -> int | None:
    """The best candidate by election_key, or None when there is none."""
    ordered = order_candidates(broker_ids, live)
    return ordered[0] if ordered else None


def try_elect(
    brokers: Iterable[int],
    is_valid: Callable[[int], bool],
    live: Mapping[int, LiveRow],
    old_master: int | None,
    prefer_id: int | None,
) -> int | None:
    """RocketMQ DefaultElectPolicy.tryElect with a total order.

    1. keep the valid (alive) brokers; none -> None
    2. old master among them and (no preference or preference == old master) -> old master
    3. a preference is never replaced by another broker: it is returned if valid, else None
    4. otherwise the best by election_key
    """
    candidates = {b for b in brokers if is_valid(b)}
    if not candidates:
        return None
    if old_master is not None and old_master in candidates and (prefer_id is None or prefer_id == old_master):
        return old_master
    if prefer_id is not None:
        return prefer_id if prefer_id in candidates else None
    return freshest(candidates, live)


def elect(
    sync_state_set: Iterable[int],
    all_replicas: Iterable[int] | None,
    old_master: int | None,
    prefer_id: int | None,
    is_valid: Callable[[int], bool],
    live: Mapping[int, LiveRow],
) -> int | None:
    """RocketMQ DefaultElectPolicy.elect: the SyncStateSet first, then (unclean election enabled,
    all_replicas not None) every registered replica."""
    new_master = try_elect(sync_state_set, is_valid, live, old_master, prefer_id)
    if new_master is not None:
        return new_master
    if all_replicas is not None:
        return try_elect(all_replicas, is_valid, live, old_master, prefer_id)
    return None
