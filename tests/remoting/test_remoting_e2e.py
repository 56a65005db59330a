"""End to end over RocketMQ remoting against three real `mqctl serve --remoting-port` nodes: brokers
register (1012/1013/1003), beat (904, one-way, to every controller), elect (1002), alter the
SyncStateSet (1001) and fail over, with NOTIFY_BROKER_ROLE_CHANGED (1008) pushed to each alive
replica's registered address (where a RocketMQ broker listens), also after a controller leader
change; what remoting reads (1004, 1006, 1010) equals what gRPC reads."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from harness import TEST_CLUSTER, start_remoting, with_remoting_ports
from remoting_fixtures import BrokerListener

from mqctl.client import ControllerClient, RoleChange, SyncStateDataResult
from mqctl.localgroup import LocalCluster, wait_until
from mqctl.remoting import headers
from mqctl.remoting.client import RemotingControllerClient, RemotingError, role_change_of

pytestmark = pytest.mark.slow


class RemotingBroker:
    """What a RocketMQ broker does towards its controllers, over remoting, on its own connections."""

    def __init__(self, addresses: list[str], broker_name: str) -> None:
        self.client = RemotingControllerClient(addresses, timeout=20)
        self.addresses = addresses
        self.broker_name = broker_name
        self.listener = BrokerListener()  # the broker's own port: its registered address
        self.address = self.listener.address
        self.broker_id = 0
        self.beating = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat_loop, daemon=True)

    def register(self) -> int:
        c = self.client
        self.broker_id = c.get_next_broker_id(TEST_CLUSTER, self.broker_name).next_broker_id
        c.apply_broker_id(TEST_CLUSTER, self.broker_name, self.broker_id, f"{self.address};1700000000000")
        c.register_broker(
            TEST_CLUSTER, self.broker_name, self.broker_id, self.address, heartbeat_timeout_mills=1500
        )
        self.beating.set()
        self._thread.start()
        return self.broker_id

    def _beat_loop(self) -> None:
        while not self._stop.wait(0.2):
            if not self.beating.is_set():
                continue
            _, ext, body = headers.encode_request(
                "Heartbeat",
                {
                    "cluster_name": TEST_CLUSTER,
                    "broker_addr": self.address,
                    "broker_name": self.broker_name,
                    "broker_id": self.broker_id,
                    "epoch": 1,
                    "max_offset": 100,
                    "heartbeat_timeout_mills": 1500,
                },
            )
            for addr in self.addresses:  # one-way, to every controller, as RocketMQ brokers do
                try:
                    self.client.connection(addr).oneway(headers.BROKER_HEARTBEAT, ext, body)
                except RemotingError:
                    pass

    def notifications(self) -> list[RoleChange]:
        """The 1008s received where the broker listens; none may come over its own connections."""
        for addr in self.addresses:
            try:
                assert self.client.connection(addr).next_incoming(0) is None
            except RemotingError:
                continue
        out = []
        for cmd in self.listener.take():
            assert cmd.code == headers.NOTIFY_BROKER_ROLE_CHANGED and cmd.is_oneway
            out.append(role_change_of(cmd))
        return out

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.client.close()
        self.listener.close()


@pytest.fixture
def trio(tmp_path) -> Iterator[tuple[LocalCluster, list[str]]]:
    cluster = LocalCluster(str(tmp_path), size=3)
    addresses = with_remoting_ports(cluster)
    with cluster:
        start_remoting(cluster, addresses)
        yield cluster, addresses


def _replicas(client: RemotingControllerClient, broker_name: str = "broker-a") -> list[Any]:
    info = client.get_sync_state_data([broker_name]).replicas_info_table[broker_name]
    return [*info.in_sync_replicas, *info.not_in_sync_replicas]


def _no_age(result: SyncStateDataResult) -> dict[str, Any]:
    """The table without heartbeat ages (they tick between two reads)."""
    return {
        name: dataclasses.replace(
            info,
            in_sync_replicas=tuple(
                dataclasses.replace(r, heartbeat_age_ms=None) for r in info.in_sync_replicas
            ),
            not_in_sync_replicas=tuple(
                dataclasses.replace(r, heartbeat_age_ms=None) for r in info.not_in_sync_replicas
            ),
        )
        for name, info in result.replicas_info_table.items()
    }


def test_register_beat_elect_fail_over_and_read_the_same_state(trio: tuple[LocalCluster, list[str]]) -> None:
    cluster, remoting = trio
    leader = cluster.wait_for_leader()
    leader_remoting = remoting[cluster.nodes.index(leader)]
    brokers: list[RemotingBroker] = []
    with (
        RemotingControllerClient(remoting, timeout=20) as admin,
        ControllerClient(cluster.addresses, timeout=20) as grpc_client,
    ):
        # 1005 on any node names the leader's remoting address; every node knows every remoting address
        # (a node learns the others' remoting addresses from the replicated state: wait for it)
        wait_until(
            lambda: admin.get_metadata().controller_leader_address == leader_remoting,
            20,
            what="the leader's remoting address in 1005",
        )
        for address in remoting:
            meta = wait_until(
                lambda a=address: (
                    (m := admin.get_metadata(a))
                    and sorted(p.raft_address for p in m.peers)
                    == sorted(n.raft_address for n in cluster.nodes)
                    and m
                ),
                20,
                what="peers",
            )
            assert meta.controller_leader_address == leader_remoting
        body = headers.read_metadata_body(
            admin.connection(remoting[1]).invoke(headers.GET_METADATA_INFO).body
        )
        wait_until(
            lambda: (
                sorted(
                    p["remoting_address"]
                    for p in headers.read_metadata_body(
                        admin.connection(remoting[1]).invoke(headers.GET_METADATA_INFO).body
                    )["peers"]
                )
                == sorted(remoting)
            ),
            20,
            what="every node's remoting address replicated",
        )
        assert body["self_id"] == cluster.nodes[1].raft_address

        try:
            for i in range(2):
                brokers.append(RemotingBroker(remoting, "broker-a"))
                assert brokers[-1].register() == i + 1
            first, second = brokers
            # only a heartbeat makes a broker alive (RocketMQ): wait for both to have beaten
            wait_until(lambda: all(r.alive for r in _replicas(admin)), 10, what="both brokers alive")
            elected = first.client.elect_master(TEST_CLUSTER, "broker-a", 1)
            assert (elected.master_broker_id, elected.master_epoch, elected.sync_state_set_epoch) == (1, 1, 1)
            assert elected.broker_member_group is not None
            assert elected.broker_member_group.broker_addrs == {1: first.address, 2: second.address}
            for broker in brokers:  # every alive replica, the new master included
                changes = wait_until(broker.notifications, 10, what="1008 after the first election")
                assert (changes[0].master_broker_id, changes[0].master_address, changes[0].master_epoch) == (
                    1,
                    first.address,
                    1,
                )
            altered = first.client.alter_sync_state_set("broker-a", 1, 1, [1, 2], 1)
            assert (altered.new_sync_state_set_epoch, altered.sync_state_set) == (2, (1, 2))

            # remoting reads what gRPC reads
            assert _no_age(admin.get_sync_state_data(["broker-a"])) == _no_age(
                grpc_client.get_sync_state_data(["broker-a"])
            )
            assert _no_age(admin.get_sync_state_data()) == _no_age(grpc_client.get_sync_state_data())
            assert admin.get_replica_info("broker-a") == grpc_client.get_replica_info("broker-a")
            for node, address in zip(cluster.nodes, remoting, strict=True):
                assert admin.get_config(address) == grpc_client.get_config(node.grpc_address)

            # the master stops beating: the leader elects broker 2 and tells it where it listens
            first.beating.clear()

            def notified_master_2() -> RoleChange | None:
                return next((c for c in second.notifications() if c.master_broker_id == 2), None)

            change = wait_until(notified_master_2, 20, what="1008 naming broker 2 master")
            assert (change.master_address, change.master_epoch, change.sync_state_set) == (
                second.address,
                2,
                (2,),
            )
            info = admin.get_replica_info("broker-a")
            assert (info.master_broker_id, info.master_epoch) == (2, 2)
            assert _no_age(admin.get_sync_state_data(["broker-a"])) == _no_age(
                grpc_client.get_sync_state_data(["broker-a"])
            )
            assert admin.get_metadata().state_hash == grpc_client.get_metadata().state_hash

            # a controller leader change: the new leader never saw these brokers' registrations
            # (only their heartbeats, sent to every controller) and still reaches them
            first.beating.set()
            wait_until(
                lambda: next(r for r in _replicas(admin) if r.broker_id == 1).alive,
                10,
                what="broker 1 beating again",
            )
            now = admin.get_replica_info("broker-a")
            second.client.alter_sync_state_set(
                "broker-a", 2, now.master_epoch, [1, 2], now.sync_state_set_epoch
            )
            first.notifications()
            old_leader = cluster.wait_for_leader()
            old_leader.kill()
            cluster.wait_for_leader(exclude=old_leader)
            second.beating.clear()

            def notified_master_1() -> RoleChange | None:
                return next((c for c in first.notifications() if c.master_broker_id == 1), None)

            change = wait_until(notified_master_1, 30, what="1008 from the new controller leader")
            assert (change.master_address, change.master_epoch, change.sync_state_set) == (
                first.address,
                now.master_epoch + 1,
                (1,),
            )
        finally:
            for broker in brokers:
                broker.close()


def test_notify_broker_role_changed_false_stops_the_pushes(tmp_path) -> None:
    """RocketMQ's notifyBrokerRoleChanged: with false the leader sends no 1008; with true it does."""
    cluster = LocalCluster(str(tmp_path), size=1)
    remoting = with_remoting_ports(cluster)
    with cluster:
        start_remoting(cluster, remoting)
        brokers: list[RemotingBroker] = []
        with RemotingControllerClient(remoting, timeout=20) as admin:
            try:
                quiet, told = RemotingBroker(remoting, "set-quiet"), RemotingBroker(remoting, "set-told")
                brokers += [quiet, told]
                for broker in brokers:
                    broker.register()
                wait_until(
                    lambda: all(r.alive for b in brokers for r in _replicas(admin, b.broker_name)),
                    10,
                    what="both brokers alive",
                )
                admin.update_config({"notifyBrokerRoleChanged": "false"})
                quiet.client.elect_master(TEST_CLUSTER, "set-quiet", 1)
                admin.update_config({"notifyBrokerRoleChanged": "true"})
                told.client.elect_master(TEST_CLUSTER, "set-told", 1)
                change = wait_until(told.notifications, 10, what="1008 once notifications are on")[0]
                assert (change.master_broker_id, change.master_address) == (1, told.address)
                # both elections were decided in this order by one leader: the first push would be there
                assert quiet.notifications() == []
            finally:
                for broker in brokers:
                    broker.close()
