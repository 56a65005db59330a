"""Every header and body the remoting door uses, both directions (reference sections 1, 2, 5, 6, 9)."""

from __future__ import annotations

from typing import Any

import pytest

from mqctl import methods
from mqctl.client import ElectMasterResult, Metadata, SyncStateDataResult
from mqctl.remoting import headers as h
from mqctl.remoting.codec import BodyError

# (method, code, request dict, exact extFields, exact body)
REQUESTS: list[tuple[str, int, dict[str, Any], dict[str, str], bytes]] = [
    (
        "GetNextBrokerId",
        1012,
        {"cluster_name": "cluster-a", "broker_name": "broker-a"},
        {"clusterName": "cluster-a", "brokerName": "broker-a"},
        b"",
    ),
    (
        "ApplyBrokerId",
        1013,
        {
            "cluster_name": "c",
            "broker_name": "b",
            "applied_broker_id": 1,
            "register_check_code": "127.0.0.1:30911;1",
        },
        {
            "clusterName": "c",
            "brokerName": "b",
            "appliedBrokerId": "1",
            "registerCheckCode": "127.0.0.1:30911;1",
        },
        b"",
    ),
    (
        "RegisterBroker",
        1003,
        {
            "cluster_name": "c",
            "broker_name": "b",
            "broker_id": 2,
            "broker_address": "127.0.0.1:30912",
            "epoch": 3,
            "max_offset": 4096,
            "confirm_offset": 2048,
            "election_priority": 1,
            "heartbeat_timeout_mills": 1500,
        },
        {
            "clusterName": "c",
            "brokerName": "b",
            "brokerId": "2",
            "brokerAddress": "127.0.0.1:30912",
            "epoch": "3",
            "maxOffset": "4096",
            "confirmOffset": "2048",
            "electionPriority": "1",
            "heartbeatTimeoutMillis": "1500",
        },
        b"",
    ),
    (
        "Heartbeat",
        904,
        {
            "cluster_name": "c",
            "broker_addr": "127.0.0.1:30911",
            "broker_name": "b",
            "broker_id": 1,
            "epoch": -1,
            "max_offset": 0,
            "confirm_offset": -1,
            "heartbeat_timeout_mills": 10000,
            "election_priority": 2147483647,
            "broker_epoch": 9,
        },
        {
            "clusterName": "c",
            "brokerAddr": "127.0.0.1:30911",
            "brokerName": "b",
            "brokerId": "1",
            "epoch": "-1",
            "maxOffset": "0",
            "confirmOffset": "-1",
            "heartbeatTimeoutMills": "10000",
            "electionPriority": "2147483647",
            "brokerEpoch": "9",
        },
        b"",
    ),
    (
        "AlterSyncStateSet",
        1001,
        {
            "broker_name": "b",
            "master_broker_id": 1,
            "master_epoch": 2,
            "new_sync_state_set": [1, 2],
            "sync_state_set_epoch": 3,
        },
        {"brokerName": "b", "masterBrokerId": "1", "masterEpoch": "2"},
        b'{"syncStateSet":[1,2],"syncStateSetEpoch":3}',
    ),
    (
        "ElectMaster",
        1002,
        {"cluster_name": "c", "broker_name": "b", "broker_id": 1, "designate_elect": True},
        {"clusterName": "c", "brokerName": "b", "brokerId": "1", "designateElect": "true"},
        b"",
    ),
    ("GetReplicaInfo", 1004, {"broker_name": "b"}, {"brokerName": "b"}, b""),
    ("GetSyncStateData", 1006, {"broker_names": ["broker-a", "broker-b"]}, {}, b'["broker-a","broker-b"]'),
    (
        "CleanBrokerData",
        1011,
        {
            "cluster_name": "c",
            "broker_name": "b",
            "broker_controller_ids_to_clean": "1;2;3",
            "is_clean_living_broker": False,
        },
        {
            "clusterName": "c",
            "brokerName": "b",
            "brokerControllerIdsToClean": "1;2;3",
            "isCleanLivingBroker": "false",
        },
        b"",
    ),
    (
        "UpdateConfig",
        1009,
        {"config": {"notifyBrokerRoleChanged": "true", "enableElectUncleanMaster": "false"}},
        {},
        b"enableElectUncleanMaster=false\nnotifyBrokerRoleChanged=true\n",
    ),
    ("GetConfig", 1010, {}, {}, b""),
]


@pytest.mark.parametrize("method, code, request_dict, ext, body", REQUESTS, ids=[r[0] for r in REQUESTS])
def test_requests_both_directions(
    method: str, code: int, request_dict: dict[str, Any], ext: dict[str, str], body: bytes
) -> None:
    assert h.encode_request(method, request_dict) == (code, ext, body)
    decoded_method, decoded = h.decode_request(code, ext, body)
    assert decoded_method == method
    assert decoded == request_dict


def test_request_codes_are_rocketmq_s() -> None:
    assert {code: row.name for code, row in methods.BY_REMOTING_CODE.items()} == {
        1001: "AlterSyncStateSet",
        1002: "ElectMaster",
        1003: "RegisterBroker",
        1004: "GetReplicaInfo",
        1005: "GetMetadata",
        1006: "GetSyncStateData",
        1009: "UpdateConfig",
        1010: "GetConfig",
        1011: "CleanBrokerData",
        1012: "GetNextBrokerId",
        1013: "ApplyBrokerId",
        904: "Heartbeat",
    }
    assert (h.GET_BROKER_EPOCH_CACHE, h.NOTIFY_BROKER_ROLE_CHANGED) == (1007, 1008)


def test_header_values_parse_as_java_does() -> None:
    # Long.parseLong: no blanks, no underscores; an unparsable value reaches the core as text (-> 2005)
    _, req = h.decode_request(1002, {"brokerId": " 1", "designateElect": "TRUE", "clusterName": "c"}, b"")
    assert req == {"broker_id": " 1", "designate_elect": True, "cluster_name": "c"}
    _, req = h.decode_request(1002, {"brokerId": "+7", "designateElect": "yes"}, b"")
    assert req == {"broker_id": 7, "designate_elect": False}  # Boolean.parseBoolean("yes") is false
    _, req = h.decode_request(904, {"brokerId": "1_0", "invokeTime": "123", "unknown": "x"}, b"")
    assert req == {"broker_id": "1_0"}  # unknown keys (invokeTime) are ignored
    assert h.decode_request(1001, None, b"") == ("AlterSyncStateSet", {})


def test_request_bodies_absent_or_bad() -> None:
    assert h.decode_request(1006, None, b"") == ("GetSyncStateData", {"broker_names": []})
    assert h.decode_request(1009, None, b"") == ("UpdateConfig", {"config": {}})
    for code, body in (
        (1006, b'{"a":1}'),
        (1006, b"[1]"),
        (1001, b"[1]"),
        (1001, b'{"syncStateSet":["x"]}'),
        (1001, b"{oops"),
        (1009, b"k=\\uZZZZ"),
    ):
        with pytest.raises(BodyError):
            h.decode_request(code, None, body)
    with pytest.raises(KeyError):
        h.decode_request(1007, None, b"")


# ----------------------------------------------------------------------------------------------
# Responses: (method, the node's answer, exact extFields, exact body, what a client decodes)

ELECT_ANSWER = {
    "code": 0,
    "remark": "",
    "master_broker_id": 1,
    "master_address": "127.0.0.1:30911",
    "master_epoch": 2,
    "sync_state_set_epoch": 3,
    "sync_state_set": [1],
    "broker_member_group": {
        "cluster": "c",
        "broker_name": "b",
        "broker_addrs": {1: "127.0.0.1:30911", 2: "127.0.0.1:30912"},
    },
}
RESPONSES: list[tuple[str, dict[str, Any], dict[str, str], bytes, dict[str, Any]]] = [
    (
        "GetNextBrokerId",
        {"cluster_name": "c", "broker_name": "b", "next_broker_id": 4},
        {"clusterName": "c", "brokerName": "b", "nextBrokerId": "4"},
        b"",
        {"cluster_name": "c", "broker_name": "b", "next_broker_id": 4},
    ),
    (
        "ApplyBrokerId",
        {"cluster_name": "c", "broker_name": "b"},
        {"clusterName": "c", "brokerName": "b"},
        b"",
        {"cluster_name": "c", "broker_name": "b"},
    ),
    (
        "RegisterBroker",
        {
            "cluster_name": "c",
            "broker_name": "b",
            "broker_epoch": 5,
            "master_broker_id": 1,
            "master_address": "127.0.0.1:30911",
            "master_epoch": 1,
            "sync_state_set_epoch": 2,
            "sync_state_set": {"sync_state_set": [1, 2], "sync_state_set_epoch": 2},
        },
        {
            "clusterName": "c",
            "brokerName": "b",
            "brokerEpoch": "5",
            "masterBrokerId": "1",
            "masterAddress": "127.0.0.1:30911",
            "masterEpoch": "1",
            "syncStateSetEpoch": "2",
        },
        b'{"syncStateSet":[1,2],"syncStateSetEpoch":2}',
        {
            "cluster_name": "c",
            "broker_name": "b",
            "broker_epoch": 5,
            "master_broker_id": 1,
            "master_address": "127.0.0.1:30911",
            "master_epoch": 1,
            "sync_state_set_epoch": 2,
            "sync_state_set": {"sync_state_set": [1, 2], "sync_state_set_epoch": 2},
        },
    ),
    (
        "RegisterBroker",  # no master: RocketMQ leaves the master fields out
        {
            "cluster_name": "c",
            "broker_name": "b",
            "broker_epoch": 1,
            "master_address": "",
            "sync_state_set": {"sync_state_set": [], "sync_state_set_epoch": 0},
        },
        {"clusterName": "c", "brokerName": "b", "brokerEpoch": "1"},
        b'{"syncStateSet":[],"syncStateSetEpoch":0}',
        {
            "cluster_name": "c",
            "broker_name": "b",
            "broker_epoch": 1,
            "sync_state_set": {"sync_state_set": [], "sync_state_set_epoch": 0},
        },
    ),
    (
        "AlterSyncStateSet",
        {
            "new_sync_state_set_epoch": 4,
            "sync_state_set": {"sync_state_set": [1, 3], "sync_state_set_epoch": 4},
        },
        {"newSyncStateSetEpoch": "4"},
        b'{"syncStateSet":[1,3],"syncStateSetEpoch":4}',
        {
            "new_sync_state_set_epoch": 4,
            "sync_state_set": {"sync_state_set": [1, 3], "sync_state_set_epoch": 4},
        },
    ),
    (
        "ElectMaster",
        ELECT_ANSWER,
        {
            "masterBrokerId": "1",
            "masterAddress": "127.0.0.1:30911",
            "masterEpoch": "2",
            "syncStateSetEpoch": "3",
        },
        b'{"brokerMemberGroup":{"brokerAddrs":{1:"127.0.0.1:30911",2:"127.0.0.1:30912"},"brokerName":"b",'
        b'"cluster":"c"},"syncStateSet":[1]}',
        {k: v for k, v in ELECT_ANSWER.items() if k not in ("code", "remark")},
    ),
    (
        "ElectMaster",  # 2012: header fields null, no member group
        {"code": 2012, "remark": "Failed to elect a new master", "sync_state_set": []},
        {},
        b'{"syncStateSet":[]}',
        {"sync_state_set": []},
    ),
    (
        "GetReplicaInfo",
        {
            "master_broker_id": 2,
            "master_address": "127.0.0.1:30912",
            "master_epoch": 3,
            "sync_state_set": {"sync_state_set": [2], "sync_state_set_epoch": 5},
        },
        {"masterBrokerId": "2", "masterAddress": "127.0.0.1:30912", "masterEpoch": "3"},
        b'{"syncStateSet":[2],"syncStateSetEpoch":5}',
        {
            "master_broker_id": 2,
            "master_address": "127.0.0.1:30912",
            "master_epoch": 3,
            "sync_state_set": {"sync_state_set": [2], "sync_state_set_epoch": 5},
        },
    ),
    (
        "GetConfig",
        {"config": {"waitFor": "1", "enableElectUncleanMaster": "false"}},
        {},
        b"enableElectUncleanMaster=false\nwaitFor=1\n",
        {"config": {"waitFor": "1", "enableElectUncleanMaster": "false"}},
    ),
    ("UpdateConfig", {"code": 0, "remark": ""}, {}, b"", {}),
    (
        "CleanBrokerData",
        {"code": 2009, "remark": "Broker b is not existed,clean broker data failure."},
        {},
        b"",
        {},
    ),
    ("Heartbeat", {"code": 0, "remark": "Heart beat success"}, {}, b"", {}),
]


@pytest.mark.parametrize(
    "method, answer, ext, body, client_view", RESPONSES, ids=[f"{r[0]}-{i}" for i, r in enumerate(RESPONSES)]
)
def test_responses_both_directions(
    method: str, answer: dict[str, Any], ext: dict[str, str], body: bytes, client_view: dict[str, Any]
) -> None:
    assert h.encode_response(method, answer) == (ext, body)
    assert h.decode_response(method, ext, body) == client_view


def test_elect_master_body_reads_into_the_client_dataclass() -> None:
    ext, body = h.encode_response("ElectMaster", ELECT_ANSWER)
    result = ElectMasterResult.from_dict(h.decode_response("ElectMaster", ext, body))
    assert result.broker_member_group is not None
    assert result.broker_member_group.broker_addrs == {1: "127.0.0.1:30911", 2: "127.0.0.1:30912"}
    assert (result.master_broker_id, result.master_epoch, result.sync_state_set) == (1, 2, (1,))


def test_broker_replicas_info_body() -> None:
    answer = {
        "replicas_info_table": {
            "broker-a": {
                "master_broker_id": 1,
                "master_address": "127.0.0.1:30911",
                "master_epoch": 1,
                "sync_state_set_epoch": 2,
                "cluster_name": "c",
                "in_sync_replicas": [
                    {
                        "broker_name": "broker-a",
                        "broker_id": 1,
                        "broker_address": "127.0.0.1:30911",
                        "alive": True,
                        "broker_epoch": 3,
                        "heartbeat_age_ms": 12,
                        "epoch": 1,
                        "max_offset": 100,
                        "confirm_offset": 90,
                        "election_priority": 5,
                    }
                ],
                "not_in_sync_replicas": [
                    {
                        "broker_name": "broker-a",
                        "broker_id": 2,
                        "broker_address": "127.0.0.1:30912",
                        "alive": False,
                        "broker_epoch": 0,
                    }
                ],
            }
        }
    }
    ext, body = h.encode_response("GetSyncStateData", answer)
    assert ext == {}
    assert body == (
        b'{"replicasInfoTable":{"broker-a":{"clusterName":"c","inSyncReplicas":[{"alive":true,'
        b'"brokerAddress":"127.0.0.1:30911","brokerEpoch":3,"brokerId":1,"brokerName":"broker-a",'
        b'"confirmOffset":90,"electionPriority":5,"epoch":1,"heartbeatAgeMs":12,"maxOffset":100}],'
        b'"masterAddress":"127.0.0.1:30911","masterBrokerId":1,"masterEpoch":1,"notInSyncReplicas":[{"alive":false,'
        b'"brokerAddress":"127.0.0.1:30912","brokerEpoch":0,"brokerId":2,"brokerName":"broker-a"}],'
        b'"syncStateSetEpoch":2}}}'
    )
    assert h.decode_response("GetSyncStateData", ext, body) == answer
    # a RocketMQ controller's body: no extension fields, read into the same dataclass
    rocketmq = (
        b'{"replicasInfoTable":{"broker-a":{"inSyncReplicas":[{"alive":true,"brokerAddress":"a:1",'
        b'"brokerId":1,"brokerName":"broker-a"}],"masterAddress":"a:1","masterBrokerId":1,"masterEpoch":1,'
        b'"notInSyncReplicas":[],"syncStateSetEpoch":1}}}'
    )
    table = SyncStateDataResult.from_dict(
        h.decode_response("GetSyncStateData", None, rocketmq)
    ).replicas_info_table
    assert table["broker-a"].in_sync_replicas[0].broker_address == "a:1"
    assert table["broker-a"].in_sync_replicas[0].heartbeat_age_ms is None


METADATA = {
    "code": 0,
    "remark": "",
    "group": "mqctl",
    "group_id": "g1",
    "controller_leader_id": "127.0.0.1:9880",
    "controller_leader_address": "127.0.0.1:9877",
    "is_leader": False,
    "self_id": "127.0.0.1:9881",
    "term": 2,
    "commit_index": 10,
    "last_applied": 10,
    "has_quorum": True,
    "state_hash": "ab",
    "state": "follower",
    "log_length": 11,
    "peers": [
        {
            "raft_address": "127.0.0.1:9880",
            "grpc_address": "127.0.0.1:9877",
            "remoting_address": "127.0.0.1:9878",
            "is_leader": True,
            "is_self": False,
            "connected": True,
            "match_index": 0,
            "next_index": 0,
        },
        {
            "raft_address": "127.0.0.1:9881",
            "grpc_address": "127.0.0.1:9867",
            "remoting_address": "",
            "is_leader": False,
            "is_self": True,
            "connected": True,
            "match_index": 0,
            "next_index": 0,
        },
    ],
}


def test_metadata_header_is_rocketmq_s_and_the_body_carries_mqctl_s_detail() -> None:
    ext, body = h.encode_response("GetMetadata", METADATA)
    # controllerLeaderAddress is the leader's *remoting* address; peers is DLedger's "id:addr;" text
    assert ext == {
        "group": "mqctl",
        "controllerLeaderId": "127.0.0.1:9880",
        "controllerLeaderAddress": "127.0.0.1:9878",
        "isLeader": "false",
        "peers": "127.0.0.1:9880:127.0.0.1:9878;127.0.0.1:9881:;",
    }
    assert body.startswith(b'{"commitIndex":10,"controllerLeaderAddress":"127.0.0.1:9878",')
    meta = Metadata.from_dict(h.decode_response("GetMetadata", ext, body))
    assert (meta.controller_leader_address, meta.is_leader, meta.group_id, meta.term) == (
        "127.0.0.1:9878",
        False,
        "g1",
        2,
    )
    assert [p.grpc_address for p in meta.peers] == ["127.0.0.1:9877", "127.0.0.1:9867"]


def test_metadata_from_a_rocketmq_controller() -> None:
    ext = {
        "group": "group1",
        "controllerLeaderId": "n1",
        "controllerLeaderAddress": "127.0.0.1:9868",
        "isLeader": "false",
        "peers": "n0:127.0.0.1:9878;n1:127.0.0.1:9868;n2:127.0.0.1:9858;",
    }
    meta = Metadata.from_dict(h.decode_response("GetMetadata", ext, b""))
    assert (meta.group, meta.controller_leader_id, meta.controller_leader_address) == (
        "group1",
        "n1",
        "127.0.0.1:9868",
    )
    assert [(p.raft_address, p.grpc_address, p.is_leader) for p in meta.peers] == [
        ("n0", "127.0.0.1:9878", False),
        ("n1", "127.0.0.1:9868", True),
        ("n2", "127.0.0.1:9858", False),
    ]


def test_notify_broker_role_changed_header_and_body() -> None:
    change = {
        "cluster_name": "c",
        "broker_name": "b",
        "master_broker_id": 2,
        "master_address": "127.0.0.1:30912",
        "master_epoch": 3,
        "sync_state_set_epoch": 4,
        "sync_state_set": [2],
    }
    ext = h.dict_to_header(h.ROLE_CHANGE_FIELDS, change, skip_empty=True)
    assert ext == {
        "masterAddress": "127.0.0.1:30912",
        "masterEpoch": "3",
        "syncStateSetEpoch": "4",
        "masterBrokerId": "2",
    }


def test_epoch_entry_cache_body() -> None:
    cache = {
        "cluster_name": "c",
        "broker_name": "b",
        "broker_id": 0,
        "max_offset": 700,
        "epoch_list": [
            {"epoch": 1, "start_offset": 0, "end_offset": 300},
            {"epoch": 2, "start_offset": 300, "end_offset": 9223372036854775807},
        ],
    }
    body = h.epoch_cache_body(cache)
    assert body == (
        b'{"brokerId":0,"brokerName":"b","clusterName":"c","epochList":[{"endOffset":300,"epoch":1,'
        b'"startOffset":0},{"endOffset":9223372036854775807,"epoch":2,"startOffset":300}],'
        b'"maxOffset":700}'
    )
    assert h.read_epoch_cache(body) == cache


def test_a_paused_broker_set_says_so_in_broker_replicas_info_and_an_unpaused_one_adds_nothing() -> None:
    table = {
        "replicas_info_table": {
            "a": {
                "master_broker_id": 1,
                "master_address": "127.0.0.1:1",
                "master_epoch": 2,
                "sync_state_set_epoch": 3,
                "cluster_name": "c",
                "in_sync_replicas": [],
                "not_in_sync_replicas": [],
                "failover_paused": True,
                "failover_pause_reason": "",
            },
            "b": {
                "master_epoch": 0,
                "sync_state_set_epoch": 0,
                "cluster_name": "c",
                "in_sync_replicas": [],
                "not_in_sync_replicas": [],
            },
        }
    }
    body = h.sync_state_data_body(table)
    assert b'"failoverPauseReason":"","failoverPaused":true' in body and body.count(b"failover") == 2
    back = h.read_sync_state_data(body)["replicas_info_table"]
    assert back["a"]["failover_paused"] is True and back["a"]["failover_pause_reason"] == ""
    assert "failover_paused" not in back["b"]
    result = SyncStateDataResult.from_dict({"replicas_info_table": back})
    assert result.replicas_info_table["a"].failover_paused
