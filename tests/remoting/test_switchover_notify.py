"""A switchover over RocketMQ remoting: the old master, still alive, is sent its new role (1008)
before the new master is told to take writes; when the old master cannot be reached, the new master
is told only once the attempts to reach it ran out."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from harness import TEST_CLUSTER, start_remoting, with_remoting_ports
from test_remoting_e2e import RemotingBroker, _replicas

from mqctl.client import ControllerClient
from mqctl.localgroup import LocalCluster, wait_until
from mqctl.remoting.client import RemotingControllerClient
from mqctl.remoting.server import NOTIFY_ATTEMPTS, NOTIFY_RETRY_DELAY

pytestmark = pytest.mark.slow


@pytest.fixture
def single(tmp_path) -> Iterator[tuple[LocalCluster, list[str]]]:
    cluster = LocalCluster(str(tmp_path), size=1)
    addresses = with_remoting_ports(cluster)
    with cluster:
        start_remoting(cluster, addresses)
        yield cluster, addresses


def test_the_old_master_is_told_before_the_new_one(single: tuple[LocalCluster, list[str]]) -> None:
    cluster, remoting = single
    brokers = [RemotingBroker(remoting, "broker-s") for _ in range(2)]
    try:
        for i, broker in enumerate(brokers):
            assert broker.register() == i + 1
        old, new = brokers
        with (
            RemotingControllerClient(remoting, timeout=20) as admin,
            ControllerClient(cluster.addresses, timeout=20) as client,
        ):
            wait_until(lambda: all(r.alive for r in _replicas(admin, "broker-s")), 10, what="both alive")
            old.client.elect_master(TEST_CLUSTER, "broker-s", 1)
            client.alter_sync_state_set("broker-s", 1, 1, [1, 2], 1)
            for broker in brokers:
                wait_until(broker.notifications, 10, what="1008 after the first election")
            # the old master beats on but its port refuses: its 1008 cannot be delivered
            old.listener.close()
            started = time.monotonic()
            moved = client.switchover("broker-s", 2)
            assert (moved.old_master_broker_id, moved.new_master_broker_id, moved.gap_bytes) == (1, 2, 0)
            told = wait_until(
                lambda: [c for c in new.notifications() if c.master_broker_id == 2],
                30,
                what="the new master's 1008",
            )
            waited = time.monotonic() - started
        assert told[0].master_epoch == 2
        # every attempt at the old master came first: (attempts - 1) retry delays at least
        assert waited >= (NOTIFY_ATTEMPTS - 1) * NOTIFY_RETRY_DELAY * 0.9, waited
        text = cluster.nodes[0].log_text()
        gave_up = text.index(
            f"to broker-s id 1 at {old.address} failed (attempt {NOTIFY_ATTEMPTS} of {NOTIFY_ATTEMPTS})"
        )
        assert text.index("NOTIFY_BROKER_ROLE_CHANGED to broker-s id 2 at", gave_up) > gave_up
    finally:
        for broker in brokers:
            broker.close()
