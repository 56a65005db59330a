"""A controller node's data directory: Raft journal, JSON snapshot, lock and group record.

Layout (docs/serve.md):
  raft.journal        the Raft log, fsynced before a write is acknowledged (mqctl/raft/journal.py)
  raft.journal.meta   Raft term, vote and a commit index hint (JSON, replaced atomically)
  raft.snapshot.json  the JSON snapshot written at log compaction
  node.json           {"format": ..., "groupId": ..., "raftAddress": ...}: whose data this is
  LOCK                held (flock) while a node runs on the directory
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
from typing import IO

from mqctl.errors import UsageError
from mqctl.raft.storage import Storage

log = logging.getLogger("mqctl.controller.datadir")

NODE_FILE = "node.json"
LOCK_FILE = "LOCK"
NODE_FORMAT = "mqctl-controller-node/1"


def default_data_dir(raft_address: str) -> str:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "mqctl", "controller-" + raft_address.replace(":", "-"))


def prepare(data_dir: str, raft_address: str | None = None) -> IO[str]:
    """Create the directory if needed and take its lock; refuse clearly if it is busy or unusable,
    or if it holds the Raft log of a node at another Raft address (pysyncobj names a node by its
    address, so such data is another node's, most likely another group's)."""
    try:
        os.makedirs(data_dir, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create data directory {data_dir}: {exc.strerror}") from exc
    if _read_only(data_dir):
        raise UsageError(
            f"data directory {data_dir} is on a read-only file system; remount it "
            "read-write (after a file system error: unmount, fsck, mount) or choose another "
            "--data-dir"
        )
    if not os.access(data_dir, os.R_OK | os.W_OK | os.X_OK):
        raise UsageError(f"data directory {data_dir} is not readable and writable by this user")
    try:
        lock = open(os.path.join(data_dir, LOCK_FILE), "a+", encoding="utf-8")  # noqa: SIM115 (held while serving)
    except OSError as exc:
        raise UsageError(f"cannot open {os.path.join(data_dir, LOCK_FILE)}: {exc.strerror}") from exc
    try:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        lock.close()
        raise UsageError(
            f"data directory {data_dir} is in use by another running controller "
            "(its LOCK is held); stop it or choose another --data-dir"
        ) from exc
    try:  # the pid is for people only: a full disk must not stop the node here
        lock.seek(0)
        lock.truncate()
        lock.write(str(os.getpid()))
        lock.flush()
    except OSError:
        pass
    try:
        doc = read_node_file(data_dir)  # fail early on a corrupt node.json
        if raft_address is not None:
            _check_raft_address(data_dir, doc, raft_address)
    except OSError as exc:
        lock.close()
        raise UsageError(f"cannot write {os.path.join(data_dir, NODE_FILE)}: {exc.strerror or exc}") from exc
    except BaseException:
        lock.close()
        raise
    return lock


def _read_only(data_dir: str) -> bool:
    try:
        return bool(os.statvfs(data_dir).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _check_raft_address(data_dir: str, doc: dict[str, str], raft_address: str) -> None:
    known = doc.get("raftAddress")
    has_log = any(os.path.exists(os.path.join(data_dir, f)) for f in ("raft.journal", "raft.snapshot.json"))
    if known and known != raft_address and has_log:
        raise UsageError(
            f"data directory {data_dir} holds the Raft log of the node at {known} "
            f"(group {doc.get('groupId') or 'unknown'}), not of {raft_address}; use an empty "
            "--data-dir for this node, or start it with --raft " + known
        )
    if known != raft_address:
        _write_node_file(data_dir, {**doc, "format": NODE_FORMAT, "raftAddress": raft_address})


def _write_node_file(data_dir: str, doc: dict[str, str]) -> None:
    """Replace node.json durably (temporary file, fsync, rename, fsync of the directory) through
    the Raft journal's file layer, so the test-only crash simulator and fault injection
    (MQCTL_CRASH_SIM, MQCTL_FAULT_INJECT) cover it too."""
    data = json.dumps(doc, sort_keys=True).encode("utf-8")
    Storage.from_env().write_atomic(os.path.join(data_dir, NODE_FILE), data)


def is_locked(data_dir: str) -> bool:
    """True when a running node holds the directory (used by upgrade/cleanup commands)."""
    path = os.path.join(data_dir, LOCK_FILE)
    if not os.path.exists(path):
        return False
    with open(path, "a+", encoding="utf-8") as fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
    return False


def read_node_file(data_dir: str) -> dict[str, str]:
    path = os.path.join(data_dir, NODE_FILE)
    if not os.path.exists(path):
        return {}
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, ValueError) as exc:
        raise UsageError(
            f"{path} is unreadable or corrupt ({exc}); restore it from a backup "
            "or move the data directory away"
        ) from exc
    if not isinstance(doc, dict) or doc.get("format") != NODE_FORMAT:
        raise UsageError(f"{path} is not an mqctl controller node file")
    return {str(k): str(v) for k, v in doc.items()}


def record_group_id(data_dir: str, group_id: str) -> str | None:
    """Remember which group created this data; return a problem if it belongs to another."""
    doc = read_node_file(data_dir)
    known = doc.get("groupId")
    if known and known != group_id:
        return (
            f"data directory {data_dir} belongs to controller group {known}, but this node "
            f"joined group {group_id}; use an empty --data-dir to join this group"
        )
    if not known:
        try:
            _write_node_file(data_dir, {**doc, "format": NODE_FORMAT, "groupId": group_id})
        except OSError as exc:  # disk full, read-only, the directory removed: not a reason to stop
            log.warning(
                "cannot record group %s in %s: %s; it is recorded at the next start",
                group_id,
                os.path.join(data_dir, NODE_FILE),
                exc.strerror or exc,
            )
    return None
