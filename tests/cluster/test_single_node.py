"""One real `mqctl serve` process: the RocketMQ flow end to end, persistence, fencing, failover."""

from __future__ import annotations

import pytest
from harness import TEST_CLUSTER as CLUSTER
from harness import Beater
from harness import register_broker as register

from mqctl.client import ControllerClient
from mqctl.errors import Code, ControllerError
from mqctl.localgroup import LocalCluster, wait_until

pytestmark = pytest.mark.slow

A = ["127.0.0.1:9000", "127.0.0.1:9001", "127.0.0.1:9002"]


def fixture_m(client: ControllerClient, beater: Beater, offsets=(100, 100, 100)) -> None:
    """Reference section 12 fixture M: ids 1..3 registered, 1 elected, SyncStateSet {1,2,3}."""
    for i, addr in enumerate(A):
        nid, _ = register(client, "broker-set-a", addr)
        assert nid == i + 1
        beater.beat("broker-set-a", nid, addr, epoch=1, max_offset=offsets[i])
    first = client.elect_master(CLUSTER, "broker-set-a", 1)
    assert (first.master_broker_id, first.master_epoch, first.sync_state_set_epoch) == (1, 1, 1)
    for other in (2, 3):
        with pytest.raises(ControllerError) as err:
            client.elect_master(CLUSTER, "broker-set-a", other)
        assert err.value.code == Code.CONTROLLER_MASTER_STILL_EXIST
    alt = client.alter_sync_state_set("broker-set-a", 1, 1, [1, 2, 3], 1)
    assert alt.new_sync_state_set_epoch == 2


def test_flow_survives_restart_and_kill(single: LocalCluster) -> None:
    with ControllerClient(single.addresses, timeout=20) as client:
        beater = Beater(client)
        try:
            fixture_m(client, beater)
            data = client.get_sync_state_data(["broker-set-a"]).replicas_info_table["broker-set-a"]
            assert (data.master_broker_id, data.master_epoch, data.sync_state_set_epoch) == (1, 1, 2)
            assert [r.broker_id for r in data.in_sync_replicas] == [1, 2, 3]
            assert all(r.alive and r.max_offset == 100 and r.epoch == 1 for r in data.in_sync_replicas)
        finally:
            beater.stop()
        before = single.hashes()["node0"]
    node = single.nodes[0]
    assert node.stop() == 0  # SIGTERM: clean shutdown, exit 0
    node.start()
    single.wait_for_leader()
    assert single.hashes()["node0"] == before
    node.kill()
    node.start()
    single.wait_for_leader()
    assert single.hashes()["node0"] == before
    with ControllerClient(single.addresses, timeout=20) as client:
        info = client.get_replica_info("broker-set-a")
        assert (info.master_broker_id, info.master_epoch, info.sync_state_set) == (1, 1, (1, 2, 3))
        assert client.get_next_broker_id(CLUSTER, "broker-set-a").next_broker_id == 4


def test_dead_master_is_replaced_and_watchers_told(single: LocalCluster) -> None:
    with ControllerClient(single.addresses, timeout=20) as client:
        beater = Beater(client)
        try:
            fixture_m(client, beater, offsets=(300, 100, 200))
            watch = client.watch_role_changes(CLUSTER, "broker-set-a")
            first = next(iter(watch))
            assert first.master_broker_id == 1
            beater.silence("broker-set-a", 1)
            change = next(iter(watch))  # blocks until the controller elects
            watch.close()
            # the freshest alive member of the SyncStateSet wins: same epoch, 3 has more data
            assert (change.master_broker_id, change.master_epoch) == (3, 2)
            info = client.get_replica_info("broker-set-a")
            assert (info.master_broker_id, info.master_address, info.sync_state_set) == (3, A[2], (3,))
        finally:
            beater.stop()


def test_stale_broker_epoch_is_fenced(single: LocalCluster) -> None:
    with ControllerClient(single.addresses, timeout=20) as client:
        nid, old_epoch = register(client, "bs", A[0])
        new_epoch = client.register_broker(CLUSTER, "bs", nid, A[0]).broker_epoch
        assert new_epoch > old_epoch
        client.heartbeat(CLUSTER, A[0], "bs", nid, broker_epoch=new_epoch)
        with pytest.raises(ControllerError) as err:
            client.heartbeat(CLUSTER, A[0], "bs", nid, broker_epoch=old_epoch)
        assert err.value.code == Code.STALE_BROKER_EPOCH
        with pytest.raises(ControllerError) as err:
            client.elect_master(CLUSTER, "bs", nid, broker_epoch=old_epoch)
        assert err.value.code == Code.STALE_BROKER_EPOCH
        client.elect_master(CLUSTER, "bs", nid, broker_epoch=new_epoch)
        with pytest.raises(ControllerError) as err:
            client.alter_sync_state_set("bs", nid, 1, [nid, 99], 1, broker_epoch=old_epoch)
        assert err.value.code == Code.STALE_BROKER_EPOCH
        # every registration gets a new, strictly increasing brokerEpoch, across broker sets
        _, other = register(client, "bs-2", A[1])
        assert other > new_epoch


@pytest.mark.parametrize(
    ("max_offset", "master"),
    [(10, (2, 2)), (2000, (1, 1))],
    ids=[
        "bounced-with-less-data-loses-the-role-to-a-fresher-replica",
        "bounced-with-all-its-data-keeps-the-role",
    ],
)
def test_master_that_bounces(single: LocalCluster, max_offset: int, master: tuple[int, int]) -> None:
    """Broker 1, master of [1, 2] at offset 1000, registers again while its old heartbeats are still
    fresh: with less data than broker 2 it loses the role, with all of it it keeps the role."""
    with ControllerClient(single.addresses, timeout=20) as client:
        beater = Beater(client)
        try:
            for addr in A[:2]:
                nid, _ = register(client, "bs", addr)
                beater.beat("bs", nid, addr, epoch=1, max_offset=1000)
            client.elect_master(CLUSTER, "bs", 1)
            client.alter_sync_state_set("bs", 1, 1, [1, 2], 1)
            reg = client.register_broker(CLUSTER, "bs", 1, A[0], epoch=1, max_offset=max_offset)
            assert (reg.master_broker_id, reg.master_epoch) == master
            assert client.get_replica_info("bs").master_broker_id == master[0]
        finally:
            beater.stop()


def test_wait_for_n_elects_the_freshest(tmp_path) -> None:
    with LocalCluster(str(tmp_path), size=1, extra_args=["--wait-for", "2"]) as cluster:
        cluster.start()
        with ControllerClient(cluster.addresses, timeout=20) as client:
            beater = Beater(client)
            try:
                nid1, _ = register(client, "bs", A[0])
                beater.beat("bs", nid1, A[0], epoch=0, max_offset=10)
                with pytest.raises(ControllerError) as err:
                    client.elect_master(CLUSTER, "bs", nid1)
                assert err.value.code == Code.WAITING_FOR_REPLICAS
                assert "(1/2)" in err.value.remark
                nid2, _ = register(client, "bs", A[1])
                beater.beat("bs", nid2, A[1], epoch=0, max_offset=500)
                # nobody asks again: the controller elects once 2 are alive, and picks the freshest
                info = wait_until(
                    lambda: (
                        client.get_replica_info("bs").master_broker_id is not None
                        and client.get_replica_info("bs")
                    ),
                    15,
                    what="first election",
                )
                assert info.master_broker_id == nid2
            finally:
                beater.stop()


@pytest.mark.parametrize(
    "call,code",
    [
        (lambda c: c.get_replica_info("no-such-set"), Code.CONTROLLER_BROKER_METADATA_NOT_EXIST),
        (lambda c: c.apply_broker_id(CLUSTER, "new-set", 7, "a:1;1"), Code.CONTROLLER_BROKER_ID_INVALID),
        (lambda c: c.apply_broker_id(CLUSTER, "bs", -1, "a:1;1"), Code.CONTROLLER_INVALID_REQUEST),
        (lambda c: c.apply_broker_id(CLUSTER, "bs", 2**62, "a:1;1"), Code.CONTROLLER_INVALID_REQUEST),
        (lambda c: c.apply_broker_id(CLUSTER, "", 1, "a:1;1"), Code.CONTROLLER_INVALID_REQUEST),
        (lambda c: c.apply_broker_id(CLUSTER, "x" * 5000, 1, "a:1;1"), Code.CONTROLLER_INVALID_REQUEST),
        (
            lambda c: c.register_broker(CLUSTER, "no-such-set", 1, "a:1"),
            Code.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
        ),
        (lambda c: c.elect_master(CLUSTER, "no-such-set", 1), Code.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED),
        (
            lambda c: c.alter_sync_state_set("no-such-set", 1, 1, [1], 0),
            Code.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
        ),
        (
            lambda c: c.clean_broker_data(CLUSTER, "no-such-set", "1", True),
            Code.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
        ),
        (lambda c: c.update_config({"configStorePath": "/tmp"}), Code.NO_PERMISSION),
        (lambda c: c.update_config({"noSuchKey": "1", "waitFor": "0"}), Code.CONTROLLER_INVALID_REQUEST),
    ],
)
def test_bad_input_gets_a_code_and_the_server_stays_up(single: LocalCluster, call, code) -> None:
    with ControllerClient(single.addresses, timeout=20) as client:
        with pytest.raises(ControllerError) as err:
            call(client)
        assert err.value.code == code, err.value
        assert client.get_metadata().is_leader
    assert single.nodes[0].alive()


def test_token_guards_mutating_admin_calls(tmp_path) -> None:
    with LocalCluster(str(tmp_path), size=1, extra_args=["--token", "s3cret"]) as cluster:
        cluster.start()
        with ControllerClient(cluster.addresses, timeout=20) as anon:
            register(anon, "bs", A[0])  # broker calls need no token
            for call in (
                lambda c: c.elect_master(CLUSTER, "bs", 1, True),
                lambda c: c.clean_broker_data(CLUSTER, "bs", None, True),
                lambda c: c.update_config({"enableElectUncleanMaster": "true"}),
            ):
                with pytest.raises(ControllerError) as err:
                    call(anon)
                assert err.value.code == Code.UNAUTHENTICATED
        with ControllerClient(cluster.addresses, token="s3cret", timeout=20) as admin:
            admin.update_config({"enableElectUncleanMaster": "true"})
            assert admin.get_config().config["enableElectUncleanMaster"] == "true"
