"""`clear-epochs`: what to remove from each store (runbook step "delete the epoch files").

RocketMQ 5.1.1+ starts a fresh epoch history when a broker registers with the new controller;
the old `epochFileCheckpoint` (and its `.bak`, which RocketMQ reads when the main file fails)
would contradict it. Only those two files go; everything else in the store stays.
"""

from __future__ import annotations

import os
from pathlib import Path

from mqctl.errors import UsageError
from mqctl.store.epochfile import EPOCH_FILE
from mqctl.upgrade.backup import ClearPlan, Item, Root

EPOCH_FILES = (EPOCH_FILE, EPOCH_FILE + ".bak")
_STORE_MARKERS = (
    "commitlog",
    "checkpoint",
    "lock",
    "abort",
    "consumequeue",
    "config",
    "brokerIdentity",
    EPOCH_FILE,
    EPOCH_FILE + ".bak",
)

__all__ = ["EPOCH_FILES", "looks_like_store", "plan_clear_epochs"]


def looks_like_store(path: Path) -> bool:
    return path.is_dir() and any((path / m).exists() for m in _STORE_MARKERS)


def plan_clear_epochs(stores: list[str]) -> ClearPlan:
    """One root per store with the epoch files it holds. UsageError for a path that is not a store
    directory (the command refuses rather than guess at a typo)."""
    if not stores:
        raise UsageError("no store given: pass --store DIR (once per store)")
    plan = ClearPlan("epochs")
    seen: set[str] = set()
    for s in stores:
        p = Path(s)
        real = os.path.realpath(s)
        if real in seen:
            raise UsageError(f"{s}: given twice")
        seen.add(real)
        if not p.exists():
            raise UsageError(f"{s}: no such directory (the broker's storePathRootDir, default ~/store)")
        if not looks_like_store(p):
            raise UsageError(
                f"{s}: not a RocketMQ store directory (no commitlog, checkpoint, lock or epoch "
                f"file); pass the broker's storePathRootDir"
            )
        root = Root(os.path.abspath(s), "store")
        for name in EPOCH_FILES:
            f = p / name
            if f.is_symlink() or (f.exists() and not f.is_file()):
                raise UsageError(f"{f}: not a regular file; remove it by hand")
            if f.is_file():
                root.items.append(Item(name, "file", f.stat().st_size))
        if not root.items:
            root.notes.append("no epoch files (already cleared)")
        if (p / (EPOCH_FILE + ".tmp")).exists():
            root.notes.append(
                f"{EPOCH_FILE}.tmp left from an interrupted write: RocketMQ never reads it; left in place"
            )
        plan.roots.append(root)
    return plan
