"""The controller's log records: typed, versioned, decided once by the leader.

The Raft log holds decisions, never requests: the leader runs a rule of `core` once and appends
the records it returned; every node applies the same records to the same state
(`ControllerState.apply`), so a rule changed by an upgrade or a bug fix cannot make two nodes
disagree about an entry. (Kafka's QuorumController and etcd's raft work the same way.)

On the wire a record is a JSON object: `{"type": <wire name>, "v": <record version>, ...fields}`.
The wire names and fields are those of the events of mqctl 0.1, whose nodes applied
`{"events": [...]}` entries as they are: a group that still has 0.1 nodes (feature level 1) can
read every record this release writes at that level. `decode` refuses a record type or version
this node does not know (`RecordError`) rather than guess; older versions are upgraded on read.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Self, TypeAlias, cast

__all__ = [
    "FEATURE_LEVELS",
    "MAX_FEATURE_LEVEL",
    "RECORD_TYPES",
    "BrokerAddressUpdated",
    "BrokerDataCleaned",
    "BrokerIdApplied",
    "BrokerOptionsSet",
    "BrokerRegistered",
    "ConfigUpdated",
    "DecisionNoted",
    "FailoverPauseSet",
    "FeatureLevelSet",
    "MasterElected",
    "MetaSet",
    "Record",
    "RecordError",
    "SyncStateSetAltered",
    "decode",
    "decode_entry",
    "encode",
    "encode_entry",
    "record_versions",
]

# The group's feature level says which records every member can read (Kafka's metadata.version).
# A node writes only records of the group's level; raising it is an admin action
# (`mqctl quorum feature-level`) once every member speaks the new level.
FEATURE_LEVELS: dict[int, str] = {
    1: 'mqctl 0.1: nine record types in {"events": [...]} entries; 0.1 leaders still append '
    "(method, request, context) commands, which this release decides on apply as 0.1 did",
    2: "records only: a command entry is refused; adds FeatureLevelSet",
    3: "adds DecisionNoted (the decision history, `mqctl history`) and FailoverPauseSet "
    "(`mqctl failover pause|resume`)",
}
MAX_FEATURE_LEVEL = max(FEATURE_LEVELS)

JSON: TypeAlias = Any


class RecordError(ValueError):
    """A log entry or record this node cannot read: unknown type, newer version, bad field."""


def _need(d: Mapping[str, Any], key: str, kind: type | tuple[type, ...], *, nullable: bool = False) -> Any:
    v = d.get(key)
    if v is None and nullable:
        return None
    if isinstance(v, bool) and kind is int:
        raise RecordError(f"field {key} must be an integer, not {v!r}")
    if not isinstance(v, kind):
        raise RecordError(f"field {key} has the wrong type ({type(v).__name__})")
    if key in _SHARED and isinstance(v, str) and len(v) <= 255:
        return sys.intern(v)
    return v


# Names and addresses: one object per name in the whole node (state, heartbeat table,
# registrations), not one per record that carried it. Not the registerCheckCodes: one per broker
# anyway, and each would only grow the interpreter's table of interned strings.
_SHARED = frozenset(("cluster_name", "broker_name", "broker_address"))


def _ids(d: Mapping[str, Any], key: str, *, nullable: bool = False) -> tuple[int, ...] | None:
    v = d.get(key)
    if v is None and nullable:
        return None
    if not isinstance(v, list) or any(isinstance(x, bool) or not isinstance(x, int) for x in v):
        raise RecordError(f"field {key} must be a list of broker ids")
    return tuple(v)


def _str_map(d: Mapping[str, Any], key: str) -> dict[str, str]:
    v = d.get(key)
    if not isinstance(v, Mapping) or not all(isinstance(k, str) and isinstance(x, str) for k, x in v.items()):
        raise RecordError(f"field {key} must be a map of strings")
    return dict(sorted(v.items()))


_KINDS: dict[str, type] = {"str": str, "int": int, "bool": bool}


_PLAIN_FIELDS: dict[type, tuple[tuple[str, type], ...]] = {}


def _plain_fields(cls: type) -> tuple[tuple[str, type], ...]:
    found = _PLAIN_FIELDS.get(cls)
    if found is None:
        found = _PLAIN_FIELDS[cls] = tuple((f.name, _KINDS[str(f.type)]) for f in dataclasses.fields(cls))
    return found


class _Plain:
    """A record of plain fields (str, int, bool): read from the wire field by field, in order."""

    @classmethod
    def from_wire(cls, d: Mapping[str, Any]) -> Self:
        return cast(Self, cast(Any, cls)(*(_need(d, name, kind) for name, kind in _plain_fields(cls))))


@dataclass(frozen=True)
class BrokerIdApplied(_Plain):
    """ApplyBrokerId: a broker id is bound to a broker (creates the broker set for id 1)."""

    WIRE: ClassVar[str] = "ApplyBrokerId"
    VERSION: ClassVar[int] = 1
    LEVEL: ClassVar[int] = 1
    cluster_name: str
    broker_name: str
    new_broker_id: int
    broker_address: str
    register_check_code: str


@dataclass(frozen=True)
class BrokerAddressUpdated(_Plain):
    """RegisterBroker from a new address."""

    WIRE: ClassVar[str] = "UpdateBrokerAddress"
    VERSION: ClassVar[int] = 1
    LEVEL: ClassVar[int] = 1
    cluster_name: str
    broker_name: str
    broker_id: int
    broker_address: str


@dataclass(frozen=True)
class BrokerRegistered(_Plain):
    """RegisterBroker: a new brokerEpoch (the cluster-wide counter) for this incarnation."""

    WIRE: ClassVar[str] = "RegisterBroker"
    VERSION: ClassVar[int] = 1
    LEVEL: ClassVar[int] = 1
    cluster_name: str
    broker_name: str
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True)
class BrokerOptionsSet:
    """The first registration that carried options fixes them for the broker set."""

    WIRE: ClassVar[str] = "SetBrokerOptions"
    VERSION: ClassVar[int] = 1
    LEVEL: ClassVar[int] = 1
    broker_name: str
    options: Mapping[str, str]

    @classmethod
    def from_wire(cls, d: Mapping[str, Any]) -> BrokerOptionsSet:
        return cls(_need(d, "broker_name", str), _str_map(d, "options"))


@dataclass(frozen=True)
class MasterElected:
    """A new master (masterEpoch + 1, SyncStateSet {master}), or none (master cleared, epoch + 1)."""

    WIRE: ClassVar[str] = "ElectMaster"
    VERSION: ClassVar[int] = 1
    LEVEL: ClassVar[int] = 1
    broker_name: str
    new_master_broker_id: int | None

    @property
    def new_master_elected(self) -> bool:
        return self.new_master_broker_id is not None

    def wire_fields(self) -> dict[str, Any]:
        return {
            "broker_name": self.broker_name,
            "new_master_elected": self.new_master_elected,
            "new_master_broker_id": self.new_master_broker_id,
        }

    @classmethod
    def from_wire(cls, d: Mapping[str, Any]) -> MasterElected:
        elected = _need(d, "new_master_elected", bool)
        master = _need(d, "new_master_broker_id", int) if elected else None
        return cls(_need(d, "broker_name", str), master)


@dataclass(frozen=True)
class SyncStateSetAltered:
    """AlterSyncStateSet: a new SyncStateSet, syncStateSetEpoch + 1."""

    WIRE: ClassVar[str] = "AlterSyncStateSet"
    VERSION: ClassVar[int] = 1
    LEVEL: ClassVar[int] = 1
    broker_name: str
    new_sync_state_set: tuple[int, ...]

    @classmethod
    def from_wire(cls, d: Mapping[str, Any]) -> SyncStateSetAltered:
        ids = _ids(d, "new_sync_state_set")
        assert ids is not None
        return cls(_need(d, "broker_name", str), tuple(sorted(set(ids))))


@dataclass(frozen=True)
class BrokerDataCleaned:
    """CleanBrokerData: the given broker ids, or (None) the whole broker set, are forgotten."""

    WIRE: ClassVar[str] = "CleanBrokerData"
    VERSION: ClassVar[int] = 1
    LEVEL: ClassVar[int] = 1
    broker_name: str
    broker_id_set_to_clean: tuple[int, ...] | None

    @classmethod
    def from_wire(cls, d: Mapping[str, Any]) -> BrokerDataCleaned:
        ids = _ids(d, "broker_id_set_to_clean", nullable=True)
        return cls(_need(d, "broker_name", str), tuple(sorted(set(ids))) if ids else None)


@dataclass(frozen=True)
class ConfigUpdated:
    """UpdateControllerConfig: replicated controller settings (already validated)."""

    WIRE: ClassVar[str] = "UpdateConfig"
    VERSION: ClassVar[int] = 1
    LEVEL: ClassVar[int] = 1
    config: Mapping[str, str]

    @classmethod
    def from_wire(cls, d: Mapping[str, Any]) -> ConfigUpdated:
        return cls(_str_map(d, "config"))


@dataclass(frozen=True)
class MetaSet:
    """Node-level bookkeeping (group id, node addresses, feature levels); value None deletes."""

    WIRE: ClassVar[str] = "SetMeta"
    VERSION: ClassVar[int] = 1
    LEVEL: ClassVar[int] = 1
    key: str
    value: JSON = field(default=None)

    def wire_fields(self) -> dict[str, Any]:
        return {"key": self.key, "value": self.value}

    @classmethod
    def from_wire(cls, d: Mapping[str, Any]) -> MetaSet:
        value = d.get("value")
        try:
            value = json.loads(json.dumps(value, sort_keys=True))
        except (TypeError, ValueError):
            raise RecordError("field value is not JSON") from None
        return cls(_need(d, "key", str), value)


@dataclass(frozen=True)
class FeatureLevelSet:
    """The group's feature level is raised (never lowered)."""

    WIRE: ClassVar[str] = "SetFeatureLevel"
    VERSION: ClassVar[int] = 1
    LEVEL: ClassVar[int] = 2
    level: int

    @classmethod
    def from_wire(cls, d: Mapping[str, Any]) -> FeatureLevelSet:
        level = _need(d, "level", int)
        if level not in FEATURE_LEVELS:
            raise RecordError(
                f"feature level {level} is not one this node speaks "
                f"(1..{MAX_FEATURE_LEVEL}): upgrade this node"
            )
        return cls(level)


@dataclass(frozen=True)
class DecisionNoted:
    """One history entry: what a decision changed, why, when (the leader's clock) and in which term;
    for an election every candidate and the bytes the new master may not have."""

    WIRE: ClassVar[str] = "NoteDecision"
    VERSION: ClassVar[int] = 1
    LEVEL: ClassVar[int] = 3
    entry: Mapping[str, Any]

    def wire_fields(self) -> dict[str, Any]:
        return {"entry": json.loads(json.dumps(self.entry, sort_keys=True))}

    @classmethod
    def from_wire(cls, d: Mapping[str, Any]) -> DecisionNoted:
        entry = _need(d, "entry", Mapping)
        for key, kind in (
            ("time_ms", int),
            ("term", int),
            ("broker_name", str),
            ("what", str),
            ("cause", str),
        ):
            _need(entry, key, kind)
        try:
            entry = json.loads(json.dumps(entry, sort_keys=True))
        except (TypeError, ValueError):
            raise RecordError("field entry is not JSON") from None
        return cls(entry)


@dataclass(frozen=True)
class FailoverPauseSet(_Plain):
    """Automatic failover paused (or resumed) for one broker set, or ("") for every broker set."""

    WIRE: ClassVar[str] = "SetFailoverPause"
    VERSION: ClassVar[int] = 1
    LEVEL: ClassVar[int] = 3
    broker_name: str
    paused: bool
    reason: str = ""
    since_ms: int = 0


Record: TypeAlias = (
    BrokerIdApplied
    | BrokerAddressUpdated
    | BrokerRegistered
    | BrokerOptionsSet
    | MasterElected
    | SyncStateSetAltered
    | BrokerDataCleaned
    | ConfigUpdated
    | MetaSet
    | FeatureLevelSet
    | DecisionNoted
    | FailoverPauseSet
)

RECORD_TYPES: dict[str, type[Record]] = {
    cls.WIRE: cls
    for cls in (
        BrokerIdApplied,
        BrokerAddressUpdated,
        BrokerRegistered,
        BrokerOptionsSet,
        MasterElected,
        SyncStateSetAltered,
        BrokerDataCleaned,
        ConfigUpdated,
        MetaSet,
        FeatureLevelSet,
        DecisionNoted,
        FailoverPauseSet,
    )
}


def record_versions() -> dict[str, int]:
    """What this node can apply: wire name -> newest record version (GetMetadata, `mqctl serve`)."""
    return {name: cls.VERSION for name, cls in sorted(RECORD_TYPES.items())}


def encode(record: Record) -> dict[str, Any]:
    custom = getattr(record, "wire_fields", None)
    body: dict[str, Any] = (
        custom() if custom is not None else {f.name: getattr(record, f.name) for f in fields(record)}
    )
    for key, value in body.items():
        if isinstance(value, tuple):
            body[key] = list(value)
        elif isinstance(value, Mapping):
            body[key] = dict(sorted(value.items()))
    return {"type": record.WIRE, "v": record.VERSION, **body}


def decode(d: object) -> Record:
    """One wire record; a record without "v" is version 1 (mqctl 0.1 events)."""
    if not isinstance(d, Mapping):
        raise RecordError("a record must be a JSON object")
    name = d.get("type")
    cls = RECORD_TYPES.get(name) if isinstance(name, str) else None
    if cls is None:
        raise RecordError(f"unknown record type {name!r}: written by a newer mqctl? upgrade this node")
    version = d.get("v", 1)
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise RecordError(f"record {name} has a bad version {version!r}")
    if version > cls.VERSION:
        raise RecordError(
            f"record {name} version {version} is newer than this node's {cls.VERSION}: upgrade this node"
        )
    try:
        return cls.from_wire(d)
    except RecordError as exc:
        raise RecordError(f"record {name}: {exc}") from None


def encode_entry(records: list[Record]) -> str:
    """A log entry: the records of one decision, applied together (or not at all)."""
    return json.dumps({"events": [encode(r) for r in records]}, sort_keys=True, separators=(",", ":"))


def decode_entry(doc: Mapping[str, Any]) -> list[Record]:
    events = doc.get("events")
    if not isinstance(events, list):
        raise RecordError("a record entry must hold a list of records")
    return [decode(e) for e in events]
