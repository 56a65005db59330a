"""`mqctl snapshot save|restore`: a controller group's state in one checksummed file, and a new
data directory seeded from it (etcdctl snapshot save/restore).

The file is JSON: the state as the Raft snapshot holds it (ControllerState.to_dict), the Raft
index it was applied at, the group, feature level and record versions, and a sha256 of the rest.
Restoring writes what a node writes at log compaction (raft.snapshot.json, mqctl.controller.raftlog)
with two no-op entries at that index and the new group's members, and node.json: a node started
on it loads the state as after a restart, and the group goes on from that index.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import time
from typing import Any

from mqctl.errors import StoreError, UsageError

FORMAT = "mqctl-controller-backup/1"
RAFT_SNAPSHOT = "raft.snapshot.json"
RAFT_SNAPSHOT_FORMAT = "mqctl-controller-snapshot/1"  # mqctl.controller.raftlog.SNAPSHOT_FORMAT
_NO_OP = base64.b64encode(bytes([1])).decode("ascii")  # pysyncobj's _COMMAND_TYPE.NO_OP entry


def _checksum(doc: dict[str, Any]) -> str:
    body = {k: v for k, v in doc.items() if k != "checksum"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    return "sha256:" + hashlib.sha256(canonical).hexdigest()


def build(answer: dict[str, Any], source: str, version: str) -> dict[str, Any]:
    """The file's document from a GetSnapshot answer."""
    doc: dict[str, Any] = {
        "format": FORMAT,
        "createdAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "source": source,
        "mqctlVersion": version,
        "appliedIndex": int(answer["applied_index"]),
        "term": int(answer["term"]),
        "group": answer.get("group") or "",
        "groupId": answer.get("group_id") or "",
        "featureLevel": int(answer.get("feature_level") or 1),
        "recordVersions": dict(answer.get("record_versions") or {}),
        "stateHash": answer["state_hash"],
        "state": json.loads(answer["state_json"]),
    }
    doc["checksum"] = _checksum(doc)
    return doc


def write(doc: dict[str, Any], path: str) -> str | None:
    """Write ``path`` durably (temporary file, fsync, rename); an existing file is kept beside it
    as PATH.bak-TIME. -> the backup's path, if any."""
    backup = None
    if os.path.exists(path):
        backup = f"{path}.bak-{time.strftime('%Y%m%dT%H%M%S')}"
        os.replace(path, backup)
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, sort_keys=True, indent=1)
        fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    return backup


def read(path: str) -> dict[str, Any]:
    """Read and check a snapshot file: StoreError (exit 4) when it is not one or is corrupt,
    UsageError (exit 2) when it is newer than this mqctl reads."""
    from mqctl.controller import core, records  # lazy: start-up

    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from exc
    except ValueError as exc:
        raise StoreError(f"{path} is not an mqctl controller snapshot (not JSON: {exc})") from exc
    if not isinstance(doc, dict) or not str(doc.get("format", "")).startswith("mqctl-controller-backup/"):
        raise StoreError(f"{path} is not an mqctl controller snapshot (`mqctl snapshot save` writes them)")
    if doc["format"] != FORMAT:
        raise UsageError(
            f"{path} is a snapshot of format {doc['format']}, newer than this mqctl reads "
            f"({FORMAT}): restore it with the mqctl that saved it ({doc.get('mqctlVersion')})"
        )
    if doc.get("checksum") != _checksum(doc):
        raise StoreError(f"{path} is corrupt: its checksum does not match its content; use another copy")
    level = doc.get("featureLevel")
    if not isinstance(level, int) or level > records.MAX_FEATURE_LEVEL:
        raise UsageError(
            f"{path} is at feature level {level}; this mqctl speaks "
            f"1..{records.MAX_FEATURE_LEVEL}: restore it with mqctl {doc.get('mqctlVersion')} "
            "or newer"
        )
    try:
        state = core.ControllerState.from_dict(doc["state"])
    except core.SnapshotVersionError as exc:
        raise UsageError(f"{path}: {exc}") from exc
    except (KeyError, TypeError, ValueError) as exc:
        raise StoreError(f"{path} is corrupt: its state does not load ({exc})") from exc
    if state.state_hash() != doc.get("stateHash"):
        raise StoreError(f"{path} is corrupt: its state does not have the state hash it was saved with")
    return doc


def restore_plan(
    doc: dict[str, Any], data_dir: str, raft: str, peers: list[str], group_id: str | None
) -> dict[str, Any]:
    """What `mqctl snapshot restore` will write, and how to start the node afterwards."""
    from mqctl.controller import datadir  # lazy: the raft fork

    members = sorted({raft, *peers})
    state = doc["state"]
    options = state.get("meta", {}).get("groupOptions") or {}
    busy = os.path.isdir(data_dir) and bool(os.listdir(data_dir))
    if busy and datadir.is_locked(data_dir):
        raise UsageError(f"data directory {data_dir} is in use by a running controller; stop it first")
    start = ["mqctl", "serve", "--raft", raft, "--data-dir", data_dir]
    if peers:
        start += ["--peers", ",".join(peers)]
    if options.get("group", "mqctl") != "mqctl":
        start += ["--group", str(options["group"])]
    if str(options.get("waitFor", "1")) != "1":
        start += ["--wait-for", str(options["waitFor"])]
    if str(options.get("enableElectUncleanMaster", "false")) == "true":
        start += ["--enable-elect-unclean-master"]
    return {
        "version": 1,
        "file": doc,
        "dataDir": data_dir,
        "raftAddress": raft,
        "members": members,
        "groupId": group_id or doc["groupId"],
        "appliedIndex": doc["appliedIndex"],
        "brokerSets": sorted(state.get("broker_sets", {})),
        "featureLevel": doc["featureLevel"],
        "backup": f"{data_dir}.backup-{time.strftime('%Y%m%dT%H%M%S')}" if busy else None,
        "start": " ".join(start) + " --listen HOST:PORT",
    }


def restore(plan: dict[str, Any]) -> None:
    """Seed the data directory as planned (the old one, if any, moved to plan["backup"])."""
    from mqctl.controller import datadir  # lazy: the raft fork
    from mqctl.controller.node_raft import META_GROUP_ID  # lazy: start-up
    from mqctl.raft.storage import Storage  # lazy: the raft fork

    data_dir, doc = plan["dataDir"], plan["file"]
    if plan["backup"]:
        os.replace(data_dir, plan["backup"])
    state = json.loads(json.dumps(doc["state"]))
    state.setdefault("meta", {})[META_GROUP_ID] = plan["groupId"]
    index = max(int(doc["appliedIndex"]), 2)
    snapshot = {
        "format": RAFT_SNAPSHOT_FORMAT,
        "state": state,
        "raft": {
            "lastEntry": [_NO_OP, index, 0],
            "prevEntry": [_NO_OP, index - 1, 0],
            "cluster": plan["members"],
        },
    }
    lock = datadir.prepare(data_dir, plan["raftAddress"])
    try:
        problem = datadir.record_group_id(data_dir, plan["groupId"])
        if problem:
            raise UsageError(problem)
        Storage.from_env().write_atomic(
            os.path.join(data_dir, RAFT_SNAPSHOT), json.dumps(snapshot, sort_keys=True).encode("utf-8")
        )
    finally:
        lock.close()
