"""RocketMQ brokers' side of the controller conversation, built from RocketMQ's own classes, against a
three-node `mqctl serve --remoting-port` group (issue 12), in both of RocketMQ's serialize types.

java/BrokerDriver.java runs three replicas of broker set broker-a in one JVM, each with its own
NettyRemotingClient sending what BrokerOuterAPI sends (GetNextBrokerId 1012, ApplyBrokerId 1013,
RegisterBroker 1003, one-way heartbeats 904 to every controller, ElectMaster 1002, AlterSyncStateSet 1001,
GetReplicaInfo 1004, GetSyncStateData 1006), and a NettyRemotingServer at its registered address where
the controller's NOTIFY_BROKER_ROLE_CHANGED (1008) arrive, decoded with RocketMQ's
NotifyBrokerRoleChangedRequestHeader and SyncStateSet. A replica never polls the controller: what it
knows of an election after its own requests comes from a 1008.

The scenario: registration; only a heartbeat makes a replica alive (no 1008 and 2006 for one that never
beat); the first election and the 2011s of the others; the master stops beating and the two others each
receive the 1008 naming the new master within heartbeatTimeoutMills + 1 s of its last heartbeat; the new
master alters the SyncStateSet with the epochs it learned from that 1008; the controller leader is
killed (-9), the new master stops beating, and the 1008 of that election, decided by the new controller
leader, reaches the last replica.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from harness import start_remoting
from interop_fixtures import (
    CLUSTER,
    HEARTBEAT_TIMEOUT_MS,
    JavaBrokers,
    remoting_address,
    remoting_cluster,
)

from mqctl.localgroup import wait_until

pytestmark = pytest.mark.slow

NAME = "broker-a"
# RocketMQ's 1008 is sent after the election is decided; the deciding controller learns of the master's
# death heartbeatTimeoutMills after its last heartbeat (then scans, decides, commits, sends)
NOTIFY_WITHIN_MS = HEARTBEAT_TIMEOUT_MS + 1000


def _expect_1008(
    event: dict, *, master: int, address: str, master_epoch: int, ss_epoch: int, serialize_type: str
) -> None:
    """Header fields and SyncStateSet body as RocketMQ's classes decoded them (ControllerManager's
    doNotifyBrokerRoleChanged: header masterAddress/masterBrokerId/masterEpoch/syncStateSetEpoch, body
    SyncStateSet({master}, syncStateSetEpoch), one-way)."""
    assert event["oneway"] is True, event
    assert event["serializeType"] == serialize_type, event
    got = (event["masterBrokerId"], event["masterAddress"], event["masterEpoch"], event["syncStateSetEpoch"])
    assert got == (master, address, master_epoch, ss_epoch), event
    assert (event["syncStateSet"], event["bodySyncStateSetEpoch"]) == ([master], ss_epoch), event
    assert set(event["ext"]) == {"masterAddress", "masterBrokerId", "masterEpoch", "syncStateSetEpoch"}, event


@pytest.mark.parametrize("serialize_type", ["JSON", "ROCKETMQ"])
def test_rocketmq_replicas_fail_over_behind_three_mqctl_nodes(
    java_classes: Path, tmp_path: Path, serialize_type: str
) -> None:
    env = {"ROCKETMQ_SERIALIZE_TYPE": serialize_type}  # read by mqctl serve and by RocketMQ's classes
    cluster, remoting = remoting_cluster(str(tmp_path / "controllers"), 3)
    with cluster:
        start_remoting(cluster, remoting, env)
        brokers = JavaBrokers(java_classes, remoting, tmp_path, env)
        try:
            assert brokers.serialize_type == serialize_type
            _scenario(cluster, remoting, brokers, serialize_type)
        finally:
            brokers.close()


def _scenario(cluster, remoting: list[str], brokers: JavaBrokers, serialize_type: str) -> None:
    addr = {i: brokers.add(NAME) for i in (1, 2, 3)}
    leader = cluster.wait_for_leader()
    wait_until(
        lambda: brokers.call("leader")["leader"] == remoting_address(cluster, remoting, leader),
        20,
        what="1005 naming the leader's remoting address",
    )

    # --- registration, as ReplicasManager.register does it -------------------------------------
    for i in (1, 2, 3):
        got = brokers.call("register", i)
        assert got["brokerId"] == i, got
        for step in ("nextBrokerId", "applyBrokerId", "registerBroker"):
            assert got[step]["code"] == 0, got
            assert got[step]["serializeType"] == serialize_type, got  # the server's configured type
        assert got["nextBrokerId"]["ext"] == {
            "clusterName": CLUSTER,
            "brokerName": NAME,
            "nextBrokerId": str(i),
        }
        assert got["applied"] == {"clusterName": CLUSTER, "brokerName": NAME}
        # no master yet: the header has clusterName and brokerName only (and mqctl's brokerEpoch)
        assert got["registered"] == {
            "clusterName": CLUSTER,
            "brokerName": NAME,
            "syncStateSet": [],
            "bodySyncStateSetEpoch": 0,
        }, got
    for i, offset in ((1, 100), (2, 100), (3, 200)):
        brokers.call("offset", i, offset)

    # --- only a heartbeat makes a replica alive: 1 and 2 beat, 3 does not yet ---------------------
    brokers.call("beat", 1, "on")
    brokers.call("beat", 2, "on")
    brokers.wait_alive(NAME, {1, 2})
    elected = brokers.call("elect", 1)
    assert (elected["code"], elected.get("remark")) == (0, None), elected
    assert elected["ext"] == {
        "masterBrokerId": "1",
        "masterAddress": addr[1],
        "masterEpoch": "1",
        "syncStateSetEpoch": "1",
    }, elected
    assert elected["syncStateSet"] == [1]
    assert elected["brokerMemberGroup"] == {
        "cluster": CLUSTER,
        "brokerName": NAME,
        "brokerAddrs": {"1": addr[1], "2": addr[2], "3": addr[3]},
    }
    for i in (1, 2):  # every alive member of the group, the new master included
        event = brokers.wait_notify(
            i, lambda e: e["masterEpoch"] == 1, 10, f"the first election's 1008 at {i}"
        )
        _expect_1008(
            event, master=1, address=addr[1], master_epoch=1, ss_epoch=1, serialize_type=serialize_type
        )
    for i in (2, 3):  # the others' own try (ReplicasManager.brokerElect): the master still exists
        still = brokers.call("elect", i)
        assert still["code"] == 2011, still
        assert still["remark"] == (
            "The old master 1 is still alive, not need to elect new master for broker broker-a"
        )
        assert still["ext"] == elected["ext"]
        assert still["syncStateSet"] == [1] and "brokerMemberGroup" not in still
        assert brokers.state(i)["masterEpoch"] == 1  # learned from the 2011, as a broker does
    refused = brokers.call("alter", 1, "1,2,3")
    assert (refused["code"], refused["remark"]) == (
        2006,
        "Rejecting alter syncStateSet request because the replicas {3} don't alive",
    ), refused
    assert refused["ext"] == {"newSyncStateSetEpoch": "0"}, refused
    table = brokers.call("syncstatedata", NAME)["replicasInfoTable"][NAME]
    assert [(r["brokerId"], r["alive"]) for r in table["inSyncReplicas"]] == [(1, True)]
    assert [(r["brokerId"], r["alive"]) for r in table["notInSyncReplicas"]] == [(2, True), (3, False)]
    assert not brokers.notifies(3), "a replica that never beat got a 1008"

    brokers.call("beat", 3, "on")
    brokers.wait_alive(NAME, {1, 2, 3})
    altered = brokers.call("alter", 1, "1,2,3")
    assert (altered["code"], altered["ext"], altered["syncStateSet"], altered["bodySyncStateSetEpoch"]) == (
        0,
        {"newSyncStateSetEpoch": "2"},
        [1, 2, 3],
        2,
    ), altered
    info = brokers.call("replicainfo", NAME)
    assert (
        info["code"],
        info["masterBrokerId"],
        info["masterAddress"],
        info["masterEpoch"],
        info["syncStateSet"],
        info["syncStateSetEpoch"],
    ) == (0, 1, addr[1], 1, [1, 2, 3], 2), info
    table = brokers.call("syncstatedata", NAME)["replicasInfoTable"][NAME]
    got = (table["masterBrokerId"], table["masterAddress"], table["masterEpoch"], table["syncStateSetEpoch"])
    assert got == (1, addr[1], 1, 2), table
    assert [r["toString"] for r in table["inSyncReplicas"]] == [
        f"ReplicaIdentity{{brokerName='{NAME}', brokerId={i}, brokerAddress='{addr[i]}', alive=true}}"
        for i in (1, 2, 3)
    ]
    assert table["notInSyncReplicas"] == []

    # --- the master stops beating: 3 (epoch 1 like 2, offset 200 > 100) is elected -------------
    last_beat = brokers.call("beat", 1, "off")["lastBeat"]
    for i in (2, 3):
        event = brokers.wait_notify(
            i,
            lambda e: e["masterEpoch"] == 2,
            NOTIFY_WITHIN_MS / 1000 + 10,
            f"the failover's 1008 at replica {i}",
        )
        _expect_1008(
            event, master=3, address=addr[3], master_epoch=2, ss_epoch=3, serialize_type=serialize_type
        )
        print(
            f"[{serialize_type}] failover: 1008 at replica {i} {event['at'] - last_beat} ms "
            "after the last beat"
        )
        assert event["at"] - last_beat <= NOTIFY_WITHIN_MS, (
            f"replica {i} learned of the new master {event['at'] - last_beat} ms after the old master's last "
            f"heartbeat (heartbeatTimeoutMills {HEARTBEAT_TIMEOUT_MS} + 1 s allowed)"
        )
    # the new master alters the SyncStateSet with the epochs it learned from the 1008 only
    state = brokers.state(3)
    assert (state["isMaster"], state["masterEpoch"], state["syncStateSetEpoch"]) == (True, 2, 3), state
    altered = brokers.call("alter", 3, "2,3")
    assert (altered["code"], altered["ext"], altered["syncStateSet"]) == (
        0,
        {"newSyncStateSetEpoch": "4"},
        [2, 3],
    ), altered

    # --- a controller leader change, then the next election -----------------------------------
    old = cluster.wait_for_leader()
    old.kill()
    new = cluster.wait_for_leader(exclude=old)
    wait_until(
        lambda: brokers.call("leader")["leader"] == remoting_address(cluster, remoting, new),
        20,
        what="1005 naming the new leader's remoting address",
    )
    last_beat = brokers.call("beat", 3, "off")["lastBeat"]
    event = brokers.wait_notify(
        2,
        lambda e: e["masterEpoch"] == 3,
        NOTIFY_WITHIN_MS / 1000 + 10,
        "the 1008 of the election decided by the new controller leader",
    )
    _expect_1008(event, master=2, address=addr[2], master_epoch=3, ss_epoch=5, serialize_type=serialize_type)
    print(f"[{serialize_type}] after the leader kill: 1008 {event['at'] - last_beat} ms after the last beat")
    assert event["at"] - last_beat <= NOTIFY_WITHIN_MS, (
        f"replica 2 learned of the new master {event['at'] - last_beat} ms after the old master's last "
        "heartbeat"
    )
    info = brokers.call("replicainfo", NAME)
    assert (
        info["masterBrokerId"],
        info["masterAddress"],
        info["masterEpoch"],
        info["syncStateSet"],
        info["syncStateSetEpoch"],
    ) == (2, addr[2], 3, [2], 5), info

    # dead replicas are not notified (RocketMQ notifies the active members only); nothing came over a
    # replica's own connection to a controller, and every 1008 decoded
    assert [e["masterEpoch"] for e in brokers.notifies(1)] == [1]
    assert [e["masterEpoch"] for e in brokers.notifies(3)] == [2]
    assert [e["masterEpoch"] for e in brokers.notifies(2)] == [1, 2, 3]
    assert brokers.other_events() == []
