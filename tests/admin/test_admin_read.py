"""Read commands of the installed `mqctl` against three real controller nodes (one shared group).

Every command is given a *follower's* address with -a: the answer must still come from the leader.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest
import yaml  # type: ignore[import-untyped,unused-ignore]
from admin_fixtures import CLUSTER, MAX_OFFSET, World, run

from mqctl.localgroup import free_port, wait_until

pytestmark = pytest.mark.slow


def _json(world: World, *args: str) -> dict:
    proc = run(*args, "-a", world.follower_address, "-o", "json")
    assert proc.returncode == 0, proc.stderr
    assert "\x1b[" not in proc.stdout
    return json.loads(proc.stdout)


def test_get_sync_state_set_json_schema_from_a_follower(world: World) -> None:
    doc = _json(world, "getSyncStateSet", "-b", "broker-a")
    assert doc["version"] == 1
    (b,) = doc["brokers"]
    assert (b["clusterName"], b["brokerName"], b["masterBrokerId"]) == (CLUSTER, "broker-a", 1)
    assert b["masterAddress"] == world.addrs[1]
    assert b["masterEpoch"] == 1 and b["syncStateSetEpoch"] == 2 and b["syncStateSetNums"] == 2
    ins = {r["brokerId"]: r for r in b["inSyncReplicas"]}
    outs = {r["brokerId"]: r for r in b["notInSyncReplicas"]}
    assert set(ins) == {1, 2} and set(outs) == {3}
    assert ins[1]["role"] == "master" and ins[2]["role"] == "slave"
    assert ins[1]["alive"] and ins[2]["alive"] and not outs[3]["alive"]
    assert ins[2]["maxOffset"] == MAX_OFFSET[2] and ins[2]["epoch"] == 2
    assert ins[2]["lagBytes"] == MAX_OFFSET[1] - MAX_OFFSET[2] and ins[1]["lagBytes"] == 0
    assert ins[2]["confirmOffset"] == 5000
    assert 0 <= ins[1]["heartbeatAgeMs"] < 5000
    assert ins[1]["brokerAddress"] == world.addrs[1]
    for r in (*ins.values(), *outs.values()):
        assert set(r) >= {
            "brokerId",
            "brokerAddress",
            "alive",
            "heartbeatAgeMs",
            "epoch",
            "maxOffset",
            "confirmOffset",
            "lagBytes",
            "brokerEpoch",
        }


def test_get_sync_state_set_by_cluster_table_yaml_and_alias(world: World) -> None:
    doc = _json(world, "getSyncStateSet", "-c", CLUSTER)
    assert [b["brokerName"] for b in doc["brokers"]] == ["broker-a", "broker-b"]
    proc = run("get-sync-state-set", "--cluster-name", CLUSTER, "-a", world.follower_address)
    assert proc.returncode == 0, proc.stderr
    assert "broker-a" in proc.stdout and "broker-b" in proc.stdout and "LAG BYTES" in proc.stdout
    assert "\x1b[" not in proc.stdout  # not a terminal: no colour
    proc = run("getSyncStateSet", "-b", "broker-a", "-a", world.follower_address, "-o", "yaml")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("version: 1\nbrokers:\n- clusterName: cluster-a\n")
    assert "  masterBrokerId: 1\n" in proc.stdout and "    lagBytes: 1000\n" in proc.stdout
    assert yaml.safe_load(proc.stdout)["brokers"][0]["masterBrokerId"] == 1


def test_not_found_and_usage_exit_codes(world: World) -> None:
    a = world.follower_address
    proc = run("getSyncStateSet", "-b", "nope", "-a", a)
    assert proc.returncode == 5 and proc.stderr.startswith("mqctl: error: broker set nope not found")
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert run("getSyncStateSet", "-c", "no-such-cluster", "-a", a).returncode == 5
    assert run("getSyncStateSet", "-b", "broker-a", "-c", CLUSTER, "-a", a).returncode == 2
    assert run("getSyncStateSet", "-a", a, "-o", "xml").returncode == 2
    assert run("getSyncStateSet", "--no-such-flag").returncode == 2
    assert run("getSyncStateSet", "-a", "not-an-address").returncode == 2
    proc = run("electMaster", "-a", a, "-c", CLUSTER, "-bn", "broker-a", "-b", "9", "--dry-run")
    assert proc.returncode == 5
    assert run("cleanBrokerMetadata", "-a", a, "-bn", "nope").returncode == 5


def test_controller_address_lists_and_env_default(world: World) -> None:
    dead = f"127.0.0.1:{free_port()}"
    semi = f"{dead};{world.follower_address}"
    proc = run("getSyncStateSet", "-b", "broker-a", "-a", semi, "-o", "json")
    assert proc.returncode == 0, proc.stderr
    comma = ",".join(n.grpc_address for n in world.cluster.nodes)
    proc = run("getSyncStateSet", "-o", "json", env={"MQCTL_CONTROLLER": comma})
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads(proc.stdout)["brokers"]) == 2


def test_unreachable_controller_exit_6_one_line_and_debug_traceback() -> None:
    dead = f"127.0.0.1:{free_port()}"
    proc = run("getSyncStateSet", "-a", dead, "--timeout", "1")
    assert proc.returncode == 6
    assert proc.stderr.startswith("mqctl: error: UNAVAILABLE (2104): no controller reachable at " + dead)
    assert proc.stderr.count("\n") == 1 and proc.stdout == ""
    proc = run("--debug", "getControllerMetaData", "-a", dead, "--timeout", "1")
    assert proc.returncode == 6 and "Traceback" in proc.stderr
    proc = run("quorum", "status", "-a", dead, "--timeout", "1")
    assert proc.returncode == 6
    proc = run("getControllerConfig", "-a", dead, "--timeout", "1", "-o", "json")
    assert proc.returncode == 6 and json.loads(proc.stdout)["controllers"][0]["error"]


def test_get_broker_epoch_live_via_controller(world: World) -> None:
    doc = _json(world, "getBrokerEpoch", "-b", "broker-a")
    # ids 1 and 2 answer; 3 is registered but its service is up too (the store is readable)
    by_id = {b["brokerId"]: b for b in doc["brokers"]}
    assert set(by_id) == {1, 2, 3}
    one = by_id[1]
    assert one["brokerAddr"] == world.addrs[1] and one["brokerName"] == "broker-a"
    assert one["clusterName"] == CLUSTER and one["maxOffset"] == MAX_OFFSET[1]
    assert one["epochs"] == [
        {"epoch": 1, "startOffset": 0, "endOffset": 4000},
        {"epoch": 2, "startOffset": 4000, "endOffset": MAX_OFFSET[1]},
    ]
    assert by_id[2]["epochs"][-1]["endOffset"] == MAX_OFFSET[2]
    proc = run("get-broker-epoch", "-c", CLUSTER, "-a", world.follower_address)
    # broker-b's address has no broker service: shown, and exit 6
    assert proc.returncode == 6, proc.stderr
    assert "broker service not answering" in proc.stderr and "127.0.0.1:1" in proc.stderr
    assert "START OFFSET" in proc.stdout and "broker-a" in proc.stdout


def test_get_broker_epoch_direct_address_and_yaml(world: World) -> None:
    proc = run("getBrokerEpoch", "--broker-addr", world.addrs[2], "-o", "yaml")
    assert proc.returncode == 0, proc.stderr
    assert "maxOffset: 5000" in proc.stdout and "- epoch: 2" in proc.stdout
    proc = run("getBrokerEpoch", "--broker-addr", f"127.0.0.1:{free_port()}", "-o", "json")
    assert proc.returncode == 6 and json.loads(proc.stdout)["brokers"][0]["error"]


def test_get_broker_epoch_offline_store_bak_fallback_and_crc(world: World, tmp_path) -> None:
    store = tmp_path / "store"
    shutil.copytree(world.stores[1], store)
    proc = run("getBrokerEpoch", "--store", str(store), "-o", "json")
    assert proc.returncode == 0, proc.stderr
    (b,) = json.loads(proc.stdout)["brokers"]
    assert b["brokerId"] == 1 and b["brokerName"] == "broker-a" and b["maxOffset"] == MAX_OFFSET[1]
    assert b["epochs"][-1] == {"epoch": 2, "startOffset": 4000, "endOffset": MAX_OFFSET[1]}
    assert b["source"].endswith("epochFileCheckpoint")
    # a corrupt main file (CRC) falls back to the .bak written by the previous update
    main = store / "epochFileCheckpoint"
    (store / "epochFileCheckpoint.bak").write_bytes(b"1\n0\n1-0\n")
    main.write_bytes(main.read_bytes().replace(b"2-4000", b"2-4001"))
    proc = run("getBrokerEpoch", "--store", str(store), "-o", "json")
    assert proc.returncode == 0, proc.stderr
    (b,) = json.loads(proc.stdout)["brokers"]
    assert b["source"].endswith(".bak") and b["epochs"] == [{"epoch": 1, "startOffset": 0, "endOffset": 6000}]
    assert any("CRC mismatch" in p for p in b["problems"])
    proc = run("getBrokerEpoch", "--store", str(store))
    assert proc.returncode == 0 and "CRC mismatch" in proc.stdout
    os.remove(store / "epochFileCheckpoint.bak")
    proc = run("getBrokerEpoch", "--store", str(store))
    assert proc.returncode == 4 and "CRC mismatch" in proc.stderr
    assert run("getBrokerEpoch", "--store", str(tmp_path / "missing")).returncode == 4
    assert run("getBrokerEpoch", "--store", str(store), "-b", "broker-a").returncode == 2


def test_get_controller_metadata_all_formats(world: World) -> None:
    doc = _json(world, "getControllerMetaData")
    assert doc["version"] == 1 and doc["isLeader"] is True
    assert doc["controllerLeaderAddress"] == world.leader_address == doc["answeredBy"]
    assert len(doc["peers"]) == 3 and sum(p["isLeader"] for p in doc["peers"]) == 1
    proc = run("get-controller-metadata", "-a", world.follower_address)
    assert proc.returncode == 0 and doc["controllerLeaderId"] in proc.stdout
    proc = run("getControllerMetaData", "-a", world.follower_address, "-o", "yaml")
    assert proc.returncode == 0 and f"controllerLeaderAddress: {world.leader_address}\n" in proc.stdout
    assert yaml.safe_load(proc.stdout)["controllerLeaderAddress"] == world.leader_address


def test_quorum_status_healthy(world: World) -> None:
    # a leader knows a follower's match index from its first answer after the election
    doc = wait_until(
        lambda: (
            (d := _json(world, "quorum", "status")) and all(p["matchIndex"] > 0 for p in d["peers"]) and d
        ),
        30,
        what="every peer's match index",
    )
    assert doc["healthy"] is True and doc["problems"] == [] and doc["statesAgree"] in (True, None)
    assert doc["leaderAddress"] == world.leader_address
    assert len(doc["nodes"]) == 3 and len(doc["peers"]) == 3
    assert {n["state"] for n in doc["nodes"]} == {"leader", "follower"}
    assert all(p["lag"] >= 0 and p["matchIndex"] > 0 for p in doc["peers"])
    proc = run("quorum", "status", "-a", world.follower_address)
    assert proc.returncode == 0 and "healthy" in proc.stdout and "replication" in proc.stdout
    proc = run("quorum", "status", "-a", world.follower_address, "-o", "yaml")
    assert proc.returncode == 0 and "healthy: true" in proc.stdout


def test_get_controller_config_each_address(world: World) -> None:
    addrs = ";".join(n.grpc_address for n in world.cluster.nodes[:2])
    proc = run("getControllerConfig", "-a", addrs, "-o", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert [c["address"] for c in doc["controllers"]] == addrs.split(";")
    assert {c["config"]["listenAddress"] for c in doc["controllers"]} == set(addrs.split(";"))
    assert doc["controllers"][0]["config"]["enableElectUncleanMaster"] == "false"
    proc = run("get-controller-config", "-a", addrs)
    assert proc.returncode == 0 and proc.stdout.count("============") == 4
    proc = run("getControllerConfig", "-a", addrs, "-o", "yaml")
    assert proc.returncode == 0 and "enableElectUncleanMaster: 'false'" in proc.stdout
    assert yaml.safe_load(proc.stdout)["controllers"][0]["config"]["enableElectUncleanMaster"] == "false"


def test_elect_master_dry_run_changes_nothing(world: World) -> None:
    before = world.client.get_replica_info("broker-a")
    doc = _json(world, "electMaster", "-c", CLUSTER, "-bn", "broker-a", "-b", "2", "--dry-run")
    plan = doc["plan"]
    assert doc["dryRun"] is True and doc["result"] is None and doc["version"] == 1
    assert plan["predictedMasterId"] == 2 and plan["designatedBrokerId"] == 2 and plan["dataLoss"] is False
    cands = {c["brokerId"]: c for c in plan["candidates"]}
    assert cands[2]["truncateBytes"] == {"1": MAX_OFFSET[1] - MAX_OFFSET[2], "3": None}  # 3: no heartbeat
    assert cands[1]["truncateBytes"]["2"] == 0 and cands[3]["electable"] is False
    assert plan["estimateBasis"] == "maxOffset"
    # exact truncation points from the broker services' epoch caches
    doc = _json(
        world, "electMaster", "-c", CLUSTER, "-bn", "broker-a", "-b", "3", "--dry-run", "--broker-epochs"
    )
    plan = doc["plan"]
    assert plan["estimateBasis"] == "epochCache" and plan["dataLoss"] is True
    three = next(c for c in plan["candidates"] if c["brokerId"] == 3)
    # id 3 only has epoch 1 up to 3000: the others keep min(their end of epoch 1, 3000) = 3000
    assert three["truncateBytes"] == {"1": MAX_OFFSET[1] - 3000, "2": MAX_OFFSET[2] - 3000}
    proc = run("elect-master", "-a", world.follower_address, "-c", CLUSTER, "-bn", "broker-a", "--dry-run")
    # the controller's choice while master 1 is alive: the real call's refusal, not "1"
    assert proc.returncode == 0 and "no new master" in proc.stdout and "dry run" in proc.stdout
    assert "without --dry-run: mqctl: error: CONTROLLER_MASTER_STILL_EXIST (2011)" in proc.stdout
    proc = run(
        "electMaster",
        "-a",
        world.follower_address,
        "-c",
        CLUSTER,
        "-bn",
        "broker-a",
        "-b",
        "2",
        "--dry-run",
        "-o",
        "yaml",
    )
    assert proc.returncode == 0 and "predictedMasterId: 2" in proc.stdout
    assert world.client.get_replica_info("broker-a") == before
