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
* a registration keeps what it does not report (RocketMQ keeps the whole row); mqctl: after one that
  did not report epoch and max_offset, the first heartbeat sets epoch / max_offset / confirm_offset
  as it reports them (a restarted broker may hold less than before).
"""

from __future__ import annotations

import heapq
import sys
from array import array
from collections.abc import Iterable

from mqctl.controller.core import (
    DEFAULT_ELECTION_PRIORITY,
    DEFAULT_HEARTBEAT_TIMEOUT_MS,
    Context,
    Heartbeat,
    LiveInfo,
    RegisterBrokerRequest,
)

__all__ = ["HeartbeatTable"]

GRAIN_MS = 64  # width of a deadline bucket
# A broker set's rows: the slots (plus one; 0 is none) of broker ids 0..PACKED_IDS-1 as SLOT_BITS-bit
# fields of one int, others (or slots too large) in a dict of their own. A fleet's sets have ids
# 1..3: one small int per set instead of a dict and an int object per row.
PACKED_IDS = 8
SLOT_BITS = 24
_FIELD = (1 << SLOT_BITS) - 1


def _column() -> array[int]:
    return array("q")


class HeartbeatTable:
    """Rows by broker set, then broker id (PACKED_IDS): a heartbeat touches one row, a broker set's
    rows are one lookup, whatever the size of the fleet.

    A row is a slot in columns of machine integers, written in place: a heartbeat leaves no object
    behind (a new object per beat, kept until the next, scattered the process's memory over
    allocator pages that a large read's garbage then could not give back). Rows are made into
    `LiveInfo`s only when a decision reads them.

    Expiry is driven by deadlines: each row is in at most one bucket of a timer wheel (buckets of
    GRAIN_MS, their starts in a heap), put again under the row's current deadline when the old one
    comes due, so a heartbeat costs no wheel work and a tick looks only at rows whose time is up."""

    def __init__(self, default_timeout_ms: int = DEFAULT_HEARTBEAT_TIMEOUT_MS) -> None:
        self.default_timeout_ms = default_timeout_ms
        self._sets: dict[str, int] = {}  # broker_name -> its packed slots (a set with rows is here)
        self._wide: dict[str, dict[int, int]] = {}  # broker_name -> broker_id -> slot, the others
        self._count = 0
        # the columns, one entry per slot
        self._name: list[str] = []
        self._bid: list[int] = []
        self._cluster: list[str] = []
        self._address: list[str] = []
        self._broker_epoch, self._epoch, self._max_offset = _column(), _column(), _column()
        self._confirm_offset, self._priority, self._last_ms = _column(), _column(), _column()
        self._timeout, self._scheduled = _column(), array("b")
        # 1 from a registration to the row's next heartbeat, which then tells the new incarnation's
        # epoch and offsets whatever the update rule says (its store may hold less than before)
        self._registered = array("b")
        self._free: list[int] = []  # slots of removed rows
        self._wheel: dict[int, list[int]] = {}  # deadline // GRAIN_MS -> slots
        self._buckets: list[int] = []  # the wheel's keys, a heap
        # broker sets whose liveness changed (a row created, come back to life or past its deadline)
        # since `take_changed`: the ones the leader must look at for an election
        self._changed: set[str] = set()
        self._dead: set[int] = set()  # slots past their deadline, not removed yet
        # the last row of each broker whose row expired, until it has a row again: a dead master's last
        # maxOffset for the history's loss figure, also when the election comes much later (a pause)
        self._last: dict[str, dict[int, LiveInfo]] = {}

    def __len__(self) -> int:
        return self._count

    # --- rows ---------------------------------------------------------------------------

    def _slot(self, name: str, bid: int) -> int | None:
        if 0 <= bid < PACKED_IDS:
            field = self._sets.get(name, 0) >> (bid * SLOT_BITS) & _FIELD
            if field:
                return field - 1
        wide = self._wide.get(name)
        return None if wide is None else wide.get(bid)

    def _bind(self, name: str, bid: int, slot: int) -> None:
        if 0 <= bid < PACKED_IDS and slot < _FIELD:
            self._sets[name] = self._sets.get(name, 0) | (slot + 1) << (bid * SLOT_BITS)
        else:
            self._sets.setdefault(name, 0)
            self._wide.setdefault(name, {})[bid] = slot

    def _unbind(self, name: str, bid: int) -> None:
        wide = self._wide.get(name)
        if wide is not None and bid in wide:
            del wide[bid]
            if not wide:
                del self._wide[name]
        else:
            self._sets[name] &= ~(_FIELD << (bid * SLOT_BITS))
        if not self._sets[name] and name not in self._wide:
            del self._sets[name]

    def _rows(self, name: str) -> list[tuple[int, int]]:
        """(broker_id, slot) of a set's rows, by broker id."""
        packed = self._sets.get(name, 0)
        rows = []
        bid = 0
        while packed:
            if packed & _FIELD:
                rows.append((bid, (packed & _FIELD) - 1))
            packed >>= SLOT_BITS
            bid += 1
        wide = self._wide.get(name)
        if wide:
            rows = sorted([*rows, *wide.items()])
        return rows

    def _new_slot(self, name: str, bid: int) -> int:
        self._count += 1
        self._last.get(name, {}).pop(bid, None)
        self._changed.add(name)
        if self._free:
            slot = self._free.pop()
            self._name[slot], self._bid[slot] = name, bid
            self._registered[slot] = 0
            return slot
        slot = len(self._name)
        self._name.append(name)
        self._bid.append(bid)
        self._cluster.append("")
        self._address.append("")
        for column in (
            self._broker_epoch,
            self._epoch,
            self._max_offset,
            self._confirm_offset,
            self._priority,
            self._last_ms,
            self._timeout,
        ):
            column.append(0)
        self._scheduled.append(0)
        self._registered.append(0)
        return slot

    def _info(self, slot: int) -> LiveInfo:
        return LiveInfo(
            self._bid[slot],
            self._address[slot],
            self._broker_epoch[slot],
            self._epoch[slot],
            self._max_offset[slot],
            self._confirm_offset[slot],
            self._priority[slot],
            self._last_ms[slot],
            self._timeout[slot],
        )

    def _is_alive(self, slot: int, now_ms: int) -> bool:
        return self._last_ms[slot] + self._timeout[slot] >= now_ms

    def _schedule(self, slot: int) -> None:
        """Put a row in the bucket of its deadline (it is in none)."""
        self._scheduled[slot] = 1
        self._dead.discard(slot)
        bucket = (self._last_ms[slot] + self._timeout[slot]) // GRAIN_MS
        slots = self._wheel.get(bucket)
        if slots is None:
            slots = self._wheel[bucket] = []
            heapq.heappush(self._buckets, bucket)
        slots.append(slot)

    def _put(
        self,
        name: str,
        bid: int,
        cluster: str,
        address: str,
        broker_epoch: int,
        epoch: int,
        max_offset: int,
        confirm_offset: int,
        priority: int,
        last_ms: int,
        timeout: int,
        now_ms: int,
    ) -> None:
        slot = self._slot(name, bid)
        if slot is None:
            slot = self._new_slot(name, bid)
            self._bind(name, bid, slot)
            self._cluster[slot] = cluster
        else:
            if not self._is_alive(slot, now_ms):
                self._changed.add(name)  # back to life
            if cluster:
                self._cluster[slot] = cluster
        self._address[slot] = address
        self._broker_epoch[slot] = broker_epoch
        self._epoch[slot] = epoch
        self._max_offset[slot] = max_offset
        self._confirm_offset[slot] = confirm_offset
        self._priority[slot] = priority
        self._last_ms[slot] = last_ms
        self._timeout[slot] = timeout
        if not self._scheduled[slot]:
            self._schedule(slot)

    def on_heartbeat(self, beat: Heartbeat, now_ms: int) -> bool:
        """Record a heartbeat the core accepted (core.Result.request of a Heartbeat call). False when
        it was ignored: an older broker_epoch than the row's."""
        # interned: the rows and the state share one object per name and address instead of
        # keeping the one each heartbeat brought
        name, bid = sys.intern(beat.broker_name), beat.broker_id
        cluster = sys.intern(beat.cluster_name)
        address = sys.intern(beat.broker_addr)
        broker_epoch = beat.broker_epoch
        epoch = -1 if beat.epoch is None else beat.epoch
        max_offset = -1 if beat.max_offset is None else beat.max_offset
        confirm_offset = -1 if beat.confirm_offset is None else beat.confirm_offset
        timeout = beat.heartbeat_timeout_mills
        timeout = self.default_timeout_ms if timeout is None or timeout <= 0 else timeout
        priority = DEFAULT_ELECTION_PRIORITY if beat.election_priority is None else beat.election_priority

        slot = self._slot(name, bid)
        if slot is None or (broker_epoch is not None and broker_epoch > self._broker_epoch[slot]):
            row_epoch = broker_epoch or 0  # a new row, or a newer incarnation: taken as it is
            if slot is not None:
                self._registered[slot] = 0
        elif broker_epoch is not None and broker_epoch < self._broker_epoch[slot]:
            return False
        else:
            row_epoch, old_epoch = self._broker_epoch[slot], self._epoch[slot]
            if self._registered[slot]:
                self._registered[slot] = 0  # the first beat since a registration: taken as it is
            elif not (epoch > old_epoch or (epoch == old_epoch and max_offset > self._max_offset[slot])):
                epoch, max_offset, confirm_offset = (
                    old_epoch,
                    self._max_offset[slot],
                    self._confirm_offset[slot],
                )
            address = address or self._address[slot]
        self._put(
            name,
            bid,
            cluster,
            address,
            row_epoch,
            epoch,
            max_offset,
            confirm_offset,
            priority,
            now_ms,
            timeout,
            now_ms,
        )
        return True

    def on_register(
        self,
        cluster_name: str,
        broker_name: str,
        broker_id: int,
        address: str,
        broker_epoch: int,
        epoch: int | None = None,
        max_offset: int | None = None,
        confirm_offset: int | None = None,
        election_priority: int | None = None,
        timeout_ms: int | None = None,
        now_ms: int = 0,
    ) -> bool:
        """A successful RegisterBroker: a new incarnation of a broker. As in RocketMQ, only a heartbeat
        makes a broker alive: a row it has takes the new brokerEpoch and what the registration
        reported, with its last heartbeat unchanged; without a row nothing is recorded (the
        broker's first heartbeat creates it). What the registration does not carry (a RocketMQ
        broker's carries none of it) keeps the row's value, as RocketMQ keeps the whole row: reset to
        -1/-1/2**31-1, a broker that registers again between two heartbeats would lose an election it
        should win. mqctl: when it did not report epoch and maxOffset, the next heartbeat's epoch and
        offsets are taken as they are, not by the update rule, so that a broker back with less data
        does not keep looking better than it is (RocketMQ keeps the higher values until the row
        expires). False when nothing was recorded."""
        slot = self._slot(broker_name, broker_id)
        if slot is None:
            return False
        self._put(
            sys.intern(broker_name),
            broker_id,
            cluster_name,
            sys.intern(address),
            broker_epoch,
            self._epoch[slot] if epoch is None else epoch,
            self._max_offset[slot] if max_offset is None else max_offset,
            self._confirm_offset[slot] if confirm_offset is None else confirm_offset,
            self._priority[slot] if election_priority is None else election_priority,
            self._last_ms[slot],
            self._timeout[slot] if timeout_ms is None or timeout_ms <= 0 else timeout_ms,
            now_ms,
        )
        # a registration that did not report the store's epoch and maxOffset: the next beat does
        self._registered[slot] = int(epoch is None or max_offset is None)
        return True

    def on_registration(self, request: RegisterBrokerRequest, broker_epoch: int, now_ms: int) -> bool:
        """``on_register`` with the typed request the core decided (a field the broker left out, None,
        keeps the row's value)."""
        return self.on_register(
            request.cluster_name,
            request.broker_name,
            request.broker_id,
            request.broker_address,
            broker_epoch,
            request.epoch,
            request.max_offset,
            request.confirm_offset,
            request.election_priority,
            request.heartbeat_timeout_mills,
            now_ms,
        )

    # --- reads --------------------------------------------------------------------------

    def get(self, broker_name: str, broker_id: int) -> LiveInfo | None:
        slot = self._slot(broker_name, broker_id)
        return None if slot is None else self._info(slot)

    def is_alive(self, broker_name: str, broker_id: int, now_ms: int) -> bool:
        slot = self._slot(broker_name, broker_id)
        return slot is not None and self._is_alive(slot, now_ms)

    def snapshot(self, broker_name: str) -> dict[int, LiveInfo]:
        """broker_id -> row for one broker set (rows may be expired)."""
        return {bid: self._info(slot) for bid, slot in self._rows(broker_name)}

    def context(self, now_ms: int, broker_names: Iterable[str] | None = None) -> Context:
        """A Context for the core: the given broker sets (all when None)."""
        names = sorted(self._sets) if broker_names is None else broker_names
        return Context(now_ms=now_ms, live={n: self.snapshot(n) for n in names if n in self._sets})

    def with_last(self, broker_name: str) -> dict[int, LiveInfo]:
        """``snapshot`` plus the last row of each broker of the set whose row expired."""
        return {**self._last.get(broker_name, {}), **self.snapshot(broker_name)}

    # --- expiry -------------------------------------------------------------------------

    def take_changed(self, now_ms: int) -> set[str]:
        """The broker sets whose liveness changed since the last call: rows created or back to life,
        and rows whose deadline (last heartbeat + timeout) has passed by `now_ms`."""
        buckets, wheel = self._buckets, self._wheel
        while buckets and buckets[0] * GRAIN_MS <= now_ms:
            bucket = buckets[0]
            waiting = []  # rows of this bucket not due yet
            for slot in wheel[bucket]:
                deadline = self._last_ms[slot] + self._timeout[slot]
                if deadline < now_ms:
                    self._scheduled[slot] = 0  # dead: the next heartbeat schedules it again
                    self._dead.add(slot)
                    self._changed.add(self._name[slot])
                elif deadline // GRAIN_MS == bucket:
                    waiting.append(slot)
                else:
                    self._scheduled[slot] = 0
                    self._schedule(slot)
            if waiting:  # now is inside this bucket: no later bucket is due either
                wheel[bucket] = waiting
                break
            del wheel[bucket]
            heapq.heappop(buckets)
        changed, self._changed = self._changed, set()
        return changed

    def expired(self, now_ms: int) -> list[tuple[str, str, int]]:
        """Remove and return (cluster, broker_name, broker_id) of rows with now - last > timeout
        (RocketMQ's scan of inactive brokers), found through the deadlines, not a scan of every row."""
        self._changed |= self.take_changed(now_ms)
        gone = []
        for slot in sorted(self._dead, key=lambda s: (self._name[s], self._bid[s])):
            name, bid = self._name[slot], self._bid[slot]
            gone.append((self._cluster[slot], name, bid))
            self._last.setdefault(name, {})[bid] = self._info(slot)
            self._unbind(name, bid)
            self._free.append(slot)
        self._count -= len(gone)
        self._dead.clear()
        return gone
