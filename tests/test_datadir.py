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
        assert datadir.record_group_id(str(tmp_path), "g1") is None  # idempotent
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
    datadir.prepare(str(tmp_path), "127.0.0.1:9880").close()  # same node: fine
    with pytest.raises(UsageError, match=r"holds the Raft log of the node at 127.0.0.1:9880"):
        datadir.prepare(str(tmp_path), "127.0.0.1:7777")
    assert json.loads((tmp_path / "node.json").read_text())["raftAddress"] == "127.0.0.1:9880"
    assert not datadir.is_locked(str(tmp_path))


def test_node_file_writes_go_through_the_journal_file_layer(tmp_path, monkeypatch, caplog) -> None:
    """node.json is written like the journal's files (fsync, rename, directory fsync), so fault
    injection reaches it: a failing disk refuses a first start in one line, and while running it
    only defers recording the group id to the next start."""
    from mqctl.raft.storage import FAULT_FILE, FAULT_INJECT_ENV

    monkeypatch.setenv(FAULT_INJECT_ENV, "1")
    (tmp_path / FAULT_FILE).write_text("ENOSPC")
    with pytest.raises(UsageError, match=r"cannot write .*node\.json: No space left on device"):
        datadir.prepare(str(tmp_path), "127.0.0.1:1")
    (tmp_path / FAULT_FILE).unlink()
    lock = datadir.prepare(str(tmp_path), "127.0.0.1:1")
    try:
        (tmp_path / FAULT_FILE).write_text("EROFS")
        assert datadir.record_group_id(str(tmp_path), "g1") is None
        assert "cannot record group g1" in caplog.text and "Read-only file system" in caplog.text
        assert "groupId" not in json.loads((tmp_path / "node.json").read_text())
        (tmp_path / FAULT_FILE).unlink()
        assert datadir.record_group_id(str(tmp_path), "g1") is None
        assert json.loads((tmp_path / "node.json").read_text())["groupId"] == "g1"
        assert not (tmp_path / "node.json.tmp").exists()
    finally:
        lock.close()
