"""mqctl as a drop-in for mqadmin's controller commands (issue 12), without a JVM: every option of
mqadmin's sub-commands is accepted with its meaning, mqadmin's text (-o mqadmin) from the documents,
Java's HashMap order, the ClusterInfo body of a name server, and mqadmin's spellings against a live
controller. tests/interop/test_rocketmq_mqadmin.py compares with RocketMQ's own mqadmin.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from admin_fixtures import CLUSTER, World, build_world, close_world, run

from mqctl.admin import mqadmin_text as mt
from mqctl.errors import NotFoundError
from mqctl.remoting import headers
from mqctl.remoting.namesrv import ClusterInfo

# `MQAdmin help <sub-command>` of RocketMQ's mqadmin (../shared/rocketmq-java): (short, long) per option
MQADMIN_OPTIONS: dict[str, list[tuple[str, str]]] = {
    "getSyncStateSet": [
        ("a", "controllerAddress"),
        ("b", "brokerName"),
        ("c", "clusterName"),
        ("h", "help"),
        ("i", "interval"),
        ("n", "namesrvAddr"),
    ],
    "getBrokerEpoch": [
        ("b", "brokerName"),
        ("c", "clusterName"),
        ("h", "help"),
        ("i", "interval"),
        ("n", "namesrvAddr"),
    ],
    "getControllerMetaData": [("a", "controllerAddress"), ("h", "help"), ("n", "namesrvAddr")],
    "electMaster": [
        ("a", "controllerAddress"),
        ("b", "brokerId"),
        ("bn", "brokerName"),
        ("c", "clusterName"),
        ("h", "help"),
        ("n", "namesrvAddr"),
    ],
    "getControllerConfig": [("a", "controllerAddress"), ("h", "help"), ("n", "namesrvAddr")],
    "updateControllerConfig": [
        ("a", "controllerAddress"),
        ("h", "help"),
        ("k", "key"),
        ("n", "namesrvAddr"),
        ("v", "value"),
    ],
    "cleanBrokerMetadata": [
        ("a", "controllerAddress"),
        ("b", "brokerControllerIdsToClean"),
        ("bn", "brokerName"),
        ("c", "clusterName"),
        ("h", "help"),
        ("l", "cleanLivingBroker"),
        ("n", "namesrvAddr"),
    ],
}


def _command(name: str) -> tuple[object, object]:
    """The click command and a context under mqctl's (whose -h/--help it inherits)."""
    from typer.main import get_command

    from mqctl.cli import app

    root = get_command(app)
    parent = root.context_class(root, info_name="mqctl", **root.context_settings)
    cmd = root.commands[name]  # type: ignore[attr-defined]
    return cmd, cmd.context_class(cmd, info_name=name, parent=parent, **cmd.context_settings)


@pytest.mark.parametrize("sub", sorted(MQADMIN_OPTIONS))
def test_every_mqadmin_option_means_the_same_in_mqctl(sub: str) -> None:
    """mqadmin's short and long spelling of each option are one and the same mqctl option: no short
    option of mqadmin's means something else in mqctl (docs/admin.md#mqadmin-compatibility)."""
    cmd, ctx = _command(sub)
    params = [*cmd.params, cmd.get_help_option(ctx)]  # type: ignore[attr-defined]
    for short, long in MQADMIN_OPTIONS[sub]:
        owner = [p for p in params if f"-{short}" in p.opts]
        assert owner, f"{sub}: mqadmin's -{short} is not accepted"
        assert f"--{long}" in owner[0].opts, f"{sub}: -{short} is {owner[0].opts}, mqadmin's is --{long}"


def test_java_hashes_and_hash_map_order() -> None:
    assert mt.java_string_hash("hello") == 99162322
    assert mt.java_string_hash("") == 0
    assert mt.java_string_hash("polygenelubricants") == (-2147483648) & 0xFFFFFFFF  # Integer.MIN_VALUE
    assert mt.java_long_hash(3) == 3 and mt.java_long_hash(-1) == 0
    # a HashSet filled with c, a, b prints [broker-b, broker-c, broker-a] in Java 17: buckets of
    # (h ^ h>>>16) & 15, ties in insertion order
    assert mt.hash_map_order(["broker-c", "broker-a", "broker-b"]) == ["broker-b", "broker-c", "broker-a"]
    assert mt.hash_map_order([17, 1, 33], mt.java_long_hash) == [17, 1, 33]  # one bucket: insertion order
    assert mt.hash_map_order(list(range(13, -1, -1)), mt.java_long_hash) == list(range(14))  # resized to 32
    assert mt.java_split("a;b;;c;;", ";") == ["a", "b", "", "c"] and mt.java_split(";", ";") == []


def test_sync_state_text_as_mqadmin_prints_it() -> None:
    doc = {
        "brokers": [
            {
                "brokerName": "broker-c",
                "masterBrokerId": None,
                "masterAddress": None,
                "masterEpoch": 0,
                "syncStateSetEpoch": 0,
                "inSyncReplicas": [],
                "notInSyncReplicas": [{"brokerId": 1, "brokerAddress": "127.0.0.1:10931", "alive": False}],
            },
            {
                "brokerName": "broker-a",
                "masterBrokerId": 1,
                "masterAddress": "127.0.0.1:10911",
                "masterEpoch": 3,
                "syncStateSetEpoch": 5,
                "inSyncReplicas": [{"brokerId": 1, "brokerAddress": "127.0.0.1:10911", "alive": True}],
                "notInSyncReplicas": [],
            },
        ]
    }
    block_a = (
        "\n#brokerName\tbroker-a\n#MasterBrokerId\t1\n#MasterAddr\t127.0.0.1:10911\n#MasterEpoch\t3\n"
        "#SyncStateSetEpoch\t5\n#SyncStateSetNums\t1\n"
        "\nInSyncReplica:\tReplicaIdentity{brokerName='broker-a', brokerId=1, "
        "brokerAddress='127.0.0.1:10911', alive=true}\n"
    )
    block_c = (
        "\n#brokerName\tbroker-c\n#MasterBrokerId\tnull\n#MasterAddr\tnull\n#MasterEpoch\t0\n"
        "#SyncStateSetEpoch\t0\n#SyncStateSetNums\t0\n"
        "\nNotInSyncReplica:\tReplicaIdentity{brokerName='broker-c', brokerId=1, "
        "brokerAddress='127.0.0.1:10931', alive=false}\n"
    )
    assert mt.sync_state_text(doc) == block_c + block_a  # Java's HashMap order: broker-c, broker-a
    assert mt.sync_state_text({"brokers": []}) == ""  # mqadmin prints nothing for an unknown broker set


def test_broker_epoch_and_metadata_and_elect_text() -> None:
    doc = {
        "brokers": [
            {
                "clusterName": "c",
                "brokerName": "b",
                "brokerAddr": "127.0.0.1:10911",
                "brokerId": 0,
                "epochs": [
                    {"epoch": 1, "startOffset": 0, "endOffset": 100},
                    {"epoch": 2, "startOffset": 100, "endOffset": 250},
                ],
            },
            {"brokerAddr": "127.0.0.1:10991", "error": "down"},
        ]
    }
    assert mt.broker_epoch_text(doc) == (
        "\n#clusterName\tc\n#brokerName\tb\n#brokerAddr\t127.0.0.1:10911\n#brokerId\t0"
        "\n#Epoch: EpochEntry{epoch=1, startOffset=0, endOffset=100}"
        "\n#Epoch: EpochEntry{epoch=2, startOffset=100, endOffset=250}\n"
    )
    meta = {
        "group": "g",
        "controllerLeaderId": "n0",
        "controllerLeaderAddress": "127.0.0.1:9878",
        "peers": [
            {"raftAddress": "n0", "grpcAddress": "127.0.0.1:9878"},
            {"raftAddress": "n1", "grpcAddress": "127.0.0.1:9888"},
        ],
    }
    head = "\n#ControllerGroup\tg\n#ControllerLeaderId\tn0\n#ControllerLeaderAddress\t127.0.0.1:9878"
    assert mt.metadata_text(meta) == head + "\n#Peer:\tn0:127.0.0.1:9878\n#Peer:\tn1:127.0.0.1:9888\n"
    # JRaft: bare RPC addresses (parse_peers names only the leader, with its PeerId)
    jraft = {
        **meta,
        "peers": [
            {"raftAddress": "n0", "grpcAddress": "127.0.0.1:9878"},
            {"raftAddress": "", "grpcAddress": "127.0.0.1:9888"},
        ],
    }
    assert mt.metadata_text(jraft) == head + "\n#Peer:\t127.0.0.1:9878\n#Peer:\t127.0.0.1:9888\n"
    assert mt.metadata_text({**meta, "peersText": "x;;y;"}) == head + "\n#Peer:\tx\n#Peer:\t\n#Peer:\ty\n"
    assert mt.metadata_text({**meta, "peers": []}) == head + "\n"
    result = {"masterAddress": "127.0.0.1:10921", "masterEpoch": 4, "syncStateSetEpoch": 7}
    assert mt.elect_text("c", "b", result) == (
        "\n#ClusterName\tc\n#BrokerName\tb\n#BrokerMasterAddr\t127.0.0.1:10921\n#MasterEpoch\t4\n"
        "#SyncStateSetEpoch\t7\n"
    )
    assert mt.clean_text("b") == "clear broker b metadata from controller success! \n"
    assert mt.update_config_text(["a:1", "b:2"], "k", "v") == (
        "update controller config success![a:1, b:2]\nk : v\n"
    )


def test_cluster_info_body_as_a_name_server_writes_it() -> None:
    """fastjson's ClusterInfo: bare Long keys in brokerAddrs."""
    body = (
        b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"127.0.0.1:10911",2:"127.0.0.1:10921"},'
        b'"brokerName":"broker-a","cluster":"cluster-a","enableActingMaster":false}},'
        b'"clusterAddrTable":{"cluster-a":["broker-a"]}}'
    )
    info = ClusterInfo.from_dict(headers.read_cluster_info(body), answered_by="ns:9876")
    assert info.broker_names("cluster-a") == ["broker-a"]
    assert info.replicas("broker-a") == [(0, "127.0.0.1:10911"), (2, "127.0.0.1:10921")]
    assert info.cluster_of == {"broker-a": "cluster-a"} and info.replicas("broker-z") == []
    with pytest.raises(NotFoundError, match="Make sure the specified clusterName exists"):
        info.broker_names("cluster-z")
    assert headers.GET_BROKER_CLUSTER_INFO == 106


@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    w = build_world(Path(tmp_path_factory.mktemp("mqadmin-compat")), 1)
    try:
        yield w
    finally:
        close_world(w)


def test_mqadmin_spellings_against_a_controller(single: World) -> None:
    """The same command with mqadmin's spellings and with mqctl's prints the same document; -n is
    accepted where mqadmin accepts it and not needed; -o mqadmin prints mqadmin's text."""
    addr = single.cluster.addresses
    own = run("getSyncStateSet", "-a", addr, "-b", "broker-a", "-o", "json")
    theirs = run("getSyncStateSet", "--controllerAddress", addr, "--brokerName", "broker-a", "-o", "json")
    assert own.returncode == theirs.returncode == 0, own.stderr + theirs.stderr

    def shape(out: str) -> list[tuple[str, int, list[int]]]:
        return [
            (b["brokerName"], b["masterBrokerId"], [r["brokerId"] for r in b["inSyncReplicas"]])
            for b in json.loads(out)["brokers"]
        ]

    assert shape(own.stdout) == shape(theirs.stdout) == [("broker-a", 1, [1, 2])]
    text = run("getSyncStateSet", "-a", addr, "--clusterName", CLUSTER, "-o", "mqadmin")
    assert text.returncode == 0 and text.stdout.startswith("\n#brokerName\t"), text.stderr
    assert "InSyncReplica:\tReplicaIdentity{brokerName='broker-a', brokerId=1" in text.stdout
    meta = run("getControllerMetaData", "--controllerAddress", addr, "-n", "127.0.0.1:1", "-o", "mqadmin")
    assert meta.returncode == 0 and meta.stdout.startswith("\n#ControllerGroup\t"), meta.stderr
    cfg = run("getControllerConfig", "-a", addr, "--namesrvAddr", "127.0.0.1:1", "-o", "json")
    assert cfg.returncode == 0, cfg.stderr
    # a name server that does not answer: exit 6, saying which option it was
    p = run("getSyncStateSet", "-a", addr, "-c", CLUSTER, "-n", "127.0.0.1:1")
    assert p.returncode == 6 and "-n/--namesrvAddr" in p.stderr, p.stderr


def test_o_mqadmin_with_interval_repeats_like_mqadmin(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """-o mqadmin -i S: the text again every S seconds (an error is one line on stderr and the loop
    goes on), until Ctrl-C (exit 0); without -i an error is raised after the text."""
    from mqctl.cli import admin_cmd
    from mqctl.errors import UnreachableError

    calls = iter([{"n": 1}, UnreachableError("controller gone"), {"n": 3}, KeyboardInterrupt()])

    def fetch() -> dict[str, int]:
        item = next(calls)
        if isinstance(item, BaseException):
            raise item
        return item

    monkeypatch.setattr(admin_cmd.time, "sleep", lambda s: None)
    admin_cmd._run_mqadmin(fetch, lambda d: f"#n\t{d['n']}\n", 0.5, None)
    out = capsys.readouterr()
    assert out.out == "#n\t1\n#n\t3\n" and out.err == "mqctl: error: controller gone\n"

    def verdict(doc: dict[str, int]) -> None:
        raise UnreachableError("no leader")

    with pytest.raises(UnreachableError):
        admin_cmd._run_mqadmin(lambda: {"n": 7}, lambda d: f"#n\t{d['n']}\n", None, verdict)
    assert capsys.readouterr().out == "#n\t7\n"
