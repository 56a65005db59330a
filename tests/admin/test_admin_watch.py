"""Watch mode (-i/--watch) under a pseudo-terminal, colours and NO_COLOR, JSON never coloured."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import termios
import time
from collections.abc import Callable

import pytest
from admin_fixtures import CLUSTER, MQCTL, World
from harness import with_default_sigint

pytestmark = pytest.mark.slow

_SGR = re.compile(rb"\x1b\[([0-9;]*)m")


def colours(out: bytes) -> set[int]:
    """Foreground/background colour parameters found in SGR sequences (bold, dim are not colours)."""
    found = set()
    for m in _SGR.finditer(out):
        for p in m.group(1).split(b";"):
            if p and (30 <= int(p) <= 49 or 90 <= int(p) <= 107):
                found.add(int(p))
    return found


def run_pty(
    args: list[str],
    until: Callable[[bytes], bool],
    *,
    env: dict[str, str] | None = None,
    timeout: float = 30.0,
    interrupt: bool = True,
) -> tuple[int, bytes]:
    """Run mqctl on a pty (200x50) until ``until(output)``, then SIGINT; (exit code, output)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
    full_env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("MQCTL_") and k not in ("NO_COLOR", "FORCE_COLOR", "COLUMNS", "LINES")
    }
    full_env.update({"TERM": "xterm-256color", **(env or {})})
    proc = subprocess.Popen(
        with_default_sigint([MQCTL, *args]), stdin=slave, stdout=slave, stderr=slave, env=full_env
    )
    os.close(slave)
    out = b""

    def pump(deadline: float) -> None:
        nonlocal out
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:
                    return
                if not chunk:
                    return
                out += chunk
            elif proc.poll() is not None:
                return
            if interrupt and until(out):
                return

    try:
        pump(time.monotonic() + timeout)
        if interrupt:
            assert until(out), f"timed out; output so far: {out[-2000:]!r}"
            proc.send_signal(signal.SIGINT)
        interrupt = False
        pump(time.monotonic() + 10)
        return proc.wait(10), out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        os.close(master)


def test_watch_redraws_in_place_and_ctrl_c_exits_0(world: World) -> None:
    args = ["getSyncStateSet", "-c", CLUSTER, "-i", "0.3", "-a", world.follower_address]
    rc, out = run_pty(args, lambda o: o.count(b"Ctrl-C to stop") >= 3)
    assert rc == 0, out[-2000:]
    assert b"broker-a" in out and b"LAG BYTES" in out
    assert b"\x1b[" in out and colours(out)  # a terminal: coloured
    assert b"Traceback" not in out and b"Aborted" not in out


def test_watch_long_option_and_no_color(world: World) -> None:
    args = ["quorum", "status", "--watch", "0.3", "-a", world.follower_address]
    rc, out = run_pty(args, lambda o: o.count(b"Ctrl-C to stop") >= 2, env={"NO_COLOR": "1"})
    assert rc == 0, out[-2000:]
    assert b"healthy" in out and not colours(out)
    rc, out = run_pty(
        ["getSyncStateSet", "-b", "broker-a", "-a", world.follower_address, "--no-color"],
        lambda o: False,
        interrupt=False,
    )
    assert rc == 0 and b"broker-a" in out and not colours(out)


def test_json_on_a_terminal_is_never_coloured(world: World) -> None:
    rc, out = run_pty(
        ["getControllerMetaData", "-o", "json", "-a", world.follower_address],
        lambda o: False,
        interrupt=False,
    )
    assert rc == 0 and b"\x1b" not in out
    assert json.loads(out.replace(b"\r\n", b"\n"))["version"] == 1


def test_watch_json_prints_one_document_per_line(world: World) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MQCTL_")}
    proc = subprocess.Popen(
        with_default_sigint(
            [
                MQCTL,
                "getBrokerEpoch",
                "-b",
                "broker-a",
                "-i",
                "0.2",
                "-o",
                "json",
                "-a",
                world.follower_address,
            ]
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(3)]
        proc.send_signal(signal.SIGINT)
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    docs = [json.loads(line) for line in lines]
    assert all(d["version"] == 1 and len(d["brokers"]) == 3 for d in docs)
