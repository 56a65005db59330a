"""The subscribers to role changes on one node: each NodeAPI.watch stream (gRPC WatchRoleChanges, the
remoting door's one watch that becomes its NOTIFY_BROKER_ROLE_CHANGED pushes) is a RoleWatch here.

Apart from the node because a subscriber's buffer and its lock are the one place where the apply
thread meets readers it must never wait for: a stuck reader loses its oldest changes, never the newest.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Iterator
from typing import Any

log = logging.getLogger("mqctl.node")


class RoleWatch:
    """An iterator of RoleChange dicts for one subscriber; `close()` ends it."""

    def __init__(self, watches: RoleWatches, cluster_name: str, broker_name: str) -> None:
        self.cluster_name = cluster_name
        self.broker_name = broker_name
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue(maxsize=1000)
        self._watches = watches
        self.closed = False
        self._lagging = False

    def matches(self, cluster_name: str, broker_name: str) -> bool:
        return (not self.broker_name or self.broker_name == broker_name) and (
            not self.cluster_name or not cluster_name or self.cluster_name == cluster_name
        )

    def push(self, change: dict[str, Any]) -> None:
        """Never blocks the state machine: a stuck subscriber loses its *oldest* changes, so the
        last one it reads is always the newest role."""
        while True:
            try:
                self._queue.put_nowait(change)
                return
            except queue.Full:
                try:
                    self._queue.get_nowait()
                except queue.Empty:
                    continue
                if not self._lagging:
                    self._lagging = True
                    log.warning(
                        "role watch for %s is not reading; dropping its oldest changes", self.broker_name
                    )

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._watches.remove(self)
            try:
                self._queue.put_nowait(None)
            except queue.Full:  # __next__ ends once the queue is drained (closed is set)
                pass

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self

    def __next__(self) -> dict[str, Any]:
        while True:
            if self.closed and self._queue.empty():
                raise StopIteration
            try:
                item = self._queue.get(timeout=0.5)
            except queue.Empty:
                continue
            if item is None:
                raise StopIteration
            return item


class RoleWatches:
    """The open watches of a node."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watches: list[RoleWatch] = []

    def __bool__(self) -> bool:
        return bool(self._watches)

    def add(self, cluster_name: str, broker_name: str) -> RoleWatch:
        watch = RoleWatch(self, cluster_name, broker_name)
        with self._lock:
            self._watches.append(watch)
        return watch

    def remove(self, watch: RoleWatch) -> None:
        with self._lock:
            if watch in self._watches:
                self._watches.remove(watch)

    def push(self, change: dict[str, Any]) -> None:
        """To every watch of the change's broker set."""
        with self._lock:
            targets = [w for w in self._watches if w.matches(change["cluster_name"], change["broker_name"])]
        for watch in targets:
            watch.push(change)

    def close_all(self) -> None:
        for watch in list(self._watches):
            watch.close()
