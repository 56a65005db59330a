"""The client's leader discovery, NOT_LEADER redirects, retries and deadline."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import grpc
import pytest
from grpc_fixtures import CoreNode, FollowerNode

from mqctl.client import ControllerClient
from mqctl.errors import Code, ControllerError
from mqctl.grpc.server import ControllerServicer
from mqctl.localgroup import wait_until

C, B = "DefaultCluster", "broker-a"


def test_discovery_goes_straight_to_the_leader(serve: Any) -> None:
    leader = serve(CoreNode())
    follower = serve(FollowerNode(leader.address))
    with ControllerClient([follower.address]) as c:
        assert c.get_next_broker_id(C, B).next_broker_id == 1
        assert c.leader == leader.address
    assert follower.node.calls == []  # GetMetadata named the leader; no write went to the follower


def test_not_leader_answer_is_followed(serve: Any) -> None:
    leader = serve(CoreNode())
    # a deposed leader: its metadata still says "me", its answers say 2007 + the new leader
    stale = serve(FollowerNode(leader.address, claims_leader=True))
    # the client knows only the stale node (discovery asks every node at once and takes the first that
    # says it leads: with both known, either may answer first)
    with ControllerClient([stale.address]) as c:
        c.apply_broker_id(C, B, 1, "code")  # a write: retried on NOT_LEADER, it was not executed
        assert c.leader == leader.address
        assert c.get_next_broker_id(C, B).next_broker_id == 2
    assert stale.node.calls == ["ApplyBrokerId"]
    assert leader.node.methods_called() == ["ApplyBrokerId", "GetNextBrokerId"]


def test_not_leader_while_an_election_runs_is_retried(serve: Any) -> None:
    leader = serve(CoreNode())
    known = threading.Event()
    follower = serve(FollowerNode(lambda: leader.address if known.is_set() else "", claims_leader=True))
    with ControllerClient(follower.address, timeout=10) as c:
        result: list[Any] = []
        t = threading.Thread(target=lambda: result.append(c.get_next_broker_id(C, B)))
        t.start()
        wait_until(lambda: len(follower.node.calls) >= 3, what="the client to retry during the election")
        known.set()
        t.join(10)
    assert result and result[0].next_broker_id == 1


def test_unreachable_controllers_raise_2104_after_the_deadline(dead_address: Any) -> None:
    a, b = dead_address(), dead_address()
    start = time.monotonic()
    with ControllerClient(f"{a},{b}", timeout=1.0) as c, pytest.raises(ControllerError) as e:
        c.get_replica_info(B)
    elapsed = time.monotonic() - start
    assert e.value.code == Code.UNAVAILABLE
    assert e.value.remark.startswith(f"no controller reachable at {a}, {b} (last error: ")
    assert "Connection refused" in e.value.remark
    assert 0.9 <= elapsed < 3.0


def test_writes_are_retried_on_connection_failure_before_sending(serve: Any, dead_address: Any) -> None:
    leader = serve(CoreNode())
    # the first address is dead: the write was never sent there, so going on is safe
    with ControllerClient([dead_address(), leader.address], timeout=5) as c:
        c.apply_broker_id(C, B, 1, "code")
    assert leader.node.methods_called() == ["ApplyBrokerId"]


def test_a_server_that_comes_up_later_is_found(serve: Any, dead_address: Any, caplog: Any) -> None:
    caplog.set_level(logging.DEBUG, logger="mqctl.client")
    address = dead_address()
    port = int(address.rsplit(":", 1)[1])
    with ControllerClient(address, timeout=10) as c:
        result: list[Any] = []
        t = threading.Thread(target=lambda: result.append(c.get_next_broker_id(C, B)))
        t.start()
        wait_until(
            lambda: sum("retrying GetNextBrokerId" in r.getMessage() for r in caplog.records) >= 2,
            what="the client to be retrying",
        )
        serve(CoreNode(), port=port)
        t.join(10)
    assert result and result[0].next_broker_id == 1


def test_server_side_2104_retried_for_reads_not_for_writes(serve: Any) -> None:
    node = CoreNode()
    unavailable = {"left": 3}

    def flaky(method: str, request: dict[str, Any]) -> dict[str, Any] | None:
        if unavailable["left"] > 0:
            unavailable["left"] -= 1
            return {"code": int(Code.UNAVAILABLE), "remark": "the controller group could not commit"}
        return None

    node.answer_override = flaky
    served = serve(node)
    with ControllerClient(served.address, timeout=5) as c:
        assert c.get_next_broker_id(C, B).next_broker_id == 1  # read: retried through 3 failures
        assert node.methods_called() == ["GetNextBrokerId"] * 4
        node.calls.clear()
        unavailable["left"] = 1
        c.apply_broker_id(C, B, 1, "code")  # an idempotent write (methods.py): retried
        assert node.methods_called() == ["ApplyBrokerId"] * 2
        node.calls.clear()
        unavailable["left"] = 1
        with pytest.raises(ControllerError) as e:
            c.elect_master(C, B, 1)  # write: outcome unknown, not retried
        assert e.value.code == Code.UNAVAILABLE
        assert node.methods_called() == ["ElectMaster"]


class _DroppingServicer(ControllerServicer):
    """Fails the first calls at the transport level after the request arrived."""

    def __init__(self, node: Any, drops: int) -> None:
        super().__init__(node)
        self.drops = drops
        self.seen: list[str] = []

    def _answer(self, method: str, request: Any, context: grpc.ServicerContext) -> Any:
        self.seen.append(method)
        if self.drops > 0:
            self.drops -= 1
            context.abort(grpc.StatusCode.UNAVAILABLE, "Socket closed")
        return super()._answer(method, request, context)


@pytest.fixture
def dropping_server() -> Any:
    from concurrent import futures

    from mqctl.v1 import controller_pb2_grpc as pb_grpc

    servers = []

    def start(drops: int) -> tuple[str, _DroppingServicer]:
        server = grpc.server(futures.ThreadPoolExecutor(4))
        servicer = _DroppingServicer(CoreNode(), drops)
        pb_grpc.add_ControllerServicer_to_server(servicer, server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        servers.append(server)
        servicer._node.address = f"127.0.0.1:{port}"  # type: ignore[attr-defined]
        return servicer._node.address, servicer  # type: ignore[attr-defined]

    yield start
    for s in servers:
        s.stop(None)


def test_write_lost_after_sending_is_not_retried(dropping_server: Any) -> None:
    address, servicer = dropping_server(drops=1)
    with ControllerClient(address, timeout=5) as c:
        with pytest.raises(ControllerError) as e:
            c.elect_master(C, B, 1)
        assert e.value.code == Code.UNAVAILABLE and "outcome unknown" in e.value.remark
        assert servicer.seen == ["ElectMaster"]
        # an idempotent write (a new brokerEpoch the broker keeps) in the same situation is retried
        servicer.drops = 1
        c.apply_broker_id(C, B, 1, "127.0.0.1:30911;1")
        assert c.register_broker(C, B, 1, "127.0.0.1:30911").broker_epoch > 0
        assert servicer.seen[1:] == ["ApplyBrokerId", "ApplyBrokerId", "RegisterBroker"]
        # a read in the same situation is retried
        servicer.drops = 2
        assert c.get_next_broker_id(C, B).next_broker_id == 2
        assert servicer.seen[4:] == ["GetNextBrokerId"] * 3


def test_transport_errors_that_are_not_transient_are_not_retried(dropping_server: Any) -> None:
    address, servicer = dropping_server(drops=0)

    def boom(method: str, request: Any, context: grpc.ServicerContext) -> Any:
        servicer.seen.append(method)
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, "nope")

    servicer._answer = boom  # type: ignore[method-assign]
    with ControllerClient(address, timeout=5) as c, pytest.raises(ControllerError) as e:
        c.get_replica_info(B)
    assert e.value.code == Code.SYSTEM_ERROR and "INVALID_ARGUMENT" in e.value.remark
    assert servicer.seen == ["GetReplicaInfo"]


def test_get_metadata_from_a_given_node_and_any_node(serve: Any) -> None:
    leader = serve(CoreNode())
    follower = serve(FollowerNode(leader.address))
    with ControllerClient([follower.address, leader.address]) as c:
        md = c.get_metadata(follower.address)
        assert not md.is_leader and md.controller_leader_address == leader.address
        assert md.address == follower.address
        md = c.get_metadata()
        assert md.is_leader and md.address == leader.address


def test_watch_follows_not_leader_and_reconnects(serve: Any) -> None:
    node = CoreNode()
    leader = serve(node)
    port = int(leader.address.rsplit(":", 1)[1])
    stale = serve(FollowerNode(leader.address, claims_leader=True))
    with ControllerClient(leader.address) as setup:
        setup.apply_broker_id(C, B, 1, "x")
        epoch = setup.register_broker(C, B, 1, "127.0.0.1:30911").broker_epoch
        setup.elect_master(C, B, 1, broker_epoch=epoch)
    with ControllerClient(stale.address, timeout=10) as c, c.watch_role_changes(C, B) as watch:
        assert next(watch).master_broker_id == 1  # found through the 2007 answer
        # the leader restarts on the same port: the watch reconnects and sees the role again
        leader.stop()
        restarted = serve(node, port=port)
        assert next(watch).master_epoch == 1
        wait_until(lambda: len(node.watches) == 1, what="the re-opened watch")
        assert restarted.address == leader.address
