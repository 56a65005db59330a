"""The pure rule core of the mqctl controller (RocketMQ ReplicasInfoManager, plus extensions).

No I/O, no clocks, no threads, no randomness. Time and broker liveness come in as a `Context`.
`handle` decides and returns typed records (mqctl.controller.records); `ControllerState.apply`
is the only way state changes.
The rules, codes and every deliberate difference from RocketMQ are in docs/controller-rules.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, cast

from mqctl import methods
from mqctl.controller.core.brokers import (
    ApplyBrokerIdRequest,
    ApplyBrokerIdResult,
    CleanBrokerDataRequest,
    GetNextBrokerIdRequest,
    GetReplicaInfoRequest,
    GetSyncStateDataRequest,
    Heartbeat,
    NextBrokerIdResult,
    RegisterBrokerRequest,
    RegisterBrokerResult,
    ReplicaIdentity,
    ReplicaInfoResult,
    ReplicasInfo,
    RoleChange,
    SyncStateDataResult,
)
from mqctl.controller.core.config_keys import (
    HONOURED_CONFIG_KEYS,
    NODE_CONFIG_KEYS,
    NOT_HONOURED_CONFIG_KEYS,
    NOT_HONOURED_KEY,
    ROCKETMQ_CONFIG,
    default_config,
)
from mqctl.controller.core.configuration import (
    ConfigResult,
    GetConfigRequest,
    UpdateConfigRequest,
    UpdateConfigResult,
)
from mqctl.controller.core.context import (
    ALL_BROKER_SETS,
    CONFIG_BLACKLIST,
    DEFAULT_ELECTION_PRIORITY,
    DEFAULT_HEARTBEAT_TIMEOUT_MS,
    FIRST_BROKER_CONTROLLER_ID,
    HISTORY_LEVEL,
    MAX_ID,
    MAX_NAME_LEN,
    MAX_OPTION_VALUE_LEN,
    SNAPSHOT_VERSION,
    Context,
    LiveInfo,
    Result,
)
from mqctl.controller.core.decisions import (
    HISTORY_PAGE,
    GetHistoryRequest,
    HistoryPage,
    PauseFailoverRequest,
    PauseResult,
    _history,
)
from mqctl.controller.core.elections import (
    AlterSyncStateSetRequest,
    AlterSyncStateSetResult,
    BrokerMemberGroup,
    ElectMasterRequest,
    ElectMasterResult,
    RebalanceRequest,
    RebalanceResult,
    SwitchoverRequest,
    SwitchoverResult,
    elections_due,
    needs_controller_election,
    preferred_replica,
)
from mqctl.controller.core.history import ELECTION_CAUSES, HISTORY_CHUNK, History, election_cause
from mqctl.controller.core.requests import Refusal, Request
from mqctl.controller.core.responses import Ack, Response
from mqctl.controller.core.state import (
    BrokerInfo,
    BrokerSet,
    ControllerState,
    InconsistentRecord,
    SnapshotVersionError,
)
from mqctl.controller.records import MAX_FEATURE_LEVEL, Record
from mqctl.errors import Code

__all__ = [
    "ALL_BROKER_SETS",
    "CONFIG_BLACKLIST",
    "DEFAULT_ELECTION_PRIORITY",
    "DEFAULT_HEARTBEAT_TIMEOUT_MS",
    "ELECTION_CAUSES",
    "FIRST_BROKER_CONTROLLER_ID",
    "HISTORY_CHUNK",
    "HISTORY_LEVEL",
    "HISTORY_PAGE",
    "HONOURED_CONFIG_KEYS",
    "MAX_FEATURE_LEVEL",
    "MAX_ID",
    "MAX_NAME_LEN",
    "MAX_OPTION_VALUE_LEN",
    "NODE_CONFIG_KEYS",
    "NOT_HONOURED_CONFIG_KEYS",
    "NOT_HONOURED_KEY",
    "ROCKETMQ_CONFIG",
    "SNAPSHOT_VERSION",
    "Ack",
    "AlterSyncStateSetRequest",
    "AlterSyncStateSetResult",
    "ApplyBrokerIdRequest",
    "ApplyBrokerIdResult",
    "BrokerInfo",
    "BrokerMemberGroup",
    "BrokerSet",
    "CleanBrokerDataRequest",
    "ConfigResult",
    "Context",
    "ControllerState",
    "ElectMasterRequest",
    "ElectMasterResult",
    "GetConfigRequest",
    "GetHistoryRequest",
    "GetNextBrokerIdRequest",
    "GetReplicaInfoRequest",
    "GetSyncStateDataRequest",
    "Heartbeat",
    "History",
    "HistoryPage",
    "InconsistentRecord",
    "LiveInfo",
    "NextBrokerIdResult",
    "PauseFailoverRequest",
    "PauseResult",
    "RebalanceRequest",
    "RebalanceResult",
    "Refusal",
    "RegisterBrokerRequest",
    "RegisterBrokerResult",
    "ReplicaIdentity",
    "ReplicaInfoResult",
    "ReplicasInfo",
    "Request",
    "Response",
    "Result",
    "RoleChange",
    "SnapshotVersionError",
    "SwitchoverRequest",
    "SwitchoverResult",
    "SyncStateDataResult",
    "UpdateConfigRequest",
    "UpdateConfigResult",
    "broker_names_of",
    "decide",
    "decode",
    "default_config",
    "elect_each",
    "election_cause",
    "elections_due",
    "handle",
    "needs_controller_election",
    "preferred_replica",
    "refused",
]


def decode(method: str, request: Mapping[str, Any]) -> Request:
    """A wire-shaped request (the transports' dict) read once into the method's typed request
    (its row in mqctl.methods names the class); Refusal names the first bad field."""
    row = methods.BY_NAME.get(method) if isinstance(method, str) else None
    if row is None or not row.message:
        raise Refusal(Code.REQUEST_CODE_NOT_SUPPORTED, f" request type {method} not supported")
    if not isinstance(request, Mapping):
        raise Refusal(Code.CONTROLLER_INVALID_REQUEST, "Invalid request: the request must be a map")
    return cast(Request, row.read(request))


def refused(refusal: Refusal) -> Result:
    return Result(refusal.code, refusal.remark, refusal.response, [])


def broker_names_of(state: ControllerState, request: Request) -> list[str]:
    """The broker sets whose heartbeat rows a decision of ``request`` reads (its Context)."""
    if isinstance(request, GetSyncStateDataRequest) and request.broker_names:
        return request.broker_names
    if isinstance(request, GetSyncStateDataRequest | RebalanceRequest):
        return sorted(state.broker_sets)
    return [getattr(request, "broker_name", "")]


def handle(state: ControllerState, request: Request, ctx: Context) -> Result:
    """Decide `request` against `state` (never mutated). The caller applies `result.records`."""
    method = request.METHOD
    try:
        result: Result = methods.BY_NAME[method].rule(state, request, ctx)
        if result.records and state.feature_level >= HISTORY_LEVEL:
            result.records.extend(_history(state, method, request, ctx, result.records))
        return result
    except Refusal as r:
        return refused(r)
    except Exception as e:
        return Result(Code.SYSTEM_ERROR, f"internal error: {type(e).__name__}: {e}")


def decide(state: ControllerState, method: str, request: Mapping[str, Any], ctx: Context) -> Result:
    """`decode` then `handle`, for callers that hold a wire-shaped request: a log entry of mqctl
    0.1, the simulator's clients, tests."""
    try:
        typed = decode(method, request)
    except Refusal as r:
        return refused(r)
    return handle(state, typed, ctx)


def elect_each(
    state: ControllerState, due: list[tuple[str, str]], context_of: Callable[[str], Context]
) -> tuple[Result, list[tuple[str, Result]]]:
    """The controller's own ElectMaster (broker id -1) of every broker set due, as one decision:
    the records of all in one Raft entry (a mass failure is one round trip), and each one's answer."""
    answers: list[tuple[str, Result]] = []
    out: list[Record] = []
    for cluster_name, name in due:
        result = handle(state, ElectMasterRequest(cluster_name, name), context_of(name))
        answers.append((name, result))
        out.extend(result.records)
    return Result(Code.SUCCESS, "", None, out), answers
