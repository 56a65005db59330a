"""The group's feature level: a new group starts at the highest level its initial members speak (decided
by its first leader from what they published); an existing group's level is reported by every node,
raised once by an admin command (or with --auto-feature-level) when every member speaks it, never
lowered, kept across restarts; `mqctl serve` says what it speaks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from mqctl.client import ControllerClient, ControllerError
from mqctl.controller import records
from mqctl.localgroup import LocalCluster, metadata, wait_until

pytestmark = pytest.mark.slow


@pytest.fixture
def trio(tmp_path) -> Iterator[LocalCluster]:
    """A group made new at feature level 1, as a group made by an earlier release is."""
    cluster = LocalCluster(str(tmp_path), size=3, extra_args=["--initial-feature-level", "1"])
    with cluster:
        cluster.start()
        yield cluster


def _mqctl(trio: LocalCluster, *args: str) -> subprocess.CompletedProcess[str]:
    addresses = ",".join(n.grpc_address for n in trio.nodes)
    return subprocess.run(
        [sys.executable, "-m", "mqctl", *args, "-o", "json", "-a", addresses],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_feature_level_is_reported_raised_once_and_survives_restart(trio: LocalCluster) -> None:
    for node in trio.nodes:
        meta = metadata(node.grpc_address)
        assert meta["feature_level"] == 1 and meta["max_feature_level"] == records.MAX_FEATURE_LEVEL
        assert meta["record_versions"] == records.record_versions() and not meta.get("problem")
        assert f"speaks feature levels 1..{records.MAX_FEATURE_LEVEL}" in node.log_text()
    out = _mqctl(trio, "quorum", "status")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["featureLevel"] == 1
    assert {p["maxFeatureLevel"] for p in doc["peers"]} == {records.MAX_FEATURE_LEVEL}
    with ControllerClient(trio.addresses, timeout=30) as c:
        c.apply_broker_id("c", "b", 1, "127.0.0.1:1;1")
        with pytest.raises(ControllerError, match="not one of"):
            c.change_quorum("feature-level", feature_level=records.MAX_FEATURE_LEVEL + 1)
        result = c.change_quorum("feature-level", feature_level=2)
        assert result.feature_level == 2 and "feature level 2" in result.remark
        again = c.change_quorum("feature-level", feature_level=2)
        assert again.feature_level == 2 and "already" in again.remark
        with pytest.raises(ControllerError, match="never lowered"):
            c.change_quorum("feature-level", feature_level=1)
    trio.wait_for_same_hash()
    assert {metadata(n.grpc_address)["feature_level"] for n in trio.nodes} == {2}
    for node in trio.nodes:
        node.kill()
    for node in trio.nodes:
        node.start()
    trio.wait_for_leader()
    trio.wait_for_same_hash()
    assert {metadata(n.grpc_address)["feature_level"] for n in trio.nodes} == {2}


def test_cli_raises_the_level(trio: LocalCluster) -> None:
    out = _mqctl(trio, "quorum", "feature-level", "2")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["featureLevel"] == 2


def _levels(cluster: LocalCluster) -> set[int]:
    return {int(metadata(n.grpc_address).get("feature_level") or 1) for n in cluster.nodes if n.alive()}


def test_a_new_single_node_starts_at_the_newest_level(tmp_path) -> None:
    with LocalCluster(str(tmp_path), size=1) as single:
        single.start()
        wait_until(lambda: _levels(single) == {records.MAX_FEATURE_LEVEL}, 30, what="the newest level")
        out = subprocess.run(
            [sys.executable, "-m", "mqctl", "history", "-a", single.addresses],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        assert f"the group is at feature level {records.MAX_FEATURE_LEVEL} now" in single.nodes[0].log_text()


def test_a_new_group_waits_for_every_initial_member_then_starts_at_their_level(tmp_path) -> None:
    cluster = LocalCluster(str(tmp_path), size=3)
    with cluster:
        for node in cluster.nodes[:2]:
            node.start()
        cluster.wait_for_leader(exclude=cluster.nodes[2])
        # node2 has not said which levels it speaks: the group cannot know, and stays at 1
        for _ in range(10):
            assert _levels(cluster) == {1}
            time.sleep(0.2)
        out = _mqctl(cluster, "quorum", "status")
        assert json.loads(out.stdout)["featureLevel"] == 1
        cluster.nodes[2].start()
        wait_until(
            lambda: _levels(cluster) == {records.MAX_FEATURE_LEVEL} and len(_levels(cluster)) == 1,
            60,
            what="the group at the newest level",
        )
        cluster.wait_for_same_hash()
        out = _mqctl(cluster, "quorum", "status")
        assert out.returncode == 0, out.stderr
        doc = json.loads(out.stdout)
        assert doc["featureLevel"] == records.MAX_FEATURE_LEVEL
        assert doc["featureLevelRaisableTo"] is None and doc["raiseFeatureLevel"] is None
        # a restart keeps it (the level is a record of the log, not each node's guess)
        for node in cluster.nodes:
            node.kill()
        for node in cluster.nodes:
            node.start()
        cluster.wait_for_leader()
        assert _levels(cluster) == {records.MAX_FEATURE_LEVEL}


def test_an_existing_group_keeps_its_level_and_status_says_how_to_raise_it(trio: LocalCluster) -> None:
    trio.wait_for_members_speaking(records.MAX_FEATURE_LEVEL)
    first = trio.nodes[0].grpc_address
    out = subprocess.run(
        [sys.executable, "-m", "mqctl", "quorum", "status", "-a", first],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert out.returncode == 0, out.stderr
    assert f"raise it with `mqctl quorum feature-level {records.MAX_FEATURE_LEVEL} -a " in out.stdout
    doc = json.loads(_mqctl(trio, "quorum", "status").stdout)
    assert doc["featureLevel"] == 1 and doc["featureLevelRaisableTo"] == records.MAX_FEATURE_LEVEL
    assert _levels(trio) == {1}
    command = doc["raiseFeatureLevel"].split()[1:]
    out = subprocess.run(
        [sys.executable, "-m", "mqctl", *command], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    trio.wait_for_same_hash()
    assert _levels(trio) == {records.MAX_FEATURE_LEVEL}


def test_auto_feature_level_raises_once_every_member_speaks_it(tmp_path) -> None:
    cluster = LocalCluster(
        str(tmp_path), size=3, extra_args=["--initial-feature-level", "1", "--auto-feature-level"]
    )
    with cluster:
        for node in cluster.nodes[:2]:
            node.start()
        cluster.wait_for_leader(exclude=cluster.nodes[2])
        for _ in range(10):  # a member has not said what it speaks: no raise
            assert _levels(cluster) == {1}
            time.sleep(0.2)
        cluster.nodes[2].start()
        wait_until(lambda: _levels(cluster) == {records.MAX_FEATURE_LEVEL}, 60, what="the automatic raise")
