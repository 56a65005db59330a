"""`mqctl quorum dump`: a controller node's data directory, read only: its Raft journal entries decoded
(index, term, what the entry is; for a write, its typed records with type, version and fields) and its
JSON snapshot. For a post-mortem of a stopped node; a running node's directory (its LOCK held) is
refused unless forced, since what it is writing may be read half-written.

pysyncobj frames each entry with a command type byte and pickles the command; the pickles are read
with an unpickler that makes no object but the plain types (and a stand-in for a membership change's
node), so a damaged or hostile journal cannot run code here.
"""

from __future__ import annotations

import fcntl
import io
import json
import os
import pickle
from dataclasses import dataclass
from typing import Any

from mqctl.controller.datadir import LOCK_FILE, read_node_file
from mqctl.controller.records import RecordError, decode, encode
from mqctl.errors import StoreError, UsageError
from mqctl.raft.journal import read_entries

__all__ = ["JOURNAL_FILE", "SNAPSHOT_FILE", "decode_command", "dump_data_dir", "is_running"]

JOURNAL_FILE = "raft.journal"
SNAPSHOT_FILE = "raft.snapshot.json"
_REGULAR, _NO_OP, _MEMBERSHIP, _VERSION = 0, 1, 2, 3


def is_running(data_dir: str) -> bool:
    """A node holds the directory's LOCK (flock, mqctl.controller.datadir.prepare)."""
    try:
        fd = os.open(os.path.join(data_dir, LOCK_FILE), os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


@dataclass
class _Node:
    """What a pickled pysyncobj TCPNode becomes here: its fields, nothing run."""

    state: Any = None

    def __setstate__(self, state: Any) -> None:
        self.state = state


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if module.startswith("pysyncobj") and name.endswith("Node"):
            return _Node
        raise pickle.UnpicklingError(f"{module}.{name} is not what a controller journal holds")


def _unpickle(data: bytes) -> Any:
    return _PlainUnpickler(io.BytesIO(data)).load()


def decode_command(command: bytes) -> dict[str, Any]:
    """What one journal entry is: {"kind": write|barrier|no-op|membership|version, ...}; a write's
    records (each {"type", "v", fields...}) as mqctl.controller.records reads them, or why not."""
    if not command:
        return {"kind": "unknown", "error": "empty entry"}
    kind, body = command[0], command[1:]
    try:
        if kind == _NO_OP:
            return {"kind": "no-op"}
        if kind == _VERSION:
            return {"kind": "version", "codeVersion": _unpickle(body)}
        if kind == _MEMBERSHIP:
            change = _unpickle(body)
            return {"kind": "membership", "change": str(change[0]), "node": str(change[1])}
        if kind != _REGULAR:
            return {"kind": "unknown", "error": f"command type {kind}"}
        cmd = _unpickle(body)
    except Exception as exc:
        return {"kind": "unknown", "error": f"undecodable command: {type(exc).__name__}: {exc}"}
    args = cmd[1] if isinstance(cmd, tuple) and len(cmd) > 1 else ()
    if not args:
        return {"kind": "barrier"}
    return _write(args[0])


def _write(entry_json: Any) -> dict[str, Any]:
    try:
        doc = json.loads(entry_json)
    except (TypeError, ValueError) as exc:
        return {"kind": "write", "error": f"not a JSON entry: {exc}"}
    if isinstance(doc, dict) and "events" in doc and isinstance(doc["events"], list):
        records: list[dict[str, Any]] = []
        for raw in doc["events"]:
            try:
                records.append(encode(decode(raw)))
            except RecordError as exc:
                records.append({"error": str(exc), "raw": raw})
        return {"kind": "write", "records": records}
    if isinstance(doc, dict) and "method" in doc:  # a command entry of an mqctl 0.1 leader
        return {"kind": "command", "method": doc.get("method"), "request": doc.get("request")}
    return {"kind": "write", "error": "neither records nor a command", "raw": doc}


def dump_data_dir(data_dir: str, *, force: bool = False) -> dict[str, Any]:
    if not os.path.isdir(data_dir):
        raise UsageError(f"{data_dir}: not a directory (a controller node's --data-dir)")
    running = is_running(data_dir)
    if running and not force:
        raise UsageError(
            f"{data_dir}/{LOCK_FILE} is held: a controller node runs on this directory; stop it "
            "first (or --force to read what it is writing, possibly half-written)"
        )
    journal = os.path.join(data_dir, JOURNAL_FILE)
    snapshot = os.path.join(data_dir, SNAPSHOT_FILE)
    if not os.path.exists(journal) and not os.path.exists(snapshot):
        raise StoreError(
            f"{data_dir}: no {JOURNAL_FILE} and no {SNAPSHOT_FILE}: not a controller data directory"
        )
    doc: dict[str, Any] = {"dataDir": data_dir, "running": running, "node": read_node_file(data_dir) or None}
    meta_path = journal + ".meta"
    if os.path.exists(meta_path):
        try:
            with open(meta_path, encoding="utf-8") as fh:
                doc["meta"] = json.load(fh)
        except (OSError, ValueError) as exc:
            doc["meta"] = {"error": f"{meta_path}: {exc}"}
    entries, tail = read_entries(journal) if os.path.exists(journal) else ([], None)
    doc["journal"] = {
        "file": journal if os.path.exists(journal) else None,
        "tail": tail,
        "entries": [{"index": i, "term": t, **decode_command(c)} for i, t, c in entries],
    }
    doc["snapshot"] = _snapshot(snapshot) if os.path.exists(snapshot) else None
    return doc


def _snapshot(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as fh:
            snap = json.load(fh)
    except (OSError, ValueError) as exc:
        raise StoreError(f"{path}: unreadable snapshot: {exc}") from None
    if not isinstance(snap, dict) or "state" not in snap or "raft" not in snap:
        raise StoreError(f"{path}: not an mqctl controller snapshot")
    raft = snap["raft"]
    last = raft.get("lastEntry") or [None, None, None]
    return {
        "file": path,
        "format": snap.get("format"),
        "lastIndex": last[1],
        "lastTerm": last[2],
        "cluster": raft.get("cluster"),
        "state": snap["state"],
    }
