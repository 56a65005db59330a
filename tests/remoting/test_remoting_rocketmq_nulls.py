"""What RocketMQ writes as null, mqctl's remoting door leaves out of the body too (mqadmin prints the
difference: a broker set without a master has ``#MasterAddr\tnull`` in RocketMQ's getSyncStateSet,
not an empty field). Found with RocketMQ's own mqadmin in tests/interop/test_rocketmq_mqadmin.py."""

from __future__ import annotations

import json

from mqctl.remoting import headers


def _body(result: dict) -> dict:
    _, body = headers.encode_response("GetSyncStateData", result)
    return dict(json.loads(body))


def test_no_master_address_is_left_out_of_broker_replicas_info() -> None:
    replica = {"broker_name": "broker-c", "broker_id": 1, "broker_address": "127.0.0.1:10911", "alive": True}
    result = {
        "code": 0,
        "replicas_info_table": {
            "broker-c": {
                "master_address": "",
                "master_epoch": 0,
                "sync_state_set_epoch": 0,
                "in_sync_replicas": [],
                "not_in_sync_replicas": [replica],
            },
            "broker-a": {
                "master_broker_id": 1,
                "master_address": "127.0.0.1:10921",
                "master_epoch": 1,
                "sync_state_set_epoch": 1,
                "in_sync_replicas": [],
                "not_in_sync_replicas": [],
            },
        },
    }
    table = _body(result)["replicasInfoTable"]
    assert "masterAddress" not in table["broker-c"] and "masterBrokerId" not in table["broker-c"]
    assert table["broker-c"]["masterEpoch"] == 0
    assert table["broker-c"]["notInSyncReplicas"][0]["brokerAddress"] == "127.0.0.1:10911"
    assert (table["broker-a"]["masterAddress"], table["broker-a"]["masterBrokerId"]) == ("127.0.0.1:10921", 1)
    # the core's answer itself is not changed
    assert result["replicas_info_table"]["broker-c"]["master_address"] == ""


def test_other_answers_pass_unchanged() -> None:
    assert headers.rocketmq_nulls({"code": 2005, "remark": "x"}) == {"code": 2005, "remark": "x"}
    ext, body = headers.encode_response(
        "GetReplicaInfo", {"code": 0, "master_address": "", "master_epoch": 0}
    )
    assert (ext, body) == ({"masterEpoch": "0"}, b"")  # an empty header value is left out, as before
