"""The README's examples run as shown, on one machine, on loopback (issue 16); docs/broker.md's too.

The code blocks are read from README.md itself, so an example that changes is tested as it reads. Two
substitutions keep the test safe next to other runs: every port the README names becomes a free port
(the same one wherever the README repeats it), and HOME is a temporary directory (so `~/mqctl/n0` and
the default data directory land there). Not run here: `pip install` (the test runs the installed
`mqctl`), `tools/test` (it is this suite) and `mqctl demo`, which tests/sim/test_cli.py runs.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqctl.localgroup import free_port, metadata, wait_until, watch_log

ROOT = Path(__file__).resolve().parents[1]
BIN = str(Path(sys.executable).parent)

pytestmark = pytest.mark.slow


def blocks(lang: str, doc: str = "README.md") -> list[str]:
    text = (ROOT / doc).read_text()
    return [b for lng, b in re.findall(r"^```(\w*)\n(.*?)^```", text, re.S | re.M) if lng == lang]


def block_with(lang: str, needle: str) -> str:
    (found,) = [b for b in blocks(lang) if needle in b]
    return found


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


def environment(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MQCTL_")}
    env.update(
        HOME=str(home),
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        MQCTL_PARENT_PID=str(os.getpid()),
        COLUMNS="200",
        **extra,
    )
    return env


def with_free_ports(text: str, ports: dict[str, str], *, new: bool = True) -> str:
    """The loopback ports of the README's text, consistently replaced by free ones: every port with
    ``new``, else only the controller ports already in ``ports`` (not the broker's 10911)."""

    def sub(m: re.Match[str]) -> str:
        port = ports.setdefault(m.group(1), str(free_port())) if new else ports.get(m.group(1), m.group(1))
        return "127.0.0.1:" + port

    return re.sub(r"127\.0\.0\.1:(\d+)", sub, text)


class Nodes:
    def __init__(self, home: Path) -> None:
        self.home = home
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, command: str, env: dict[str, str]) -> None:
        log_path = self.home / f"node{len(self.procs)}.log"
        watch_log(str(log_path))
        with open(log_path, "ab") as log:
            self.procs.append(
                subprocess.Popen(
                    ["sh", "-c", "exec " + command], stdout=log, stderr=subprocess.STDOUT, env=env
                )
            )

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)


@pytest.fixture
def nodes(home: Path) -> Iterator[Nodes]:
    n = Nodes(home)
    try:
        yield n
    finally:
        n.stop()


def wait_for_leader(address: str) -> None:
    def leader() -> bool:
        try:
            return bool(metadata(address, 1.0).get("controller_leader_address"))
        except Exception:
            return False

    wait_until(leader, 60, what=f"a leader seen from {address}")


def sh(command: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", "-c", command], capture_output=True, text=True, env=env, timeout=120)


def check_python_and_admin_examples(address: str, ports: dict[str, str], env: dict[str, str]) -> None:
    """The Python example registers broker-a at 127.0.0.1:10911; the admin commands after it show it."""
    code = with_free_ports(block_with("python", "ControllerClient"), ports, new=False)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    for line in block_with("sh", "getSyncStateSet").strip().splitlines():
        # the commands name no address: they use the default, 127.0.0.1:9878, here its free port
        proc = sh(line, {**env, "MQCTL_CONTROLLER": address})
        assert proc.returncode == 0, f"{line}: {proc.stderr}"
        if "-o json" in line:
            (broker,) = json.loads(proc.stdout)["brokers"]
            replicas = broker["inSyncReplicas"] + broker["notInSyncReplicas"]
            assert broker["brokerName"] == "broker-a"
            assert [r["brokerAddress"] for r in replicas] == ["127.0.0.1:10911"]
        else:
            assert "broker-a" in proc.stdout and "127.0.0.1:10911" in proc.stdout


def test_readme_shows_only_loopback_addresses() -> None:
    text = (ROOT / "README.md").read_text()
    assert re.findall(r"\b\d+\.\d+\.\d+\.\d+\b", text) and all(
        a == "127.0.0.1" for a in re.findall(r"\b\d+\.\d+\.\d+\.\d+\b", text)
    )


def test_docs_show_only_loopback_addresses() -> None:
    """docs/: every address is 127.0.0.1 (0.0.0.0 only as what it is, a wildcard to listen on; another
    host is HOST), and no made-up host names such as h1:9878."""
    for page in sorted((ROOT / "docs").rglob("*.md")):
        text = page.read_text()
        ips = set(re.findall(r"\b\d+\.\d+\.\d+\.\d+\b", text)) - {"127.0.0.1", "0.0.0.0"}
        hosts = set(re.findall(r"\b(?:h|host|node|ctl|controller|broker)\d+:\d+\b", text))
        assert not ips and not hosts, f"{page.relative_to(ROOT)}: {sorted(ips | hosts)}"


def test_quick_start_one_node(home: Path, nodes: Nodes) -> None:
    first = block_with("sh", "pip install")
    serve = first.strip().split("&&")[-1].strip()
    assert serve == "~/.mqctl/bin/mqctl serve"
    listen, raft = free_port(), free_port()
    # `mqctl serve` as shown (the installed one); its default ports (9878, 9880) through the
    # environment it documents, so that this test never takes a fixed port
    env = environment(home, MQCTL_LISTEN=f"127.0.0.1:{listen}", MQCTL_RAFT=f"127.0.0.1:{raft}")
    nodes.start("mqctl serve", env)
    address = f"127.0.0.1:{listen}"
    wait_for_leader(address)
    assert sh("mqctl --version", env).stdout.startswith("mqctl ")
    check_python_and_admin_examples(address, {"9878": str(listen), "9880": str(raft)}, env)
    assert any(home.rglob("*")), "the default data directory is under HOME"


def test_three_node_group_on_one_machine(home: Path, nodes: Nodes) -> None:
    ports: dict[str, str] = {}
    env = environment(home)
    lines = [ln for ln in block_with("sh", "--peers").strip().splitlines() if ln.startswith("mqctl serve")]
    assert len(lines) == 3
    for line in lines:
        nodes.start(with_free_ports(line, ports), env)
    address = f"127.0.0.1:{ports['9878']}"
    wait_for_leader(address)
    status = with_free_ports(block_with("sh", "quorum status").strip(), ports)

    def healthy() -> bool:
        return sh(status, env).returncode == 0

    wait_until(healthy, 60, what="quorum status exits 0")
    for n in range(3):
        assert (home / "mqctl" / f"n{n}").is_dir()
    check_python_and_admin_examples(address, ports, env)


def test_broker_agent_example(home: Path, nodes: Nodes, tmp_path: Path) -> None:
    """docs/broker.md: one agent against the README's one-node controller becomes master, takes a
    message, is isolated and healed, crashes and stops."""
    (code,) = [b for b in blocks("python", "docs/broker.md") if "BrokerAgent" in b]
    listen, raft = free_port(), free_port()
    env = environment(home, MQCTL_LISTEN=f"127.0.0.1:{listen}", MQCTL_RAFT=f"127.0.0.1:{raft}")
    nodes.start("mqctl serve", env)
    wait_for_leader(f"127.0.0.1:{listen}")
    code = with_free_ports(code, {"9878": str(listen)}, new=False)
    code = code.replace("/tmp/mqctl-broker", str(tmp_path / "broker"))  # a fresh store for this run
    code += "\nassert r.ok, r\nprint('ok')\n"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr
    assert (tmp_path / "broker" / "a1" / "store" / "brokerIdentity").is_file()
