"""`<root>/abort` (the store was not shut down cleanly) and `<root>/lock` (the broker's process lock).

RocketMQ writes `abort` at start with its PID as text (via string2File, so `abort.bak` may appear) and
deletes it on a clean shutdown. It holds an exclusive `FileChannel.tryLock()` on `lock` while running;
on Linux that is a POSIX record lock, the same kind `fcntl.lockf` takes.
"""

from __future__ import annotations

import errno
import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from mqctl.errors import UsageError
from mqctl.store._util import read_bytes, store_error, string_to_file

ABORT_FILE = "abort"
LOCK_FILE = "lock"

__all__ = [
    "ABORT_FILE",
    "LOCK_FILE",
    "hold_lock",
    "is_locked",
    "read_abort",
    "remove_abort",
    "write_abort",
]


def read_abort(root: str | os.PathLike[str]) -> str | None:
    """The abort file's text (the PID the broker wrote), None when there is no abort file."""
    path = Path(root) / ABORT_FILE
    data = read_bytes(path)
    if data is None:
        return None
    return data.decode("utf-8", errors="replace").strip()


def write_abort(root: str | os.PathLike[str], pid: int | str | None = None) -> None:
    string_to_file(Path(root) / ABORT_FILE, str(os.getpid() if pid is None else pid).encode())


def remove_abort(root: str | os.PathLike[str]) -> None:
    (Path(root) / ABORT_FILE).unlink(missing_ok=True)


def is_locked(root: str | os.PathLike[str]) -> bool:
    """True when another process holds the lock on `<root>/lock` (a running broker). Never creates the
    file; probing takes and drops a lock for an instant, which writes nothing."""
    path = Path(root) / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise store_error(path, f"cannot open: {exc.strerror}") from None
    try:
        if not _lock(fd, path):
            return True
        fcntl.lockf(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def _lock(fd: int, path: Path) -> bool:
    """Take the lock without waiting: False when another process holds it."""
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EAGAIN):
            return False
        raise store_error(path, f"cannot lock: {exc.strerror}") from None
    return True


@contextmanager
def hold_lock(root: str | os.PathLike[str], *, create: bool = False) -> Iterator[bool]:
    """Hold `<root>/lock` for the duration (so no broker starts meanwhile). Yields False when there is
    no lock file and `create` is False. UsageError (refused) when another process holds it."""
    path = Path(root) / LOCK_FILE
    flags = os.O_RDWR | (os.O_CREAT if create else 0)
    try:
        fd = os.open(path, flags, 0o644)
    except FileNotFoundError:
        yield False
        return
    except OSError as exc:
        raise store_error(path, f"cannot open: {exc.strerror}") from None
    try:
        if not _lock(fd, path):
            raise UsageError(f"{path}: held by another process (is the broker running?); stop it first")
        try:
            yield True
        finally:
            fcntl.lockf(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
