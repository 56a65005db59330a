"""`mqctl demo --rocketmq-home DIR` as an operator runs it (issue 19): RocketMQ 5.3.3's own jars
(../shared/rocketmq-broker/lib) laid out as an installation in a temporary directory, the demo a subprocess
without a terminal (plain lines). The demo enters a private network namespace itself (the tests run as
root); every process it started is gone at the end, also after Ctrl-C, and so is its directory. And the
one-line errors: not an installation, Java missing, too old, without javac."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from harness import descendants, still_alive, with_default_sigint
from rocketmq_fixtures import LIB, require_rocketmq, rocksdb_jar

MQCTL = [sys.executable, "-m", "mqctl"]


def installation(root: Path, rocksdb: bool = True) -> Path:
    """RocketMQ's jars as an operator's installation has them: DIR/lib/*.jar (RocksDB's jar among them
    unless `rocksdb` is false)."""
    if not (LIB / "classpath.txt").is_file():
        pytest.fail(f"RocketMQ's broker classes are missing: {LIB}", pytrace=False)
    home = root / "rocketmq-5.3.3"
    (home / "lib").mkdir(parents=True)
    for jar in (LIB / "classpath.txt").read_text().split():
        (home / "lib" / jar).symlink_to(LIB / jar)
    rocks = rocksdb_jar()
    if rocks is not None and rocksdb:
        (home / "lib" / rocks.name).symlink_to(rocks)
    return home


def run_until(proc: subprocess.Popen[str], marker: str, timeout: float) -> list[str]:
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    for line in proc.stdout:
        lines.append(line)
        if marker in line or time.monotonic() > deadline:
            break
    assert any(marker in ln for ln in lines), "".join(lines)
    return lines


def start_demo(tmp: Path, home: Path) -> subprocess.Popen[str]:
    argv = [*MQCTL, "demo", "--rocketmq-home", str(home), "--pace", "0.3"]
    return subprocess.Popen(
        with_default_sigint(argv),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp), "PYTHONUNBUFFERED": "1"},
    )


@pytest.mark.slow
def test_demo_with_real_rocketmq_brokers(tmp_path: Path) -> None:
    """The six steps with RocketMQ's name server, brokers, producer and consumer: the new master told by
    mqctl's push, the old one back as a slave, the verdict; nothing left behind."""
    require_rocketmq()
    home = installation(tmp_path / "opt")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = start_demo(tmp, home)
    try:
        lines = run_until(proc, "Step 2/6", 180)
        started = descendants(proc.pid)
        rest = proc.communicate(timeout=240)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out = "".join(lines) + rest
    assert proc.returncode == 0, out
    for step in range(1, 7):
        assert f"Step {step}/6" in out, out
    assert "in a private network namespace" in out and "RocketMQ 5.3.3 at " in out, out
    # 3 mqctl serve nodes, the name server, 3 brokers (and the producer, once Step 2 has begun)
    assert len(started) >= 7, (started, out)
    # told by mqctl's push, or, when the machine is loaded, by the broker's own GetReplicaInfo poll
    # that came first (seen at load 10 in the full suite); that the push reaches a RocketMQ broker
    # is test_rocketmq_broker_set.py's test_master_kill_fails_over_by_push
    told = r"told by (mqctl's push \(NOTIFY_BROKER_ROLE_CHANGED\)|its own GetReplicaInfo poll)"
    assert re.search(told, out), out
    assert "back in the SyncStateSet" in out, out
    verdict = [ln for ln in out.splitlines() if "VERDICT: no acknowledged message was lost" in ln]
    assert len(verdict) == 1 and "read back by RocketMQ's consumer" in verdict[0], out
    assert "[FAILED]" not in out and "Traceback" not in out, out
    assert not still_alive(started), "processes left behind"
    assert list(tmp.iterdir()) == [], "the run directory is removed"


@pytest.mark.slow
def test_demo_with_rocketmq_ctrl_c_cleans_up(tmp_path: Path) -> None:
    require_rocketmq()
    home = installation(tmp_path / "opt")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = start_demo(tmp, home)
    try:
        lines = run_until(proc, "Step 2/6", 180)
        started = descendants(proc.pid)
        assert len(started) >= 7, (started, lines)
        assert list(tmp.iterdir()), "the run directory exists while it runs"
        proc.send_signal(signal.SIGINT)
        rest = proc.communicate(timeout=60)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, "".join(lines) + rest
    assert not still_alive(started), "processes left behind"
    assert list(tmp.iterdir()) == [], "the run directory is removed"


@pytest.mark.slow
def test_demo_with_brokers_that_cannot_start(tmp_path: Path) -> None:
    """An installation whose broker cannot start (RocksDB's jar missing): exit 7, one line with the
    broker's own reason, nothing left behind."""
    require_rocketmq()
    home = installation(tmp_path / "opt", rocksdb=False)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    p = subprocess.run(
        [*MQCTL, "demo", "--rocketmq-home", str(home)],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "TMPDIR": str(tmp)},
    )
    assert p.returncode == 7, p.stdout + p.stderr
    err = p.stderr.strip()
    assert len(err.splitlines()) == 1 and "exited" in err and "org.rocksdb" in err, p.stderr
    assert "Traceback" not in p.stdout + p.stderr
    assert list(tmp.iterdir()) == [], "the run directory is removed"


def demo_error(home: Path, env: dict[str, str] | None = None, *extra: str) -> tuple[int, str]:
    p = subprocess.run(
        [*MQCTL, "demo", "--rocketmq-home", str(home), *extra],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )
    err = p.stderr.strip()
    assert len(err.splitlines()) == 1 and err.startswith("mqctl: error: "), p.stderr
    assert "Traceback" not in p.stderr and "Step 1/6" not in p.stdout, p.stdout + p.stderr
    return p.returncode, err


def test_not_a_rocketmq_installation(tmp_path: Path) -> None:
    assert demo_error(tmp_path / "nowhere")[0] == 2
    code, err = demo_error(tmp_path)
    assert code == 2 and "not a RocketMQ installation (no lib/*.jar)" in err, err
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "commons-cli.jar").symlink_to(LIB / "commons-cli.jar")
    (tmp_path / "lib" / "broken.jar").write_text("not a zip")
    code, err = demo_error(tmp_path)
    assert code == 2 and "no jar in" in err and "org.apache.rocketmq.broker.BrokerStartup" in err, err


def fake_jdk(root: Path, version: str, javac: bool) -> Path:
    """A JAVA_HOME whose java only answers -version: an old or partial JDK that this machine lacks."""
    (root / "bin").mkdir(parents=True)
    java = root / "bin" / "java"
    java.write_text(f"#!/bin/sh\necho 'openjdk version \"{version}\" 2024-01-16' >&2\n")
    java.chmod(0o755)
    if javac:
        (root / "bin" / "javac").symlink_to(java)
    return root


def test_java_missing_too_old_or_without_javac(tmp_path: Path) -> None:
    home = installation(tmp_path / "opt")
    no_java = {"PATH": str(tmp_path / "empty"), "JAVA_HOME": ""}
    code, err = demo_error(home, no_java)
    assert code == 9 and "no java on PATH" in err and "JDK" in err, err
    code, err = demo_error(home, {"JAVA_HOME": str(fake_jdk(tmp_path / "jdk8", "1.8.0_392", True))})
    assert code == 9 and "is Java 8" in err, err
    code, err = demo_error(home, {"JAVA_HOME": str(fake_jdk(tmp_path / "jre17", "17.0.15", False))})
    assert code == 9 and "javac" in err, err


def test_host_network_needs_rocketmq_home() -> None:
    p = subprocess.run([*MQCTL, "demo", "--host-network"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "--host-network goes with --rocketmq-home" in p.stderr, p.stderr
