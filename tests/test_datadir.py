"""The controller data directory: lock, group record, corrupt node file."""

from __future__ import annotations

import json

import pytest

from mqctl.controller import datadir
from mqctl.errors import UsageError


def test_group_record_and_refusal(tmp_path) -> None:
    lock = datadir.prepare(str(tmp_path))
    try:
        assert datadir.is_locked(str(tmp_path))
        assert datadir.record_group_id(str(tmp_path), "g1") is None
        assert datadir.record_group_id(str(tmp_path), "g1") is None          # idempotent
        problem = datadir.record_group_id(str(tmp_path), "g2")
        assert problem is not None and "belongs to controller group g1" in problem
        assert json.loads((tmp_path / "node.json").read_text())["groupId"] == "g1"
        with pytest.raises(UsageError, match="in use by another running controller"):
            datadir.prepare(str(tmp_path))
    finally:
        lock.close()
    assert not datadir.is_locked(str(tmp_path))


def test_corrupt_node_file_is_refused_without_change(tmp_path) -> None:
    (tmp_path / "node.json").write_text("{not json")
    with pytest.raises(UsageError, match="unreadable or corrupt"):
        datadir.prepare(str(tmp_path))
    assert (tmp_path / "node.json").read_text() == "{not json"


def test_another_nodes_raft_log_is_refused(tmp_path) -> None:
    datadir.prepare(str(tmp_path), "127.0.0.1:9880").close()
    (tmp_path / "raft.journal").write_bytes(b"x")
    datadir.prepare(str(tmp_path), "127.0.0.1:9880").close()       # same node: fine
    with pytest.raises(UsageError, match="holds the Raft log of the node at 127.0.0.1:9880"):
        datadir.prepare(str(tmp_path), "127.0.0.1:7777")
    assert json.loads((tmp_path / "node.json").read_text())["raftAddress"] == "127.0.0.1:9880"
    assert not datadir.is_locked(str(tmp_path))
