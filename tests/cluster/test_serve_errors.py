"""`mqctl serve` refuses bad setups with one clear line and a non-zero exit, never a traceback."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from mqctl.localgroup import LocalCluster, free_port

pytestmark = pytest.mark.slow


def serve(*args: str, timeout: float = 30, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mqctl", "serve", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def error_line(proc: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("mqctl: error:")]
    assert len(lines) == 1, proc.stderr
    return lines[0]


@contextlib.contextmanager
def busy_port() -> Iterator[int]:
    """A port of 127.0.0.1 that a listener holds for the block."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def test_busy_grpc_port(tmp_path) -> None:
    with busy_port() as port:
        proc = serve(
            "--listen",
            f"127.0.0.1:{port}",
            "--raft",
            f"127.0.0.1:{free_port()}",
            "--data-dir",
            str(tmp_path / "d"),
        )
    assert proc.returncode == 2
    assert "address already in use" in error_line(proc)
    assert not (tmp_path / "d").exists()  # a node that never started leaves nothing behind (issue 33)
    # only mqctl's lines: not gRPC's own "add_port.cc ... Failed to add port" log (issue 16)
    # (the port is checked before the node starts, issue 33: gRPC itself never gets to bind it)
    assert [ln.split(":")[0] for ln in proc.stderr.splitlines()] == ["mqctl controller", "mqctl"], proc.stderr


@pytest.mark.parametrize(
    "flag, value, what",
    [
        ("--raft", "127.0.0.1:{port}", "Raft"),
        ("--remoting-port", "{port}", "RocketMQ remoting"),
        ("--metrics-address", "127.0.0.1:{port}", "HTTP"),
    ],
)
def test_a_busy_port_stops_serve_with_one_line(tmp_path, flag: str, value: str, what: str) -> None:
    args = {"--listen": "127.0.0.1:{free}", "--raft": "127.0.0.1:{free}", flag: value}
    with busy_port() as port:
        argv = [x for k, v in args.items() for x in (k, v.format(port=port, free=free_port()))]
        proc = serve(*argv, "--data-dir", str(tmp_path / "d"))
    assert proc.returncode == 2
    assert error_line(proc).startswith(f"mqctl: error: cannot listen for {what} on 127.0.0.1:{port}")
    assert not (tmp_path / "d").exists()


def _tree(root) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() if p.is_file() else b"<dir>" for p in sorted(root.rglob("*"))
    }


def test_a_start_that_fails_leaves_the_data_directory_as_it_found_it(tmp_path) -> None:
    """A busy gRPC, remoting or HTTP port: a new directory (and its parents) is gone again, an empty
    one stays empty, a node's directory keeps exactly its files (issue 33)."""
    with LocalCluster(str(tmp_path / "old"), size=1) as cluster:
        cluster.start()
    existing = tmp_path / "old" / "node0"
    cluster.nodes[0].stop()
    before = _tree(existing)
    assert "raft.journal" in before and "node.json" in before
    (tmp_path / "empty").mkdir()
    with busy_port() as port:
        busy = [
            ["--listen", f"127.0.0.1:{port}"],
            ["--listen", f"127.0.0.1:{free_port()}", "--remoting-port", str(port)],
            ["--listen", f"127.0.0.1:{free_port()}", "--metrics-address", f"127.0.0.1:{port}"],
        ]
        for args in busy:
            for data_dir in (tmp_path / "new" / "deeper" / "d", tmp_path / "empty", existing):
                raft = cluster.nodes[0].raft_address if data_dir == existing else f"127.0.0.1:{free_port()}"
                proc = serve(*args, "--raft", raft, "--data-dir", str(data_dir))
                assert proc.returncode == 2, (args, proc.stderr)
                error_line(proc)
                assert not (tmp_path / "new").exists(), (args, proc.stderr)
                assert list((tmp_path / "empty").iterdir()) == [], args
                assert _tree(existing) == before, args


def test_data_dir_that_cannot_be_created(tmp_path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    proc = serve("--raft", f"127.0.0.1:{free_port()}", "--data-dir", str(blocker / "d"))
    assert proc.returncode == 2
    assert "cannot create data directory" in error_line(proc)


def test_data_dir_in_use_by_a_running_node(tmp_path) -> None:
    with LocalCluster(str(tmp_path), size=1) as cluster:
        cluster.start()
        proc = serve(
            "--listen",
            f"127.0.0.1:{free_port()}",
            "--raft",
            f"127.0.0.1:{free_port()}",
            "--data-dir",
            cluster.nodes[0].data_dir,
        )
        assert proc.returncode == 2
        assert "in use by another running controller" in error_line(proc)


def test_unknown_config_key(tmp_path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('listen = "127.0.0.1:1"\nbogus = 1\n')
    proc = serve("--config", str(cfg))
    assert proc.returncode == 2
    assert "unknown key 'bogus'" in error_line(proc)


def test_bad_config_value_from_env(tmp_path) -> None:
    proc = serve("--data-dir", str(tmp_path), env={"MQCTL_HEARTBEAT_TIMEOUT": "5ms"})
    assert proc.returncode == 2
    assert "MQCTL_HEARTBEAT_TIMEOUT" in error_line(proc)


def test_raft_beyond_loopback_needs_a_secret(tmp_path) -> None:
    proc = serve("--raft", "0.0.0.0:9880", "--data-dir", str(tmp_path))
    assert proc.returncode == 2
    assert "--cluster-secret" in error_line(proc)


def test_bad_flag_value() -> None:
    proc = serve("--listen", "nonsense")
    assert proc.returncode == 2
    assert "HOST:PORT" in error_line(proc)


def test_cluster_secret_group_works(tmp_path) -> None:
    with LocalCluster(str(tmp_path), size=3, extra_args=["--cluster-secret", "s3cret"]) as cluster:
        cluster.start()
        assert cluster.wait_for_same_hash()


def test_data_dir_of_another_node_is_refused(tmp_path) -> None:
    with LocalCluster(str(tmp_path), size=1) as cluster:
        cluster.start()
        data_dir = cluster.nodes[0].data_dir
        old_raft = cluster.nodes[0].raft_address
    proc = serve(
        "--listen", f"127.0.0.1:{free_port()}", "--raft", f"127.0.0.1:{free_port()}", "--data-dir", data_dir
    )
    assert proc.returncode == 2
    assert f"holds the Raft log of the node at {old_raft}" in error_line(proc)


def test_nodes_started_by_a_process_exit_when_it_is_killed(tmp_path) -> None:
    """mqctl.localgroup (tests, sim, demo) marks its nodes with MQCTL_PARENT_PID: a SIGKILLed parent
    leaves no controller behind."""
    import signal as sig

    code = (
        "import sys, time; from mqctl.localgroup import LocalCluster; "
        f"c = LocalCluster({str(tmp_path)!r}, size=1).start(); "
        "print(c.nodes[0].proc.pid, flush=True); time.sleep(600)"
    )
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        os.kill(child, 0)  # running
        parent.send_signal(sig.SIGKILL)
        parent.wait(10)

        def gone() -> bool:
            try:
                os.kill(child, 0)
            except ProcessLookupError:
                return True
            with open(f"/proc/{child}/stat") as fh:  # a zombie until init reaps it counts as gone
                return fh.read().split()[2] == "Z"

        from mqctl.localgroup import wait_until

        wait_until(gone, 20, what="the orphaned node to exit")
    finally:
        parent.kill()
