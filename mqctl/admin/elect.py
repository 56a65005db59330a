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
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mqctl.admin import SCHEMA_VERSION

if TYPE_CHECKING:
    from mqctl.admin.epochs import EpochCache
    from mqctl.client import ReplicaIdentity, ReplicasInfo

__all__ = ["Candidate", "candidates_of", "truncate_bytes", "predict_master", "elect_plan"]

DEFAULT_PRIORITY = 2**31 - 1


@dataclass(frozen=True)
class Candidate:
    broker_id: int
    broker_address: str
    alive: bool
    in_sync: bool
    epoch: int          # -1 unknown
    max_offset: int     # -1 unknown
    confirm_offset: int  # -1 unknown
    election_priority: int = DEFAULT_PRIORITY


def _row(r: ReplicaIdentity, in_sync: bool) -> Candidate:
    def v(x: int | None) -> int:
        return -1 if x is None else int(x)

    return Candidate(r.broker_id, r.broker_address, bool(r.alive), in_sync, v(r.epoch), v(r.max_offset),
                     v(r.confirm_offset),
                     DEFAULT_PRIORITY if r.election_priority is None else int(r.election_priority))


def candidates_of(info: ReplicasInfo) -> list[Candidate]:
    rows = [_row(r, True) for r in info.in_sync_replicas]
    rows += [_row(r, False) for r in info.not_in_sync_replicas]
    return sorted(rows, key=lambda c: c.broker_id)


def truncate_bytes(replica: Candidate, master: Candidate,
                   caches: Mapping[int, EpochCache] | None = None) -> tuple[int | None, str]:
    """(bytes ``replica`` would truncate if ``master`` wins, basis); see the module docstring."""
    if replica.broker_id == master.broker_id:
        return 0, "self"
    rc = caches.get(replica.broker_id) if caches else None
    mc = caches.get(master.broker_id) if caches else None
    if rc is not None and mc is not None and rc.error is None and mc.error is None \
            and rc.max_offset is not None and mc.max_offset is not None:
        from mqctl.store.epochfile import EpochEntry, find_consistent_point

        mine = [EpochEntry(e.epoch, e.start_offset) for e in rc.entries]
        theirs = [EpochEntry(e.epoch, e.start_offset) for e in mc.entries]
        point = find_consistent_point(mine, rc.max_offset, theirs, mc.max_offset)
        if point < 0:
            first = rc.entries[0].start_offset if rc.entries else 0
            return max(0, rc.max_offset - first), "epochCache"
        return max(0, rc.max_offset - point), "epochCache"
    if replica.max_offset < 0 or master.max_offset < 0:
        return None, "unknown"
    return max(0, replica.max_offset - master.max_offset), "maxOffset"


class _LiveRow:
    def __init__(self, c: Candidate) -> None:
        self.epoch = c.epoch
        self.max_offset = c.max_offset
        self.election_priority = c.election_priority


def predict_master(cands: list[Candidate], old_master: int | None, designated: int | None,
                   unclean: bool) -> int | None:
    """The controller's choice (mqctl.controller.election.elect with alive = valid)."""
    from mqctl.controller.election import elect

    live = {c.broker_id: _LiveRow(c) for c in cands if c.epoch >= 0 or c.max_offset >= 0}
    alive = {c.broker_id for c in cands if c.alive}
    sss = [c.broker_id for c in cands if c.in_sync]
    everyone = [c.broker_id for c in cands] if unclean else None
    return elect(sss, everyone, old_master, designated, lambda b: b in alive, live)


def elect_plan(cluster_name: str, broker_name: str, info: ReplicasInfo, designated: int | None,
               unclean: bool, caches: Mapping[int, EpochCache] | None = None) -> dict[str, Any]:
    """The candidate table document (docs/admin.md, electMaster)."""
    cands = candidates_of(info)
    by_id = {c.broker_id: c for c in cands}
    predicted = designated if designated is not None else predict_master(
        cands, info.master_broker_id, None, unclean)
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
        rows.append({
            "brokerId": c.broker_id,
            "brokerAddress": c.broker_address,
            "alive": c.alive,
            "inSyncStateSet": c.in_sync,
            "role": "master" if c.broker_id == info.master_broker_id else "slave",
            "epoch": None if c.epoch < 0 else c.epoch,
            "maxOffset": None if c.max_offset < 0 else c.max_offset,
            "confirmOffset": None if c.confirm_offset < 0 else c.confirm_offset,
            "electionPriority": c.election_priority,
            "electable": c.alive and (c.in_sync or unclean),
            "truncateBytes": per,
            "totalTruncateBytes": total,
        })
    bases.discard("self")
    target = by_id.get(predicted) if predicted is not None else None
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
