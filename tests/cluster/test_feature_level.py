"""The group's feature level: reported by every node, raised once by an admin command when every
member speaks it, never lowered, kept across restarts; `mqctl serve` says what it speaks."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from mqctl.client import ControllerClient, ControllerError
from mqctl.controller import records
from mqctl.testing import LocalCluster, metadata

pytestmark = pytest.mark.slow


def _mqctl(trio: LocalCluster, *args: str) -> subprocess.CompletedProcess[str]:
    addresses = ",".join(n.grpc_address for n in trio.nodes)
    return subprocess.run([sys.executable, "-m", "mqctl", *args, "-o", "json", "-a", addresses],
                          capture_output=True, text=True, timeout=60)


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
