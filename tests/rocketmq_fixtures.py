"""Helpers for tests that run Apache RocketMQ 5.3.3's own broker and name server (../shared/rocketmq-broker,
compiled unchanged) against `mqctl serve --remoting-port`: tests/recover/test_rocketmq_broker_store.py and
tests/e2e.

Everything runs in a private network namespace whose only interface is loopback (`unshare --net`, then
`ip link set lo up`): RocketMQ's HA listener binds the wildcard address whatever bindAddress says. The test
process stays outside; what must talk to the processes inside (mqctl's CLI, the Java drivers) runs inside
through `nsenter --net`.

(A unique module name, so that test modules import it without clashing with other directories.)
"""

from __future__ import annotations

import importlib.util
import os
import re
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

# the JVM options, broker.conf and RocketMQDriver.java that `mqctl demo --rocketmq-home` uses too
from mqctl.sim.rocketmq import CLIENT_JOPTS as CLIENT_JOPTS
from mqctl.sim.rocketmq import DRIVER as DRIVER
from mqctl.sim.rocketmq import JOPTS
from mqctl.sim.rocketmq import broker_conf as broker_conf

REPO = Path(__file__).resolve().parents[1]
# ../shared beside the repository, here and in CI ($MQCTL_SHARED_DIR elsewhere)
SHARED = Path(os.environ.get("MQCTL_SHARED_DIR", REPO.parent / "shared"))
LIB = SHARED / "rocketmq-broker" / "lib"
MQCTL = str(Path(sys.executable).with_name("mqctl"))


def rocksdb_jar() -> Path | None:
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        return None
    jars = sorted((Path(spec.origin).parent / "jars").glob("rocksdbjni-*.jar"))
    return jars[0] if jars else None


def broker_classpath() -> list[str]:
    """RocketMQ's broker class path (lib/classpath.txt) and RocksDB's jar (loaded, never opened)."""
    jars = [str(LIB / ln.strip()) for ln in (LIB / "classpath.txt").read_text().splitlines() if ln.strip()]
    return [*jars, str(rocksdb_jar())]


def why_not() -> str | None:
    """Why RocketMQ's broker cannot run here, or None."""
    for tool in ("java", "javac", "unshare", "nsenter", "ip"):
        if shutil.which(tool) is None:
            return f"{tool} is not on PATH"
    if not (LIB / "classpath.txt").is_file():
        return f"{LIB} (RocketMQ's broker, ../shared/rocketmq-broker) is missing"
    if rocksdb_jar() is None:
        return "RocksDB's jar (shipped with pyspark: pip install 'mqctl[spark]') is missing"
    try:
        p = subprocess.run(
            ["unshare", "--net", "ip", "link", "set", "lo", "up"], capture_output=True, text=True, timeout=30
        )
    except subprocess.TimeoutExpired:
        return "unshare --net did not finish"
    if p.returncode != 0:
        return f"cannot make a private network namespace (unshare --net needs root): {p.stderr.strip()}"
    return None


def require_rocketmq() -> None:
    """Fail when RocketMQ's classes are missing (../shared/rocketmq-broker, as tests/interop does for
    rocketmq-java); skip (loudly) when java, unshare or root is missing, except in CI ($CI set), where
    they are there and these tests must not be skipped: fail then."""
    if not (LIB / "classpath.txt").is_file():
        pytest.fail(
            f"RocketMQ's broker classes are missing: {LIB} (rocketmq-broker beside the repository, "
            "or $MQCTL_SHARED_DIR/rocketmq-broker)",
            pytrace=False,
        )
    why = why_not()
    if why is None:
        return
    msg = f"!!! the tests with RocketMQ's real broker cannot run: {why} !!!"
    if os.environ.get("CI"):
        pytest.fail(msg, pytrace=False)
    pytest.skip(msg)


def require_rocketmq_classes() -> None:
    """For tests that only run RocketMQ's classes in a short JVM (no broker, no namespace): fail when the
    classes are missing, skip (loudly) when java or javac is, except in CI ($CI set): fail then."""
    if not (LIB / "classpath.txt").is_file():
        pytest.fail(f"RocketMQ's broker classes are missing: {LIB}", pytrace=False)
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            msg = f"!!! the tests with RocketMQ's classes cannot run: {tool} is not on PATH !!!"
            if os.environ.get("CI"):
                pytest.fail(msg, pytrace=False)
            pytest.skip(msg)


def compile_java(out: Path, *sources: Path) -> Path:
    """javac the drivers against RocketMQ's classes into `out` (a directory for java -cp)."""
    p = subprocess.run(
        ["javac", "-nowarn", "-encoding", "UTF-8", "-cp", str(LIB / "*"), "-d", str(out), *map(str, sources)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    return out


class Namespace:
    """A private network namespace (held by a `sleep`) and the processes started in it, by pid; their
    stdout and stderr in ROOT/NAME.out and ROOT/NAME.err."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.holder = subprocess.Popen(
            ["unshare", "--net", "sh", "-c", "ip link set lo up && echo up && exec sleep 900"],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.holder.stdout is not None
        ready, _, _ = select.select([self.holder.stdout], [], [], 30)
        line = self.holder.stdout.readline().strip() if ready else ""
        if line != "up":
            self.close()
            raise AssertionError(f"the network namespace did not come up: {line!r}")

    def cmd(self, *args: str) -> list[str]:
        return ["nsenter", "--target", str(self.holder.pid), "--net", *args]

    def start(self, name: str, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        with open(self.root / f"{name}.out", "ab") as out, open(self.root / f"{name}.err", "ab") as err:
            p = subprocess.Popen(self.cmd(*args), stdout=out, stderr=err, env=env, cwd=self.root)
        self.procs[name] = p
        return p

    def run(
        self, *args: str, timeout: float = 60, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """A command inside the namespace, to its end (bounded)."""
        return subprocess.run(
            self.cmd(*args), capture_output=True, text=True, timeout=timeout, env=env, cwd=self.root
        )

    def log_paths(self, name: str) -> list[Path]:
        return [self.root / f"{name}.{s}" for s in ("out", "err")]

    def log(self, name: str) -> str:
        return "".join(p.read_text(errors="replace") for p in self.log_paths(name) if p.exists())

    def wait_log(self, name: str, pattern: str, timeout: float, *, after: int = 0) -> re.Match[str]:
        """The first match of pattern in the process's stdout+stderr at or after character `after`."""
        deadline = time.monotonic() + timeout
        rx = re.compile(pattern)
        while True:
            m = rx.search(self.log(name), after)
            if m:
                return m
            p = self.procs[name]
            if p.poll() is not None or time.monotonic() > deadline:
                why = f"exited with {p.returncode}" if p.returncode is not None else f"not within {timeout} s"
                raise AssertionError(f"{name}: {pattern!r} {why}; log tail:\n{self.log(name)[-3000:]}")
            time.sleep(0.2)

    def stop(self, name: str, sig: int, timeout: float) -> int:
        p = self.procs.pop(name)
        p.send_signal(sig)
        try:
            return p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(10)
            raise AssertionError(f"{name} did not stop within {timeout} s of signal {sig}") from None

    def close(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
            p.wait(10)
        self.procs.clear()
        self.holder.kill()
        self.holder.wait(10)


def namesrv_args(ns: Namespace, port: int, cp: list[str]) -> list[str]:
    """The command of RocketMQ's name server on 127.0.0.1:port (its conf and home under ns.root)."""
    conf = ns.root / "namesrv.conf"
    conf.write_text(f"listenPort={port}\nbindAddress=127.0.0.1\n")
    return [
        "java",
        *JOPTS,
        f"-Duser.home={ns.root / 'namesrv-home'}",
        "-cp",
        ":".join(cp),
        "org.apache.rocketmq.namesrv.NamesrvStartup",
        "-c",
        str(conf),
    ]


def broker_args(ns: Namespace, name: str, conf: Path, cp: list[str]) -> list[str]:
    """The command of RocketMQ's broker `name` with broker.conf `conf` (its home under ns.root)."""
    return [
        "java",
        *JOPTS,
        f"-Duser.home={ns.root / (name + '-home')}",
        "-cp",
        ":".join(cp),
        "org.apache.rocketmq.broker.BrokerStartup",
        "-c",
        str(conf),
    ]


def rocketmq_env(ns: Namespace) -> dict[str, str]:
    return {**os.environ, "ROCKETMQ_HOME": str(ns.root / "home")}


class ConfigDriver:
    """tests/store/RocketmqConfigDriver.java compiled: a broker's config/ files written and read back by
    RocketMQ's own managers (TopicConfigManager, SubscriptionGroupManager, ConsumerOffsetManager, ...)."""

    def __init__(self, classes: Path) -> None:
        self.cp = f"{classes}:{LIB / '*'}"

    def _java(self, *args: str, spec: str = "") -> str:
        p = subprocess.run(
            ["java", *CLIENT_JOPTS, "-cp", self.cp, "RocketmqConfigDriver", *args],
            input=spec,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert p.returncode == 0, p.stdout + p.stderr
        return p.stdout

    def write(self, store: Path, spec: str) -> Path:
        """Apply SPEC (the driver's commands, one a line) to a fresh set of managers; returns store."""
        out = self._java(str(store), spec=spec)
        assert out.strip().endswith("ok"), out
        return store

    def dump(self, store: Path) -> list[str]:
        """What RocketMQ's managers decode from the store's files, one sorted line an item."""
        return [ln for ln in self._java(str(store), "dump").splitlines() if ln.strip()]


def config_driver(out: Path) -> ConfigDriver:
    require_rocketmq_classes()
    return ConfigDriver(compile_java(out, REPO / "tests" / "store" / "RocketmqConfigDriver.java"))
