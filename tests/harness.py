"""What only tests (and the benchmarks that borrow them) need around a local controller group
(mqctl.localgroup): broker heartbeats in a thread, a gate for writers, an sd_notify socket, the
ledger of writes under faults, a Spark standalone cluster.

Imported as ``harness`` (tests/ is on sys.path: pytest's rootdir conftest, and bench/ inserts it).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from typer.testing import CliRunner

from mqctl.errors import MqctlError
from mqctl.localgroup import free_port, wait_until

if TYPE_CHECKING:
    from mqctl.client import ControllerClient
    from mqctl.localgroup import LocalCluster


TEST_CLUSTER = "cluster-a"


class Beater:
    """Sends heartbeats for some brokers every `period` seconds, as a live broker would, each with a
    lease of `lease_ms` (a longer one keeps a test's brokers alive when a loaded machine delays beats)."""

    def __init__(
        self,
        client: ControllerClient,
        period: float = 0.2,
        cluster_name: str = TEST_CLUSTER,
        lease_ms: int = 1500,
    ) -> None:
        self.client = client
        self.lease_ms = lease_ms
        self.cluster_name = cluster_name
        self.period = period
        self.brokers: dict[tuple[str, int], dict[str, Any]] = {}
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def beat(self, broker_name: str, broker_id: int, address: str, **fields: object) -> None:
        with self._lock:
            self.brokers[(broker_name, broker_id)] = dict(address=address, **fields)
        self._send(broker_name, broker_id)

    def silence(self, broker_name: str, broker_id: int) -> None:
        with self._lock:
            self.brokers.pop((broker_name, broker_id), None)

    def _send(self, broker_name: str, broker_id: int) -> None:
        with self._lock:
            f = dict(self.brokers.get((broker_name, broker_id)) or {})
        if not f:
            return
        address = f.pop("address")
        try:
            self.client.heartbeat(
                self.cluster_name, address, broker_name, broker_id, heartbeat_timeout_mills=self.lease_ms, **f
            )
        except Exception:
            pass  # a controller failover in progress; the next beat retries

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            with self._lock:
                keys = list(self.brokers)
            for name, bid in keys:
                self._send(name, bid)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


def register_broker(
    client: ControllerClient, broker_name: str, address: str, cluster_name: str = TEST_CLUSTER, **kw: Any
) -> tuple[int, int]:
    """The broker's registration sequence (seed 000): next id, apply, register. -> (id, brokerEpoch)."""
    nid = client.get_next_broker_id(cluster_name, broker_name).next_broker_id
    client.apply_broker_id(cluster_name, broker_name, nid, f"{address};1700000000000")
    reg = client.register_broker(cluster_name, broker_name, nid, address, **kw)
    return nid, reg.broker_epoch


class Gate:
    """Holds a writer thread between two writes: state hashes are compared with no write under way
    (with writes going on, the nodes are a few entries apart at any instant). The writer calls
    ``pass_through()`` before each write; ``with gate.held(): ...`` holds it meanwhile."""

    def __init__(self) -> None:
        self._open = threading.Event()
        self._open.set()
        self._waiting = threading.Event()

    def pass_through(self) -> None:
        if not self._open.is_set():
            self._waiting.set()
            self._open.wait()
            self._waiting.clear()

    @contextlib.contextmanager
    def held(self, timeout: float = 60.0) -> Iterator[None]:
        self._open.clear()
        self._waiting.wait(timeout)  # the write under way, if any, has ended
        try:
            yield
        finally:
            self._open.set()


class NotifySocket:
    """What systemd does for a unit of Type=notify: bind a datagram socket ($NOTIFY_SOCKET) and read what
    the service sends (tests/deploy)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.messages: list[dict[str, str]] = []

    def read(self, timeout: float) -> list[dict[str, str]]:
        """Every datagram that arrives within ``timeout``, each as its KEY=VALUE lines."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(4096)
            except TimeoutError:
                break
            self.messages.append(dict(line.split("=", 1) for line in data.decode().splitlines() if line))
        return self.messages

    def wait_for(self, key: str, value: str, timeout: float) -> dict[str, str]:
        deadline = time.monotonic() + timeout
        while True:
            for msg in self.messages:
                if msg.get(key) == value:
                    return msg
            if time.monotonic() > deadline:
                raise AssertionError(f"no {key}={value} within {timeout} s; got {self.messages}")
            self.read(0.2)

    def close(self) -> None:
        self.sock.close()


def with_default_sigint(argv: list[str]) -> list[str]:
    """``argv`` run with SIGINT at its default, also when this process ignores it (a background job,
    nohup, CI: an ignored signal stays ignored across exec) and a test sends SIGINT. A small exec
    wrapper rather than ``preexec_fn``: Python code between fork and exec is unsafe in a process
    with threads (grpc's fork handlers then run in the child and can leave it stuck)."""
    return [
        sys.executable,
        "-c",
        "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
        "os.execvp(sys.argv[1], sys.argv[1:])",
        *argv,
    ]


# --- writes under faults: what the controller group acknowledged --------------------------------


@dataclass
class Ledger:
    """What a controller group acknowledged (code 0) to the writers of a fault test, and how the other
    calls ended; ``check`` finds an acknowledged write that the final state lost."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    applied: list[tuple[str, int]] = field(default_factory=list)  # (name, id)
    registered: list[tuple[str, int, int]] = field(default_factory=list)  # (name, id, brokerEpoch)
    elected: list[tuple[str, int, int]] = field(default_factory=list)  # (name, masterEpoch, id)
    altered: list[tuple[str, int, tuple[int, ...]]] = field(default_factory=list)  # (name, ssEpoch, set)
    refused: Counter[int] = field(default_factory=Counter)  # code -> calls
    unexpected: list[str] = field(default_factory=list)  # client or test bugs
    acks: int = 0

    def attempt(self, op: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``op(*args, **kwargs)``, or None when it was not acknowledged (counted by code)."""
        from mqctl.errors import ControllerError

        try:
            return op(*args, **kwargs)
        except ControllerError as exc:  # refused, or the outcome is unknown
            with self.lock:
                self.refused[int(exc.code)] += 1
        except Exception as exc:  # anything else is a bug in the client or the test
            with self.lock:
                self.unexpected.append(repr(exc))
        return None

    def ack(self, kind: list[Any], item: tuple[Any, ...]) -> None:
        with self.lock:
            kind.append(item)
            self.acks += 1

    def count(self) -> int:
        with self.lock:
            return self.acks

    def names(self) -> list[str]:
        with self.lock:
            return sorted({name for name, _ in self.applied})

    def check(self, table: dict[str, Any]) -> None:
        """Every acknowledged write is in ``table`` (GetSyncStateData's replicasInfoTable of the final
        state); no (brokerName, masterEpoch) has two masters among the acknowledged elections and the
        final state. AssertionError naming the first ones lost."""

        def replicas(name: str) -> dict[int, int]:
            info = table[name]
            return {r.broker_id: r.broker_epoch for r in (*info.in_sync_replicas, *info.not_in_sync_replicas)}

        lost: list[Any] = [a for a in self.applied if a[0] not in table or a[1] not in replicas(a[0])]
        assert not lost, f"acknowledged ApplyBrokerId lost: {lost[:10]}"
        lost = [r for r in self.registered if replicas(r[0]).get(r[1], -1) < r[2]]
        assert not lost, f"acknowledged RegisterBroker lost: {lost[:10]}"
        lost = [e for e in self.elected if table[e[0]].master_epoch < e[1]]
        assert not lost, f"acknowledged ElectMaster lost (masterEpoch went back): {lost[:10]}"
        lost = [a for a in self.altered if table[a[0]].sync_state_set_epoch < a[1]]
        assert not lost, f"acknowledged AlterSyncStateSet lost (syncStateSetEpoch went back): {lost[:10]}"
        masters: dict[tuple[str, int], set[int]] = {}
        for name, epoch, master in self.elected:
            masters.setdefault((name, epoch), set()).add(master)
        for name, info in table.items():
            if info.master_broker_id is not None:
                masters.setdefault((name, info.master_epoch), set()).add(info.master_broker_id)
        twice = {k: v for k, v in masters.items() if len(v) > 1}
        assert not twice, f"two masters for one (brokerName, masterEpoch): {twice}"


Step = Callable[["ControllerClient", Ledger, int, int], Any]


def register_set(
    client: ControllerClient, ledger: Ledger, writer: int, n: int, cluster_name: str = TEST_CLUSTER
) -> bool:
    """A step of Writers: a broker set of two brokers and its master; False at the first call not
    acknowledged. (``functools.partial(register_set, cluster_name=...)`` for another cluster.)"""
    name = f"w{writer}-set{n}"
    for bid in (1, 2):
        address = f"127.0.0.1:{20000 + bid}"
        if ledger.attempt(client.apply_broker_id, cluster_name, name, bid, f"{address};{writer}") is None:
            return False
        ledger.ack(ledger.applied, (name, bid))
        reg = ledger.attempt(client.register_broker, cluster_name, name, bid, address)
        if reg is None:
            return False
        ledger.ack(ledger.registered, (name, bid, reg.broker_epoch))
    elected = ledger.attempt(client.elect_master, cluster_name, name, 1)
    if elected is None:
        return False
    ledger.ack(ledger.elected, (name, elected.master_epoch or 0, elected.master_broker_id or 0))
    return True


class Writers:
    """``count`` threads, each with its own client, calling ``step(client, ledger, writer, n)`` for
    n = 0, 1, ... until the block ends (a step that returns False is followed by a short pause).
    ``pause()`` holds them, with no write in flight, while its block runs (the nodes' state hashes can
    then agree)."""

    def __init__(
        self,
        addresses: str,
        step: Step,
        *,
        count: int = 3,
        timeout: float = 10.0,
        ledger: Ledger | None = None,
    ) -> None:
        self.addresses = addresses
        self.step = step
        self.timeout = timeout
        self.ledger = ledger if ledger is not None else Ledger()
        self.stop = threading.Event()
        self._paused = threading.Event()
        self._lock = threading.Lock()
        self._busy = 0
        self.threads = [threading.Thread(target=self._run, args=(w,), daemon=True) for w in range(count)]

    def __enter__(self) -> Writers:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(60)
        assert not any(t.is_alive() for t in self.threads), "a writer did not stop"

    @contextlib.contextmanager
    def pause(self) -> Iterator[None]:
        self._paused.set()
        try:
            wait_until(lambda: self._busy == 0, 30, what="the writers to pause")
            yield
        finally:
            self._paused.clear()

    def _run(self, writer: int) -> None:
        from mqctl.client import ControllerClient

        with ControllerClient(self.addresses, timeout=self.timeout) as client:
            n = 0
            while not self.stop.is_set():
                with self._lock:
                    idle = self._paused.is_set()
                    if not idle:
                        self._busy += 1
                if idle:
                    time.sleep(0.02)
                    continue
                try:
                    done = self.step(client, self.ledger, writer, n)
                finally:
                    with self._lock:
                        self._busy -= 1
                n += 1
                if done is False:
                    time.sleep(0.05)


@contextlib.contextmanager
def spark_standalone(
    root: Path, *, cores: int = 2, memory: str = "1g", timeout: float = 180.0
) -> Iterator[tuple[str, int]]:
    """A Spark standalone master and one worker from the installed pyspark (`spark-class`), bound to
    127.0.0.1 on free ports, logs and work directory under `root`: yields (master URL, the worker's
    pid: its executors are its children). Both daemons are stopped by pid."""
    import pyspark

    spark_class = Path(pyspark.__file__).parent / "bin" / "spark-class"
    env = {
        **os.environ,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_HOME": str(spark_class.parent.parent),
        "SPARK_LOG_DIR": str(root),
        "SPARK_WORKER_DIR": str(root / "work"),
    }
    procs: list[subprocess.Popen[bytes]] = []
    mlog, wlog = root / "master.log", root / "worker.log"

    def wait_for(path: Path, text: str, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not (path.exists() and text in path.read_text(errors="replace")):
            if time.monotonic() > deadline:
                tails = "\n".join(
                    f"--- {p}\n{p.read_text(errors='replace')[-3000:]}" for p in (mlog, wlog) if p.exists()
                )
                raise RuntimeError(f"{what} within {timeout:.0f} s\n{tails}")
            time.sleep(0.5)

    try:
        with open(mlog, "wb") as out:
            procs.append(
                subprocess.Popen(
                    [
                        str(spark_class),
                        "org.apache.spark.deploy.master.Master",
                        "--host",
                        "127.0.0.1",
                        "--port",
                        str(free_port()),
                        "--webui-port",
                        str(free_port()),
                    ],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,
                )
            )
        wait_for(mlog, "I have been elected leader", "the master did not start")
        # the port the master bound: another process may have taken the free one meanwhile (Spark then
        # binds the next port)
        text = mlog.read_text(errors="replace")
        m = re.search(r"Starting Spark master at (spark://127\.0\.0\.1:\d+)", text)
        if m is None:
            raise RuntimeError(f"no master URL in {mlog}")
        with open(wlog, "wb") as out:
            procs.append(
                subprocess.Popen(
                    [
                        str(spark_class),
                        "org.apache.spark.deploy.worker.Worker",
                        m.group(1),
                        "--host",
                        "127.0.0.1",
                        "--port",
                        str(free_port()),
                        "--webui-port",
                        str(free_port()),
                        "--cores",
                        str(cores),
                        "--memory",
                        memory,
                        "--work-dir",
                        str(root / "work"),
                    ],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,
                )
            )
        wait_for(wlog, "Successfully registered with master", "the worker did not register")
        yield m.group(1), procs[1].pid
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in reversed(procs):
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=30)


# --- mqctl serve nodes with a remoting port ----------------------------------------------------


def with_remoting_ports(cluster: LocalCluster) -> list[str]:
    """Give each node of ``cluster`` its own --remoting-port; return the remoting addresses."""
    addresses = []
    for node in cluster.nodes:
        port = free_port()
        node.args += ["--remoting-port", str(port)]
        addresses.append(f"127.0.0.1:{port}")
    return addresses


def start_remoting(cluster: LocalCluster, addresses: list[str], env: dict[str, str] | None = None) -> None:
    """Start every node, wait for a leader and for every remoting port to accept connections."""
    for node in cluster.nodes:
        node.start(env)
    cluster.wait_for_leader()
    for address in addresses:
        wait_until(lambda a=address: listening(a), 20, what=f"remoting port {address}")


def listening(address: str) -> bool:
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=1):
            return True
    except OSError:
        return False


# --- stand-ins for a peer's remoting port ---------------------------------------------------------


class StandInServer:
    """A listener on 127.0.0.1 that stands in for a RocketMQ peer's remoting port (a broker's admin or
    listening port): accepts connections in a thread and serves each in a thread of its own with
    ``_serve``, which a subclass writes. Subclasses set what ``_serve`` uses before calling
    ``super().__init__()``: connections are accepted from then on."""

    def __init__(self) -> None:
        self._server = socket.create_server(("127.0.0.1", 0), backlog=16)
        self._server.settimeout(0.2)
        self.address = f"127.0.0.1:{self._server.getsockname()[1]}"
        self.connections = 0  # accepted: a test that must not connect sees none
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._server.accept()
            except OSError:
                continue
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self._stop.set()
        self._server.close()
        self._thread.join(5)


# --- processes a command started (from /proc) -------------------------------------------------------


def _children_of() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                ppid = int((p / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(p.name))
    return kids


def children(pid: int) -> set[int]:
    """Processes whose parent is ``pid``."""
    return set(_children_of().get(pid, []))


def descendants(pid: int) -> set[int]:
    """Processes below ``pid``: its children, theirs, and so on."""
    kids = _children_of()
    out: set[int] = set()
    todo = [pid]
    while todo:
        for k in kids.get(todo.pop(), []):
            if k not in out:
                out.add(k)
                todo.append(k)
    return out


def still_alive(pids: set[int], timeout: float = 15.0) -> set[int]:
    """The pids still alive (not zombies) after up to `timeout` s: empty when all are gone."""
    deadline = time.monotonic() + timeout
    while True:
        alive = set()
        for pid in pids:
            try:
                if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                    alive.add(pid)
            except OSError:
                pass
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.1)


# --- the CLI in-process ---------------------------------------------------------------------------


@dataclass
class Run:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def run_cli(*args: str, input: str | None = None) -> Run:
    """`mqctl ...` in-process the way mqctl.cli.main runs it: an MqctlError is one stderr line
    `mqctl: error: ...` after what the command wrote there, and its exit code; any other exception fails
    the test (a traceback)."""
    from mqctl.cli import app

    res = CliRunner().invoke(app, list(args), input=input)
    exc = res.exception
    if isinstance(exc, MqctlError):
        return Run(exc.exit_code, res.stdout, res.stderr + f"mqctl: error: {exc}\n")
    if exc is not None and not isinstance(exc, SystemExit):
        raise exc
    return Run(res.exit_code, res.stdout, res.stderr)


# --- files unchanged --------------------------------------------------------------------------------


def tree_hash(root: Path, *, metadata: bool = True) -> str:
    """sha256 over every path under ``root`` (directories too) and every file's content; with
    ``metadata`` also each one's mode, size and mtime: equal before and after proves a command wrote
    nothing there. Without it, two trees written apart hash the same when they hold the same files."""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames) + [d + "/" for d in dirnames]:
            p = Path(dirpath) / name.rstrip("/")
            h.update(f"{p.relative_to(root)}|{name.endswith('/')}".encode())
            if metadata:
                st = p.lstat()
                h.update(f"|{st.st_mode:o}|{st.st_size if p.is_file() else 0}|{st.st_mtime_ns}".encode())
            if p.is_file():
                h.update(b"|" + p.read_bytes())
            h.update(b"\n")
    return h.hexdigest()


@contextlib.contextmanager
def unchanged(root: Path) -> Iterator[None]:
    """``with unchanged(path): ...`` fails when the block wrote anything under path."""
    before = tree_hash(root)
    yield
    assert tree_hash(root) == before, f"the command changed {root}"
