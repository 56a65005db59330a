"""One CLI convention (issue 33): every command that connects takes the same connection options from
one place, every command that prints takes -o and --no-color, and a gRPC-only command refuses
--protocol remoting in one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mqctl.cli import gendocs
from mqctl.store.build import build_store

CONNECTION = {
    "-a",
    "--token",
    "--tls-ca",
    "--tls-cert",
    "--tls-key",
    "--tls-server-name",
    "--protocol",
    "--access-key",
    "--secret-key",
    "--timeout",
}


def _commands() -> list[tuple[str, set[str]]]:
    out = []
    for path, cmd in gendocs.walk(gendocs.root_command()):
        if getattr(cmd, "commands", None) or not path:
            continue
        opts = {
            o
            for p in getattr(cmd, "params", [])
            for o in (*getattr(p, "opts", []), *getattr(p, "secondary_opts", []))
        }
        out.append((" ".join(path), opts))
    return out


def test_every_command_that_connects_takes_the_same_connection_options() -> None:
    connecting = [(name, opts) for name, opts in _commands() if "-a" in opts]
    assert len(connecting) >= 20
    for name, opts in connecting:
        assert opts >= CONNECTION, (name, sorted(CONNECTION - opts))
    names = {n for n, _ in connecting}
    # the ones that lacked --protocol and the ACL keys (issue 33)
    assert {"history", "switchover", "snapshot save", "quorum add"} <= names


def test_every_command_that_prints_takes_output_and_no_color() -> None:
    printing = [(name, opts) for name, opts in _commands() if "--output" in opts]
    names = {n for n, _ in printing}
    assert {"recover inspect", "recover plan", "analyze commitlog", "metadata diff"} <= names
    for name, opts in printing:
        assert "--no-color" in opts and "-o" in opts, name


@pytest.mark.parametrize(
    "command",
    [
        ["history"],
        ["switchover", "-b", "x"],
        ["snapshot", "save", "f.json"],
        ["quorum", "add", "127.0.0.1:1"],
    ],
)
def test_a_grpc_only_command_refuses_protocol_remoting_in_one_line(command: list[str]) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "mqctl", *command, "--protocol", "remoting", "-a", "127.0.0.1:1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith("mqctl: error: this command is an mqctl extension that RocketMQ's remoting")
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr


def test_no_color_takes_the_colours_away(tmp_path: Path) -> None:
    store = str(build_store(tmp_path / "s", history=[(0, 0), (1, 900)], max_offset=1200, abort="77"))

    def inspect(*extra: str) -> str:
        out = subprocess.run(
            [sys.executable, "-m", "mqctl", "recover", "inspect", store, *extra],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "FORCE_COLOR": "1", "COLUMNS": "200"},
        )
        assert out.returncode == 0, out.stderr
        return out.stdout

    assert "\x1b[" in inspect()
    assert "\x1b[" not in inspect("--no-color") and "dirty" in inspect("--no-color")


def test_timeout_is_the_whole_commands_deadline() -> None:
    """Each call of a client stops at the command's deadline (Conn.deadline), not --timeout after it
    started: two calls to a controller that does not answer take --timeout in all, not twice."""
    import time

    from mqctl.cli.admin_cmd import Conn
    from mqctl.errors import ControllerError
    from mqctl.localgroup import free_port

    conn = Conn(f"127.0.0.1:{free_port()}", None, None, None, None, 1.0, protocol="grpc")
    started = time.monotonic()
    with conn.client() as client:
        for _ in range(3):
            with pytest.raises(ControllerError, match="no controller reachable"):
                client.get_sync_state_data(["x"])
    took = time.monotonic() - started
    assert took < 2.5, took  # 3 s when each call had its own --timeout
    conn.renew()  # a watch's next redraw: a new deadline for the same clients
    assert client.deadline == conn.deadline and conn.deadline > time.monotonic() + 0.5


@pytest.mark.parametrize("command", [["recover", "inspect"], ["recover", "plan"], ["recover", "dump"]])
def test_verbose_names_the_walker_first_and_only_when_asked(tmp_path: Path, command: list[str]) -> None:
    # -v is declared once for the commands that read commitlogs (common.printing): the walker's line
    # comes before anything the command prints, and without -v never
    store = str(build_store(tmp_path / "s", history=[(0, 0), (1, 900)], max_offset=1200, abort="77"))

    def run(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "mqctl", *command, store, "-o", "json", *extra],
            capture_output=True,
            text=True,
            timeout=60,
        )

    loud, quiet = run("-v"), run()
    assert loud.returncode == quiet.returncode == 0, (loud.stderr, quiet.stderr)
    assert loud.stderr.startswith("record walker: "), loud.stderr
    assert "record walker" not in quiet.stderr and loud.stdout == quiet.stdout
