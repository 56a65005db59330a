"""A local controller group: real `mqctl serve` processes on loopback ports, for `mqctl demo`,
`mqctl sim`, the tests and the benchmarks.

Nothing here is a fake: each node is a separate `python -m mqctl serve` process with its own
data directory, talking Raft to the others and gRPC to the caller. What only tests need (heartbeat
threads, write ledgers, gates) is in tests/harness.py.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

_ports_given: set[int] = set()
_ports_lock = threading.Lock()
_ports_random = random.Random()


def _below_ephemeral() -> tuple[int, int] | None:
    """Ports the kernel never hands to an outgoing connection: below its ephemeral range."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as fh:
            first = int(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    if first <= 2048:
        return None
    low, high = max(1024, first - 12_000), first - 1
    # parallel test workers (pytest-xdist) each draw from a share of their own: a port one worker
    # was given but has not bound yet is never another's
    try:
        worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw"))
        workers = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    except ValueError:
        return low, high
    share = (high - low + 1) // workers
    if share < 256:
        return low, high
    start = low + worker % workers * share
    return start, start + share - 1


def free_port() -> int:
    """A port free on 127.0.0.1 now, never one this process was given before, and below the
    kernel's ephemeral range where there is one: a node killed and started again on its port found
    it taken by another test's outgoing connection (parallel test workers), and the kernel may hand
    a just-closed ephemeral port out again at once (a LocalCluster once got one port for a node's
    Raft and gRPC addresses)."""
    window = _below_ephemeral()
    for _ in range(200 if window else 0):
        assert window is not None
        port = _ports_random.randint(*window)
        with _ports_lock:
            if port in _ports_given:
                continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        with _ports_lock:
            if port not in _ports_given:
                _ports_given.add(port)
                return port
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        with _ports_lock:
            if port not in _ports_given:
                _ports_given.add(port)
                return port


def wait_until(
    predicate: Callable[[], Any], timeout: float = 20.0, interval: float = 0.05, what: str = "condition"
) -> Any:
    """Poll until predicate() is truthy; raise TimeoutError naming what was awaited."""
    deadline = time.monotonic() + timeout
    last_exc: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = predicate()
            if value:
                return value
        except Exception as exc:  # the thing may not be up yet
            last_exc = exc
        time.sleep(interval)
    raise TimeoutError(
        f"timed out after {timeout}s waiting for {what}" + (f" (last error: {last_exc})" if last_exc else "")
    )


# --- node logs: "A traceback in a node's log is a bug." ----------------------------------------
#
# Every node started here registers its log. Tests (tests/conftest.py) scan the logs after each test
# and fail it on any traceback or logged exception. `Node.stop` and `Node.kill` also scan, so that what
# a node logged is recorded even when the process that started it (`mqctl demo`, `mqctl sim`) removes its
# directory afterwards: with NODE_LOG_REPORT_ENV set, every problem found, in any process, is appended to
# that file as one JSON line; the test session reads it.

NODE_LOG_REPORT_ENV = "MQCTL_NODE_LOG_REPORT"

# What a Python traceback or a logged exception looks like in a node's log, in the text format and in
# the JSON one (where the traceback is the "exc" field of the record); also the interpreter's own
# reports (an exception in a thread or a __del__, a failed log call, a fatal error at exit).
_PROBLEM = re.compile(
    r"Traceback \(most recent call last\)|^Exception in thread |^Exception ignored in"
    r"|^--- Logging error ---|^Fatal Python error|\"exc\": \""
)
# A line that starts a new log record or a line of serve's own output: the end of an excerpt.
_RECORD_START = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d|\{\"ts\"|mqctl[ :])")
_EXCERPT_MAX_LINES = 60

_log_lock = threading.Lock()
_log_offsets: dict[str, int] = {}  # log path -> bytes already scanned (logs are only appended to)
_watched: set[str] = set()  # the logs of nodes started and not stopped since


@dataclass(frozen=True)
class LogProblem:
    """A traceback or logged exception in a node's log: where, and the lines that show it."""

    log_path: str
    excerpt: str

    def __str__(self) -> str:
        return f"--- {self.log_path} ---\n{self.excerpt.rstrip()}"


def find_log_problems(text: str) -> list[str]:
    """Each traceback or logged exception in `text` as an excerpt: the log record before it (its
    message) and the traceback up to the next log record. Chained tracebacks make one excerpt."""
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        if not _PROBLEM.search(lines[i]):
            i += 1
            continue
        # a traceback's first line follows the log record that logged it (its message): keep it
        before = lines[i - 1] if i > 0 else ""
        start = i
        if not _RECORD_START.match(lines[i]) and _RECORD_START.match(before) and not _PROBLEM.search(before):
            start = i - 1
        end = i + 1
        while end < len(lines) and end - start < _EXCERPT_MAX_LINES and not _RECORD_START.match(lines[end]):
            end += 1
        out.append("\n".join(lines[start:end]))
        i = end
    return out


def watch_log(log_path: str) -> None:
    """Scan `log_path` in scan_watched_logs (from where the last scan ended, or its start)."""
    with _log_lock:
        _log_offsets.setdefault(log_path, 0)
        _watched.add(log_path)


def scan_log(log_path: str) -> list[LogProblem]:
    """The problems logged to `log_path` since the last scan (complete lines only); also appended to
    the file named by $MQCTL_NODE_LOG_REPORT when that is set."""
    with _log_lock:
        offset = _log_offsets.get(log_path, 0)
        try:
            with open(log_path, "rb") as fh:
                fh.seek(offset)
                data = fh.read()
        except OSError:
            return []
        cut = data.rfind(b"\n") + 1
        _log_offsets[log_path] = offset + cut
    problems = [LogProblem(log_path, e) for e in find_log_problems(data[:cut].decode("utf-8", "replace"))]
    report = os.environ.get(NODE_LOG_REPORT_ENV)
    if problems and report:
        lines = "".join(json.dumps({"log_path": p.log_path, "excerpt": p.excerpt}) + "\n" for p in problems)
        fd = os.open(report, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, lines.encode("utf-8"))  # one write per scan: lines of processes do not mix
        finally:
            os.close(fd)
    return problems


def scan_watched_logs() -> list[LogProblem]:
    """scan_log on every log this process watches (the nodes it started and has not stopped)."""
    with _log_lock:
        paths = sorted(_watched)
    return [p for path in paths for p in scan_log(path)]


def read_log_report(path: str, offset: int = 0) -> tuple[list[LogProblem], int]:
    """The problems recorded in a $MQCTL_NODE_LOG_REPORT file from `offset` on, and the next offset."""
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            data = fh.read()
    except OSError:
        return [], offset
    cut = data.rfind(b"\n") + 1
    docs = [json.loads(line) for line in data[:cut].splitlines() if line.strip()]
    return [LogProblem(d["log_path"], d["excerpt"]) for d in docs], offset + cut


def metadata(address: str, timeout: float = 2.0) -> dict[str, Any]:
    """GetMetadata on one node, as a dict (uses the generated stub directly)."""
    import grpc  # lazy: grpc

    # lazy: protobuf
    from mqctl.grpc.convert import message_to_dict
    from mqctl.v1 import controller_pb2, controller_pb2_grpc

    with grpc.insecure_channel(address) as channel:
        stub = controller_pb2_grpc.ControllerStub(channel)
        return message_to_dict(stub.GetMetadata(controller_pb2.GetMetadataRequest(), timeout=timeout))


@dataclass
class Node:
    name: str
    grpc_address: str
    raft_address: str
    data_dir: str
    args: list[str]
    log_path: str
    proc: subprocess.Popen[bytes] | None = None
    remoting_address: str = ""
    # Another release's interpreter in a rolling-upgrade test; safe_path (-P) so that the current
    # directory (a checkout of this release) does not shadow that release's package.
    python: str = sys.executable

    def start(self, env: dict[str, str] | None = None) -> None:
        watch_log(self.log_path)
        log = open(self.log_path, "ab")  # noqa: SIM115 (the child's stdout; closed below)
        self.proc = subprocess.Popen(
            [self.python, "-P", "-m", "mqctl", "serve", *self.args],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "MQCTL_PARENT_PID": str(os.getpid()), **(env or {})},
        )
        log.close()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: no chance to flush or say goodbye."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self._record_log_problems()

    def stop(self, timeout: float = 15.0) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._record_log_problems()
        return self.proc.returncode

    def _record_log_problems(self) -> None:
        """Under a test session ($MQCTL_NODE_LOG_REPORT), record what this node logged before whoever
        started it can remove the log."""
        if os.environ.get(NODE_LOG_REPORT_ENV):
            scan_log(self.log_path)
        with _log_lock:  # scanned for good: start() watches it again
            _watched.discard(self.log_path)

    def log_text(self) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as fh:
                return fh.read()
        except OSError:
            return ""


@dataclass
class LocalCluster:
    """N controller nodes on 127.0.0.1, each with its own data directory under `base_dir`."""

    base_dir: str
    size: int = 3
    extra_args: list[str] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)
    remoting: bool = False  # each node also serves RocketMQ remoting on a port of its own

    def __post_init__(self) -> None:
        os.makedirs(self.base_dir, exist_ok=True)
        rafts = [f"127.0.0.1:{free_port()}" for _ in range(self.size)]
        for i in range(self.size):
            grpc_addr = f"127.0.0.1:{free_port()}"
            data_dir = os.path.join(self.base_dir, f"node{i}")
            peers = ",".join(r for j, r in enumerate(rafts) if j != i)
            args = [
                "--listen",
                grpc_addr,
                "--raft",
                rafts[i],
                "--data-dir",
                data_dir,
                "--heartbeat-timeout",
                "1500",
                "--scan-interval",
                "300",
                *self.extra_args,
            ]
            if peers:
                args += ["--peers", peers]
            remoting = ""
            if self.remoting:
                port = free_port()
                args += ["--remoting-port", str(port)]
                remoting = f"127.0.0.1:{port}"
            self.nodes.append(
                Node(
                    f"node{i}",
                    grpc_addr,
                    rafts[i],
                    data_dir,
                    args,
                    os.path.join(self.base_dir, f"node{i}.log"),
                    remoting_address=remoting,
                )
            )

    @property
    def addresses(self) -> str:
        return ";".join(n.grpc_address for n in self.nodes)

    def start(self, wait: bool = True) -> LocalCluster:
        new = not any(os.path.isdir(n.data_dir) and os.listdir(n.data_dir) for n in self.nodes)
        for node in self.nodes:
            node.start()
        if wait:
            self.wait_for_leader()
            if new:
                self.wait_for_bootstrap()
        return self

    def wait_for_bootstrap(self, timeout: float = 60.0) -> None:
        """A new group (its data directories empty) of this release's nodes writes its starting
        feature level just after its first entries (once every node has published the levels it
        speaks): wait for it, so that a test's "before" state is not one entry short. Nothing to wait
        for when the level is capped or a node runs another release."""
        if any(n.python != sys.executable or "--initial-feature-level" in n.args for n in self.nodes):
            return
        from mqctl.controller.records import MAX_FEATURE_LEVEL  # lazy: start-up

        def settled() -> bool:
            return all(
                metadata(n.grpc_address).get("feature_level") == MAX_FEATURE_LEVEL
                for n in self.nodes
                if n.alive()
            )

        wait_until(settled, timeout, what="the new group's feature level")

    def leader(self, nodes: list[Node] | None = None) -> Node | None:
        for node in nodes or self.nodes:
            if not node.alive():
                continue
            try:
                meta = metadata(node.grpc_address)
            except Exception:
                continue
            if meta.get("is_leader"):
                return node
        return None

    def wait_for_leader(self, timeout: float = 60.0, exclude: Node | None = None) -> Node:
        candidates = [n for n in self.nodes if n is not exclude]

        def ready() -> Node | None:
            node = self.leader(candidates)
            if node is None:
                return None
            meta = metadata(node.grpc_address)
            # the leader must know its own gRPC address and the group id (its first commits), and
            # every other running node must have applied them too
            if not (meta.get("controller_leader_address") and meta.get("group_id")):
                return None
            for other in candidates:
                if other is node or not other.alive():
                    continue
                seen = metadata(other.grpc_address)
                if seen.get("controller_leader_address") != meta["controller_leader_address"]:
                    return None
            return node

        leader: Node = wait_until(ready, timeout, what="a controller leader")
        return leader

    def wait_for_members_speaking(self, level: int, timeout: float = 60.0) -> None:
        """Until every member has published that it speaks feature `level`: a node publishes it
        through the log soon after it starts (later on a loaded machine), and until then `mqctl
        quorum feature-level` refuses."""

        def published() -> bool:
            leader = self.wait_for_leader(timeout)
            peers = metadata(leader.grpc_address).get("peers") or []
            return len(peers) == len(self.nodes) and all(
                int(p.get("max_feature_level", 0)) >= level for p in peers
            )

        wait_until(published, timeout, what=f"every node to publish feature level {level}")

    def raise_feature_level(self, client: Any, level: int, timeout: float = 60.0) -> None:
        """`mqctl quorum feature-level LEVEL` once every member speaks it."""
        self.wait_for_members_speaking(level, timeout)
        client.change_quorum("feature-level", feature_level=level)

    def hashes(self) -> dict[str, str]:
        out = {}
        for node in self.nodes:
            if node.alive():
                out[node.name] = str(metadata(node.grpc_address).get("state_hash", ""))
        return out

    def wait_for_same_hash(self, timeout: float = 60.0) -> str:
        """The state hash once every node has the same. Writes under way keep the nodes a few entries
        apart at any instant: hold the writers first (``Gate``)."""
        seen: dict[str, str] = {}

        def same() -> str | None:
            seen.clear()
            seen.update(self.hashes())
            hashes = set(seen.values())
            return hashes.pop() if len(hashes) == 1 else None

        try:
            result: str = wait_until(same, timeout, what="all nodes to reach the same state hash")
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}; the last hashes seen: {seen or 'none'}") from None
        return result

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def stop_all(self, timeout: float = 10.0) -> None:
        """The end of a demo or a simulation: stop every node, SIGKILL one whose stop fails."""
        for node in self.nodes:
            try:
                node.stop(timeout)
            except Exception:  # SIGTERM did not work: SIGKILL
                node.kill()

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        for node in self.nodes:
            node.kill() if exc[0] is not None else node.stop()
