"""`truncate --to OFFSET`: cut a store's commitlog at a record boundary and correct its epoch file the way
a RocketMQ slave does (truncateSuffixByOffset), after saving everything removed to a backup directory.

Order: refuse (not a boundary / outside the log / broker running) -> hold `<store>/lock` -> copy the
bytes to be cut, whole later files, the epoch files and the checkpoint into the backup directory and
fsync them -> delete later files -> zero the cut tail of the file holding OFFSET -> write the epoch file
(previous content to `.bak`) -> lower checkpoint confirmPhyOffset if it was beyond OFFSET.

Deliberate differences from RocketMQ (docs/recovery.md): the cut tail is zeroed (RocketMQ only moves its
write position, so a later recovery scan can resurrect the records), and when no epoch entry survives
the epoch file and its `.bak` are removed (RocketMQ's CheckpointFile.write leaves the old file).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mqctl.camel import camel_fields
from mqctl.errors import StoreError, UsageError
from mqctl.recover.inspect import NO_STORE, inspect_store
from mqctl.store import abort as abort_mod
from mqctl.store.checkpoint import CHECKPOINT_FILE, StoreCheckpoint, read_checkpoint, write_checkpoint
from mqctl.store.commitlog import BLANK_MAGIC, COMMITLOG_DIR, CommitLog
from mqctl.store.epochfile import EPOCH_FILE, EpochEntry, truncate_suffix_by_offset, write_epoch_file

__all__ = ["TruncatePlan", "apply_truncate", "default_backup_dir", "plan_truncate"]

_CHUNK = 8 << 20


@dataclass
class FileCut:
    path: str
    start: int  # absolute offset of the file
    position: int  # first byte removed, within the file
    length: int  # bytes removed (to the last non-zero byte)
    whole: bool  # the whole file goes


@dataclass
class TruncatePlan:
    store: str
    to: int
    max_offset: int
    records: int
    cuts: list[FileCut] = field(default_factory=list)
    epochs_before: list[EpochEntry] = field(default_factory=list)
    epochs_after: list[EpochEntry] = field(default_factory=list)
    confirm_before: int | None = None
    confirm_after: int | None = None

    @property
    def bytes_to_drop(self) -> int:
        return self.max_offset - self.to

    @property
    def nothing_to_do(self) -> bool:
        return (
            not self.cuts
            and self.epochs_before == self.epochs_after
            and self.confirm_before == self.confirm_after
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "store": self.store,
            "truncateTo": self.to,
            **camel_fields(self, "max_offset", "bytes_to_drop"),
            "recordsToDrop": self.records,
            "files": [
                {"file": c.path, "fromPosition": c.position, "bytes": c.length, "wholeFile": c.whole}
                for c in self.cuts
            ],
            "epochsBefore": [f"{e.epoch}-{e.start_offset}" for e in self.epochs_before],
            "epochsAfter": [f"{e.epoch}-{e.start_offset}" for e in self.epochs_after],
            "confirmOffsetBefore": self.confirm_before,
            "confirmOffsetAfter": self.confirm_after,
        }


def _data_end(path: Path, start: int, size: int) -> int:
    """Position after the last non-zero byte in [start, size) of a file (start if all zero)."""
    with open(path, "rb") as fh:
        end = size
        while end > start:
            lo = max(start, end - _CHUNK)
            fh.seek(lo)
            chunk = fh.read(end - lo).rstrip(b"\0")
            if chunk:
                return lo + len(chunk)
            end = lo
    return start


def _is_blank_marker(path: Path, pos: int) -> bool:
    with open(path, "rb") as fh:
        fh.seek(pos)
        head = fh.read(8)
    return len(head) == 8 and struct.unpack(">iI", head)[1] == BLANK_MAGIC


def plan_truncate(store: str | os.PathLike[str], to: int) -> TruncatePlan:
    """What `truncate --to` would remove. UsageError for a refused offset (with the nearest boundaries)."""
    rep = inspect_store(store)
    if rep.state == NO_STORE:
        raise UsageError(f"{store}: no store here")
    cl_dir = Path(store) / COMMITLOG_DIR
    log = CommitLog(cl_dir)  # StoreError on an empty or broken directory
    if to < log.min_offset:
        raise UsageError(f"offset {to} is before the commitlog's first offset {log.min_offset}")
    if to > rep.max_offset:
        raise UsageError(
            f"offset {to} is beyond the last valid record's end {rep.max_offset}; "
            f"nearest boundary below: {rep.max_offset}"
        )
    before, after = log.boundaries_around(to, rep.max_offset)
    if before != to:
        near = " and ".join(str(b) for b in (before, after) if b is not None)
        raise UsageError(f"offset {to} is not a record boundary; nearest boundaries: {near}")
    records = 0
    if to < rep.max_offset:
        records = sum(1 for _ in log.iter_records(to, check_crc=False, strict=False))
    plan = TruncatePlan(
        os.fspath(store),
        to,
        rep.max_offset,
        records,
        epochs_before=list(rep.epochs),
        epochs_after=truncate_suffix_by_offset(rep.epochs, to),
    )
    cp = rep.checkpoint
    if cp is not None:
        plan.confirm_before = cp.confirm_phy_offset
        plan.confirm_after = min(cp.confirm_phy_offset, to)
    for lf in log.files:
        end_abs = lf.start + lf.size
        if end_abs <= to:
            continue
        pos = max(0, to - lf.start)
        whole = pos == 0 and lf.start > log.min_offset  # the first file stays, zeroed
        data_end = _data_end(lf.path, pos, lf.size)
        if to == rep.max_offset and not whole and data_end == pos + 8 and _is_blank_marker(lf.path, pos):
            continue  # RocketMQ's end-of-file marker right at the end of the data: not data, kept
        if whole:
            plan.cuts.append(FileCut(str(lf.path), lf.start, 0, lf.size, True))
        elif data_end > pos:
            plan.cuts.append(FileCut(str(lf.path), lf.start, pos, data_end - pos, False))
    return plan


def default_backup_dir(store: str | os.PathLike[str], now: float | None = None) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%S", time.localtime(time.time() if now is None else now))
    p = Path(os.fspath(store).rstrip("/"))
    return p.with_name(f"{p.name}.truncate-backup-{stamp}")


def _copy_range(src: Path, dst: Path, pos: int, length: int) -> str:
    h = hashlib.sha256()
    dst.parent.mkdir(parents=True, exist_ok=True)
    with open(src, "rb") as fi, open(dst, "wb") as fo:
        fi.seek(pos)
        left = length
        while left:
            chunk = fi.read(min(_CHUNK, left))
            if not chunk:
                raise StoreError(f"{src} offset {pos + length - left}: file ended while backing it up")
            h.update(chunk)
            fo.write(chunk)
            left -= len(chunk)
        fo.flush()
        os.fsync(fo.fileno())
    return h.hexdigest()


def apply_truncate(plan: TruncatePlan, backup_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """Back up, then cut. Returns the manifest written to `<backup_dir>/manifest.json`."""
    store = Path(plan.store)
    bdir = Path(backup_dir)
    if bdir.exists() and any(bdir.iterdir()):
        raise UsageError(f"{bdir}: backup directory exists and is not empty")
    with abort_mod.hold_lock(store):
        bdir.mkdir(parents=True, exist_ok=True)
        files = []
        for c in plan.cuts:
            name = Path(c.path).name + ("" if c.whole else f".from-{c.position}")
            digest = _copy_range(Path(c.path), bdir / COMMITLOG_DIR / name, c.position, c.length)
            files.append(
                {
                    "file": c.path,
                    "backup": str(bdir / COMMITLOG_DIR / name),
                    "fromPosition": c.position,
                    "bytes": c.length,
                    "wholeFile": c.whole,
                    "sha256": digest,
                }
            )
        saved = []
        for name in (EPOCH_FILE, EPOCH_FILE + ".bak", CHECKPOINT_FILE):
            src = store / name
            if src.exists():
                shutil.copy2(src, bdir / name)
                saved.append(name)
        manifest = {
            "store": str(store),
            "backupDir": str(bdir),
            "time": int(time.time() * 1000),
            **plan.to_dict(),
            "commitlogFiles": files,
            "savedFiles": saved,
            "restore": "copy each commitlog backup back to its file at fromPosition (whole files as "
            "they are) and the saved files back into the store, with the broker stopped",
        }
        mpath = bdir / "manifest.json"
        mpath.write_text(json.dumps(manifest, indent=2) + "\n")
        with open(mpath, "rb") as fh:
            os.fsync(fh.fileno())
        # --- the cut
        for c in sorted(plan.cuts, key=lambda c: -c.start):
            p = Path(c.path)
            if c.whole:
                p.unlink()
            else:
                with open(p, "r+b") as fh:
                    left, pos = c.length, c.position
                    while left:
                        n = min(_CHUNK, left)
                        os.pwrite(fh.fileno(), bytes(n), pos)
                        pos += n
                        left -= n
                    fh.flush()
                    os.fsync(fh.fileno())
        if plan.epochs_after != plan.epochs_before:
            if plan.epochs_after:
                write_epoch_file(store, plan.epochs_after)
            else:
                (store / EPOCH_FILE).unlink(missing_ok=True)
                (store / (EPOCH_FILE + ".bak")).unlink(missing_ok=True)
        if plan.confirm_after is not None and plan.confirm_after != plan.confirm_before:
            cp = read_checkpoint(store) or StoreCheckpoint()
            write_checkpoint(
                store,
                StoreCheckpoint(
                    cp.physic_msg_timestamp,
                    cp.logics_msg_timestamp,
                    cp.index_msg_timestamp,
                    cp.master_flushed_offset,
                    plan.confirm_after,
                ),
            )
    return manifest
