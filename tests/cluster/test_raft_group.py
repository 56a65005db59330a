"""Three real `mqctl serve` processes forming a Raft group on loopback."""

from __future__ import annotations

import threading

import grpc
import pytest
from harness import TEST_CLUSTER as CLUSTER
from harness import Beater
from harness import register_broker as register

from mqctl.client import ControllerClient
from mqctl.errors import Code, ControllerError
from mqctl.localgroup import LocalCluster, metadata, wait_until
from mqctl.v1 import controller_pb2 as pb
from mqctl.v1 import controller_pb2_grpc as pb_grpc

pytestmark = pytest.mark.slow


def test_kill_leader_during_writes_loses_no_acknowledged_write(trio: LocalCluster) -> None:
    acked: list[str] = []
    lock = threading.Lock()
    errors: list[str] = []
    kill_now = threading.Event()

    def writer(t: int) -> None:
        with ControllerClient(trio.addresses, timeout=30) as client:
            for i in range(40):
                name = f"bs-{t}-{i}"
                try:
                    client.apply_broker_id(CLUSTER, name, 1, f"10.0.{t}.{i}:10911;1")
                except ControllerError as exc:
                    # outcome unknown: a commit timeout (1) or the connection to the killed
                    # leader broke after sending (2104); anything else is a bug
                    if exc.code not in (Code.SYSTEM_ERROR, Code.UNAVAILABLE):
                        errors.append(f"{name}: {exc}")
                    continue
                with lock:
                    acked.append(name)
                    if len(acked) == 60:
                        kill_now.set()

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    assert kill_now.wait(60), "writes did not start"
    old_leader = trio.leader()
    assert old_leader is not None
    old_leader.kill()
    for th in threads:
        th.join(120)
    assert not errors, errors[:5]
    new_leader = trio.wait_for_leader(exclude=old_leader)
    assert new_leader is not old_leader
    with ControllerClient(new_leader.grpc_address, timeout=30) as client:
        data = client.get_sync_state_data([]).replicas_info_table
        missing = [name for name in acked if name not in data]
        assert not missing, f"acknowledged writes lost: {missing[:10]}"
    old_leader.start()
    digest = trio.wait_for_same_hash(timeout=30)
    assert len(digest) == 64
    assert "Traceback" not in "".join(n.log_text() for n in trio.nodes)


def test_whole_group_restart_recovers_state(trio: LocalCluster) -> None:
    with ControllerClient(trio.addresses, timeout=30) as client:
        beater = Beater(client)
        try:
            for addr in ("127.0.0.1:9000", "127.0.0.1:9001"):
                nid, _ = register(client, "bs", addr)
                beater.beat("bs", nid, addr, epoch=1, max_offset=5)
            client.elect_master(CLUSTER, "bs", 1)
            client.alter_sync_state_set("bs", 1, 1, [1, 2], 1)
        finally:
            beater.stop()
    before = trio.wait_for_same_hash()
    group_id = metadata(trio.nodes[0].grpc_address)["group_id"]
    for node in trio.nodes:
        node.kill()
    for node in trio.nodes:
        node.start()
    trio.wait_for_leader()
    assert trio.wait_for_same_hash() == before
    for node in trio.nodes:
        assert node.stop() == 0
    for node in trio.nodes:
        node.start()
    trio.wait_for_leader()
    assert trio.wait_for_same_hash() == before
    assert {metadata(n.grpc_address)["group_id"] for n in trio.nodes} == {group_id}
    with ControllerClient(trio.addresses, timeout=30) as client:
        info = client.get_replica_info("bs")
        assert (info.master_broker_id, info.master_epoch, info.sync_state_set, info.sync_state_set_epoch) == (
            1,
            1,
            (1, 2),
            2,
        )


def test_conflicting_apply_broker_id_exactly_one_wins(trio: LocalCluster) -> None:
    with ControllerClient(trio.addresses, timeout=30) as client:
        register(client, "bs", "127.0.0.1:9000")
    results: list[object] = [None] * 50

    def apply(i: int) -> None:
        with ControllerClient(trio.addresses, timeout=30) as client:
            try:
                client.apply_broker_id(CLUSTER, "bs", 2, f"127.0.0.{i}:9000;{i}")
                results[i] = "ok"
            except ControllerError as exc:
                results[i] = exc.code

    threads = [threading.Thread(target=apply, args=(i,)) for i in range(50)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    assert results.count("ok") == 1
    assert all(r == Code.CONTROLLER_BROKER_ID_INVALID for r in results if r != "ok")
    trio.wait_for_same_hash()


def test_follower_answers_writes_with_not_leader_and_the_leader_address(trio: LocalCluster) -> None:
    leader = trio.leader()
    assert leader is not None
    follower = next(n for n in trio.nodes if n is not leader)
    meta = metadata(follower.grpc_address)
    assert meta["controller_leader_address"] == leader.grpc_address
    assert not meta["is_leader"] and meta["group_id"]
    with grpc.insecure_channel(follower.grpc_address) as channel:
        stub = pb_grpc.ControllerStub(channel)
        resp = stub.ApplyBrokerId(
            pb.ApplyBrokerIdRequest(
                cluster_name=CLUSTER, broker_name="bs", applied_broker_id=1, register_check_code="a:1;1"
            ),
            timeout=5,
        )
        assert resp.code == Code.CONTROLLER_NOT_LEADER
        assert resp.leader_address == leader.grpc_address


def test_node_with_different_critical_options_refuses_to_join(trio: LocalCluster) -> None:
    node = trio.nodes[2]
    node.stop()
    node.args += ["--wait-for", "2"]
    node.start()
    wait_until(lambda: not node.alive(), 30, what="the misconfigured node to exit")
    assert node.proc is not None and node.proc.returncode == 2
    assert "waitFor" in node.log_text()


def test_follower_log_truncation_under_load_never_diverges(trio: LocalCluster) -> None:
    """pysyncobj followers log 'state machine may have diverged' when a pipelined resend
    overlaps entries they already applied (docs/raft-safety.md). Drive that path hard and check
    every node ends with the same state, holding exactly the acknowledged writes."""
    acked: list[str] = []
    lock = threading.Lock()

    def writer(t: int) -> None:
        with ControllerClient(trio.addresses, timeout=30) as client:
            for i in range(60):
                name = f"load-{t}-{i}"
                client.apply_broker_id(CLUSTER, name, 1, f"127.0.0.1:{20000 + 100 * t + i};1")
                with lock:
                    acked.append(name)

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    assert len(acked) == 480
    trio.wait_for_same_hash(timeout=30)  # every node applied the same entries
    with ControllerClient(trio.addresses, timeout=30) as client:
        table = client.get_sync_state_data([]).replicas_info_table
    assert sorted(table) == sorted(acked)
    diverged = sum(n.log_text().count("state machine may have diverged") for n in trio.nodes)
    print(f"follower truncations of applied entries logged: {diverged}")
