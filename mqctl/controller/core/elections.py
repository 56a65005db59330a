"""ReplicationControl: the SyncStateSet, master elections, switchover and rebalance, and when the
leader must elect on its own."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Self

from mqctl.controller import election
from mqctl.controller.core.context import (
    DEFAULT_ELECTION_PRIORITY,
    INT32_MAX,
    INT32_MIN,
    MAX_ID,
    Context,
    Result,
)
from mqctl.controller.core.requests import (
    Refusal,
    _bool,
    _check_broker_epoch,
    _id,
    _id_list,
    _int,
    _invalid,
    _java,
    _opt_broker_epoch,
    _req_int,
    _str,
)
from mqctl.controller.core.responses import Response, ids, pick, sync_state_set_body, sync_state_set_of
from mqctl.controller.core.state import BrokerSet, ControllerState
from mqctl.controller.records import (
    MasterElected,
    Record,
    SyncStateSetAltered,
)
from mqctl.errors import Code


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


# Its methods' typed responses (the clients' answers too: mqctl.api re-exports them).


@dataclass(frozen=True)
class AlterSyncStateSetResult(Response):
    """``sync_state_set_epoch`` None: a refusal, without the SyncStateSet body."""

    new_sync_state_set_epoch: int = 0
    sync_state_set: tuple[int, ...] = ()
    sync_state_set_epoch: int | None = None
    remark: str = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"new_sync_state_set_epoch": self.new_sync_state_set_epoch}
        if self.sync_state_set_epoch is not None:
            out["sync_state_set"] = sync_state_set_body(self.sync_state_set, self.sync_state_set_epoch)
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Self:
        members, body_epoch = sync_state_set_of(d)
        return pick(cls, d, sync_state_set=members, sync_state_set_epoch=body_epoch)


@dataclass(frozen=True)
class BrokerMemberGroup(Response):
    cluster: str = ""
    broker_name: str = ""
    broker_addrs: dict[int, str] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Self:
        addrs = {int(k): str(v) for k, v in (d.get("broker_addrs") or {}).items()}
        return pick(cls, d, broker_addrs=addrs)


@dataclass(frozen=True)
class ElectMasterResult(Response):
    """No master (``master_broker_id`` None): an answer without fields."""

    master_broker_id: int | None = None
    master_address: str = ""
    master_epoch: int | None = None
    sync_state_set_epoch: int | None = None
    sync_state_set: tuple[int, ...] = ()
    broker_member_group: BrokerMemberGroup | None = None
    remark: str = ""

    def to_dict(self) -> dict[str, Any]:
        return super().to_dict() if self.master_broker_id is not None else {}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Self:
        group = d.get("broker_member_group")
        return pick(
            cls,
            d,
            sync_state_set=ids(d.get("sync_state_set")),
            broker_member_group=BrokerMemberGroup.from_dict(group) if group is not None else None,
        )


@dataclass(frozen=True)
class SwitchoverResult(Response):
    """The plan of a switchover; ``broker_name`` "": a refusal that names the two ids only."""

    broker_name: str = ""
    old_master_broker_id: int | None = None
    new_master_broker_id: int | None = None
    master_max_offset: int = -1
    candidate_max_offset: int = -1
    gap_bytes: int | None = None  # None: an offset is not known
    caught_up: bool = False
    master_epoch: int = 0
    dry_run: bool = False
    remark: str = ""

    def to_dict(self) -> dict[str, Any]:
        if not self.broker_name:
            return {
                "new_master_broker_id": self.new_master_broker_id,
                "old_master_broker_id": self.old_master_broker_id,
            }
        out = super().to_dict()
        if not self.dry_run:
            del out["dry_run"]
        return out


@dataclass(frozen=True)
class RebalanceResult(Response):
    moves: tuple[dict[str, Any], ...] = ()  # RebalanceMove's field names
    dry_run: bool = False
    remark: str = ""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Self:
        return pick(cls, d, moves=tuple(dict(m) for m in d.get("moves", ())))


def _paused_text(broker_name: str, pause: Mapping[str, Any]) -> str:
    reason = str(pause.get("reason") or "no reason given")
    return (
        f"automatic failover of {broker_name} is paused ({reason}): `mqctl failover resume`, or elect "
        "a master with `mqctl electMaster -b ID`"
    )


def alter_sync_state_set(state: ControllerState, req: AlterSyncStateSetRequest, ctx: Context) -> Result:
    name, req_master, broker_epoch = req.broker_name, req.master_broker_id, req.broker_epoch
    req_master_epoch, req_ss_epoch = req.master_epoch, req.sync_state_set_epoch
    new_set = req.new_sync_state_set

    def refuse(code: int, remark: str) -> Refusal:
        # RocketMQ's AlterSyncStateSetResponseHeader.newSyncStateSetEpoch is an int: 0 in a refusal
        return Refusal(
            code, "Rejecting alter syncStateSet request because " + remark, AlterSyncStateSetResult()
        )

    fail = Code.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED
    bs = state.broker_sets.get(name)
    if bs is None:
        raise Refusal(fail, "Broker metadata is not existed", AlterSyncStateSetResult())
    if set(new_set) == bs.sync_state_set:
        raise Refusal(
            fail,
            "The newSyncStateSet is equal with oldSyncStateSet, no needed to update syncStateSet",
            AlterSyncStateSetResult(),
        )
    # RocketMQ's remarks (ReplicasInfoManager.alterSyncStateSet) put the values in braces
    if bs.master_broker_id is None or bs.master_broker_id != req_master:
        raise refuse(
            Code.CONTROLLER_INVALID_MASTER,
            f"the current leader is:{{{_java(bs.master_broker_id)}}}, not {{{req_master}}}",
        )
    _check_broker_epoch(bs, req_master, broker_epoch)
    if req_master_epoch != bs.master_epoch:
        raise refuse(
            Code.CONTROLLER_FENCED_MASTER_EPOCH,
            f"the current master epoch is:{{{bs.master_epoch}}}, not {{{req_master_epoch}}}",
        )
    if req_ss_epoch != bs.sync_state_set_epoch:
        raise refuse(
            Code.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
            f"the current syncStateSet epoch is:{{{bs.sync_state_set_epoch}}}, not {{{req_ss_epoch}}}",
        )
    for replica in new_set:  # ascending (mqctl; RocketMQ: a HashSet's order), the same answer everywhere
        if replica not in bs.brokers:
            raise refuse(Code.CONTROLLER_INVALID_REPLICAS, f"the replicas {{{replica}}} don't exist")
        if not ctx.is_alive(name, replica):
            raise refuse(Code.CONTROLLER_BROKER_NOT_ALIVE, f"the replicas {{{replica}}} don't alive")
    if bs.master_broker_id not in new_set:
        raise refuse(
            fail, f"the newSyncStateSet don't contains origin leader {{{_java(bs.master_broker_id)}}}"
        )
    new_epoch = bs.sync_state_set_epoch + 1
    members = tuple(sorted(new_set))
    return Result(
        Code.SUCCESS,
        "",
        AlterSyncStateSetResult(new_epoch, members, new_epoch),
        [SyncStateSetAltered(name, members)],
    )


def elect_master(state: ControllerState, req: ElectMasterRequest, ctx: Context) -> Result:
    name, designate, broker_id, broker_epoch = (
        req.broker_name,
        req.designate_elect,
        req.broker_id,
        req.broker_epoch,
    )
    controller_trigger = broker_id is None

    bs = state.broker_sets.get(name)
    if bs is None:
        raise Refusal(Code.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, "Broker hasn't been registered")
    if not designate and broker_id is not None:
        _check_broker_epoch(bs, broker_id, broker_epoch)
    pause = state.pause_of(name)
    if pause is not None and not designate:
        # mqctl: `mqctl failover pause`; an operator's designated election (electMaster -b) still works
        raise Refusal(Code.CONTROLLER_ELECT_MASTER_FAILED, _paused_text(name, pause))

    def is_alive(b: int) -> bool:
        return ctx.is_alive(name, b)

    live = ctx.rows(name)
    all_replicas = set(bs.brokers) if state.cfg_bool("enableElectUncleanMaster") else None
    old_master = bs.master_broker_id
    new_master: int | None = None
    if bs.master_epoch == 0:  # isFirstTimeForElect
        wait_for = state.cfg_int("waitFor")
        if wait_for > 1 and not designate:
            alive = [b for b in bs.brokers if is_alive(b)]
            if len(alive) < wait_for:
                raise Refusal(
                    Code.WAITING_FOR_REPLICAS, f"waiting for {wait_for} replicas ({len(alive)}/{wait_for})"
                )
            new_master = election.freshest(alive, live)
        else:
            if broker_id is not None and broker_id not in bs.brokers:
                # mqctl: RocketMQ elects any id the first time, even an unregistered one
                # (a master without an address); refuse it like RegisterBroker does.
                raise Refusal(
                    Code.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                    f"BrokerId: {broker_id} hasn't been registered in broker-set: {name}",
                )
            new_master = broker_id
    if new_master is None:
        new_master = election.elect(
            bs.sync_state_set, all_replicas, old_master, broker_id if designate else None, is_alive, live
        )

    if new_master is not None and new_master == old_master:
        raise Refusal(
            Code.CONTROLLER_MASTER_STILL_EXIST,
            f"The old master {old_master} is still alive, not need to elect new master for broker {name}",
            ElectMasterResult(
                old_master,
                bs.address_of(old_master),
                bs.master_epoch,
                bs.sync_state_set_epoch,
                tuple(sorted(bs.sync_state_set)),
            ),
        )
    if new_master is not None:
        return Result(
            Code.SUCCESS,
            "",
            ElectMasterResult(
                new_master,
                bs.address_of(new_master),
                bs.master_epoch + 1,
                bs.sync_state_set_epoch + 1,
                (new_master,),
                BrokerMemberGroup(
                    bs.cluster_name, name, {b: i.address for b, i in sorted(bs.brokers.items())}
                ),
            ),
            [MasterElected(name, new_master)],
        )
    if controller_trigger:
        # mqctl: before the first master (masterEpoch 0) there is nothing to clear; RocketMQ's
        # ElectMaster(false) would bump masterEpoch and so disable the brokers' first election.
        records: list[Record] = [] if bs.master_epoch == 0 else [MasterElected(name, None)]
        return Result(
            Code.CONTROLLER_MASTER_NOT_AVAILABLE,
            "Old master has down and failed to elect a new broker master",
            None,
            records,
        )
    raise Refusal(Code.CONTROLLER_ELECT_MASTER_FAILED, "Failed to elect a new master")


def _switchover_plan(bs: BrokerSet, ctx: Context, target: int | None) -> SwitchoverResult:
    """Where a switchover of `bs` moves the master and how far the new one is behind (from the
    heartbeats' maxOffset); raises Refusal when there is nowhere to move it."""
    name, master = bs.broker_name, bs.master_broker_id
    if master is None or not ctx.is_alive(name, master):
        raise Refusal(
            Code.CONTROLLER_MASTER_NOT_AVAILABLE,
            f"{name} has no alive master: nothing to switch over (the controller elects one on its "
            "own, or `mqctl electMaster`)",
        )
    if target is None:
        candidates = {b for b in bs.sync_state_set if b != master and ctx.is_alive(name, b)}
        target = election.freshest(candidates, ctx.rows(name))
        if target is None:
            raise Refusal(
                Code.CONTROLLER_ELECT_MASTER_FAILED,
                f"{name} has no alive SyncStateSet member besides the master {master} "
                f"(SyncStateSet {sorted(bs.sync_state_set)})",
            )
    elif target == master:
        raise Refusal(
            Code.CONTROLLER_MASTER_STILL_EXIST,
            f"broker {target} is already the master of {name}",
            SwitchoverResult(old_master_broker_id=master, new_master_broker_id=target),
        )
    elif target not in bs.brokers:
        raise Refusal(
            Code.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
            f"BrokerId: {target} hasn't been registered in broker-set: {name}",
        )
    elif not ctx.is_alive(name, target):
        raise Refusal(Code.CONTROLLER_BROKER_NOT_ALIVE, f"broker {target} of {name} is not alive")
    elif target not in bs.sync_state_set:
        raise Refusal(
            Code.CONTROLLER_INVALID_REPLICAS,
            f"broker {target} is not in the SyncStateSet {sorted(bs.sync_state_set)} of {name}: a "
            "switchover stays inside it (`mqctl electMaster --accept-data-loss` otherwise)",
        )
    master_row, target_row = ctx.row(name, master), ctx.row(name, target)
    master_offset = master_row.max_offset if master_row is not None else -1
    target_offset = target_row.max_offset if target_row is not None else -1
    known = master_offset >= 0 and target_offset >= 0
    return SwitchoverResult(
        name,
        master,
        target,
        master_offset,
        target_offset,
        max(0, master_offset - target_offset) if known else None,
        known and target_offset >= master_offset,
        bs.master_epoch,
    )


def _not_caught_up(plan: SwitchoverResult) -> str:
    gap = plan.gap_bytes
    behind = (
        f"{gap} bytes behind" if gap is not None else "of unknown offset (no maxOffset in its heartbeats)"
    )
    return (
        f"broker {plan.new_master_broker_id} of {plan.broker_name} is {behind}: maxOffset "
        f"{plan.candidate_max_offset}, the master {plan.old_master_broker_id} has "
        f"{plan.master_max_offset}; wait (--timeout) or force it (--force: it may lose those bytes)"
    )


def switchover(state: ControllerState, req: SwitchoverRequest, ctx: Context) -> Result:
    name, target, force, dry_run = req.broker_name, req.broker_id, req.force, req.dry_run
    bs = state.broker_sets.get(name)
    if bs is None:
        raise Refusal(Code.CONTROLLER_BROKER_METADATA_NOT_EXIST, "Broker metadata is not existed")
    plan = _switchover_plan(bs, ctx, target)
    if not plan.caught_up and not force:
        raise Refusal(Code.NOT_CAUGHT_UP, _not_caught_up(plan), plan)
    if dry_run:
        return Result(Code.SUCCESS, "dry run: nothing changed", replace(plan, dry_run=True))
    return Result(
        Code.SUCCESS,
        "",
        replace(plan, master_epoch=bs.master_epoch + 1),
        [MasterElected(name, plan.new_master_broker_id)],
    )


def preferred_replica(bs: BrokerSet, ctx: Context) -> int | None:
    """Kafka's preferred leader: the highest election priority (the lowest number, from the
    heartbeats), then the lowest broker id, among every registered replica."""

    def key(b: int) -> tuple[int, int]:
        row = ctx.row(bs.broker_name, b)
        return (row.election_priority if row is not None else DEFAULT_ELECTION_PRIORITY, b)

    return min(bs.brokers, key=key) if bs.brokers else None


def rebalance(state: ControllerState, req: RebalanceRequest, ctx: Context) -> Result:
    """A switchover to the preferred replica of every broker set (of a cluster) where it is an alive,
    caught-up SyncStateSet member but not the master; the others are listed with the reason."""
    cluster, dry_run = req.cluster_name, req.dry_run
    sets = [bs for _, bs in sorted(state.broker_sets.items()) if not cluster or bs.cluster_name == cluster]
    if cluster and not sets:
        raise Refusal(Code.CONTROLLER_BROKER_METADATA_NOT_EXIST, f"cluster {cluster} has no broker set")
    moves: list[dict[str, Any]] = []
    records: list[Record] = []
    for bs in sets:
        preferred = preferred_replica(bs, ctx)
        move: dict[str, Any] = {"broker_name": bs.broker_name, "cluster_name": bs.cluster_name}
        if bs.master_broker_id is not None:
            move["master_broker_id"] = bs.master_broker_id
        if preferred is not None:
            move["preferred_broker_id"] = preferred
        pause = state.pause_of(bs.broker_name)
        if preferred is None or preferred == bs.master_broker_id:
            move["action"], move["reason"] = "none", "the preferred replica is the master"
        elif pause is not None:
            move["action"], move["reason"] = "skip", f"failover paused ({pause.get('reason') or 'no reason'})"
        elif not ctx.is_alive(bs.broker_name, preferred) or preferred not in bs.sync_state_set:
            move["action"] = "skip"
            move["reason"] = "the preferred replica is not an alive SyncStateSet member"
        else:
            try:
                plan = _switchover_plan(bs, ctx, preferred)
            except Refusal as r:
                move["action"], move["reason"] = "skip", r.remark
            else:
                move["master_max_offset"] = plan.master_max_offset
                move["candidate_max_offset"] = plan.candidate_max_offset
                if plan.gap_bytes is not None:
                    move["gap_bytes"] = plan.gap_bytes
                if plan.caught_up:
                    move["action"], move["reason"] = "move", "the preferred replica has caught up"
                    records.append(MasterElected(bs.broker_name, preferred))
                else:
                    move["action"], move["reason"] = "skip", _not_caught_up(plan)
        moves.append(move)
    return Result(
        Code.SUCCESS,
        "dry run: nothing changed" if dry_run else "",
        RebalanceResult(tuple(moves), dry_run),
        [] if dry_run else records,
    )


def needs_controller_election(state: ControllerState, broker_name: str, ctx: Context) -> bool:
    """Should the leader trigger an election for this broker set now? (RocketMQ's
    scanNeedReelectBrokerSets, run on every leader tick instead of every 5 s.)

    Never while failover is paused for the set. Yes when some registered replica is alive and: the
    master is dead; or there is no master after
    an earlier one (a SyncStateSet member, or any replica with unclean election, is alive); or, before
    the first master, `waitFor` > 1 replicas are alive (with waitFor 1 the brokers ask, as in RocketMQ).
    """
    bs = state.broker_sets.get(broker_name)
    if bs is None or state.pause_of(broker_name) is not None:
        return False
    alive = {b for b in bs.brokers if ctx.is_alive(broker_name, b)}
    if not alive:
        return False
    if bs.master_broker_id is not None:
        return bs.master_broker_id not in alive
    if bs.master_epoch == 0:
        wait_for = state.cfg_int("waitFor")
        return wait_for > 1 and len(alive) >= wait_for
    return bool(alive & bs.sync_state_set) or state.cfg_bool("enableElectUncleanMaster")


def elections_due(state: ControllerState, broker_names: list[str], ctx: Context) -> list[tuple[str, str]]:
    """(clusterName, brokerName) of each of ``broker_names`` whose master the leader must elect now."""
    due: list[tuple[str, str]] = []
    for name in broker_names:
        if needs_controller_election(state, name, ctx):
            due.append((state.broker_sets[name].cluster_name, name))
    return due
