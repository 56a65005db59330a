"""electMaster before it acts: every candidate, who would win, and what each replica would lose.

Pure functions. Input is what GetSyncStateData returns for the broker set (alive flags and the
leader's heartbeat rows: epoch, maxOffset, confirmOffset, electionPriority) and, when the
operator asked for them, the replicas' epoch caches (GetBrokerEpochCache).

Truncation estimate for replica Y if candidate X becomes master:

* with both epoch caches: Y keeps everything up to RocketMQ's consistent point
  (EpochFileCache.findConsistentPoint of Y against X, last ends = max offsets) and truncates
  ``Y.maxOffset - point`` bytes (everything when no epoch matches). Basis ``"epochCache"``.
* otherwise from the heartbeats: ``max(0, Y.maxOffset - X.maxOffset)``, a lower bound (a replica
  that wrote in an epoch X never saw loses more). Basis ``"maxOffset"``.
* unknown (no heartbeat row): null.

Who wins, or why there is no winner, is not guessed: ``controller_answer`` runs the controller's own
ElectMaster rules (mqctl.controller.core) on the broker set rebuilt from GetSyncStateData's answer,
so ``electMaster --dry-run`` gives the answer the real call gets.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mqctl.admin import SCHEMA_VERSION
from mqctl.controller.election import DEFAULT_ELECTION_PRIORITY
from mqctl.errors import Code

if TYPE_CHECKING:
    from mqctl.client import ReplicaIdentity, ReplicasInfo
    from mqctl.store.epochfile import EpochCacheView

__all__ = ["Candidate", "ElectAnswer", "candidates_of", "controller_answer", "elect_plan", "truncate_bytes"]


@dataclass(frozen=True)
class Candidate:
    broker_id: int
    broker_address: str
    alive: bool
    in_sync: bool
    epoch: int  # -1 unknown
    max_offset: int  # -1 unknown
    confirm_offset: int  # -1 unknown
    election_priority: int = DEFAULT_ELECTION_PRIORITY


def _row(r: ReplicaIdentity, in_sync: bool) -> Candidate:
    def v(x: int | None) -> int:
        return -1 if x is None else int(x)

    return Candidate(
        r.broker_id,
        r.broker_address,
        bool(r.alive),
        in_sync,
        v(r.epoch),
        v(r.max_offset),
        v(r.confirm_offset),
        DEFAULT_ELECTION_PRIORITY if r.election_priority is None else int(r.election_priority),
    )


def candidates_of(info: ReplicasInfo) -> list[Candidate]:
    rows = [_row(r, True) for r in info.in_sync_replicas]
    rows += [_row(r, False) for r in info.not_in_sync_replicas]
    return sorted(rows, key=lambda c: c.broker_id)


def truncate_bytes(
    replica: Candidate, master: Candidate, caches: Mapping[int, EpochCacheView] | None = None
) -> tuple[int | None, str]:
    """(bytes ``replica`` would truncate if ``master`` wins, basis); see the module docstring."""
    if replica.broker_id == master.broker_id:
        return 0, "self"
    rc = caches.get(replica.broker_id) if caches else None
    mc = caches.get(master.broker_id) if caches else None
    if (
        rc is not None
        and mc is not None
        and rc.error is None
        and mc.error is None
        and rc.max_offset is not None
        and mc.max_offset is not None
    ):
        from mqctl.store.epochfile import find_consistent_point  # lazy: start-up

        point = find_consistent_point(rc.entries, rc.max_offset, mc.entries, mc.max_offset)
        if point < 0:
            first = rc.entries[0].start_offset if rc.entries else 0
            return max(0, rc.max_offset - first), "epochCache"
        return max(0, rc.max_offset - point), "epochCache"
    if replica.max_offset < 0 or master.max_offset < 0:
        return None, "unknown"
    return max(0, replica.max_offset - master.max_offset), "maxOffset"


@dataclass(frozen=True)
class ElectAnswer:
    """What the controller would answer to ElectMaster: ``code`` 0 and the new master, or a refusal."""

    code: int
    remark: str = ""
    master_broker_id: int | None = None


def controller_answer(
    broker_name: str, info: ReplicasInfo, designated: int | None, unclean: bool, wait_for: int = 1
) -> ElectAnswer:
    """The answer of mqctl's controller rules (mqctl.controller.core, ElectMaster) to the call
    `electMaster` makes (``designate_elect`` when ``designated`` is given), for the broker set as
    GetSyncStateData showed it: the same function decides, on the state rebuilt from that answer.

    A replica is alive exactly when GetSyncStateData says so (only a heartbeat makes it alive); its
    heartbeat row (epoch, maxOffset, priority) orders the candidates as on the controller.
    """
    from mqctl.controller import core  # lazy: start-up

    bs = core.BrokerSet(
        cluster_name=info.cluster_name,
        broker_name=broker_name,
        master_broker_id=info.master_broker_id,
        master_epoch=info.master_epoch,
        sync_state_set=frozenset(r.broker_id for r in info.in_sync_replicas),
        sync_state_set_epoch=info.sync_state_set_epoch,
    )
    now_ms = 1 << 40
    rows: dict[int, core.LiveInfo] = {}
    for r in (*info.in_sync_replicas, *info.not_in_sync_replicas):
        bs.brokers[r.broker_id] = core.BrokerInfo(r.broker_address, "", r.broker_epoch)
        if r.alive or r.heartbeat_age_ms is not None or r.epoch is not None or r.max_offset is not None:
            rows[r.broker_id] = core.LiveInfo(
                broker_id=r.broker_id,
                broker_address=r.broker_address,
                broker_epoch=r.broker_epoch,
                epoch=-1 if r.epoch is None else r.epoch,
                max_offset=-1 if r.max_offset is None else r.max_offset,
                confirm_offset=-1 if r.confirm_offset is None else r.confirm_offset,
                election_priority=(
                    DEFAULT_ELECTION_PRIORITY if r.election_priority is None else r.election_priority
                ),
                last_heartbeat_ms=now_ms if r.alive else 0,
                timeout_ms=1,
            )
    state = core.ControllerState(
        {"enableElectUncleanMaster": "true" if unclean else "false", "waitFor": str(max(1, wait_for))}
    )
    state.broker_sets[broker_name] = bs
    res = core.decide(  # decoded as the node decodes it: a designated id out of range is refused
        state,
        "ElectMaster",
        {
            "cluster_name": info.cluster_name,
            "broker_name": broker_name,
            "broker_id": designated,
            "designate_elect": designated is not None,
            "broker_epoch": None,
        },
        core.Context(now_ms=now_ms, live={broker_name: rows}),
    )
    master = res.response.get("master_broker_id") if res.ok else None
    return ElectAnswer(res.code, res.remark, None if master is None else int(master))


def elect_plan(
    cluster_name: str,
    broker_name: str,
    info: ReplicasInfo,
    designated: int | None,
    unclean: bool,
    caches: Mapping[int, EpochCacheView] | None = None,
    wait_for: int = 1,
    answer: ElectAnswer | None = None,
) -> dict[str, Any]:
    """The candidate table document (docs/admin.md, electMaster). ``answer``: the controller's
    expected answer to this call (controller_answer), computed when not given."""
    cands = candidates_of(info)
    by_id = {c.broker_id: c for c in cands}
    if answer is None:
        answer = controller_answer(broker_name, info, designated, unclean, wait_for)
    predicted = answer.master_broker_id if answer.code == 0 else None
    target_id = designated if designated is not None else predicted

    def electable(broker_id: int) -> bool:  # the controller would take it with -b (or it is the master)
        code = controller_answer(broker_name, info, broker_id, unclean, wait_for).code
        return code in (Code.SUCCESS, Code.CONTROLLER_MASTER_STILL_EXIST)

    rows = []
    bases: set[str] = set()
    for c in cands:
        per: dict[str, int | None] = {}
        total: int | None = 0
        for other in cands:
            if other.broker_id == c.broker_id:
                continue
            n, basis = truncate_bytes(other, c, caches)
            bases.add(basis)
            per[str(other.broker_id)] = n
            total = None if n is None or total is None else total + n
        rows.append(
            {
                "brokerId": c.broker_id,
                "brokerAddress": c.broker_address,
                "alive": c.alive,
                "inSyncStateSet": c.in_sync,
                "role": "master" if c.broker_id == info.master_broker_id else "slave",
                "epoch": None if c.epoch < 0 else c.epoch,
                "maxOffset": None if c.max_offset < 0 else c.max_offset,
                "confirmOffset": None if c.confirm_offset < 0 else c.confirm_offset,
                "electionPriority": c.election_priority,
                "electable": electable(c.broker_id),
                "truncateBytes": per,
                "totalTruncateBytes": total,
            }
        )
    bases.discard("self")
    target = by_id.get(target_id) if target_id is not None else None
    return {
        "version": SCHEMA_VERSION,
        "clusterName": cluster_name or info.cluster_name,
        "brokerName": broker_name,
        "masterBrokerId": info.master_broker_id,
        "masterAddress": info.master_address or None,
        "masterEpoch": info.master_epoch,
        "syncStateSetEpoch": info.sync_state_set_epoch,
        "designatedBrokerId": designated,
        "predictedMasterId": predicted,
        "dataLoss": bool(target is not None and not target.in_sync),
        "uncleanElectionEnabled": unclean,
        "estimateBasis": "epochCache" if bases == {"epochCache"} else ("maxOffset" if bases else "none"),
        "candidates": rows,
    }
