"""Clear with a backup, and restore from it: the one careful way the upgrade commands delete.

A clear copies every file it will remove into a backup directory, checks each copy's sha256
against the original, writes `manifest.json` (fsynced), and only then deletes. `restore` verifies
every hash again and puts back exactly the bytes, modes and modification times; it never replaces
a file that differs from the backup (it refuses and names it), so it has nothing to back up itself.

Backup layout::

    BACKUP/manifest.json
    BACKUP/data/<root index>/<path inside the root>
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import socket
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mqctl.camel import camel_fields
from mqctl.errors import StoreError, UsageError
from mqctl.store._util import fsync_dir
from mqctl.store.abort import hold_lock

MANIFEST = "manifest.json"
DATA_DIR = "data"
FORMAT = "mqctl-upgrade-backup/1"
_CHUNK = 4 << 20

__all__ = [
    "FORMAT",
    "MANIFEST",
    "ClearPlan",
    "Item",
    "RestoreAction",
    "RestorePlan",
    "Root",
    "apply_clear",
    "apply_restore",
    "default_backup_dir",
    "plan_restore",
    "read_manifest",
    "sha256_file",
]


@dataclass(frozen=True)
class Item:
    """One file or directory a clear removes, relative to its root."""

    rel: str
    kind: str  # "file" or "dir"
    size: int = 0


@dataclass
class Root:
    """A directory some of whose content a clear removes; `kind` says what it is (store,
    mqctl-controller, rocketmq-dledger) and decides how it is guarded."""

    path: str
    kind: str
    items: list[Item] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def bytes(self) -> int:
        return sum(i.size for i in self.items)


@dataclass
class ClearPlan:
    what: str  # "epochs" or "controller-data"
    roots: list[Root] = field(default_factory=list)

    @property
    def nothing_to_do(self) -> bool:
        return not any(r.items for r in self.roots)

    def to_dict(self) -> dict[str, Any]:
        return {
            "what": self.what,
            "nothingToDo": self.nothing_to_do,
            "roots": [
                {
                    "path": r.path,
                    "kind": r.kind,
                    "bytes": r.bytes,
                    "notes": list(r.notes),
                    "items": [{"path": i.rel, "type": i.kind, "size": i.size} for i in r.items],
                }
                for r in self.roots
            ],
        }


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _copy_file(src: Path, dst: Path) -> str:
    """Copy with fsync; the sha256 of what was read. Mode and times follow."""
    h = hashlib.sha256()
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        with open(src, "rb") as fi, open(dst, "wb") as fo:
            while chunk := fi.read(_CHUNK):
                h.update(chunk)
                fo.write(chunk)
            fo.flush()
            os.fsync(fo.fileno())
        st = src.stat()
        os.chmod(dst, stat.S_IMODE(st.st_mode))
        os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))
    except OSError as exc:
        raise StoreError(f"cannot copy {src} to {dst}: {exc.strerror or exc}") from None
    return h.hexdigest()


def default_backup_dir(first_root: str | os.PathLike[str], what: str, now: float | None = None) -> Path:
    """`<first root>.upgrade-<what>-backup-<YYYYmmddTHHMMSS>` beside it (same file system), with a
    `-2`, `-3` suffix when that name is taken."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.localtime(time.time() if now is None else now))
    p = Path(os.path.abspath(os.fspath(first_root).rstrip("/") or "/"))
    base = p.with_name(f"{p.name}.upgrade-{what}-backup-{stamp}")
    cand, n = base, 1
    while cand.exists():
        n += 1
        cand = base.with_name(f"{base.name}-{n}")
    return cand


@contextmanager
def _flock(path: Path) -> Iterator[None]:
    """Hold an mqctl controller's LOCK (flock) so no node starts on the directory meanwhile."""
    if not path.exists():
        yield
        return
    with open(path, "a+", encoding="utf-8") as fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise UsageError(f"{path} is held by a running controller; stop it first") from None
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


@contextmanager
def guard(roots: list[str], kinds: list[str]) -> Iterator[None]:
    """Hold the lock of every root for the duration of a change (a broker or an mqctl node that
    starts meanwhile is refused by its own lock)."""

    with ExitStack() as stack:
        for path, kind in zip(roots, kinds, strict=True):
            if not Path(path).is_dir():
                continue
            if kind == "store":
                stack.enter_context(hold_lock(path))
            elif kind == "mqctl-controller":
                stack.enter_context(_flock(Path(path) / "LOCK"))
        yield


def apply_clear(
    plan: ClearPlan,
    backup_dir: str | os.PathLike[str],
    *,
    refuse_if_running: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Back up every item of `plan`, verify the copies, write the manifest, then delete the items.

    `refuse_if_running` is called once more just before anything is written (the caller's check of
    locks and processes; it raises to refuse). Returns the manifest."""
    bdir = Path(os.path.abspath(backup_dir))
    if bdir.exists() and (not bdir.is_dir() or any(bdir.iterdir())):
        raise UsageError(f"{bdir}: backup directory exists and is not empty; choose another --backup-dir")
    for r in plan.roots:
        rp = Path(os.path.abspath(r.path))
        if bdir == rp or str(bdir).startswith(str(rp) + os.sep):
            raise UsageError(f"{bdir}: the backup directory may not lie inside {rp}, which is cleared")
    if refuse_if_running is not None:
        refuse_if_running()
    entries: list[dict[str, Any]] = []
    with guard([r.path for r in plan.roots], [r.kind for r in plan.roots]):
        try:
            bdir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"cannot create backup directory {bdir}: {exc.strerror}") from None
        for ri, r in enumerate(plan.roots):
            root = Path(os.path.abspath(r.path))
            for it in r.items:
                src = root / it.rel
                st = src.lstat()
                e: dict[str, Any] = {
                    "root": ri,
                    "path": it.rel,
                    "type": it.kind,
                    "mode": stat.S_IMODE(st.st_mode),
                    "mtimeNs": st.st_mtime_ns,
                }
                if it.kind == "file":
                    dst = bdir / DATA_DIR / str(ri) / it.rel
                    digest = _copy_file(src, dst)
                    if sha256_file(dst) != digest or sha256_file(src) != digest:
                        raise StoreError(
                            f"{src}: changed while it was backed up, or the copy {dst} "
                            f"differs; nothing was removed"
                        )
                    e.update(size=st.st_size, sha256=digest, backup=str(dst.relative_to(bdir)))
                entries.append(e)
        manifest = {
            "format": FORMAT,
            "what": plan.what,
            "createdMs": int(time.time() * 1000),
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "host": socket.gethostname(),
            "backupDir": str(bdir),
            "roots": [{"path": os.path.abspath(r.path), "kind": r.kind} for r in plan.roots],
            "entries": entries,
            "restore": f"mqctl upgrade restore {bdir}",
        }
        mpath = bdir / MANIFEST
        tmp = bdir / (MANIFEST + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(manifest, fh, indent=2)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, mpath)
        fsync_dir(bdir)
        # --- only now delete: files first, then directories deepest first
        for r in plan.roots:
            root = Path(os.path.abspath(r.path))
            for it in r.items:
                if it.kind == "file":
                    (root / it.rel).unlink()
            for it in sorted((i for i in r.items if i.kind == "dir"), key=lambda i: -i.rel.count("/")):
                (root / it.rel).rmdir()
            parents = {(root / it.rel).parent for it in r.items}
            for p in parents:
                if p.exists():
                    fsync_dir(p)
    return manifest


def read_manifest(backup_dir: str | os.PathLike[str]) -> dict[str, Any]:
    path = Path(backup_dir) / MANIFEST
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{path}: no manifest; is {backup_dir} a backup made by mqctl upgrade?") from None
    except (OSError, ValueError) as exc:
        raise StoreError(f"{path}: unreadable manifest ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise StoreError(
            f"{path}: not an mqctl upgrade backup manifest (format {doc.get('format')!r})"
            if isinstance(doc, dict)
            else f"{path}: not an mqctl upgrade backup manifest"
        )
    return doc


@dataclass(frozen=True)
class RestoreAction:
    target: str
    kind: str  # file or dir
    action: str  # "restore", "present" (identical already), "conflict"
    detail: str = ""


@dataclass
class RestorePlan:
    backup_dir: str
    what: str
    roots: list[dict[str, str]]
    actions: list[RestoreAction] = field(default_factory=list)
    entries: list[dict[str, Any]] = field(default_factory=list)

    @property
    def conflicts(self) -> list[RestoreAction]:
        return [a for a in self.actions if a.action == "conflict"]

    @property
    def nothing_to_do(self) -> bool:
        return all(a.action == "present" for a in self.actions)

    def to_dict(self) -> dict[str, Any]:
        return {
            **camel_fields(self, "backup_dir", "what", "roots", "nothing_to_do"),
            "actions": [
                {"target": a.target, "type": a.kind, "action": a.action, "detail": a.detail}
                for a in self.actions
            ],
        }


def plan_restore(backup_dir: str | os.PathLike[str]) -> RestorePlan:
    """Verify the backup (every sha256) and decide, per entry, restore / already present / conflict."""
    bdir = Path(os.path.abspath(backup_dir))
    doc = read_manifest(bdir)
    roots = [{"path": str(r["path"]), "kind": str(r["kind"])} for r in doc.get("roots", [])]
    plan = RestorePlan(str(bdir), str(doc.get("what", "")), roots, entries=list(doc.get("entries", [])))
    for e in plan.entries:
        root = Path(roots[int(e["root"])]["path"])
        target = root / str(e["path"])
        if not root.is_dir():
            plan.actions.append(
                RestoreAction(
                    str(target), e["type"], "conflict", f"{root} does not exist: nothing to restore into"
                )
            )
            continue
        if e["type"] == "dir":
            if target.is_dir():
                plan.actions.append(RestoreAction(str(target), "dir", "present"))
            elif target.exists() or target.is_symlink():
                plan.actions.append(
                    RestoreAction(str(target), "dir", "conflict", "exists and is not a directory")
                )
            else:
                plan.actions.append(RestoreAction(str(target), "dir", "restore"))
            continue
        src = bdir / str(e["backup"])
        if not src.is_file():
            raise StoreError(f"{src}: missing from the backup (manifest lists it); nothing was restored")
        if sha256_file(src) != e["sha256"]:
            raise StoreError(
                f"{src}: sha256 differs from the manifest: the backup is damaged; nothing was restored"
            )
        if target.is_symlink() or (target.exists() and not target.is_file()):
            plan.actions.append(RestoreAction(str(target), "file", "conflict", "exists and is not a file"))
        elif target.exists():
            if sha256_file(target) == e["sha256"]:
                plan.actions.append(RestoreAction(str(target), "file", "present"))
            else:
                plan.actions.append(
                    RestoreAction(
                        str(target),
                        "file",
                        "conflict",
                        f"exists with other content ({target.stat().st_size} bytes, the backup has "
                        f"{e['size']}); "
                        f"something wrote it after the clear: move it away to restore",
                    )
                )
        else:
            plan.actions.append(RestoreAction(str(target), "file", "restore", f"{e['size']} bytes"))
    return plan


def apply_restore(plan: RestorePlan, *, refuse_if_running: Callable[[], None] | None = None) -> int:
    """Put back every entry marked restore (directories first, then files, then directory times).
    Returns the number of entries restored. UsageError when the plan has conflicts."""
    if plan.conflicts:
        first = plan.conflicts[0]
        raise UsageError(
            f"cannot restore: {first.target}: {first.detail}"
            + (f" (and {len(plan.conflicts) - 1} more)" if len(plan.conflicts) > 1 else "")
        )
    if refuse_if_running is not None:
        refuse_if_running()
    bdir = Path(plan.backup_dir)
    todo = {a.target for a in plan.actions if a.action == "restore"}
    n = 0
    with guard([r["path"] for r in plan.roots], [r["kind"] for r in plan.roots]):
        dirs = [e for e in plan.entries if e["type"] == "dir"]
        for e in sorted(dirs, key=lambda e: str(e["path"]).count("/")):
            target = Path(plan.roots[int(e["root"])]["path"]) / str(e["path"])
            if str(target) in todo:
                target.mkdir(mode=int(e["mode"]))
                n += 1
        for e in plan.entries:
            if e["type"] != "file":
                continue
            target = Path(plan.roots[int(e["root"])]["path"]) / str(e["path"])
            if str(target) not in todo:
                continue
            tmp = target.with_name(target.name + ".mqctl-restore.tmp")
            digest = _copy_file(bdir / str(e["backup"]), tmp)
            if digest != e["sha256"]:
                tmp.unlink(missing_ok=True)
                raise StoreError(f"{bdir / str(e['backup'])}: changed while it was restored")
            os.chmod(tmp, int(e["mode"]))
            os.utime(tmp, ns=(int(e["mtimeNs"]), int(e["mtimeNs"])))
            os.replace(tmp, target)
            fsync_dir(target.parent)
            n += 1
        for e in sorted(dirs, key=lambda e: -str(e["path"]).count("/")):
            target = Path(plan.roots[int(e["root"])]["path"]) / str(e["path"])
            if str(target) in todo:
                os.utime(target, ns=(int(e["mtimeNs"]), int(e["mtimeNs"])))
    return n
