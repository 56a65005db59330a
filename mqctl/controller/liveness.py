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

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from mqctl.controller.core import DEFAULT_ELECTION_PRIORITY, DEFAULT_HEARTBEAT_TIMEOUT_MS, Context, LiveInfo

__all__ = ["HeartbeatTable"]


def _opt_int(request: Mapping[str, Any], key: str) -> int | None:
    v = request.get(key)
    if v is None or isinstance(v, bool) or not isinstance(v, int):
        return None
    return v


@dataclass
class _Row:
    cluster_name: str
    info: LiveInfo


class HeartbeatTable:
    def __init__(self, default_timeout_ms: int = DEFAULT_HEARTBEAT_TIMEOUT_MS) -> None:
        self.default_timeout_ms = default_timeout_ms
        self._rows: dict[tuple[str, int], _Row] = {}

    def __len__(self) -> int:
        return len(self._rows)

    def on_heartbeat(self, request: Mapping[str, Any], now_ms: int) -> LiveInfo | None:
        """Record a Heartbeat request (proto field names). Returns the row, or None when the
        heartbeat was ignored (no broker_id or broker_name, or an older broker_epoch)."""
        name = request.get("broker_name")
        bid = _opt_int(request, "broker_id")
        if not isinstance(name, str) or not name or bid is None:
            return None
        cluster = request.get("cluster_name")
        cluster = cluster if isinstance(cluster, str) else ""
        address = request.get("broker_addr")
        address = address if isinstance(address, str) else ""
        broker_epoch = _opt_int(request, "broker_epoch")
        epoch = _opt_int(request, "epoch")
        max_offset = _opt_int(request, "max_offset")
        confirm_offset = _opt_int(request, "confirm_offset")
        timeout = _opt_int(request, "heartbeat_timeout_mills")
        priority = _opt_int(request, "election_priority")
        epoch = -1 if epoch is None else epoch
        max_offset = -1 if max_offset is None else max_offset
        confirm_offset = -1 if confirm_offset is None else confirm_offset
        timeout = self.default_timeout_ms if timeout is None or timeout <= 0 else timeout
        priority = DEFAULT_ELECTION_PRIORITY if priority is None else priority

        key = (name, bid)
        row = self._rows.get(key)
        if row is not None and broker_epoch is not None and broker_epoch < row.info.broker_epoch:
            return None
        if row is None or (broker_epoch is not None and broker_epoch > row.info.broker_epoch):
            info = LiveInfo(bid, address, broker_epoch or 0, epoch, max_offset, confirm_offset, priority,
                            now_ms, timeout)
            self._rows[key] = _Row(cluster, info)
            return info
        old = row.info
        info = replace(old, broker_address=address or old.broker_address, last_heartbeat_ms=now_ms,
                       timeout_ms=timeout, election_priority=priority)
        if epoch > old.epoch or (epoch == old.epoch and max_offset > old.max_offset):
            info = replace(info, epoch=epoch, max_offset=max_offset, confirm_offset=confirm_offset)
        row.info = info
        if cluster:
            row.cluster_name = cluster
        return info

    def on_register(self, cluster_name: str, broker_name: str, broker_id: int, address: str,
                    broker_epoch: int, epoch: int | None = None, max_offset: int | None = None,
                    confirm_offset: int | None = None, election_priority: int | None = None,
                    timeout_ms: int | None = None, now_ms: int = 0) -> LiveInfo | None:
        """A successful RegisterBroker: a new incarnation of a broker. As in RocketMQ, only a heartbeat
        makes a broker alive: a row it has takes the new brokerEpoch and what the registration
        reported, with its last heartbeat unchanged; without a row nothing is recorded (the
        broker's first heartbeat creates it)."""
        row = self._rows.get((broker_name, broker_id))
        if row is None:
            return None
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
        self._rows[(broker_name, broker_id)] = _Row(cluster_name, info)
        return info

    def get(self, broker_name: str, broker_id: int) -> LiveInfo | None:
        row = self._rows.get((broker_name, broker_id))
        return None if row is None else row.info

    def is_alive(self, broker_name: str, broker_id: int, now_ms: int) -> bool:
        info = self.get(broker_name, broker_id)
        return info is not None and info.is_alive(now_ms)

    def snapshot(self, broker_name: str) -> dict[int, LiveInfo]:
        """broker_id -> row for one broker set (rows may be expired)."""
        return {bid: row.info for (name, bid), row in sorted(self._rows.items()) if name == broker_name}

    def snapshot_all(self) -> dict[str, dict[int, LiveInfo]]:
        out: dict[str, dict[int, LiveInfo]] = {}
        for (name, bid), row in sorted(self._rows.items()):
            out.setdefault(name, {})[bid] = row.info
        return out

    def context(self, now_ms: int, broker_names: Iterable[str] | None = None) -> Context:
        """A Context for the core: the given broker sets (all when None)."""
        live = self.snapshot_all()
        if broker_names is not None:
            wanted = set(broker_names)
            live = {n: rows for n, rows in live.items() if n in wanted}
        return Context(now_ms=now_ms, live=live)

    def expired(self, now_ms: int) -> list[tuple[str, str, int]]:
        """Remove and return (cluster, broker_name, broker_id) of rows with now - last > timeout."""
        gone = [(row.cluster_name, name, bid) for (name, bid), row in sorted(self._rows.items())
                if now_ms - row.info.last_heartbeat_ms > row.info.timeout_ms]
        for _, name, bid in gone:
            del self._rows[(name, bid)]
        return gone

    def remove(self, broker_name: str, broker_ids: Iterable[int] | None = None) -> None:
        """Forget rows of a broker set (all when broker_ids is None), e.g. after CleanBrokerData."""
        if broker_ids is None:
            for key in [k for k in self._rows if k[0] == broker_name]:
                del self._rows[key]
            return
        for bid in broker_ids:
            self._rows.pop((broker_name, bid), None)

    def next_expiry_ms(self) -> int | None:
        """The earliest last + timeout among rows (a row is dead strictly after it), None if empty."""
        if not self._rows:
            return None
        return min(r.info.last_heartbeat_ms + r.info.timeout_ms for r in self._rows.values())
