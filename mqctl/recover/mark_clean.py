"""`mark-clean`: make a store the one to restart from (seed 002's manual recovery step), the way RocketMQ
itself tells a clean store from a dirty one: remove its `abort` file, which a broker creates when it
starts (DefaultMessageStore.start -> createTempFile) and deletes on a clean shutdown; while it exists the
next start runs the abnormal recovery (DefaultMessageStore.load: lastExitOK = !isTempFileExist()). The
final signature (last epoch, max offset, time, and the text of the removed `abort`) is written first,
so an interruption in between leaves a store that is still counted clean (docs/recovery.md)."""

from __future__ import annotations

import os
import time
from typing import Any

from mqctl.errors import UsageError
from mqctl.recover.inspect import EMPTY, NO_STORE, inspect_store
from mqctl.store import abort as abort_mod
from mqctl.store.signature import SIGNATURE_FILE, Signature, make_final, write_signature

__all__ = ["mark_clean"]


def mark_clean(
    path: str | os.PathLike[str], *, dry_run: bool = False, now_ms: int | None = None, deep: bool = False
) -> dict[str, Any]:
    """Compute (and unless dry_run, write the final signature and remove `abort`); returns what was (or
    would be) done."""
    rep = inspect_store(path, deep=deep)
    if rep.state == NO_STORE:
        raise UsageError(f"{path}: no store here; refusing to mark it clean")
    if rep.state == EMPTY:
        raise UsageError(f"{path}: the store is empty; there is nothing to mark clean")
    if rep.locked:
        raise UsageError(
            f"{os.path.join(path, 'lock')}: held by another process (is the broker running?); stop it first"
        )
    if rep.initial is None:
        why = "no brokerIdentity" if rep.identity is None else "no epoch entries"
        raise UsageError(
            f"{path}: cannot derive an initial signature ({why}: not a store of controller "
            f"mode); to have RocketMQ run its normal recovery, remove its abort file yourself"
        )
    last = rep.epochs[-1] if rep.epochs else None
    if last is None:
        raise UsageError(f"{path}: no epoch entries; cannot record the last epoch")
    now = int(time.time() * 1000) if now_ms is None else now_ms
    final = make_final(
        rep.initial.id, last.epoch, last.start_offset, rep.max_offset, now, abort=rep.abort, manual=True
    )
    sig = Signature(rep.initial, final)
    notes = []
    if rep.abort is not None:
        notes.append(
            f"abort file (pid {rep.abort}) {'would be ' if dry_run else ''}removed: RocketMQ runs "
            f"its normal recovery on the next start, not the abnormal one"
        )
    if rep.scan and rep.scan.stop == "corrupt":
        notes.append(
            f"the commitlog has an invalid tail after {rep.max_offset}; RocketMQ's recovery drops it"
        )
    was = rep.state
    if not dry_run:
        with abort_mod.hold_lock(path):
            write_signature(path, sig)
            abort_mod.remove_abort(path)
    return {
        "store": os.fspath(path),
        "dryRun": dry_run,
        "previousState": was,
        "file": os.path.join(os.fspath(path), SIGNATURE_FILE),
        "initialSignature": rep.initial.to_dict(),
        "finalSignature": final.to_dict(),
        "abortRemoved": rep.abort is not None and not dry_run,
        "notes": notes,
    }
