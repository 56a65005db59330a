"""Helpers for tests/interop: RocketMQ's own Java classes (../shared/rocketmq-java, compiled unchanged)
against real `mqctl serve --remoting-port` nodes.

- ``JavaBrokers``: one JVM running java/BrokerDriver.java (compiled by conftest.py), the broker side of
  RocketMQ's controller conversation; commands on its stdin, JSON lines on its stdout, the 1008s its
  replicas receive where they listen collected as events.
- ``mqadmin``: RocketMQ's mqadmin (lib/mqadmin.jar, the seven controller sub-commands), one JVM a call.

(A unique module name, so that test modules import it without clashing with other directories.)
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness import with_remoting_ports

from mqctl.localgroup import LocalCluster, wait_until

REPO = Path(__file__).resolve().parents[2]
# ../shared beside the repository, here and in CI ($MQCTL_SHARED_DIR elsewhere)
SHARED = Path(os.environ.get("MQCTL_SHARED_DIR", REPO.parent / "shared"))
LIB = SHARED / "rocketmq-java" / "lib"
CLASSPATH = f"{LIB}/*"
JAVA_SOURCES = Path(__file__).resolve().parent / "java"
CLUSTER = "cluster-a"
# a short JVM is most of an mqadmin call: no JIT tiers beyond C1, the serial collector, small heap
JVM_OPTS = [
    "-XX:TieredStopAtLevel=1",
    "-XX:+UseSerialGC",
    "-Xss512k",
    "-Xms32m",
    "-Xmx256m",
    "-Drocketmq.namesrv.domain=127.0.0.1",
    "-Dtls.server.mode=disabled",
    "-Dorg.apache.rocketmq.logging.org.slf4j.simpleLogger.defaultLogLevel=error",
]
HEARTBEAT_INTERVAL_MS = 300
HEARTBEAT_TIMEOUT_MS = 1500  # heartbeatTimeoutMills in every 904 the replicas send


# --- mqctl serve nodes with a remoting door ---------------------------------------------------


def remoting_cluster(base_dir: str, size: int) -> tuple[LocalCluster, list[str]]:
    """LocalCluster (its defaults) whose nodes each have a --remoting-port; not started."""
    cluster = LocalCluster(base_dir, size=size)
    return cluster, with_remoting_ports(cluster)


def remoting_address(cluster: LocalCluster, addresses: list[str], node: Any) -> str:
    return addresses[cluster.nodes.index(node)]


# --- the Java broker driver -------------------------------------------------------------------


class JavaBrokers:
    """java/BrokerDriver.java in one JVM: replicas added with ``add``, driven with ``call``."""

    def __init__(
        self, classes: Path, controllers: list[str], log_dir: Path, env: dict[str, str] | None = None
    ) -> None:
        self.log_path = log_dir / f"broker-driver-{time.monotonic_ns()}.err"
        self._err = open(self.log_path, "wb")  # noqa: SIM115 (the child's stderr; closed on stop)
        self.proc = subprocess.Popen(
            [
                "java",
                *JVM_OPTS,
                "-cp",
                f"{classes}{os.pathsep}{CLASSPATH}",
                "BrokerDriver",
                ";".join(controllers),
                CLUSTER,
                str(HEARTBEAT_INTERVAL_MS),
                str(HEARTBEAT_TIMEOUT_MS),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._err,
            text=True,
            env={**os.environ, **(env or {})},
        )
        self._replies: queue.Queue[dict[str, Any]] = queue.Queue()
        self._lock = threading.Lock()
        self.events: list[dict[str, Any]] = []
        self._rid = 0
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        ready = self._next_reply(30)
        assert ready.get("event") == "ready", ready
        self.namesrv: str = ready["namesrv"]
        self.serialize_type: str = ready["serializeType"]

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                doc = json.loads(line)
            except ValueError:
                doc = {"event": "garbage", "line": line}
            if "reply" in doc or doc.get("event") == "ready":
                self._replies.put(doc)
            else:
                with self._lock:
                    self.events.append(doc)
        self._replies.put({"event": "eof"})

    def _next_reply(self, timeout: float) -> dict[str, Any]:
        try:
            return self._replies.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(
                f"the broker driver did not answer in {timeout}s; its log:\n{self.log()}"
            ) from None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def call(self, *words: object, timeout: float = 30.0) -> dict[str, Any]:
        """One command; its JSON answer (fails the test on a Java exception)."""
        self._rid += 1
        rid = str(self._rid)
        assert self.proc.stdin is not None
        self.proc.stdin.write(" ".join([rid, *map(str, words)]) + "\n")
        self.proc.stdin.flush()
        reply = self._next_reply(timeout)
        assert reply.get("reply") == rid, (words, reply, self.log())
        assert "error" not in reply, (words, reply, self.log())
        return reply

    def add(self, broker_name: str) -> str:
        return str(self.call("add", broker_name)["address"])

    def wait_alive(self, broker_name: str, ids: set[int], timeout: float = 10.0) -> None:
        """Until the controller counts these replicas alive (it has their heartbeats): an election
        notifies only the replicas alive when it is decided, in RocketMQ as in mqctl."""

        def alive() -> bool:
            info = self.call("syncstatedata", broker_name)["replicasInfoTable"].get(broker_name) or {}
            replicas = [*info.get("inSyncReplicas", []), *info.get("notInSyncReplicas", [])]
            return ids <= {r["brokerId"] for r in replicas if r["alive"]}

        wait_until(alive, timeout, what=f"replicas {sorted(ids)} of {broker_name} alive")

    def state(self, replica: int) -> dict[str, Any]:
        return self.call("state", replica)

    def notifies(self, replica: int | None = None) -> list[dict[str, Any]]:
        with self._lock:
            return [
                e
                for e in self.events
                if e.get("event") == "notify" and (replica is None or e["replica"] == replica)
            ]

    def other_events(self) -> list[dict[str, Any]]:
        """Anything but a 1008 at a replica's own address (a 1008 over a replica's own connection to
        a controller, a processor error, garbage on stdout)."""
        with self._lock:
            return [e for e in self.events if e.get("event") != "notify"]

    def wait_notify(
        self, replica: int, predicate: Callable[[dict[str, Any]], bool], timeout: float, what: str
    ) -> dict[str, Any]:
        found: dict[str, Any] = wait_until(
            lambda: next((e for e in self.notifies(replica) if predicate(e)), None),
            timeout,
            interval=0.02,
            what=f"{what} (1008s received: {self.notifies()})",
        )
        return found

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write("0 quit\n")
                self.proc.stdin.flush()
                self.proc.wait(5)
            except (OSError, subprocess.TimeoutExpired, AssertionError):
                self.proc.kill()
                self.proc.wait(5)
        self._reader.join(5)
        self._err.close()


# --- mqadmin ----------------------------------------------------------------------------------


def mqadmin(
    *args: str, namesrv: str | None = None, timeout: float = 60.0
) -> subprocess.CompletedProcess[str]:
    """RocketMQ's mqadmin (MQAdmin.java in lib/mqadmin.jar): exit 0, or 1 when the sub-command threw."""
    extra = ["-n", namesrv] if namesrv else []
    return subprocess.run(
        ["java", *JVM_OPTS, "-cp", CLASSPATH, "MQAdmin", *args, *extra],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def replica_identity(broker_name: str, broker_id: int, address: str, alive: bool) -> str:
    """BrokerReplicasInfo.ReplicaIdentity.toString()."""
    return (
        f"ReplicaIdentity{{brokerName='{broker_name}', brokerId={broker_id}, "
        f"brokerAddress='{address}', alive={'true' if alive else 'false'}}}"
    )
