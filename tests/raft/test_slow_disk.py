"""A leader on a slow disk keeps its leadership (issue 17; FORK.md changes 19 and 20).

The leader's journal is fdatasynced on a thread of its own and the leader counts its own vote
only up to what is durable there: its ticks (the heartbeats its followers wait for) go on through
a slow fdatasync, and writes commit on the followers' durable copies meanwhile. With the sync on
the tick thread, each write held the heartbeats for as long as the disk took, longer than the
followers' election timeout (0.15-0.35 s), and they elected another leader.

The same for followers: each appends what the leader sends, answers at once with what of it is
durable, and tells the leader again once its journal's thread has synced the rest; the leader
counts only durable entries. With the sync before the answer, a follower's slow fdatasync left the
leader's append_entries unanswered for longer than its CheckQuorum allows (0.35 s) and it stepped
down.

MQCTL_FAULT_INJECT=1 and `SLOW <ms>` in `<data dir>/fault-inject` make every fsync of that node
take that much longer (mqctl/raft/storage.py); MQCTL_CRASH_SIM=1 makes a SIGKILL a power loss.
"""

from __future__ import annotations

import os

import pytest
from harness import TEST_CLUSTER as CLUSTER

from mqctl.client import ControllerClient
from mqctl.localgroup import LocalCluster, Node, metadata, wait_until
from mqctl.raft.storage import FAULT_FILE

pytestmark = pytest.mark.slow

ENV = {"MQCTL_FAULT_INJECT": "1", "MQCTL_CRASH_SIM": "1"}


def slow_writes_keep_the_leader(cluster: LocalCluster, slow: str, names: list[str]) -> Node:
    """Start the group, make the `slow` nodes' (leader or followers) every fsync take 0.6 s more,
    write one Raft entry per name, and check that no node moved to a new term (an election)."""
    for node in cluster.nodes:
        node.start(env=ENV)
    leader = cluster.wait_for_leader()
    term = metadata(leader.grpc_address)["term"]
    for node in cluster.nodes:
        if (node is leader) == (slow == "leader"):
            with open(os.path.join(node.data_dir, FAULT_FILE), "w") as fh:
                fh.write("SLOW 600")
    with ControllerClient(cluster.addresses, timeout=30) as client:
        for name in names:
            client.apply_broker_id(CLUSTER, name, 1, f"127.0.0.1:{10911 + len(name)};1")
    seen = {
        n.name: (metadata(n.grpc_address)["term"], metadata(n.grpc_address)["is_leader"])
        for n in cluster.nodes
    }
    assert seen == {n.name: (term, n is leader) for n in cluster.nodes}, seen
    for node in cluster.nodes:
        if os.path.exists(os.path.join(node.data_dir, FAULT_FILE)):
            os.unlink(os.path.join(node.data_dir, FAULT_FILE))
    return leader


def assert_all_written(cluster: LocalCluster, names: list[str]) -> None:
    new = cluster.wait_for_leader()
    with ControllerClient(new.grpc_address, timeout=30) as client:
        table = client.get_sync_state_data([]).replicas_info_table
    assert sorted(n for n in table if n in names) == sorted(names)


def test_a_leader_whose_fsync_takes_longer_than_the_election_timeout_keeps_leading(tmp_path) -> None:
    cluster = LocalCluster(str(tmp_path), size=3)
    with cluster:
        names = [f"slow-{i}" for i in range(12)]
        leader = slow_writes_keep_the_leader(cluster, "leader", names)
        leader.kill()  # a power loss: what the leader acknowledged is on the followers' disks
        assert_all_written(cluster, names)
        leader.start(env=ENV)
        cluster.wait_for_same_hash()


def test_followers_whose_fsync_takes_longer_than_the_election_timeout_keep_their_leader(tmp_path) -> None:
    cluster = LocalCluster(str(tmp_path), size=3)
    with cluster:
        names = [f"slow-follower-{i}" for i in range(8)]  # each committed once a follower synced it
        leader = slow_writes_keep_the_leader(cluster, "followers", names)
        # a power loss of the leader and one follower at once: the acknowledged writes are durable
        # on the other follower (a follower counted only what it had synced)
        follower = next(n for n in cluster.nodes if n is not leader)
        leader.kill()
        follower.kill()
        follower.start(env=ENV)
        assert_all_written(cluster, names)
        leader.start(env=ENV)
        cluster.wait_for_same_hash()


def test_a_raft_thread_stalled_on_its_disk_says_where_it_is(tmp_path) -> None:
    """A follower whose term and vote take 11 s to store (SLOW: the meta file's fsync) starts no
    election and answers nobody meanwhile; after 10 s without a finished tick the node logs where
    its Raft thread is (mqctl/controller/node_raft.py, FORK.md change 21), and the group elects once
    the disk is back."""
    cluster = LocalCluster(str(tmp_path), size=3)
    with cluster:
        for node in cluster.nodes:
            node.start(env=ENV)
        leader = cluster.wait_for_leader()
        slow, other = [n for n in cluster.nodes if n is not leader]
        with open(os.path.join(slow.data_dir, FAULT_FILE), "w") as fh:
            fh.write("SLOW 11000")
        leader.kill()
        wait_until(
            lambda: "the Raft thread has not finished a tick" in slow.log_text(),
            timeout=60,
            what="the stalled node's report",
        )
        line = next(x for x in slow.log_text().splitlines() if "has not finished a tick" in x)
        # stuck on storing its new term (setCurrentTerm), or, when entries from the killed leader
        # had just arrived (seen under load), on making them durable in its tick (sync_soon); in
        # the fsync itself (storage.py) or waiting for the journal's lock the sync thread holds
        # through a slow fsync of its own (journal.py, seen under load)
        assert ("storage.py" in line or "journal.py" in line) and (
            "setCurrentTerm" in line or "sync_soon" in line
        ), line
        os.unlink(os.path.join(slow.data_dir, FAULT_FILE))
        assert cluster.wait_for_leader(exclude=leader) in (slow, other)
        leader.start(env=ENV)
        cluster.wait_for_same_hash()
