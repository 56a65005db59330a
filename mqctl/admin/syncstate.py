"""The getSyncStateSet document: per broker set, the master, epochs and every replica with its lag.

Pure functions over the client's ``ReplicasInfo`` results (mqctl.client); nothing here talks to
a controller. JSON keys are RocketMQ's wire names (``masterBrokerId``, ``inSyncReplicas``, ...)
plus mqctl's extensions (``heartbeatAgeMs``, ``maxOffset``, ``lagBytes``, ...), see docs/admin.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from mqctl.admin import SCHEMA_VERSION

if TYPE_CHECKING:
    from mqctl.client import ReplicaIdentity, ReplicasInfo

__all__ = ["broker_set_doc", "lag_bytes", "replica_doc", "select_broker_sets", "sync_state_doc"]


def _known(value: int | None) -> int | None:
    """Heartbeat fields use -1 for "unknown"; the documents use null."""
    return None if value is None or value < 0 else int(value)


def lag_bytes(master_max_offset: int | None, replica_max_offset: int | None) -> int | None:
    """Bytes the replica is behind the master (0 when ahead or equal); None when either is unknown."""
    m, r = _known(master_max_offset), _known(replica_max_offset)
    if m is None or r is None:
        return None
    return max(0, m - r)


def replica_doc(
    r: ReplicaIdentity, master_id: int | None, master_max_offset: int | None, in_sync: bool
) -> dict[str, Any]:
    return {
        "brokerId": r.broker_id,
        "brokerAddress": r.broker_address,
        "alive": bool(r.alive),
        "role": "master" if master_id is not None and r.broker_id == master_id else "slave",
        "inSyncStateSet": in_sync,
        "brokerEpoch": r.broker_epoch,
        "heartbeatAgeMs": r.heartbeat_age_ms,
        "epoch": _known(r.epoch),
        "maxOffset": _known(r.max_offset),
        "confirmOffset": _known(r.confirm_offset),
        "electionPriority": r.election_priority,
        "lagBytes": lag_bytes(master_max_offset, r.max_offset),
    }


def broker_set_doc(broker_name: str, info: ReplicasInfo) -> dict[str, Any]:
    master_id = info.master_broker_id
    master_max: int | None = None
    for r in (*info.in_sync_replicas, *info.not_in_sync_replicas):
        if master_id is not None and r.broker_id == master_id:
            master_max = _known(r.max_offset)
    return {
        "clusterName": info.cluster_name,
        "brokerName": broker_name,
        "masterBrokerId": master_id,
        "masterAddress": info.master_address or None,
        "masterEpoch": info.master_epoch,
        "syncStateSetEpoch": info.sync_state_set_epoch,
        "syncStateSetNums": len(info.in_sync_replicas),
        "inSyncReplicas": [replica_doc(r, master_id, master_max, True) for r in info.in_sync_replicas],
        "notInSyncReplicas": [
            replica_doc(r, master_id, master_max, False) for r in info.not_in_sync_replicas
        ],
        # mqctl failover pause: the reason ("" when none was given); None while not paused
        "failoverPaused": info.failover_pause_reason if info.failover_paused else None,
    }


def select_broker_sets(
    table: Mapping[str, ReplicasInfo], broker_names: Iterable[str] = (), cluster_name: str | None = None
) -> tuple[dict[str, ReplicasInfo], list[str]]:
    """Keep the broker sets asked for: by name, or every set of ``cluster_name``.

    Returns (selected, missing names). A cluster with no broker set gives ({}, [cluster])."""
    names = [n for n in broker_names if n]
    if names:
        selected = {n: table[n] for n in names if n in table}
        return selected, [n for n in names if n not in table]
    selected = {
        n: i for n, i in sorted(table.items()) if cluster_name is None or i.cluster_name == cluster_name
    }
    return selected, ([] if selected or cluster_name is None else [cluster_name])


def sync_state_doc(table: Mapping[str, ReplicasInfo]) -> dict[str, Any]:
    """``{"version": 1, "brokers": [...]}``, broker sets sorted by name."""
    return {
        "version": SCHEMA_VERSION,
        "brokers": [broker_set_doc(name, table[name]) for name in sorted(table)],
    }
