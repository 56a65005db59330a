"""deploy/systemd/mqctl.service and deploy/controller.toml as an operator copies them: systemd's own
checker accepts the unit and rates its sandbox, and the unit's ExecStart, with the sample config, starts
a node that tells systemd it is ready (on loopback free ports: the only substitutions)."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from harness import NotifySocket

from mqctl.localgroup import free_port, metadata, wait_until, watch_log

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "deploy/systemd/mqctl.service"
CONFIG = ROOT / "deploy/controller.toml"
MQCTL = Path(sys.executable).with_name("mqctl")  # the mqctl of this venv stands for /opt/mqctl/bin/mqctl
MAX_EXPOSURE = 2.0  # systemd-analyze security: 0 (locked down) to 10 (unprotected); 1.4 when written


def unit_for_this_machine(tmp_path: Path, text: str | None = None) -> Path:
    """The unit with its ExecStart's mqctl replaced by this venv's (systemd-analyze verify checks that
    the program exists); nothing else changed."""
    unit = tmp_path / "mqctl.service"
    unit.write_text((text or UNIT.read_text()).replace("/opt/mqctl/bin/mqctl", str(MQCTL)))
    return unit


def systemd_analyze(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    tool = shutil.which("systemd-analyze")
    if tool is None:
        pytest.skip("systemd-analyze is not installed (Debian's package systemd)")
    # Documentation=man:mqctl-serve(1) is looked up with man: the repository's pages
    env = {"PATH": "/usr/bin:/bin", "MANPATH": str(ROOT / "man"), "SYSTEMD_LOG_COLOR": "0"}
    return subprocess.run([tool, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=120)


def test_systemd_analyze_verify_accepts_the_unit(tmp_path: Path) -> None:
    proc = systemd_analyze("verify", str(unit_for_this_machine(tmp_path)), cwd=tmp_path)
    assert proc.returncode == 0 and not proc.stderr.strip(), proc.stderr
    # the same check refuses a unit with a mistake in it
    broken = UNIT.read_text().replace("Type=notify", "Type=notifyy")
    proc = systemd_analyze("verify", str(unit_for_this_machine(tmp_path, broken)), cwd=tmp_path)
    assert "Failed to parse service type" in proc.stderr, proc.stderr


def test_the_sandbox_is_hardened(tmp_path: Path) -> None:
    unit = unit_for_this_machine(tmp_path)
    proc = systemd_analyze("security", "--offline=true", str(unit), cwd=tmp_path)
    found = re.search(r"Overall exposure level for mqctl\.service: (\d+\.\d+)", proc.stdout)
    assert found, proc.stdout + proc.stderr
    assert float(found.group(1)) <= MAX_EXPOSURE, proc.stdout
    # without its sandbox lines the same unit rates far worse
    bare = "\n".join(
        line
        for line in UNIT.read_text().splitlines()
        if not line.startswith(
            (
                "Protect",
                "Private",
                "Restrict",
                "SystemCall",
                "Capability",
                "NoNewPrivileges",
                "LockPersonality",
                "UMask",
            )
        )
    )
    proc = systemd_analyze(
        "security", "--offline=true", str(unit_for_this_machine(tmp_path, bare)), cwd=tmp_path
    )
    found = re.search(r"Overall exposure level for mqctl\.service: (\d+\.\d+)", proc.stdout)
    assert found and float(found.group(1)) > MAX_EXPOSURE + 3, proc.stdout


def unit_keys() -> dict[str, list[str]]:
    keys: dict[str, list[str]] = {}
    for line in UNIT.read_text().splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, value = line.split("=", 1)
            keys.setdefault(key, []).append(value)
    return keys


def test_the_unit_is_type_notify_and_restarts_on_failure() -> None:
    keys = unit_keys()
    assert keys["Type"] == ["notify"] and keys["Restart"] == ["on-failure"]
    assert keys["StateDirectory"] == ["mqctl"] and keys["User"] == ["mqctl"]
    # a leader's handover (serve's --handover-timeout) fits in the stop timeout, with the listeners' stop
    from mqctl.controller.config import ServeConfig

    assert int(keys["TimeoutStopSec"][0]) >= ServeConfig().handover_timeout / 1000 + 10


def loopback_config(tmp_path: Path, ports: dict[str, str]) -> Path:
    """deploy/controller.toml with each port a free one (the same wherever it repeats) and the data
    directory in tmp_path."""
    text = CONFIG.read_text()

    def port(p: str) -> str:
        return ports.setdefault(p, str(free_port()))

    text = re.sub(r"127\.0\.0\.1:(\d+)", lambda m: "127.0.0.1:" + port(m.group(1)), text)
    text = re.sub(r"(?m)^remoting_port = (\d+)", lambda m: "remoting_port = " + port(m.group(1)), text)
    text = text.replace('data_dir = "/var/lib/mqctl"', f'data_dir = "{tmp_path / "n0"}"')
    path = tmp_path / "controller.toml"
    path.write_text(text)
    return path


@pytest.mark.slow
def test_the_units_command_starts_a_node_from_the_sample_config(tmp_path: Path) -> None:
    """Node 1 as the unit runs it; nodes 2 and 3 from the same file with their own addresses."""
    ports: dict[str, str] = {}
    config = loopback_config(tmp_path, ports)
    (exec_start,) = unit_keys()["ExecStart"]
    argv = [
        str(MQCTL) if a == "/opt/mqctl/bin/mqctl" else str(config) if a == "/etc/mqctl/controller.toml" else a
        for a in shlex.split(exec_start)
    ]
    assert argv[1:] == ["serve", "--config", str(config)]
    rafts = [f"127.0.0.1:{ports[p]}" for p in ("9880", "9881", "9882")]
    notify = NotifySocket(str(tmp_path / "notify.sock"))
    procs = []
    for i in range(3):
        watch_log(str(tmp_path / f"n{i}.log"))  # a traceback in a node's log fails the test
    try:
        with open(tmp_path / "n0.log", "wb") as log:
            procs.append(
                subprocess.Popen(
                    argv,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env={"PATH": "/usr/bin:/bin", "NOTIFY_SOCKET": notify.path},
                )
            )
        for i in (1, 2):
            flags = [
                "--listen",
                f"127.0.0.1:{free_port()}",
                "--remoting-port",
                str(free_port()),
                "--raft",
                rafts[i],
                "--peers",
                ",".join(r for r in rafts if r != rafts[i]),
                "--metrics-address",
                f"127.0.0.1:{free_port()}",
                "--data-dir",
                str(tmp_path / f"n{i}"),
            ]
            with open(tmp_path / f"n{i}.log", "wb") as log:
                procs.append(subprocess.Popen([*argv, *flags], stdout=log, stderr=subprocess.STDOUT))
        ready = notify.wait_for("READY", "1", 60)
        assert ready["STATUS"].startswith(("leader of", "follower of"))
        grpc = f"127.0.0.1:{ports['9878']}"
        meta = metadata(grpc)
        assert meta["group_id"] and len(meta["peers"]) == 3
        assert (tmp_path / "n0" / "raft.journal").exists()

        def ready_page() -> bool:
            import urllib.request

            with urllib.request.urlopen(f"http://127.0.0.1:{ports['9890']}/ready", timeout=2) as answer:
                return bool(answer.status == 200)

        wait_until(ready_page, 30, what="/ready of the node started from the sample config")
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                assert p.wait(30) == 0
            except subprocess.TimeoutExpired:
                p.kill()
        notify.close()
