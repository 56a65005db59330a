"""Per-peer bookkeeping shared by the listeners (gRPC and RocketMQ remoting), docs/serve.md#limits.

- ``peer_address``: the client address of a peer, without its port (gRPC's ``context.peer()``
  ``ipv4:127.0.0.1:5555`` / ``ipv6:[::1]:5555``, or a remoting ``host:port``).
- ``PeerLog``: at most one log line per client address per interval for what a hostile or broken
  client can repeat at will (undecodable requests, malformed frames, refused connections); the
  next line says how many were not logged.
- ``PeerSlots``: counted slots per connection, per client address and in total (the watch
  streams of the gRPC door, the connections of the remoting door), so that one greedy client
  cannot take them all.
- ``CallGuard``: the calls whose request message is late, each holding a server thread (a
  slowloris), limited per connection, per client address and in total; the ones beyond are
  refused or cancelled.
- ``IdleStreams``: long-lived streams that must keep moving (the gRPC heartbeat streams); one that
  neither reads a message nor gets its answer taken for ``idle`` seconds is cancelled.

Pure Python, thread-safe, bounded memory: no grpc import.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["CallGuard", "IdleStreams", "PeerLog", "PeerSlots", "Refusal", "peer_address"]


def peer_address(peer: str) -> str:
    """The client address of ``peer`` without the port: ``ipv4:127.0.0.1:5555`` -> ``127.0.0.1``,
    ``ipv6:[::1]:5555`` -> ``::1``, ``127.0.0.1:5555`` -> ``127.0.0.1``; other forms (``unix:...``)
    are returned as they are."""
    text = peer
    for scheme in ("ipv4:", "ipv6:"):
        if text.startswith(scheme):
            text = text[len(scheme) :]
            break
    else:
        if text.startswith("unix:") or text.startswith("unix-abstract:"):
            return text
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        return text
    return host.strip("[]")


class PeerLog:
    """Log at most one line per client address every ``interval`` seconds (and at most
    ``budget`` lines per interval over all addresses); the others are counted, and the next line
    logged for that address says how many were left out. Remembers at most ``max_peers``
    addresses (the least recently seen are forgotten)."""

    def __init__(
        self,
        logger: logging.Logger,
        *,
        interval: float = 60.0,
        budget: int = 50,
        max_peers: int = 4096,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log = logger
        self._interval = interval
        self._budget = budget
        self._max_peers = max_peers
        self._clock = clock
        self._lock = threading.Lock()
        # address -> [time of the last line logged, lines left out since]
        self._peers: OrderedDict[str, list[float]] = OrderedDict()
        self._window_start = float("-inf")
        self._window_lines = 0
        self._notes_left_out = 0

    def warning(self, address: str, msg: str, *args: object) -> bool:
        """Log ``msg % args`` at WARNING for ``address`` unless one was logged for it within the
        interval; True when logged."""
        return self.log(logging.WARNING, address, msg, *args)

    def log(self, level: int, address: str, msg: str, *args: object) -> bool:
        now = self._clock()
        with self._lock:
            entry = self._peers.get(address)
            if entry is not None:
                self._peers.move_to_end(address)
                if now - entry[0] < self._interval:
                    entry[1] += 1
                    return False
            if now - self._window_start >= self._interval:
                self._window_start, self._window_lines = now, 0
            if self._window_lines >= self._budget:
                if entry is None:
                    entry = self._remember(address, float("-inf"))
                entry[1] += 1
                return False
            self._window_lines += 1
            left_out = int(entry[1]) if entry is not None else 0
            if entry is None:
                entry = self._remember(address, now)
            entry[0], entry[1] = now, 0
        if left_out:
            msg += f" ({left_out} more from {address} not logged)"
        self._log.log(level, msg, *args)
        return True

    def note(self, level: int, msg: str, *args: object) -> bool:
        """A line held against no peer (a delivery that succeeded): only the budget applies, and
        nothing is remembered (a key per line, such as an address and an epoch, filled the memory of
        addresses with entries nobody would look up again); the next line logged says how many
        were left out. True when logged."""
        now = self._clock()
        with self._lock:
            if now - self._window_start >= self._interval:
                self._window_start, self._window_lines = now, 0
            if self._window_lines >= self._budget:
                self._notes_left_out += 1
                return False
            self._window_lines += 1
            left_out, self._notes_left_out = self._notes_left_out, 0
        if left_out:
            msg += f" ({left_out} more such lines not logged)"
        self._log.log(level, msg, *args)
        return True

    def _remember(self, address: str, when: float) -> list[float]:
        entry = [when, 0.0]
        self._peers[address] = entry
        while len(self._peers) > self._max_peers:
            self._peers.popitem(last=False)
        return entry


@dataclass(frozen=True)
class Refusal:
    """Why ``PeerSlots.acquire`` refused: which limit, its value, and a sentence for the client."""

    limit: str  # "connection", "address" or "total"
    maximum: int
    message: str


class _PeerLimits:
    """Limits per connection, per client address and in total (0 or less: no limit at that level), each
    named in a refusal with the option that sets it (``options``: the three, "" for none)."""

    def __init__(
        self, per_connection: int, per_address: int, total: int, options: tuple[str, str, str]
    ) -> None:
        self.per_connection = per_connection
        self.per_address = per_address
        self.total = total
        self._options = options
        self._lock = threading.Lock()

    @staticmethod
    def _too_many(what: str, where: str, maximum: int, option: str) -> str:
        hint = f" ({option})" if option else ""
        return f"too many {what} {where}: at most {maximum}{hint}"


class PeerSlots(_PeerLimits):
    """Counted slots (e.g. open watch streams) per connection, per client address and in total.

    ``acquire(connection, address)`` takes one slot or returns the ``Refusal`` naming the limit
    reached; ``release`` gives it back. A limit of 0 or less means no limit at that level. Only
    connections and addresses holding slots are remembered."""

    def __init__(
        self,
        *,
        per_connection: int,
        per_address: int,
        total: int,
        what: str = "slots",
        options: tuple[str, str, str] = ("", "", ""),
    ) -> None:
        super().__init__(per_connection, per_address, total, options)
        self._what = what
        self._by_connection: dict[str, int] = {}
        self._by_address: dict[str, int] = {}
        self._count = 0

    def _refusal(self, limit: str, maximum: int, where: str, option: str) -> Refusal:
        return Refusal(
            limit, maximum, self._too_many(self._what, where, maximum, option) + "; close one or retry later"
        )

    def acquire(self, connection: str, address: str) -> Refusal | None:
        with self._lock:
            if 0 < self.per_connection <= self._by_connection.get(connection, 0):
                return self._refusal(
                    "connection", self.per_connection, "on this connection", self._options[0]
                )
            if 0 < self.per_address <= self._by_address.get(address, 0):
                return self._refusal("address", self.per_address, f"from {address}", self._options[1])
            if 0 < self.total <= self._count:
                return self._refusal("total", self.total, "on this controller", self._options[2])
            self._by_connection[connection] = self._by_connection.get(connection, 0) + 1
            self._by_address[address] = self._by_address.get(address, 0) + 1
            self._count += 1
            return None

    def release(self, connection: str, address: str) -> None:
        with self._lock:
            for table, key in ((self._by_connection, connection), (self._by_address, address)):
                left = table.get(key, 0) - 1
                if left > 0:
                    table[key] = left
                else:
                    table.pop(key, None)
            self._count = max(0, self._count - 1)

    def count(self, connection: str | None = None, address: str | None = None) -> int:
        """Slots held on ``connection``, from ``address``, or in total (no argument)."""
        with self._lock:
            if connection is not None:
                return self._by_connection.get(connection, 0)
            if address is not None:
                return self._by_address.get(address, 0)
            return self._count


@dataclass
class _Waiting:
    connection: str
    address: str
    started: float
    cancel: Callable[[], None]
    cancelled: bool = False


class CallGuard(_PeerLimits):
    """Calls waiting for their request message, per connection, per client address and in total.

    A client sends a unary call's message right after its headers; a call whose message has not
    arrived ``stall`` seconds after the call started is *stalled*, and holds a server thread while
    it waits (a slowloris). At most ``per_connection``, ``per_address`` and ``total`` calls may be
    stalled (0: no limit at that level):

    - ``sweep`` (run every fraction of a second) cancels the stalled calls beyond the three limits,
      the latest first, and puts their connection (and address, when ``per_address`` is set) on
      probation for ``probation`` seconds;
    - ``enter`` refuses a call at once when its connection or address already has its maximum of
      stalled calls, or, on probation, its maximum of waiting calls, late or not.

    Calls that are not late never count against a connection or address that is not on probation:
    a burst of ordinary calls is never refused, and the total limit never refuses a call (it only
    cancels stalled ones)."""

    def __init__(
        self,
        *,
        per_connection: int,
        per_address: int,
        total: int,
        stall: float = 1.0,
        probation: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        options: tuple[str, str, str] = ("", "", ""),
        max_remembered: int = 4096,
    ) -> None:
        super().__init__(per_connection, per_address, total, options)
        self.stall = stall
        self.probation = probation
        self._clock = clock
        self._max_remembered = max_remembered
        self._waiting: dict[int, _Waiting] = {}
        self._next = 0
        self._on_probation: OrderedDict[tuple[str, str], float] = OrderedDict()  # (kind, key) -> until

    def _probation(self, kind: str, key: str, now: float) -> bool:
        until = self._on_probation.get((kind, key))
        return until is not None and now < until

    def enter(self, connection: str, address: str, cancel: Callable[[], None]) -> tuple[int, str | None]:
        """(token for ``leave``, None) or (0, why the call is refused)."""
        now = self._clock()
        with self._lock:
            cutoff = now - self.stall
            limits = (
                ("connection", connection, self.per_connection, "on this connection", self._options[0]),
                ("address", address, self.per_address, "from this address", self._options[1]),
            )
            for kind, key, maximum, where, option in limits:
                if maximum <= 0:
                    continue
                mine = [
                    w
                    for w in self._waiting.values()
                    if (w.connection if kind == "connection" else w.address) == key and not w.cancelled
                ]
                strict = self._probation(kind, key, now)
                count = len(mine) if strict else sum(1 for w in mine if w.started <= cutoff)
                if count >= maximum:
                    return 0, self._too_many(
                        "calls waiting for their request message", where, maximum, option
                    )
            self._next += 1
            self._waiting[self._next] = _Waiting(connection, address, now, cancel)
            return self._next, None

    def leave(self, token: int) -> None:
        with self._lock:
            self._waiting.pop(token, None)

    def waiting(self, address: str | None = None) -> int:
        """Calls waiting for their message (from ``address``)."""
        with self._lock:
            return sum(1 for w in self._waiting.values() if address is None or w.address == address)

    def sweep(self) -> dict[str, int]:
        """Cancel the stalled calls beyond the limits (the earliest stalled are kept); returns
        how many were cancelled per client address."""
        now = self._clock()
        victims: list[_Waiting] = []
        with self._lock:
            for key in [k for k, until in self._on_probation.items() if until <= now]:
                del self._on_probation[key]
            cutoff = now - self.stall
            late = sorted(
                (w for w in self._waiting.values() if w.started <= cutoff and not w.cancelled),
                key=lambda w: w.started,
            )
            by_connection: dict[str, int] = {}
            by_address: dict[str, int] = {}
            kept = 0
            for w in late:
                c, a = by_connection.get(w.connection, 0), by_address.get(w.address, 0)
                if (0 < self.per_connection <= c) or (0 < self.per_address <= a) or (0 < self.total <= kept):
                    w.cancelled = True
                    victims.append(w)
                    self._remember(("connection", w.connection), now + self.probation)
                    if self.per_address > 0:
                        self._remember(("address", w.address), now + self.probation)
                    continue
                by_connection[w.connection], by_address[w.address] = c + 1, a + 1
                kept += 1
        return _cancel(victims)

    def _remember(self, key: tuple[str, str], until: float) -> None:
        self._on_probation[key] = until
        self._on_probation.move_to_end(key)
        while len(self._on_probation) > self._max_remembered:
            self._on_probation.popitem(last=False)


def _cancel(victims: Iterable[Any]) -> dict[str, int]:
    """Cancel each stream (its ``cancel()``); how many were cancelled per client address."""
    cancelled: dict[str, int] = {}
    for victim in victims:
        cancelled[victim.address] = cancelled.get(victim.address, 0) + 1
        try:
            victim.cancel()
        except Exception:  # pragma: no cover - the call ended meanwhile
            pass
    return cancelled


class _Stream:
    __slots__ = ("address", "cancel", "last")

    def __init__(self, address: str, cancel: Callable[[], None], now: float) -> None:
        self.address = address
        self.cancel = cancel
        self.last = now


class IdleStreams:
    """Open streams and when each last moved. A stream holds a server thread while it waits for the
    client's next message, or for the client to take an answer (HTTP/2 flow control): ``sweep`` (run
    every fraction of a second) cancels the ones that have not moved for ``idle`` seconds, so a
    client that opens streams and goes quiet, or never reads, gives their threads back."""

    def __init__(self, idle: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.idle = idle
        self._clock = clock
        self._lock = threading.Lock()
        self._streams: set[_Stream] = set()

    def enter(self, address: str, cancel: Callable[[], None]) -> _Stream:
        stream = _Stream(address, cancel, self._clock())
        with self._lock:
            self._streams.add(stream)
        return stream

    def touch(self, stream: _Stream) -> None:
        """The stream moved (the hot path: one attribute, no lock)."""
        stream.last = self._clock()

    def leave(self, stream: _Stream) -> None:
        with self._lock:
            self._streams.discard(stream)

    def open(self) -> int:
        with self._lock:
            return len(self._streams)

    def sweep(self) -> dict[str, int]:
        """Cancel the streams idle for ``idle`` seconds; how many were cancelled per client address."""
        cutoff = self._clock() - self.idle
        with self._lock:
            idle = [s for s in self._streams if s.last <= cutoff]
            self._streams.difference_update(idle)
        return _cancel(idle)
