"""The pure rule core of the mqctl controller (RocketMQ ReplicasInfoManager, plus extensions).

No I/O, no clocks, no threads, no randomness. Time and broker liveness come in as a `Context`.
`handle` decides and returns typed records (mqctl.controller.records); `ControllerState.apply`
is the only way state changes.
The rules, codes and every deliberate difference from RocketMQ are in docs/controller-rules.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mqctl.controller.core.brokers import (
    Heartbeat,
    _apply_broker_id,
    _clean_broker_data,
    _get_next_broker_id,
    _get_replica_info,
    _get_sync_state_data,
    _heartbeat,
    _register_broker,
    read_heartbeat,
)
from mqctl.controller.core.config_keys import (
    HONOURED_CONFIG_KEYS,
    NODE_CONFIG_KEYS,
    NOT_HONOURED_CONFIG_KEYS,
    NOT_HONOURED_KEY,
    ROCKETMQ_CONFIG,
    default_config,
)
from mqctl.controller.core.configuration import _get_config, _update_config
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
from mqctl.controller.core.decisions import HISTORY_PAGE, _get_history, _history, _pause_failover
from mqctl.controller.core.elections import (
    _alter_sync_state_set,
    _elect_master,
    _rebalance,
    _switchover,
    needs_controller_election,
    preferred_replica,
)
from mqctl.controller.core.history import ELECTION_CAUSES, HISTORY_CHUNK, History, election_cause
from mqctl.controller.core.requests import _Reject
from mqctl.controller.core.state import (
    BrokerInfo,
    BrokerSet,
    ControllerState,
    InconsistentRecord,
    SnapshotVersionError,
)
from mqctl.controller.records import MAX_FEATURE_LEVEL
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
    "METHODS",
    "NODE_CONFIG_KEYS",
    "NOT_HONOURED_CONFIG_KEYS",
    "NOT_HONOURED_KEY",
    "ROCKETMQ_CONFIG",
    "SNAPSHOT_VERSION",
    "BrokerInfo",
    "BrokerSet",
    "Context",
    "ControllerState",
    "Heartbeat",
    "History",
    "InconsistentRecord",
    "LiveInfo",
    "Result",
    "SnapshotVersionError",
    "default_config",
    "election_cause",
    "handle",
    "needs_controller_election",
    "preferred_replica",
    "read_heartbeat",
]


_Handler = Callable[[ControllerState, Mapping[str, Any], Context], Result]

_HANDLERS: dict[str, _Handler] = {
    "GetNextBrokerId": _get_next_broker_id,
    "ApplyBrokerId": _apply_broker_id,
    "RegisterBroker": _register_broker,
    "Heartbeat": _heartbeat,
    "AlterSyncStateSet": _alter_sync_state_set,
    "ElectMaster": _elect_master,
    "GetReplicaInfo": _get_replica_info,
    "GetSyncStateData": _get_sync_state_data,
    "CleanBrokerData": _clean_broker_data,
    "GetConfig": _get_config,
    "UpdateConfig": _update_config,
    "GetHistory": _get_history,
    "PauseFailover": _pause_failover,
    "Switchover": _switchover,
    "Rebalance": _rebalance,
}

METHODS: tuple[str, ...] = tuple(_HANDLERS)


def handle(state: ControllerState, method: str, request: Mapping[str, Any], ctx: Context) -> Result:
    """Decide `request` against `state` (never mutated). The caller applies `result.records`."""
    fn = _HANDLERS.get(method) if isinstance(method, str) else None
    if fn is None:
        return Result(Code.REQUEST_CODE_NOT_SUPPORTED, f" request type {method} not supported")
    if not isinstance(request, Mapping):
        return Result(Code.CONTROLLER_INVALID_REQUEST, "Invalid request: the request must be a map")
    try:
        result = fn(state, request, ctx)
        if result.records and state.feature_level >= HISTORY_LEVEL:
            result.records.extend(_history(state, method, request, ctx, result.records))
        return result
    except _Reject as r:
        return Result(r.code, r.remark, dict(r.response), [])
    except Exception as e:
        return Result(Code.SYSTEM_ERROR, f"internal error: {type(e).__name__}: {e}")
