"""The replicated controller state: broker sets, config, feature level, failover pauses and
history. `ControllerState.apply` is the only way it changes; it raises on a record that does not fit."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from mqctl.controller.core.config_keys import (
    _DEFAULT_CONFIG,
    _cfg_bool,
    _cfg_int,
    _normalize_config_value,
    default_config,
)
from mqctl.controller.core.context import (
    ALL_BROKER_SETS,
    FIRST_BROKER_CONTROLLER_ID,
    HISTORY_LEVEL,
    SNAPSHOT_VERSION,
)
from mqctl.controller.core.history import History, _canonical, election_cause
from mqctl.controller.records import (
    FEATURE_LEVELS,
    MAX_FEATURE_LEVEL,
    BrokerAddressUpdated,
    BrokerDataCleaned,
    BrokerIdApplied,
    BrokerOptionsSet,
    BrokerRegistered,
    ConfigUpdated,
    DecisionNoted,
    FailoverPauseSet,
    FeatureLevelSet,
    MasterElected,
    MetaSet,
    Record,
    SyncStateSetAltered,
)

# --------------------------------------------------------------------------------------------
# State


_MEMBERS: dict[frozenset[int], frozenset[int]] = {}


def _members(ids: Iterable[int]) -> frozenset[int]:
    """A SyncStateSet, one object per distinct value in the node (as sys.intern for names): a
    fleet's sets hold the same few ({1}, {1, 2}, ...), and a set object is 216 bytes."""
    value = frozenset(ids)
    if len(_MEMBERS) < 4096:
        return _MEMBERS.setdefault(value, value)
    return _MEMBERS.get(value, value)


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """Replaced, never changed: a decision view's copy of a broker set shares them."""

    address: str
    register_check_code: str
    broker_epoch: int = 0  # 0 = never registered (RegisterBroker) since ApplyBrokerId


@dataclass(slots=True)
class BrokerSet:
    """BrokerReplicaInfo + SyncStateInfo of one broker set (keyed by brokerName)."""

    cluster_name: str
    broker_name: str
    next_assign_broker_id: int = FIRST_BROKER_CONTROLLER_ID
    brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    master_broker_id: int | None = None
    master_epoch: int = 0
    sync_state_set: frozenset[int] = frozenset()
    sync_state_set_epoch: int = 0
    options: dict[str, str] | None = None  # None: no registration has carried options yet
    # Derived, not in the snapshot: the last master this set had (the old master in the note of an
    # election after the master was cleared); rebuilt from the history when a snapshot is loaded.
    last_master_broker_id: int | None = None

    def address_of(self, broker_id: int | None) -> str:
        if broker_id is None:
            return ""
        info = self.brokers.get(broker_id)
        return info.address if info is not None else ""

    def add_broker(self, broker_id: int, address: str, register_check_code: str) -> None:
        self.brokers[broker_id] = BrokerInfo(address, register_check_code)
        self.next_assign_broker_id += 1  # RocketMQ: +1, not id+1; never decremented

    def copy(self) -> BrokerSet:
        return BrokerSet(
            self.cluster_name,
            self.broker_name,
            self.next_assign_broker_id,
            dict(self.brokers),
            self.master_broker_id,
            self.master_epoch,
            self.sync_state_set,
            self.sync_state_set_epoch,
            None if self.options is None else dict(self.options),
            self.last_master_broker_id,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "cluster_name": self.cluster_name,
            "broker_name": self.broker_name,
            "next_assign_broker_id": self.next_assign_broker_id,
            "brokers": {
                str(bid): {
                    "address": b.address,
                    "register_check_code": b.register_check_code,
                    "broker_epoch": b.broker_epoch,
                }
                for bid, b in sorted(self.brokers.items())
            },
            "master_broker_id": self.master_broker_id,
            "master_epoch": self.master_epoch,
            "sync_state_set": sorted(self.sync_state_set),
            "sync_state_set_epoch": self.sync_state_set_epoch,
            "options": None if self.options is None else dict(sorted(self.options.items())),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BrokerSet:
        master = d.get("master_broker_id")
        options = d.get("options")
        return cls(
            cluster_name=str(d["cluster_name"]),
            broker_name=str(d["broker_name"]),
            next_assign_broker_id=int(d["next_assign_broker_id"]),
            brokers={
                int(bid): BrokerInfo(
                    str(b["address"]), str(b["register_check_code"]), int(b.get("broker_epoch", 0))
                )
                for bid, b in d.get("brokers", {}).items()
            },
            master_broker_id=None if master is None else int(master),
            master_epoch=int(d.get("master_epoch", 0)),
            sync_state_set=_members(int(x) for x in d.get("sync_state_set", [])),
            sync_state_set_epoch=int(d.get("sync_state_set_epoch", 0)),
            options=None if options is None else {str(k): str(v) for k, v in options.items()},
        )


_SETS_MARK = "\x01broker_sets\x01"
_HISTORY_MARK = "\x01history\x01"


class SnapshotVersionError(ValueError):
    """A snapshot written by a newer mqctl: never guessed at."""


class InconsistentRecord(Exception):
    """A record that does not fit the state it is applied to: the logs of two nodes differ, or a
    rule produced a bad record. The node must stop applying (as Kafka's replay throws)."""


class ControllerState:
    """The replicated controller state. Change it only with `apply(event)`."""

    def __init__(self, config: Mapping[str, object] | None = None) -> None:
        self.broker_sets: dict[str, BrokerSet] = {}
        self.broker_epoch: int = 0  # cluster-wide counter: last brokerEpoch handed out
        self.config: dict[str, str] = default_config(**dict(config or {}))
        self.meta: dict[str, Any] = {}
        self.feature_level: int = 1  # records every member can read (records.FEATURE_LEVELS)
        # From feature level 3 (HISTORY_LEVEL): the decision history, newest last, bounded by
        # historyMaxEntries; the seq of the last entry ever noted; the bytes each broker set's elections
        # may have lost in all, and how many elections each had by cause (election_cause: counted at
        # apply, as the loss, so that trimming the history never lowers them); automatic failover
        # paused per broker set ("" = every broker set).
        self.history = History()
        self.history_seq: int = 0
        self.loss_total: dict[str, int] = {}
        self.elections: dict[str, dict[str, int]] = {}
        self.failover_paused: dict[str, dict[str, Any]] = {}
        # A decision view (decision_view) shares these broker sets with the state it was made from
        # until it changes them, and keeps no history entries.
        self._borrowed: set[str] = set()
        self._keeps_history = True

    # -- reading helpers

    def broker_set(self, broker_name: str) -> BrokerSet | None:
        return self.broker_sets.get(broker_name)

    def broker_names(self) -> list[str]:
        return sorted(self.broker_sets)

    def cluster_of(self, broker_name: str) -> str | None:
        bs = self.broker_sets.get(broker_name)
        return None if bs is None else bs.cluster_name

    def broker_set_view(self, broker_name: str) -> dict[str, Any] | None:
        """A read-only JSON-safe copy of one broker set (None if unknown)."""
        bs = self.broker_sets.get(broker_name)
        if bs is None:
            return None
        d = bs.to_dict()
        d["broker_ids"] = sorted(bs.brokers)
        d["brokers"] = {int(k): v for k, v in d["brokers"].items()}
        return d

    def cfg_bool(self, key: str) -> bool:
        return _cfg_bool(self.config, key)

    def cfg_int(self, key: str) -> int:
        return _cfg_int(self.config, key)

    def pause_of(self, broker_name: str) -> dict[str, Any] | None:
        """The failover pause that holds for this broker set (its own, else every set's), or None."""
        return self.failover_paused.get(broker_name) or self.failover_paused.get(ALL_BROKER_SETS)

    # -- snapshot

    def to_dict(self) -> dict[str, Any]:
        return self._doc(
            {name: bs.to_dict() for name, bs in sorted(self.broker_sets.items())}, list(self.history)
        )

    def _doc(self, broker_sets: object, history: object) -> dict[str, Any]:
        doc = {
            "version": SNAPSHOT_VERSION,
            "broker_epoch": self.broker_epoch,
            "config": dict(sorted(self.config.items())),
            "meta": json.loads(json.dumps(self.meta, sort_keys=True)),
            "broker_sets": broker_sets,
        }
        if self.feature_level > 1:  # absent at level 1: the same document (and hash) as mqctl 0.1
            doc["feature_level"] = self.feature_level
        if self.feature_level >= HISTORY_LEVEL:
            doc["history"] = history
            doc["history_seq"] = self.history_seq
            doc["loss_total"] = dict(sorted(self.loss_total.items()))
            doc["elections"] = {n: dict(sorted(c.items())) for n, c in sorted(self.elections.items())}
            doc["failover_paused"] = json.loads(json.dumps(self.failover_paused, sort_keys=True))
        return doc

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ControllerState:
        """Raises SnapshotVersionError for a snapshot newer than this node can read."""
        version = d.get("version", 1)
        if not isinstance(version, int) or not 1 <= version <= SNAPSHOT_VERSION:
            raise SnapshotVersionError(
                f"controller snapshot version {version!r} is not one this node reads "
                f"(1..{SNAPSHOT_VERSION}): upgrade this node"
            )
        st = cls()
        level = d.get("feature_level", 1)
        if not isinstance(level, int) or level not in FEATURE_LEVELS:
            raise SnapshotVersionError(
                f"controller snapshot is at feature level {level!r}, this node speaks "
                f"1..{MAX_FEATURE_LEVEL}: upgrade this node"
            )
        st.feature_level = level
        st.broker_epoch = int(d.get("broker_epoch", 0))
        st.config = {str(k): str(v) for k, v in (d.get("config") or {}).items()}
        for key, value in _DEFAULT_CONFIG.items():
            st.config.setdefault(key, value)
        st.meta = json.loads(json.dumps(d.get("meta") or {}))
        st.broker_sets = {str(n): BrokerSet.from_dict(b) for n, b in (d.get("broker_sets") or {}).items()}
        st.history = History(d.get("history") or [])
        st.history_seq = int(d.get("history_seq", 0))
        st.loss_total = {str(k): int(v) for k, v in (d.get("loss_total") or {}).items()}
        if "elections" in d:
            st.elections = {str(n): {str(k): int(v) for k, v in c.items()} for n, c in d["elections"].items()}
        else:  # a level-3 snapshot of a build that did not count them: what its retained history says
            for entry in st.history:
                st._count_election(entry)
        for entry in st.history:
            bs = st.broker_sets.get(str(entry.get("broker_name", "")))
            last = (entry.get("election") or {}).get("new_master_broker_id")
            if bs is not None and last is not None:
                bs.last_master_broker_id = int(last)
        st.failover_paused = json.loads(json.dumps(d.get("failover_paused") or {}))
        return st

    def canonical_json(self) -> str:
        """json.dumps(to_dict(), sort_keys=True, separators=(",", ":")), byte for byte (the hash
        every node compares)."""
        return "".join(self.canonical_parts())

    def canonical_parts(self) -> Iterator[str]:
        """canonical_json's text in pieces, a broker set or a history entry a piece: no tree of the
        whole state in memory at once, and no text of it either for the hash (callers poll the hash,
        and a large short-lived text left the leader's memory in pieces it could not give back)."""
        text = _canonical(self._doc(_SETS_MARK, _HISTORY_MARK))
        head, tail = text.split(_canonical(_SETS_MARK), 1)
        yield head + "{"
        sep = ""
        for name, bs in sorted(self.broker_sets.items()):
            yield f"{sep}{_canonical(name)}:{_canonical(bs.to_dict())}"
            sep = ","
        yield "}"
        if self.feature_level >= HISTORY_LEVEL:
            between, tail = tail.split(_canonical(_HISTORY_MARK), 1)
            yield between
            yield from self.history.json_parts()
        yield tail

    def state_hash(self) -> str:
        digest = hashlib.sha256()
        for part in self.canonical_parts():
            digest.update(part.encode("utf-8"))
        return digest.hexdigest()

    def copy(self) -> ControllerState:
        return ControllerState.from_dict(self.to_dict())

    def decision_view(self) -> ControllerState:
        """What the leader decides against (mqctl.controller.node): this state plus the records of
        entries not applied yet. Its broker sets are this state's until the view changes one (then
        copied), and it keeps neither the history's entries nor their counts (loss_total,
        elections), which no decision reads: a leader of 10,000 brokers holds one state, not two,
        and neither a new term nor a view made anew copies them all.
        Sharing is safe because every record this state applies in the view's term has been applied
        to the view first, which copied the set it changed."""
        view = ControllerState()
        view.broker_sets = dict(self.broker_sets)
        view._borrowed = set(self.broker_sets)
        view._keeps_history = False
        view.broker_epoch = self.broker_epoch
        view.config = dict(self.config)
        view.meta = json.loads(json.dumps(self.meta))
        view.feature_level = self.feature_level
        view.history_seq = self.history_seq
        view.failover_paused = json.loads(json.dumps(self.failover_paused))
        return view

    # -- records

    def apply(self, record: Record) -> None:
        """Apply one record; the only way state changes. Deterministic on every node. Raises
        InconsistentRecord (and changes nothing) when the record does not fit the state."""
        applier = self._APPLIERS.get(type(record))
        if applier is None:
            raise InconsistentRecord(f"no applier for {type(record).__name__}")
        applier(self, record)

    def copied_sets(self) -> int:
        """How many broker sets a decision view has copied (changed) so far."""
        return len(self.broker_sets) - len(self._borrowed)

    def _own(self, name: str) -> BrokerSet | None:
        """The broker set to change (a decision view's copy of a shared one), None if unknown."""
        bs = self.broker_sets.get(name)
        if bs is not None and name in self._borrowed:
            self._borrowed.discard(name)
            bs = self.broker_sets[name] = bs.copy()
        return bs

    def _set(self, name: str, what: object) -> BrokerSet:
        bs = self._own(name)
        if bs is None:
            raise InconsistentRecord(f"{type(what).__name__} for broker set {name!r}, which does not exist")
        return bs

    def _apply_broker_id_applied(self, r: BrokerIdApplied) -> None:
        bs = self._own(r.broker_name)
        if bs is None:
            if r.new_broker_id != FIRST_BROKER_CONTROLLER_ID:
                raise InconsistentRecord(
                    f"broker set {r.broker_name!r} does not exist; a new one starts "
                    f"with id {FIRST_BROKER_CONTROLLER_ID}, not {r.new_broker_id}"
                )
            bs = BrokerSet(cluster_name=r.cluster_name, broker_name=r.broker_name)
            bs.add_broker(r.new_broker_id, r.broker_address, r.register_check_code)
            self.broker_sets[r.broker_name] = bs
            return
        info = bs.brokers.get(r.new_broker_id)
        if info is None:
            bs.add_broker(r.new_broker_id, r.broker_address, r.register_check_code)
        elif info.register_check_code != r.register_check_code:
            raise InconsistentRecord(
                f"broker id {r.new_broker_id} of {r.broker_name!r} is already bound to "
                "another registerCheckCode"
            )

    def _apply_sync_state_set_altered(self, r: SyncStateSetAltered) -> None:
        bs = self._set(r.broker_name, r)
        unknown = sorted(set(r.new_sync_state_set) - set(bs.brokers))
        if unknown:
            raise InconsistentRecord(f"SyncStateSet of {r.broker_name!r} names unknown broker ids {unknown}")
        bs.sync_state_set = _members(r.new_sync_state_set)
        bs.sync_state_set_epoch += 1

    def _apply_master_elected(self, r: MasterElected) -> None:
        bs = self._set(r.broker_name, r)
        new_master = r.new_master_broker_id
        if new_master is not None and new_master not in bs.brokers:
            raise InconsistentRecord(
                f"master {new_master} elected for {r.broker_name!r} is not one of its "
                f"brokers {sorted(bs.brokers)}"
            )
        if bs.master_broker_id is not None:
            bs.last_master_broker_id = bs.master_broker_id
        bs.master_broker_id = new_master
        bs.master_epoch += 1
        if new_master is not None:
            bs.sync_state_set = _members((new_master,))
            bs.sync_state_set_epoch += 1

    def _apply_broker_data_cleaned(self, r: BrokerDataCleaned) -> None:
        bs = self._set(r.broker_name, r)
        if not r.broker_id_set_to_clean:
            del self.broker_sets[r.broker_name]
            self.failover_paused.pop(r.broker_name, None)  # a set registered anew starts unpaused
            return
        for bid in r.broker_id_set_to_clean:
            bs.brokers.pop(bid, None)
        bs.sync_state_set = _members(bs.sync_state_set.difference(r.broker_id_set_to_clean))
        # RocketMQ drops BrokerReplicaInfo / SyncStateInfo when it becomes empty; a set exists only
        # while both do, so mqctl drops the whole set.
        if not bs.brokers or not bs.sync_state_set:
            del self.broker_sets[r.broker_name]

    def _broker(self, bs: BrokerSet, broker_id: int, what: object) -> BrokerInfo:
        info = bs.brokers.get(broker_id)
        if info is None:
            raise InconsistentRecord(
                f"{type(what).__name__} for broker id {broker_id} of "
                f"{bs.broker_name!r}, which is not registered"
            )
        return info

    def _apply_broker_address_updated(self, r: BrokerAddressUpdated) -> None:
        bs = self._set(r.broker_name, r)
        info = self._broker(bs, r.broker_id, r)
        bs.brokers[r.broker_id] = BrokerInfo(r.broker_address, info.register_check_code, info.broker_epoch)

    def _apply_broker_registered(self, r: BrokerRegistered) -> None:
        bs = self._set(r.broker_name, r)
        info = self._broker(bs, r.broker_id, r)
        if r.broker_epoch <= self.broker_epoch:
            raise InconsistentRecord(
                f"brokerEpoch {r.broker_epoch} is not above the last one handed out ({self.broker_epoch})"
            )
        self.broker_epoch = r.broker_epoch
        bs.brokers[r.broker_id] = BrokerInfo(info.address, info.register_check_code, r.broker_epoch)

    def _apply_broker_options_set(self, r: BrokerOptionsSet) -> None:
        self._set(r.broker_name, r).options = dict(sorted(r.options.items()))

    def _apply_config_updated(self, r: ConfigUpdated) -> None:
        normalized: dict[str, str] = {}
        for key, value in r.config.items():
            try:
                normalized[key] = _normalize_config_value(key, value)
            except ValueError as exc:
                raise InconsistentRecord(str(exc)) from None
        self.config.update(normalized)
        self._trim_history()

    def _apply_meta_set(self, r: MetaSet) -> None:
        if r.value is None:
            self.meta.pop(r.key, None)
        else:
            self.meta[r.key] = json.loads(json.dumps(r.value, sort_keys=True))

    def _level(self, r: Record) -> None:
        if self.feature_level < r.LEVEL:
            raise InconsistentRecord(
                f"{type(r).__name__} needs feature level {r.LEVEL}; the group is at {self.feature_level}"
            )

    def _apply_decision_noted(self, r: DecisionNoted) -> None:
        self._level(r)
        self.history_seq += 1
        if not self._keeps_history:
            return
        entry = {**r.entry, "seq": self.history_seq}
        self.history.append(entry)
        loss = (entry.get("election") or {}).get("loss_bytes")
        if isinstance(loss, int) and not isinstance(loss, bool):
            name = str(entry.get("broker_name", ""))
            self.loss_total[name] = self.loss_total.get(name, 0) + loss
        self._count_election(entry)
        self._trim_history()

    def _count_election(self, entry: Mapping[str, Any]) -> None:
        if entry.get("election") is not None:
            counts = self.elections.setdefault(str(entry.get("broker_name", "")), {})
            kind = election_cause(str(entry.get("cause", "")))
            counts[kind] = counts.get(kind, 0) + 1

    def _trim_history(self) -> None:
        self.history.trim(self.cfg_int("historyMaxEntries"))

    def _apply_failover_pause_set(self, r: FailoverPauseSet) -> None:
        self._level(r)
        if r.paused:
            self.failover_paused[r.broker_name] = {"reason": r.reason, "since_ms": r.since_ms}
        else:
            self.failover_paused.pop(r.broker_name, None)

    def _apply_feature_level_set(self, r: FeatureLevelSet) -> None:
        if r.level < self.feature_level:
            raise InconsistentRecord(
                f"feature level {r.level} is below the group's {self.feature_level}: it is never lowered"
            )
        self.feature_level = r.level

    _APPLIERS: ClassVar[dict[type, Callable[[ControllerState, Any], None]]] = {
        BrokerIdApplied: _apply_broker_id_applied,
        SyncStateSetAltered: _apply_sync_state_set_altered,
        MasterElected: _apply_master_elected,
        BrokerDataCleaned: _apply_broker_data_cleaned,
        BrokerAddressUpdated: _apply_broker_address_updated,
        BrokerRegistered: _apply_broker_registered,
        BrokerOptionsSet: _apply_broker_options_set,
        ConfigUpdated: _apply_config_updated,
        MetaSet: _apply_meta_set,
        FeatureLevelSet: _apply_feature_level_set,
        DecisionNoted: _apply_decision_noted,
        FailoverPauseSet: _apply_failover_pause_set,
    }
