"""`mqctl demo --rocketmq-home DIR`: the demo's story with Apache RocketMQ 5.x's own name server, brokers,
producer and consumer instead of mqctl's broker agents (docs/sim.md, "mqctl demo --rocketmq-home DIR").

A 3-node `mqctl serve` group with RocketMQ remoting ports, RocketMQ's name server and three brokers of
broker set broker-a in controller mode, all on 127.0.0.1 in a temporary directory; RocketMQ's producer and
consumer are RocketMQDriver.java beside this file, compiled with javac into that directory. RocketMQ's HA
listener binds the wildcard address whatever bindAddress says, so the run enters a private network
namespace whose only interface is loopback first (``enter_private_network``), unless the operator accepts
the wildcard HA ports.

Also the one place of the JVM options and broker.conf keys that tests/e2e use for the same processes.
"""

from __future__ import annotations

import fcntl
import os
import re
import signal
import socket
import struct
import subprocess
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from mqctl.errors import UsageError
from mqctl.pipeline.engine import MissingDependencyError, java_executable
from mqctl.sim.invariants import Check

if TYPE_CHECKING:
    from mqctl.api import ReplicasInfo
    from mqctl.client import ControllerClient
    from mqctl.localgroup import LocalCluster
    from mqctl.sim.demo import DemoResult

__all__ = [
    "CLIENT_JOPTS",
    "DRIVER",
    "JOPTS",
    "Installation",
    "Java",
    "RocketMQSet",
    "broker_conf",
    "enter_private_network",
    "find_installation",
    "find_java",
    "run_rocketmq_demo",
]

T = TypeVar("T")
DRIVER = Path(__file__).with_name("RocketMQDriver.java")
# a server JVM (name server, broker) sized for one machine running several, with the module openings that
# RocketMQ 5.x needs on Java 9+ (as its runbroker.sh adds them)
JOPTS = [
    "-Xms256m",
    "-Xmx512m",
    "-XX:MaxDirectMemorySize=512m",
    "--add-exports=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.util=ALL-UNNAMED",
    "--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
    "-Dtls.server.mode=disabled",
    "-Dorg.apache.rocketmq.logging.org.slf4j.simpleLogger.defaultLogLevel=info",
]
# a client JVM (producer, consumer): short-lived, quiet
CLIENT_JOPTS = [
    "-XX:TieredStopAtLevel=1",
    "-XX:+UseSerialGC",
    "-Xms32m",
    "-Xmx256m",
    "-Dorg.apache.rocketmq.logging.org.slf4j.simpleLogger.defaultLogLevel=error",
]
MIN_JAVA = 11  # the driver and JOPTS (--add-opens, ProcessHandle)
REQUIRED_CLASSES = {
    "org/apache/rocketmq/broker/BrokerStartup.class": "the broker",
    "org/apache/rocketmq/namesrv/NamesrvStartup.class": "the name server",
    "org/apache/rocketmq/client/producer/DefaultMQProducer.class": "the client",
}
BROKER_SET = "broker-a"
CLUSTER = "DemoCluster"
TOPIC = "DemoTopic"
LEASE_MS = 3000  # the brokers' controllerHeartBeatTimeoutMills and the group's --heartbeat-timeout
BROKERS = ("b0", "b1", "b2")


def broker_conf(
    *,
    controllers: list[str],
    namesrv: str,
    port: int,
    ha_port: int,
    store: Path,
    broker_name: str = BROKER_SET,
    cluster: str = "DefaultCluster",
    extra: dict[str, object] | None = None,
) -> str:
    """broker.conf of a broker of a broker set in controller mode (keys as in RocketMQ's quick-start
    distribution/conf/controller/quick-start/broker-n0.conf), everything on 127.0.0.1. timerWheelEnable=false
    and reviveQueueNum=1 only shorten its shutdown (no POP revive scans to wait for); maxIndexNum and
    maxHashSlotNum keep the index file small. `extra` adds or overrides keys."""
    keys: dict[str, object] = {
        "brokerClusterName": cluster,
        "brokerName": broker_name,
        "brokerId": -1,
        "brokerRole": "SLAVE",
        "enableControllerMode": "true",
        "controllerAddr": ";".join(controllers),
        "fetchControllerAddrByDnsLookup": "false",
        "allAckInSyncStateSet": "true",
        "namesrvAddr": namesrv,
        "listenPort": port,
        "haListenPort": ha_port,
        "brokerIP1": "127.0.0.1",
        "brokerIP2": "127.0.0.1",
        "bindAddress": "127.0.0.1",
        "storePathRootDir": store,
        "storePathCommitLog": store / "commitlog",
        "storePathBrokerIdentity": store / "brokerIdentity",
        "mappedFileSizeCommitLog": 67108864,
        "autoCreateTopicEnable": "true",
        "timerWheelEnable": "false",
        "reviveQueueNum": 1,
        "maxIndexNum": 10000,
        "maxHashSlotNum": 5000,
        **(extra or {}),
    }
    return "".join(f"{k} = {v}\n" for k, v in keys.items())


# ------------------------------------------------------------------------------------------------
# What the run needs: a RocketMQ 5.x installation, Java, a private network


@dataclass(frozen=True)
class Installation:
    home: Path
    class_file_java: int  # the Java release its broker classes were compiled for

    @property
    def classpath(self) -> str:
        return str(self.home / "lib" / "*")  # as RocketMQ's runbroker.sh and tools.sh have it


def find_installation(home: str) -> Installation:
    """The RocketMQ installation at `home` (its lib/ holds the broker, name server and client classes), or
    a UsageError saying what is missing. Its version is checked once Java runs (compile_driver)."""
    root = Path(home).expanduser().resolve()
    if not root.is_dir():
        raise UsageError(f"--rocketmq-home {home}: no such directory")
    jars = sorted((root / "lib").glob("*.jar"))
    if not jars:
        raise UsageError(
            f"--rocketmq-home {home}: not a RocketMQ installation (no lib/*.jar); give the "
            "directory that holds RocketMQ 5.x's lib/ (the one bin/ is beside)"
        )
    missing = dict(REQUIRED_CLASSES)
    major = 0
    for jar in jars:
        try:
            with zipfile.ZipFile(jar) as z:
                names = set(z.namelist())
                for cls in [c for c in missing if c in names]:
                    if cls.endswith("BrokerStartup.class"):
                        head = z.read(cls)[:8]
                        major = int.from_bytes(head[6:8], "big") if head[:4] == b"\xca\xfe\xba\xbe" else 0
                    del missing[cls]
        except (OSError, zipfile.BadZipFile):
            continue  # not a jar RocketMQ needs: the class check says what is missing
        if not missing:
            break
    if missing:
        what = ", ".join(f"{v} ({k[:-6].replace('/', '.')})" for k, v in missing.items())
        raise UsageError(
            f"--rocketmq-home {home}: not a RocketMQ installation: no jar in {root / 'lib'} holds {what}"
        )
    return Installation(root, max(major - 44, 8))


@dataclass(frozen=True)
class Java:
    java: str
    javac: str
    release: int


def _java_release(java: str) -> int:
    """The feature release of `java -version` (8 for 1.8.0_392, 17 for 17.0.15), 0 if unreadable."""
    try:
        p = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    m = re.search(r'version "(\d+)(?:\.(\d+))?', p.stderr + p.stdout)
    if not m:
        return 0
    first = int(m.group(1))
    return int(m.group(2) or 0) if first == 1 else first


def find_java(needed: int) -> Java:
    """java and javac ($JAVA_HOME/bin, else PATH) of release `needed` or newer, or MissingDependencyError
    (exit 9) saying what to install."""
    need = max(needed, MIN_JAVA)
    hint = (
        f"install a JDK {need} or newer (e.g. apt-get install openjdk-17-jdk-headless) and put it on "
        "PATH or set JAVA_HOME"
    )
    java = java_executable()
    if java is None:
        where = (
            f"JAVA_HOME={os.environ['JAVA_HOME']} has no bin/java"
            if os.environ.get("JAVA_HOME")
            else "no java on PATH"
        )
        raise MissingDependencyError(
            f"the demo with RocketMQ needs Java {need}+ (java and javac) and {where}: {hint}"
        )
    release = _java_release(java)
    if release < need:
        found = f"Java {release}" if release else "a java whose version cannot be read"
        raise MissingDependencyError(
            f"the demo with RocketMQ needs Java {need}+ and {java} is {found}: {hint}"
        )
    javac = str(Path(java).with_name("javac"))
    if not os.access(javac, os.X_OK):
        raise MissingDependencyError(
            f"the demo with RocketMQ compiles its producer with javac, and there is "
            f"no {javac} (a JRE, not a JDK): {hint}"
        )
    return Java(java, javac, release)


CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1


def _unshare(flags: int) -> None:
    import ctypes  # lazy: start-up

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(flags) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def enter_private_network() -> str:
    """Move this process (one thread: call it before any thread starts) into a new network namespace whose
    only interface is loopback, and bring that up; every process it starts afterwards is in it too. As root
    a plain network namespace, otherwise one inside a new user namespace (the same uid and gid). Returns
    how; OSError when neither is allowed."""

    try:
        _unshare(CLONE_NEWNET)
        how = "a private network namespace"
    except PermissionError:
        uid, gid = os.getuid(), os.getgid()
        _unshare(CLONE_NEWUSER | CLONE_NEWNET)
        maps = (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1"))
        for name, text in maps:
            with open(f"/proc/self/{name}", "w") as fh:
                fh.write(text)
        how = "a private network namespace (in a user namespace)"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ifr = fcntl.ioctl(s, _SIOCGIFFLAGS, struct.pack("16sH22x", b"lo", 0))
        flags = struct.unpack("16sH22x", ifr)[1]
        fcntl.ioctl(s, _SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | _IFF_UP))
    return how


# ------------------------------------------------------------------------------------------------
# The processes


@dataclass
class RocketMQSet:
    """The processes of one run, each started by pid and stopped in close(): the controller group, the
    name server, the brokers b0..b2 of broker-a, the producer. Logs in WORK/logs/NAME.log."""

    install: Installation
    java: Java
    work: Path
    on_event: Callable[[str], None] = lambda text: None
    cluster: LocalCluster | None = None
    client: ControllerClient | None = None
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    ports: dict[str, tuple[int, int]] = field(default_factory=dict)  # broker -> (listenPort, haListenPort)
    namesrv: str = ""
    ids: dict[str, int] = field(default_factory=dict)  # broker -> brokerId
    version: str = ""  # RocketMQ's, once compile_driver ran

    def __post_init__(self) -> None:
        from mqctl.localgroup import free_port  # lazy: start-up

        self.logs = self.work / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.classes = self.work / "classes"
        self.namesrv = f"127.0.0.1:{free_port()}"
        for b in BROKERS:
            self.ports[b] = (free_port(), free_port())

    # -- plumbing

    def log(self, name: str) -> str:
        try:
            return (self.logs / f"{name}.log").read_text(errors="replace")
        except OSError:
            return ""

    def _start(self, name: str, args: list[str], env: dict[str, str] | None = None) -> None:
        with open(self.logs / f"{name}.log", "ab") as out:
            p = subprocess.Popen(
                args,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.work,
                env={**os.environ, **(env or {})},
                stdin=subprocess.DEVNULL,
            )
        self.procs[name] = p

    def _client_java(self, *args: str) -> list[str]:
        return [
            self.java.java,
            *CLIENT_JOPTS,
            f"-Drocketmq.client.logRoot={self.work / 'client-logs'}",
            "-cp",
            f"{self.classes}{os.pathsep}{self.install.classpath}",
            "RocketMQDriver",
            *args,
        ]

    def driver(self, *args: str, timeout: float = 120) -> list[str]:
        """RocketMQDriver to its end (bounded); its output lines."""
        p = subprocess.run(
            self._client_java(*args),
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.work,
            stdin=subprocess.DEVNULL,
        )
        if p.returncode != 0:
            last = (p.stderr or p.stdout).strip().splitlines()
            raise RuntimeError(
                f"RocketMQ's client ({args[0]}) exited with {p.returncode}: "
                f"{last[-1] if last else '(nothing printed)'}"
            )
        return p.stdout.splitlines()

    def wait_log(self, name: str, pattern: str, timeout: float, after: int = 0) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        rx = re.compile(pattern)
        while True:
            m = rx.search(self.log(name), after)
            if m:
                return m
            p = self.procs.get(name)
            if p is None or p.poll() is not None:
                raise RuntimeError(f"{name} exited: {self.last_words(name)}")
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{name}: no {pattern!r} within {timeout:.0f} s; it last said: {self.last_words(name)}"
                )
            time.sleep(0.1)

    def last_words(self, name: str) -> str:
        """The line of a process's log that most likely says what went wrong (the run's directory, and
        the log with it, is removed at the end)."""
        lines = [ln.strip() for ln in self.log(name).splitlines() if ln.strip()]
        errors = [ln for ln in lines if re.search(r"Exception|Error|error:", ln) and not ln.startswith("at ")]
        return (errors or lines or ["(nothing logged)"])[-1][:300]

    # -- start

    def compile_driver(self) -> str:
        """javac RocketMQDriver against the installation; its RocketMQ version ("5.3.3"), which must be
        5.x (UsageError otherwise). Before anything starts: a wrong installation fails fast."""
        self.classes.mkdir(exist_ok=True)
        p = subprocess.run(
            [
                self.java.javac,
                "-nowarn",
                "-encoding",
                "UTF-8",
                "-cp",
                self.install.classpath,
                "-d",
                str(self.classes),
                str(DRIVER),
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        if p.returncode != 0:
            first = next((ln for ln in (p.stderr + p.stdout).splitlines() if "error:" in ln), "javac failed")
            raise UsageError(
                f"--rocketmq-home {self.install.home}: RocketMQ's client classes do not compile "
                f"the demo's producer ({first.strip()}): is this RocketMQ 5.x?"
            )
        version = (self.driver("version", timeout=60) or [""])[0].strip()
        if not version.startswith("V5_"):
            shown = version[1:].replace("_", ".") if version.startswith("V") else repr(version)
            raise UsageError(
                f"--rocketmq-home {self.install.home}: RocketMQ {shown}; the demo needs "
                "RocketMQ 5.x (controller mode)"
            )
        self.version = version[1:].replace("_", ".")
        return self.version

    def start_controllers(self) -> str:
        from mqctl.client import ControllerClient  # lazy: grpc, protobuf
        from mqctl.localgroup import LocalCluster  # lazy: start-up

        self.cluster = LocalCluster(
            str(self.work / "controllers"),
            size=3,
            remoting=True,
            extra_args=["--heartbeat-timeout", str(LEASE_MS), "--scan-interval", "500"],
        )
        self.cluster.start(wait=False)
        leader = self.cluster.wait_for_leader(60)
        self.client = ControllerClient(self.cluster.addresses, timeout=3.0)
        return leader.name

    @property
    def controller_remoting(self) -> list[str]:
        assert self.cluster is not None
        return [n.remoting_address for n in self.cluster.nodes]

    def start_namesrv(self) -> None:
        conf = self.work / "namesrv.conf"
        conf.write_text(f"listenPort={self.namesrv.rsplit(':', 1)[1]}\nbindAddress=127.0.0.1\n")
        self._start(
            "namesrv",
            [
                self.java.java,
                *JOPTS,
                f"-Duser.home={self.work / 'namesrv-home'}",
                "-cp",
                self.install.classpath,
                "org.apache.rocketmq.namesrv.NamesrvStartup",
                "-c",
                str(conf),
            ],
            env={"ROCKETMQ_HOME": str(self.install.home)},
        )
        self.wait_log("namesrv", r"The Name Server boot success", 90)

    def store(self, broker: str) -> Path:
        return self.work / broker / "store"

    def address(self, broker: str) -> str:
        return f"127.0.0.1:{self.ports[broker][0]}"

    def start_broker(self, broker: str) -> int:
        """Starts `broker`; the length of its log before, to read what it logs from there on."""
        port, ha = self.ports[broker]
        conf = self.work / f"{broker}.conf"
        conf.write_text(
            broker_conf(
                controllers=self.controller_remoting,
                namesrv=self.namesrv,
                port=port,
                ha_port=ha,
                store=self.store(broker),
                cluster=CLUSTER,
                extra={"controllerHeartBeatTimeoutMills": LEASE_MS, "mappedFileSizeCommitLog": 4194304},
            )
        )
        before = len(self.log(broker))
        self._start(
            broker,
            [
                self.java.java,
                *JOPTS,
                f"-Duser.home={self.work / (broker + '-home')}",
                "-cp",
                self.install.classpath,
                "org.apache.rocketmq.broker.BrokerStartup",
                "-c",
                str(conf),
            ],
            env={"ROCKETMQ_HOME": str(self.install.home)},
        )
        return before

    def kill(self, name: str) -> None:
        p = self.procs.pop(name, None)
        if p is not None and p.poll() is None:
            p.send_signal(signal.SIGKILL)
            p.wait(30)

    # -- the controller's view

    def sync_state(self) -> ReplicasInfo | None:
        assert self.client is not None
        try:
            return self.client.get_sync_state_data([BROKER_SET]).replicas_info_table.get(BROKER_SET)
        except Exception:  # a controller election in between: the caller polls again
            return None

    def broker_at(self, address: str) -> str | None:
        return next((b for b in BROKERS if self.address(b) == address), None)

    def wait_sync_state(self, what: str, ok: Callable[[ReplicasInfo], bool], timeout: float) -> ReplicasInfo:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            info = self.sync_state()
            if info is not None and ok(info):
                return info
            time.sleep(0.3)
        raise TimeoutError(f"not within {timeout:.0f} s: {what} (logs: {self.logs})")

    # -- producer

    def start_producer(self) -> Path:
        stop = self.work / "producer.stop"
        self._start("producer", self._client_java("loop", self.namesrv, TOPIC, "demo", str(stop), "600"))
        return stop

    def producer_lines(self) -> list[list[str]]:
        return [ln.split() for ln in self.log("producer").splitlines() if ln.startswith(("ok ", "fail "))]

    def stop_producer(self, stop: Path) -> None:
        stop.touch()
        code = self.procs["producer"].wait(60)  # not within 60 s: close() kills it
        del self.procs["producer"]
        if code != 0:
            raise RuntimeError(f"RocketMQ's producer exited with {code}: {self.last_words('producer')}")

    def close(self) -> None:
        """kill -9 every RocketMQ process (their stores are thrown away), then stop the controller nodes."""
        for name in list(self.procs):
            self.kill(name)
        if self.client is not None:
            self.client.close()
        if self.cluster is not None:
            self.cluster.stop_all()


# ------------------------------------------------------------------------------------------------
# The story


def records(store: Path) -> list[tuple[str, int]]:
    """(KEYS, commitlog offset) of every demo message in a store, read by mqctl.store."""
    from mqctl.store.commitlog import CommitLog  # lazy: start-up

    log = CommitLog(store / "commitlog")
    return [
        (r.properties_dict().get("KEYS", ""), r.offset)
        for r in log.iter_records(strict=False)
        if r.topic == TOPIC
    ]


def log_end(store: Path) -> int:
    """Where the last record of a store's commitlog ends (0 when empty)."""
    from mqctl.store.commitlog import CommitLog  # lazy: start-up

    end = 0
    for r in CommitLog(store / "commitlog").iter_records(strict=False):
        end = r.end
    return end


def _wait(what: str, fn: Callable[[], T | None], timeout: float, interval: float = 0.2) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = fn()
        if v:
            return v
        time.sleep(interval)
    raise TimeoutError(f"not within {timeout:.0f} s: {what}")


def run_rocketmq_demo(rs: RocketMQSet, say: Callable[[str], None], pace: float = 1.0) -> DemoResult:
    """The demo's six steps (mqctl.sim.demo's story) on real RocketMQ processes, not started yet (the
    driver compiled)."""
    # lazy: start-up
    from mqctl.sim.cluster import Report
    from mqctl.sim.demo import VERDICT_FAILED, VERDICT_OK, DemoResult

    def dwell(seconds: float) -> None:
        time.sleep(seconds * pace)

    say(
        "Step 1/6: a three-node controller group (mqctl serve with RocketMQ remoting), RocketMQ's name "
        "server and three RocketMQ brokers of broker set broker-a in controller mode"
    )
    leader = rs.start_controllers()
    rs.on_event(
        f"controller group up: {leader} leads (RocketMQ remoting at {';'.join(rs.controller_remoting)})"
    )
    rs.start_namesrv()
    rs.on_event(f"name server up at {rs.namesrv}")
    for b in BROKERS:
        rs.start_broker(b)
    for b in BROKERS:
        rs.wait_log(b, r"boot success", 120)
    info = rs.wait_sync_state(
        "a master and a SyncStateSet of 3",
        lambda i: i.master_broker_id is not None and len(i.in_sync_replicas) == 3,
        90,
    )
    for r in info.in_sync_replicas:
        name = rs.broker_at(r.broker_address)
        if name is not None:
            rs.ids[name] = r.broker_id
    old = rs.broker_at(info.master_address)
    if old is None:
        raise RuntimeError(f"the controller names a master at {info.master_address}, none of the brokers")
    rs.on_event(
        f"{BROKER_SET}: master {old} (id {info.master_broker_id}) at masterEpoch "
        f"{info.master_epoch}, SyncStateSet {sorted(r.broker_id for r in info.in_sync_replicas)}"
    )

    say(
        "Step 2/6: messages flow through RocketMQ's producer; with allAckInSyncStateSet a send is "
        "acknowledged only once every SyncStateSet member has it"
    )
    stop = rs.start_producer()
    _wait(
        "the producer's first acknowledged sends",
        lambda: sum(ln[0] == "ok" for ln in rs.producer_lines()) >= 20,
        90,
        interval=0.1,
    )
    dwell(10)
    acked_before = sum(ln[0] == "ok" for ln in rs.producer_lines())
    rs.on_event(f"{acked_before} messages acknowledged so far")

    info = rs.sync_state() or info
    old = rs.broker_at(info.master_address) or old
    old_epoch = info.master_epoch
    others = [b for b in BROKERS if b != old]
    marks = {b: len(rs.log(b)) for b in others}
    say(f"Step 3/6: the master {old} (id {rs.ids.get(old)}) is killed (kill -9) while the producer sends")
    kill_ms = time.time() * 1000
    rs.kill(old)

    say(
        f"Step 4/6: the controller elects a new master once {old}'s {LEASE_MS} ms lease ends, and tells it "
        "(NOTIFY_BROKER_ROLE_CHANGED)"
    )
    rx = re.compile(
        r"\[([^\]]+)\] INFO RocketmqBroker - Begin to change to master, brokerName:broker-a, "
        r"replicas:[^,]*, new Epoch:(\d+)"
    )

    def changed() -> tuple[str, re.Match[str]] | None:
        for b in others:
            m = rx.search(rs.log(b), marks[b])
            if m:
                return b, m
        return None

    new, m = _wait("a new master's role change", changed, LEASE_MS / 1000 + 30, interval=0.05)
    port = str(rs.ports[new][0])
    first = _wait(
        "a send acknowledged by the new master",
        lambda: [float(ln[3]) for ln in rs.producer_lines() if ln[0] == "ok" and ln[4] == port],
        30,
        interval=0.1,
    )
    seconds = (min(first) - kill_ms) / 1000
    info = rs.wait_sync_state(
        f"the controller to name {new} master", lambda i: rs.broker_at(i.master_address) == new, 15
    )
    source = (
        "mqctl's push (NOTIFY_BROKER_ROLE_CHANGED)"
        if m.group(1).startswith("AdminBrokerThread_")
        else "its own GetReplicaInfo poll"
    )
    say(
        f"  new master {new} (id {rs.ids.get(new)}) at masterEpoch {info.master_epoch}, told by {source}; "
        f"the first send it acknowledged came {seconds:.1f} s after the kill"
    )
    dwell(8)

    say(
        f"Step 5/6: {old} restarts on its store: a slave of {new}; what it wrote and nobody acknowledged "
        "is truncated"
    )
    old_end = log_end(rs.store(old))
    at = rs.start_broker(old)
    rs.wait_log(
        old,
        rf"Begin to change to slave, brokerName=broker-a, brokerId={rs.ids.get(old)}, "
        rf"newMasterBrokerId={rs.ids.get(new)}",
        120,
        after=at,
    )
    rs.wait_sync_state(
        f"{old} back in the SyncStateSet",
        lambda i: rs.ids.get(old) in [r.broker_id for r in i.in_sync_replicas],
        60,
    )
    t = re.search(r"Truncate slave log to (\d+) success", rs.log(old)[at:])
    truncated = max(0, old_end - int(t.group(1))) if t else 0
    say(
        f"  {old} (id {rs.ids.get(old)}) is a slave of id {rs.ids.get(new)} at masterEpoch "
        f"{info.master_epoch}, back in the SyncStateSet"
        + (
            f"; it truncated {truncated} bytes that nobody acknowledged"
            if truncated
            else "; it had nothing unacknowledged to truncate"
        )
    )
    dwell(8)

    say(
        "Step 6/6: the producer stops; RocketMQ's consumer reads every message back, and the replicas are "
        "compared"
    )
    rs.stop_producer(stop)
    lines = rs.producer_lines()
    acked = {ln[1]: int(ln[2]) for ln in lines if ln[0] == "ok"}
    failed = sum(1 for ln in lines if ln[0] == "fail")
    read = {
        ln.split()[1]: int(ln.split()[2])
        for ln in rs.driver("read", rs.namesrv, TOPIC)
        if ln.startswith("msg ")
    }
    missing = sorted(k for k, o in acked.items() if read.get(k) != o)
    checks = [
        Check(
            "no acknowledged message lost",
            not missing and bool(acked),
            f"{len(acked)} acknowledged, every one read back at its offset by RocketMQ's consumer"
            if not missing
            else f"{len(missing)} of {len(acked)} not read back, e.g. {missing[:3]}",
        )
    ]

    def settled(i: ReplicasInfo) -> bool:
        return (
            rs.broker_at(i.master_address) == new
            and len(i.in_sync_replicas) == 3
            and all(r.alive for r in i.in_sync_replicas)
        )

    try:  # a slave that fell behind under load is back in the SyncStateSet once it has caught up
        final: ReplicasInfo | None = rs.wait_sync_state("a SyncStateSet of 3", settled, 30)
        ok = True
    except TimeoutError:
        final, ok = rs.sync_state(), False
    checks.append(
        Check(
            "one master, every replica in sync",
            ok,
            f"master {new} at masterEpoch {final.master_epoch if final else '?'}, SyncStateSet "
            f"of {len(final.in_sync_replicas) if final else 0} (controller's view)",
        )
    )
    checks.append(
        Check("masterEpoch went up", info.master_epoch > old_epoch, f"{old_epoch} -> {info.master_epoch}")
    )
    want = records(rs.store(new))
    try:
        _wait(
            "every replica's commitlog to equal the master's",
            lambda: all(records(rs.store(b)) == want for b in BROKERS),
            30,
            interval=0.5,
        )
        same = True
    except TimeoutError:
        same = False
    checks.append(
        Check(
            "every replica holds the master's log",
            same,
            f"{len(want)} records, at the same offsets on {', '.join(BROKERS)} (read by mqctl.store)",
        )
    )
    report = Report(
        checks,
        {
            "acknowledged": len(acked),
            "failed sends": failed,
            "kill to first acknowledged send": f"{seconds:.1f} s",
            "lease": f"{LEASE_MS} ms",
            "RocketMQ": rs.version,
        },
    )
    if report.ok:
        verdict = (
            f"{VERDICT_OK}: {len(acked)} acknowledged messages, every one read back by RocketMQ's "
            f"consumer; {len(checks)} checks hold"
        )
    else:
        verdict = f"{VERDICT_FAILED}: {', '.join(c.name for c in checks if not c.ok)}"
    return DemoResult(report, seconds, truncated, verdict)
