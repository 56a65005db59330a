"""The controller's refusals (and RegisterBroker's answers) as a RocketMQ broker reads them (issue 12):
each request built with RocketMQ's header and body classes (java/BrokerDriver.java) against one
`mqctl serve --remoting-port` node, and each answer's code, remark and header fields compared with
what RocketMQ's controller answers (controller/.../impl/manager/ReplicasInfoManager.java at the
reference commit: the remarks, and the response header a ControllerResult carries even on a refusal,
which DLedgerController's createResponseCommandWithHeader writes out field by field, nulls left out).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from harness import start_remoting
from interop_fixtures import CLUSTER, JavaBrokers, remoting_cluster

from mqctl.localgroup import wait_until

pytestmark = pytest.mark.slow

NAME = "broker-r"
MQCTL_EXTENSIONS = {"brokerEpoch"}  # docs/remoting.md: extension header fields, ignored by RocketMQ


def _answer(got: dict) -> tuple[int, str | None, dict]:
    ext = {k: v for k, v in got["ext"].items() if k not in MQCTL_EXTENSIONS}
    return got["code"], got.get("remark"), ext


def test_refusals_read_by_rocketmq_classes(java_classes: Path, tmp_path: Path) -> None:
    cluster, remoting = remoting_cluster(str(tmp_path / "controller"), 1)
    with cluster:
        start_remoting(cluster, remoting)
        brokers = JavaBrokers(java_classes, remoting, tmp_path)
        try:
            _refusals(brokers)
        finally:
            brokers.close()


def _refusals(brokers: JavaBrokers) -> None:
    for _ in range(3):
        brokers.add(NAME)
    wait_until(lambda: brokers.call("leader")["leader"], 20, what="the leader's remoting address")
    call = brokers.call
    alter_refused = {"newSyncStateSetEpoch": "0"}  # AlterSyncStateSetResponseHeader's int, unset
    names = {"clusterName": CLUSTER, "brokerName": NAME}  # Apply/RegisterBroker's response headers

    # --- a broker set nobody registered --------------------------------------------------------
    assert _answer(call("nextid", "broker-zz")) == (
        0,
        None,
        {"clusterName": CLUSTER, "brokerName": "broker-zz", "nextBrokerId": "1"},
    )
    assert _answer(call("apply", 1, 2)) == (
        2014,
        "Broker-set: broker-r hasn't been registered in controller, but broker try to apply brokerId: 2",
        names,
    )
    assert _answer(call("reg", 1, 1)) == (
        2010,
        "Broker-set: broker-r hasn't been registered in controller",
        names,
    )
    assert _answer(call("electas", NAME, 1)) == (2010, "Broker hasn't been registered", {})
    assert _answer(call("replicainfo", NAME)) == (2008, "Broker metadata is not existed", {})
    assert _answer(call("alteras", NAME, 1, 1, "1", 0)) == (
        2013,
        "Broker metadata is not existed",
        alter_refused,
    )

    # --- registered -----------------------------------------------------------------------------
    for i in (1, 2):
        assert call("register", i)["brokerId"] == i
    assert _answer(call("reg", 1, 7)) == (
        2010,
        "BrokerId: 7 hasn't been registered in broker-set: broker-r",
        names,
    )
    # a broker that restarts before it wrote its metadata file applies again with the same code: idempotent
    assert _answer(call("apply", 1, 1)) == (0, None, names)
    assert _answer(call("apply", 3, 1)) == (  # id 1 is taken, with another registerCheckCode
        2014,
        "Fail to apply brokerId: 1 in broker-set: broker-r",
        names,
    )

    # a 904 sent with an answer expected (ControllerRequestProcessor.handleBrokerHeartbeat)
    assert _answer(call("beatsync", 3, "noid")) == (2005, "Heart beat with empty brokerId", {})
    assert _answer(call("beatsync", 1)) == (0, "Heart beat success", {})
    call("beat", 1, "on")
    call("beat", 2, "on")
    brokers.wait_alive(NAME, {1, 2})
    assert call("elect", 1)["code"] == 0  # master 1, masterEpoch 1, SyncStateSet {1} epoch 1
    # RegisterBroker again (a broker restarting): the alive master in the header, the SyncStateSet in the body
    again = call("reg", 2, 2)
    master = {
        "masterBrokerId": "1",
        "masterAddress": brokers.state(1)["address"],
        "masterEpoch": "1",
        "syncStateSetEpoch": "1",
    }
    assert _answer(again) == (0, None, {**names, **master}), again
    assert again["body"] == '{"syncStateSet":[1],"syncStateSetEpoch":1}', again
    prefix = "Rejecting alter syncStateSet request because the "
    for args, code, remark in [
        (
            (1, 1, "1", 1),
            2013,
            "The newSyncStateSet is equal with oldSyncStateSet, no needed to update syncStateSet",
        ),
        ((2, 1, "1,2", 1), 2002, prefix + "current leader is:{1}, not {2}"),
        ((1, 5, "1,2", 1), 2000, prefix + "current master epoch is:{1}, not {5}"),
        ((1, 1, "1,2", 7), 2001, prefix + "current syncStateSet epoch is:{1}, not {7}"),
        ((1, 1, "1,9", 1), 2003, prefix + "replicas {9} don't exist"),
        ((1, 1, "2", 1), 2013, prefix + "newSyncStateSet don't contains origin leader {1}"),
    ]:
        assert _answer(call("alteras", NAME, *args)) == (code, remark, alter_refused), args

    # --- the master dies and no in-sync replica is left: RocketMQ's controller-triggered election
    # answers 2004 and records "no master" (masterEpoch + 1, the SyncStateSet kept) --------------
    call("beat", 1, "off")
    info = wait_until(
        lambda: (r := call("replicainfo", NAME)) and "masterBrokerId" not in r["ext"] and r,
        10,
        what="the broker set without a master",
    )
    assert _answer(info) == (0, None, {"masterEpoch": "2"}), info
    assert (info["syncStateSet"], info["syncStateSetEpoch"]) == ([1], 1), info
    # a broker's own try with an id outside the SyncStateSet: no candidate, and not the controller's
    # trigger, so 2012 with no header field
    assert _answer(call("elect", 2)) == (2012, "Failed to elect a new master", {})
    # without a master, RegisterBroker's header has no master fields
    assert _answer(call("reg", 2, 2)) == (0, None, names)
    assert [e["masterEpoch"] for e in brokers.notifies(2)] == [1]  # no 1008 without a new master
    assert brokers.other_events() == []
