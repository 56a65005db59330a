"""`clear-controller-data`: recognise a controller data directory and list what to remove.

Two kinds are recognised by their layout, never by name alone:

- RocketMQ's DLedger controller (`controllerStorePath`, default `~/DledgerController` in 5.1.x code,
  `~/DLedgerController` in the docs): one `dledger-<selfId>/` per node id, holding `data/` and
  `index/` (20-digit mapped files), `currterm`, `checkpoint` and in later DLedger versions
  `snapshot/`. A `dledger-<selfId>` directory itself is accepted too.
- mqctl's own (`mqctl serve --data-dir`): `raft.journal*`, `raft.snapshot.json*`, `node.json`, `LOCK`.
  `LOCK` stays (a node starting meanwhile must still find the lock we hold).

Everything else inside the directory makes the command refuse: it is not sure what it would delete.
The directory itself stays (it may be a mount point or named in a config).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from mqctl.errors import UsageError
from mqctl.upgrade.backup import ClearPlan, Item, Root

ROCKETMQ = "rocketmq-dledger"
MQCTL = "mqctl-controller"
EMPTY = "empty"

_DLEDGER_NODE = re.compile(r"^dledger-.+$")
_DLEDGER_PARTS = {
    "data",
    "index",
    "snapshot",
    "currterm",
    "checkpoint",
    "currterm.bak",
    "checkpoint.bak",
    "currterm.tmp",
    "checkpoint.tmp",
}
_MQCTL_PREFIXES = ("raft.journal", "raft.snapshot.json", "node.json")
_MQCTL_KEEP = "LOCK"

__all__ = ["EMPTY", "MQCTL", "ROCKETMQ", "ControllerDir", "detect", "plan_clear_controller_data"]


@dataclass
class ControllerDir:
    path: str
    kind: str  # ROCKETMQ, MQCTL or EMPTY
    node_ids: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)


def _is_dledger_node(d: Path) -> bool:
    """A dledger-<id> directory: only DLedger's parts, and at least data/ or index/ or currterm."""
    try:
        names = {e.name for e in os.scandir(d)}
    except OSError:
        return False
    return bool(names) and names <= _DLEDGER_PARTS and bool(names & {"data", "index", "currterm"})


def detect(data_dir: str | os.PathLike[str]) -> ControllerDir:
    p = Path(data_dir)
    if not p.exists():
        raise UsageError(
            f"{p}: no such directory (RocketMQ: controllerStorePath, default "
            f"~/DledgerController in 5.1.x, ~/DLedgerController in the docs; mqctl: serve "
            f"--data-dir)"
        )
    if not p.is_dir():
        raise UsageError(f"{p}: not a directory")
    names = sorted(e.name for e in os.scandir(p))
    cd = ControllerDir(os.fspath(data_dir), EMPTY)
    if not names or names == [_MQCTL_KEEP]:
        cd.kind = MQCTL if names else EMPTY
        return cd
    if _is_dledger_node(p) and _DLEDGER_NODE.match(p.name):
        cd.kind = ROCKETMQ
        cd.node_ids = [p.name[len("dledger-") :]]
        return cd
    dledger = [n for n in names if _DLEDGER_NODE.match(n) and (p / n).is_dir() and _is_dledger_node(p / n)]
    mqctl = [n for n in names if n.startswith(_MQCTL_PREFIXES) or n == _MQCTL_KEEP]
    if dledger and not mqctl:
        cd.kind = ROCKETMQ
        cd.node_ids = [n[len("dledger-") :] for n in dledger]
        cd.unknown = [n for n in names if n not in dledger]
    elif mqctl and not dledger:
        cd.kind = MQCTL
        cd.unknown = [n for n in names if n not in mqctl]
    else:
        cd.unknown = names
    return cd


def _walk_items(root: Path, rel: str) -> list[Item]:
    """`rel` under `root` and everything below it: files, then the directories (for rmdir)."""
    base = root / rel
    if base.is_symlink():
        raise UsageError(f"{base}: a symbolic link; clear it by hand")
    if base.is_file():
        return [Item(rel, "file", base.stat().st_size)]
    items: list[Item] = []
    dirs: list[Item] = [Item(rel, "dir")]
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames.sort()
        for d in dirnames:
            full = Path(dirpath) / d
            if full.is_symlink():
                raise UsageError(f"{full}: a symbolic link; clear it by hand")
            dirs.append(Item(str(full.relative_to(root)), "dir"))
        for f in sorted(filenames):
            full = Path(dirpath) / f
            if full.is_symlink() or not full.is_file():
                raise UsageError(f"{full}: not a regular file; clear it by hand")
            items.append(Item(str(full.relative_to(root)), "file", full.stat().st_size))
    return items + dirs


def plan_clear_controller_data(data_dir: str) -> tuple[ClearPlan, ControllerDir]:
    cd = detect(data_dir)
    if cd.kind == EMPTY and cd.unknown:
        raise UsageError(
            f"{data_dir}: not a controller data directory I recognise (found "
            f"{', '.join(cd.unknown[:6])}{' ...' if len(cd.unknown) > 6 else ''}); expected "
            f"RocketMQ's dledger-<selfId>/{{data,index}} or mqctl's raft.journal/node.json. "
            f"Pass controllerStorePath (or serve --data-dir) itself"
        )
    if cd.unknown:
        raise UsageError(
            f"{data_dir}: holds entries that are not controller data: "
            f"{', '.join(cd.unknown[:6])}; move them away first (nothing was changed)"
        )
    root = Root(os.path.abspath(data_dir), cd.kind)
    p = Path(data_dir)
    if cd.kind == ROCKETMQ and _DLEDGER_NODE.match(p.name) and _is_dledger_node(p):
        names = sorted(e.name for e in os.scandir(p))
    else:
        names = sorted(e.name for e in os.scandir(p) if e.name != _MQCTL_KEEP)
    for n in names:
        root.items += _walk_items(p, n)
    if cd.kind == MQCTL and (p / _MQCTL_KEEP).exists():
        root.notes.append("LOCK stays (a node that starts meanwhile must find it held)")
    if not root.items:
        root.notes.append("no controller data (already cleared)")
    plan = ClearPlan("controller-data", [root])
    return plan, cd
