"""`mqctl history`, `failover pause|resume`, `switchover` and `rebalance` against real `mqctl serve`
processes, with brokers simulated by their registrations and heartbeats (real client calls), so that
each replica's maxOffset is exactly what a test needs: an unclean election's loss, a switchover that
waits for its candidate, refuses with the numbers or is forced."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from admin_fixtures import CLUSTER, MQCTL, register, run
from harness import Beater, with_default_sigint

from mqctl.client import ControllerClient
from mqctl.localgroup import LocalCluster, wait_until

pytestmark = pytest.mark.slow

TOKEN = "cockpit-token"


@pytest.fixture(scope="module")
def group(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[LocalCluster, ControllerClient, Beater]]:
    cluster = LocalCluster(str(tmp_path_factory.mktemp("cockpit")), size=3, extra_args=["--token", TOKEN])
    with cluster:
        cluster.start()
        client = ControllerClient(cluster.addresses, token=TOKEN, timeout=30)
        beater = Beater(client)
        try:
            cluster.raise_feature_level(client, 3)
            yield cluster, client, beater
        finally:
            beater.stop()
            client.close()


def mq(
    cluster: LocalCluster, *args: str, token: bool = True, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    extra = ["--token", TOKEN] if token else []
    return run(*args, "-a", cluster.addresses, *extra, timeout=timeout)


def broker_set(
    client: ControllerClient, beater: Beater, name: str, offsets: dict[int, int], sync_state_set: list[int]
) -> dict[int, str]:
    """Replicas 1.. of `name` beating with `offsets`, 1 the master, then `sync_state_set`."""
    addrs = {}
    for bid, off in offsets.items():
        addr = f"127.0.0.1:{20000 + bid}"
        assert register(client, name, addr, epoch=1, max_offset=off, heartbeat_timeout_mills=1500) == bid
        beater.beat(name, bid, addr, epoch=1, max_offset=off, confirm_offset=off)
        addrs[bid] = addr
    elected = client.elect_master(CLUSTER, name, 1)
    assert elected.master_broker_id == 1
    if sync_state_set != [1]:
        client.alter_sync_state_set(
            name, 1, elected.master_epoch or 1, sync_state_set, elected.sync_state_set_epoch or 1
        )
    return addrs


def history(cluster: LocalCluster, name: str) -> dict:
    out = mq(cluster, "history", "-b", name, "-o", "json", token=False)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_unclean_election_is_in_history_with_the_gap(group) -> None:
    cluster, client, beater = group
    name = "unclean"
    broker_set(client, beater, name, {1: 6000, 2: 3500}, [1])
    unclean = ("updateControllerConfig", "-k", "enableElectUncleanMaster", "-v")
    assert mq(cluster, *unclean, "true").returncode == 0
    try:
        beater.silence(name, 1)  # the master's lease ends; only 2, outside the SyncStateSet, is alive
        wait_until(lambda: client.get_replica_info(name).master_broker_id == 2, 30, what="broker 2 elected")
    finally:
        assert mq(cluster, *unclean, "false").returncode == 0
    doc = history(cluster, name)
    election = [e for e in doc["entries"] if e["what"] == "master elected"][-1]
    assert election["cause"] == "lease expired for broker 1"
    el = election["election"]
    assert (el["oldMasterBrokerId"], el["newMasterBrokerId"], el["unclean"]) == (1, 2, True)
    assert (el["oldMasterMaxOffset"], el["newMasterMaxOffset"], el["lossBytes"]) == (6000, 3500, 2500)
    assert [(c["brokerId"], c["alive"], c["inSyncStateSet"], c["maxOffset"]) for c in el["candidates"]] == [
        (1, False, True, 6000),
        (2, True, False, 3500),
    ]
    assert el["reason"].startswith("the only alive replica outside the SyncStateSet")
    assert doc["lossTotalBytes"] == {name: 2500}
    first = next(e for e in doc["entries"] if e["what"] == "master elected")
    assert first["election"]["reason"] == "first election: the broker that asked (1)"
    assert [e["seq"] for e in doc["entries"]] == sorted(e["seq"] for e in doc["entries"])
    table = mq(cluster, "history", "-b", name, "--since", "1h", token=False)
    assert table.returncode == 0 and "lease expired for broker 1" in table.stdout and "2500" in table.stdout
    assert "bytes elections may have lost: unclean 2500" in table.stdout
    later = mq(cluster, "history", "-b", name, "--since", "2999-01-01T00:00:00Z", "-o", "json", token=False)
    assert json.loads(later.stdout)["entries"] == []
    bad = mq(cluster, "history", "--since", "yesterday", token=False)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--since 'yesterday'" in bad.stderr


def test_switchover_refuses_with_numbers_waits_and_forces(group) -> None:
    cluster, client, beater = group
    name = "switch"
    addrs = broker_set(client, beater, name, {1: 5000, 2: 4000}, [1, 2])
    refused = mq(cluster, "switchover", "-b", name, "--wait", "1")
    assert refused.returncode == 3, refused.stderr
    assert "broker 2 of switch is 1000 bytes behind: maxOffset 4000, the master 1 has 5000" in refused.stderr
    assert client.get_replica_info(name).master_broker_id == 1
    assert mq(cluster, "switchover", "-b", name, token=False).returncode == 3  # the token is required
    # it waits: broker 2 catches up two seconds into the call
    later = threading.Timer(
        2.0, lambda: beater.beat(name, 2, addrs[2], epoch=1, max_offset=5000, confirm_offset=5000)
    )
    later.start()
    started = time.monotonic()
    moved = mq(cluster, "switchover", "-b", name, "--wait", "30", "-o", "json")
    later.join()
    assert moved.returncode == 0, moved.stderr
    doc = json.loads(moved.stdout)
    assert time.monotonic() - started >= 1.5
    assert (doc["oldMasterBrokerId"], doc["newMasterBrokerId"], doc["caughtUp"], doc["gapBytes"]) == (
        1,
        2,
        True,
        0,
    )
    info = client.get_replica_info(name)
    assert info.master_broker_id == 2 and info.sync_state_set == (2,)
    # the new master takes 1 back into its SyncStateSet and writes on; 1 lags by 500 bytes
    client.alter_sync_state_set(name, 2, info.master_epoch, [1, 2], info.sync_state_set_epoch)
    beater.beat(name, 2, addrs[2], epoch=2, max_offset=5500, confirm_offset=5500)
    wait_until(lambda: _max_offset(client, name, 2) == 5500, 15, what="broker 2's new maxOffset")
    dry = mq(
        cluster, "switchover", "-b", name, "--to", "1", "--force", "--dry-run", "--wait", "1", "-o", "json"
    )
    assert dry.returncode == 0 and json.loads(dry.stdout)["dryRun"]
    assert client.get_replica_info(name).master_broker_id == 2
    forced = mq(cluster, "switchover", "-b", name, "--to", "1", "--force", "--wait", "1", "-o", "json")
    assert forced.returncode == 0, forced.stderr
    doc = json.loads(forced.stdout)
    assert (doc["newMasterBrokerId"], doc["forced"], doc["gapBytes"]) == (1, True, 500)
    entries = history(cluster, name)["entries"]
    switched = [e for e in entries if e["cause"] == "switchover"]
    assert [(e["election"]["newMasterBrokerId"], e["election"]["lossBytes"]) for e in switched] == [
        (2, 0),
        (1, 500),
    ]
    assert switched[-1]["election"]["reason"] == "the switchover's target (--to 1)"
    assert mq(cluster, "switchover", "-b", name, "--to", "1").returncode == 3  # already the master


def _max_offset(client: ControllerClient, name: str, bid: int) -> int | None:
    info = client.get_sync_state_data([name]).replicas_info_table[name]
    return next(
        r.max_offset for r in (*info.in_sync_replicas, *info.not_in_sync_replicas) if r.broker_id == bid
    )


def test_pause_resume_and_rebalance(group) -> None:
    cluster, client, beater = group
    name = "prefer"
    addrs = broker_set(client, beater, name, {1: 100, 2: 100, 3: 100}, [1, 2, 3])
    beater.beat(name, 3, addrs[3], epoch=1, max_offset=100, confirm_offset=100, election_priority=1)
    wait_until(lambda: _priority(client, name, 3) == 1, 15, what="broker 3's election priority")
    dry = mq(cluster, "rebalance", "-c", CLUSTER, "--dry-run", "-o", "json")
    assert dry.returncode == 0, dry.stderr
    move = next(m for m in json.loads(dry.stdout)["moves"] if m["brokerName"] == name)
    assert (move["masterBrokerId"], move["preferredBrokerId"], move["action"]) == (1, 3, "move")
    assert client.get_replica_info(name).master_broker_id == 1
    # paused: the rebalance leaves the set alone and says why
    paused = mq(cluster, "failover", "pause", "-b", name, "--reason", "maintenance window", "-o", "json")
    assert paused.returncode == 0, paused.stderr
    assert json.loads(paused.stdout)["failoverPaused"] == {name: "maintenance window"}
    sss = json.loads(mq(cluster, "getSyncStateSet", "-b", name, "-o", "json", token=False).stdout)
    assert sss["brokers"][0]["failoverPaused"] == "maintenance window"
    skipped = json.loads(mq(cluster, "rebalance", "-o", "json").stdout)
    reason = next(m for m in skipped["moves"] if m["brokerName"] == name)["reason"]
    assert reason.startswith("failover paused")
    assert mq(cluster, "failover", "pause", "-b", name, token=False).returncode == 3  # the token is required
    resumed = mq(cluster, "failover", "resume", "-b", name, "-o", "json")
    assert resumed.returncode == 0 and json.loads(resumed.stdout)["failoverPaused"] == {}
    real = mq(cluster, "rebalance", "-o", "json")
    assert real.returncode == 0, real.stderr
    assert next(m for m in json.loads(real.stdout)["moves"] if m["brokerName"] == name)["action"] == "move"
    assert client.get_replica_info(name).master_broker_id == 3
    entries = history(cluster, name)["entries"]
    assert [e["what"] for e in entries[-3:]] == ["failover paused", "failover resumed", "master elected"]
    assert entries[-1]["cause"] == "rebalance" and entries[-1]["election"]["lossBytes"] == 0
    assert entries[-3]["detail"] == "maintenance window"


def _priority(client: ControllerClient, name: str, bid: int) -> int | None:
    info = client.get_sync_state_data([name]).replicas_info_table[name]
    return next(
        r.election_priority
        for r in (*info.in_sync_replicas, *info.not_in_sync_replicas)
        if r.broker_id == bid
    )


def test_follow_streams_new_entries(group) -> None:
    cluster, client, _ = group
    proc = subprocess.Popen(
        with_default_sigint([MQCTL, "history", "--follow", "-o", "json", "-a", cluster.addresses]),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lines: list[dict] = []

        def read_until(pred) -> dict:
            while True:
                line = proc.stdout.readline()
                assert line, proc.stderr.read()
                lines.append(json.loads(line))
                if pred(lines[-1]):
                    return lines[-1]

        time.sleep(1.0)  # the existing entries first, then it polls
        client.update_config({"waitFor": "1"})  # a decision, noted as a config change
        entry = read_until(lambda e: e["what"] == "config changed" and e["detail"] == "waitFor=1")
        assert entry["cause"] == "admin request" and entry["brokerName"] is None
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(20)
    assert proc.returncode == 0


def test_below_feature_level_3_the_commands_say_how_to_raise_it(tmp_path: Path) -> None:
    with LocalCluster(str(tmp_path), size=1, extra_args=["--initial-feature-level", "1"]) as single:
        single.start()
        for args in (["history"], ["failover", "pause"], ["history", "-o", "json"]):
            out = run(*args, "-a", single.addresses)
            assert out.returncode == 3, out.stderr
            assert "needs feature level 3; the group is at 1" in out.stderr + out.stdout
            assert "mqctl quorum feature-level 3" in out.stderr + out.stdout
        out = run("updateControllerConfig", "-k", "historyMaxEntries", "-v", "5", "-a", single.addresses)
        assert out.returncode == 3 and "needs feature level 3" in out.stderr
