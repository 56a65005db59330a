"""A request's fields read and checked once, with one clear error (`Refusal`) for a bad one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from mqctl.controller.core.context import (
    MAX_ID,
    MAX_NAME_LEN,
    MAX_OPTION_VALUE_LEN,
)
from mqctl.controller.core.responses import Response
from mqctl.errors import Code

if TYPE_CHECKING:
    from mqctl.controller.core.state import BrokerSet, ControllerState

# --------------------------------------------------------------------------------------------
# Request validation (mqctl additions: RocketMQ lets these through or fails with an NPE)


class Request(Protocol):
    """A method's typed request: its class sits beside its rule, and its row in mqctl.methods names
    both (``message``, ``rule_ref``). ``read`` builds it from a transport's dict, once, checking the
    fields in the order the rules always did, so the first bad field names the remark; a rule only
    decides. Not frozen: a frozen dataclass's __init__ made the heartbeat path 16% slower."""

    METHOD: ClassVar[str]


class Refusal(Exception):
    """A request refused: its code, its remark and what of the method's response it still carries
    (RocketMQ fills some response headers before it refuses)."""

    def __init__(self, code: int, remark: str, response: Response | None = None) -> None:
        super().__init__(remark)
        self.code = int(code)
        self.remark = remark
        self.response = response


def _invalid(remark: str) -> Refusal:
    return Refusal(Code.CONTROLLER_INVALID_REQUEST, remark)


def _str(req: Mapping[str, Any], key: str, *, required: bool = False, max_len: int = MAX_NAME_LEN) -> str:
    v = req.get(key)
    if v is None:
        v = ""
    if not isinstance(v, str):
        raise _invalid(f"Invalid request: {key} must be a string")
    if len(v) > max_len:
        raise _invalid(f"Invalid request: {key} is longer than {max_len} characters")
    if required and not v.strip():
        raise _invalid(f"Invalid request: {key} is empty")
    return v


def _int(
    req: Mapping[str, Any], key: str, *, required: bool = False, lo: int = 0, hi: int = MAX_ID
) -> int | None:
    v = req.get(key)
    if v is None:
        if required:
            raise _invalid(f"Invalid request: {key} is missing")
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise _invalid(f"Invalid request: {key} must be an integer")
    if not lo <= v <= hi:
        raise _invalid(f"Invalid request: {key} {v} is out of range [{lo}, {hi}]")
    return v


def _req_int(req: Mapping[str, Any], key: str, *, lo: int = 0, hi: int = MAX_ID) -> int:
    v = _int(req, key, required=True, lo=lo, hi=hi)
    assert v is not None
    return v


def _bool(req: Mapping[str, Any], key: str) -> bool:
    v = req.get(key)
    if v is None:
        return False
    if not isinstance(v, bool):
        raise _invalid(f"Invalid request: {key} must be a boolean")
    return v


def _str_map(req: Mapping[str, Any], key: str) -> dict[str, str]:
    v = req.get(key)
    if v is None:
        return {}
    if not isinstance(v, Mapping):
        raise _invalid(f"Invalid request: {key} must be a map of strings")
    out: dict[str, str] = {}
    for k, x in v.items():
        if not isinstance(k, str) or not isinstance(x, str):
            raise _invalid(f"Invalid request: {key} must be a map of strings")
        if not k or len(k) > MAX_NAME_LEN or len(x) > MAX_OPTION_VALUE_LEN:
            raise _invalid(f"Invalid request: {key} has an empty or too long key or value")
        out[k] = x
    return out


def _id_list(req: Mapping[str, Any], key: str) -> list[int]:
    v = req.get(key)
    if v is None:
        return []
    if not isinstance(v, list | tuple | set | frozenset):
        raise _invalid(f"Invalid request: {key} must be a list of broker ids")
    out: set[int] = set()
    for x in v:
        if isinstance(x, bool) or not isinstance(x, int) or not 0 <= x <= MAX_ID:
            raise _invalid(f"Invalid request: {key} must be a list of broker ids in [0, {MAX_ID}]")
        out.add(x)
    return sorted(out)


def _id(req: Mapping[str, Any], key: str) -> int:
    return _req_int(req, key, lo=0, hi=MAX_ID)


def _opt_broker_epoch(req: Mapping[str, Any]) -> int | None:
    return _int(req, "broker_epoch", lo=0, hi=MAX_ID)


def _check_broker_epoch(bs: BrokerSet, broker_id: int, request_epoch: int | None) -> None:
    """mqctl (KIP-380): a request from an older incarnation of a broker is refused."""
    if request_epoch is None:
        return
    info = bs.brokers.get(broker_id)
    if info is None:
        return
    if request_epoch < info.broker_epoch:
        raise Refusal(
            Code.STALE_BROKER_EPOCH,
            f"Stale brokerEpoch {request_epoch} for broker {broker_id} in broker-set {bs.broker_name}, "
            f"registered brokerEpoch is {info.broker_epoch}",
        )


def _java(value: object) -> str:
    """A value as Java's String.format prints it (null for None)."""
    return "null" if value is None else str(value)


def _needs_level(what: str, level: int, state: ControllerState) -> Refusal:
    return Refusal(
        Code.FEATURE_LEVEL_TOO_LOW,
        f"{what} needs feature level {level}; the group is at {state.feature_level}: raise it "
        f"with `mqctl quorum feature-level {level}` once every node runs a release that speaks it",
    )
