"""A request's fields read and checked once, with one clear error (`Refusal`) for a bad one."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from mqctl.controller.core.context import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    MAX_ID,
    MAX_NAME_LEN,
    MAX_OPTION_VALUE_LEN,
)
from mqctl.errors import Code

if TYPE_CHECKING:
    from mqctl.controller.core.state import BrokerSet, ControllerState

# --------------------------------------------------------------------------------------------
# Request validation (mqctl additions: RocketMQ lets these through or fails with an NPE)


class Refusal(Exception):
    def __init__(self, code: int, remark: str, response: dict[str, Any] | None = None) -> None:
        super().__init__(remark)
        self.code = int(code)
        self.remark = remark
        self.response = response or {}


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


def _sync_state_set_body(ids: Iterable[int], epoch: int) -> dict[str, Any]:
    return {"sync_state_set": sorted(ids), "sync_state_set_epoch": epoch}


def _needs_level(what: str, level: int, state: ControllerState) -> Refusal:
    return Refusal(
        Code.FEATURE_LEVEL_TOO_LOW,
        f"{what} needs feature level {level}; the group is at {state.feature_level}: raise it "
        f"with `mqctl quorum feature-level {level}` once every node runs a release that speaks it",
    )


# --------------------------------------------------------------------------------------------
# One typed request per method. `read` checks the fields in the order the handlers always did, so
# the first bad field names the remark; after it a handler only decides. Not frozen: a frozen
# dataclass's __init__ made the heartbeat path 16% slower.


@dataclass(slots=True)
class GetNextBrokerIdRequest:
    METHOD: ClassVar[str] = "GetNextBrokerId"
    cluster_name: str = ""
    broker_name: str = ""

    @classmethod
    def read(cls, req: Mapping[str, Any]) -> GetNextBrokerIdRequest:
        return cls(_str(req, "cluster_name"), _str(req, "broker_name", required=True))


@dataclass(slots=True)
class ApplyBrokerIdRequest:
    METHOD: ClassVar[str] = "ApplyBrokerId"
    cluster_name: str = ""
    broker_name: str = ""
    applied_broker_id: int = 0
    register_check_code: str = ""

    @classmethod
    def read(cls, req: Mapping[str, Any]) -> ApplyBrokerIdRequest:
        out = cls(
            _str(req, "cluster_name", required=True),
            _str(req, "broker_name", required=True),
            _id(req, "applied_broker_id"),
            _str(req, "register_check_code", required=True, max_len=2 * MAX_NAME_LEN),
        )
        if not out.broker_address.strip():
            # mqctl: RocketMQ stores an empty address (a code of " ;1"), or fails with SYSTEM_ERROR 1 (a
            # code of only ';': Java's split leaves no element 0); a broker without an address cannot be
            # reached
            raise _invalid(
                f"Invalid request: register_check_code {out.register_check_code!r} has no broker address "
                "before its first ';' (expected <brokerAddr>;<timestamp>)"
            )
        return out

    @property
    def broker_address(self) -> str:
        return self.register_check_code.split(";")[0]


@dataclass(slots=True)
class RegisterBrokerRequest:
    METHOD: ClassVar[str] = "RegisterBroker"
    cluster_name: str = ""
    broker_name: str = ""
    broker_id: int = 0
    broker_address: str = ""
    epoch: int | None = None
    max_offset: int | None = None
    confirm_offset: int | None = None
    election_priority: int | None = None
    heartbeat_timeout_mills: int | None = None
    options: dict[str, str] = field(default_factory=dict)

    @classmethod
    def read(cls, req: Mapping[str, Any]) -> RegisterBrokerRequest:
        return cls(
            _str(req, "cluster_name", required=True),
            _str(req, "broker_name", required=True),
            _id(req, "broker_id"),
            _str(req, "broker_address", required=True),
            _int(req, "epoch", lo=INT32_MIN, hi=INT32_MAX),
            _int(req, "max_offset", lo=INT64_MIN, hi=INT64_MAX),
            _int(req, "confirm_offset", lo=INT64_MIN, hi=INT64_MAX),
            _int(req, "election_priority", lo=INT32_MIN, hi=INT32_MAX),
            _int(req, "heartbeat_timeout_mills", lo=1, hi=INT64_MAX),
            _str_map(req, "options"),
        )


@dataclass(slots=True)
class Heartbeat:
    """A broker's heartbeat; the heartbeat table (mqctl.controller.liveness) takes it as it is.
    None: the broker did not send the field."""

    METHOD: ClassVar[str] = "Heartbeat"
    cluster_name: str = ""
    broker_name: str = ""
    broker_addr: str = ""
    broker_id: int = 0
    broker_epoch: int | None = None
    epoch: int | None = None
    max_offset: int | None = None
    confirm_offset: int | None = None
    heartbeat_timeout_mills: int | None = None
    election_priority: int | None = None

    @classmethod
    def read(cls, req: Mapping[str, Any]) -> Heartbeat:
        if req.get("broker_id") is None:
            raise _invalid("Heart beat with empty brokerId")
        cluster = _str(req, "cluster_name")
        address = _str(req, "broker_addr")
        name = _str(req, "broker_name", required=True)
        bid = _id(req, "broker_id")
        epoch = _int(req, "epoch", lo=INT32_MIN, hi=INT32_MAX)
        max_offset = _int(req, "max_offset", lo=INT64_MIN, hi=INT64_MAX)
        confirm_offset = _int(req, "confirm_offset", lo=INT64_MIN, hi=INT64_MAX)
        timeout = _int(req, "heartbeat_timeout_mills", lo=1, hi=INT64_MAX)
        priority = _int(req, "election_priority", lo=INT32_MIN, hi=INT32_MAX)
        return cls(
            cluster,
            name,
            address,
            bid,
            _opt_broker_epoch(req),
            epoch,
            max_offset,
            confirm_offset,
            timeout,
            priority,
        )


@dataclass(slots=True)
class AlterSyncStateSetRequest:
    METHOD: ClassVar[str] = "AlterSyncStateSet"
    broker_name: str = ""
    cluster_name: str = ""
    master_broker_id: int = 0
    master_epoch: int = 0
    sync_state_set_epoch: int = 0
    new_sync_state_set: list[int] = field(default_factory=list)
    broker_epoch: int | None = None

    @classmethod
    def read(cls, req: Mapping[str, Any]) -> AlterSyncStateSetRequest:
        name = _str(req, "broker_name", required=True)
        cluster = _str(req, "cluster_name")
        master = _id(req, "master_broker_id")
        master_epoch = _req_int(req, "master_epoch", lo=INT32_MIN, hi=INT32_MAX)
        ss_epoch = _req_int(req, "sync_state_set_epoch", lo=INT32_MIN, hi=INT32_MAX)
        if req.get("new_sync_state_set") is None:
            raise _invalid("Invalid request: new_sync_state_set is missing")
        new_set = _id_list(req, "new_sync_state_set")
        return cls(name, cluster, master, master_epoch, ss_epoch, new_set, _opt_broker_epoch(req))


@dataclass(slots=True)
class ElectMasterRequest:
    """broker_id None: the controller's own election (RocketMQ's -1, ofControllerTrigger)."""

    METHOD: ClassVar[str] = "ElectMaster"
    cluster_name: str = ""
    broker_name: str = ""
    designate_elect: bool = False
    broker_id: int | None = None
    broker_epoch: int | None = None

    @classmethod
    def read(cls, req: Mapping[str, Any]) -> ElectMasterRequest:
        cluster = _str(req, "cluster_name")
        name = _str(req, "broker_name", required=True)
        designate = _bool(req, "designate_elect")
        raw_id = _int(req, "broker_id", lo=-1, hi=MAX_ID)
        broker_id = None if raw_id is None or raw_id == -1 else raw_id
        if designate and broker_id is None:
            raise _invalid("Invalid request: broker_id is required when designate_elect is true")
        return cls(cluster, name, designate, broker_id, _opt_broker_epoch(req))


@dataclass(slots=True)
class GetReplicaInfoRequest:
    METHOD: ClassVar[str] = "GetReplicaInfo"
    broker_name: str = ""

    @classmethod
    def read(cls, req: Mapping[str, Any]) -> GetReplicaInfoRequest:
        return cls(_str(req, "broker_name", required=True))


@dataclass(slots=True)
class GetSyncStateDataRequest:
    """broker_names empty: every known broker set (mqctl extension)."""

    METHOD: ClassVar[str] = "GetSyncStateData"
    broker_names: list[str] = field(default_factory=list)

    @classmethod
    def read(cls, req: Mapping[str, Any]) -> GetSyncStateDataRequest:
        names = req.get("broker_names")
        if names is None:
            names = []
        if not isinstance(names, list | tuple) or not all(isinstance(n, str) for n in names):
            raise _invalid("Invalid request: broker_names must be a list of strings")
        return cls(list(names))


@dataclass(slots=True)
class CleanBrokerDataRequest:
    METHOD: ClassVar[str] = "CleanBrokerData"
    cluster_name: str = ""
    broker_name: str = ""
    broker_controller_ids_to_clean: str = ""  # RocketMQ's "1;2;3", parsed by the handler as Java does
    is_clean_living_broker: bool = False

    @classmethod
    def read(cls, req: Mapping[str, Any]) -> CleanBrokerDataRequest:
        return cls(
            _str(req, "cluster_name"),
            _str(req, "broker_name", required=True),
            _str(req, "broker_controller_ids_to_clean", max_len=64 * 1024),
            _bool(req, "is_clean_living_broker"),
        )


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


@dataclass(slots=True)
class GetHistoryRequest:
    METHOD: ClassVar[str] = "GetHistory"
    broker_name: str = ""
    since_ms: int = 0
    after_seq: int = 0
    limit: int = 0  # 0: a whole page

    @classmethod
    def read(cls, req: Mapping[str, Any]) -> GetHistoryRequest:
        return cls(
            _str(req, "broker_name"),
            _int(req, "since_ms", lo=0, hi=INT64_MAX) or 0,
            _int(req, "after_seq", lo=0, hi=INT64_MAX) or 0,
            _int(req, "limit", lo=0, hi=INT64_MAX) or 0,
        )


@dataclass(slots=True)
class PauseFailoverRequest:
    """broker_name "": every broker set."""

    METHOD: ClassVar[str] = "PauseFailover"
    broker_name: str = ""
    paused: bool = False
    reason: str = ""

    @classmethod
    def read(cls, req: Mapping[str, Any]) -> PauseFailoverRequest:
        return cls(_str(req, "broker_name"), _bool(req, "paused"), _str(req, "reason", max_len=1024))


@dataclass(slots=True)
class SwitchoverRequest:
    """broker_id None: the preferred caught-up SyncStateSet member."""

    METHOD: ClassVar[str] = "Switchover"
    broker_name: str = ""
    broker_id: int | None = None
    force: bool = False
    dry_run: bool = False

    @classmethod
    def read(cls, req: Mapping[str, Any]) -> SwitchoverRequest:
        return cls(
            _str(req, "broker_name", required=True),
            _int(req, "broker_id", lo=0, hi=MAX_ID),
            _bool(req, "force"),
            _bool(req, "dry_run"),
        )


@dataclass(slots=True)
class RebalanceRequest:
    """cluster_name "": every cluster."""

    METHOD: ClassVar[str] = "Rebalance"
    cluster_name: str = ""
    dry_run: bool = False

    @classmethod
    def read(cls, req: Mapping[str, Any]) -> RebalanceRequest:
        return cls(_str(req, "cluster_name"), _bool(req, "dry_run"))


Request = (
    GetNextBrokerIdRequest
    | ApplyBrokerIdRequest
    | RegisterBrokerRequest
    | Heartbeat
    | AlterSyncStateSetRequest
    | ElectMasterRequest
    | GetReplicaInfoRequest
    | GetSyncStateDataRequest
    | CleanBrokerDataRequest
    | GetConfigRequest
    | UpdateConfigRequest
    | GetHistoryRequest
    | PauseFailoverRequest
    | SwitchoverRequest
    | RebalanceRequest
)
