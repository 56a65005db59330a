"""Disk full / read-only data directory under real `mqctl serve` nodes, with fault injection.

MQCTL_FAULT_INJECT=1 (test-only, mqctl/raft/storage.py) makes every journal and meta write fail
with the errno named in `<data dir>/fault-inject` while that file exists. A node whose storage fails
acknowledges no entry and takes no term (a leader steps down), says why in one log line and in
GetMetadata's `problem`, keeps answering local reads, and recovers without loss once the file is
gone (docs/raft-safety.md).
"""

from __future__ import annotations

import os

import pytest
from harness import TEST_CLUSTER as CLUSTER

from mqctl.client import ControllerClient
from mqctl.errors import ControllerError
from mqctl.localgroup import LocalCluster, metadata, wait_until
from mqctl.raft.storage import FAULT_FILE

pytestmark = pytest.mark.slow

ENV = {"MQCTL_FAULT_INJECT": "1", "MQCTL_CRASH_SIM": "1"}
FAILING = "acknowledges no Raft entry"


def start(cluster: LocalCluster) -> LocalCluster:
    for node in cluster.nodes:
        node.start(env=ENV)
    cluster.wait_for_leader()
    return cluster


def apply(client: ControllerClient, name: str) -> None:
    client.apply_broker_id(CLUSTER, name, 1, f"{name}:10911;1")


def present(cluster: LocalCluster, names: list[str]) -> list[str]:
    leader = cluster.wait_for_leader()
    with ControllerClient(leader.grpc_address, timeout=30) as client:
        table = client.get_sync_state_data([]).replicas_info_table
    return [n for n in names if n not in table]


def test_group_with_full_disks_acknowledges_nothing_and_recovers_without_loss(tmp_path) -> None:
    cluster = LocalCluster(str(tmp_path), size=3)
    with cluster:
        start(cluster)
        with ControllerClient(cluster.addresses, timeout=30) as client:
            before = [f"before-{i}" for i in range(20)]
            for name in before:
                apply(client, name)
        for node in cluster.nodes:
            with open(os.path.join(node.data_dir, FAULT_FILE), "w") as fh:
                fh.write("ENOSPC")
        with ControllerClient(cluster.addresses, timeout=4) as client:
            for i in range(3):
                with pytest.raises(ControllerError):
                    apply(client, f"during-{i}")  # never acknowledged while no disk takes it
        for node in cluster.nodes:  # still serving local reads, and saying why writes stop
            wait_until(
                lambda n=node: "ENOSPC" in metadata(n.grpc_address).get("problem", ""),
                20,
                what=f"{node.name} to report the storage problem",
            )
            meta = metadata(node.grpc_address)
            assert meta["code"] == 0 and not meta["is_leader"] and meta["state_hash"]
            with ControllerClient(node.grpc_address, timeout=5) as client:
                assert client.get_config(node.grpc_address).config["raftAddress"] == node.raft_address
        for node in cluster.nodes:
            os.unlink(os.path.join(node.data_dir, FAULT_FILE))
        with ControllerClient(cluster.addresses, timeout=30) as client:
            apply(client, "after")
        assert present(cluster, before + ["after"]) == []
        cluster.wait_for_same_hash()
        for node in cluster.nodes:
            wait_until(
                lambda n=node: metadata(n.grpc_address).get("problem", "") == "",
                20,
                what=f"{node.name} to clear the problem",
            )
        logs = [n.log_text() for n in cluster.nodes]
    for text in logs:
        assert text.count(FAILING) == 1, text[-3000:]  # one line per node, not one per retry
        assert "storage works again" in text
        assert "Traceback" not in text


def test_leader_with_a_read_only_disk_steps_down_and_the_group_goes_on(tmp_path) -> None:
    cluster = LocalCluster(str(tmp_path), size=3)
    with cluster:
        start(cluster)
        old = cluster.wait_for_leader()
        with open(os.path.join(old.data_dir, FAULT_FILE), "w") as fh:
            fh.write("EROFS")
        acked = []
        with ControllerClient(cluster.addresses, timeout=30) as client:
            for i in range(30):
                try:
                    apply(client, f"w-{i}")
                except ControllerError:  # in flight when the leader stepped down: outcome unknown
                    continue
                acked.append(f"w-{i}")
        new = cluster.wait_for_leader(exclude=old)
        assert new is not old and len(acked) >= 25
        assert "EROFS" in metadata(old.grpc_address)["problem"]
        os.unlink(os.path.join(old.data_dir, FAULT_FILE))
        cluster.wait_for_same_hash()
        assert present(cluster, acked) == []
        old.kill()  # what it acknowledged is on its disk
        old.start(env=ENV)
        cluster.wait_for_same_hash()
        text = old.log_text()
    assert text.count(FAILING) == 1 and "EROFS" in text and "Traceback" not in text
