"""The controller group as every node sees it: leader, term, commit index, per-peer match index and
lag (kafka-metadata-quorum ``describe --replication``, ``etcdctl endpoint status``) and whether the
state hashes agree.

``collect`` asks GetMetadata of every node it can find (the addresses given, then every peer's
gRPC address they publish), in parallel; ``quorum_doc`` is pure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mqctl.admin import SCHEMA_VERSION

if TYPE_CHECKING:
    from mqctl.client import Metadata

__all__ = ["NodeView", "collect", "metadata_doc", "quorum_doc"]


@dataclass(frozen=True)
class NodeView:
    address: str
    meta: Metadata | None
    error: str | None = None


def collect(
    addresses: Iterable[str], fetch: Callable[[str], Metadata], max_nodes: int = 16
) -> list[NodeView]:
    """GetMetadata of each address and of every peer the answers name (``fetch`` raises on failure)."""
    asked: dict[str, NodeView] = {}
    todo = list(dict.fromkeys(addresses))

    def one(addr: str) -> NodeView:
        try:
            return NodeView(addr, fetch(addr))
        except Exception as exc:  # reported per node
            return NodeView(addr, None, str(exc))

    with ThreadPoolExecutor(max_workers=8) as pool:
        while todo and len(asked) < max_nodes:
            batch = [a for a in todo if a not in asked][: max_nodes - len(asked)]
            todo = []
            for view in pool.map(one, batch):
                asked[view.address] = view
            for view in list(asked.values()):
                if view.meta is None:
                    continue
                for p in view.meta.peers:
                    if p.grpc_address and p.grpc_address not in asked and p.grpc_address not in todo:
                        todo.append(p.grpc_address)
    # one row per node: an address given with -a and the same node's published address are one node
    by_raft: dict[str, NodeView] = {}
    out = []
    for view in asked.values():
        if view.meta is not None and view.meta.self_id:
            if view.meta.self_id in by_raft:
                continue
            by_raft[view.meta.self_id] = view
        out.append(view)
    return out


def metadata_doc(meta: Metadata) -> dict[str, Any]:
    """getControllerMetaData: the leader's view (mqadmin's #ControllerGroup, #ControllerLeaderId, ...)."""
    return {
        "version": SCHEMA_VERSION,
        "group": meta.group,
        "groupId": meta.group_id,
        "controllerLeaderId": meta.controller_leader_id or None,
        "controllerLeaderAddress": meta.controller_leader_address or None,
        "isLeader": meta.is_leader,
        "answeredBy": meta.address,
        "term": meta.term,
        "commitIndex": meta.commit_index,
        "lastApplied": meta.last_applied,
        "hasQuorum": meta.has_quorum,
        "stateHash": meta.state_hash,
        "peers": [
            {
                "raftAddress": p.raft_address,
                "grpcAddress": p.grpc_address or None,
                "isLeader": p.is_leader,
                "connected": p.connected,
            }
            for p in meta.peers
        ],
    }


def quorum_doc(views: list[NodeView]) -> dict[str, Any]:
    """The ``quorum status`` document with ``healthy``, ``status`` (healthy, degraded, unhealthy) and
    the ``problems`` found, each once."""
    problems: list[str] = []
    up = [v for v in views if v.meta is not None]
    leaders = [v for v in up if v.meta is not None and v.meta.is_leader]
    leader = max(leaders, key=lambda v: v.meta.term if v.meta else 0) if leaders else None
    lm = leader.meta if leader is not None else None
    for v in views:
        if v.meta is None:
            problems.append(f"{v.address}: unreachable ({v.error})")
    if lm is None:
        problems.append("no leader" + (" reachable" if up else ""))
    elif not lm.has_quorum:
        problems.append(f"the leader {leader.address if leader else '?'} has no quorum")
    seen_leaders = {
        v.meta.controller_leader_id for v in up if v.meta is not None and v.meta.controller_leader_id
    }
    if len(seen_leaders) > 1:
        problems.append("nodes disagree on the leader: " + ", ".join(sorted(seen_leaders)))
    # state hashes: comparable between nodes that applied the same index
    by_index: dict[int, set[str]] = {}
    for v in up:
        assert v.meta is not None
        by_index.setdefault(v.meta.last_applied, set()).add(v.meta.state_hash)
    diverged = sorted(i for i, hashes in by_index.items() if len(hashes) > 1)
    for i in diverged:
        problems.append(f"state hashes differ between nodes at applied index {i}")
    for v in up:
        if v.meta is not None and v.meta.problem:
            problems.append(f"{v.address}: {v.meta.problem}")
    # degraded: the group works (a leader with a quorum, one leader, the same states) with a node down
    # or reporting a problem; unhealthy: no quorum, or the nodes disagree
    works = lm is not None and lm.has_quorum and len(seen_leaders) <= 1 and not diverged
    status = "healthy" if not problems else "degraded" if works else "unhealthy"
    comparable = len(by_index) == 1 and len(up) > 1
    states_agree: bool | None = (not diverged) if (comparable or diverged) else None
    leader_commit = lm.commit_index if lm is not None else None
    nodes = []
    for v in views:
        m = v.meta
        nodes.append(
            {
                "address": v.address,
                "raftAddress": m.self_id if m else None,
                "state": m.state if m else "unreachable",
                "isLeader": bool(m and m.is_leader),
                "term": m.term if m else None,
                "commitIndex": m.commit_index if m else None,
                "lastApplied": m.last_applied if m else None,
                "logLength": m.log_length if m else None,
                "lag": (
                    max(0, leader_commit - m.commit_index)
                    if m is not None and leader_commit is not None
                    else None
                ),
                "hasQuorum": m.has_quorum if m else None,
                "stateHash": m.state_hash if m else None,
                "maxFeatureLevel": (m.max_feature_level or None) if m else None,
                "problem": (m.problem or None) if m else None,
                "error": v.error,
            }
        )
    peers = []
    if lm is not None:
        for p in lm.peers:
            match = lm.commit_index if p.is_self else p.match_index
            peers.append(
                {
                    "raftAddress": p.raft_address,
                    "grpcAddress": p.grpc_address or None,
                    "status": "Leader" if p.is_leader else "Follower",
                    "connected": p.connected,
                    "matchIndex": match,
                    "nextIndex": None if p.is_self else p.next_index,
                    "lag": max(0, lm.commit_index - match),
                    "maxFeatureLevel": p.max_feature_level or None,
                }
            )
    level = (lm.feature_level or None) if lm else None
    spoken = [p.max_feature_level for p in lm.peers] if lm is not None else []
    # a raise is possible once every member (as the leader sees them) published a higher level
    lowest = min(spoken) if spoken and all(spoken) else 0
    raisable = lowest if level is not None and lowest > level else None
    return {
        "version": SCHEMA_VERSION,
        "group": lm.group if lm else (up[0].meta.group if up and up[0].meta else None),
        "groupId": lm.group_id if lm else None,
        "leaderId": lm.self_id if lm else None,
        "leaderAddress": leader.address if leader else None,
        "term": lm.term if lm else None,
        "commitIndex": leader_commit,
        "hasQuorum": lm.has_quorum if lm else False,
        "statesAgree": states_agree,
        "featureLevel": level,
        "featureLevelRaisableTo": raisable,
        "raiseFeatureLevel": (
            f"mqctl quorum feature-level {raisable} -a {leader.address}"
            if raisable is not None and leader is not None
            else None
        ),
        "healthy": not problems,
        "status": status,
        "problems": problems,
        "nodes": nodes,
        "peers": peers,
    }
