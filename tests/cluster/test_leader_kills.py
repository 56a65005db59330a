"""Repeated kill -9 of the leader of a 3-node group under a steady write load (issue 13).

Writers register broker sets (ApplyBrokerId, RegisterBroker, ElectMaster, AlterSyncStateSet) in a few
threads, and a broker's role watch follows the masters, while the current leader is killed with
SIGKILL and restarted, cycle after cycle. At the end: no traceback or logged exception in any node's
log, every acknowledged write (code 0) is in the final state (read on the leader), and every node has
the same state hash (so the same state).

MQCTL_LEADER_KILL_CYCLES sets the number of cycles (default 25, about 45 s on 2 cores).
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from dataclasses import dataclass, field

import pytest

from mqctl.client import ControllerClient
from mqctl.errors import ControllerError
from mqctl.testing import TEST_CLUSTER as CLUSTER
from mqctl.testing import LocalCluster, find_log_problems, wait_until

pytestmark = pytest.mark.slow

CYCLES = int(os.environ.get("MQCTL_LEADER_KILL_CYCLES", "25"))
WRITERS = 3


@dataclass
class Ledger:
    """The writes the group acknowledged (code 0), and how many of the others ended how."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    applied: list[tuple[str, int]] = field(default_factory=list)               # (name, id)
    registered: list[tuple[str, int, int]] = field(default_factory=list)       # (name, id, brokerEpoch)
    elected: list[tuple[str, int, int]] = field(default_factory=list)          # (name, masterEpoch, id)
    altered: list[tuple[str, int, tuple[int, ...]]] = field(default_factory=list)  # (name, ssEpoch, set)
    refused: Counter[int] = field(default_factory=Counter)
    unexpected: list[str] = field(default_factory=list)
    acks: int = 0

    def ack(self, kind: list, item: tuple) -> None:  # type: ignore[type-arg]
        with self.lock:
            kind.append(item)
            self.acks += 1

    def count(self) -> int:
        with self.lock:
            return self.acks


def _attempt(ledger: Ledger, op, *args, **kwargs):  # type: ignore[no-untyped-def]
    try:
        return op(*args, **kwargs)
    except ControllerError as exc:  # refused, or the outcome is unknown: not acknowledged
        with ledger.lock:
            ledger.refused[int(exc.code)] += 1
    except Exception as exc:  # noqa: BLE001 - anything else is a bug in the client or the test
        with ledger.lock:
            ledger.unexpected.append(repr(exc))
    return None


def _writer(t: int, addresses: str, ledger: Ledger, stop: threading.Event) -> None:
    with ControllerClient(addresses, timeout=20) as c:
        k = 0
        while not stop.is_set():
            name = f"lk-{t}-{k}"
            k += 1
            epochs = {}
            for bid in (1, 2):
                addr = f"10.{t}.{k // 250}.{k % 250}:{10910 + bid}"
                if _attempt(ledger, c.apply_broker_id, CLUSTER, name, bid, f"{addr};{k}") is not None:
                    ledger.ack(ledger.applied, (name, bid))
                reg = _attempt(ledger, c.register_broker, CLUSTER, name, bid, addr, epoch=0, max_offset=0,
                               heartbeat_timeout_mills=60_000)
                if reg is not None:
                    ledger.ack(ledger.registered, (name, bid, reg.broker_epoch))
                    epochs[bid] = reg.broker_epoch
                    # only a heartbeat makes a broker alive (for ElectMaster and AlterSyncStateSet)
                    _attempt(ledger, c.heartbeat, CLUSTER, addr, name, bid, epoch=0, max_offset=0,
                             heartbeat_timeout_mills=60_000, broker_epoch=reg.broker_epoch)
            elect = _attempt(ledger, c.elect_master, CLUSTER, name, 1)
            if elect is None:
                continue
            ledger.ack(ledger.elected, (name, int(elect.master_epoch or 0), int(elect.master_broker_id or 0)))
            if elect.master_broker_id != 1 or 2 not in epochs:
                continue
            alter = _attempt(ledger, c.alter_sync_state_set, name, 1, elect.master_epoch, [1, 2],
                             elect.sync_state_set_epoch)
            if alter is not None:
                ledger.ack(ledger.altered, (name, int(alter.new_sync_state_set_epoch), (1, 2)))


def _watcher(addresses: str, stop: threading.Event, watching: dict) -> None:  # type: ignore[type-arg]
    """A broker's role watch of the whole cluster: its stream is cut by every leader kill, and it
    finds the new leader by itself."""
    with ControllerClient(addresses, timeout=20) as c:
        while not stop.is_set():
            try:
                watching["watch"] = watch = c.watch_role_changes(CLUSTER)
                if stop.is_set():
                    watch.close()
                for _change in watch:
                    watching["changes"] += 1
            except ControllerError:  # no controller answered for a while
                stop.wait(0.2)


def _check(ledger: Ledger, table: dict) -> None:  # type: ignore[type-arg]
    def replicas(name: str) -> dict[int, int]:
        info = table[name]
        return {r.broker_id: r.broker_epoch for r in info.in_sync_replicas + info.not_in_sync_replicas}

    lost = [a for a in ledger.applied if a[0] not in table or a[1] not in replicas(a[0])]
    assert not lost, f"acknowledged ApplyBrokerId lost: {lost[:10]}"
    lost = [r for r in ledger.registered if replicas(r[0]).get(r[1], -1) < r[2]]
    assert not lost, f"acknowledged RegisterBroker lost: {lost[:10]}"
    lost = [e for e in ledger.elected if table[e[0]].master_epoch < e[1]]
    assert not lost, f"acknowledged ElectMaster lost (masterEpoch went back): {lost[:10]}"
    masters: dict[tuple[str, int], set[int]] = {}
    for name, epoch, master in ledger.elected:
        masters.setdefault((name, epoch), set()).add(master)
    twice = {k: v for k, v in masters.items() if len(v) > 1}
    assert not twice, f"two masters for one (brokerName, masterEpoch): {twice}"
    lost = [a for a in ledger.altered if table[a[0]].sync_state_set_epoch < a[1]]
    assert not lost, f"acknowledged AlterSyncStateSet lost (syncStateSetEpoch went back): {lost[:10]}"


@pytest.mark.timeout(120 + 12 * CYCLES)
def test_leader_kills_under_load_no_traceback_no_lost_write(tmp_path) -> None:
    cluster = LocalCluster(str(tmp_path), size=3)
    ledger = Ledger()
    stop = threading.Event()
    with cluster:
        cluster.start()
        watching = {"watch": None, "changes": 0}
        threads = [threading.Thread(target=_writer, args=(t, cluster.addresses, ledger, stop), daemon=True)
                   for t in range(WRITERS)]
        threads.append(threading.Thread(target=_watcher, args=(cluster.addresses, stop, watching),
                                        daemon=True))
        for th in threads:
            th.start()
        try:
            wait_until(lambda: ledger.count() >= 20, 60, what="the first acknowledged writes")
            for cycle in range(CYCLES):
                leader = cluster.wait_for_leader(60)
                leader.kill()
                cluster.wait_for_leader(60, exclude=leader)
                acks = ledger.count()
                wait_until(lambda a=acks: ledger.count() >= a + 5, 60,
                           what=f"writes acknowledged by the new leader (cycle {cycle + 1})")
                leader.start()
                cluster.wait_for_leader(60)
        finally:
            stop.set()
            if watching["watch"] is not None:
                watching["watch"].close()
            for th in threads:
                th.join(60)
        assert not any(th.is_alive() for th in threads), "a writer or the watcher did not stop"
        assert not ledger.unexpected, ledger.unexpected[:5]
        digest = cluster.wait_for_same_hash(60)
        assert len(cluster.hashes()) == 3 and set(cluster.hashes().values()) == {digest}
        leader = cluster.wait_for_leader(60)
        with ControllerClient(leader.grpc_address, timeout=30) as c:
            table = c.get_sync_state_data([]).replicas_info_table
        _check(ledger, table)
        assert ledger.elected and ledger.altered and watching["changes"], (ledger.acks, ledger.refused)
        print(f"{CYCLES} leader kills: {ledger.acks} acknowledged writes ({len(ledger.applied)} "
              f"ApplyBrokerId, {len(ledger.registered)} RegisterBroker, {len(ledger.elected)} ElectMaster, "
              f"{len(ledger.altered)} AlterSyncStateSet; {watching['changes']} role changes watched); "
              f"not acknowledged: {dict(ledger.refused)}")
    problems = [(n.log_path, p) for n in cluster.nodes for p in find_log_problems(n.log_text())]
    assert not problems, "\n".join(f"--- {path} ---\n{p}" for path, p in problems)
