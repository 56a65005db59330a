"""Metadata drift in the cockpit (issues 14 and 21): `mqctl health --doctor` reports a live replica that
lacks topics, subscription groups or consumer offsets another replica of its set has, with the `metadata
sync` that puts them back, `mqctl switchover --require-metadata` refuses while the new master lacks
what the master has, and `mqctl history` shows after a failover what the new master lacks, by name; all
through `metadata diff`'s comparer, against a real `mqctl serve` and brokers' admin ports serving
config/ files written by RocketMQ's own managers (cockpit_fixtures.AdminBroker)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from cockpit_fixtures import AdminBroker, cockpit_cluster
from harness import TEST_CLUSTER, Beater, register_broker

from mqctl.client import ControllerClient
from mqctl.localgroup import free_port, wait_until
from mqctl.store.identity import BrokerIdentity, write_identity

pytestmark = pytest.mark.slow

# the master: what its slave, which copied it some time ago, lacks (TopicNew, GNew, an offset of GNew)
MASTER = """\
topic TopicA 8 8 6
topic TopicNew 2 2 6
group G1 retryMaxTimes=3
group GNew
offset TopicA G1 0 120
offset TopicNew GNew 0 7
persist
persist
"""
SLAVE = """\
topic TopicA 8 8 6
group G1 retryMaxTimes=3
offset TopicA G1 0 100
persist
persist
"""


def mq(addresses: str, *args: str) -> subprocess.CompletedProcess[str]:
    # wide enough that no table cell wraps (the fix lines are long)
    return subprocess.run(
        [sys.executable, "-m", "mqctl", *args, "-a", addresses],
        capture_output=True,
        text=True,
        timeout=90,
        env={**os.environ, "COLUMNS": "400"},
    )


def _store(driver, root: Path, spec: str, broker: str, broker_id: int) -> Path:
    store = driver.write(root, spec)
    write_identity(store, BrokerIdentity(TEST_CLUSTER, broker, broker_id))
    return store


def _set(client: ControllerClient, beater: Beater, name: str, addresses: list[str]) -> list[int]:
    """Replicas at ``addresses``, caught up (equal maxOffsets), the first the master, all in sync."""
    ids = []
    for address in addresses:
        bid, _ = register_broker(
            client, name, address, epoch=1, max_offset=5000, heartbeat_timeout_mills=beater.lease_ms
        )
        beater.beat(name, bid, address, epoch=1, max_offset=5000, confirm_offset=5000)
        ids.append(bid)
    elected = client.elect_master(TEST_CLUSTER, name, ids[0])
    client.alter_sync_state_set(
        name, ids[0], elected.master_epoch or 1, ids, elected.sync_state_set_epoch or 1
    )
    return ids


def test_doctor_and_switchover_see_what_a_replica_lacks(rocketmq_config, tmp_path: Path) -> None:
    full = _store(rocketmq_config, tmp_path / "full", MASTER, "broker-a", 1)
    lacking = _store(rocketmq_config, tmp_path / "lacking", SLAVE, "broker-a", 2)
    # set-a: the slave lacks them (a failover to it would lose them); set-b: a master that lacks them
    # (a failover already happened), its slave has them; set-c: brokers that do not answer
    brokers = {
        k: AdminBroker(store) for k, store in (("a1", full), ("a2", lacking), ("b1", lacking), ("b2", full))
    }
    cluster, _ = cockpit_cluster(tmp_path / "ctl", 1)
    client = ControllerClient(cluster.addresses, timeout=30)
    beater = Beater(client, lease_ms=6000)
    try:
        cluster.raise_feature_level(client, 3)
        _set(client, beater, "set-a", [brokers["a1"].address, brokers["a2"].address])
        _set(client, beater, "set-b", [brokers["b1"].address, brokers["b2"].address])
        _set(client, beater, "set-c", [f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"])
        a1, a2, b1, b2 = (brokers[k].address for k in ("a1", "a2", "b1", "b2"))

        out = mq(cluster.addresses, "health", "--doctor", "-o", "json")
        doc = json.loads(out.stdout)
        assert out.returncode == 0, out.stderr  # drift is a finding: the verdicts stay OK
        drift = [f for f in doc["findings"] if "lacks" in f["finding"]]
        assert [(f["brokerName"], f["verdict"], f["finding"], f["fix"]) for f in drift] == [
            (
                "set-a",
                "WARN",
                f"slave 2 ({a2}) lacks 1 topics, 1 subscription groups, 1 consumer offsets "
                f"that broker 1 ({a1}) has: a failover to it would lose them",
                f"mqctl metadata sync --from {a1} --to {a2} --dry-run (then without --dry-run)",
            ),
            (
                "set-b",
                "WARN",
                f"master 1 ({b1}) lacks 1 topics, 1 subscription groups, 1 consumer offsets "
                f"that broker 2 ({b2}) has",
                f"mqctl metadata sync --from {b2} --to {b1} --dry-run (then without --dry-run)",
            ),
        ]
        assert doc["metadata"]["set-a"]["differs"] is True
        behind = {r["replica"]: r["messagesBehind"] for r in doc["metadata"]["set-a"]["replicas"]}
        assert behind == {a1: 0, a2: 20}
        assert "error" in doc["metadata"]["set-c"] and "set-c" not in {f["brokerName"] for f in drift}
        table = mq(cluster.addresses, "health", "--doctor", "-b", "set-c")
        assert table.returncode == 0 and "metadata of set-c not compared: broker 127.0.0.1:" in table.stdout

        # the switchover to the slave that lacks them: refused, with the numbers and the fix, dry run too
        for extra in ((), ("--dry-run",)):
            out = mq(cluster.addresses, "switchover", "-b", "set-a", "--require-metadata", *extra)
            assert out.returncode == 3 and out.stderr.count("\n") == 1, out.stderr
            assert out.stderr == (
                f"mqctl: error: broker 2 of set-a lacks 1 topics, 1 subscription groups, "
                f"1 consumer offsets that the master 1 has: put them back first (mqctl "
                f"metadata sync --from {a1} --to {a2}), or switch over without "
                "--require-metadata\n"
            )
        assert client.get_replica_info("set-a").master_broker_id == 1
        out = mq(cluster.addresses, "switchover", "-b", "set-c", "--require-metadata")
        assert out.returncode == 6 and "broker 127.0.0.1:" in out.stderr, out.stderr  # nothing checked
        assert client.get_replica_info("set-c").master_broker_id == 1

        # put them back (offline here: the stand-in's files), then the doctor is quiet and it moves
        out = mq(cluster.addresses, "metadata", "sync", "--from", str(full), "--to", str(lacking), "--yes")
        assert out.returncode == 0, out.stderr
        out = mq(cluster.addresses, "health", "--doctor", "-o", "json")
        assert [f for f in json.loads(out.stdout)["findings"] if "lacks" in f["finding"]] == []
        out = mq(cluster.addresses, "switchover", "-b", "set-a", "--require-metadata", "-o", "json")
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["newMasterBrokerId"] == 2
        assert client.get_replica_info("set-a").master_broker_id == 2
    finally:
        beater.stop()
        client.close()
        cluster.stop()
        for b in brokers.values():
            b.close()


def test_history_says_what_the_new_master_lacks(rocketmq_config, tmp_path: Path) -> None:
    full = _store(rocketmq_config, tmp_path / "full", MASTER, "broker-a", 1)
    lacking = _store(rocketmq_config, tmp_path / "lacking", SLAVE, "broker-a", 2)
    # set-a: its master has what its slave lacks, then fails over to that slave (its lease ends while its
    # admin port still answers, as a master cut off from the controller); set-b: no drift; set-c: one
    # replica beats but nothing listens on its admin port, another's accepts and never answers
    brokers = {
        k: AdminBroker(store)
        for k, store in (("a1", full), ("a2", lacking), ("b1", full), ("b2", full), ("c1", full))
    }
    mute = socket.create_server(("127.0.0.1", 0))
    cluster, _ = cockpit_cluster(tmp_path / "ctl", 1)
    client = ControllerClient(cluster.addresses, timeout=30)
    beater = Beater(client, lease_ms=6000)
    try:
        cluster.raise_feature_level(client, 3)
        a1, a2, b1, b2, c1 = (brokers[k].address for k in ("a1", "a2", "b1", "b2", "c1"))
        dead = f"127.0.0.1:{free_port()}"
        silent = f"127.0.0.1:{mute.getsockname()[1]}"
        _set(client, beater, "set-a", [a1, a2])
        _set(client, beater, "set-b", [b1, b2])
        _set(client, beater, "set-c", [c1, dead, silent])
        beater.silence("set-a", 1)
        wait_until(
            lambda: client.get_replica_info("set-a").master_broker_id == 2,
            60,
            what="set-a's slave elected when its master's lease ends",
        )

        out = mq(cluster.addresses, "history", "-o", "json", "--broker-timeout", "1")
        assert out.returncode == 0, out.stderr
        doc = json.loads(out.stdout)
        election = [e for e in doc["entries"] if e["brokerName"] == "set-a" and e["what"] == "master elected"]
        assert election[-1]["cause"] == "lease expired for broker 1"
        assert election[-1]["election"]["newMasterBrokerId"] == 2
        meta = doc["metadata"]
        assert sorted(meta) == ["set-a", "set-b", "set-c"]
        fix = f"mqctl metadata sync --from {a1} --to {a2} --dry-run (then without --dry-run)"
        rows = {r["brokerId"]: r for r in meta["set-a"]["replicas"]}
        assert rows[2] == {
            "brokerId": 2,
            "address": a2,
            "role": "master",
            "alive": True,
            "inSyncStateSet": True,
            "status": "answered",
            "error": None,
            "lacks": {
                "topics": ["TopicNew"],
                "subscriptionGroups": ["GNew"],
                "consumerOffsets": ["TopicNew@GNew"],
            },
            "syncFrom": a1,
            "fix": fix,
        }
        assert (rows[1]["role"], rows[1]["alive"], rows[1]["status"], rows[1]["lacks"]) == (
            "slave",
            False,
            "answered",
            {},
        )
        set_a = meta["set-a"]
        assert (set_a["masterBrokerId"], set_a["replicasCompared"], set_a["differs"]) == (2, 2, True)
        assert meta["set-b"]["differs"] is False
        assert [(r["address"], r["lacks"], r["fix"]) for r in meta["set-b"]["replicas"]] == [
            (b1, {}, None),
            (b2, {}, None),
        ]
        rows = {r["brokerId"]: r for r in meta["set-c"]["replicas"]}
        assert (rows[1]["status"], rows[1]["lacks"]) == ("answered", None)
        assert meta["set-c"]["replicasCompared"] == 0
        assert rows[2]["status"] == "unreachable" and rows[2]["error"].startswith(f"broker {dead}: "), rows[2]
        assert rows[3]["status"] == "unreachable" and "no answer" in rows[3]["error"], rows[3]
        assert brokers["a1"].requests == 4  # one of each request
        # -o yaml: the same document (set-c's error texts aside: what a timeout had left varies)
        yaml_out = mq(cluster.addresses, "history", "-o", "yaml", "--broker-timeout", "1")
        assert yaml_out.returncode == 0, yaml_out.stderr
        in_yaml = yaml.safe_load(yaml_out.stdout)["metadata"]
        assert {k: in_yaml[k] for k in ("set-a", "set-b")} == {k: meta[k] for k in ("set-a", "set-b")}
        assert [r["status"] for r in in_yaml["set-c"]["replicas"]] == ["answered", *["unreachable"] * 2]

        table = mq(cluster.addresses, "history")
        assert table.returncode == 0, table.stderr
        assert "lease expired for broker 1" in table.stdout
        lines = table.stdout.splitlines()
        a2_line = next(i for i, line in enumerate(lines) if f" {a2} " in line and " lacks " in line)
        lacks = "lacks topics TopicNew; subscription groups GNew; consumer offsets of TopicNew@GNew"
        assert "master" in lines[a2_line] and lacks in lines[a2_line]
        assert f"fix: {fix}" in lines[a2_line + 1]
        assert sum("lacks nothing" in line for line in lines) == 3  # set-a's old master, set-b's two
        assert any(f" {dead} " in line and f"unreachable: broker {dead}: " in line for line in lines)
        assert any(f" {c1} " in line and "nothing to compare with" in line for line in lines)

        # one set: only its brokers are asked; --no-metadata: none is
        asked = {k: b.requests for k, b in brokers.items()}
        out = mq(cluster.addresses, "history", "-b", "set-b", "-o", "json")
        assert out.returncode == 0 and sorted(json.loads(out.stdout)["metadata"]) == ["set-b"]
        assert {k: b.requests - asked[k] for k, b in brokers.items()} == {
            "a1": 0,
            "a2": 0,
            "b1": 4,
            "b2": 4,
            "c1": 0,
        }
        before = {k: (b.connections, b.requests) for k, b in brokers.items()}
        out = mq(cluster.addresses, "history", "--no-metadata", "-o", "json")
        assert out.returncode == 0, out.stderr
        skipped = json.loads(out.stdout)
        assert "metadata" not in skipped and skipped["entries"] == doc["entries"]
        table = mq(cluster.addresses, "history", "--no-metadata")
        assert table.returncode == 0 and "lease expired for broker 1" in table.stdout
        assert "lacks" not in table.stdout
        assert {k: (b.connections, b.requests) for k, b in brokers.items()} == before
        bad = mq(cluster.addresses, "history", "--broker-timeout", "0")
        assert bad.returncode == 2
        assert bad.stderr == "mqctl: error: --broker-timeout must be positive, got 0.0\n"
    finally:
        beater.stop()
        client.close()
        cluster.stop()
        mute.close()
        for b in brokers.values():
            b.close()
