"""`plan --db FILE`: the whole inventory (stores, epochs, problems, plan) as SQLite tables via sqlite-utils.

Tables: stores, epochs, problems, plan, warnings, unmatched. Rows of one run replace the rows of earlier
runs for the same store paths, so a fleet-wide recovery can be collected in one file and queried.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from mqctl.recover.inspect import StoreReport

__all__ = ["write_db"]


def write_db(
    path: str | os.PathLike[str], reports: Sequence[StoreReport], plan: dict[str, Any]
) -> dict[str, int]:
    import sqlite_utils  # lazy: sqlite_utils

    db = sqlite_utils.Database(os.fspath(path))
    stores = []
    epochs = []
    problems = []
    for r in reports:
        d = r.to_dict()
        stores.append(
            {
                "store": r.path,
                "state": r.state,
                "clusterName": r.cluster_name,
                "brokerName": r.broker_name,
                "brokerId": r.broker_id,
                "lastEpoch": r.last_epoch,
                "minOffset": r.min_offset,
                "maxOffset": r.max_offset,
                "confirmOffset": r.confirm_offset,
                "checkpointMatches": r.checkpoint_matches,
                "fileCount": r.file_count,
                "fileSize": r.file_size,
                "totalBytes": r.total_bytes,
                "abort": r.abort,
                "locked": r.locked,
                "initialSignature": r.initial.id if r.initial else None,
                "finalSignature": json.dumps(d["finalSignature"]),
                "dirtyReasons": json.dumps(r.dirty_reasons),
            }
        )
        for e in d["epochs"]:
            epochs.append({"store": r.path, **e})
        for i, p in enumerate(r.problems):
            problems.append({"store": r.path, "n": i, "problem": p})
    plan_rows = []
    warnings = []
    for s in plan["brokerSets"]:
        for order, rep in enumerate(s["replicas"]):
            plan_rows.append(
                {
                    "clusterName": s["clusterName"],
                    "brokerName": s["brokerName"],
                    "restartOrder": order,
                    "role": "source" if rep["store"] == s["source"] else "replica",
                    "sourceClean": s["sourceClean"],
                    **rep,
                }
            )
        for w in s["warnings"]:
            warnings.append({"clusterName": s["clusterName"], "brokerName": s["brokerName"], "warning": w})
    paths = [r.path for r in reports]
    for table in ("stores", "epochs", "problems", "plan", "unmatched"):
        if db.table(table).exists():
            db.execute(f"DELETE FROM [{table}] WHERE store IN ({','.join('?' * len(paths))})", paths)
    if db.table("warnings").exists():
        for s in plan["brokerSets"]:
            db.execute(
                "DELETE FROM warnings WHERE clusterName = ? AND brokerName = ?",
                [s["clusterName"], s["brokerName"]],
            )
    db.table("stores").insert_all(stores, pk="store", replace=True)
    if epochs:
        db.table("epochs").insert_all(epochs, pk=("store", "epoch"), replace=True)
    if problems:
        db.table("problems").insert_all(problems, pk=("store", "n"), replace=True)
    if plan_rows:
        db.table("plan").insert_all(plan_rows, pk="store", replace=True)
    if warnings:
        db.table("warnings").insert_all(warnings)
    if plan["unmatched"]:
        db.table("unmatched").insert_all(plan["unmatched"], pk="store", replace=True)
    return {"stores": len(stores), "epochs": len(epochs), "plan": len(plan_rows)}
