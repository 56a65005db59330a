"""Helpers for the upgrade tests: the files of a tree, a real lock-holding process and a
simulated 5.1.1+ broker process (registration and heartbeats through ControllerClient)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
CLUSTER = "cluster-a"


def file_bytes(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


HOLDER = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.lockf(fd, fcntl.LOCK_EX)
print("locked", flush=True)
sys.stdin.read()
"""


class LockHolder:
    """A real second process holding the fcntl lock on `<store>/lock`, as a running broker does."""

    def __init__(self, store: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(store / "lock")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "locked"

    def stop(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            self.proc.wait(10)

    def __enter__(self) -> LockHolder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class SimBroker:
    """tests/upgrade/simbroker.py in its own process: a 5.1.1+ broker's start on a store."""

    def __init__(self, store: Path, controller: str, broker_name: str, address: str, role: str) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(HERE / "simbroker.py"),
                str(store),
                controller,
                CLUSTER,
                broker_name,
                address,
                role,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        assert line.startswith("ready id="), f"simulated broker failed: {line!r}"
        self.broker_id = int(line.split("=", 1)[1])

    def stop(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
