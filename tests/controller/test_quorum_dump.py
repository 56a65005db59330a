"""`mqctl quorum dump DATA_DIR` on the data directory of a real `mqctl serve` node: the journal entries
decoded (index, term, records with type, version and fields), the snapshot, read only; a running node's
directory refused without --force; a hostile pickle in a journal reported, never run."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
from harness import TEST_CLUSTER as CLUSTER

from mqctl.admin.quorum_dump import decode_command
from mqctl.client import ControllerClient
from mqctl.localgroup import LocalCluster, wait_until

MQCTL = [sys.executable, "-m", "mqctl"]


def tree(root: str) -> str:
    h = hashlib.sha256()
    for name in sorted(os.listdir(root)):
        p = os.path.join(root, name)
        st = os.stat(p)
        h.update(f"{name}|{st.st_size}|{st.st_mtime_ns}".encode())
        if name != "LOCK":
            with open(p, "rb") as fh:
                h.update(fh.read())
    return h.hexdigest()


def mqctl(*args: str) -> subprocess.CompletedProcess[str]:
    """(COLUMNS: tables as wide as their rows, whatever terminal runs the tests)"""
    return subprocess.run(
        [*MQCTL, *args], capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "400"}
    )


@pytest.mark.slow
def test_dump_a_stopped_node(tmp_path: Path) -> None:
    cluster = LocalCluster(str(tmp_path), size=1)
    with cluster:
        node = cluster.nodes[0]
        node.start(env={"MQCTL_COMPACTION_INTERVAL": "1"})
        cluster.wait_for_leader()
        snapshot = os.path.join(node.data_dir, "raft.snapshot.json")
        with ControllerClient(node.grpc_address, timeout=30) as c:
            c.apply_broker_id(CLUSTER, "broker-a", 1, "127.0.0.1:10911;1")
            c.register_broker(CLUSTER, "broker-a", 1, "127.0.0.1:10911")
            wait_until(lambda: os.path.exists(snapshot), 60, what="a snapshot at log compaction")
            c.apply_broker_id(CLUSTER, "broker-b", 1, "127.0.0.1:10921;1")
            # a running node's directory: refused, unless forced
            r = mqctl("quorum", "dump", node.data_dir)
            assert r.returncode == 2 and "LOCK is held: a controller node runs on this directory" in r.stderr
            r = mqctl("quorum", "dump", node.data_dir, "--force", "-o", "json")
            assert r.returncode == 0, r.stderr
            assert json.loads(r.stdout)["running"] is True
        assert node.stop() == 0
        before = tree(node.data_dir)
        r = mqctl("quorum", "dump", node.data_dir, "-o", "json")
        assert r.returncode == 0, r.stderr
        assert tree(node.data_dir) == before, "quorum dump changed the data directory"
    doc = json.loads(r.stdout)
    assert doc["running"] is False and doc["node"]["raftAddress"] == node.raft_address
    snap = doc["snapshot"]
    assert "broker-a" in snap["state"]["broker_sets"] and snap["cluster"] == [node.raft_address]
    entries = doc["journal"]["entries"]
    assert entries and doc["journal"]["tail"] is None
    assert [e["index"] for e in entries] == list(range(entries[0]["index"], entries[-1]["index"] + 1))
    assert entries[0]["index"] <= snap["lastIndex"] + 1  # the journal continues the snapshot
    writes = [r for e in entries if e["kind"] == "write" for r in e["records"]]
    applied_b = [r for r in writes if r.get("broker_name") == "broker-b"]
    assert applied_b and applied_b[0]["type"] and applied_b[0]["v"] >= 1
    assert all("error" not in e for e in entries)
    r = mqctl("quorum", "dump", node.data_dir)
    assert r.returncode == 0, r.stderr
    assert f"Raft address {node.raft_address}" in r.stdout and "broker-b" in r.stdout
    assert "syncStateSetEpoch" in r.stdout and "10911" in r.stdout  # the snapshot's broker sets


class _Evil:
    def __reduce__(self):  # what a hostile journal could hold
        return (os.system, ("touch pwned",))


def test_a_hostile_pickle_is_reported_not_run(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    d = decode_command(b"\x00" + pickle.dumps((1, (_Evil(),))))
    assert d["kind"] == "unknown" and "is not what a controller journal holds" in d["error"]
    assert not (tmp_path / "pwned").exists()
    assert decode_command(b"\x01") == {"kind": "no-op"}
    assert decode_command(b"\x00" + pickle.dumps((0, ()))) == {"kind": "barrier"}
    w = decode_command(b"\x00" + pickle.dumps((1, ('{"events":[{"type":"nope"}]}',))))
    assert w["kind"] == "write" and "unknown record type 'nope'" in w["records"][0]["error"]


def test_refusals(tmp_path: Path) -> None:
    r = mqctl("quorum", "dump", str(tmp_path / "none"))
    assert r.returncode == 2 and "not a directory" in r.stderr
    r = mqctl("quorum", "dump", str(tmp_path))
    assert r.returncode == 4 and "not a controller data directory" in r.stderr
    (tmp_path / "raft.journal").write_bytes(b"garbage" * 10)
    r = mqctl("quorum", "dump", str(tmp_path))
    assert r.returncode == 4 and "not an mqctl Raft journal" in r.stderr
