"""`mqctl metadata sync` offline: copy what a stopped replica's store lacks from another's, the way RocketMQ
persists (MixAll.string2File: temp file fsynced, the previous content to .bak, rename), the files replaced
saved to a backup directory first, each file's dataVersion moved on (nextVersion) so that the name server
and the slaves see the change."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from mqctl.errors import UsageError
from mqctl.recover.metadata import StoreFiles, SyncPlan, plan_sync, read_store_files, replica_of
from mqctl.store import metadata as md
from mqctl.store.abort import is_locked

__all__ = ["PreparedSync", "apply_sync", "default_backup_dir", "prepare_sync"]


@dataclass(frozen=True)
class PreparedSync:
    src: str
    dst: str
    dst_files: StoreFiles
    plan: SyncPlan


def _check_store(store: str, role: str) -> None:
    if not Path(store).is_dir():
        raise UsageError(f"--{role} {store}: not a directory (a broker's storePathRootDir)")


def prepare_sync(src: str, dst: str, what: Sequence[str], *, allow_rewind: bool = False) -> PreparedSync:
    """Read both stores and plan; refuse a target whose broker runs (it holds the store's lock and would
    overwrite the files from memory at its next persist) or a source of another broker set."""
    _check_store(src, "from")
    _check_store(dst, "to")
    if os.path.realpath(src) == os.path.realpath(dst):
        raise UsageError("--from and --to name the same store")
    if is_locked(dst):
        raise UsageError(
            f"{dst}/lock: held by another process (is the broker running?); stop it first: a "
            "running broker writes its own tables over these files (or use the online sync)"
        )
    sf, df = read_store_files(src), read_store_files(dst)
    srep, drep = replica_of(src, sf), replica_of(dst, df)
    if srep.broker_set and drep.broker_set and srep.broker_set != drep.broker_set:
        raise UsageError(
            f"{src} is a replica of {srep.broker_set} and {dst} of {drep.broker_set}: "
            "metadata is copied within one broker set"
        )
    plan = plan_sync(srep, drep, what, allow_rewind=allow_rewind)
    return PreparedSync(src, dst, df, plan)


def default_backup_dir(store: str, now: float | None = None) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%S", time.localtime(time.time() if now is None else now))
    p = Path(os.fspath(store).rstrip("/"))
    return p.with_name(f"{p.name}.metadata-backup-{stamp}")


def apply_sync(prep: PreparedSync, backup_dir: str | None = None) -> tuple[list[str], str]:
    """Back up, then write the target's changed files; (the files written, the backup directory)."""
    p, d = prep.plan, prep.dst_files
    if is_locked(prep.dst):  # the broker may have started since the plan
        raise UsageError(f"{prep.dst}/lock: held by another process (is the broker running?); stop it first")
    dst = prep.dst
    changes: list[tuple[str, Callable[[], Path]]] = []

    def change(name: str, write: Callable[..., Path], file: Any, **fields: Any) -> None:
        """``file`` written anew with ``fields``, its dataVersion one on."""
        changes.append(
            (name, partial(write, dst, replace(file, data_version=_next(file.data_version), **fields)))
        )

    if p.topics_added:
        change(md.TOPICS, md.write_topics, d.topics, topics={**d.topics.topics, **p.topics_added})
    if p.groups_added:
        change(
            md.SUBSCRIPTION_GROUPS,
            md.write_subscription_groups,
            d.groups,
            groups={**d.groups.groups, **p.groups_added},
        )
    if p.offsets_set:
        offsets = {k: dict(m) for k, m in d.offsets.offsets.items()}
        for o in p.offsets_set:
            offsets.setdefault(f"{o['topic']}@{o['group']}", {})[o["queueId"]] = o["to"]
        change(md.CONSUMER_OFFSETS, md.write_consumer_offsets, d.offsets, offsets=offsets)
    if p.delay_set:
        delay = dict(d.delay.offsets)
        for o in p.delay_set:
            delay[o["level"]] = o["to"]
        change(md.DELAY_OFFSETS, md.write_delay_offsets, d.delay, offsets=delay)
    cfg = md.config_dir(dst)
    bdir = Path(backup_dir) if backup_dir else default_backup_dir(dst)
    (bdir / "config").mkdir(parents=True, exist_ok=True)
    for name, _ in changes:
        for f in (cfg / name, cfg / (name + ".bak")):
            if f.exists():
                shutil.copy2(f, bdir / "config" / f.name)
    written = [str(write()) for _, write in changes]
    return written, str(bdir)


def _next(dv: md.DataVersion | None) -> md.DataVersion | None:
    """A file without a dataVersion (4.x consumerOffset.json) stays without one."""
    return None if dv is None else dv.next_version()
