"""ClusterControl: broker ids, registration, heartbeats, replica info and cleaning a broker's data."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from mqctl.controller import election
from mqctl.controller.core.context import (
    DEFAULT_ELECTION_PRIORITY,
    FIRST_BROKER_CONTROLLER_ID,
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    MAX_ID,
    MAX_NAME_LEN,
    Context,
    LiveInfo,
    Result,
)
from mqctl.controller.core.requests import (
    Refusal,
    _bool,
    _check_broker_epoch,
    _id,
    _int,
    _invalid,
    _opt_broker_epoch,
    _str,
    _str_map,
)
from mqctl.controller.core.responses import Response, ids, pick, sync_state_set_body, sync_state_set_of
from mqctl.controller.core.state import BrokerSet, ControllerState
from mqctl.controller.records import (
    BrokerAddressUpdated,
    BrokerDataCleaned,
    BrokerIdApplied,
    BrokerOptionsSet,
    BrokerRegistered,
    MasterElected,
    Record,
)
from mqctl.errors import Code


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


# Its methods' typed responses (the clients' answers too: mqctl.api re-exports them).


@dataclass(frozen=True)
class NextBrokerIdResult(Response):
    cluster_name: str = ""
    broker_name: str = ""
    next_broker_id: int = 0
    remark: str = ""


@dataclass(frozen=True)
class ApplyBrokerIdResult(Response):
    cluster_name: str = ""
    broker_name: str = ""
    remark: str = ""


@dataclass(frozen=True)
class RegisterBrokerResult(Response):
    """The master's fields while it is alive; the SyncStateSet (``sync_state_set_epoch`` None: the
    names of a refusal only, as RocketMQ's header is filled before it checks)."""

    cluster_name: str = ""
    broker_name: str = ""
    master_broker_id: int | None = None
    master_address: str = ""
    master_epoch: int | None = None
    sync_state_set_epoch: int | None = None
    sync_state_set: tuple[int, ...] = ()
    broker_epoch: int = 0
    remark: str = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"cluster_name": self.cluster_name, "broker_name": self.broker_name}
        if self.sync_state_set_epoch is None:
            return out
        out["broker_epoch"] = self.broker_epoch
        if self.master_broker_id is not None:
            out["master_broker_id"] = self.master_broker_id
            out["master_address"] = self.master_address
            out["master_epoch"] = self.master_epoch
            out["sync_state_set_epoch"] = self.sync_state_set_epoch
        out["sync_state_set"] = sync_state_set_body(self.sync_state_set, self.sync_state_set_epoch)
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Self:
        members, body_epoch = sync_state_set_of(d)
        epoch = d.get("sync_state_set_epoch", body_epoch)
        return pick(cls, d, sync_state_set=members, sync_state_set_epoch=epoch)


@dataclass(frozen=True)
class ReplicaInfoResult(Response):
    master_broker_id: int | None = None
    master_address: str = ""
    master_epoch: int = 0
    sync_state_set: tuple[int, ...] = ()
    sync_state_set_epoch: int = 0
    remark: str = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "master_address": self.master_address,
            "master_epoch": self.master_epoch,
            "sync_state_set": sync_state_set_body(self.sync_state_set, self.sync_state_set_epoch),
        }
        if self.master_broker_id is not None:
            out["master_broker_id"] = self.master_broker_id
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Self:
        members, body_epoch = sync_state_set_of(d)
        return pick(cls, d, sync_state_set=members, sync_state_set_epoch=body_epoch or 0)


@dataclass(frozen=True)
class RoleChange(Response):
    """One NOTIFY_BROKER_ROLE_CHANGED (WatchRoleChanges): the broker set's master and SyncStateSet now."""

    cluster_name: str = ""
    broker_name: str = ""
    master_broker_id: int | None = None
    master_address: str = ""
    master_epoch: int = 0
    sync_state_set_epoch: int = 0
    sync_state_set: tuple[int, ...] = ()
    remark: str = ""

    @classmethod
    def of(cls, cluster_name: str, broker_name: str, info: ReplicaInfoResult) -> Self:
        """The role of a broker set as its GetReplicaInfo answers it."""
        return cls(
            cluster_name,
            broker_name,
            info.master_broker_id,
            info.master_address,
            info.master_epoch,
            info.sync_state_set_epoch,
            info.sync_state_set,
        )

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Self:
        return pick(cls, d, sync_state_set=ids(d.get("sync_state_set")))


@dataclass(frozen=True)
class ReplicaIdentity(Response):
    """None: no heartbeat row for it."""

    broker_name: str = ""
    broker_id: int = 0
    broker_address: str = ""
    alive: bool = False
    heartbeat_age_ms: int | None = None
    epoch: int | None = None
    max_offset: int | None = None
    confirm_offset: int | None = None
    election_priority: int | None = None
    broker_epoch: int = 0


@dataclass(frozen=True)
class ReplicasInfo(Response):
    master_broker_id: int | None = None
    master_address: str = ""
    master_epoch: int = 0
    sync_state_set_epoch: int = 0
    in_sync_replicas: tuple[ReplicaIdentity, ...] = ()
    not_in_sync_replicas: tuple[ReplicaIdentity, ...] = ()
    cluster_name: str = ""
    failover_paused: bool = False
    failover_pause_reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        if not self.failover_paused:  # the two keys travel only while failover is paused
            del out["failover_paused"], out["failover_pause_reason"]
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Self:
        return pick(
            cls,
            d,
            in_sync_replicas=tuple(pick(ReplicaIdentity, r) for r in d.get("in_sync_replicas", ())),
            not_in_sync_replicas=tuple(pick(ReplicaIdentity, r) for r in d.get("not_in_sync_replicas", ())),
        )


@dataclass(frozen=True)
class SyncStateDataResult(Response):
    replicas_info_table: dict[str, ReplicasInfo] = field(default_factory=dict)
    remark: str = ""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Self:
        table = {k: ReplicasInfo.from_dict(v) for k, v in (d.get("replicas_info_table") or {}).items()}
        return pick(cls, d, replicas_info_table=table)


def get_next_broker_id(state: ControllerState, req: GetNextBrokerIdRequest, ctx: Context) -> Result:
    cluster, name = req.cluster_name, req.broker_name
    bs = state.broker_sets.get(name)
    next_id = FIRST_BROKER_CONTROLLER_ID if bs is None else bs.next_assign_broker_id
    return Result(Code.SUCCESS, "", NextBrokerIdResult(cluster, name, next_id))


def apply_broker_id(state: ControllerState, req: ApplyBrokerIdRequest, ctx: Context) -> Result:
    cluster, name, bid = req.cluster_name, req.broker_name, req.applied_broker_id
    code, address = req.register_check_code, req.broker_address
    response = ApplyBrokerIdResult(cluster, name)
    record = BrokerIdApplied(cluster, name, bid, address, code)
    bs = state.broker_sets.get(name)
    if bs is None:
        if bid != FIRST_BROKER_CONTROLLER_ID:
            raise Refusal(
                Code.CONTROLLER_BROKER_ID_INVALID,
                f"Broker-set: {name} hasn't been registered in controller, but broker try to apply "
                f"brokerId: {bid}",
                response,
            )
        return Result(Code.SUCCESS, "", response, [record])
    info = bs.brokers.get(bid)
    if info is None:
        return Result(Code.SUCCESS, "", response, [record])
    if info.register_check_code == code:
        return Result(Code.SUCCESS, "", response)  # the same broker again: nothing changes
    raise Refusal(
        Code.CONTROLLER_BROKER_ID_INVALID, f"Fail to apply brokerId: {bid} in broker-set: {name}", response
    )


def _options_diff(recorded: Mapping[str, str], requested: Mapping[str, str]) -> list[str]:
    diffs = []
    for key in sorted(set(recorded) | set(requested)):
        a, b = recorded.get(key), requested.get(key)
        if a != b:
            shown_a = "<absent>" if a is None else repr(a)
            shown_b = "<absent>" if b is None else repr(b)
            diffs.append(f"{key} (broker-set: {shown_a}, request: {shown_b})")
    return diffs


def register_broker(state: ControllerState, req: RegisterBrokerRequest, ctx: Context) -> Result:
    cluster, name, bid, address = req.cluster_name, req.broker_name, req.broker_id, req.broker_address
    epoch, max_offset, priority, options = req.epoch, req.max_offset, req.election_priority, req.options

    names = RegisterBrokerResult(cluster, name)  # RocketMQ's header is built before any check
    bs = state.broker_sets.get(name)
    if bs is None:
        raise Refusal(
            Code.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
            f"Broker-set: {name} hasn't been registered in controller",
            names,
        )
    info = bs.brokers.get(bid)
    if info is None:
        raise Refusal(
            Code.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
            f"BrokerId: {bid} hasn't been registered in broker-set: {name}",
            names,
        )
    records: list[Record] = []
    if options and bs.options is not None:
        diffs = _options_diff(bs.options, options)
        if diffs:
            raise Refusal(
                Code.INCONSISTENT_BROKER_OPTIONS,
                f"Broker options of broker {bid} differ from broker-set {name}: " + ", ".join(diffs),
            )
    if info.address != address:
        records.append(BrokerAddressUpdated(cluster, name, bid, address))
    new_broker_epoch = state.broker_epoch + 1
    records.append(BrokerRegistered(cluster, name, bid, new_broker_epoch))
    if options and bs.options is None:
        records.append(BrokerOptionsSet(name, dict(sorted(options.items()))))

    master = bs.master_broker_id
    ss_set, ss_epoch = set(bs.sync_state_set), bs.sync_state_set_epoch
    master_epoch = bs.master_epoch

    # mqctl: a bounced master (re-registers while its old heartbeat row is still alive) does not keep
    # the role by default: the alive SyncStateSet members compete with what it reports now (not while
    # failover is paused).
    if master == bid and ctx.is_alive(name, bid) and state.pause_of(name) is None:
        me = LiveInfo(
            broker_id=bid,
            broker_address=address,
            epoch=-1 if epoch is None else epoch,
            max_offset=-1 if max_offset is None else max_offset,
            election_priority=DEFAULT_ELECTION_PRIORITY if priority is None else priority,
        )
        live: dict[int, LiveInfo] = dict(ctx.rows(name))
        live[bid] = me
        candidates = {b for b in bs.sync_state_set if b != bid and ctx.is_alive(name, b)} | {bid}
        winner = election.freshest(candidates, live)
        if winner is not None and winner != bid:
            records.append(MasterElected(name, winner))
            master, master_epoch = winner, bs.master_epoch + 1
            ss_set, ss_epoch = {winner}, bs.sync_state_set_epoch + 1

    members = tuple(sorted(ss_set))
    if master is not None and ctx.is_alive(name, master):
        master_address = bs.address_of(master) if master != bid else address
        response = RegisterBrokerResult(
            cluster, name, master, master_address, master_epoch, ss_epoch, members, new_broker_epoch
        )
    else:
        response = RegisterBrokerResult(
            cluster,
            name,
            sync_state_set_epoch=ss_epoch,
            sync_state_set=members,
            broker_epoch=new_broker_epoch,
        )
    return Result(Code.SUCCESS, "", response, records)


def heartbeat(state: ControllerState, beat: Heartbeat, ctx: Context) -> Result:
    bs = state.broker_sets.get(beat.broker_name)
    if bs is not None:
        _check_broker_epoch(bs, beat.broker_id, beat.broker_epoch)
    return Result(Code.SUCCESS, "Heart beat success")


def get_replica_info(state: ControllerState, req: GetReplicaInfoRequest, ctx: Context) -> Result:
    name = req.broker_name
    bs = state.broker_sets.get(name)
    if bs is None:
        raise Refusal(Code.CONTROLLER_BROKER_METADATA_NOT_EXIST, "Broker metadata is not existed")
    response = ReplicaInfoResult(
        bs.master_broker_id,
        bs.address_of(bs.master_broker_id),
        bs.master_epoch,
        tuple(sorted(bs.sync_state_set)),
        bs.sync_state_set_epoch,
    )
    return Result(Code.SUCCESS, "", response)


def _replica_identity(bs: BrokerSet, broker_id: int, ctx: Context) -> ReplicaIdentity:
    info = bs.brokers[broker_id]
    alive = ctx.is_alive(bs.broker_name, broker_id)
    row = ctx.row(bs.broker_name, broker_id)
    if row is None:
        return ReplicaIdentity(bs.broker_name, broker_id, info.address, alive, broker_epoch=info.broker_epoch)
    return ReplicaIdentity(
        bs.broker_name,
        broker_id,
        info.address,
        alive,
        ctx.now_ms - row.last_heartbeat_ms,
        row.epoch,
        row.max_offset,
        row.confirm_offset,
        row.election_priority,
        info.broker_epoch,
    )


def get_sync_state_data(state: ControllerState, req: GetSyncStateDataRequest, ctx: Context) -> Result:
    names = req.broker_names
    wanted = sorted(set(names)) if names else sorted(state.broker_sets)
    table: dict[str, ReplicasInfo] = {}
    for name in wanted:
        bs = state.broker_sets.get(name)
        if bs is None:
            continue  # RocketMQ: unknown names are silently omitted
        pause = state.pause_of(name)
        table[name] = ReplicasInfo(
            bs.master_broker_id,
            bs.address_of(bs.master_broker_id),
            bs.master_epoch,
            bs.sync_state_set_epoch,
            tuple(_replica_identity(bs, b, ctx) for b in sorted(bs.brokers) if b in bs.sync_state_set),
            tuple(_replica_identity(bs, b, ctx) for b in sorted(bs.brokers) if b not in bs.sync_state_set),
            bs.cluster_name,
            pause is not None,
            str(pause.get("reason", "")) if pause is not None else "",
        )
    return Result(Code.SUCCESS, "", SyncStateDataResult(table))


_JAVA_LONG_RE = re.compile(r"^[+-]?[0-9]+$")


def _parse_clean_ids(text: str) -> list[int]:
    """Java `split(";")` + Long.parseLong, with Java's exception text."""
    parts = text.split(";")
    while parts and parts[-1] == "":  # Java's split drops trailing empty strings
        parts.pop()
    ids: set[int] = set()
    for part in parts:
        if not _JAVA_LONG_RE.match(part) or not INT64_MIN <= int(part) <= INT64_MAX:
            raise Refusal(
                Code.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                "Please set the option <brokerControllerIdsToClean> according to the format, "
                f'exception: java.lang.NumberFormatException: For input string: "{part}"',
            )
        n = int(part)
        if not 0 <= n <= MAX_ID:
            raise _invalid(
                f"Invalid request: broker_controller_ids_to_clean id {n} is out of range [0, {MAX_ID}]"
            )
        ids.add(n)
    return sorted(ids)


def clean_broker_data(state: ControllerState, req: CleanBrokerDataRequest, ctx: Context) -> Result:
    name, ids_text = req.broker_name, req.broker_controller_ids_to_clean
    clean_living = req.is_clean_living_broker
    bad = Code.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
    bs = state.broker_sets.get(name)
    ids: list[int] | None = None
    if not clean_living:
        if not ids_text.strip():
            if bs is not None and bs.master_broker_id is not None:
                raise Refusal(bad, f"Broker {name} is still alive, clean up failure")
        else:
            ids = _parse_clean_ids(ids_text)
            for bid in ids:
                if ctx.is_alive(name, bid):
                    raise Refusal(bad, f"Broker [{name},  {bid}] is still alive, clean up failure")
    if bs is None:
        raise Refusal(bad, f"Broker {name} is not existed,clean broker data failure.")
    return Result(Code.SUCCESS, "", None, [BrokerDataCleaned(name, tuple(ids) if ids else None)])
