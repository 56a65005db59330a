"""The leader's broker heartbeat table (RocketMQ DefaultBrokerHeartbeatManager), pure.

Time is passed in; nothing here reads a clock, sleeps or locks (thread safety is the caller's job).
Rows are keyed by (broker_name, broker_id), like the core's broker sets; the cluster name is kept
in the row and reported by `expired`.

Update rule of an existing row (RocketMQ section 5, with mqctl changes marked):
* always: last heartbeat time, timeout (default 10000 ms), election priority (default 2**31-1);
* epoch / max_offset / confirm_offset only if the new epoch is higher, or equal with a larger
  max_offset;
* mqctl: the broker address is updated too (RocketMQ keeps the first one);
* mqctl: a heartbeat whose broker_epoch is higher than the row's replaces the row entirely (a new
  incarnation of the broker), one whose broker_epoch is present and lower is ignored (an old
  incarnation). A heartbeat without broker_epoch (a RocketMQ broker) is never ignored for that.
"""

from __future__ import annotations

import heapq
import sys
from collections.abc import Iterable, Mapping
from typing import Any

from mqctl.controller.core import DEFAULT_ELECTION_PRIORITY, DEFAULT_HEARTBEAT_TIMEOUT_MS, Context, LiveInfo

__all__ = ["HeartbeatTable"]


def _opt_int(request: Mapping[str, Any], key: str) -> int | None:
    v = request.get(key)
    if v is None or isinstance(v, bool) or not isinstance(v, int):
        return None
    return v


class _Row:
    __slots__ = ("cluster_name", "info", "scheduled")

    def __init__(self, cluster_name: str, info: LiveInfo) -> None:
        self.cluster_name = cluster_name
        self.info = info
        self.scheduled = False  # has an entry in the deadline heap


class HeartbeatTable:
    """Rows by broker set, then broker id: a heartbeat touches one row, a broker set's rows are one
    lookup, whatever the size of the fleet. Expiry is driven by deadlines: each row has at most one
    entry in a heap, pushed again with the row's current deadline when the old one comes due, so a
    heartbeat costs no heap work and a tick looks only at rows whose time is up."""

    def __init__(self, default_timeout_ms: int = DEFAULT_HEARTBEAT_TIMEOUT_MS) -> None:
        self.default_timeout_ms = default_timeout_ms
        self._sets: dict[str, dict[int, _Row]] = {}
        self._count = 0
        self._heap: list[tuple[int, str, int]] = []  # (last heartbeat + timeout, broker_name, broker_id)
        # broker sets whose liveness changed (a row created, come back to life or past its deadline)
        # since `take_changed`: the ones the leader must look at for an election
        self._changed: set[str] = set()
        self._dead: set[tuple[str, int]] = set()  # rows past their deadline, not removed yet
        # the last row of each broker whose row expired, until it has a row again: a dead master's last
        # maxOffset for the history's loss figure, also when the election comes much later (a pause)
        self._last: dict[str, dict[int, LiveInfo]] = {}
        self._ints: dict[int, int] = {}

    def __len__(self) -> int:
        return self._count

    def _put(self, name: str, info: LiveInfo, cluster: str, now_ms: int) -> _Row:
        rows = self._sets.setdefault(name, {})
        row = rows.get(info.broker_id)
        if row is None:
            row = rows[info.broker_id] = _Row(cluster, info)
            self._count += 1
            self._last.get(name, {}).pop(info.broker_id, None)
            self._changed.add(name)
        else:
            if not row.info.is_alive(now_ms):
                self._changed.add(name)  # back to life
            row.info = info
            if cluster:
                row.cluster_name = cluster
        if not row.scheduled:
            row.scheduled = True
            self._dead.discard((name, info.broker_id))
            heapq.heappush(self._heap, (info.last_heartbeat_ms + info.timeout_ms, name, info.broker_id))
        return row

    def on_heartbeat(self, request: Mapping[str, Any], now_ms: int) -> LiveInfo | None:
        """Record a Heartbeat request (proto field names). Returns the row, or None when the
        heartbeat was ignored (no broker_id or broker_name, or an older broker_epoch)."""
        name = request.get("broker_name")
        bid = _opt_int(request, "broker_id")
        if not isinstance(name, str) or not name or bid is None:
            return None
        # interned: the rows, the deadline heap and the state share one object per name and
        # address instead of keeping the one each heartbeat brought
        name = sys.intern(name)
        cluster = request.get("cluster_name")
        cluster = sys.intern(cluster) if isinstance(cluster, str) else ""
        address = request.get("broker_addr")
        address = sys.intern(address) if isinstance(address, str) else ""
        broker_epoch = _opt_int(request, "broker_epoch")
        epoch = _opt_int(request, "epoch")
        max_offset = _opt_int(request, "max_offset")
        confirm_offset = _opt_int(request, "confirm_offset")
        timeout = _opt_int(request, "heartbeat_timeout_mills")
        priority = _opt_int(request, "election_priority")
        epoch = -1 if epoch is None else epoch
        max_offset = -1 if max_offset is None else max_offset
        confirm_offset = -1 if confirm_offset is None else confirm_offset
        timeout = self.default_timeout_ms if timeout is None or timeout <= 0 else self._shared(timeout)
        priority = DEFAULT_ELECTION_PRIORITY if priority is None else priority

        rows = self._sets.get(name)
        row = rows.get(bid) if rows is not None else None
        if row is not None and broker_epoch is not None and broker_epoch < row.info.broker_epoch:
            return None
        if row is None or (broker_epoch is not None and broker_epoch > row.info.broker_epoch):
            info = LiveInfo(bid, address, broker_epoch or 0, epoch, max_offset, confirm_offset, priority,
                            now_ms, timeout)
        else:
            old = row.info
            if epoch > old.epoch or (epoch == old.epoch and max_offset > old.max_offset):
                offsets = (epoch, max_offset, confirm_offset)
            else:
                offsets = (old.epoch, old.max_offset, old.confirm_offset)
            info = LiveInfo(bid, address or old.broker_address, old.broker_epoch, *offsets, priority, now_ms,
                            timeout)
        self._put(name, info, cluster, now_ms)
        return info

    def _shared(self, value: int) -> int:
        """One int object per heartbeat timeout in use (a fleet has one or a few), not one per row."""
        shared = self._ints.get(value)
        if shared is None:
            shared = value
            if len(self._ints) < 256:
                self._ints[value] = value
        return shared

    def on_register(self, cluster_name: str, broker_name: str, broker_id: int, address: str,
                    broker_epoch: int, epoch: int | None = None, max_offset: int | None = None,
                    confirm_offset: int | None = None, election_priority: int | None = None,
                    timeout_ms: int | None = None, now_ms: int = 0) -> LiveInfo | None:
        """A successful RegisterBroker: a new incarnation of a broker. As in RocketMQ, only a heartbeat
        makes a broker alive: a row it has takes the new brokerEpoch and what the registration
        reported, with its last heartbeat unchanged; without a row nothing is recorded (the
        broker's first heartbeat creates it)."""
        row = self._sets.get(broker_name, {}).get(broker_id)
        if row is None:
            return None
        broker_name, address = sys.intern(broker_name), sys.intern(address)
        info = LiveInfo(
            broker_id=broker_id,
            broker_address=address,
            broker_epoch=broker_epoch,
            epoch=-1 if epoch is None else epoch,
            max_offset=-1 if max_offset is None else max_offset,
            confirm_offset=-1 if confirm_offset is None else confirm_offset,
            election_priority=DEFAULT_ELECTION_PRIORITY if election_priority is None else election_priority,
            last_heartbeat_ms=row.info.last_heartbeat_ms,
            timeout_ms=self.default_timeout_ms if timeout_ms is None or timeout_ms <= 0 else timeout_ms,
        )
        self._put(broker_name, info, cluster_name, now_ms)
        return info

    def get(self, broker_name: str, broker_id: int) -> LiveInfo | None:
        row = self._sets.get(broker_name, {}).get(broker_id)
        return None if row is None else row.info

    def is_alive(self, broker_name: str, broker_id: int, now_ms: int) -> bool:
        info = self.get(broker_name, broker_id)
        return info is not None and info.is_alive(now_ms)

    def snapshot(self, broker_name: str) -> dict[int, LiveInfo]:
        """broker_id -> row for one broker set (rows may be expired)."""
        rows = self._sets.get(broker_name)
        return {bid: rows[bid].info for bid in sorted(rows)} if rows else {}

    def context(self, now_ms: int, broker_names: Iterable[str] | None = None) -> Context:
        """A Context for the core: the given broker sets (all when None)."""
        names = sorted(self._sets) if broker_names is None else broker_names
        return Context(now_ms=now_ms, live={n: self.snapshot(n) for n in names if n in self._sets})

    def with_last(self, broker_name: str) -> dict[int, LiveInfo]:
        """``snapshot`` plus the last row of each broker of the set whose row expired."""
        return {**self._last.get(broker_name, {}), **self.snapshot(broker_name)}

    def take_changed(self, now_ms: int) -> set[str]:
        """The broker sets whose liveness changed since the last call: rows created or back to life,
        and rows whose deadline (last heartbeat + timeout) has passed by `now_ms`."""
        heap = self._heap
        while heap and heap[0][0] < now_ms:
            _, name, bid = heapq.heappop(heap)
            row = self._sets.get(name, {}).get(bid)
            if row is None:
                continue
            deadline = row.info.last_heartbeat_ms + row.info.timeout_ms
            if deadline < now_ms:
                row.scheduled = False  # dead: the next heartbeat schedules it again
                self._dead.add((name, bid))
                self._changed.add(name)
            else:
                heapq.heappush(heap, (deadline, name, bid))
        changed, self._changed = self._changed, set()
        return changed

    def expired(self, now_ms: int) -> list[tuple[str, str, int]]:
        """Remove and return (cluster, broker_name, broker_id) of rows with now - last > timeout
        (RocketMQ's scan of inactive brokers), found through the deadlines, not a scan of every row."""
        self._changed |= self.take_changed(now_ms)
        gone = []
        for name, bid in sorted(self._dead):
            rows = self._sets[name]
            gone.append((rows[bid].cluster_name, name, bid))
            self._last.setdefault(name, {})[bid] = rows.pop(bid).info
            if not rows:
                del self._sets[name]
        self._count -= len(gone)
        self._dead.clear()
        return gone
