"""A follower that fell behind the leader's log compaction catches up from the leader's snapshot.

The fork receives the snapshot itself (mqctl/raft/FORK.md, change 14): through the journal's file
layer, fsynced before it is renamed into place and loaded. The nodes run the crash simulator, so
SIGKILL is a power loss: a follower that loses power right after it caught up starts again with
everything it acknowledged.
"""

from __future__ import annotations

import json
import os
import threading

import pytest
from harness import TEST_CLUSTER as CLUSTER
from harness import Gate

from mqctl.client import ControllerClient
from mqctl.errors import ControllerError
from mqctl.localgroup import LocalCluster, wait_until

pytestmark = pytest.mark.slow

ENV = {"MQCTL_CRASH_SIM": "1"}
COMPACT = {**ENV, "MQCTL_COMPACTION_INTERVAL": "1"}


def snapshot_index(path: str) -> int:
    """The index of the last entry a snapshot covers (0 without one)."""
    if not os.path.exists(path):
        return 0
    with open(path, encoding="utf-8") as fh:
        return int(json.load(fh)["raft"]["lastEntry"][1])


def test_follower_behind_the_compaction_catches_up_from_a_durable_snapshot(tmp_path) -> None:
    cluster = LocalCluster(str(tmp_path), size=3)
    with cluster:
        for node in cluster.nodes:
            node.start(env=COMPACT)
        leader = cluster.wait_for_leader()
        follower = next(n for n in cluster.nodes if n is not leader)
        snapshot = os.path.join(follower.data_dir, "raft.snapshot.json")
        acked: list[str] = []
        stop = threading.Event()
        gate = Gate()

        def write() -> None:
            with ControllerClient(cluster.addresses, timeout=10) as client:
                i = 0
                while not stop.is_set():
                    gate.pass_through()
                    name = f"c-{i}"
                    i += 1
                    try:
                        client.apply_broker_id(CLUSTER, name, 1, f"{name}:10911;1")
                    except ControllerError:
                        continue
                    acked.append(name)

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        try:
            wait_until(lambda: len(acked) >= 20, 30, what="writes")
            follower.kill()
            own = snapshot_index(snapshot)
            n = len(acked)
            wait_until(lambda: len(acked) >= n + 100, 60, what="writes while the follower is down")
            stop.wait(2.5)  # the other two compact past its log
            follower.start(env=ENV)  # no compaction of its own for 60 s now
            with gate.held():
                cluster.wait_for_same_hash()
            assert snapshot_index(snapshot) > own + 100  # so this one is the leader's
            follower.kill()  # a power loss once it caught up
            follower.start(env=ENV)
            n = len(acked)
            wait_until(lambda: len(acked) >= n + 20, 30, what="writes after its restart")
        finally:
            stop.set()
            writer.join(20)
        cluster.wait_for_same_hash()
        with ControllerClient(follower.grpc_address, timeout=30) as client:
            table = client.get_sync_state_data([]).replicas_info_table
        assert [name for name in acked if name not in table] == []
        text = follower.log_text()
    assert "Traceback" not in text and "raft snapshot:" not in text, text[-3000:]
