"""Is a broker or controller still running on a directory?

Two kinds of evidence: the directory's lock (`<store>/lock`, a POSIX record lock a RocketMQ broker
holds; `LOCK`, the flock an `mqctl serve` node holds) and, on Linux, any visible process that has a
file under the directory open or memory-mapped (/proc/<pid>/fd and /proc/<pid>/maps). The second
catches a RocketMQ DLedger controller, which takes no lock but maps its data files. Processes of
other users cannot be inspected without privileges; they are counted, not guessed about.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["ProcessUse", "Usage", "controller_dir_usage", "processes_using", "store_usage"]


@dataclass(frozen=True)
class ProcessUse:
    pid: int
    command: str
    path: str


@dataclass
class Usage:
    """Why a directory looks in use (empty `reasons` = stopped) plus what could not be inspected."""

    path: str
    reasons: list[str] = field(default_factory=list)
    uninspected: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def running(self) -> bool:
        return bool(self.reasons)


def _command(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "?"
    text = raw.replace(b"\0", b" ").decode("utf-8", errors="replace").strip()
    return text[:120] or "?"


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root + os.sep)


def processes_using(root: str | os.PathLike[str]) -> tuple[list[ProcessUse], int]:
    """Processes (other than this one) with a file under `root` open or mapped, and the number of
    processes that could not be inspected. ([], 0) where /proc does not exist."""
    real = os.path.realpath(root)
    found: list[ProcessUse] = []
    denied = 0
    me = os.getpid()
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return [], 0
    for pid in pids:
        if pid == me:
            continue
        hit: str | None = None
        try:
            fd_dir = f"/proc/{pid}/fd"
            for fd in os.listdir(fd_dir):
                try:
                    target = os.readlink(f"{fd_dir}/{fd}")
                except OSError:
                    continue
                if target.endswith(" (deleted)"):
                    target = target[: -len(" (deleted)")]
                if _under(target, real):
                    hit = target
                    break
            if hit is None:
                with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as fh:
                    for line in fh:
                        parts = line.split(None, 5)
                        if len(parts) == 6 and _under(parts[5].rstrip("\n"), real):
                            hit = parts[5].rstrip("\n")
                            break
        except PermissionError:
            denied += 1
            continue
        except (FileNotFoundError, ProcessLookupError, NotADirectoryError):
            continue  # the process ended meanwhile
        except OSError:
            continue
        if hit is not None:
            found.append(ProcessUse(pid, _command(pid), hit))
    return found, denied


def _add_processes(usage: Usage, root: str) -> None:
    procs, denied = processes_using(root)
    usage.uninspected = denied
    for p in procs:
        usage.reasons.append(f"process {p.pid} ({p.command}) has {p.path} open")


def store_usage(store: str | os.PathLike[str]) -> Usage:
    """A broker store: `<store>/lock` held, or a process with a store file open."""
    from mqctl.store.abort import is_locked  # lazy: start-up

    usage = Usage(os.fspath(store))
    if not Path(store).is_dir():
        return usage
    if is_locked(store):
        usage.reasons.append(f"{Path(store) / 'lock'} is locked by another process (a running broker)")
    _add_processes(usage, os.fspath(store))
    _abort_pid(usage, Path(store))
    return usage


def _abort_pid(usage: Usage, store: Path) -> None:
    """`abort` holds the PID of the broker that last started; alive now it may be that broker, or a
    reused PID (no lock, no open file: a note, not a refusal)."""
    from mqctl.store.abort import read_abort  # lazy: start-up

    text = read_abort(store)
    if not text or not text.isdigit() or usage.running:
        return
    pid = int(text)
    if pid != os.getpid() and Path(f"/proc/{pid}").exists():
        usage.notes.append(
            f"abort names pid {pid}, which is alive ({_command(pid)}) but holds neither the "
            f"lock nor a store file: probably a reused pid; make sure the broker is stopped"
        )


def controller_dir_usage(data_dir: str | os.PathLike[str]) -> Usage:
    """A controller data directory: mqctl's `LOCK` held, or a process with a file in it open or
    mapped (a RocketMQ DLedger controller maps its data and index files)."""
    from mqctl.controller.datadir import is_locked  # lazy: the raft fork

    usage = Usage(os.fspath(data_dir))
    if not Path(data_dir).is_dir():
        return usage
    if is_locked(os.fspath(data_dir)):
        usage.reasons.append(f"{Path(data_dir) / 'LOCK'} is held (a running mqctl serve node)")
    _add_processes(usage, os.fspath(data_dir))
    return usage
