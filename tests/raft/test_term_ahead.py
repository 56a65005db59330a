"""A node a term ahead of its group's leader rejoins it (FORK.md change 22).

A node can come back at a term above the leader's: it won pre-votes while the leader was slow,
then lost its election to the lease when the leader was heard again (seen under CPU starvation),
or it ran an older release during a partition. It ignores the leader's append_entries (an older
term) and its pre-votes are refused while the leader leads: before the change it stayed apart
for good, and the group had one node fewer for its next election. Now it tells the leader its
term (`term_ahead`), the leader steps down, and the group elects at a term above both.

The test makes such a node by storing a higher term in a stopped follower's term and vote file.
"""

from __future__ import annotations

import json
import os

import pytest
from harness import TEST_CLUSTER as CLUSTER

from mqctl.client import ControllerClient
from mqctl.localgroup import LocalCluster, metadata, wait_until

pytestmark = pytest.mark.slow


def test_a_node_a_term_ahead_of_the_leader_rejoins_the_group(tmp_path) -> None:
    cluster = LocalCluster(str(tmp_path), size=3)
    with cluster:
        cluster.start()
        leader = cluster.wait_for_leader()
        with ControllerClient(cluster.addresses, timeout=30) as client:
            client.apply_broker_id(CLUSTER, "before", 1, "127.0.0.1:10911;1")
        ahead = next(n for n in cluster.nodes if n is not leader)
        ahead.stop()
        meta = os.path.join(ahead.data_dir, "raft.journal.meta")
        with open(meta, encoding="utf-8") as fh:
            doc = json.load(fh)
        term = int(metadata(leader.grpc_address)["term"])
        doc["term"], doc["votedFor"] = term + 5, None
        with open(meta, "w", encoding="utf-8") as fh:
            json.dump(doc, fh)
        ahead.start()

        def one_term() -> bool:
            seen = [metadata(n.grpc_address) for n in cluster.nodes]
            return (
                len({int(m["term"]) for m in seen}) == 1
                and int(seen[0]["term"]) > term + 5
                and sum(bool(m["is_leader"]) for m in seen) == 1
            )

        wait_until(one_term, timeout=30, what="every node at one term above the ahead node's, one leader")
        with ControllerClient(cluster.addresses, timeout=30) as client:
            client.apply_broker_id(CLUSTER, "after", 1, "127.0.0.1:10912;1")
            table = client.get_sync_state_data([]).replicas_info_table
        assert {"before", "after"} <= set(table)
        cluster.wait_for_same_hash()
