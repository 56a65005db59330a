"""The documents of `mqctl history`, `failover`, `switchover` and `rebalance` (docs/operations.md).

The controller decides and records; these functions only rename the client's answers into the
camelCase documents every admin command prints (-o json|yaml), with times as ISO 8601 in UTC.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from mqctl.errors import UsageError

if TYPE_CHECKING:
    from mqctl.api import HistoryPage, PauseResult, RebalanceResult, SwitchoverResult

SCHEMA_VERSION = 1
_DURATION = re.compile(r"^([0-9]+(?:\.[0-9]+)?)([smhdw])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def since_ms(text: str | None, now_ms: int) -> int:
    """--since: a duration back from now (90s, 15m, 1h, 2d, 1w) or an ISO 8601 time (UTC unless it
    says otherwise) -> milliseconds since the epoch; 0 without one."""
    if not text:
        return 0
    m = _DURATION.match(text.strip())
    if m:
        return max(0, now_ms - int(float(m.group(1)) * _UNIT_S[m.group(2)] * 1000))
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(
            f"--since {text!r}: expected a duration (90s, 15m, 1h, 2d, 1w) or an ISO 8601 time "
            "(2026-11-26T10:00:00Z)"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0, int(when.timestamp() * 1000))


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _opt(d: Mapping[str, Any], key: str) -> Any:
    return d.get(key)


def entry_doc(e: Mapping[str, Any]) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "seq": int(e.get("seq", 0)),
        "time": iso(int(e.get("time_ms", 0))),
        "timeMs": int(e.get("time_ms", 0)),
        "term": int(e.get("term", 0)),
        "clusterName": e.get("cluster_name") or None,
        "brokerName": e.get("broker_name") or None,
        "what": e.get("what", ""),
        "detail": e.get("detail", ""),
        "cause": e.get("cause", ""),
    }
    el = e.get("election")
    if el:
        doc["election"] = {
            "oldMasterBrokerId": _opt(el, "old_master_broker_id"),
            "newMasterBrokerId": _opt(el, "new_master_broker_id"),
            "masterEpoch": el.get("master_epoch", 0),
            "oldMasterMaxOffset": _known(el.get("old_master_max_offset")),
            "newMasterMaxOffset": _known(el.get("new_master_max_offset")),
            "lossBytes": _opt(el, "loss_bytes"),
            "unclean": bool(el.get("unclean")),
            "guard": _guard_pointer(e, el),
            "reason": el.get("reason", ""),
            "candidates": [
                {
                    "brokerId": c.get("broker_id", 0),
                    "epoch": _known(c.get("epoch")),
                    "maxOffset": _known(c.get("max_offset")),
                    "electionPriority": c.get("election_priority"),
                    "alive": bool(c.get("alive")),
                    "inSyncStateSet": bool(c.get("in_sync_state_set")),
                }
                for c in el.get("candidates", ())
            ],
        }
    return doc


def _guard_pointer(e: Mapping[str, Any], el: Mapping[str, Any]) -> dict[str, str] | None:
    """After an election with loss: the guard and replay commands (docs/recovery.md, "Guard and
    replay")."""
    from mqctl.pipeline.guard import loss_pointer  # lazy: start-up

    if not el.get("loss_bytes"):
        return None
    return loss_pointer(
        e.get("cluster_name") or None,
        e.get("broker_name") or None,
        _opt(el, "old_master_broker_id"),
        _known(el.get("new_master_max_offset")),
        _known(el.get("old_master_max_offset")),
    )


def _known(v: Any) -> int | None:
    return None if v is None or int(v) < 0 else int(v)


def history_doc(page: HistoryPage, broker_name: str | None, since: int) -> dict[str, Any]:
    return {
        "version": SCHEMA_VERSION,
        "brokerName": broker_name or None,
        "since": iso(since) if since else None,
        "historyMaxEntries": page.history_max_entries,
        "lossTotalBytes": dict(sorted(page.loss_total.items())),
        "failoverPaused": dict(sorted(page.failover_paused.items())),
        "entries": [entry_doc(e) for e in page.entries],
    }


def pause_doc(
    action: str,
    broker_name: str | None,
    reason: str,
    result: PauseResult | None,
    dry_run: bool,
    current: Mapping[str, str],
) -> dict[str, Any]:
    paused = dict(result.failover_paused) if result is not None else dict(current)
    scope = broker_name or "every broker set"
    message = (
        result.remark
        if result is not None and result.remark
        else f"dry run: would {action} automatic failover of {scope}; nothing changed"
    )
    return {
        "version": SCHEMA_VERSION,
        "action": action,
        "brokerName": broker_name or None,
        "reason": reason or None,
        "dryRun": dry_run,
        "failoverPaused": dict(sorted(paused.items())),
        "message": message,
    }


def switchover_doc(r: SwitchoverResult, forced: bool) -> dict[str, Any]:
    if r.dry_run:
        message = (
            f"dry run: would move the master of {r.broker_name} from {r.old_master_broker_id} to "
            f"{r.new_master_broker_id}; nothing changed"
        )
    else:
        message = (
            f"{r.broker_name}: master {r.new_master_broker_id} (masterEpoch {r.master_epoch}), was "
            f"{r.old_master_broker_id}"
        )
    if not r.caught_up:
        gap = r.gap_bytes if r.gap_bytes is not None else "an unknown number of"
        message += f" (forced: {gap} bytes behind)"
    return {
        "version": SCHEMA_VERSION,
        "brokerName": r.broker_name,
        "oldMasterBrokerId": r.old_master_broker_id,
        "newMasterBrokerId": r.new_master_broker_id,
        "masterEpoch": r.master_epoch,
        "masterMaxOffset": _known(r.master_max_offset),
        "candidateMaxOffset": _known(r.candidate_max_offset),
        "gapBytes": r.gap_bytes,
        "caughtUp": r.caught_up,
        "forced": forced and not r.caught_up,
        "dryRun": r.dry_run,
        "message": message,
    }


def rebalance_doc(r: RebalanceResult, cluster: str | None) -> dict[str, Any]:
    moves = [
        {
            "clusterName": m.get("cluster_name") or None,
            "brokerName": m.get("broker_name", ""),
            "masterBrokerId": m.get("master_broker_id"),
            "preferredBrokerId": m.get("preferred_broker_id"),
            "action": m.get("action", ""),
            "reason": m.get("reason", ""),
            "masterMaxOffset": m.get("master_max_offset"),
            "candidateMaxOffset": m.get("candidate_max_offset"),
            "gapBytes": m.get("gap_bytes"),
        }
        for m in r.moves
    ]
    moved = sum(1 for m in moves if m["action"] == "move")
    verb = "would move" if r.dry_run else "moved"
    return {
        "version": SCHEMA_VERSION,
        "clusterName": cluster or None,
        "dryRun": r.dry_run,
        "moves": moves,
        "message": f"{verb} the master of {moved} broker set(s)" + ("; nothing changed" if r.dry_run else ""),
    }
