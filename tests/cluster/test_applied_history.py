"""Every node applied the same history: several hundred brokers heartbeating, a write mix and
kill -9 of the controller leader on a real 3-node group (issue 20).

A load process (this file run as a script, so that its threads do not slow the test's polling)
registers broker sets of two replicas (ApplyBrokerId, RegisterBroker, a heartbeat, ElectMaster,
AlterSyncStateSet), keeps registering new ones, and heartbeats every registered broker once a
second. Meanwhile the leader is killed with SIGKILL and restarted, cycle after cycle. Then the
load stops, the nodes reach the same applied index and state hash, and are stopped cleanly; each
node's journal is read offline from its data directory (mqctl.raft.journal.read_entries) and every
index up to that applied index must hold the same (term, command bytes) on every node. Any
"truncating already-applied log entries" line (pysyncobj's CRITICAL when a follower deletes
entries it applied) or traceback in a node's log fails the test.

MQCTL_HISTORY_SETS (default 150 sets, 300 brokers) and MQCTL_HISTORY_KILLS (default 5) scale it;
about 20 s on 2 shared cores.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from mqctl.localgroup import LocalCluster, Node, find_log_problems, metadata, wait_until
from mqctl.raft.journal import read_entries

pytestmark = pytest.mark.slow

CLUSTER = "history-cluster"
SETS = int(os.environ.get("MQCTL_HISTORY_SETS", "150"))
KILLS = int(os.environ.get("MQCTL_HISTORY_KILLS", "5"))
HEARTBEAT_TIMEOUT_MS = 60_000  # no broker expires during the test: writes come from the load only
HEARTBEAT_THREADS = 4
REGISTER_THREADS = 4


# --- the load process ---------------------------------------------------------------------------


class Load:
    """Broker sets registered and heartbeating, counted in `stats` (acknowledged writes by method,
    heartbeats, failures)."""

    def __init__(self, addresses: str, sets: int) -> None:
        from mqctl.client import ControllerClient

        self.client = ControllerClient(addresses, timeout=10)
        self.sets = sets
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.stats: Counter[str] = Counter()
        self.brokers: list[tuple[str, int, str, int]] = []  # (name, id, address, brokerEpoch)
        self.next_set = 0

    def run(self) -> None:
        threads = [threading.Thread(target=self._register, daemon=True) for _ in range(REGISTER_THREADS)]
        threads += [
            threading.Thread(target=self._heartbeat, args=(i,), daemon=True) for i in range(HEARTBEAT_THREADS)
        ]
        for t in threads:
            t.start()
        for line in sys.stdin:  # "stats" -> one JSON line; the end of input stops the load
            self._report()
            del line
        self.stop.set()
        for t in threads:
            t.join(30)
        self._report()
        self.client.close()

    def _report(self) -> None:
        with self.lock:
            doc = dict(self.stats, brokers=len(self.brokers))
        print(json.dumps(doc), flush=True)

    def _count(self, what: str) -> None:
        with self.lock:
            self.stats[what] += 1

    def _attempt(self, what: str, op: Any, *args: Any, **kwargs: Any) -> Any:
        from mqctl.errors import ControllerError

        try:
            answer = op(*args, **kwargs)
        except ControllerError:
            self._count("refused")
            return None
        self._count(what)
        self._count("acks")
        return answer

    def _register(self) -> None:
        """The registration sequence of two-replica broker sets: the first `sets` quickly, then
        one more now and then (the write mix goes on through the leader kills)."""
        c = self.client
        while not self.stop.is_set():
            with self.lock:
                s = self.next_set
                self.next_set += 1
            if s >= self.sets:
                self.stop.wait(1.0)
            name = f"hb-{s}"
            epochs = {}
            for bid in (1, 2):
                addr = f"127.0.0.1:{20000 + 2 * s + bid}"
                applied = self._attempt("ApplyBrokerId", c.apply_broker_id, CLUSTER, name, bid, f"{addr};{s}")
                if applied is None:
                    continue
                reg = self._attempt(
                    "RegisterBroker",
                    c.register_broker,
                    CLUSTER,
                    name,
                    bid,
                    addr,
                    epoch=0,
                    max_offset=0,
                    heartbeat_timeout_mills=HEARTBEAT_TIMEOUT_MS,
                )
                if reg is None:
                    continue
                epochs[bid] = reg.broker_epoch
                self._beat(name, bid, addr, reg.broker_epoch)
                with self.lock:
                    self.brokers.append((name, bid, addr, reg.broker_epoch))
            if 1 not in epochs:
                continue
            elect = self._attempt("ElectMaster", c.elect_master, CLUSTER, name, 1)
            if elect is not None and elect.master_broker_id == 1 and 2 in epochs:
                self._attempt(
                    "AlterSyncStateSet",
                    c.alter_sync_state_set,
                    name,
                    1,
                    elect.master_epoch,
                    [1, 2],
                    elect.sync_state_set_epoch,
                )

    def _beat(self, name: str, bid: int, addr: str, epoch: int) -> None:
        try:
            self.client.heartbeat(
                CLUSTER,
                addr,
                name,
                bid,
                epoch=0,
                max_offset=0,
                heartbeat_timeout_mills=HEARTBEAT_TIMEOUT_MS,
                broker_epoch=epoch,
            )
            self._count("heartbeats")
        except Exception:
            self._count("heartbeats_failed")

    def _heartbeat(self, part: int) -> None:
        """Every registered broker once a second (this thread's share of them)."""
        while not self.stop.is_set():
            started = time.monotonic()
            with self.lock:
                mine = self.brokers[part::HEARTBEAT_THREADS]
            for name, bid, addr, epoch in mine:
                if self.stop.is_set():
                    return
                self._beat(name, bid, addr, epoch)
            self.stop.wait(max(0.0, 1.0 - (time.monotonic() - started)))


class LoadProcess:
    def __init__(self, addresses: str, sets: int, log: Path) -> None:
        self.args = [sys.executable, __file__, addresses, str(sets)]
        self.log = log
        self.proc: subprocess.Popen[str] | None = None

    def __enter__(self) -> LoadProcess:
        with open(self.log, "ab") as err:
            self.proc = subprocess.Popen(
                self.args, text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err
            )
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stats(self) -> dict[str, int]:
        assert self.proc is not None and self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("stats\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, f"the load process ended (exit {self.proc.poll()}): {self.log.read_text()[-2000:]}"
        doc: dict[str, int] = json.loads(line)
        return doc

    def finish(self) -> dict[str, int]:
        """Stop the load; its last counts."""
        assert self.proc is not None and self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        line = self.proc.stdout.readline()
        self.proc.wait(60)
        assert self.proc.returncode == 0 and line, self.log.read_text()[-2000:]
        doc: dict[str, int] = json.loads(line)
        return doc


# --- the test ------------------------------------------------------------------------------------


def _applied(nodes: list[Node]) -> int | None:
    """The applied index every node reports when all report the same one and the same state hash."""
    views = {
        (int(m.get("last_applied", 0)), str(m.get("state_hash", "")))
        for m in (metadata(n.grpc_address) for n in nodes)
    }
    if len(views) != 1:
        return None
    applied, _ = views.pop()
    return applied


def _compare(histories: dict[str, list[tuple[bytes, int, int]]], applied: int) -> tuple[int, int]:
    """Every index up to `applied` that two nodes' journals both hold has the same term and command
    on both; every journal holds every index from its first to `applied`. -> (first index compared,
    entries compared)."""
    by_index: dict[str, dict[int, tuple[int, bytes]]] = {}
    for name, entries in histories.items():
        assert entries, f"{name}: empty journal"
        indexes = [e[1] for e in entries]
        assert indexes == list(range(indexes[0], indexes[0] + len(indexes))), f"{name}: a gap in the journal"
        assert indexes[-1] >= applied, f"{name}: the journal ends at {indexes[-1]}, applied {applied}"
        by_index[name] = {idx: (term, command) for command, idx, term in entries if idx <= applied}
    first = max(min(ix) for ix in by_index.values())
    names = sorted(by_index)
    reference = by_index[names[0]]
    for name in names[1:]:
        for idx in range(first, applied + 1):
            mine, theirs = by_index[name][idx], reference[idx]
            assert mine == theirs, (
                f"index {idx}: {name} holds term {mine[0]} {mine[1][:80]!r}, "
                f"{names[0]} term {theirs[0]} {theirs[1][:80]!r}"
            )
    return first, applied - first + 1


@pytest.mark.timeout(300)
def test_applied_history_is_the_same_on_every_node(tmp_path: Path) -> None:
    started = time.monotonic()
    cluster = LocalCluster(str(tmp_path), size=3)
    # no snapshot on time (the default is every 60 s): the journals keep the whole history, unless
    # more than logCompactionMinEntries (5000) pile up; then the entries they still share are compared
    env = {"MQCTL_COMPACTION_INTERVAL": "3600"}
    with cluster:
        for node in cluster.nodes:
            node.start(env)
        cluster.wait_for_leader(60)
        brokers = 2 * SETS
        with LoadProcess(cluster.addresses, SETS, tmp_path / "load.log") as load:
            wait_until(
                lambda: (
                    (stats := load.stats())["brokers"] >= brokers
                    and stats.get("heartbeats", 0) >= 2 * brokers
                ),
                90,
                interval=0.5,
                what=f"{brokers} brokers registered and heartbeating",
            )
            for cycle in range(KILLS):
                leader = cluster.wait_for_leader(60)
                leader.kill()
                cluster.wait_for_leader(60, exclude=leader)
                acks = load.stats()["acks"]
                wait_until(
                    lambda a=acks: load.stats()["acks"] >= a + 10,
                    60,
                    interval=0.2,
                    what=f"writes acknowledged by the new leader (kill {cycle + 1})",
                )
                leader.start(env)
                cluster.wait_for_leader(60)
                # a full round of heartbeats on the group with the restarted node in it
                beats = load.stats().get("heartbeats", 0)
                wait_until(
                    lambda b=beats: load.stats().get("heartbeats", 0) >= b + brokers,
                    60,
                    interval=0.2,
                    what=f"a round of heartbeats after restart {cycle + 1}",
                )
            final = load.finish()
        applied = wait_until(
            lambda: _applied(cluster.nodes),
            60,
            interval=0.2,
            what="every node at the same applied index and state hash",
        )
        cluster.stop()
        assert all(n.proc is not None and n.proc.returncode == 0 for n in cluster.nodes), [
            (n.name, n.proc.returncode if n.proc else None) for n in cluster.nodes
        ]
    histories = {}
    for n in cluster.nodes:  # after a clean stop, every record intact
        entries, tail = read_entries(os.path.join(n.data_dir, "raft.journal"))
        assert tail is None, (n.name, tail)
        histories[n.name] = [(command, idx, term) for idx, term, command in entries]
    first, compared = _compare(histories, applied)
    assert compared >= min(1000, applied // 2), (first, applied)
    print(
        f"{KILLS} leader kills, {final['brokers']} brokers, {final.get('heartbeats', 0)} heartbeats "
        f"({final.get('heartbeats_failed', 0)} failed), {final.get('acks', 0)} acknowledged writes "
        f"({final.get('refused', 0)} refused): indexes {first}..{applied} equal on all 3 nodes "
        f"({time.monotonic() - started:.0f} s)"
    )
    for node in cluster.nodes:
        log = node.log_text()
        assert "truncating already-applied" not in log, (node.name, log[-3000:])
        assert not find_log_problems(log), (node.name, find_log_problems(log)[:3])
    assert final["heartbeats"] >= brokers and final["acks"] >= 6 * SETS // 2, final


if __name__ == "__main__":  # the load process (LoadProcess)
    Load(sys.argv[1], int(sys.argv[2])).run()
