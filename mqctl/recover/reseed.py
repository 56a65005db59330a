"""`mqctl recover reseed`: rebuild a lost controller's state from the brokers' store directories.

Each store's brokerIdentity gives its cluster, broker set and broker id, brokerIdentity-temp its
registerCheckCode, the epoch file its last epoch, the commitlog its maxOffset. Per broker set the
controller state gets every replica, masterEpoch = the highest epoch any replica wrote, no master,
and a SyncStateSet of the freshest replicas (highest last epoch, then maxOffset): when one of them
registers and beats, the controller elects it at masterEpoch + 1, and the others follow it
(truncating what it does not have). Addresses are not in the stores: each replica's is learned
when it registers. Pure: the plan is a function of the reports; the data directory is written by
mqctl.admin.snapshot.restore.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mqctl.recover.inspect import NO_STORE, StoreReport


def reseed_plan(reports: Sequence[StoreReport], group_id: str, group: str = "mqctl") -> dict[str, Any]:
    """-> {"brokerSets": [...], "unmatched": [...], "conflicts": [...], "state": ControllerState dict}."""
    from mqctl.controller import core  # lazy: start-up

    unmatched: list[dict[str, Any]] = []
    conflicts: list[str] = []
    groups: dict[str, list[StoreReport]] = {}
    for r in reports:
        if r.state == NO_STORE or r.identity is None:
            reason = "no store" if r.state == NO_STORE else "no brokerIdentity: broker set and id unknown"
            unmatched.append({"store": r.path, "state": r.state, "reason": reason})
            continue
        groups.setdefault(r.identity.broker_name, []).append(r)
    state = core.ControllerState()
    sets = []
    for name, members in sorted(groups.items()):
        clusters = sorted({m.identity.cluster_name for m in members if m.identity})
        ids: dict[int, StoreReport] = {}
        for m in members:
            assert m.identity is not None
            other = ids.get(m.identity.broker_id)
            if other is not None:
                conflicts.append(
                    f"{name}: broker id {m.identity.broker_id} is in two stores, {other.path} "
                    f"and {m.path}; give one store per replica"
                )
            ids[m.identity.broker_id] = m
        if len(clusters) > 1:
            conflicts.append(f"{name}: its stores name different clusters ({', '.join(clusters)})")
        best = max((m.last_epoch, m.max_offset) for m in ids.values())
        freshest = sorted(b for b, m in ids.items() if (m.last_epoch, m.max_offset) == best)
        master_epoch = max(0, max(m.last_epoch for m in ids.values()))
        bs = core.BrokerSet(
            cluster_name=clusters[0],
            broker_name=name,
            next_assign_broker_id=max(ids) + 1,
            master_epoch=master_epoch,
            sync_state_set=frozenset(freshest),
            sync_state_set_epoch=1,
        )
        for b, m in sorted(ids.items()):
            code = m.temp_identity.register_check_code if m.temp_identity else ""
            bs.brokers[b] = core.BrokerInfo(address="", register_check_code=code)
        state.broker_sets[name] = bs
        sets.append(
            {
                "clusterName": clusters[0],
                "brokerName": name,
                "masterEpoch": master_epoch,
                "masterCandidates": freshest,
                "nextBrokerId": max(ids) + 1,
                "replicas": [
                    {
                        "brokerId": b,
                        "store": m.path,
                        "state": m.state,
                        "lastEpoch": m.last_epoch,
                        "maxOffset": m.max_offset,
                        "registerCheckCode": bs.brokers[b].register_check_code,
                        "candidate": b in freshest,
                    }
                    for b, m in sorted(ids.items())
                ],
            }
        )
    state.meta = {
        "groupId": group_id,
        "groupOptions": {"group": group, "waitFor": "1", "enableElectUncleanMaster": "false"},
    }
    return {"brokerSets": sets, "unmatched": unmatched, "conflicts": conflicts, "state": state.to_dict()}
