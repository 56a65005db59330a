"""Commands that change the controller: electMaster, cleanBrokerMetadata, updateControllerConfig, quorum
changes; a token-protected group; health exit codes when nodes die. Each test builds its own group."""

from __future__ import annotations

import json

import pytest
from admin_fixtures import CLUSTER, MAX_OFFSET, World, build_world, close_world, run

from mqctl.localgroup import Node, free_port, wait_until

pytestmark = pytest.mark.slow


@pytest.fixture
def single(tmp_path) -> World:
    w = build_world(tmp_path, 1, ["--token", "s3cret"])
    yield w
    close_world(w)


@pytest.fixture
def trio(tmp_path) -> World:
    w = build_world(tmp_path, 3)
    yield w
    close_world(w)


def test_elect_master_guarded_then_refused_then_allowed(single: World) -> None:
    a = ["-a", single.cluster.addresses, "--token", "s3cret"]
    # in the SyncStateSet: elected
    proc = run("electMaster", *a, "-c", CLUSTER, "-bn", "broker-a", "-b", "2", "-o", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["result"]["masterBrokerId"] == 2 and doc["result"]["masterEpoch"] == 2
    assert doc["plan"]["candidates"][0]["truncateBytes"]["2"] == 0
    # the current master again: nothing to elect (the controller answers 2011): exit 0, saying so with
    # the controller's code and remark, as mqadmin reports it; mqadmin's spellings of the options
    proc = run("electMaster", *a, "--clusterName", CLUSTER, "--brokerName", "broker-a", "--brokerId", "2")
    assert proc.returncode == 0, proc.stderr
    assert "broker 2 is already the master of broker-a; nothing was changed" in proc.stderr
    assert "CONTROLLER_MASTER_STILL_EXIST (2011)" in proc.stderr and "still alive" in proc.stderr
    assert "nothing was changed: master 2" in proc.stdout
    doc = json.loads(run("electMaster", *a, "-c", CLUSTER, "-bn", "broker-a", "-b", "2", "-o", "json").stdout)
    assert doc["alreadyMaster"] is True and doc["expectedError"] is None and "error" not in doc
    assert doc["result"]["masterBrokerId"] == 2 and doc["result"]["masterEpoch"] == 2
    proc = run("electMaster", *a, "-c", CLUSTER, "-bn", "broker-a", "-b", "2", "--dry-run")
    assert proc.returncode == 0 and "broker 2 is already the master: nothing to elect" in proc.stdout
    proc = run("electMaster", *a, "-c", CLUSTER, "-bn", "broker-a", "-b", "2", "-o", "mqadmin")
    assert (proc.returncode, proc.stdout) == (0, ""), proc.stderr  # mqadmin prints nothing either
    # outside the SyncStateSet: mqctl's guard (exit 2) ...
    single.beater.beat("broker-a", 3, single.addrs[3], epoch=1, max_offset=MAX_OFFSET[3])
    proc = run("elect-master", *a, "-c", CLUSTER, "-bn", "broker-a", "-b", "3")
    assert proc.returncode == 2 and "--accept-data-loss" in proc.stderr
    assert "outside the SyncStateSet" in proc.stdout
    # ... then the controller's (unclean election disabled: 2012, exit 3, with the hint)
    proc = run("electMaster", *a, "-c", CLUSTER, "-bn", "broker-a", "-b", "3", "--accept-data-loss")
    assert proc.returncode == 3 and "(2012)" in proc.stderr and "enableElectUncleanMaster" in proc.stderr
    # without the token, the admin call is refused by the controller (2103)
    proc = run(
        "updateControllerConfig",
        "-a",
        single.cluster.addresses,
        "-k",
        "enableElectUncleanMaster",
        "-v",
        "true",
    )
    assert proc.returncode == 3 and "UNAUTHENTICATED (2103)" in proc.stderr
    proc = run("updateControllerConfig", *a, "-k", "enableElectUncleanMaster", "-v", "true", "-o", "json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["value"] == "true"
    assert single.client.get_config().config["enableElectUncleanMaster"] == "true"
    proc = run(
        "electMaster", *a, "-c", CLUSTER, "-bn", "broker-a", "-b", "3", "--accept-data-loss", "-o", "yaml"
    )
    assert proc.returncode == 0, proc.stderr
    assert "  masterBrokerId: 3\n" in proc.stdout and "dataLoss: true" in proc.stdout
    assert single.client.get_replica_info("broker-a").master_broker_id == 3


def test_elect_master_dry_run_gives_the_real_calls_answer(single: World) -> None:
    """Each dry run's expected answer (predictedMasterId, expectedError) is what the call then gives."""
    a = ["-a", single.cluster.addresses, "--token", "s3cret", "-c", CLUSTER, "-bn", "broker-a", "-o", "json"]

    def alive(bid: int) -> bool:
        info = single.client.get_sync_state_data(["broker-a"]).replicas_info_table["broker-a"]
        reps = (*info.in_sync_replicas, *info.not_in_sync_replicas)
        return next(r.alive for r in reps if r.broker_id == bid)

    def dry_then_real(*args: str, code: int) -> dict:
        dry = run("electMaster", *a, *args, "--dry-run")
        assert dry.returncode == 0, dry.stderr
        real = run("electMaster", *a, *args)
        assert real.returncode == code, real.stderr
        d, r = json.loads(dry.stdout), json.loads(real.stdout)
        assert d["expectedError"] == r.get("error") == r["expectedError"]
        assert d["plan"]["predictedMasterId"] == (r["result"] or {}).get("masterBrokerId")
        return d

    # id 2 is in the SyncStateSet but dead: the controller refuses to elect it (the dry run said 2 before)
    single.beater.silence("broker-a", 2)
    wait_until(lambda: not alive(2), 15, what="id 2 dead")
    doc = dry_then_real("-b", "2", code=3)
    assert doc["expectedError"]["controllerCode"] == 2012 and doc["plan"]["dataLoss"] is False
    assert {c["brokerId"]: c["electable"] for c in doc["plan"]["candidates"]} == {1: True, 2: False, 3: False}
    proc = run("electMaster", *a[:-2], "-b", "2", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "without --dry-run: mqctl: error: CONTROLLER_ELECT_MASTER_FAILED (2012)" in proc.stdout
    # the controller's choice while the master is alive: 2011
    assert dry_then_real(code=3)["expectedError"]["controllerCode"] == 2011
    # outside the SyncStateSet: mqctl's guard, then the controller's 2012 with the hint
    single.beater.beat("broker-a", 3, single.addrs[3], epoch=1, max_offset=MAX_OFFSET[3])
    wait_until(lambda: alive(3), 15, what="id 3 alive")
    assert dry_then_real("-b", "3", code=2)["expectedError"]["code"] == "USAGE"
    doc = dry_then_real("-b", "3", "--accept-data-loss", code=3)
    assert "enableElectUncleanMaster" in doc["expectedError"]["message"]
    # id 2 back: elected, as predicted
    single.beater.beat("broker-a", 2, single.addrs[2], epoch=2, max_offset=MAX_OFFSET[2], confirm_offset=5000)
    wait_until(lambda: alive(2), 15, what="id 2 alive")
    doc = dry_then_real("-b", "2", code=0)
    assert doc["expectedError"] is None and doc["plan"]["predictedMasterId"] == 2
    assert single.client.get_replica_info("broker-a").master_broker_id == 2


def test_update_controller_config_refusals(single: World) -> None:
    a = ["-a", single.cluster.addresses, "--token", "s3cret"]
    proc = run("updateControllerConfig", *a, "-k", "waitFor", "-v", "0")
    assert proc.returncode == 3 and "CONTROLLER_INVALID_REQUEST (2005)" in proc.stderr
    # an unknown key is ignored, as RocketMQ's controller ignores it (Configuration.update)
    proc = run("updateControllerConfig", *a, "-k", "noSuchKey", "-v", "1")
    assert proc.returncode == 0, proc.stderr
    assert "noSuchKey" not in single.client.get_config().config
    proc = run("update-controller-config", *a, "-k", "configStorePath", "-v", "/x")
    assert proc.returncode == 3 and "NO_PERMISSION (16)" in proc.stderr
    proc = run("updateControllerConfig", *a, "-k", "scanNotActiveBrokerInterval", "-v", "400")
    assert proc.returncode == 0 and "update controller config success!" in proc.stdout
    assert "scanNotActiveBrokerInterval : 400" in proc.stdout


def test_clean_broker_metadata_refuses_living_brokers(single: World) -> None:
    a = ["-a", single.cluster.addresses, "--token", "s3cret"]
    proc = run("cleanBrokerMetadata", *a, "-bn", "broker-a", "-b", "1;2")
    assert proc.returncode == 3
    assert f"id 1 ({single.addrs[1]}), id 2 ({single.addrs[2]}) are alive" in proc.stderr
    assert "-l" in proc.stderr
    proc = run("cleanBrokerMetadata", *a, "-bn", "broker-a")
    assert proc.returncode == 3 and "are alive" in proc.stderr
    proc = run("cleanBrokerMetadata", *a, "-bn", "broker-a", "-b", "7")
    assert proc.returncode == 5
    proc = run("cleanBrokerMetadata", *a, "-bn", "broker-a", "-b", "x;y")
    assert proc.returncode == 2
    # id 3 is dead: cleaned without -l
    proc = run("clean-broker-metadata", *a, "-bn", "broker-a", "-b", "3", "-c", CLUSTER, "-o", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["cleanedBrokerIds"] == [3] and doc["wholeBrokerSet"] is False
    info = single.client.get_sync_state_data(["broker-a"]).replicas_info_table["broker-a"]
    assert {r.broker_id for r in (*info.in_sync_replicas, *info.not_in_sync_replicas)} == {1, 2}
    # -l cleans a living broker set
    proc = run("cleanBrokerMetadata", *a, "-bn", "broker-b", "-l")
    assert proc.returncode == 0 and "clear broker broker-b metadata from controller success!" in proc.stdout
    assert "broker-b" not in single.client.get_sync_state_data().replicas_info_table


def test_quorum_transfer_remove_add_and_health_codes(trio: World, tmp_path) -> None:
    a = ["-a", trio.follower_address]
    old = trio.cluster.leader()
    assert old is not None
    target = next(n for n in trio.cluster.nodes if n is not old)
    proc = run("quorum", "transfer", target.raft_address, *a, "-o", "json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["leaderId"] == target.raft_address
    wait_until(lambda: trio.cluster.leader() is target, 10, what="the new leader")
    # remove a follower, then add it back
    gone = next(n for n in trio.cluster.nodes if n is not target)
    proc = run("quorum", "remove", gone.raft_address, "-a", target.grpc_address)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(run("quorum", "status", "-a", target.grpc_address, "-o", "json").stdout)
    assert gone.raft_address not in {p["raftAddress"] for p in doc["peers"]} and len(doc["peers"]) == 2
    proc = run("quorum", "remove", target.raft_address, "-a", target.grpc_address)
    assert proc.returncode == 3 and "transfer the leadership first" in proc.stderr
    proc = run("quorum", "add", gone.raft_address, "-a", target.grpc_address)
    assert proc.returncode == 0, proc.stderr

    def three_peers() -> bool:
        d = json.loads(run("quorum", "status", "-a", target.grpc_address, "-o", "json").stdout)
        return len(d["peers"]) == 3 and d["healthy"]

    wait_until(three_peers, 20, interval=0.5, what="the node back in the group")
    # a follower down: unhealthy (7), the table still printed
    down = next(n for n in trio.cluster.nodes if n is not target and n is not gone)
    down.kill()
    # two of three still form a quorum; the re-added node may first force an election (its term moved
    # on while it was out of the group), so wait for a leader before asking
    wait_until(lambda: trio.cluster.leader() is not None, 15, what="a leader of the remaining two")
    proc = run("quorum", "status", "-a", target.grpc_address, "--timeout", "5")
    # quorum holds: degraded (10), not unhealthy; the lost node's error printed once (its problem: line)
    assert proc.returncode == 10, proc.stderr
    assert "DEGRADED" in proc.stdout and "UNHEALTHY" not in proc.stdout + proc.stderr
    problem = next(line for line in proc.stdout.splitlines() if line.startswith("problem:"))
    assert down.grpc_address in problem and "unreachable" in problem
    detail = problem.split("unreachable", 1)[1].strip()
    assert (proc.stdout + proc.stderr).count(detail) == 1, (proc.stdout, proc.stderr)
    assert proc.stderr.startswith(
        "mqctl: error: DEGRADED: the leader has a quorum (2 of 3 nodes answer); 1 problem found"
    ), proc.stderr
    out = run("quorum", "status", "-a", target.grpc_address, "--timeout", "5", "-o", "json").stdout
    doc = json.loads(out)
    assert doc["status"] == "degraded" and doc["error"]["code"] == "DEGRADED"
    assert doc["error"]["exitCode"] == 10
    # the leader of the two says which peer it lost
    leader = trio.cluster.leader()
    assert leader is not None
    wait_until(
        lambda: f"cannot reach {down.raft_address}" in leader.log_text(),
        20,
        what="the leader naming the lost peer",
    )
    # two of three down: no leader (6)
    gone.kill()
    wait_until(lambda: trio.cluster.leader() is None, 15, what="no leader")
    proc = run("quorum", "status", "-a", target.grpc_address, "--timeout", "1", "-o", "json")
    assert proc.returncode == 6 and json.loads(proc.stdout)["healthy"] is False
    proc = run("getControllerMetaData", "-a", target.grpc_address, "--timeout", "2")
    assert proc.returncode == 6 and "no leader" in proc.stderr


def test_quorum_refuses_a_change_that_would_leave_no_live_quorum(trio: World) -> None:
    """With one of three nodes down, removing a live follower or adding a fourth node would leave a
    group whose majority cannot answer (it would stall until the dead node came back): refused with
    the node to bring back, on a real group; removing the dead node goes ahead."""
    leader = trio.cluster.leader()
    assert leader is not None
    live, dead = (n for n in trio.cluster.nodes if n is not leader)
    dead.kill()
    a = ["-a", leader.grpc_address]
    wanted = f"bring {dead.raft_address} back (or remove it) first"

    def dead_node_disconnected() -> bool:
        doc = json.loads(run("quorum", "status", *a, "--timeout", "1", "-o", "json").stdout)
        return any(p["raftAddress"] == dead.raft_address and not p["connected"] for p in doc["peers"])

    wait_until(dead_node_disconnected, 15, interval=0.3, what="the leader to lose the killed node")
    proc = run("quorum", "remove", live.raft_address, *a)
    assert proc.returncode == 3 and wanted in proc.stderr, proc.stderr
    proc = run("quorum", "add", f"127.0.0.1:{free_port()}", *a)
    assert proc.returncode == 3 and "fewer than the 3 a quorum needs" in proc.stderr, proc.stderr
    assert wanted in proc.stderr
    proc = run("quorum", "remove", dead.raft_address, *a)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(run("quorum", "status", *a, "-o", "json").stdout)
    assert sorted(p["raftAddress"] for p in doc["peers"]) == sorted([leader.raft_address, live.raft_address])


def test_quorum_add_a_new_node(tmp_path) -> None:
    w = build_world(tmp_path, 1)
    try:
        first = w.cluster.nodes[0]
        raft = f"127.0.0.1:{free_port()}"
        grpc_addr = f"127.0.0.1:{free_port()}"
        node = Node(
            "node1",
            grpc_addr,
            raft,
            str(tmp_path / "n1"),
            [
                "--listen",
                grpc_addr,
                "--raft",
                raft,
                "--data-dir",
                str(tmp_path / "n1"),
                "--heartbeat-timeout",
                "1500",
                "--scan-interval",
                "300",
                "--peers",
                first.raft_address,
            ],
            str(tmp_path / "n1.log"),
        )
        node.start()  # first: a group of two cannot commit the change without it
        try:
            proc = run("quorum", "add", raft, "-a", first.grpc_address, "-o", "json")
            assert proc.returncode == 0, proc.stderr
            assert sorted(json.loads(proc.stdout)["members"]) == sorted([first.raft_address, raft])

            def healthy_pair() -> bool:
                d = json.loads(run("quorum", "status", "-a", first.grpc_address, "-o", "json").stdout)
                return d["healthy"] and len(d["nodes"]) == 2 and d["statesAgree"] is True

            wait_until(healthy_pair, 30, interval=0.5, what="the new node caught up")
            # the new node answers reads through the leader
            proc = run("getSyncStateSet", "-b", "broker-a", "-a", grpc_addr, "-o", "json")
            assert proc.returncode == 0, proc.stderr + node.log_text()[-2000:]
        finally:
            node.stop()
    finally:
        close_world(w)
