"""Inspect one store directory: identity, state, epochs, max offset, checkpoint, signature, problems.

Pure reading: nothing here writes (tests compare a hash of the tree before and after).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mqctl.camel import camel_fields
from mqctl.errors import MqctlError, NotFoundError, StoreError
from mqctl.store import abort as abort_mod
from mqctl.store.checkpoint import StoreCheckpoint, read_checkpoint
from mqctl.store.commitlog import COMMITLOG_DIR, CommitLog, ScanResult
from mqctl.store.epochfile import EPOCH_FILE, EpochEntry, end_offsets, read_epoch_file, validate_entries
from mqctl.store.identity import (
    IDENTITY_FILE,
    BrokerIdentity,
    TempBrokerIdentity,
    read_identity,
    read_temp_identity,
)
from mqctl.store.signature import (
    SIGNATURE_FILE,
    FinalSignature,
    InitialSignature,
    Signature,
    derive_initial,
    read_signature,
)

NO_STORE = "no store"
EMPTY = "empty"
DIRTY = "dirty"
CLEAN = "clean"

_MARKERS = (
    COMMITLOG_DIR,
    IDENTITY_FILE,
    IDENTITY_FILE + "-temp",
    EPOCH_FILE,
    EPOCH_FILE + ".bak",
    "checkpoint",
    "abort",
    SIGNATURE_FILE,
    "consumequeue",
)

__all__ = [
    "CLEAN",
    "DIRTY",
    "EMPTY",
    "ERROR",
    "NO_STORE",
    "StoreFailure",
    "StoreReport",
    "failures_error",
    "inspect_store",
    "inspect_stores",
    "no_store_error",
    "stores_beneath",
]

ERROR = "error"  # the state of an error row: the store could not be inspected


@dataclass
class StoreReport:
    path: str
    state: str
    identity: BrokerIdentity | None = None
    temp_identity: TempBrokerIdentity | None = None
    epochs: list[EpochEntry] = field(default_factory=list)
    epoch_source: str | None = None
    min_offset: int = 0
    max_offset: int = 0
    file_size: int = 0
    file_count: int = 0
    total_bytes: int = 0
    scan: ScanResult | None = None
    deep: bool = False
    checkpoint: StoreCheckpoint | None = None
    checkpoint_matches: bool | None = None
    abort: str | None = None
    locked: bool = False
    signature: Signature | None = None
    initial: InitialSignature | None = None
    dirty_reasons: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def last_epoch(self) -> int:
        return self.epochs[-1].epoch if self.epochs else -1

    @property
    def confirm_offset(self) -> int | None:
        return self.checkpoint.confirm_phy_offset if self.checkpoint else None

    @property
    def cluster_name(self) -> str | None:
        if self.identity:
            return self.identity.cluster_name
        return self.initial.cluster_name if self.initial else None

    @property
    def broker_name(self) -> str | None:
        if self.identity:
            return self.identity.broker_name
        return self.initial.broker_name if self.initial else None

    @property
    def broker_id(self) -> int | None:
        return self.identity.broker_id if self.identity else None

    def to_dict(self) -> dict[str, Any]:
        ends = end_offsets(self.epochs, self.max_offset)
        sig = self.signature
        return {
            "store": self.path,
            **camel_fields(self, "state", "cluster_name", "broker_name", "broker_id"),
            "tempIdentity": None
            if self.temp_identity is None
            else {
                "brokerId": self.temp_identity.broker_id,
                "registerCheckCode": self.temp_identity.register_check_code,
            },
            "epochs": [
                {"epoch": e.epoch, "startOffset": e.start_offset, "endOffset": end}
                for e, end in zip(self.epochs, ends, strict=True)
            ],
            **camel_fields(self, "epoch_source", "last_epoch", "min_offset", "max_offset", "confirm_offset"),
            "checkpoint": self.checkpoint.to_dict() if self.checkpoint else None,
            **camel_fields(self, "checkpoint_matches", "file_size", "file_count", "total_bytes", "deep"),
            "scannedFrom": self.scan.scanned_from if self.scan else None,
            "recordsScanned": self.scan.records if self.scan else 0,
            "bytesScanned": self.scan.bytes_scanned if self.scan else 0,
            "bytesBeyond": self.scan.bytes_beyond if self.scan else 0,
            **camel_fields(self, "abort", "locked"),
            "initialSignature": self.initial.to_dict() if self.initial else None,
            "finalSignature": sig.final.to_dict() if sig and sig.final else None,
            "dirtyReasons": list(self.dirty_reasons),
            "problems": list(self.problems),
        }


def _has_commitlog_files(d: Path) -> bool:
    """A commitlog file with bytes in d. An empty (0-byte) last file does not count: RocketMQ deletes it
    when it loads the commitlog (MappedFileQueue.doLoad), so a directory holding only that is empty."""
    try:
        return any(
            len(e.name) == 20 and e.name.isdigit() and not (e.is_file() and e.stat().st_size == 0)
            for e in os.scandir(d)
        )
    except (FileNotFoundError, NotADirectoryError):
        return False


def inspect_store(
    path: str | os.PathLike[str], *, deep: bool = False, keep_chains: bool = False, workers: int = 1
) -> StoreReport:
    """Read everything mqctl knows about one store; StoreError when a file is unreadable or corrupt
    beyond what RocketMQ itself would recover from (a torn commitlog tail is a problem, not an error).
    keep_chains: the scan's records kept in `scan.chains` (salvage reads them again); workers: processes
    that walk the commitlog files at once (`CommitLog.scan`)."""
    root = Path(path)
    rep = StoreReport(os.fspath(path), NO_STORE, deep=deep)
    if not root.exists():
        rep.problems.append(f"{root}: does not exist")
        return rep
    if not root.is_dir():
        raise StoreError(f"{root}: not a directory")
    if not any((root / m).exists() for m in _MARKERS):
        rep.problems.append(f"{root}: none of RocketMQ's store files")
        return rep
    rep.identity = read_identity(root)
    rep.temp_identity = read_temp_identity(root)
    ep = read_epoch_file(root)
    rep.epochs, rep.epoch_source = ep.entries, ep.source
    rep.problems += ep.problems + validate_entries(ep.entries)
    rep.checkpoint = read_checkpoint(root)
    rep.abort = abort_mod.read_abort(root)
    rep.locked = abort_mod.is_locked(root)
    rep.signature = read_signature(root)
    cl_dir = root / COMMITLOG_DIR
    if _has_commitlog_files(cl_dir):
        log = CommitLog(cl_dir)
        scan = log.scan(deep=deep, keep_chains=keep_chains, workers=workers)
        rep.scan = scan
        rep.min_offset, rep.max_offset = scan.min_offset, scan.max_offset
        rep.file_size, rep.file_count, rep.total_bytes = log.file_size, len(log.files), log.total_bytes
        rep.problems += scan.problems
        has_data = scan.records > 0 or scan.max_offset > scan.min_offset
    else:
        has_data = False
        rep.problems.append(f"{cl_dir}: no commitlog files")
    if rep.checkpoint is not None and has_data:
        cp = rep.checkpoint
        ok = cp.confirm_phy_offset <= rep.max_offset
        if not ok:
            rep.problems.append(
                f"checkpoint confirmPhyOffset {cp.confirm_phy_offset} is beyond the max "
                f"offset {rep.max_offset}: confirmed data is missing"
            )
        if rep.scan and rep.scan.records and cp.physic_msg_timestamp > rep.scan.last_store_timestamp:
            ok = False
            rep.problems.append(
                f"checkpoint physicMsgTimestamp {cp.physic_msg_timestamp} is after the "
                f"last record's store time {rep.scan.last_store_timestamp}: flushed data is "
                f"missing"
            )
        rep.checkpoint_matches = ok
    if rep.epochs and has_data and rep.epochs[-1].start_offset > rep.max_offset:
        rep.problems.append(
            f"last epoch {rep.epochs[-1].epoch} starts at {rep.epochs[-1].start_offset}, "
            f"beyond the max offset {rep.max_offset}"
        )
    sig = rep.signature
    if sig and sig.initial:
        rep.initial = sig.initial
    elif rep.identity and rep.epochs:
        rep.initial = derive_initial(
            rep.identity.cluster_name,
            rep.identity.broker_name,
            rep.epochs[0].epoch,
            rep.epochs[0].start_offset,
        )
    if (
        rep.identity
        and rep.initial
        and (rep.initial.cluster_name, rep.initial.broker_name)
        != (rep.identity.cluster_name, rep.identity.broker_name)
    ):
        rep.problems.append(
            f"initial signature names {rep.initial.cluster_name}/{rep.initial.broker_name}, "
            f"brokerIdentity names {rep.identity.cluster_name}/{rep.identity.broker_name}"
        )
    if not has_data:
        rep.state = EMPTY
        return rep
    rep.dirty_reasons = _dirty_reasons(rep)
    fin = rep.signature.final if rep.signature else None
    if fin is not None and rep.abort is None:
        rep.problems += [
            f"{m}: the store changed after the final signature was written (RocketMQ does not update it)"
            for m in _signature_mismatches(rep, fin)
        ]
    rep.state = DIRTY if rep.dirty_reasons else CLEAN
    return rep


@dataclass
class StoreFailure:
    """The error row of a store that could not be inspected (missing, unreadable, corrupt)."""

    path: str
    error: str
    exit_code: int = StoreError.exit_code
    state: str = ERROR

    def to_dict(self) -> dict[str, Any]:
        return {"store": self.path, "state": self.state, "error": self.error, "exitCode": self.exit_code}


def inspect_stores(paths: list[str], *, deep: bool = False) -> list[StoreReport | StoreFailure]:
    """inspect_store for each path, in order; a store that cannot be inspected is a StoreFailure row and
    never stops the others. A path that does not exist is a failure (a missing store); an existing
    directory without any of RocketMQ's store files is a NO_STORE report. deep reads every byte: one
    walker process per core."""
    workers = (os.cpu_count() or 1) if deep else 1
    out: list[StoreReport | StoreFailure] = []
    for p in paths:
        if not os.path.lexists(p):
            out.append(StoreFailure(os.fspath(p), f"{p}: does not exist (no store directory here)"))
            continue
        try:
            out.append(inspect_store(p, deep=deep, workers=workers))
        except MqctlError as exc:
            out.append(StoreFailure(os.fspath(p), str(exc), exc.exit_code))
    return out


def stores_beneath(root: str | os.PathLike[str], depth: int = 2, limit: int = 20) -> list[str]:
    """Directories up to ``depth`` levels below ``root`` that hold RocketMQ store files (a broker
    set's folder with one store per replica, r0, r1, r2), at most ``limit``, sorted; symlinks not
    followed."""
    found: list[str] = []

    def walk(d: Path, left: int) -> None:
        try:
            subs = sorted(e for e in d.iterdir() if e.is_dir() and not e.is_symlink())
        except OSError:
            return
        for sub in subs:
            if len(found) >= limit:
                return
            if any((sub / m).exists() for m in _MARKERS):
                found.append(os.fspath(sub))
            elif left > 1:
                walk(sub, left - 1)

    walk(Path(root), depth)
    return found


def no_store_error(results: list[StoreReport | StoreFailure]) -> MqctlError | None:
    """A NotFoundError (exit 5) for the paths that exist but hold no store, each with where stores
    were found beneath it; None when every path held a store."""

    lines = []
    for r in results:
        if isinstance(r, StoreReport) and r.state == NO_STORE:
            below = stores_beneath(r.path)
            where = (
                f"stores beneath it: {', '.join(os.path.relpath(b, r.path) for b in below)} "
                f"(inspect {os.path.join(r.path, '*')} or name them)"
                if below
                else "none beneath it either"
            )
            lines.append(f"{r.path}: no store here (none of RocketMQ's store files); {where}")
    return NotFoundError("; ".join(lines)) if lines else None


def failures_error(results: list[StoreReport | StoreFailure]) -> MqctlError | None:
    """One error for the failure rows (None when there are none), with the worst exit code."""
    failed = [r for r in results if isinstance(r, StoreFailure)]
    if not failed:
        return None
    if len(results) == 1:
        err = StoreError(failed[0].error)
    else:
        what = "; ".join(f.error for f in failed[:3]) + (
            f"; and {len(failed) - 3} more" if len(failed) > 3 else ""
        )
        err = StoreError(f"{len(failed)} of {len(results)} stores could not be inspected: {what}")
    err.exit_code = max(f.exit_code for f in failed)
    return err


def _dirty_reasons(rep: StoreReport) -> list[str]:
    """RocketMQ's rule: a broker creates `abort` when it starts (DefaultMessageStore.start ->
    createTempFile) and deletes it on a clean shutdown (shutdown -> deleteFile, kept when the store is not
    writeable or dispatch is behind); the next start runs the abnormal recovery while it exists (load:
    lastExitOK = !isTempFileExist()). So a store without `abort` was shut down cleanly, signed by mqctl
    or not. An `abort` whose text a final signature recorded (mark-clean of mqctl 0.1, which left the
    file in place) is acknowledged while that signature still matches the store."""
    if rep.abort is None:
        return []
    fin = rep.signature.final if rep.signature else None
    if fin is not None and fin.abort == rep.abort:
        return _signature_mismatches(rep, fin)
    return [f"abort file present (pid {rep.abort}): not shut down cleanly"]


def _signature_mismatches(rep: StoreReport, fin: FinalSignature) -> list[str]:
    reasons = []
    last = rep.epochs[-1] if rep.epochs else None
    if last is None or (fin.last_epoch, fin.last_epoch_start_offset) != (last.epoch, last.start_offset):
        held = f"{last.epoch}-{last.start_offset}" if last else "none"
        reasons.append(
            f"final signature says last epoch {fin.last_epoch}-{fin.last_epoch_start_offset}, "
            f"the store holds {held}"
        )
    if fin.max_offset != rep.max_offset:
        reasons.append(f"final signature says max offset {fin.max_offset}, the store holds {rep.max_offset}")
    if rep.initial and fin.initial_id != rep.initial.id:
        reasons.append("final signature belongs to another initial signature")
    return reasons
