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

After each mqadmin sub-command, mqctl's own command with mqadmin's spellings (camelCase long options,
-n for the name server) and `-o mqadmin` is run on the same state, and its stdout compared with
mqadmin's, byte for byte (docs/admin.md#mqadmin-compatibility).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from harness import start_remoting
from interop_fixtures import (
    CLUSTER,
    JavaBrokers,
    mqadmin,
    remoting_address,
    remoting_cluster,
    replica_identity,
)

from mqctl.localgroup import LocalCluster, metadata, wait_until
from mqctl.remoting.client import RemotingControllerClient

pytestmark = pytest.mark.slow

MQCTL = str(Path(sys.executable).with_name("mqctl"))
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
def dep(
    request: pytest.FixtureRequest, java_classes: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    size = request.param
    tmp = tmp_path_factory.mktemp(f"mqadmin-{size}")
    cluster, remoting = remoting_cluster(str(tmp / "controllers"), size)
    with cluster:
        start_remoting(cluster, remoting)
        brokers = JavaBrokers(java_classes, remoting, tmp)
        try:
            addr = {
                i: brokers.add(name)
                for i, name in enumerate(["broker-a"] * 3 + ["broker-b"] * 2 + ["broker-c"], start=1)
            }
            d = Deployment(size, cluster, remoting, brokers, addr)
            wait_until(
                lambda: brokers.call("leader")["leader"] == d.leader_remoting(),
                20,
                what="1005 naming the leader's remoting address",
            )
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


def mqctl(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """mqctl over RocketMQ remoting (as against a RocketMQ controller); --timeout rides out a
    controller election on a busy machine."""
    return subprocess.run(
        [MQCTL, *args, "--protocol", "remoting", "--timeout", "30"],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _same_as_mqadmin(mq: subprocess.CompletedProcess[str], mine: subprocess.CompletedProcess[str]) -> str:
    """mqctl's -o mqadmin printed exactly what mqadmin printed (both succeeded)."""
    assert mine.returncode == 0, f"mqctl exited {mine.returncode}\n{mine.stdout}\n{mine.stderr}"
    expected = _ok(mq)
    assert mine.stdout.splitlines() == expected.splitlines(), f"mqctl:\n{mine.stdout}\nmqadmin:\n{expected}"
    assert mine.stdout == expected
    return expected


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


def _sync_state_set_block(
    name: str,
    master: int | None,
    master_addr: str | None,
    master_epoch: int,
    ss_epoch: int,
    in_sync: list[tuple[int, str, bool]],
    not_in_sync: list[tuple[int, str, bool]],
) -> str:
    """GetSyncStateSetSubCommand.printData for one broker set (Java prints null for a null %d/%s)."""
    text = (
        f"\n#brokerName\t{name}\n#MasterBrokerId\t{'null' if master is None else master}\n"
        f"#MasterAddr\t{master_addr or 'null'}\n#MasterEpoch\t{master_epoch}\n"
        f"#SyncStateSetEpoch\t{ss_epoch}\n#SyncStateSetNums\t{len(in_sync)}\n"
    )
    text += "".join(f"\nInSyncReplica:\t{replica_identity(name, *r)}\n" for r in in_sync)
    text += "".join(f"\nNotInSyncReplica:\t{replica_identity(name, *r)}\n" for r in not_in_sync)
    return text


def test_getControllerMetaData(dep: Deployment) -> None:
    leader = dep.cluster.wait_for_leader()
    out = _ok(mqadmin("getControllerMetaData", "-a", dep.asked()))
    head = (
        f"\n#ControllerGroup\t{metadata(leader.grpc_address)['group']}"
        f"\n#ControllerLeaderId\t{leader.raft_address}"
        f"\n#ControllerLeaderAddress\t{dep.leader_remoting()}"
    )
    assert out.startswith(head) and out.endswith("\n"), out
    # DLedger's "id:address;" per member: mqctl's ids are the Raft addresses (docs/remoting.md)
    peers = out[len(head) : -1].split("\n#Peer:\t")
    assert peers[0] == "" and sorted(peers[1:]) == sorted(
        f"{n.raft_address}:{a}" for n, a in zip(dep.cluster.nodes, dep.remoting, strict=True)
    ), out


def test_mqctl_getControllerMetaData_as_mqadmin(dep: Deployment) -> None:
    for asked in dict.fromkeys([dep.asked(), dep.leader_remoting()]):
        _same_as_mqadmin(
            mqadmin("getControllerMetaData", "-a", asked),
            mqctl("getControllerMetaData", "--controllerAddress", asked, "-o", "mqadmin"),
        )


def test_getSyncStateSet(dep: Deployment) -> None:
    a = dep.addr
    broker_a = _sync_state_set_block(
        "broker-a", 1, a[1], 1, 2, [(1, a[1], True), (2, a[2], True)], [(3, a[3], True)]
    )
    broker_b = _sync_state_set_block("broker-b", 1, a[4], 1, 2, [(1, a[4], True), (2, a[5], True)], [])
    broker_c = _sync_state_set_block("broker-c", None, None, 0, 0, [], [(1, a[6], True)])
    assert _ok(mqadmin("getSyncStateSet", "-a", dep.asked(), "-b", "broker-a")) == broker_a
    assert _ok(mqadmin("getSyncStateSet", "-a", dep.asked(), "-b", "broker-c")) == broker_c
    # -c: the cluster's broker sets from the name server (-n), then one 1006 for all of them
    out = _ok(mqadmin("getSyncStateSet", "-a", dep.asked(), "-c", CLUSTER, namesrv=dep.brokers.namesrv))
    expected = {"broker-a": broker_a, "broker-b": broker_b, "broker-c": broker_c}
    assert _blocks(out, "\n#brokerName\t") == expected, out


def test_mqctl_getSyncStateSet_as_mqadmin(dep: Deployment) -> None:
    """The same command lines, mqadmin's and mqctl's, print the same bytes; -c with -n reads the
    cluster's broker sets from the name-server stand-in (RocketMQ's ClusterInfo), in Java's HashMap
    order as mqadmin prints them."""
    ns = dep.brokers.namesrv
    for args in (
        ["-a", dep.asked(), "-b", "broker-a"],
        ["-a", dep.asked(), "-b", "broker-c"],
        ["-a", dep.asked(), "-c", CLUSTER, "-n", ns],
        ["--controllerAddress", dep.all(), "--clusterName", CLUSTER, "--namesrvAddr", ns],
    ):
        mine = mqctl("getSyncStateSet", *args, "-o", "mqadmin")
        if "-a" in args:
            _same_as_mqadmin(mqadmin("getSyncStateSet", *args), mine)
        else:  # mqadmin uses the first -a address only; mqctl any of them
            _same_as_mqadmin(mqadmin("getSyncStateSet", "-a", dep.asked(), "-c", CLUSTER, "-n", ns), mine)
    # -c from the name server, in mqctl's own JSON: the same broker sets as the controller's -c
    doc = json.loads(
        mqctl("getSyncStateSet", "-a", dep.asked(), "-c", CLUSTER, "-n", ns, "-o", "json").stdout
    )
    own = json.loads(mqctl("getSyncStateSet", "-a", dep.asked(), "-c", CLUSTER, "-o", "json").stdout)
    assert [b["brokerName"] for b in doc["brokers"]] == ["broker-a", "broker-b", "broker-c"]
    assert [b["brokerName"] for b in own["brokers"]] == ["broker-a", "broker-b", "broker-c"]
    # a cluster the name server does not know: mqadmin's words, exit 5 (not found)
    p = mqctl("getSyncStateSet", "-a", dep.asked(), "-c", "no-such-cluster", "-n", ns)
    assert p.returncode == 5 and "Make sure the specified clusterName exists" in p.stderr, p.stderr


def test_getBrokerEpoch(dep: Deployment) -> None:
    """mqadmin asks the brokers (1007), found through the name server; their epochs are what the
    controller told them: epoch 1 started where each replica's log ended when it learned of it."""
    out = _ok(mqadmin("getBrokerEpoch", "-b", "broker-a", namesrv=dep.brokers.namesrv))
    expected = {}
    for i, config_id in ((1, 0), (2, 2), (3, 3)):  # the master's config id is 0 (MixAll.MASTER_ID)
        expected[dep.addr[i]] = (
            f"\n#clusterName\t{CLUSTER}\n#brokerName\tbroker-a\n#brokerAddr\t{dep.addr[i]}\n#brokerId\t{config_id}"
            f"\n#Epoch: EpochEntry{{epoch=1, startOffset={OFFSETS[i]}, endOffset={OFFSETS[i]}}}\n"
        )
    parts = out.split("\n#clusterName\t")
    assert parts[0] == "" and len(parts) == 4, out
    blocks = {
        re.search(r"#brokerAddr\t(\S+)", p)[1]: "\n#clusterName\t" + p  # type: ignore[index]
        for p in parts[1:]
    }
    assert blocks == expected, out


def test_mqctl_getBrokerEpoch_as_mqadmin(dep: Deployment) -> None:
    """The brokers from the name server (-n), each asked with 1007, printed as mqadmin prints them
    (its HashSet of addresses decides the order)."""
    ns = dep.brokers.namesrv
    for args in (["-b", "broker-a"], ["-c", CLUSTER]):
        _same_as_mqadmin(
            mqadmin("getBrokerEpoch", *args, "-n", ns),
            mqctl("getBrokerEpoch", *args, "-n", ns, "-o", "mqadmin"),
        )
    _same_as_mqadmin(
        mqadmin("getBrokerEpoch", "-b", "broker-b", "-n", ns),
        mqctl("getBrokerEpoch", "--brokerName", "broker-b", "--namesrvAddr", ns, "-o", "mqadmin"),
    )


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
        out = _ok(
            mqadmin("updateControllerConfig", "-a", leader, "-k", "enableElectUncleanMaster", "-v", "true")
        )
        assert out == f"update controller config success![{leader}]\nenableElectUncleanMaster : true\n"

        def everywhere() -> bool:
            configs = _properties(_ok(mqadmin("getControllerConfig", "-a", dep.all())))
            return {a: c["enableElectUncleanMaster"] for a, c in configs.items()} == dict.fromkeys(
                dep.remoting, "true"
            )

        wait_until(everywhere, 20, interval=0.5, what="enableElectUncleanMaster=true on every node")
        if dep.size > 1:
            grpc_leader = dep.cluster.wait_for_leader().grpc_address
            _failed(
                mqadmin(
                    "updateControllerConfig", "-a", dep.all(), "-k", "enableElectUncleanMaster", "-v", "true"
                ),
                2007,
                f"The controller is not in leader state; leader is {grpc_leader}",
            )
    finally:
        with RemotingControllerClient(dep.remoting, timeout=20) as client:
            client.update_config({"enableElectUncleanMaster": "false"}, leader)


def test_mqctl_updateControllerConfig_as_mqadmin(dep: Deployment) -> None:
    leader = dep.leader_remoting()
    args = ("-a", leader, "-k", "enableElectUncleanMaster", "-v", "false")
    _same_as_mqadmin(
        mqadmin("updateControllerConfig", *args), mqctl("updateControllerConfig", *args, "-o", "mqadmin")
    )


def test_updateControllerConfig_black_list(dep: Deployment) -> None:
    """rocketmqHome: one of the keys ControllerRequestProcessor adds to configBlackList itself
    (test_controller_config_interop.py tries configStorePath)."""
    _failed(
        mqadmin("updateControllerConfig", "-a", dep.leader_remoting(), "-k", "rocketmqHome", "-v", "/tmp/x"),
        16,
        "Can not update config in black list.",
    )


def test_electMaster(dep: Deployment) -> None:
    a, b = dep.addr, dep.brokers
    out = _ok(mqadmin("electMaster", "-a", dep.asked(), "-b", "2", "-bn", "broker-b", "-c", CLUSTER))
    # the client reads the ElectMasterResponseBody as a BrokerMemberGroup: no "#Broker" lines (RocketMQ's too)
    assert out == (
        f"\n#ClusterName\t{CLUSTER}\n#BrokerName\tbroker-b\n#BrokerMasterAddr\t{a[5]}"
        "\n#MasterEpoch\t2\n#SyncStateSetEpoch\t3\n"
    ), out
    for i in (4, 5):  # an admin's election is pushed to every alive replica too
        event = b.wait_notify(
            i, lambda e: e["masterEpoch"] == 2, 10, f"1008 after electMaster at replica {i}"
        )
        got = (event["masterBrokerId"], event["masterAddress"], event["syncStateSet"])
        assert got == (2, a[5], [2]), event
    _failed(
        mqadmin("electMaster", "-a", dep.asked(), "-b", "2", "-bn", "broker-b", "-c", CLUSTER),
        2011,
        "The old master 2 is still alive, not need to elect new master for broker broker-b",
    )
    _failed(
        mqadmin("electMaster", "-a", dep.asked(), "-b", "9", "-bn", "broker-b", "-c", CLUSTER),
        2012,
        "Failed to elect a new master",
    )
    _failed(
        mqadmin("electMaster", "-a", dep.asked(), "-b", "1", "-bn", "broker-zz", "-c", CLUSTER),
        2010,
        "Broker hasn't been registered",
    )


def _elect_lines(broker_name: str, master_addr: str, master_epoch: int, ss_epoch: int) -> str:
    """ReElectMasterSubCommand's lines (no "#Broker" lines: see test_electMaster)."""
    return (
        f"\n#ClusterName\t{CLUSTER}\n#BrokerName\t{broker_name}\n#BrokerMasterAddr\t{master_addr}"
        f"\n#MasterEpoch\t{master_epoch}\n#SyncStateSetEpoch\t{ss_epoch}\n"
    )


def test_mqctl_electMaster_as_mqadmin(dep: Deployment) -> None:
    """After test_electMaster (broker-b: master 2, SyncStateSet {2}, epochs 2 and 3): mqctl elects 1
    back with mqadmin's command line, then mqadmin elects 2 again; each prints the same lines for its
    election. The master itself: mqctl exits 0 and says so, mqadmin's stdout is as empty as mqctl's."""
    a, b = dep.addr, dep.brokers

    def leader_known() -> None:  # the replicas ask the leader they know of: the current one
        wait_until(
            lambda: b.call("leader")["leader"] == dep.leader_remoting(),
            30,
            what="1005 naming the leader's remoting address",
        )

    leader_known()
    assert b.call("alter", 5, "1,2")["code"] == 0  # the master takes 1 back in: SyncStateSet epoch 4
    mine = mqctl(
        "electMaster",
        "--controllerAddress",
        dep.asked(),
        "--brokerId",
        "1",
        "--brokerName",
        "broker-b",
        "--clusterName",
        CLUSTER,
        "-o",
        "mqadmin",
    )
    assert mine.returncode == 0, mine.stderr
    assert mine.stdout == _elect_lines("broker-b", a[4], 3, 5), mine.stdout
    b.wait_notify(4, lambda e: e["masterEpoch"] == 3, 10, "1008 after mqctl's electMaster")
    leader_known()
    assert b.call("alter", 4, "1,2")["code"] == 0  # SyncStateSet epoch 6
    out = _ok(mqadmin("electMaster", "-a", dep.asked(), "-b", "2", "-bn", "broker-b", "-c", CLUSTER))
    assert out == _elect_lines("broker-b", a[5], 4, 7), out
    b.wait_notify(5, lambda e: e["masterEpoch"] == 4, 10, "1008 after mqadmin's electMaster")
    # the master again: the controller answers 2011; mqadmin (RocketMQ's MQAdminStartup exits 0, this
    # build 1) prints nothing on stdout; mqctl neither, and exits 0 saying so on stderr
    again = ("-a", dep.asked(), "-b", "2", "-bn", "broker-b", "-c", CLUSTER)
    _failed(
        mq := mqadmin("electMaster", *again),
        2011,
        "The old master 2 is still alive, not need to elect new master for broker broker-b",
    )
    mine = mqctl("electMaster", *again, "-o", "mqadmin")
    assert (mine.returncode, mine.stdout, mq.stdout) == (0, "", ""), mine.stderr
    assert "broker 2 is already the master of broker-b" in mine.stderr
    assert (
        "CONTROLLER_MASTER_STILL_EXIST (2011): The old master 2 is still alive, not need to elect new "
        "master for broker broker-b"
    ) in mine.stderr
    doc = json.loads(mqctl("electMaster", *again, "-o", "json").stdout)
    assert doc["alreadyMaster"] is True and doc["result"]["masterBrokerId"] == 2
    assert (doc["result"]["masterAddress"], doc["result"]["masterEpoch"]) == (a[5], 4)


def test_cleanBrokerMetadata(dep: Deployment) -> None:
    b = dep.brokers
    clean = ("cleanBrokerMetadata", "-a", dep.asked(), "-bn", "broker-c", "-c", CLUSTER, "-b", "1")
    _failed(mqadmin(*clean), 2009, "Broker [broker-c,  1] is still alive, clean up failure")
    b.call("beat", 6, "off")
    wait_until(
        lambda: (
            not b.call("syncstatedata", "broker-c")["replicasInfoTable"]["broker-c"]["notInSyncReplicas"][0][
                "alive"
            ]
        ),
        10,
        what="broker-c's replica dead",
    )
    assert _ok(mqadmin(*clean)) == "clear broker broker-c metadata from controller success! \n"
    # gone: 1004 answers 2008 and getSyncStateSet prints nothing for it
    assert b.call("replicainfo", "broker-c")["code"] == 2008
    assert _ok(mqadmin("getSyncStateSet", "-a", dep.asked(), "-b", "broker-c")) == ""
    _failed(
        mqadmin("cleanBrokerMetadata", "-a", dep.asked(), "-bn", "broker-x", "-l"),
        2009,
        "Broker broker-x is not existed,clean broker data failure.",
    )
    # broker-a has a master: without ids nothing is cleaned; ids that do not parse are refused by the
    # controller (mqadmin's own check of the format never runs: a Stream without a terminal operation)
    a = ("cleanBrokerMetadata", "-a", dep.asked(), "-bn", "broker-a", "-c", CLUSTER)
    _failed(mqadmin(*a), 2009, "Broker broker-a is still alive, clean up failure")
    _failed(
        mqadmin(*a, "-b", "3;x"),
        2009,
        "Please set the option <brokerControllerIdsToClean> according to "
        'the format, exception: java.lang.NumberFormatException: For input string: "x"',
    )
    assert b.other_events() == []


def test_mqctl_cleanBrokerMetadata_as_mqadmin(dep: Deployment) -> None:
    """mqctl with mqadmin's command line prints mqadmin's line, the one test_cleanBrokerMetadata got from
    mqadmin. With -l the controller ignores the ids and cleans the whole set (RocketMQ's rule), which
    mqctl's document and stderr say."""
    mine = mqctl(
        "cleanBrokerMetadata",
        "--controllerAddress",
        dep.asked(),
        "--brokerName",
        "broker-a",
        "--clusterName",
        CLUSTER,
        "--brokerControllerIdsToClean",
        "3",
        "--cleanLivingBroker",
        "-o",
        "mqadmin",
    )
    line = "clear broker broker-a metadata from controller success! \n"
    assert (mine.returncode, mine.stdout) == (0, line), mine.stderr
    assert "ignores -b and cleans the whole broker set broker-a" in mine.stderr
    assert dep.brokers.call("replicainfo", "broker-a")["code"] == 2008  # gone, ids 1 and 2 too
    doc = mqctl("cleanBrokerMetadata", "-a", dep.asked(), "-bn", "broker-b", "-b", "1", "-l", "-o", "json")
    assert doc.returncode == 0, doc.stderr
    assert json.loads(doc.stdout)["cleanedBrokerIds"] == [1, 2] and json.loads(doc.stdout)["wholeBrokerSet"]
