"""`mqctl demo` and `mqctl sim` as a user runs them: subprocesses, no terminal (plain progress lines),
exit codes, and nothing left behind (no temporary directory, no controller process), also on Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from harness import children, still_alive, with_default_sigint

from mqctl.localgroup import LocalCluster

pytestmark = pytest.mark.slow

MQCTL = [sys.executable, "-m", "mqctl"]


def _env(tmp: Path) -> dict[str, str]:
    return {**os.environ, "TMPDIR": str(tmp), "PYTHONUNBUFFERED": "1"}


def test_demo_exits_0_with_the_verdict_and_leaves_nothing(tmp_path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    # --pace shortens only the pauses in which messages just flow; every step runs as without it
    proc = subprocess.run(
        [*MQCTL, "demo", "--pace", "0.3"], capture_output=True, text=True, timeout=240, env=_env(tmp)
    )
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    for step in range(1, 7):
        assert f"Step {step}/6" in out, out
    assert "controller group up" in out and "new master broker-a/r" in out, out
    assert "is a slave of id" in out and "it truncated" in out and "truncated 0 bytes" not in out, out
    verdict = [line for line in out.splitlines() if "VERDICT: no acknowledged message was lost" in line]
    assert len(verdict) == 1 and "checks hold" in verdict[0], out
    assert "[FAILED]" not in out and "Traceback" not in proc.stderr, out + proc.stderr
    assert "\x1b[" not in out, "no terminal: plain lines, no escape codes"
    assert list(tmp.iterdir()) == [], "the run directory is removed"


def test_demo_ctrl_c_cleans_up(tmp_path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    # SIGINT at its default in the child even when this run ignores it (background job, nohup, CI):
    # an ignored signal stays ignored across exec, and the test sends SIGINT
    proc = subprocess.Popen(
        with_default_sigint([*MQCTL, "demo"]),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_env(tmp),
    )
    assert proc.stdout is not None
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if "Step 2/6" in line:
                break
        started = children(proc.pid)
        assert len(started) == 3, ("three controller nodes", lines)
        assert list(tmp.iterdir()), "the run directory exists while it runs"
        proc.send_signal(signal.SIGINT)
        rest = proc.communicate(timeout=60)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, "".join(lines) + rest
    assert not still_alive(started, 10), "controller processes left behind"
    assert list(tmp.iterdir()) == [], "the run directory is removed"


def test_sim_against_a_given_controller_json_report(tmp_path) -> None:
    """-a: an existing controller group (no controller faults then); seeded broker faults; JSON report."""
    with LocalCluster(str(tmp_path / "ctl"), size=1) as cluster:
        cluster.start()
        proc = subprocess.run(
            [
                *MQCTL,
                "sim",
                "-a",
                cluster.addresses,
                "-s",
                "1",
                "-r",
                "3",
                "-d",
                "12",
                "--chaos",
                "--seed",
                "4",
                "--fault-interval",
                "2",
                "--rate",
                "30",
                "-o",
                "json",
                "--peers",
                "local",
                "--dir",
                str(tmp_path / "run"),
            ],
            capture_output=True,
            text=True,
            timeout=180,
            env=_env(tmp_path),
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        report = json.loads(proc.stdout)
        assert report["ok"] and report["seed"] == 4
        assert report["stats"]["faults"] >= 1 and report["stats"]["acknowledged"] > 100
        names = {c["name"]: c for c in report["checks"]}
        assert names["controller nodes agree (state hash)"]["detail"].startswith("1 nodes")
        assert all(c["ok"] for c in report["checks"])
        assert cluster.nodes[0].alive(), "a given controller is never touched"
    assert (tmp_path / "run" / "brokers" / "broker-a" / "r0").is_dir(), "--dir is kept"
    again = subprocess.run(
        [*MQCTL, "sim", "-a", "127.0.0.1:1", "-d", "1", "--dir", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert again.returncode == 2 and "not empty" in again.stderr, again.stderr


def test_sim_against_a_group_with_mutual_tls_and_a_token(tmp_path) -> None:
    """-a with the shared connection options: the brokers and the simulation's own client reach a
    group that needs TLS with client certificates (and a token for admin calls); without the
    certificate nothing registers, and the run says so in one line."""
    from tls_pki import write_pki

    pki = write_pki(tmp_path / "pki")
    serve = [
        "--tls-cert",
        pki.server_cert,
        "--tls-key",
        pki.server_key,
        "--tls-ca",
        pki.ca,
        "--token",
        "s3cret",
    ]
    with LocalCluster(str(tmp_path / "ctl"), size=1, extra_args=serve) as cluster:
        cluster.start(wait=False)
        run = [
            *MQCTL,
            "sim",
            "-a",
            cluster.addresses,
            "-s",
            "1",
            "-r",
            "2",
            "-d",
            "4",
            "--rate",
            "20",
            "-o",
            "json",
            "--peers",
            "local",
            "--tls-ca",
            pki.ca,
        ]
        secure = ["--tls-cert", pki.client_cert, "--tls-key", pki.client_key, "--token", "s3cret"]
        proc = subprocess.run(
            [*run, *secure, "--dir", str(tmp_path / "run")],
            capture_output=True,
            text=True,
            timeout=180,
            env=_env(tmp_path),
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        report = json.loads(proc.stdout)
        assert report["ok"] and report["stats"]["acknowledged"] > 0, report
        refused = subprocess.run(
            [*run, "--timeout", "2", "--dir", str(tmp_path / "run2")],
            capture_output=True,
            text=True,
            timeout=180,
            env=_env(tmp_path),
        )
        assert refused.returncode == 6 and "TLS" in refused.stderr, refused.stderr  # unreachable
        assert refused.stderr.count("\n") == 1, refused.stderr


def test_sim_usage_errors() -> None:
    for args, text in (
        (["--sets", "0"], "--sets 0"),
        (["--storage", "x"], "--storage"),
        (["--controllers", "2"], "--controllers 2"),
        (["-d", "0"], "needs a terminal"),
    ):
        proc = subprocess.run(
            [*MQCTL, "sim", *args], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
        )
        assert proc.returncode == 2 and text in proc.stderr, (args, proc.stderr)
        assert proc.stderr.count("\n") == 1, proc.stderr
