"""Metadata drift across the replicas of a broker set, and putting back what one lacks.

A slave copies topics, subscription groups and offsets from its master only periodically (SlaveSynchronize),
so after a failover the new master may lack what the old one had (apache/rocketmq #9804, #9864, #9984).
`ReplicaMetadata` is what one replica has, from its store's config/ files (`load_store`) or from a live
broker (mqctl.admin); `compare` says what each has that another lacks or holds differently; `plan_sync`
what to copy from one to another: never removing anything, never moving an offset backwards unless asked.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from mqctl.store import metadata as md
from mqctl.store.identity import BrokerIdentity, read_identity

__all__ = [
    "WHAT",
    "ReplicaMetadata",
    "StoreFiles",
    "SyncPlan",
    "compare",
    "group_by_set",
    "load_store",
    "plan_sync",
    "read_store_files",
    "replica_of",
]

WHAT = ("topics", "groups", "offsets", "delay")


@dataclass
class ReplicaMetadata:
    """One replica's metadata: `name` is its store path or broker address; topics and groups typed (every
    field kept, unknown ones too), offsets "topic@group" -> queueId -> offset, delay
    offsets level -> offset; `files` says which file each came from (store) or which request (online)."""

    name: str
    broker_set: str | None = None  # "clusterName/brokerName" (brokerIdentity), None if unknown
    broker_id: int | None = None
    topics: dict[str, md.TopicConfig] = field(default_factory=dict)
    groups: dict[str, md.SubscriptionGroupConfig] = field(default_factory=dict)
    offsets: dict[str, dict[int, int]] = field(default_factory=dict)
    delay: dict[int, int] = field(default_factory=dict)
    files: dict[str, Any] = field(default_factory=dict)


def load_store(store: str) -> ReplicaMetadata:
    """A stopped or running broker's store (read only): its identity and config/ files."""
    return replica_of(store, read_store_files(store))


@dataclass(frozen=True)
class StoreFiles:
    """The typed files of one store that drift is about (mqctl.store.metadata)."""

    identity: BrokerIdentity | None
    topics: md.TopicsFile
    groups: md.SubscriptionGroupsFile
    offsets: md.ConsumerOffsetsFile
    delay: md.DelayOffsetsFile


def read_store_files(store: str) -> StoreFiles:

    return StoreFiles(
        read_identity(store),
        md.read_topics(store),
        md.read_subscription_groups(store),
        md.read_consumer_offsets(store),
        md.read_delay_offsets(store),
    )


def replica_of(store: str, f: StoreFiles) -> ReplicaMetadata:
    ident = f.identity
    return ReplicaMetadata(
        os.fspath(store),
        f"{ident.cluster_name}/{ident.broker_name}" if ident else None,
        ident.broker_id if ident else None,
        f.topics.topics,
        f.groups.groups,
        f.offsets.offsets,
        f.delay.offsets,
        {
            md.TOPICS: f.topics.source.to_dict(),
            md.SUBSCRIPTION_GROUPS: f.groups.source.to_dict(),
            md.CONSUMER_OFFSETS: f.offsets.source.to_dict(),
            md.DELAY_OFFSETS: f.delay.source.to_dict(),
        },
    )


def group_by_set(replicas: Iterable[ReplicaMetadata]) -> dict[str | None, list[ReplicaMetadata]]:
    out: dict[str | None, list[ReplicaMetadata]] = {}
    for r in replicas:
        out.setdefault(r.broker_set, []).append(r)
    return out


class _Config(Protocol):
    def to_json(self) -> dict[str, Any]: ...


def _entries(kind: str, tables: Sequence[tuple[str, Mapping[str, _Config]]]) -> list[dict[str, Any]]:
    """Per name held by any replica and not the same everywhere: who lacks it, which fields differ (as
    RocketMQ's JSON names them)."""
    names: dict[str, None] = {}
    for _, t in tables:
        names.update(dict.fromkeys(t))
    out: list[dict[str, Any]] = []
    for name in sorted(names):
        have = [(r, t[name]) for r, t in tables if name in t]
        missing = [r for r, t in tables if name not in t]
        first = have[0][1]
        if not missing and all(v == first for _, v in have[1:]):
            continue
        docs = [(r, v.to_json()) for r, v in have]
        differs: dict[str, dict[str, Any]] = {}
        for key in sorted({k for _, v in docs for k in v}):
            vals = {r: v.get(key) for r, v in docs}
            if len({_hashable(x) for x in vals.values()}) > 1:
                differs[key] = vals
        out.append({kind: name, "missingFrom": missing, "heldBy": [r for r, _ in have], "differs": differs})
    return out


def _hashable(v: Any) -> Any:

    return json.dumps(v, sort_keys=True) if isinstance(v, dict | list) else v


def _offsets(names: list[str], tables: list[dict[Any, int]]) -> list[tuple[Any, dict[str, Any]]]:
    """Offsets that differ, by key: each replica's value (None: lacks it), how far behind the highest it is
    and who lacks it."""
    keys: dict[Any, None] = {}
    for t in tables:
        keys.update(dict.fromkeys(t))
    out: list[tuple[Any, dict[str, Any]]] = []
    for k in keys:
        vals = [t.get(k) for t in tables]
        if len(set(vals)) == 1:
            continue
        top = max(v for v in vals if v is not None)
        pairs = list(zip(names, vals, strict=True))
        out.append(
            (
                k,
                {
                    "offsets": dict(pairs),
                    "behind": {n: top - v for n, v in pairs if v is not None and v < top},
                    "missingFrom": [n for n, v in pairs if v is None],
                },
            )
        )
    out.sort(key=lambda kv: kv[0])
    return out


def _flat(offsets: dict[str, dict[int, int]]) -> dict[tuple[str, str, int], int]:
    out: dict[tuple[str, str, int], int] = {}
    for key, m in offsets.items():
        topic, _, group = key.partition("@")
        for q, off in m.items():
            out[(topic, group, q)] = off
    return out


def compare(replicas: Sequence[ReplicaMetadata]) -> dict[str, Any]:
    """The drift of one broker set: a JSON-ready document, `differs` true when anything differs."""
    names = [r.name for r in replicas]
    topics = _entries("topic", [(r.name, r.topics) for r in replicas])
    groups = _entries("group", [(r.name, r.groups) for r in replicas])
    offsets = [
        {"topic": k[0], "group": k[1], "queueId": k[2], **row}
        for k, row in _offsets(names, [_flat(r.offsets) for r in replicas])
    ]
    delay = [{"level": k, **row} for k, row in _offsets(names, [dict(r.delay) for r in replicas])]
    summary = []
    for r in replicas:
        summary.append(
            {
                "replica": r.name,
                "brokerId": r.broker_id,
                "topics": len(r.topics),
                "groups": len(r.groups),
                "offsets": sum(len(m) for m in r.offsets.values()),
                "delayLevels": len(r.delay),
                "topicsMissing": sum(r.name in e["missingFrom"] for e in topics),
                "topicsDiffering": sum(bool(e["differs"]) and r.name in e["heldBy"] for e in topics),
                "groupsMissing": sum(r.name in e["missingFrom"] for e in groups),
                "groupsDiffering": sum(bool(e["differs"]) and r.name in e["heldBy"] for e in groups),
                "offsetsMissing": sum(r.name in e["missingFrom"] for e in offsets),
                "offsetsBehind": sum(r.name in e["behind"] for e in offsets),
                "messagesBehind": sum(e["behind"].get(r.name, 0) for e in offsets),
                "delayBehind": sum(r.name in e["behind"] or r.name in e["missingFrom"] for e in delay),
                "files": r.files,
            }
        )
    first = replicas[0] if replicas else None
    return {
        "brokerSet": first.broker_set if first else None,
        "replicas": summary,
        "topics": topics,
        "subscriptionGroups": groups,
        "consumerOffsets": offsets,
        "delayOffsets": delay,
        "differs": bool(topics or groups or offsets or delay),
    }


@dataclass
class SyncPlan:
    """What `metadata sync` puts into the target: added topics and groups, raised (or, with allow_rewind,
    lowered) offsets; `kept` lists what differs but is left as the target has it, with why."""

    topics_added: dict[str, md.TopicConfig] = field(default_factory=dict)
    groups_added: dict[str, md.SubscriptionGroupConfig] = field(default_factory=dict)
    offsets_set: list[dict[str, Any]] = field(default_factory=list)  # topic, group, queueId, from, to
    delay_set: list[dict[str, Any]] = field(default_factory=list)  # level, from, to
    kept: list[dict[str, Any]] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.topics_added or self.groups_added or self.offsets_set or self.delay_set)

    def to_dict(self) -> dict[str, Any]:
        return {
            "topicsAdded": sorted(self.topics_added),
            "groupsAdded": sorted(self.groups_added),
            "offsetsSet": self.offsets_set,
            "delayOffsetsSet": self.delay_set,
            "kept": self.kept,
        }


_OTHER = "the target has it with other settings (left as it is)"
_FURTHER = "the target is further (--allow-rewind moves it back)"


def plan_sync(
    src: ReplicaMetadata, dst: ReplicaMetadata, what: Sequence[str], *, allow_rewind: bool = False
) -> SyncPlan:
    p = SyncPlan()

    def add_missing(
        kind: str, want: Mapping[str, Any], have: Mapping[str, Any], added: dict[str, Any]
    ) -> None:
        """What the target lacks is added; what it has with other settings stays, and is said."""
        for name, cfg in sorted(want.items()):
            if name not in have:
                added[name] = cfg
            elif have[name] != cfg:
                p.kept.append({"kind": kind, "name": name, "why": _OTHER})

    def move(
        cur: int | None, off: int, row: dict[str, Any], moved: list[dict[str, Any]], kind: str, name: str
    ) -> None:
        """An offset moves forward; back only with --allow-rewind, else it stays, and is said."""
        if cur is None or off > cur or allow_rewind:
            moved.append(row)
        else:
            p.kept.append({"kind": kind, "name": name, **row, "why": _FURTHER})

    if "topics" in what:
        add_missing("topic", src.topics, dst.topics, p.topics_added)
    if "groups" in what:
        add_missing("group", src.groups, dst.groups, p.groups_added)
    if "offsets" in what:
        for key in sorted(src.offsets):
            topic, _, group = key.partition("@")
            have = dst.offsets.get(key, {})
            for q, off in sorted(src.offsets[key].items()):
                cur = have.get(q)
                if cur == off:
                    continue
                row = {"topic": topic, "group": group, "queueId": q, "from": cur, "to": off}
                move(cur, off, row, p.offsets_set, "offset", f"{key} queue {q}")
    if "delay" in what:
        for level, off in sorted(src.delay.items()):
            cur = dst.delay.get(level)
            if cur == off:
                continue
            move(cur, off, {"level": level, "from": cur, "to": off}, p.delay_set, "delay", f"level {level}")
    return p
