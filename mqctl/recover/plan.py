"""Group stores by broker set, pick each set's source, give the restart order and what each replica loses.

Rules (docs/recovery.md):
* a set is (clusterName, brokerName) from brokerIdentity (or the stored initial signature);
* the source is the freshest store by (last epoch, max offset) among the clean stores when there are
  any (a fresher dirty store is named in a warning with the bytes it would lose), else the freshest
  store overall, and then `mark-clean` is needed. Clean is RocketMQ's rule: no `abort` file (a store
  RocketMQ shut down cleanly needs no mqctl signature);
* every other store must share a consistent epoch history with the source (RocketMQ's
  findConsistentPoint); its `truncateTo` is that point and `bytesToDrop` = maxOffset - truncateTo.
  Stores that conflict, or belong to no set, are listed in `unmatched` with the reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mqctl.recover.compare import compare_reports, freshness
from mqctl.recover.inspect import CLEAN, EMPTY, NO_STORE, StoreReport

__all__ = ["make_plan"]


def _replica(r: StoreReport, truncate_to: int | None) -> dict[str, Any]:
    return {
        "store": r.path,
        "brokerId": r.broker_id,
        "state": r.state,
        "lastEpoch": r.last_epoch,
        "maxOffset": r.max_offset,
        "truncateTo": truncate_to,
        "bytesToDrop": 0 if truncate_to is None else r.max_offset - truncate_to,
    }


def _final_key(r: StoreReport) -> tuple[int, int, int]:
    """What a final signature of the store says (or would say): last epoch, its start, max offset."""
    last = r.epochs[-1] if r.epochs else None
    return (-1, -1, r.max_offset) if last is None else (last.epoch, last.start_offset, r.max_offset)


def make_plan(reports: Sequence[StoreReport]) -> dict[str, Any]:
    unmatched: list[dict[str, Any]] = []
    groups: dict[tuple[str, str], list[StoreReport]] = {}
    for r in reports:
        if r.state == NO_STORE:
            unmatched.append({"store": r.path, "state": r.state, "reason": "no store"})
        elif r.cluster_name is None or r.broker_name is None:
            unmatched.append(
                {
                    "store": r.path,
                    "state": r.state,
                    "reason": "no brokerIdentity and no initial signature: broker set unknown",
                }
            )
        else:
            groups.setdefault((r.cluster_name, r.broker_name), []).append(r)
    sets = []
    for (cluster, broker), members in sorted(groups.items()):
        warnings: list[str] = []
        with_data = [m for m in members if m.state != EMPTY]
        if not with_data:
            sets.append(
                {
                    "clusterName": cluster,
                    "brokerName": broker,
                    "source": None,
                    "sourceClean": False,
                    "replicas": [_replica(m, None) for m in members],
                    "warnings": ["every store is empty: start them in any order"],
                }
            )
            continue
        ranked = sorted(with_data, key=freshness, reverse=True)
        clean = [m for m in ranked if m.state == CLEAN]
        if clean:
            source = clean[0]
            keys = {_final_key(m) for m in clean}
            if len(keys) > 1:
                warnings.append(
                    "clean stores end differently (last epoch, its start, max offset): "
                    + ", ".join(f"{m.path} {_final_key(m)}" for m in clean)
                    + f"; using the freshest, {source.path}"
                )
        else:
            source = ranked[0]
            warnings.append(
                f"no clean store: {source.path} is the freshest; confirm it and run "
                f"`mqctl recover mark-clean {source.path}` before restarting"
            )
        in_set = [source]
        rows = [_replica(source, source.max_offset)]
        for m in sorted(members, key=freshness, reverse=True):
            if m is source:
                continue
            cmp = compare_reports(source, m)
            if not cmp.same_broker_set:
                why = "; ".join(cmp.reasons)
                unmatched.append(
                    {
                        "store": m.path,
                        "state": m.state,
                        "reason": f"conflicts with source {source.path}: {why}",
                    }
                )
                continue
            warnings += cmp.warnings
            in_set.append(m)
            tt = cmp.consistent_point
            rows.append(_replica(m, tt))
            if m.state != EMPTY and freshness(m) > freshness(source):
                warnings.append(
                    f"{m.path} is fresher than the clean source but dirty: "
                    f"{m.max_offset - tt} bytes beyond {tt} would be dropped"
                )
        sets.append(
            {
                "clusterName": cluster,
                "brokerName": broker,
                "source": source.path,
                "sourceClean": source.state == CLEAN,
                "replicas": rows,
                "warnings": warnings,
            }
        )
    return {"brokerSets": sets, "unmatched": unmatched}
