"""Helpers and fixtures for the gRPC transport and client tests (re-exported by conftest.py).

The servers here are real gRPC servers on loopback (mqctl.grpc.server.build_server).
Behind them sits a real pure core (mqctl.controller.core.decide on a ControllerState, under a
lock): the same decisions the Raft node makes, without pysyncobj. ``FollowerNode`` stands in for a
controller follower: it answers every call with 2007 NOT_LEADER and the leader's address.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tls_pki import PkiFiles, write_pki

from mqctl.controller import core
from mqctl.errors import Code
from mqctl.grpc.server import build_server


def now_ms() -> int:
    return int(time.time() * 1000)


class Watch:
    """A node-side role watch: an iterator over a queue, ended by close()."""

    def __init__(self, node: CoreNode, cluster_name: str, broker_name: str) -> None:
        self.node = node
        self.cluster_name = cluster_name
        self.broker_name = broker_name
        self.cond = threading.Condition()
        self.items: list[dict[str, Any]] = []
        self.closed = False

    def push(self, change: dict[str, Any]) -> None:
        with self.cond:
            self.items.append(change)
            self.cond.notify_all()

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()
        self.node.unwatch(self)

    def __iter__(self) -> Watch:
        return self

    def __next__(self) -> dict[str, Any]:
        with self.cond:
            while not self.items and not self.closed:
                self.cond.wait()
            if self.closed:
                raise StopIteration
            return self.items.pop(0)


class CoreNode:
    """NodeAPI over the pure core: handle + apply under a lock, an in-memory heartbeat table."""

    def __init__(self, config: dict[str, object] | None = None, address: str = "") -> None:
        self.state = core.ControllerState(config)
        self.lock = threading.Lock()
        self.live: dict[str, dict[int, core.LiveInfo]] = {}
        self.watches: list[Watch] = []
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.serving = True
        self.address = address  # this node's gRPC address, once known
        self.fail_with: BaseException | None = None
        self.answer_override: Callable[[str, dict[str, Any]], dict[str, Any] | None] | None = None

    # -- NodeAPI

    def call(self, method: str, request: dict[str, Any], *, timeout: float = 5.0) -> dict[str, Any]:
        with self.lock:
            self.calls.append((method, request))
            if self.fail_with is not None:
                raise self.fail_with
            if self.answer_override is not None:
                answer = self.answer_override(method, request)
                if answer is not None:
                    return answer
            before = {name: self._role(name) for name in self.state.broker_sets}
            ctx = core.Context(now_ms=now_ms(), live={k: dict(v) for k, v in self.live.items()})
            result = core.decide(self.state, method, request, ctx)
            for record in result.records:
                self.state.apply(record)
            if result.code == 0 and method in ("RegisterBroker", "Heartbeat"):
                self._beat(method, request, result.response)
            for name in self.state.broker_sets:
                role = self._role(name)
                if role != before.get(name) and role.get("master_broker_id") is not None:
                    for w in list(self.watches):
                        if not w.broker_name or w.broker_name == name:
                            w.push(role)
            return {**result.response, "code": int(result.code), "remark": result.remark}

    def metadata(self) -> dict[str, Any]:
        return {
            "code": 0,
            "group": "test",
            "group_id": "gid",
            "controller_leader_id": "raft-1",
            "controller_leader_address": self.address,
            "is_leader": True,
            "self_id": "raft-1",
            "peers": [
                {
                    "raft_address": "raft-1",
                    "grpc_address": self.address,
                    "is_leader": True,
                    "is_self": True,
                    "connected": True,
                    "match_index": 7,
                    "next_index": 8,
                }
            ],
            "term": 3,
            "commit_index": 2**40,
            "state_hash": self.state.state_hash(),
            "state": "leader",
            "has_quorum": True,
        }

    def watch(self, cluster_name: str, broker_name: str) -> Watch:
        w = Watch(self, cluster_name, broker_name)
        with self.lock:
            self.watches.append(w)
            if broker_name in self.state.broker_sets:
                role = self._role(broker_name)
                if role.get("master_broker_id") is not None:
                    w.push(role)
        return w

    def is_serving(self) -> bool:
        return self.serving

    # -- helpers

    def unwatch(self, w: Watch) -> None:
        with self.lock:
            if w in self.watches:
                self.watches.remove(w)

    def methods_called(self) -> list[str]:
        return [m for m, _ in self.calls]

    def _role(self, name: str) -> dict[str, Any]:
        bs = self.state.broker_sets[name]
        role: dict[str, Any] = {
            "cluster_name": bs.cluster_name,
            "broker_name": name,
            "master_address": bs.address_of(bs.master_broker_id),
            "master_epoch": bs.master_epoch,
            "sync_state_set_epoch": bs.sync_state_set_epoch,
            "sync_state_set": sorted(bs.sync_state_set),
        }
        if bs.master_broker_id is not None:
            role["master_broker_id"] = bs.master_broker_id
        return role

    def _beat(self, method: str, request: dict[str, Any], response: dict[str, Any]) -> None:
        name = request["broker_name"]
        bid = int(request["broker_id"])
        rows = self.live.setdefault(name, {})
        old = rows.get(bid)
        rows[bid] = core.LiveInfo(
            broker_id=bid,
            broker_address=request.get("broker_address") or request.get("broker_addr") or "",
            broker_epoch=int(
                response.get("broker_epoch")
                or request.get("broker_epoch")
                or (old.broker_epoch if old else 0)
            ),
            epoch=int(request.get("epoch", -1)),
            max_offset=int(request.get("max_offset", -1)),
            election_priority=int(request.get("election_priority", core.DEFAULT_ELECTION_PRIORITY)),
            last_heartbeat_ms=now_ms(),
            timeout_ms=int(request.get("heartbeat_timeout_mills", 10_000)),
        )

    def expire(self, broker_name: str, broker_id: int) -> None:
        """Make a broker look dead (its lease ran out)."""
        with self.lock:
            row = self.live[broker_name][broker_id]
            self.live[broker_name][broker_id] = core.LiveInfo(
                **{**row.to_dict(), "last_heartbeat_ms": 0, "timeout_ms": 1}
            )


class FollowerNode:
    """A controller follower: every call answers 2007 NOT_LEADER with the leader's address.

    ``claims_leader``: GetMetadata wrongly says this node leads (a deposed leader's stale view),
    so a client is sent here and must follow the 2007 answer. ``leader_address`` may be a
    callable, to model an election in progress ("" until a leader is known).
    """

    def __init__(self, leader_address: str | Callable[[], str], *, claims_leader: bool = False) -> None:
        self._leader = leader_address
        self.claims_leader = claims_leader
        self.calls: list[str] = []
        self.address = ""

    @property
    def leader(self) -> str:
        return self._leader() if callable(self._leader) else self._leader

    def call(self, method: str, request: dict[str, Any], *, timeout: float = 5.0) -> dict[str, Any]:
        self.calls.append(method)
        leader = self.leader
        return {
            "code": int(Code.CONTROLLER_NOT_LEADER),
            "remark": "The controller is not in leader state",
            "leader_address": leader,
        }

    def metadata(self) -> dict[str, Any]:
        if self.claims_leader:
            return {"is_leader": True, "controller_leader_address": self.address, "state": "leader"}
        return {"is_leader": False, "controller_leader_address": self.leader, "state": "follower"}

    def watch(self, cluster_name: str, broker_name: str) -> Any:
        from mqctl.errors import ControllerError

        raise ControllerError(Code.CONTROLLER_NOT_LEADER, "not the leader", leader_address=self.leader)

    def is_serving(self) -> bool:
        return True


@dataclass
class Served:
    address: str
    server: Any
    node: Any

    def stop(self) -> None:
        self.server.stop(None).wait(5)


@pytest.fixture
def serve() -> Iterator[Callable[..., Served]]:
    """serve(node, token=None, tls=None, port=0, max_workers=16, limits=None) -> Served; every server
    is stopped at teardown."""
    started: list[Served] = []

    def _serve(
        node: Any,
        *,
        token: str | None = None,
        tls: Any = None,
        port: int = 0,
        max_workers: int = 16,
        limits: Any = None,
    ) -> Served:
        server = build_server(
            node, f"127.0.0.1:{port}", token=token, tls=tls, max_workers=max_workers, limits=limits
        )
        address = f"127.0.0.1:{server.mqctl_port}"
        if hasattr(node, "address") and not node.address:
            node.address = address
        s = Served(address, server, node)
        started.append(s)
        return s

    yield _serve
    for s in started:
        s.stop()


@pytest.fixture
def core_server(serve: Callable[..., Served]) -> Served:
    return serve(CoreNode())


@pytest.fixture
def make_core_node() -> Callable[..., CoreNode]:
    return CoreNode


@pytest.fixture
def make_follower() -> Callable[..., FollowerNode]:
    return FollowerNode


def closed_port() -> int:
    """A loopback port with nothing listening on it, never the same twice (two dead addresses were
    once one: the kernel hands a just-closed port out again)."""
    from mqctl.localgroup import free_port

    return free_port()


@pytest.fixture
def dead_address() -> Callable[[], str]:
    return lambda: f"127.0.0.1:{closed_port()}"


# -- TLS material ------------------------------------------------------------------------------


@pytest.fixture
def pki(tmp_path: Path) -> PkiFiles:
    """A CA, a server cert for 127.0.0.1/localhost and a client cert, as PEM files."""
    return write_pki(tmp_path, ["localhost", "127.0.0.1"])


@pytest.fixture
def pki_named(tmp_path: Path) -> PkiFiles:
    """A server cert for the name mqctl.test only (reached through server_name=)."""
    return write_pki(tmp_path, ["mqctl.test"])
