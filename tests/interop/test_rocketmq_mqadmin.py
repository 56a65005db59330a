"""RocketMQ's own mqadmin (../shared/rocketmq-java/lib/mqadmin.jar: the seven controller-mode
sub-commands of MQAdminStartup, RocketMQ's classes compiled unchanged) against one and against three
`mqctl serve --remoting-port` nodes (issue 12): exit status and output, checked against the state the
test set up.

The state: java/BrokerDriver.java runs RocketMQ-built replicas (each with a NettyRemotingServer at its
registered address, answering GET_BROKER_EPOCH_CACHE 1007 and receiving 1008) and a name-server stand-in
answering GET_BROKER_CLUSTER_INFO (106) from the replicas' roles, which getBrokerEpoch and
getSyncStateSet -c read through `-n`.

- broker-a: ids 1, 2, 3 at offsets 1000, 900, 800, all beating; 1 elected, SyncStateSet {1, 2} (epoch 2);
- broker-b: ids 1, 2, both beating; 1 elected, SyncStateSet {1, 2} (electMaster moves it to 2);
- broker-c: id 1, beating, never elected (cleanBrokerMetadata removes it).

With three nodes, `-a` names a follower where mqadmin asks the leader through 1005 (getSyncStateSet,
electMaster, cleanBrokerMetadata, getControllerMetaData), and every node where it asks each
(getControllerConfig; updateControllerConfig with the leader's address, and with every address for the
documented difference: followers refuse 1009). The tests of a module share one deployment per size and
run in the order written (the later ones change broker-b and broker-c).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from interop_fixtures import (
    CLUSTER,
    JavaBrokers,
    mqadmin,
    remoting_address,
    remoting_cluster,
    replica_identity,
    start_cluster,
)

from mqctl.remoting.client import RemotingControllerClient
from mqctl.testing import LocalCluster, metadata, wait_until

pytestmark = pytest.mark.slow

OFFSETS = {1: 1000, 2: 900, 3: 800}  # broker-a's replicas (driver replicas 1..3 = controller ids 1..3)


@dataclass
class Deployment:
    size: int
    cluster: LocalCluster
    remoting: list[str]
    brokers: JavaBrokers
    addr: dict[int, str]  # driver replica -> its registered address

    def leader_remoting(self) -> str:
        return remoting_address(self.cluster, self.remoting, self.cluster.wait_for_leader())

    def asked(self) -> str:
        """The `-a` of the commands that find the leader through 1005: a follower when there is one."""
        leader = self.leader_remoting()
        return next((a for a in self.remoting if a != leader), leader)

    def all(self) -> str:
        return ";".join(self.remoting)


@pytest.fixture(scope="module", params=[1, 3], ids=["1-node", "3-nodes"])
def dep(request: pytest.FixtureRequest, java_classes: Path,
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    size = request.param
    tmp = tmp_path_factory.mktemp(f"mqadmin-{size}")
    cluster, remoting = remoting_cluster(str(tmp / "controllers"), size)
    with cluster:
        start_cluster(cluster, remoting)
        brokers = JavaBrokers(java_classes, remoting, tmp)
        try:
            addr = {i: brokers.add(name) for i, name in
                    enumerate(["broker-a"] * 3 + ["broker-b"] * 2 + ["broker-c"], start=1)}
            d = Deployment(size, cluster, remoting, brokers, addr)
            wait_until(lambda: brokers.call("leader")["leader"] == d.leader_remoting(), 20,
                       what="1005 naming the leader's remoting address")
            for i in addr:
                assert brokers.call("register", i)["registerBroker"]["code"] == 0
            for i, offset in OFFSETS.items():
                brokers.call("offset", i, offset)
            for i in addr:
                brokers.call("beat", i, "on")
            brokers.wait_alive("broker-a", {1, 2, 3})
            brokers.wait_alive("broker-b", {1, 2})
            brokers.wait_alive("broker-c", {1})
            for master, others in ((1, (2, 3)), (4, (5,))):
                assert brokers.call("elect", master)["code"] == 0
                for i in others:  # the slaves' own try: 2011, and they know the master epoch
                    assert brokers.call("elect", i)["code"] == 2011
                assert brokers.call("alter", master, "1,2")["code"] == 0
            yield d
        finally:
            brokers.close()


def _ok(p) -> str:
    assert p.returncode == 0, f"mqadmin exited {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    return str(p.stdout)


def _failed(p, code: int, remark: str) -> None:
    """mqadmin threw (exit 1) with RocketMQ's MQBrokerException/MQClientException text for code and remark."""
    assert p.returncode == 1, f"mqadmin exited {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    assert f"CODE: {code}  DESC: {remark}\n" in p.stderr, p.stderr


def _blocks(text: str, marker: str) -> dict[str, str]:
    """mqadmin's per-item blocks, each starting with `marker` + name, by name."""
    parts = text.split(marker)
    assert parts[0] == "", text
    return {p.split("\n", 1)[0].split("\t", 1)[0]: marker + p for p in parts[1:]}


def _sync_state_set_block(name: str, master: int | None, master_addr: str | None, master_epoch: int,
                          ss_epoch: int, in_sync: list[tuple[int, str, bool]],
                          not_in_sync: list[tuple[int, str, bool]]) -> str:
    """GetSyncStateSetSubCommand.printData for one broker set (Java prints null for a null %d/%s)."""
    text = (f"\n#brokerName\t{name}\n#MasterBrokerId\t{'null' if master is None else master}\n"
            f"#MasterAddr\t{master_addr or 'null'}\n#MasterEpoch\t{master_epoch}\n"
            f"#SyncStateSetEpoch\t{ss_epoch}\n#SyncStateSetNums\t{len(in_sync)}\n")
    text += "".join(f"\nInSyncReplica:\t{replica_identity(name, *r)}\n" for r in in_sync)
    text += "".join(f"\nNotInSyncReplica:\t{replica_identity(name, *r)}\n" for r in not_in_sync)
    return text


def test_getControllerMetaData(dep: Deployment) -> None:
    leader = dep.cluster.wait_for_leader()
    out = _ok(mqadmin("getControllerMetaData", "-a", dep.asked()))
    head = (f"\n#ControllerGroup\t{metadata(leader.grpc_address)['group']}"
            f"\n#ControllerLeaderId\t{leader.raft_address}"
            f"\n#ControllerLeaderAddress\t{dep.leader_remoting()}")
    assert out.startswith(head) and out.endswith("\n"), out
    # DLedger's "id:address;" per member: mqctl's ids are the Raft addresses (docs/remoting.md)
    peers = out[len(head):-1].split("\n#Peer:\t")
    assert peers[0] == "" and sorted(peers[1:]) == sorted(
        f"{n.raft_address}:{a}" for n, a in zip(dep.cluster.nodes, dep.remoting, strict=True)), out


def test_getSyncStateSet(dep: Deployment) -> None:
    a = dep.addr
    broker_a = _sync_state_set_block("broker-a", 1, a[1], 1, 2, [(1, a[1], True), (2, a[2], True)],
                                     [(3, a[3], True)])
    broker_b = _sync_state_set_block("broker-b", 1, a[4], 1, 2, [(1, a[4], True), (2, a[5], True)], [])
    broker_c = _sync_state_set_block("broker-c", None, None, 0, 0, [], [(1, a[6], True)])
    assert _ok(mqadmin("getSyncStateSet", "-a", dep.asked(), "-b", "broker-a")) == broker_a
    assert _ok(mqadmin("getSyncStateSet", "-a", dep.asked(), "-b", "broker-c")) == broker_c
    # -c: the cluster's broker sets from the name server (-n), then one 1006 for all of them
    out = _ok(mqadmin("getSyncStateSet", "-a", dep.asked(), "-c", CLUSTER, namesrv=dep.brokers.namesrv))
    expected = {"broker-a": broker_a, "broker-b": broker_b, "broker-c": broker_c}
    assert _blocks(out, "\n#brokerName\t") == expected, out


def test_getBrokerEpoch(dep: Deployment) -> None:
    """mqadmin asks the brokers (1007), found through the name server; their epochs are what the
    controller told them: epoch 1 started where each replica's log ended when it learned of it."""
    out = _ok(mqadmin("getBrokerEpoch", "-b", "broker-a", namesrv=dep.brokers.namesrv))
    expected = {}
    for i, config_id in ((1, 0), (2, 2), (3, 3)):  # the master's config id is 0 (MixAll.MASTER_ID)
        expected[dep.addr[i]] = (
            f"\n#clusterName\t{CLUSTER}\n#brokerName\tbroker-a\n#brokerAddr\t{dep.addr[i]}\n#brokerId\t{config_id}"
            f"\n#Epoch: EpochEntry{{epoch=1, startOffset={OFFSETS[i]}, endOffset={OFFSETS[i]}}}\n")
    parts = out.split("\n#clusterName\t")
    assert parts[0] == "" and len(parts) == 4, out
    blocks = {re.search(r"#brokerAddr\t(\S+)", p)[1]: "\n#clusterName\t" + p  # type: ignore[index]
              for p in parts[1:]}
    assert blocks == expected, out


def _properties(out: str) -> dict[str, dict[str, str]]:
    """GetControllerConfigSubCommand's "============%s============\\n" + "%-50s=  %s\\n" per property."""
    configs: dict[str, dict[str, str]] = {}
    current: dict[str, str] = {}
    for line in out.splitlines():
        m = re.fullmatch(r"============(.*)============", line)
        if m:
            current = configs.setdefault(m[1], {})
            continue
        key, sep, value = line.partition("=  ")
        assert sep and len(key) >= 50, f"not a property line: {line!r}"
        current[key.rstrip()] = value
    return configs


def test_getControllerConfig(dep: Deployment) -> None:
    """Every node asked (-a lists them all), and each prints what that node answers to 1010."""
    configs = _properties(_ok(mqadmin("getControllerConfig", "-a", dep.all())))
    assert sorted(configs) == sorted(dep.remoting)
    for address in dep.remoting:
        with RemotingControllerClient([address]) as client:
            assert configs[address] == client.get_config(address).config, address
        # a few of RocketMQ's ControllerConfig keys, as RocketMQ names and formats them
        assert configs[address]["enableElectUncleanMaster"] == "false"
        assert configs[address]["notifyBrokerRoleChanged"] == "true"


def test_updateControllerConfig(dep: Deployment) -> None:
    """mqctl replicates 1009 through the Raft log and only the leader takes it (a deliberate difference,
    docs/remoting.md: RocketMQ's every node changes itself, so mqadmin sends it to each -a address):
    given the leader's address the value reaches every node; given every address, the followers'
    2007 makes mqadmin exit 1."""
    leader = dep.leader_remoting()
    try:
        out = _ok(mqadmin("updateControllerConfig", "-a", leader,
                          "-k", "enableElectUncleanMaster", "-v", "true"))
        assert out == f"update controller config success![{leader}]\nenableElectUncleanMaster : true\n"

        def everywhere() -> bool:
            configs = _properties(_ok(mqadmin("getControllerConfig", "-a", dep.all())))
            return {a: c["enableElectUncleanMaster"] for a, c in configs.items()} == dict.fromkeys(
                dep.remoting, "true")

        wait_until(everywhere, 20, interval=0.5, what="enableElectUncleanMaster=true on every node")
        if dep.size > 1:
            grpc_leader = dep.cluster.wait_for_leader().grpc_address
            _failed(mqadmin("updateControllerConfig", "-a", dep.all(), "-k", "enableElectUncleanMaster",
                            "-v", "true"),
                    2007, f"The controller is not in leader state; leader is {grpc_leader}")
    finally:
        with RemotingControllerClient(dep.remoting, timeout=20) as client:
            client.update_config({"enableElectUncleanMaster": "false"}, leader)


def test_updateControllerConfig_black_list(dep: Deployment) -> None:
    """rocketmqHome: one of the keys ControllerRequestProcessor adds to configBlackList itself
    (test_controller_config_interop.py tries configStorePath)."""
    _failed(mqadmin("updateControllerConfig", "-a", dep.leader_remoting(), "-k", "rocketmqHome",
                    "-v", "/tmp/x"), 16, "Can not update config in black list.")


def test_electMaster(dep: Deployment) -> None:
    a, b = dep.addr, dep.brokers
    out = _ok(mqadmin("electMaster", "-a", dep.asked(), "-b", "2", "-bn", "broker-b", "-c", CLUSTER))
    # the client reads the ElectMasterResponseBody as a BrokerMemberGroup: no "#Broker" lines (RocketMQ's too)
    assert out == (f"\n#ClusterName\t{CLUSTER}\n#BrokerName\tbroker-b\n#BrokerMasterAddr\t{a[5]}"
                   "\n#MasterEpoch\t2\n#SyncStateSetEpoch\t3\n"), out
    for i in (4, 5):  # an admin's election is pushed to every alive replica too
        event = b.wait_notify(i, lambda e: e["masterEpoch"] == 2, 10,
                              f"1008 after electMaster at replica {i}")
        got = (event["masterBrokerId"], event["masterAddress"], event["syncStateSet"])
        assert got == (2, a[5], [2]), event
    _failed(mqadmin("electMaster", "-a", dep.asked(), "-b", "2", "-bn", "broker-b", "-c", CLUSTER),
            2011, "The old master 2 is still alive, not need to elect new master for broker broker-b")
    _failed(mqadmin("electMaster", "-a", dep.asked(), "-b", "9", "-bn", "broker-b", "-c", CLUSTER),
            2012, "Failed to elect a new master")
    _failed(mqadmin("electMaster", "-a", dep.asked(), "-b", "1", "-bn", "broker-zz", "-c", CLUSTER),
            2010, "Broker hasn't been registered")


def test_cleanBrokerMetadata(dep: Deployment) -> None:
    b = dep.brokers
    clean = ("cleanBrokerMetadata", "-a", dep.asked(), "-bn", "broker-c", "-c", CLUSTER, "-b", "1")
    _failed(mqadmin(*clean), 2009, "Broker [broker-c,  1] is still alive, clean up failure")
    b.call("beat", 6, "off")
    wait_until(lambda: not b.call("syncstatedata", "broker-c")["replicasInfoTable"]["broker-c"]
               ["notInSyncReplicas"][0]["alive"], 10, what="broker-c's replica dead")
    assert _ok(mqadmin(*clean)) == "clear broker broker-c metadata from controller success! \n"
    # gone: 1004 answers 2008 and getSyncStateSet prints nothing for it
    assert b.call("replicainfo", "broker-c")["code"] == 2008
    assert _ok(mqadmin("getSyncStateSet", "-a", dep.asked(), "-b", "broker-c")) == ""
    _failed(mqadmin("cleanBrokerMetadata", "-a", dep.asked(), "-bn", "broker-x", "-l"),
            2009, "Broker broker-x is not existed,clean broker data failure.")
    # broker-a has a master: without ids nothing is cleaned; ids that do not parse are refused by the
    # controller (mqadmin's own check of the format never runs: a Stream without a terminal operation)
    a = ("cleanBrokerMetadata", "-a", dep.asked(), "-bn", "broker-a", "-c", CLUSTER)
    _failed(mqadmin(*a), 2009, "Broker broker-a is still alive, clean up failure")
    _failed(mqadmin(*a, "-b", "3;x"), 2009, "Please set the option <brokerControllerIdsToClean> according to "
            'the format, exception: java.lang.NumberFormatException: For input string: "x"')
    assert b.other_events() == []
