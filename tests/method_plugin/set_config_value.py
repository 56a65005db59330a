"""A controller method added the way issue 34 asks: one row (``methods.register``), its rule and its
typed request, and nothing else. Imported by ``mqctl serve`` through sitecustomize.py beside it (the
test puts this directory on PYTHONPATH) and by the test itself for the clients."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from mqctl import methods
from mqctl.controller import core
from mqctl.controller.records import ConfigUpdated
from mqctl.errors import Code
from mqctl.methods import Caller, Kind, MethodSpec, RemotingCodec, Token

CODE = 8901  # not a RocketMQ RequestCode


@dataclass(slots=True)
class SetConfigValueRequest:
    METHOD: ClassVar[str] = "SetConfigValue"
    key: str
    value: str

    @classmethod
    def read(cls, req: Mapping[str, Any]) -> SetConfigValueRequest:
        config = req.get("config") or {}
        if not isinstance(config, Mapping) or len(config) != 1:
            raise core.Refusal(Code.CONTROLLER_INVALID_REQUEST, f"Invalid request: {cls.METHOD} sets one key")
        ((key, value),) = config.items()
        return cls(str(key), str(value))


def set_config_value(
    state: core.ControllerState, req: SetConfigValueRequest, ctx: core.Context
) -> core.Result:
    if req.key not in core.HONOURED_CONFIG_KEYS:
        raise core.Refusal(Code.CONTROLLER_INVALID_REQUEST, f"Invalid request: {req.key} is not honoured")
    if state.config.get(req.key) == req.value:
        return core.Result(Code.SUCCESS, "unchanged")
    return core.Result(Code.SUCCESS, "", {}, [ConfigUpdated({req.key: req.value})])


ROW = MethodSpec(
    "SetConfigValue",
    Kind.WRITE,
    Caller.ADMIN,
    Token.ALWAYS,
    "Set one replicated config key (a method added by a test through the table alone).",
    code=CODE,
    code_name="MQCTL_SET_CONFIG_VALUE",
    request_type="UpdateConfigRequest",  # proto messages it shares with UpdateConfig
    response_type="UpdateConfigResponse",
    rule_ref=f"{__name__}:set_config_value",
    remoting_codec=RemotingCodec(request_body="mqctl.remoting.headers:CONFIG"),
)

if ROW.name not in methods.BY_NAME:
    methods.register(ROW)
