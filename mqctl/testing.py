"""Real `mqctl serve` processes on loopback ports, for tests, benchmarks and simulations.

Nothing here is a fake: each node is a separate `python -m mqctl serve` process with its own
data directory, talking Raft to the others and gRPC to the caller.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mqctl.client import ControllerClient


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(predicate: Callable[[], Any], timeout: float = 20.0, interval: float = 0.05,
               what: str = "condition") -> Any:
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
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}"
                       + (f" (last error: {last_exc})" if last_exc else ""))


def metadata(address: str, timeout: float = 2.0) -> dict[str, Any]:
    """GetMetadata on one node, as a dict (uses the generated stub directly)."""
    import grpc

    from mqctl.controller.convert import message_to_dict
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

    def start(self, env: dict[str, str] | None = None) -> None:
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "mqctl", "serve", *self.args],
                                     stdout=log, stderr=subprocess.STDOUT,
                                     env={**os.environ, "MQCTL_PARENT_PID": str(os.getpid()), **(env or {})})
        log.close()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: no chance to flush or say goodbye."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

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
        return self.proc.returncode

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

    def __post_init__(self) -> None:
        os.makedirs(self.base_dir, exist_ok=True)
        rafts = [f"127.0.0.1:{free_port()}" for _ in range(self.size)]
        for i in range(self.size):
            grpc_addr = f"127.0.0.1:{free_port()}"
            data_dir = os.path.join(self.base_dir, f"node{i}")
            peers = ",".join(r for j, r in enumerate(rafts) if j != i)
            args = ["--listen", grpc_addr, "--raft", rafts[i], "--data-dir", data_dir,
                    "--heartbeat-timeout", "1500", "--scan-interval", "300", *self.extra_args]
            if peers:
                args += ["--peers", peers]
            self.nodes.append(Node(f"node{i}", grpc_addr, rafts[i], data_dir, args,
                                   os.path.join(self.base_dir, f"node{i}.log")))

    @property
    def addresses(self) -> str:
        return ";".join(n.grpc_address for n in self.nodes)

    def start(self, wait: bool = True) -> LocalCluster:
        for node in self.nodes:
            node.start()
        if wait:
            self.wait_for_leader()
        return self

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

    def hashes(self) -> dict[str, str]:
        out = {}
        for node in self.nodes:
            if node.alive():
                out[node.name] = str(metadata(node.grpc_address).get("state_hash", ""))
        return out

    def wait_for_same_hash(self, timeout: float = 60.0) -> str:
        def same() -> str | None:
            hashes = set(self.hashes().values())
            return hashes.pop() if len(hashes) == 1 else None

        result: str = wait_until(same, timeout, what="all nodes to reach the same state hash")
        return result

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        for node in self.nodes:
            node.kill() if exc[0] is not None else node.stop()


TEST_CLUSTER = "cluster-a"


class Beater:
    """Sends heartbeats for some brokers every `period` seconds, as a live broker would."""

    def __init__(self, client: ControllerClient, period: float = 0.2,
                 cluster_name: str = TEST_CLUSTER) -> None:
        self.client = client
        self.cluster_name = cluster_name
        self.period = period
        self.brokers: dict[tuple[str, int], dict] = {}
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
            self.client.heartbeat(self.cluster_name, address, broker_name, broker_id,
                                  heartbeat_timeout_mills=1500, **f)
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


def register_broker(client: ControllerClient, broker_name: str, address: str,
                    cluster_name: str = TEST_CLUSTER, **kw: Any) -> tuple[int, int]:
    """The broker's registration sequence (seed 000): next id, apply, register. -> (id, brokerEpoch)."""
    nid = client.get_next_broker_id(cluster_name, broker_name).next_broker_id
    client.apply_broker_id(cluster_name, broker_name, nid, f"{address};1700000000000")
    reg = client.register_broker(cluster_name, broker_name, nid, address, **kw)
    return nid, reg.broker_epoch
