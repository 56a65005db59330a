"""Servicer + client against a real gRPC server backed by the real pure core."""

from __future__ import annotations

import socket
import threading
from typing import Any

import grpc
import pytest
from grpc_fixtures import CoreNode
from grpc_health.v1 import health_pb2, health_pb2_grpc

from mqctl.client import (
    Ack,
    ControllerClient,
    ElectMasterResult,
    Metadata,
    RegisterBrokerResult,
    RoleChange,
    parse_addresses,
)
from mqctl.errors import Code, ControllerError, UsageError
from mqctl.grpc.server import SERVICE_NAME, GrpcLimits, build_server
from mqctl.localgroup import wait_until
from mqctl.v1 import controller_pb2 as pb
from mqctl.v1 import controller_pb2_grpc as pb_grpc

C, B = "DefaultCluster", "broker-a"


def bring_up(client: ControllerClient, ids: int = 2) -> dict[int, RegisterBrokerResult]:
    """Apply ids 1..n and register each broker (as a broker would on start)."""
    regs = {}
    for i in range(1, ids + 1):
        assert client.get_next_broker_id(C, B).next_broker_id == i
        client.apply_broker_id(C, B, i, f"127.0.0.1:{30910 + i};code-{i}")
        regs[i] = client.register_broker(C, B, i, f"127.0.0.1:{30910 + i}", epoch=0, max_offset=0)
    return regs


def test_broker_lifecycle_through_the_client(core_server: Any) -> None:
    with ControllerClient(core_server.address) as c:
        regs = bring_up(c)
        assert isinstance(regs[1], RegisterBrokerResult)
        assert 0 < regs[1].broker_epoch < regs[2].broker_epoch  # strictly increasing
        assert regs[1].master_broker_id is None and regs[1].cluster_name == C

        elected = c.elect_master(C, B, 1, broker_epoch=regs[1].broker_epoch)
        assert isinstance(elected, ElectMasterResult)
        assert (elected.master_broker_id, elected.master_epoch, elected.sync_state_set) == (1, 1, (1,))
        assert elected.master_address == "127.0.0.1:30911"
        assert elected.broker_member_group is not None
        assert elected.broker_member_group.broker_addrs == {1: "127.0.0.1:30911", 2: "127.0.0.1:30912"}

        hb = c.heartbeat(C, "127.0.0.1:30912", B, 2, 1, 100, 100, 10_000, broker_epoch=regs[2].broker_epoch)
        assert isinstance(hb, Ack)

        altered = c.alter_sync_state_set(
            B,
            1,
            1,
            [1, 2],
            elected.sync_state_set_epoch or 0,
            broker_epoch=regs[1].broker_epoch,
            cluster_name=C,
        )
        assert altered.new_sync_state_set_epoch == 2
        assert set(altered.sync_state_set) == {1, 2}

        info = c.get_replica_info(B)
        assert (info.master_broker_id, info.master_epoch, info.sync_state_set_epoch) == (1, 1, 2)
        assert set(info.sync_state_set) == {1, 2}

        data = c.get_sync_state_data([B, "unknown"]).replicas_info_table
        assert list(data) == [B]
        replicas = data[B]
        assert replicas.cluster_name == C and replicas.master_broker_id == 1
        assert [r.broker_id for r in replicas.in_sync_replicas] == [1, 2]
        assert all(r.alive for r in replicas.in_sync_replicas)
        assert replicas.in_sync_replicas[1].max_offset == 100  # mqctl extension from the heartbeat table
        assert c.get_sync_state_data().replicas_info_table.keys() == {B}

        md = c.get_metadata()
        assert isinstance(md, Metadata)
        assert md.is_leader and md.commit_index == 2**40 and md.peers[0].match_index == 7
        assert md.state_hash == core_server.node.state.state_hash()


def test_error_codes_raise_controller_error_with_the_decoded_answer(core_server: Any) -> None:
    with ControllerClient(core_server.address) as c:
        with pytest.raises(ControllerError) as e:
            c.get_replica_info("nobody")
        assert e.value.code == Code.CONTROLLER_BROKER_METADATA_NOT_EXIST
        assert "not existed" in e.value.remark

        regs = bring_up(c)
        c.elect_master(C, B, 1, broker_epoch=regs[1].broker_epoch)
        with pytest.raises(ControllerError) as e:
            c.elect_master(C, B, 2, broker_epoch=regs[2].broker_epoch)
        assert e.value.code == Code.CONTROLLER_MASTER_STILL_EXIST
        assert isinstance(e.value.response, ElectMasterResult)
        assert e.value.response.master_broker_id == 1  # 2011 carries the current master

        with pytest.raises(ControllerError) as e:
            c.apply_broker_id(C, B, 1, "another-code")
        assert e.value.code == Code.CONTROLLER_BROKER_ID_INVALID
        # a conflicting write is answered once: no retries of a refused write
        assert core_server.node.methods_called().count("ApplyBrokerId") == 3


def test_config_get_and_update_without_token(core_server: Any) -> None:
    with ControllerClient(core_server.address) as c:
        assert c.get_config().config["enableElectUncleanMaster"] == "false"
        c.update_config({"enableElectUncleanMaster": True})
        assert c.get_config().config["enableElectUncleanMaster"] == "true"
        with pytest.raises(ControllerError) as e:
            c.update_config({"configStorePath": "/tmp/x"})
        assert e.value.code == Code.NO_PERMISSION


def test_clean_broker_data(core_server: Any) -> None:
    with ControllerClient(core_server.address) as c:
        regs = bring_up(c)
        c.elect_master(C, B, 1, broker_epoch=regs[1].broker_epoch)
        core_server.node.expire(B, 2)
        c.clean_broker_data(C, B, [2])
        assert sorted(core_server.node.state.broker_sets[B].brokers) == [1]


def test_node_exception_becomes_system_error_and_the_server_lives_on(core_server: Any) -> None:
    node: CoreNode = core_server.node
    with ControllerClient(core_server.address, timeout=3) as c:
        node.fail_with = RuntimeError("disk on fire")
        with pytest.raises(ControllerError) as e:
            c.get_next_broker_id(C, B)
        assert e.value.code == Code.SYSTEM_ERROR
        assert "RuntimeError: disk on fire" in e.value.remark and "\n" not in e.value.remark
        node.fail_with = None
        assert c.get_next_broker_id(C, B).next_broker_id == 1


def test_bad_answer_from_the_node_becomes_system_error(core_server: Any) -> None:
    core_server.node.answer_override = lambda m, r: {"code": 0, "next_broker_id": "not a number"}
    with ControllerClient(core_server.address, timeout=3) as c, pytest.raises(ControllerError) as e:
        c.get_next_broker_id(C, B)
    assert e.value.code == Code.SYSTEM_ERROR and "next_broker_id" in e.value.remark


def test_node_timeout_is_unavailable_and_not_retried_for_writes(core_server: Any) -> None:
    core_server.node.fail_with = TimeoutError("no quorum")
    with ControllerClient(core_server.address, timeout=3) as c, pytest.raises(ControllerError) as e:
        c.elect_master(C, B, 1)
    assert e.value.code == Code.UNAVAILABLE and "may still take effect" in e.value.remark
    assert core_server.node.methods_called() == ["ElectMaster"]


def test_busy_port_is_one_clear_line(core_server: Any) -> None:
    port = int(core_server.address.rsplit(":", 1)[1])
    with pytest.raises(UsageError) as e:
        build_server(CoreNode(), f"127.0.0.1:{port}", token=None, tls=None)
    assert str(e.value) == f"cannot listen on 127.0.0.1:{port}: address already in use"

    # also when a plain socket (not a gRPC server) holds the port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        p = s.getsockname()[1]
        with pytest.raises(UsageError, match=f"^cannot listen on 127.0.0.1:{p}: address already in use$"):
            build_server(CoreNode(), f"127.0.0.1:{p}", token=None, tls=None)
    with pytest.raises(UsageError, match="expected HOST:PORT"):
        build_server(CoreNode(), "nonsense", token=None, tls=None)


def test_health_service(core_server: Any) -> None:
    with grpc.insecure_channel(core_server.address) as ch:
        stub = health_pb2_grpc.HealthStub(ch)
        for service in ("", SERVICE_NAME):
            resp = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
            assert resp.status == health_pb2.HealthCheckResponse.SERVING
        core_server.node.serving = False
        resp = stub.Check(health_pb2.HealthCheckRequest(service=SERVICE_NAME), timeout=5)
        assert resp.status == health_pb2.HealthCheckResponse.NOT_SERVING
        # Watch subscribers hear about it from the background refresh too
        core_server.node.serving = True
        watch = stub.Watch(health_pb2.HealthCheckRequest(service=""), timeout=10)
        assert next(watch).status == health_pb2.HealthCheckResponse.SERVING
        core_server.node.serving = False
        assert next(watch).status == health_pb2.HealthCheckResponse.NOT_SERVING
        watch.cancel()


def test_raw_stub_sees_code_and_remark_with_status_ok(core_server: Any) -> None:
    """The error convention: code/remark in the response, gRPC status OK."""
    with grpc.insecure_channel(core_server.address) as ch:
        stub = pb_grpc.ControllerStub(ch)
        resp, call = stub.GetReplicaInfo.with_call(pb.GetReplicaInfoRequest(broker_name="x"), timeout=5)
        assert call.code() == grpc.StatusCode.OK
        assert resp.code == Code.CONTROLLER_BROKER_METADATA_NOT_EXIST and resp.remark
        resp = stub.ElectMaster(pb.ElectMasterRequest(cluster_name=C, broker_name=""), timeout=5)
        assert resp.code == Code.CONTROLLER_INVALID_REQUEST


def test_watch_role_changes_delivers_the_current_role_then_changes(core_server: Any) -> None:
    node: CoreNode = core_server.node
    with ControllerClient(core_server.address) as c:
        regs = bring_up(c)
        c.elect_master(C, B, 1, broker_epoch=regs[1].broker_epoch)
        watch = c.watch_role_changes(C, B)
        first = next(watch)
        assert isinstance(first, RoleChange)
        assert (first.broker_name, first.master_broker_id, first.master_epoch) == (B, 1, 1)
        wait_until(lambda: len(node.watches) == 1, what="the server-side watch")

        node.expire(B, 1)
        c.heartbeat(C, "127.0.0.1:30912", B, 2, 0, 0, broker_epoch=regs[2].broker_epoch)
        c.update_config({"enableElectUncleanMaster": "true"})
        c.elect_master(C, B)  # controller-triggered: 1 is dead, 2 takes over
        change = next(watch)
        assert (change.master_broker_id, change.master_epoch) == (2, 2)
        assert change.master_address == "127.0.0.1:30912"
        assert change.sync_state_set == (2,) and change.cluster_name == C

        watch.close()
        assert list(watch) == []
        wait_until(lambda: not node.watches, what="the server to close the node watch")


def test_watch_close_from_another_thread_unblocks_next(core_server: Any) -> None:
    with ControllerClient(core_server.address) as c:
        watch = c.watch_role_changes(C, "nobody-yet")
        got: list[Any] = []
        t = threading.Thread(target=lambda: got.extend(watch))
        t.start()
        wait_until(lambda: core_server.node.watches, what="the watch to be open")
        watch.cancel()
        t.join(5)
        assert not t.is_alive() and got == []


def test_watch_streams_are_bounded(serve: Any) -> None:
    """At most max_watches streams per node; one more gets a single SYSTEM_BUSY RoleChange naming the
    limit. Watch streams have their own threads: with every unary worker's worth of watches open,
    unary calls still get an answer (max_workers=1)."""
    limits = GrpcLimits(max_watches=2, watches_per_connection=0, watches_per_address=0)
    served = serve(CoreNode(), max_workers=1, limits=limits)
    with ControllerClient(served.address, timeout=2) as c:
        w1, w2 = c.watch_role_changes(C, "x"), c.watch_role_changes(C, "y")
        for w in (w1, w2):
            w._open(deadline=1e18)
        wait_until(lambda: len(served.node.watches) == 2, what="two watches")
        w3 = c.watch_role_changes(C, "z", reconnect=False)
        with pytest.raises(ControllerError) as e:
            next(w3)
        assert e.value.code == Code.SYSTEM_BUSY and "--grpc-max-watches" in e.value.remark
        # unary calls still get a worker
        assert c.get_next_broker_id(C, B).next_broker_id == 1
        w1.close()
        w2.close()
        # a closed stream gives its slot back
        wait_until(lambda: served.server.mqctl_servicer.watch_slots.count() == 0, what="the slots back")
        w4 = c.watch_role_changes(C, "z")
        w4._open(deadline=1e18)
        wait_until(lambda: len(served.node.watches) == 1, what="a new watch")
        w4.close()


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("a:1;b:2", ["a:1", "b:2"]),
        ("a:1, b:2,", ["a:1", "b:2"]),
        (["a:1", "b:2;c:3", "a:1"], ["a:1", "b:2", "c:3"]),
        ("[::1]:9878", ["[::1]:9878"]),
    ],
)
def test_parse_addresses(given: Any, expected: list[str]) -> None:
    assert parse_addresses(given) == expected


@pytest.mark.parametrize("bad", ["", ";", "host", "host:port", ":1"])
def test_parse_addresses_refuses_garbage(bad: str) -> None:
    with pytest.raises(UsageError):
        parse_addresses(bad)
