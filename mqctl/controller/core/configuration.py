"""ConfigurationControl: GetConfig and UpdateConfig on the replicated config (keys: config_keys.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from mqctl.controller.core.config_keys import (
    _LEVEL_KEYS,
    _MQCTL_NODE_KEYS,
    HONOURED_CONFIG_KEYS,
    NOT_HONOURED_CONFIG_KEYS,
    NOT_HONOURED_KEY,
    ROCKETMQ_CONFIG,
    _normalize_config_value,
)
from mqctl.controller.core.context import (
    CONFIG_BLACKLIST,
    Context,
    Result,
)
from mqctl.controller.core.requests import (
    Refusal,
    _invalid,
    _needs_level,
)
from mqctl.controller.core.responses import Response
from mqctl.controller.core.state import ControllerState
from mqctl.controller.records import ConfigUpdated
from mqctl.errors import Code


@dataclass(slots=True)
class GetConfigRequest:
    METHOD: ClassVar[str] = "GetConfig"

    @classmethod
    def read(cls, req: Mapping[str, Any]) -> GetConfigRequest:
        return cls()


@dataclass(slots=True)
class UpdateConfigRequest:
    METHOD: ClassVar[str] = "UpdateConfig"
    config: dict[str, str] = field(default_factory=dict)

    @classmethod
    def read(cls, req: Mapping[str, Any]) -> UpdateConfigRequest:
        raw = req.get("config")
        if raw is None:
            raw = {}
        if not isinstance(raw, Mapping) or not all(isinstance(k, str) for k in raw):
            raise _invalid("Invalid request: config must be a map of strings")
        for key in sorted(raw):
            if not isinstance(raw[key], str):
                raise _invalid(f"Invalid request: the value of config {key} must be a string")
        return cls(dict(raw))


# Its methods' typed responses (the clients' answers too: mqctl.api re-exports them).


@dataclass(frozen=True)
class ConfigResult(Response):
    config: dict[str, str] = field(default_factory=dict)
    remark: str = ""


@dataclass(frozen=True)
class UpdateConfigResult(Response):
    """``ignored_config`` (key -> why) is for the node to log: it does not travel."""

    ignored_config: dict[str, str] = field(default_factory=dict)
    remark: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"ignored_config": dict(self.ignored_config)} if self.ignored_config else {}


def get_config(state: ControllerState, req: GetConfigRequest, ctx: Context) -> Result:
    """RocketMQ's keys with their defaults, the replicated config over them, and mqctlNotHonoured;
    the node adds NODE_CONFIG_KEYS."""
    config = {
        **ROCKETMQ_CONFIG,
        **{k: v for k, (_, v) in _LEVEL_KEYS.items()},
        **state.config,
        NOT_HONOURED_KEY: ";".join(NOT_HONOURED_CONFIG_KEYS),
    }
    return Result(Code.SUCCESS, "", ConfigResult(dict(sorted(config.items()))))


def update_config(state: ControllerState, req: UpdateConfigRequest, ctx: Context) -> Result:
    raw = req.config
    if any(k in CONFIG_BLACKLIST for k in raw):
        raise Refusal(Code.NO_PERMISSION, "Can not update config in black list.")
    # RocketMQ's Configuration.update merges only the keys it has (mergeIfExist) and answers SUCCESS;
    # mqctl also leaves alone the keys it does not honour. Both are answered in `ignored_config`
    # (key -> why) for the node to log; only honoured keys reach the record.
    updates: dict[str, str] = {}
    ignored: dict[str, str] = {}
    for key in sorted(raw):
        if key in _LEVEL_KEYS and state.feature_level < _LEVEL_KEYS[key][0]:
            raise _needs_level(f"config {key}", _LEVEL_KEYS[key][0], state)
        if key in HONOURED_CONFIG_KEYS:
            try:
                updates[key] = _normalize_config_value(key, raw[key])
            except ValueError as e:
                raise _invalid(f"Invalid request: {e}") from None
        elif key in _MQCTL_NODE_KEYS:
            ignored[key] = "set when the node starts"
        elif key == NOT_HONOURED_KEY:
            ignored[key] = "read only"
        elif key in NOT_HONOURED_CONFIG_KEYS:
            ignored[key] = "not honoured by mqctl"
        else:
            ignored[key] = "unknown key"
    response = UpdateConfigResult(ignored)
    if not updates:
        return Result(Code.SUCCESS, "", response)
    return Result(Code.SUCCESS, "", response, [ConfigUpdated(updates)])
