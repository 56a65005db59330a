"""The method table (mqctl/methods.py) against the proto service, RocketMQ's request codes and
everything derived from it; the token policy's rule, once."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import pytest

from mqctl import methods
from mqctl.methods import Caller, Entry, Kind, MethodSpec, Token

ROOT = Path(__file__).resolve().parent.parent
PROTO = ROOT / "mqctl/v1/controller.proto"
# Apache RocketMQ's classes, compiled unchanged, and the written reference (outside this repository).
SHARED = Path(os.environ.get("MQCTL_SHARED_DIR", ROOT.parent / "shared"))
ROCKETMQ_JAR = SHARED / "rocketmq-java/lib/rocketmq.jar"
REFERENCE = SHARED / "reference/rocketmq-reference.md"
# ControllerManager.registerProcessor: the codes a RocketMQ controller serves (reference section 1).
ROCKETMQ_CONTROLLER_CODES = {1001, 1002, 1003, 1004, 1005, 1006, 904, 1009, 1010, 1011, 1012, 1013}


# -- the table and the proto service -------------------------------------------------------------


def _proto_rpcs() -> dict[str, tuple[str, str, bool, bool]]:
    """rpc name -> (request message, response message, server stream, client stream), from the
    .proto text."""
    text = re.sub(r"//[^\n]*", "", PROTO.read_text())
    service = re.search(r"service\s+Controller\s*\{(.*?)\n\}", text, re.S)
    assert service is not None
    rpc = r"rpc\s+(\w+)\s*\(\s*(stream\s+)?(\w+)\s*\)\s*returns\s*\(\s*(stream\s+)?(\w+)\s*\)"
    rpcs = re.findall(rpc, service.group(1))
    return {
        name: (req, resp, bool(stream), bool(client_stream))
        for name, client_stream, req, stream, resp in rpcs
    }


def test_every_rpc_of_the_proto_has_a_row_and_every_row_an_rpc() -> None:
    rpcs = _proto_rpcs()
    rows = {
        r.grpc_method: (r.request_type, r.response_type, r.streaming, r.client_streaming)
        for r in methods.METHODS
    }
    assert rows == rpcs
    assert [r.grpc_method for r in methods.METHODS] == list(rpcs)  # the proto's order
    assert len(methods.BY_NAME) == len(methods.METHODS)


def test_the_table_agrees_with_the_generated_service_descriptor() -> None:
    from mqctl.v1 import controller_pb2 as pb

    service = pb.DESCRIPTOR.services_by_name["Controller"]
    assert service.full_name == methods.PROTO_SERVICE
    described = {
        m.name: (m.input_type.name, m.output_type.name, bool(m.server_streaming), bool(m.client_streaming))
        for m in service.methods
    }
    assert described == {
        r.grpc_method: (r.request_type, r.response_type, r.streaming, r.client_streaming)
        for r in methods.METHODS
    }
    for row in methods.METHODS:
        request_cls, response_cls = row.types()
        assert (request_cls.DESCRIPTOR.name, response_cls.DESCRIPTOR.name) == (
            row.request_type,
            row.response_type,
        )
        assert row.grpc_path == f"/mqctl.v1.Controller/{row.grpc_method}"


def test_importing_the_table_imports_no_protobuf() -> None:
    code = (
        "import sys, mqctl.methods; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('google', 'grpc')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


# -- RocketMQ's request codes --------------------------------------------------------------------


def _rocketmq_request_codes() -> dict[str, int]:
    """RequestCode's int constants, read from RocketMQ's compiled class with javap."""
    javap = shutil.which("javap")
    if javap is None or not ROCKETMQ_JAR.is_file():
        pytest.skip(f"needs javap and RocketMQ's classes at {ROCKETMQ_JAR}")
    out = subprocess.run(
        [javap, "-constants", "-cp", str(ROCKETMQ_JAR), "org.apache.rocketmq.remoting.protocol.RequestCode"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    codes = {m[0]: int(m[1]) for m in re.findall(r"static final int (\w+) = (-?\d+);", out)}
    assert len(codes) > 100, out[:500]
    return codes


def test_remoting_codes_are_rocketmq_s_request_codes() -> None:
    codes = _rocketmq_request_codes()
    with_code = [r for r in methods.METHODS if r.code is not None]
    assert {r.code_name: r.code for r in with_code} == {r.code_name: codes[r.code_name] for r in with_code}
    from mqctl.remoting import headers

    assert codes["GET_BROKER_EPOCH_CACHE"] == headers.GET_BROKER_EPOCH_CACHE
    assert {name: codes[name] for name in headers.REQUEST_CODES} == headers.REQUEST_CODES


def test_remoting_door_serves_what_a_rocketmq_controller_serves() -> None:
    assert set(methods.BY_REMOTING_CODE) == ROCKETMQ_CONTROLLER_CODES
    if not REFERENCE.is_file():
        pytest.skip(f"the RocketMQ reference is not at {REFERENCE}")
    table = dict(re.findall(r"^\| (\d+) \| (\w+) \|", REFERENCE.read_text(), re.M))
    for row in methods.METHODS:
        if row.code is not None:
            assert table[str(row.code)] == row.code_name, row.name


# -- what is derived from the table ----------------------------------------------------------------


def test_the_node_sets_are_the_table_s() -> None:
    assert {
        "ApplyBrokerId",
        "RegisterBroker",
        "AlterSyncStateSet",
        "ElectMaster",
        "CleanBrokerData",
        "UpdateConfig",
        "PauseFailover",
        "Switchover",
        "Rebalance",
    } == methods.WRITE_METHODS
    assert {"GetNextBrokerId", "GetReplicaInfo", "GetSyncStateData"} == methods.FRESH_READ_METHODS
    assert {"GetConfig", "GetHistory"} == methods.LOCAL_READ_METHODS
    assert {
        "GetMetadata",
        "Heartbeat",
        "HeartbeatStream",
        "WatchRoleChanges",
        "ChangeQuorum",
        "GetSnapshot",
    } == methods.NODE_METHODS
    assert methods.names(Kind.WRITE) == methods.WRITE_METHODS
    assert methods.names(entry=Entry.METADATA) == {"GetMetadata"}
    assert methods.names(streaming=True) == {"WatchRoleChanges", "HeartbeatStream"}
    from mqctl.controller import node

    # node.py has its own copies until it takes them from the table: they must agree meanwhile
    assert getattr(node, "WRITE_METHODS", methods.WRITE_METHODS) == methods.WRITE_METHODS
    assert getattr(node, "FRESH_READ_METHODS", methods.FRESH_READ_METHODS) == methods.FRESH_READ_METHODS


def test_transports_and_clients_derive_from_the_table() -> None:
    from google.protobuf.message import Message

    from mqctl.grpc import server as grpc_server
    from mqctl.remoting import headers

    servicer = grpc_server.ControllerServicer(cast(Any, None))
    for row in methods.METHODS:  # a servicer method for every RPC, and its proto messages
        assert callable(getattr(servicer, row.grpc_method)), row.name
        assert all(issubclass(t, Message) for t in row.types()), row.name
    with pytest.raises(AttributeError):
        servicer.NoSuchRpc  # noqa: B018
    for row in methods.METHODS:  # every body a row names is one the remoting codec can write and read
        for ref in (row.remoting_codec.request_body, row.remoting_codec.response_body):
            assert not ref or isinstance(methods.resolve(ref), headers.Body), (row.name, ref)
    for row in methods.METHODS:  # every row's typed answer reads an answer
        answer = row.typed_answer({"code": 0, "remark": ""})
        assert type(answer).__name__ == (row.response.rpartition(":")[2] or "dict"), row.name
    assert {
        "GetMetadata",
        "GetNextBrokerId",
        "Heartbeat",
        "GetReplicaInfo",
        "GetSyncStateData",
        "GetConfig",
        "GetHistory",
        "ApplyBrokerId",
        "RegisterBroker",  # idempotent writes (issue 17)
        "GetSnapshot",
    } == methods.RETRY_ANY


# -- the token policy ----------------------------------------------------------------------------------


def test_a_rule_answers_its_row_s_response_and_the_clients_read_the_same_back() -> None:
    """One class per answer: what a rule decides is the row's ``response`` class, and the dict the
    transports carry (``Result.answer``) reads back into an equal object on the client side."""
    from dataclasses import replace

    from mqctl.controller import core
    from mqctl.controller.records import MAX_FEATURE_LEVEL, FeatureLevelSet

    state = core.ControllerState()
    state.apply(FeatureLevelSet(MAX_FEATURE_LEVEL))
    b, addr = "b", {1: "127.0.0.1:10911", 2: "127.0.0.1:10912"}
    live = {b: {i: core.LiveInfo(i, addr[i], 0, 1, 100 * i, -1, 0, 1000, 10_000) for i in addr}}
    ctx = core.Context(1000, live, 1)
    calls: list[tuple[str, dict[str, Any]]] = [
        ("GetNextBrokerId", {"cluster_name": "c", "broker_name": b}),
        *(
            (
                "ApplyBrokerId",
                {
                    "cluster_name": "c",
                    "broker_name": b,
                    "applied_broker_id": i,
                    "register_check_code": f"{a};1",
                },
            )
            for i, a in addr.items()
        ),
        (
            "RegisterBroker",
            {"cluster_name": "c", "broker_name": b, "broker_id": 1, "broker_address": addr[1]},
        ),
        ("ElectMaster", {"cluster_name": "c", "broker_name": b, "broker_id": 1}),
        (
            "RegisterBroker",
            {"cluster_name": "c", "broker_name": b, "broker_id": 2, "broker_address": addr[2]},
        ),
        ("ElectMaster", {"cluster_name": "c", "broker_name": b, "broker_id": 2}),  # refused, with the master
        (
            "AlterSyncStateSet",
            {
                "broker_name": b,
                "master_broker_id": 1,
                "master_epoch": 1,
                "new_sync_state_set": [1, 2],
                "sync_state_set_epoch": 1,
            },
        ),
        (
            "AlterSyncStateSet",
            {
                "broker_name": b,
                "master_broker_id": 2,
                "master_epoch": 1,
                "new_sync_state_set": [2],
                "sync_state_set_epoch": 2,
            },
        ),
        ("GetReplicaInfo", {"broker_name": b}),
        ("Switchover", {"broker_name": b, "dry_run": True}),
        ("Switchover", {"broker_name": b, "broker_id": 1}),  # refused: already the master
        ("Rebalance", {}),
        ("PauseFailover", {"broker_name": b, "paused": True, "reason": "test"}),
        ("GetSyncStateData", {}),
        ("GetHistory", {}),
        ("UpdateConfig", {"config": {"enableElectUncleanMaster": "true", "noSuchKey": "1"}}),
        ("GetConfig", {}),
        ("CleanBrokerData", {"broker_name": b, "is_clean_living_broker": True}),
    ]
    with_fields = set()
    for method, request in calls:
        result = core.decide(state, method, request, ctx)
        row = methods.spec(method)
        cls = methods.resolve(row.response)
        assert result.reply is None or isinstance(result.reply, cls), (method, result.remark)
        sent = result.reply if result.reply is not None else cls()
        assert row.typed_answer(result.answer()) == replace(sent, remark=result.remark), method
        with_fields.add(method) if result.answer().keys() - {"code", "remark"} else None
        for record in result.records:
            state.apply(record)
    answering = {r.name for r in methods.METHODS if r.rule_ref and not r.response.endswith(":Ack")}
    assert with_fields == answering  # every rule that answers fields was asked above


def test_every_mutating_admin_method_requires_the_token() -> None:
    for row in methods.METHODS:
        if row.mutating and row.caller is not Caller.BROKER:
            assert row.token is not Token.NEVER, row.name
        if row.token is not Token.NEVER:
            assert row.mutating and row.caller is not Caller.BROKER, row.name
    admin = {r.name for r in methods.METHODS if r.token is not Token.NEVER}
    assert admin == {
        "CleanBrokerData",
        "UpdateConfig",
        "ChangeQuorum",
        "ElectMaster",
        "PauseFailover",
        "Switchover",
        "Rebalance",
    }


def test_requires_token_rule() -> None:
    rt = methods.requires_token
    assert rt("CleanBrokerData", {}) and rt("UpdateConfig", {"config": {}}) and rt("ChangeQuorum", {})
    assert rt("PauseFailover", {"paused": False}) and rt("Switchover", {"dry_run": True})
    assert rt("Rebalance", {"dry_run": True})
    # designated ElectMaster is an operator's decision; a broker's own election is not
    assert rt("ElectMaster", {"designate_elect": True, "broker_id": 2})
    assert not rt("ElectMaster", {"designate_elect": False, "broker_id": 2})
    assert not rt("ElectMaster", {"broker_id": 2})
    for name in (
        "GetMetadata",
        "RegisterBroker",
        "Heartbeat",
        "AlterSyncStateSet",
        "GetConfig",
        "GetHistory",
        "Nope",
    ):
        assert not rt(name, {"designate_elect": True})


def test_check_token_asks_for_the_credential_of_admin_calls_only() -> None:
    asked: list[str] = []

    def token_ok() -> bool:
        asked.append("x")
        return False

    assert methods.check_token("GetConfig", {}, token_ok, how="h") is None and asked == []
    refused = methods.check_token("UpdateConfig", {}, token_ok, how="header T")
    assert refused == {
        "code": 2103,
        "remark": "UpdateConfig is an admin call: this controller requires a token "
        "(header T, client option --token)",
    }
    assert methods.check_token("UpdateConfig", {}, lambda: True, how="h") is None


def test_rows_are_checked_when_built() -> None:
    with pytest.raises(ValueError, match="must require the token"):
        MethodSpec("Wipe", Kind.WRITE, Caller.ADMIN, Token.NEVER, "x")
    with pytest.raises(ValueError, match="without a request code"):
        MethodSpec("X", Kind.NODE, Caller.ANY, Token.NEVER, "x", remoting=True)
    with pytest.raises(ValueError, match="RocketMQ name"):
        MethodSpec("X", Kind.NODE, Caller.ANY, Token.NEVER, "x", code=7)
    with pytest.raises(ValueError, match="designated"):
        MethodSpec("X", Kind.WRITE, Caller.ADMIN, Token.DESIGNATED, "x", rule_ref=".m:f")
    with pytest.raises(ValueError, match="decided by a rule of the core"):
        MethodSpec("X", Kind.FRESH_READ, Caller.ADMIN, Token.NEVER, "x")
    row = MethodSpec(
        "DoIt",
        Kind.WRITE,
        Caller.BROKER,
        Token.NEVER,
        "x",
        code=1,
        code_name="DO_IT",
        rule_ref="m:f",
    )
    assert (row.remoting_code, row.grpc_method, row.request_type, row.response_type, row.mutating) == (
        1,
        "DoIt",
        "DoItRequest",
        "DoItResponse",
        True,
    )
    assert not row.retry_any and row.where.startswith("leader")
    core_row = MethodSpec("DoIt", Kind.WRITE, Caller.BROKER, Token.NEVER, "x", rule_ref=".elections:f")
    assert core_row.rule_ref == "mqctl.controller.core.elections:f"
    assert core_row.message == "mqctl.controller.core.elections:DoItRequest"  # beside its rule
    assert row.message == "m:DoItRequest"
