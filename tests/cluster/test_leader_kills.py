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

import pytest
from harness import TEST_CLUSTER as CLUSTER
from harness import Ledger, Writers

from mqctl.client import ControllerClient
from mqctl.errors import ControllerError
from mqctl.localgroup import LocalCluster, find_log_problems, wait_until

pytestmark = pytest.mark.slow

CYCLES = int(os.environ.get("MQCTL_LEADER_KILL_CYCLES", "25"))
# the writers' brokers beat once, when they register, and only the leader of the time hears it: a
# lease (theirs and the group's) longer than the whole test, so that no broker expires and no later
# leader, which never heard them, declares them dead once its grace (one lease) is over, electing
# anew after the final hashes were compared
LEASE_MS = 900_000
WRITERS = 3


def _step(c: ControllerClient, ledger: Ledger, t: int, k: int) -> bool:
    name = f"lk-{t}-{k}"
    epochs = {}
    for bid in (1, 2):
        addr = f"127.0.0.1:{10910 + bid}"
        if ledger.attempt(c.apply_broker_id, CLUSTER, name, bid, f"{addr};{k}") is not None:
            ledger.ack(ledger.applied, (name, bid))
        reg = ledger.attempt(
            c.register_broker,
            CLUSTER,
            name,
            bid,
            addr,
            epoch=0,
            max_offset=0,
            heartbeat_timeout_mills=LEASE_MS,
        )
        if reg is not None:
            ledger.ack(ledger.registered, (name, bid, reg.broker_epoch))
            epochs[bid] = reg.broker_epoch
            # only a heartbeat makes a broker alive (for ElectMaster and AlterSyncStateSet)
            ledger.attempt(
                c.heartbeat,
                CLUSTER,
                addr,
                name,
                bid,
                epoch=0,
                max_offset=0,
                heartbeat_timeout_mills=LEASE_MS,
                broker_epoch=reg.broker_epoch,
            )
    elect = ledger.attempt(c.elect_master, CLUSTER, name, 1)
    if elect is None:
        return True
    ledger.ack(ledger.elected, (name, int(elect.master_epoch or 0), int(elect.master_broker_id or 0)))
    if elect.master_broker_id != 1 or 2 not in epochs:
        return True
    alter = ledger.attempt(
        c.alter_sync_state_set, name, 1, elect.master_epoch, [1, 2], elect.sync_state_set_epoch
    )
    if alter is not None:
        ledger.ack(ledger.altered, (name, int(alter.new_sync_state_set_epoch), (1, 2)))
    return True


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


@pytest.mark.timeout(120 + 12 * CYCLES)
def test_leader_kills_under_load_no_traceback_no_lost_write(tmp_path) -> None:
    cluster = LocalCluster(str(tmp_path), size=3, extra_args=["--heartbeat-timeout", str(LEASE_MS)])
    stop = threading.Event()
    with cluster:
        cluster.start()
        watching = {"watch": None, "changes": 0}
        writers = Writers(cluster.addresses, _step, count=WRITERS, timeout=20)
        ledger = writers.ledger
        watcher = threading.Thread(target=_watcher, args=(cluster.addresses, stop, watching), daemon=True)
        watcher.start()
        try:
            with writers:
                wait_until(lambda: ledger.count() >= 20, 60, what="the first acknowledged writes")
                for cycle in range(CYCLES):
                    leader = cluster.wait_for_leader(60)
                    leader.kill()
                    cluster.wait_for_leader(60, exclude=leader)
                    acks = ledger.count()
                    wait_until(
                        lambda a=acks: ledger.count() >= a + 5,
                        60,
                        what=f"writes acknowledged by the new leader (cycle {cycle + 1})",
                    )
                    leader.start()
                    cluster.wait_for_leader(60)
        finally:
            stop.set()
            if watching["watch"] is not None:
                watching["watch"].close()
            watcher.join(60)
        assert not watcher.is_alive(), "the watcher did not stop"
        assert not ledger.unexpected, ledger.unexpected[:5]
        digest = cluster.wait_for_same_hash(60)
        assert len(cluster.hashes()) == 3 and set(cluster.hashes().values()) == {digest}
        leader = cluster.wait_for_leader(60)
        with ControllerClient(leader.grpc_address, timeout=30) as c:
            table = c.get_sync_state_data([]).replicas_info_table
        ledger.check(table)
        assert ledger.elected and ledger.altered and watching["changes"], (ledger.acks, ledger.refused)
        print(
            f"{CYCLES} leader kills: {ledger.acks} acknowledged writes ({len(ledger.applied)} "
            f"ApplyBrokerId, {len(ledger.registered)} RegisterBroker, {len(ledger.elected)} ElectMaster, "
            f"{len(ledger.altered)} AlterSyncStateSet; {watching['changes']} role changes watched); "
            f"not acknowledged: {dict(ledger.refused)}"
        )
    problems = [(n.log_path, p) for n in cluster.nodes for p in find_log_problems(n.log_text())]
    assert not problems, "\n".join(f"--- {path} ---\n{p}" for path, p in problems)
