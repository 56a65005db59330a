"""`mqctl snapshot save|restore`: save from a running three-node group, restore every node's data
directory, serve on them: the same state hash, and the group goes on. Corrupt, newer and foreign
files are refused in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cockpit_fixtures import broker_set
from harness import Beater, register_broker

from mqctl.client import ControllerClient
from mqctl.localgroup import LocalCluster, metadata, wait_until

pytestmark = pytest.mark.slow

MQCTL = str(Path(sys.executable).with_name("mqctl"))


def mqctl(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MQCTL_")}
    return subprocess.run([MQCTL, *args], capture_output=True, text=True, timeout=60, env=env)


def _restore_args(cluster: LocalCluster, i: int) -> list[str]:
    node = cluster.nodes[i]
    peers = ",".join(n.raft_address for n in cluster.nodes if n is not node)
    return ["--data-dir", node.data_dir, "--raft", node.raft_address, "--peers", peers]


def test_save_restore_serve_same_state(tmp_path: Path) -> None:
    cluster = LocalCluster(str(tmp_path / "ctl"), size=3, extra_args=["--token", "s3cret"]).start()
    try:
        with ControllerClient(cluster.addresses, token="s3cret") as client:
            beater = Beater(client)
            try:
                broker_set(client, beater, "broker-a", alive=2)
                broker_set(client, beater, "broker-b", alive=1, dead=1)
            finally:
                beater.stop()
        out = mqctl("snapshot", "save", str(tmp_path / "snap.json"), "-a", cluster.addresses, "-o", "json")
        assert out.returncode == 0, out.stderr
        saved = json.loads(out.stdout)
        hashes = cluster.wait_for_same_hash()
    finally:
        cluster.stop()
    doc = json.loads((tmp_path / "snap.json").read_text())
    assert doc["stateHash"] == saved["stateHash"] == hashes
    assert doc["appliedIndex"] > 0 and doc["checksum"].startswith("sha256:")
    assert sorted(doc["state"]["broker_sets"]) == ["broker-a", "broker-b"]
    assert doc["recordVersions"]["ElectMaster"] >= 1

    # dry run: nothing written
    before = sorted(os.listdir(cluster.nodes[0].data_dir))
    out = mqctl(
        "snapshot",
        "restore",
        str(tmp_path / "snap.json"),
        *_restore_args(cluster, 0),
        "--dry-run",
        "-o",
        "json",
    )
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    assert plan["dryRun"] and plan["backup"] and plan["appliedIndex"] == doc["appliedIndex"]
    assert sorted(os.listdir(cluster.nodes[0].data_dir)) == before

    # every node's directory seeded from the file (the old ones kept aside), then served
    for i in range(3):
        out = mqctl("snapshot", "restore", str(tmp_path / "snap.json"), *_restore_args(cluster, i))
        assert out.returncode == 0, out.stderr
        assert "moved to" in out.stdout and "start it with: mqctl serve" in out.stdout
    assert len([d for d in os.listdir(tmp_path / "ctl") if ".backup-" in d]) == 3
    cluster.start()
    try:
        assert cluster.wait_for_same_hash() == doc["stateHash"]
        leader = cluster.wait_for_leader()
        assert metadata(leader.grpc_address)["last_applied"] >= doc["appliedIndex"]
        with ControllerClient(cluster.addresses, token="s3cret") as client:
            assert client.get_replica_info("broker-a").master_broker_id == 1
            assert register_broker(client, "broker-a", "127.0.0.1:10999")[0] == 3  # the group goes on
        # a data directory in use is refused
        busy = mqctl("snapshot", "restore", str(tmp_path / "snap.json"), *_restore_args(cluster, 1))
        assert busy.returncode == 2 and "in use by a running controller" in busy.stderr
    finally:
        cluster.stop()


def test_restore_as_a_new_group(tmp_path: Path) -> None:
    cluster = LocalCluster(str(tmp_path / "old"), size=1).start()
    try:
        with ControllerClient(cluster.addresses) as client:
            beater = Beater(client)
            try:
                broker_set(client, beater, "broker-a", alive=1)
            finally:
                beater.stop()
        assert mqctl("snapshot", "save", str(tmp_path / "snap.json"), "-a", cluster.addresses).returncode == 0
    finally:
        cluster.stop()
    new = LocalCluster(str(tmp_path / "new"), size=1)
    out = mqctl(
        "snapshot",
        "restore",
        str(tmp_path / "snap.json"),
        "--data-dir",
        new.nodes[0].data_dir,
        "--raft",
        new.nodes[0].raft_address,
        "--group-id",
        "restored-1",
    )
    assert out.returncode == 0, out.stderr
    new.start()
    try:
        meta = metadata(new.nodes[0].grpc_address)
        assert meta["group_id"] == "restored-1"
        with ControllerClient(new.addresses) as client:
            assert client.get_replica_info("broker-a").master_broker_id == 1
    finally:
        new.stop()


def test_refuses_corrupt_newer_and_foreign_files(tmp_path: Path) -> None:
    cluster = LocalCluster(str(tmp_path / "ctl"), size=1).start()
    try:
        assert mqctl("snapshot", "save", str(tmp_path / "good.json"), "-a", cluster.addresses).returncode == 0
    finally:
        cluster.stop()
    good = json.loads((tmp_path / "good.json").read_text())
    target = ["--data-dir", str(tmp_path / "new"), "--raft", "127.0.0.1:9880"]

    def attempt(doc: object, name: str) -> subprocess.CompletedProcess[str]:
        path = tmp_path / name
        path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
        return mqctl("snapshot", "restore", str(path), *target)

    corrupt = json.loads(json.dumps(good))
    corrupt["state"]["broker_epoch"] = 12345
    newer_format = {**good, "format": "mqctl-controller-backup/2"}
    cases = [
        (attempt(corrupt, "corrupt.json"), 4, "checksum does not match"),
        (attempt(newer_format, "newer.json"), 2, "newer than this mqctl reads"),
        (attempt("{not json", "garbage.json"), 4, "not an mqctl controller snapshot"),
        (attempt({"format": "something else"}, "foreign.json"), 4, "not an mqctl controller snapshot"),
    ]
    from mqctl.admin import snapshot

    newer_level = json.loads(json.dumps(good))
    newer_level["featureLevel"] = 99
    newer_level["checksum"] = snapshot._checksum(newer_level)
    cases.append((attempt(newer_level, "level.json"), 2, "feature level 99"))
    newer_state = json.loads(json.dumps(good))
    newer_state["state"]["version"] = 99
    newer_state["checksum"] = snapshot._checksum(newer_state)
    cases.append((attempt(newer_state, "state.json"), 2, "upgrade"))
    for out, code, text in cases:
        assert out.returncode == code and text in out.stderr, (out.returncode, out.stderr)
        assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
    assert not (tmp_path / "new").exists()
    wait_until(lambda: True, 1)
