"""Operator decisions (failover pauses) and the decision history: one entry per broker set a
decision changed, with its cause."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from mqctl import methods
from mqctl.controller import election
from mqctl.controller import records as rec  # the record types (`records` names a list of them here)
from mqctl.controller.core.brokers import RegisterBrokerRequest
from mqctl.controller.core.context import (
    ALL_BROKER_SETS,
    DEFAULT_ELECTION_PRIORITY,
    HISTORY_LEVEL,
    INT64_MAX,
    Context,
    LiveInfo,
    Result,
)
from mqctl.controller.core.elections import ElectMasterRequest, SwitchoverRequest
from mqctl.controller.core.requests import (
    Refusal,
    Request,
    _bool,
    _int,
    _needs_level,
    _str,
)
from mqctl.controller.core.responses import Response, pick
from mqctl.controller.core.state import BrokerSet, ControllerState
from mqctl.controller.records import Record
from mqctl.errors import Code

# --------------------------------------------------------------------------------------------
# Operator decisions (mqctl extensions, feature level 3 where they write new records)


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


# Its methods' typed responses (the clients' answers too: mqctl.api re-exports them).


@dataclass(frozen=True)
class HistoryPage(Response):
    """GetHistory: entries (dicts with HistoryEntry's field names), oldest first."""

    entries: tuple[dict[str, Any], ...] = ()
    more: bool = False
    last_seq: int = 0
    history_max_entries: int = 0
    loss_total: dict[str, int] = field(default_factory=dict)
    failover_paused: dict[str, str] = field(default_factory=dict)  # broker set ("*": all) -> reason
    remark: str = ""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Self:
        return pick(cls, d, entries=tuple(dict(e) for e in d.get("entries", ())))


@dataclass(frozen=True)
class PauseResult(Response):
    failover_paused: dict[str, str] = field(default_factory=dict)
    remark: str = ""


HISTORY_PAGE = 500  # entries per GetHistory answer (a gRPC message stays far below 1 MiB)


def get_history(state: ControllerState, req: GetHistoryRequest, ctx: Context) -> Result:
    """The decision history, oldest first, after `after_seq` and from `since_ms`, one page at a time."""
    name, since, after = req.broker_name, req.since_ms, req.after_seq
    limit = min(req.limit or HISTORY_PAGE, HISTORY_PAGE)
    if state.feature_level < HISTORY_LEVEL:
        raise _needs_level("the decision history", HISTORY_LEVEL, state)
    wanted = [
        e
        for e in state.history
        if int(e["seq"]) > after and int(e["time_ms"]) >= since and (not name or e.get("broker_name") == name)
    ]
    page = HistoryPage(
        tuple(wanted[:limit]),
        len(wanted) > limit,
        state.history_seq,
        state.cfg_int("historyMaxEntries"),
        {n: v for n, v in sorted(state.loss_total.items()) if not name or n == name},
        {
            (n or "*"): str(p.get("reason", ""))
            for n, p in sorted(state.failover_paused.items())
            if not name or n in (name, ALL_BROKER_SETS)
        },
    )
    return Result(Code.SUCCESS, "", page)


def pause_failover(state: ControllerState, req: PauseFailoverRequest, ctx: Context) -> Result:
    name, paused, reason = req.broker_name, req.paused, req.reason
    if state.feature_level < HISTORY_LEVEL:
        raise _needs_level("failover pause and resume", HISTORY_LEVEL, state)
    if name and name not in state.broker_sets:
        raise Refusal(
            Code.CONTROLLER_BROKER_METADATA_NOT_EXIST, f"broker set {name} is not known to the controller"
        )
    scope = name or "every broker set"
    current = state.failover_paused.get(name)
    after = dict(state.failover_paused)
    if paused:
        after[name] = {"reason": reason, "since_ms": ctx.now_ms}
    else:
        after.pop(name, None)
    response = PauseResult({(n or "*"): str(p.get("reason", "")) for n, p in sorted(after.items())})
    if not paused and current is None:
        remark = f"automatic failover of {scope} was not paused"
        if name and ALL_BROKER_SETS in state.failover_paused:
            remark += " on its own; it stays paused by the pause of every broker set (resume without -b)"
        return Result(Code.SUCCESS, remark, response)
    if paused and current is not None and current.get("reason") == reason:
        return Result(Code.SUCCESS, f"automatic failover of {scope} was already paused", response)
    remark = f"automatic failover of {scope} {'paused' if paused else 'resumed'}"
    if not paused and name and ALL_BROKER_SETS in state.failover_paused:
        remark += "; it stays paused by the pause of every broker set (resume without -b)"
    return Result(Code.SUCCESS, remark, response, [rec.FailoverPauseSet(name, paused, reason, ctx.now_ms)])


# --- the history: one entry per broker set a decision changed ------------------------------

_WHAT: dict[type, str] = {
    rec.BrokerIdApplied: "broker id applied",
    rec.BrokerAddressUpdated: "address changed",
    rec.BrokerRegistered: "registered",
    rec.BrokerOptionsSet: "options set",
    rec.SyncStateSetAltered: "SyncStateSet altered",
    rec.BrokerDataCleaned: "data cleaned",
    rec.ConfigUpdated: "config changed",
}


def _cause(
    state: ControllerState,
    method: str,
    req: Request,
    ctx: Context,
    name: str,
    records: list[Record],
) -> str:
    bs = state.broker_sets.get(name)
    if method == "Switchover":
        return "switchover"
    if method == "Rebalance":
        return "rebalance"
    if methods.spec(method).caller is methods.Caller.ADMIN or (
        isinstance(req, ElectMasterRequest) and req.designate_elect
    ):
        return "admin request"
    if isinstance(req, ElectMasterRequest) and req.broker_id is None:
        old = bs.master_broker_id if bs is not None else None
        if old is not None and not ctx.is_alive(name, old):
            return f"lease expired for broker {old}"
        return "controller (no master)" if old is None else "controller"
    if isinstance(req, RegisterBrokerRequest) and any(isinstance(r, rec.MasterElected) for r in records):
        return f"bounced master {req.broker_id}"
    for key in ("broker_id", "applied_broker_id", "master_broker_id"):
        if isinstance(getattr(req, key, None), int):
            return f"broker request (broker {getattr(req, key)})"
    return "broker request"


def _why(
    method: str,
    req: Request,
    bs: BrokerSet,
    new: int | None,
    pool: set[int],
    live: Mapping[int, LiveInfo],
) -> str:
    if new is None:
        return (
            "no alive candidate (no SyncStateSet member alive; unclean election disabled or no replica alive)"
        )
    if isinstance(req, ElectMasterRequest) and req.designate_elect:
        return f"designated by the admin request (electMaster -b {new})"
    if isinstance(req, SwitchoverRequest) and req.broker_id is not None:
        return f"the switchover's target (--to {new})"
    if method == "Rebalance":
        return "the preferred replica (highest election priority, then lowest id)"
    if isinstance(req, ElectMasterRequest) and bs.master_epoch == 0 and req.broker_id is not None:
        return f"first election: the broker that asked ({new})"
    if bs.master_epoch == 0:
        where = "alive replica (first election, once waitFor replicas were alive)"
    elif new in bs.sync_state_set:
        where = "alive SyncStateSet member"
    else:
        where = "alive replica outside the SyncStateSet (unclean: no SyncStateSet member was alive)"
    others = pool - {new}
    runner = election.freshest(others, live)
    if runner is None:
        return f"the only {where}"
    kw, kr = election.election_key(new, live.get(new)), election.election_key(runner, live.get(runner))
    if kw[0] != kr[0]:
        by = f"higher epoch ({-kw[0]} > {-kr[0]} of broker {runner})"
    elif kw[1] != kr[1]:
        by = f"higher maxOffset ({-kw[1]} > {-kr[1]} of broker {runner})"
    elif kw[2] != kr[2]:
        by = f"higher election priority ({kw[2]} < {kr[2]} of broker {runner})"
    else:
        by = f"lower brokerId than broker {runner}"
    return f"freshest {where}: {by}"


def _election_note(
    state: ControllerState,
    bs: BrokerSet,
    method: str,
    req: Request,
    ctx: Context,
    record: rec.MasterElected,
) -> dict[str, Any]:
    name = bs.broker_name
    live: dict[int, LiveInfo] = dict(ctx.rows(name))
    alive = {b for b in bs.brokers if ctx.is_alive(name, b)}
    if isinstance(req, RegisterBrokerRequest):  # the bounced master competes with what it reports now
        live[req.broker_id] = LiveInfo(
            req.broker_id,
            epoch=_or(req.epoch, -1),
            max_offset=_or(req.max_offset, -1),
            election_priority=_or(req.election_priority, DEFAULT_ELECTION_PRIORITY),
        )
    old = bs.master_broker_id if bs.master_broker_id is not None else bs.last_master_broker_id
    new = record.new_master_broker_id
    if isinstance(req, RegisterBrokerRequest):
        pool = {b for b in bs.sync_state_set if b in alive} | {req.broker_id}
    elif new is not None and new not in bs.sync_state_set:
        pool = alive
    elif method == "Switchover":
        pool = {b for b in bs.sync_state_set if b in alive} - {bs.master_broker_id}
    else:
        pool = {b for b in bs.sync_state_set if b in alive}
    candidates = []
    for b in sorted(bs.brokers):
        row = live.get(b)
        candidates.append(
            {
                "broker_id": b,
                "epoch": row.epoch if row else -1,
                "max_offset": row.max_offset if row else -1,
                "election_priority": row.election_priority if row else DEFAULT_ELECTION_PRIORITY,
                "alive": b in alive,
                "in_sync_state_set": b in bs.sync_state_set,
            }
        )
    old_row, new_row = live.get(old) if old is not None else None, live.get(new) if new is not None else None
    old_offset = old_row.max_offset if old_row is not None else -1
    new_offset = new_row.max_offset if new_row is not None else -1
    note: dict[str, Any] = {
        "candidates": candidates,
        "reason": _why(method, req, bs, new, pool, live),
        "unclean": new is not None and new not in bs.sync_state_set and bs.master_epoch > 0,
        "master_epoch": bs.master_epoch + 1,
        "old_master_max_offset": old_offset,
        "new_master_max_offset": new_offset,
    }
    if old is not None:
        note["old_master_broker_id"] = old
    if new is not None:
        note["new_master_broker_id"] = new
        if old is not None and old != new and old_offset >= 0 and new_offset >= 0:
            note["loss_bytes"] = max(0, old_offset - new_offset)
    return note


def _or(value: int | None, default: int) -> int:
    return default if value is None else value


def _detail(state: ControllerState, r: Record) -> str:
    bs = state.broker_sets.get(getattr(r, "broker_name", ""))
    if isinstance(r, rec.BrokerIdApplied):
        return f"id {r.new_broker_id} at {r.broker_address}"
    if isinstance(r, rec.BrokerAddressUpdated):
        return f"id {r.broker_id} now at {r.broker_address}"
    if isinstance(r, rec.BrokerRegistered):
        return f"id {r.broker_id}, brokerEpoch {r.broker_epoch}"
    if isinstance(r, rec.BrokerOptionsSet):
        return "options " + ", ".join(f"{k}={v}" for k, v in sorted(r.options.items()))
    if isinstance(r, rec.SyncStateSetAltered):
        epoch = (bs.sync_state_set_epoch if bs is not None else 0) + 1
        return f"SyncStateSet {list(r.new_sync_state_set)} (syncStateSetEpoch {epoch})"
    if isinstance(r, rec.BrokerDataCleaned):
        ids = r.broker_id_set_to_clean
        return f"ids {list(ids)}" if ids else "the whole broker set"
    if isinstance(r, rec.ConfigUpdated):
        return ", ".join(f"{k}={v}" for k, v in sorted(r.config.items()))
    if isinstance(r, rec.MasterElected):
        epoch = (bs.master_epoch if bs is not None else 0) + 1
        if r.new_master_broker_id is None:
            return f"no master (masterEpoch {epoch})"
        return f"master {r.new_master_broker_id} (masterEpoch {epoch})"
    if isinstance(r, rec.FailoverPauseSet):
        return r.reason
    return ""


def _history(
    state: ControllerState, method: str, req: Request, ctx: Context, records: list[Record]
) -> list[Record]:
    """The DecisionNoted records of a decision: one per broker set it changed ("" for config)."""
    groups: dict[str, list[Record]] = {}
    for r in records:
        if not isinstance(r, (rec.MetaSet, rec.FeatureLevelSet, rec.DecisionNoted)):
            groups.setdefault(getattr(r, "broker_name", ""), []).append(r)
    notes: list[Record] = []
    for name, rs in groups.items():
        bs = state.broker_sets.get(name)
        whats: list[str] = []
        entry: dict[str, Any] = {
            "time_ms": ctx.now_ms,
            "term": ctx.term,
            "broker_name": name,
            "cluster_name": bs.cluster_name if bs is not None else str(getattr(rs[0], "cluster_name", "")),
        }
        for r in rs:
            if isinstance(r, rec.MasterElected):
                whats.append("master elected" if r.new_master_elected else "master cleared")
                if bs is not None:
                    entry["election"] = _election_note(state, bs, method, req, ctx, r)
            elif isinstance(r, rec.FailoverPauseSet):
                whats.append("failover paused" if r.paused else "failover resumed")
            else:
                whats.append(_WHAT[type(r)])
        entry["what"] = ", ".join(dict.fromkeys(whats))
        entry["detail"] = "; ".join(d for d in (_detail(state, r) for r in rs) if d)
        entry["cause"] = _cause(state, method, req, ctx, name, rs)
        notes.append(rec.DecisionNoted(entry))
    return notes
