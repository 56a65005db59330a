"""The operator cockpit with real broker agents in front of real controllers: a failover observed in
`mqctl history` with its loss figure, a failover pause that holds a dead master's set until resumed,
and a switchover and a rebalance that the brokers follow (the old master becomes a slave of the new)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from broker_fixtures import start_agent
from test_failover import one_master, put_all

from mqctl.broker.agent import BrokerAgent, Role
from mqctl.client import ControllerClient
from mqctl.localgroup import LocalCluster, wait_until

pytestmark = pytest.mark.slow


def mq(trio: LocalCluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mqctl", *args, "-a", trio.addresses],
        capture_output=True,
        text=True,
        timeout=90,
    )


def level_3(trio: LocalCluster) -> None:
    trio.wait_for_members_speaking(3)
    out = mq(trio, "quorum", "feature-level", "3")
    assert out.returncode == 0, out.stderr


def heartbeat_offsets(client: ControllerClient, name: str) -> dict[int, int | None]:
    info = client.get_sync_state_data([name]).replicas_info_table[name]
    return {r.broker_id: r.max_offset for r in (*info.in_sync_replicas, *info.not_in_sync_replicas)}


def settled(agents: list[BrokerAgent], client: ControllerClient, name: str) -> bool:
    """Every replica has the same maxOffset, and the controller's heartbeats say so too."""
    offsets = {a.max_offset for a in agents}
    return len(offsets) == 1 and set(heartbeat_offsets(client, name).values()) == offsets


def history(trio: LocalCluster, name: str) -> list[dict]:
    out = mq(trio, "history", "-b", name, "-o", "json")
    assert out.returncode == 0, out.stderr
    return list(json.loads(out.stdout)["entries"])


def test_failover_in_history_with_no_loss_and_a_pause_that_holds_it(trio: LocalCluster, tmp_path) -> None:
    name = "hist"
    level_3(trio)
    agents = [
        start_agent(tmp_path / f"b{i}", trio.addresses, name, all_ack_in_sync_state_set=True)
        for i in range(3)
    ]
    try:
        with ControllerClient(trio.addresses, timeout=30) as client:
            master = wait_until(lambda: one_master(agents), 30, what="one master, two slaves")
            wait_until(lambda: len(master.status().sync_state_set) == 3, 20, what="SyncStateSet of 3")
            put_all(master, 0, 60, {})
            wait_until(lambda: settled(agents, client, name), 20, what="every replica and heartbeat equal")
            end = master.max_offset
            paused = mq(trio, "failover", "pause", "-b", name, "--reason", "kernel upgrade")
            assert paused.returncode == 0, paused.stderr
            master.crash()
            others = [a for a in agents if a is not master]
            wait_until(
                lambda: not _alive(client, name, master.broker_id), 20, what="the master's lease to end"
            )
            time.sleep(3.0)  # two leases more: neither the controller nor the brokers may elect meanwhile
            assert client.get_replica_info(name).master_broker_id == master.broker_id
            shown = json.loads(mq(trio, "getSyncStateSet", "-b", name, "-o", "json").stdout)
            assert shown["brokers"][0]["failoverPaused"] == "kernel upgrade"
            assert mq(trio, "failover", "resume", "-b", name).returncode == 0
            new = wait_until(lambda: one_master(others), 30, what="a new master after the resume")
            entries = history(trio, name)
    finally:
        for a in agents:
            a.crash()
    whats = [e["what"] for e in entries]
    paused_at, resumed_at = whats.index("failover paused"), whats.index("failover resumed")
    assert "master elected" not in whats[paused_at:resumed_at]
    election = next(e for e in entries[resumed_at:] if e["what"] == "master elected")
    assert election["cause"] in (
        f"lease expired for broker {master.broker_id}",
        f"broker request (broker {new.broker_id})",
    )
    el = election["election"]
    assert (el["oldMasterBrokerId"], el["newMasterBrokerId"], el["unclean"]) == (
        master.broker_id,
        new.broker_id,
        False,
    )
    assert (el["oldMasterMaxOffset"], el["newMasterMaxOffset"], el["lossBytes"]) == (end, end, 0)
    assert {c["brokerId"]: c["alive"] for c in el["candidates"]} == {
        a.broker_id: a is not master for a in agents
    }
    assert election["term"] >= 1 and election["time"].endswith("Z")
    assert json.loads(mq(trio, "history", "-b", name, "-o", "json").stdout)["lossTotalBytes"] == {name: 0}


def _alive(client: ControllerClient, name: str, bid: int) -> bool:
    info = client.get_sync_state_data([name]).replicas_info_table[name]
    return next(r.alive for r in (*info.in_sync_replicas, *info.not_in_sync_replicas) if r.broker_id == bid)


def test_brokers_follow_a_rebalance_and_a_switchover(trio: LocalCluster, tmp_path) -> None:
    name = "moves"
    level_3(trio)
    first = start_agent(tmp_path / "b0", trio.addresses, name)
    agents = [first]
    try:
        first.wait_role(Role.MASTER, 30)
        agents += [
            start_agent(tmp_path / "b1", trio.addresses, name),
            start_agent(tmp_path / "b2", trio.addresses, name, election_priority=1),
        ]
        preferred = agents[2]
        with ControllerClient(trio.addresses, timeout=30) as client:
            wait_until(
                lambda: one_master(agents) is first and len(first.status().sync_state_set) == 3,
                30,
                what="the first broker master of a SyncStateSet of 3",
            )
            put_all(first, 0, 20, {})
            wait_until(lambda: settled(agents, client, name), 20, what="every replica and heartbeat equal")
            dry = mq(trio, "rebalance", "--dry-run", "-o", "json")
            assert dry.returncode == 0, dry.stderr
            move = next(m for m in json.loads(dry.stdout)["moves"] if m["brokerName"] == name)
            assert (move["masterBrokerId"], move["preferredBrokerId"], move["action"]) == (
                first.broker_id,
                preferred.broker_id,
                "move",
            )
            assert one_master(agents) is first
            assert mq(trio, "rebalance").returncode == 0
            wait_until(
                lambda: one_master(agents) is preferred,
                30,
                what="the preferred replica master, the others its slaves",
            )
            assert first.role == Role.SLAVE and first.master_id == preferred.broker_id
            wait_until(
                lambda: len(preferred.status().sync_state_set) == 3, 30, what="SyncStateSet of 3 again"
            )
            put_all(preferred, 20, 20, {})
            wait_until(lambda: settled(agents, client, name), 20, what="every replica and heartbeat equal")
            out = mq(trio, "switchover", "-b", name, "--to", str(first.broker_id), "-o", "json")
            assert out.returncode == 0, out.stderr
            assert json.loads(out.stdout)["gapBytes"] == 0
            wait_until(lambda: one_master(agents) is first, 30, what="the first broker master again")
            assert preferred.role == Role.SLAVE and preferred.master_id == first.broker_id
            put_all(first, 40, 5, {})
            entries = history(trio, name)
    finally:
        for a in agents:
            a.crash()
    moves = [
        (e["cause"], e["election"]["newMasterBrokerId"], e["election"]["lossBytes"])
        for e in entries
        if e["what"] == "master elected" and e["cause"] in ("rebalance", "switchover")
    ]
    assert moves == [("rebalance", preferred.broker_id, 0), ("switchover", first.broker_id, 0)]
