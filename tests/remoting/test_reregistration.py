"""A broker that registers again while it is alive keeps its heartbeat row (issue 35).

RocketMQ's controller leaves a broker's heartbeat row (DefaultBrokerHeartbeatManager) as it was when the
broker registers again: a RocketMQ broker's CONTROLLER_REGISTER_BROKER (1003) carries no epoch, maxOffset
or electionPriority. mqctl once reset the row to -1, -1 and 2**31-1 until the broker's next heartbeat, so
in that window the broker lost an election it should win. Here, on a real `mqctl serve`, over remoting
as a RocketMQ broker sends it and over gRPC without the optional fields: the replica with the most data
registers again between two heartbeats, the master's lease ends, and it must be the new master.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from harness import TEST_CLUSTER

from mqctl.api import ControllerApi
from mqctl.client import ControllerClient
from mqctl.localgroup import LocalCluster, wait_until
from mqctl.remoting.client import RemotingControllerClient

pytestmark = pytest.mark.slow

ADDR = {1: "127.0.0.1:30911", 2: "127.0.0.1:30921", 3: "127.0.0.1:30931"}
LONG = 120_000  # the lease of the replicas that stay alive for the whole test
MASTER_LEASE = 3_000


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    cluster = LocalCluster(str(tmp_path_factory.mktemp("rereg")), size=1, remoting=True)
    with cluster:
        cluster.start()
        yield cluster


def client_for(node: LocalCluster, protocol: str) -> ControllerApi:
    if protocol == "remoting":
        return RemotingControllerClient([node.nodes[0].remoting_address], timeout=20)
    return ControllerClient(node.addresses, timeout=20)


@pytest.mark.parametrize("protocol", ["remoting", "grpc"])
def test_a_broker_registered_again_between_two_heartbeats_wins_the_election(
    node: LocalCluster, protocol: str
) -> None:
    name = f"rereg-{protocol}"
    data = {1: 100, 2: 500, 3: 300}  # maxOffset per broker, all of epoch 1: broker 2 has the most

    with client_for(node, protocol) as c, ControllerClient(node.addresses, timeout=20) as reader:

        def beat(bid: int, lease: int = LONG) -> None:
            c.heartbeat(
                TEST_CLUSTER,
                ADDR[bid],
                name,
                bid,
                epoch=1,
                max_offset=data[bid],
                heartbeat_timeout_mills=lease,
            )  # raises unless SUCCESS

        def register(bid: int) -> None:
            # what a RocketMQ broker sends (1003: cluster, name, id, address), nothing about its store
            c.register_broker(TEST_CLUSTER, name, bid, ADDR[bid])

        for bid in (1, 2, 3):
            assert c.get_next_broker_id(TEST_CLUSTER, name).next_broker_id == bid
            c.apply_broker_id(TEST_CLUSTER, name, bid, f"{ADDR[bid]};1700000000000")
            register(bid)
            beat(bid, MASTER_LEASE if bid == 1 else LONG)
        elected = c.elect_master(TEST_CLUSTER, name, 1)
        assert elected.master_broker_id == 1
        beat(1, MASTER_LEASE)
        assert c.alter_sync_state_set(name, 1, 1, [1, 2, 3], 1).new_sync_state_set_epoch == 2

        register(2)  # a restart within the lease: broker 2 registers again; its next heartbeat is late
        # the heartbeat rows as the leader holds them (GetSyncStateData's mqctl fields, gRPC)
        table = reader.get_sync_state_data([name]).replicas_info_table[name]
        rows = {r.broker_id: r for r in table.in_sync_replicas}
        assert (rows[2].epoch, rows[2].max_offset) == (1, 500), "the row as the last heartbeat left it"

        # master 1 beats no more: when its lease ends the controller elects among 2 and 3
        info = wait_until(
            lambda: (i := c.get_replica_info(name)).master_epoch == 2 and i,
            60,
            what="the controller's election after the master's lease",
        )
        assert info.master_broker_id == 2, "the replica with the most data must win"
