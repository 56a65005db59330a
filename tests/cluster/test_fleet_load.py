"""A controller must never lose its leadership because it is busy (issue 17): 1,200 RocketMQ brokers
over remoting (mqctl.sim.fleet: ApplyBrokerId, RegisterBroker, an election per broker set, then a
heartbeat a second each) against a real 3-node group. Through the registration burst and the
heartbeat load the group keeps one leader in one term, every heartbeat is answered without error,
and no broker set gets a second master (no broker is wrongly declared dead)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from mqctl.client import ControllerClient
from mqctl.localgroup import LocalCluster, metadata, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.alone]  # its claim is about its own load

CLUSTER = "FleetLoad"
BROKERS_PER_PROCESS = 600  # 200 broker sets of 3 replicas each
PROCESSES = 2
LEASE_MS = 10_000


class Leaders:
    """Every (term, leader) a node reported, polled every 100 ms."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        self.seen: set[tuple[int, str]] = set()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(0.1):
            for node in self.cluster.nodes:
                try:
                    m = metadata(node.grpc_address, timeout=2)
                except Exception:
                    continue
                if m.get("controller_leader_id"):
                    self.seen.add((int(m.get("term", 0)), str(m["controller_leader_id"])))


def _fleet(cluster: LocalCluster, first: int) -> subprocess.Popen[str]:
    addresses = ",".join(n.remoting_address for n in cluster.nodes)
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mqctl.sim.fleet",
            addresses,
            str(first),
            str(BROKERS_PER_PROCESS),
            CLUSTER,
            str(LEASE_MS),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        bufsize=1,
    )


def _ask(proc: subprocess.Popen[str], line: str) -> dict:  # type: ignore[type-arg]
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(line + "\n")
    proc.stdin.flush()
    return json.loads(proc.stdout.readline())  # type: ignore[no-any-return]


@pytest.mark.timeout(420)
def test_a_busy_leader_keeps_its_leadership(tmp_path: Path) -> None:
    cluster = LocalCluster(
        str(tmp_path),
        size=3,
        remoting=True,
        extra_args=["--heartbeat-timeout", str(LEASE_MS), "--scan-interval", "5000"],
    )
    with cluster:
        cluster.start()
        leaders = Leaders(cluster)
        wait_until(lambda: leaders.seen, 30, what="the first leadership poll")
        fleets = [_fleet(cluster, k * BROKERS_PER_PROCESS) for k in range(PROCESSES)]
        try:
            for proc in fleets:  # one line once every broker of the process is registered
                assert proc.stdout is not None
                line = proc.stdout.readline()
                assert line, "a fleet process stopped while registering its brokers"
                assert json.loads(line)["registered"] == BROKERS_PER_PROCESS
            sets = PROCESSES * BROKERS_PER_PROCESS // 3

            def elected() -> dict | None:  # type: ignore[type-arg]
                with ControllerClient(cluster.addresses, timeout=30) as c:
                    table = c.get_sync_state_data([]).replicas_info_table
                with_master = {n: i for n, i in table.items() if i.master_broker_id is not None}
                return with_master if len(with_master) == sets else None

            before = wait_until(elected, 120, interval=1, what=f"a master in each of the {sets} broker sets")
            start = [_ask(p, "report") for p in fleets]
            time.sleep(15)
            end = [_ask(p, "report") for p in fleets]
            after = elected()
            assert after is not None
        finally:
            for proc in fleets:
                proc.kill()
                proc.wait(10)
            leaders.stop.set()
            leaders.thread.join(10)
        answered = sum(len(v) for r in end for v in r["latencies"].values()) - sum(
            len(v) for r in start for v in r["latencies"].values()
        )
        assert answered >= 0.8 * 15 * PROCESSES * BROKERS_PER_PROCESS, answered
        assert sum(r["errors"] for r in end) == 0
        # one leader, one term, from the first poll to the last: the load never cost the leadership
        assert len(leaders.seen) == 1, sorted(leaders.seen)
        # no broker was declared dead: every set still has the master of its first election
        changed = sorted(n for n in after if after[n].master_epoch != before[n].master_epoch)
        assert changed == [], changed[:10]
