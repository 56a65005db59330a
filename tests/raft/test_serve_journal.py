"""`mqctl serve` on a journal a power loss tore, and on one damaged in the middle."""

from __future__ import annotations

import random

import pytest
from harness import TEST_CLUSTER as CLUSTER

from mqctl.client import ControllerClient
from mqctl.errors import EXIT_STORE
from mqctl.localgroup import LocalCluster, wait_until
from mqctl.raft.journal import DurableJournal, tear_tail

pytestmark = pytest.mark.slow

ENV = {"MQCTL_CRASH_SIM": "1"}


def test_torn_tail_is_cut_and_a_damaged_middle_stops_the_node_with_exit_4(tmp_path) -> None:
    cluster = LocalCluster(str(tmp_path), size=1)
    node = cluster.nodes[0]
    journal = f"{node.data_dir}/raft.journal"
    with cluster:
        node.start(env=ENV)
        cluster.wait_for_leader()
        names = [f"bs-{i}" for i in range(30)]
        with ControllerClient(node.grpc_address, timeout=30) as client:
            for name in names:  # a single node acknowledges only what it fsynced
                client.apply_broker_id(CLUSTER, name, 1, f"{name}:10911;1")
        node.kill()  # power loss: nothing unsynced survives
        tear_tail(journal, random.Random(7))
        node.start(env=ENV)
        cluster.wait_for_leader()
        with ControllerClient(node.grpc_address, timeout=30) as client:
            table = client.get_sync_state_data([]).replicas_info_table
        assert [n for n in names if n not in table] == []
        assert node.log_text().count("cut a torn or corrupt tail") == 1
        assert node.stop() == 0

        j = DurableJournal(journal)  # damage a record in the middle
        middle = j._offsets[len(j) // 2]
        j._destroy()
        with open(journal, "r+b") as fh:
            fh.seek(middle + 12)
            fh.write(b"\xff\xff\xff\xff")
        node.start(env=ENV)
        wait_until(lambda: not node.alive(), 30, what="the node to refuse the damaged journal")
        assert node.proc is not None and node.proc.returncode == EXIT_STORE
        text = node.log_text()
        errors = [line for line in text.splitlines() if line.startswith("mqctl: error:")]
        assert len(errors) == 1 and f"corrupt record at offset {middle}" in errors[0], text[-2000:]
        assert "Traceback" not in text
