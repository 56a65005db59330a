"""The file layer of the Raft journal: every write, fsync, rename and truncate of the journal and
its meta file goes through here, and so do `node.json` (mqctl/controller/datadir.py) and a
snapshot received from the leader (the fork, mqctl/raft/syncobj.py); writing a local snapshot is
checked for fault injection (`Storage.check`) but written by its serializer.

The mode is chosen once, when a node starts (`Storage.from_env`):

* **real** (the default): `os.pwrite`, `os.fdatasync`, `os.ftruncate`, `os.rename`.
* **crash simulation**, `MQCTL_CRASH_SIM=1` (test-only): bytes written to a file, and its
  truncations, stay in this process's memory and reach the real file only inside that file's
  fsync. SIGKILL of the process is then exactly a power loss for the journal: everything that was
  not fsynced is gone. A rename is done at once; mqctl always fsyncs the directory right after one
  (in the same call), so the two are one step here.
* **fault injection**, `MQCTL_FAULT_INJECT=1` (test-only): before every mutating operation the
  layer looks for a file named `fault-inject` in the directory concerned. While it exists the
  operation fails with the errno its content names: `ENOSPC` (also when it is empty), `EROFS` or
  `EIO`. Disk-full behaviour can be tested without a small filesystem. `SLOW <ms>` instead makes
  every fsync there take that much longer (a disk shared with other work) and fails nothing.

The two test modes can be combined. Neither is for production: both are read from the
environment of `mqctl serve` only (docs/raft-safety.md).
"""

from __future__ import annotations

import errno
import os
import threading
import time
from typing import Any

CRASH_SIM_ENV = "MQCTL_CRASH_SIM"
FAULT_INJECT_ENV = "MQCTL_FAULT_INJECT"
FAULT_FILE = "fault-inject"
_FAULT_ERRNOS = {"ENOSPC": errno.ENOSPC, "EROFS": errno.EROFS, "EIO": errno.EIO}


class StorageError(OSError):
    """A term or vote could not be stored (disk full, read-only, I/O error): the Raft step that
    needed it is not taken."""


def _on(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def fsync_dir(directory: str) -> None:
    """Make the names in `directory` (a file created, renamed or removed) durable."""
    fd = os.open(directory or ".", os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file_and_dir(path: str) -> None:
    """fsync an existing file and its directory (a file someone else wrote and renamed)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_dir(os.path.dirname(path))


class File:
    """An open file of the journal. Writes are positional; `sync` is fdatasync."""

    def __init__(self, storage: Storage, path: str, fd: int) -> None:
        self.storage = storage
        self.path = path
        self.fd = fd

    def pwrite(self, data: bytes, offset: int) -> None:
        self.storage.check(self.path)
        view = memoryview(data)
        while view:
            n = os.pwrite(self.fd, view, offset)
            view = view[n:]
            offset += n

    def truncate(self, size: int) -> None:
        self.storage.check(self.path)
        os.ftruncate(self.fd, size)

    def sync(self) -> None:
        self.storage.check(self.path, sync=True)
        self._check_open()
        os.fdatasync(self.fd)

    def _check_open(self) -> None:
        """A file closed under the journal's sync thread (compacted, written anew): an OSError it
        reports like any failed sync, not a ValueError for fd -1."""
        if self.fd < 0:
            raise OSError(errno.EBADF, "closed (replaced by a compaction)", self.path)

    def deleted(self) -> bool:
        """True when the file has no name any more (its directory was removed under us)."""
        return os.fstat(self.fd).st_nlink == 0

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class SimFile(File):
    """Crash simulation: writes and truncations are kept here until `sync` replays them onto the
    real file and fsyncs it."""

    def __init__(self, storage: Storage, path: str, fd: int) -> None:
        super().__init__(storage, path, fd)
        self._pending: list[tuple[str, int, bytes]] = []
        self._lock = threading.Lock()  # the journal's sync thread replays while its node writes

    def pwrite(self, data: bytes, offset: int) -> None:
        self.storage.check(self.path)
        with self._lock:
            self._pending.append(("w", offset, bytes(data)))

    def truncate(self, size: int) -> None:
        self.storage.check(self.path)
        with self._lock:
            self._pending.append(("t", size, b""))

    def sync(self) -> None:
        self.storage.check(self.path, sync=True)
        with self._lock:
            self._check_open()
            for op, offset, data in self._pending:
                if op == "t":
                    os.ftruncate(self.fd, offset)
                else:
                    File.pwrite(self, data, offset)
            self._pending.clear()
            os.fsync(self.fd)

    def close(self) -> None:
        with self._lock:
            self._pending.clear()  # never synced: lost, as on a power loss
            super().close()


class Storage:
    """Opens files and renames them, in one of the modes of the module docstring."""

    def __init__(self, *, crash_sim: bool = False, fault_inject: bool = False) -> None:
        self.crash_sim = crash_sim
        self.fault_inject = fault_inject

    @classmethod
    def from_env(cls, env: Any = None) -> Storage:
        env = os.environ if env is None else env
        return cls(crash_sim=_on(env.get(CRASH_SIM_ENV)), fault_inject=_on(env.get(FAULT_INJECT_ENV)))

    def describe(self) -> str:
        modes = [
            m
            for m, on in (("crash simulation", self.crash_sim), ("fault injection", self.fault_inject))
            if on
        ]
        return " and ".join(modes) or "real"

    def check(self, path: str, *, directory: bool = False, sync: bool = False) -> None:
        """Fault injection: raise while `fault-inject` exists next to `path`; for `SLOW <ms>`,
        make a sync (`sync=True`) wait that long instead."""
        if not self.fault_inject:
            return
        trigger = os.path.join(path if directory else os.path.dirname(path), FAULT_FILE)
        try:
            with open(trigger, encoding="ascii", errors="replace") as fh:
                name = fh.read().strip().upper() or "ENOSPC"
        except OSError:
            return
        if name.startswith("SLOW"):
            ms = name[4:].strip()
            if sync:
                time.sleep(int(ms) / 1000 if ms.isdigit() else 0.5)
            return
        code = _FAULT_ERRNOS.get(name, errno.ENOSPC)
        raise OSError(code, f"{os.strerror(code)} (injected by {trigger})", path)

    def open(self, path: str, *, create: bool = False, truncate: bool = False) -> File:
        flags = os.O_RDWR | getattr(os, "O_CLOEXEC", 0)
        if create:
            self.check(path)
            flags |= os.O_CREAT
        if truncate:
            self.check(path)
            flags |= os.O_TRUNC
        fd = os.open(path, flags, 0o644)
        return SimFile(self, path, fd) if self.crash_sim else File(self, path, fd)

    def read(self, path: str) -> bytes | None:
        """The file's content as it is on disk, or None when it does not exist."""
        try:
            with open(path, "rb") as fh:
                return fh.read()
        except FileNotFoundError:
            return None

    def rename(self, src: str, dst: str) -> None:
        self.check(dst)
        os.rename(src, dst)

    def fsync_dir(self, directory: str) -> None:
        self.check(directory, directory=True, sync=True)
        fsync_dir(directory)

    def remove(self, path: str) -> None:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass

    def write_atomic(self, path: str, data: bytes) -> None:
        """Replace `path` by `data` durably: a temporary file, fsync, rename, fsync the directory.
        A crash leaves either the old content or the new, never a mix."""
        tmp = path + ".tmp"
        f = self.open(tmp, create=True, truncate=True)
        try:
            f.pwrite(data, 0)
            f.sync()
        finally:
            f.close()
        self.rename(tmp, path)
        self.fsync_dir(os.path.dirname(path))
