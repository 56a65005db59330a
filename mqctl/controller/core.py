"""The pure rule core of the mqctl controller (RocketMQ ReplicasInfoManager, plus extensions).

No I/O, no clocks, no threads, no randomness. Time and broker liveness come in as a `Context`.
`handle` decides and returns typed records (mqctl.controller.records); `ControllerState.apply`
is the only way state changes.
The rules, codes and every deliberate difference from RocketMQ are in docs/controller-rules.md.
"""

from __future__ import annotations

import hashlib
import json
import re
import zlib
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, overload

from mqctl.controller import election
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
from mqctl.errors import Code

__all__ = [
    "CONFIG_BLACKLIST",
    "HONOURED_CONFIG_KEYS",
    "METHODS",
    "NODE_CONFIG_KEYS",
    "NOT_HONOURED_CONFIG_KEYS",
    "NOT_HONOURED_KEY",
    "ROCKETMQ_CONFIG",
    "BrokerInfo",
    "BrokerSet",
    "Context",
    "ControllerState",
    "LiveInfo",
    "Result",
    "default_config",
    "handle",
]

MAX_ID = 2**53
MAX_NAME_LEN = 255
MAX_OPTION_VALUE_LEN = 4096
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
DEFAULT_ELECTION_PRIORITY = election.DEFAULT_ELECTION_PRIORITY
DEFAULT_HEARTBEAT_TIMEOUT_MS = 10000
FIRST_BROKER_CONTROLLER_ID = 1
CONFIG_BLACKLIST = frozenset({"configBlackList", "configStorePath", "rocketmqHome"})
SNAPSHOT_VERSION = 1
HISTORY_LEVEL = DecisionNoted.LEVEL  # the feature level from which decisions are noted and failover pauses
ALL_BROKER_SETS = ""  # a failover pause of every broker set
HISTORY_CHUNK = 256  # history entries per buffer (History)


# --------------------------------------------------------------------------------------------
# Context


@dataclass(frozen=True, slots=True)  # one per broker in the leader's memory: slots keep it small
class LiveInfo:
    """One heartbeat-table row, as the leader saw it."""

    broker_id: int
    broker_address: str = ""
    broker_epoch: int = 0  # brokerEpoch the heartbeat/registration carried (0 = none)
    epoch: int = -1  # last epoch in the broker's epoch file (-1 = none)
    max_offset: int = -1
    confirm_offset: int = -1
    election_priority: int = DEFAULT_ELECTION_PRIORITY  # lower wins
    last_heartbeat_ms: int = 0
    timeout_ms: int = DEFAULT_HEARTBEAT_TIMEOUT_MS

    def is_alive(self, now_ms: int) -> bool:
        return self.last_heartbeat_ms + self.timeout_ms >= now_ms

    def to_dict(self) -> dict[str, Any]:
        return {
            "broker_id": self.broker_id,
            "broker_address": self.broker_address,
            "broker_epoch": self.broker_epoch,
            "epoch": self.epoch,
            "max_offset": self.max_offset,
            "confirm_offset": self.confirm_offset,
            "election_priority": self.election_priority,
            "last_heartbeat_ms": self.last_heartbeat_ms,
            "timeout_ms": self.timeout_ms,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LiveInfo:
        return cls(
            broker_id=int(d["broker_id"]),
            broker_address=str(d.get("broker_address", "")),
            broker_epoch=int(d.get("broker_epoch", 0)),
            epoch=int(d.get("epoch", -1)),
            max_offset=int(d.get("max_offset", -1)),
            confirm_offset=int(d.get("confirm_offset", -1)),
            election_priority=int(d.get("election_priority", DEFAULT_ELECTION_PRIORITY)),
            last_heartbeat_ms=int(d.get("last_heartbeat_ms", 0)),
            timeout_ms=int(d.get("timeout_ms", DEFAULT_HEARTBEAT_TIMEOUT_MS)),
        )


@dataclass(frozen=True)
class Context:
    """The leader's clock and (a copy of) its heartbeat table, stamped on a request."""

    now_ms: int
    live: dict[str, dict[int, LiveInfo]] = field(default_factory=dict)  # rows may be expired
    term: int = 0  # the leader's Raft term, for the history (not in to_dict: 0.1's commands have none)

    def rows(self, broker_name: str) -> dict[int, LiveInfo]:
        return self.live.get(broker_name, {})

    def row(self, broker_name: str, broker_id: int) -> LiveInfo | None:
        return self.live.get(broker_name, {}).get(broker_id)

    def is_alive(self, broker_name: str, broker_id: int) -> bool:
        """A row exists and last + timeout >= now (RocketMQ isBrokerActive)."""
        r = self.row(broker_name, broker_id)
        return r is not None and r.is_alive(self.now_ms)

    def to_dict(self) -> dict[str, Any]:
        return {
            "now_ms": self.now_ms,
            "live": {
                name: {str(bid): row.to_dict() for bid, row in sorted(rows.items())}
                for name, rows in sorted(self.live.items())
            },
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Context:
        live: dict[str, dict[int, LiveInfo]] = {}
        for name, rows in (d.get("live") or {}).items():
            live[str(name)] = {int(bid): LiveInfo.from_dict(row) for bid, row in rows.items()}
        return cls(now_ms=int(d["now_ms"]), live=live)


@dataclass
class Result:
    code: int
    remark: str = ""
    response: dict[str, Any] = field(default_factory=dict)
    records: list[Record] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.code = int(self.code)  # plain int, JSON-safe

    @property
    def ok(self) -> bool:
        return self.code == Code.SUCCESS


# --------------------------------------------------------------------------------------------
# Config

_BOOL_KEYS = ("enableElectUncleanMaster", "notifyBrokerRoleChanged", "isProcessReadEvent")
_INT_KEYS: dict[str, tuple[int, int]] = {
    "scanNotActiveBrokerInterval": (1, 86_400_000),
    "scanInactiveMasterInterval": (1, 86_400_000),
    "electMasterMaxRetryCount": (0, 1000),
    "waitFor": (1, 1000),
    "heartbeatTimeoutMillis": (1, 86_400_000),
    "historyMaxEntries": (0, 1_000_000),
}
_ENUM_KEYS: dict[str, tuple[str, ...]] = {"controllerType": ("DLedger", "jRaft")}
_DEFAULT_CONFIG: dict[str, str] = {
    "controllerType": "DLedger",
    "electMasterMaxRetryCount": "3",
    "enableElectUncleanMaster": "false",
    "heartbeatTimeoutMillis": str(DEFAULT_HEARTBEAT_TIMEOUT_MS),
    "isProcessReadEvent": "false",
    "notifyBrokerRoleChanged": "true",
    "scanInactiveMasterInterval": "5000",
    "scanNotActiveBrokerInterval": "5000",
    "waitFor": "1",
}
_INT_RE = re.compile(r"^[+-]?[0-9]+$")
# Replicated keys of a later feature level: absent from the default config, so that the state (and its
# hash) of a group below that level stays the one its older members compute.
_LEVEL_KEYS: dict[str, tuple[int, str]] = {"historyMaxEntries": (HISTORY_LEVEL, "10000")}

# The keys an UpdateConfig changes: each changes what mqctl does (docs/controller-rules.md). The other
# replicated keys above are kept for the snapshots and logs that hold them (their values are still
# answered), but mqctl does not honour them, so an update leaves them alone.
HONOURED_CONFIG_KEYS = frozenset({"enableElectUncleanMaster", "scanNotActiveBrokerInterval", "waitFor",
                                  "heartbeatTimeoutMillis", "notifyBrokerRoleChanged", "historyMaxEntries"})

# RocketMQ's GET_CONTROLLER_CONFIG answer is ControllerManager's `new Configuration(log,
# controllerConfig, nettyServerConfig)`: every non-null field of ControllerConfig and NettyServerConfig
# as MixAll.object2Properties writes it (the value's toString()). These are RocketMQ 5.x's defaults
# (tests/interop/test_controller_config_interop.py compares them with RocketMQ's own classes); the
# node answers the keys of NODE_CONFIG_KEYS itself, and the replicated config (above) overrides.
ROCKETMQ_CONFIG: dict[str, str] = {
    # ControllerConfig
    "configBlackList": "configBlackList;configStorePath",
    "controllerRequestThreadPoolQueueCapacity": "50000",
    "controllerThreadPoolNums": "16",
    "controllerType": "DLedger",
    "electMasterMaxRetryCount": "3",
    "enableElectUncleanMaster": "false",
    "isProcessReadEvent": "false",
    "jraftConfig": "org.apache.rocketmq.common.JraftConfig@0",  # Object.toString() of a JraftConfig
    "mappedFileSize": "1073741824",
    "metricGrpcExporterIntervalInMills": "60000",
    "metricGrpcExporterTimeOutInMills": "3000",
    "metricLoggingExporterIntervalInMills": "10000",
    "metricsExporterType": "DISABLE",
    "metricsGrpcExporterHeader": "",
    "metricsGrpcExporterTarget": "",
    "metricsInDelta": "false",
    "metricsLabel": "",
    "metricsPromExporterHost": "",
    "metricsPromExporterPort": "5557",
    "notifyBrokerRoleChanged": "true",
    "scanInactiveMasterInterval": "5000",
    "scanNotActiveBrokerInterval": "5000",
    # NettyServerConfig (mqctl binds to the host of --listen: listenAddress)
    "bindAddress": "0.0.0.0",
    "enableShutdownGracefully": "false",
    "serverAsyncSemaphoreValue": "64",
    "serverCallbackExecutorThreads": "0",
    "serverChannelMaxIdleTimeSeconds": "120",
    "serverNettyWorkerGroupEnable": "true",
    "serverOnewaySemaphoreValue": "256",
    "serverPooledByteBufAllocatorEnable": "true",
    "serverSelectorThreads": "3",
    "serverSocketBacklog": "1024",
    "serverSocketRcvBufSize": "0",
    "serverSocketSndBufSize": "0",
    "serverWorkerThreads": "8",
    "shutdownWaitTimeSeconds": "30",
    "useEpollNativeSelector": "false",
    "writeBufferHighWaterMark": "0",
    "writeBufferLowWaterMark": "0",
}
# Keys whose values describe one node and its deployment: the node answers them
# (ControllerNode._node_local_config). The first seven are RocketMQ's (ControllerConfig's rocketmqHome,
# configStorePath, controllerStorePath and DLedger settings, NettyServerConfig's listenPort), the
# others mqctl's own.
NODE_CONFIG_KEYS: tuple[str, ...] = (
    "rocketmqHome", "configStorePath", "controllerStorePath", "listenPort",
    "controllerDLegerGroup", "controllerDLegerPeers", "controllerDLegerSelfId",
    "controllerGroup", "raftAddress", "raftPeers", "listenAddress", "remotingAddress",
)
_MQCTL_NODE_KEYS = frozenset({"controllerGroup", "raftAddress", "raftPeers", "listenAddress",
                              "remotingAddress"})
# GetConfig's own key: RocketMQ's keys (and the replicated ones) that mqctl answers but does not
# honour; an update of one of them is ignored (and named in the node's log), as of an unknown key.
NOT_HONOURED_KEY = "mqctlNotHonoured"
NOT_HONOURED_CONFIG_KEYS: tuple[str, ...] = tuple(sorted(
    ({*ROCKETMQ_CONFIG, *NODE_CONFIG_KEYS, *_DEFAULT_CONFIG} - _MQCTL_NODE_KEYS)
    - HONOURED_CONFIG_KEYS - CONFIG_BLACKLIST))


def _normalize_config_value(key: str, value: object) -> str:
    """The canonical string for a config value; raises ValueError with an operator-facing text."""
    if key not in _DEFAULT_CONFIG and key not in _LEVEL_KEYS:
        raise ValueError(f"Unknown config key: {key}")
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, int):
        text = str(value)
    elif isinstance(value, str):
        text = value.strip()
    else:
        raise ValueError(f"Invalid value for config {key}: must be a string")
    if key in _BOOL_KEYS:
        if text.lower() not in ("true", "false"):
            raise ValueError(f"Invalid value for config {key}: {text!r} is not true or false")
        return text.lower()
    if key in _INT_KEYS:
        lo, hi = _INT_KEYS[key]
        if not _INT_RE.match(text) or len(text) > 20:
            raise ValueError(f"Invalid value for config {key}: {text!r} is not an integer")
        n = int(text)
        if not lo <= n <= hi:
            raise ValueError(f"Invalid value for config {key}: {n} is out of range [{lo}, {hi}]")
        return str(n)
    allowed = _ENUM_KEYS[key]
    if text not in allowed:
        raise ValueError(f"Invalid value for config {key}: {text!r} is not one of {', '.join(allowed)}")
    return text


def default_config(**overrides: object) -> dict[str, str]:
    """The default replicated controller config (strings), with validated overrides.

    Raises ValueError for an unknown key or an invalid value.
    """
    cfg = dict(_DEFAULT_CONFIG)
    for key, value in overrides.items():
        if key in CONFIG_BLACKLIST:
            raise ValueError(f"Config key {key} can not be set")
        cfg[key] = _normalize_config_value(key, value)
    return cfg


def _cfg_bool(config: Mapping[str, str], key: str) -> bool:
    return str(config.get(key, _DEFAULT_CONFIG[key])).lower() == "true"


def _cfg_int(config: Mapping[str, str], key: str) -> int:
    default = _DEFAULT_CONFIG[key] if key in _DEFAULT_CONFIG else _LEVEL_KEYS[key][1]
    try:
        return int(config.get(key, default))
    except ValueError:
        return int(default)


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
        return BrokerSet(self.cluster_name, self.broker_name, self.next_assign_broker_id,
                         dict(self.brokers), self.master_broker_id, self.master_epoch, self.sync_state_set,
                         self.sync_state_set_epoch, None if self.options is None else dict(self.options),
                         self.last_master_broker_id)

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
                int(bid): BrokerInfo(str(b["address"]), str(b["register_check_code"]),
                                     int(b.get("broker_epoch", 0)))
                for bid, b in d.get("brokers", {}).items()
            },
            master_broker_id=None if master is None else int(master),
            master_epoch=int(d.get("master_epoch", 0)),
            sync_state_set=_members(int(x) for x in d.get("sync_state_set", [])),
            sync_state_set_epoch=int(d.get("sync_state_set_epoch", 0)),
            options=None if options is None else {str(k): str(v) for k, v in options.items()},
        )


def _canonical(doc: object) -> str:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"))


class History:
    """The retained decision history, oldest first. Each entry is kept as its canonical JSON text
    (what the state hash and the snapshot are made of anyway; reading an entry decodes it), in
    chunks of HISTORY_CHUNK entries: a buffer of the texts, each followed by a comma, and the
    offsets where they end. No Python object per entry: a fleet registering adds and drops
    thousands of entries, and as objects they left the allocator's pages full of holes among the
    state's own small objects. A full chunk is kept zlib-compressed (about 20x: the entries repeat
    their keys and phrases), the chunk being filled as it is. Entries never change."""

    __slots__ = ("_chunks", "_count", "_first", "_opened")

    def __init__(self, entries: Iterable[Mapping[str, Any]] = ()) -> None:
        # (compressed texts of a full chunk, or the growing texts of the last one; their ends)
        self._chunks: list[tuple[bytes | bytearray, array[int]]] = []
        self._first = 0  # entries of the first chunk trimmed away
        self._count = 0
        self._opened: tuple[bytes, bytes] = (b"", b"")  # the last full chunk read: (compressed, texts)
        for entry in entries:
            self.append(entry)

    def append(self, entry: Mapping[str, Any]) -> None:
        if not self._chunks or len(self._chunks[-1][1]) == HISTORY_CHUNK:
            if self._chunks:
                self._chunks[-1] = (zlib.compress(self._chunks[-1][0]), self._chunks[-1][1])
            self._chunks.append((bytearray(), array("q")))
        buf, ends = self._chunks[-1]
        assert isinstance(buf, bytearray)
        buf += _canonical(entry).encode("ascii")  # json.dumps escapes everything else
        buf += b","
        ends.append(len(buf))
        self._count += 1

    def trim(self, keep: int) -> None:
        """Keep the newest `keep` entries."""
        drop = self._count - max(0, keep)
        while drop > 0:
            left = len(self._chunks[0][1]) - self._first
            if drop < left:
                self._first += drop
                self._count -= drop
                return
            self._chunks.pop(0)
            self._first = 0
            self._count -= left
            drop -= left

    def _chunk(self, n: int) -> tuple[bytes | bytearray, array[int]]:
        """Chunk n's texts, decompressed, and their ends."""
        buf, ends = self._chunks[n]
        if isinstance(buf, bytearray):
            return buf, ends
        opened = self._opened
        if opened[0] is not buf:
            opened = self._opened = (buf, zlib.decompress(buf))
        return opened[1], ends

    def _text(self, i: int) -> str:
        at = i + self._first
        buf, ends = self._chunk(at // HISTORY_CHUNK)
        k = at % HISTORY_CHUNK
        return buf[ends[k - 1] if k else 0:ends[k] - 1].decode("ascii")

    def _texts(self) -> Iterator[str]:
        return (self._text(i) for i in range(self._count))

    def json_parts(self) -> Iterator[str]:
        """The JSON array of the entries, in pieces (a chunk a piece)."""
        yield "["
        last = len(self._chunks) - 1
        for n in range(len(self._chunks)):
            buf, ends = self._chunk(n)
            start = ends[self._first - 1] if n == 0 and self._first else 0
            yield buf[start:len(buf) - (n == last)].decode("ascii")  # no comma after the last
        yield "]"

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, i: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, i: slice) -> list[dict[str, Any]]: ...
    def __getitem__(self, i: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(i, slice):
            return [json.loads(self._text(k)) for k in range(*i.indices(self._count))]
        if not -self._count <= i < self._count:
            raise IndexError("history index out of range")
        return json.loads(self._text(i % self._count))  # type: ignore[no-any-return]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (json.loads(t) for t in self._texts())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, History):
            return list(other._texts()) == list(self._texts())
        if isinstance(other, list):
            return list(self) == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"History({self._count} entries)"


# Stand-ins spliced out of the canonical JSON text (ControllerState.canonical_json): control
# characters, which json escapes, so no name or value of the state can be mistaken for them.
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
        return self._doc({name: bs.to_dict() for name, bs in sorted(self.broker_sets.items())},
                         list(self.history))

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
            raise SnapshotVersionError(f"controller snapshot version {version!r} is not one this node reads "
                                       f"(1..{SNAPSHOT_VERSION}): upgrade this node")
        st = cls()
        level = d.get("feature_level", 1)
        if not isinstance(level, int) or level not in FEATURE_LEVELS:
            raise SnapshotVersionError(f"controller snapshot is at feature level {level!r}, this node speaks "
                                       f"1..{MAX_FEATURE_LEVEL}: upgrade this node")
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
                raise InconsistentRecord(f"broker set {r.broker_name!r} does not exist; a new one starts "
                                         f"with id {FIRST_BROKER_CONTROLLER_ID}, not {r.new_broker_id}")
            bs = BrokerSet(cluster_name=r.cluster_name, broker_name=r.broker_name)
            bs.add_broker(r.new_broker_id, r.broker_address, r.register_check_code)
            self.broker_sets[r.broker_name] = bs
            return
        info = bs.brokers.get(r.new_broker_id)
        if info is None:
            bs.add_broker(r.new_broker_id, r.broker_address, r.register_check_code)
        elif info.register_check_code != r.register_check_code:
            raise InconsistentRecord(f"broker id {r.new_broker_id} of {r.broker_name!r} is already bound to "
                                     "another registerCheckCode")

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
            raise InconsistentRecord(f"master {new_master} elected for {r.broker_name!r} is not one of its "
                                     f"brokers {sorted(bs.brokers)}")
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
            raise InconsistentRecord(f"{type(what).__name__} for broker id {broker_id} of "
                                     f"{bs.broker_name!r}, which is not registered")
        return info

    def _apply_broker_address_updated(self, r: BrokerAddressUpdated) -> None:
        bs = self._set(r.broker_name, r)
        info = self._broker(bs, r.broker_id, r)
        bs.brokers[r.broker_id] = BrokerInfo(r.broker_address, info.register_check_code, info.broker_epoch)

    def _apply_broker_registered(self, r: BrokerRegistered) -> None:
        bs = self._set(r.broker_name, r)
        info = self._broker(bs, r.broker_id, r)
        if r.broker_epoch <= self.broker_epoch:
            raise InconsistentRecord(f"brokerEpoch {r.broker_epoch} is not above the last one handed out "
                                     f"({self.broker_epoch})")
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
            raise InconsistentRecord(f"{type(r).__name__} needs feature level {r.LEVEL}; the group is at "
                                     f"{self.feature_level}")

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
            raise InconsistentRecord(f"feature level {r.level} is below the group's {self.feature_level}: "
                                     "it is never lowered")
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


# --------------------------------------------------------------------------------------------
# Request validation (mqctl additions: RocketMQ lets these through or fails with an NPE)


class _Reject(Exception):
    def __init__(self, code: int, remark: str, response: dict[str, Any] | None = None) -> None:
        super().__init__(remark)
        self.code = int(code)
        self.remark = remark
        self.response = response or {}


def _invalid(remark: str) -> _Reject:
    return _Reject(Code.CONTROLLER_INVALID_REQUEST, remark)


def _str(req: Mapping[str, Any], key: str, *, required: bool = False, max_len: int = MAX_NAME_LEN) -> str:
    v = req.get(key)
    if v is None:
        v = ""
    if not isinstance(v, str):
        raise _invalid(f"Invalid request: {key} must be a string")
    if len(v) > max_len:
        raise _invalid(f"Invalid request: {key} is longer than {max_len} characters")
    if required and not v.strip():
        raise _invalid(f"Invalid request: {key} is empty")
    return v


def _int(req: Mapping[str, Any], key: str, *, required: bool = False,
         lo: int = 0, hi: int = MAX_ID) -> int | None:
    v = req.get(key)
    if v is None:
        if required:
            raise _invalid(f"Invalid request: {key} is missing")
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise _invalid(f"Invalid request: {key} must be an integer")
    if not lo <= v <= hi:
        raise _invalid(f"Invalid request: {key} {v} is out of range [{lo}, {hi}]")
    return v


def _req_int(req: Mapping[str, Any], key: str, *, lo: int = 0, hi: int = MAX_ID) -> int:
    v = _int(req, key, required=True, lo=lo, hi=hi)
    assert v is not None
    return v


def _bool(req: Mapping[str, Any], key: str) -> bool:
    v = req.get(key)
    if v is None:
        return False
    if not isinstance(v, bool):
        raise _invalid(f"Invalid request: {key} must be a boolean")
    return v


def _str_map(req: Mapping[str, Any], key: str) -> dict[str, str]:
    v = req.get(key)
    if v is None:
        return {}
    if not isinstance(v, Mapping):
        raise _invalid(f"Invalid request: {key} must be a map of strings")
    out: dict[str, str] = {}
    for k, x in v.items():
        if not isinstance(k, str) or not isinstance(x, str):
            raise _invalid(f"Invalid request: {key} must be a map of strings")
        if not k or len(k) > MAX_NAME_LEN or len(x) > MAX_OPTION_VALUE_LEN:
            raise _invalid(f"Invalid request: {key} has an empty or too long key or value")
        out[k] = x
    return out


def _id_list(req: Mapping[str, Any], key: str) -> list[int]:
    v = req.get(key)
    if v is None:
        return []
    if not isinstance(v, list | tuple | set | frozenset):
        raise _invalid(f"Invalid request: {key} must be a list of broker ids")
    out: set[int] = set()
    for x in v:
        if isinstance(x, bool) or not isinstance(x, int) or not 0 <= x <= MAX_ID:
            raise _invalid(f"Invalid request: {key} must be a list of broker ids in [0, {MAX_ID}]")
        out.add(x)
    return sorted(out)


def _id(req: Mapping[str, Any], key: str) -> int:
    return _req_int(req, key, lo=0, hi=MAX_ID)


def _opt_broker_epoch(req: Mapping[str, Any]) -> int | None:
    return _int(req, "broker_epoch", lo=0, hi=MAX_ID)


def _check_broker_epoch(bs: BrokerSet, broker_id: int, request_epoch: int | None) -> None:
    """mqctl (KIP-380): a request from an older incarnation of a broker is refused."""
    if request_epoch is None:
        return
    info = bs.brokers.get(broker_id)
    if info is None:
        return
    if request_epoch < info.broker_epoch:
        raise _Reject(
            Code.STALE_BROKER_EPOCH,
            f"Stale brokerEpoch {request_epoch} for broker {broker_id} in broker-set {bs.broker_name}, "
            f"registered brokerEpoch is {info.broker_epoch}",
        )


def _java(value: object) -> str:
    """A value as Java's String.format prints it (null for None)."""
    return "null" if value is None else str(value)


def _sync_state_set_body(ids: Iterable[int], epoch: int) -> dict[str, Any]:
    return {"sync_state_set": sorted(ids), "sync_state_set_epoch": epoch}




# --------------------------------------------------------------------------------------------
# Handlers


def _get_next_broker_id(state: ControllerState, req: Mapping[str, Any], ctx: Context) -> Result:
    cluster = _str(req, "cluster_name")
    name = _str(req, "broker_name", required=True)
    bs = state.broker_sets.get(name)
    next_id = FIRST_BROKER_CONTROLLER_ID if bs is None else bs.next_assign_broker_id
    return Result(Code.SUCCESS, "", {"cluster_name": cluster, "broker_name": name, "next_broker_id": next_id})


def _apply_broker_id(state: ControllerState, req: Mapping[str, Any], ctx: Context) -> Result:
    cluster = _str(req, "cluster_name", required=True)
    name = _str(req, "broker_name", required=True)
    bid = _id(req, "applied_broker_id")
    code = _str(req, "register_check_code", required=True, max_len=2 * MAX_NAME_LEN)
    address = code.split(";")[0]
    if not address.strip():
        # mqctl: RocketMQ stores an empty address (a code of " ;1"), or fails with SYSTEM_ERROR 1 (a code
        # of only ';': Java's split leaves no element 0); a broker without an address cannot be reached
        raise _invalid(f"Invalid request: register_check_code {code!r} has no broker address before "
                       "its first ';' (expected <brokerAddr>;<timestamp>)")
    response = {"cluster_name": cluster, "broker_name": name}
    record = BrokerIdApplied(cluster_name=cluster, broker_name=name, new_broker_id=bid,
                             broker_address=address, register_check_code=code)
    bs = state.broker_sets.get(name)
    if bs is None:
        if bid != FIRST_BROKER_CONTROLLER_ID:
            raise _Reject(
                Code.CONTROLLER_BROKER_ID_INVALID,
                f"Broker-set: {name} hasn't been registered in controller, but broker try to apply "
                f"brokerId: {bid}",
                response,
            )
        return Result(Code.SUCCESS, "", response, [record])
    info = bs.brokers.get(bid)
    if info is None:
        return Result(Code.SUCCESS, "", response, [record])
    if info.register_check_code == code:
        return Result(Code.SUCCESS, "", response)  # the same broker again: nothing changes
    raise _Reject(Code.CONTROLLER_BROKER_ID_INVALID, f"Fail to apply brokerId: {bid} in broker-set: {name}",
                  response)


def _options_diff(recorded: Mapping[str, str], requested: Mapping[str, str]) -> list[str]:
    diffs = []
    for key in sorted(set(recorded) | set(requested)):
        a, b = recorded.get(key), requested.get(key)
        if a != b:
            shown_a = "<absent>" if a is None else repr(a)
            shown_b = "<absent>" if b is None else repr(b)
            diffs.append(f"{key} (broker-set: {shown_a}, request: {shown_b})")
    return diffs


def _register_broker(state: ControllerState, req: Mapping[str, Any], ctx: Context) -> Result:
    cluster = _str(req, "cluster_name", required=True)
    name = _str(req, "broker_name", required=True)
    bid = _id(req, "broker_id")
    address = _str(req, "broker_address", required=True)
    epoch = _int(req, "epoch", lo=INT32_MIN, hi=INT32_MAX)
    max_offset = _int(req, "max_offset", lo=INT64_MIN, hi=INT64_MAX)
    _int(req, "confirm_offset", lo=INT64_MIN, hi=INT64_MAX)
    priority = _int(req, "election_priority", lo=INT32_MIN, hi=INT32_MAX)
    _int(req, "heartbeat_timeout_mills", lo=1, hi=INT64_MAX)
    options = _str_map(req, "options")

    names = {"cluster_name": cluster, "broker_name": name}  # RocketMQ's header is built before any check
    bs = state.broker_sets.get(name)
    if bs is None:
        raise _Reject(Code.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                      f"Broker-set: {name} hasn't been registered in controller", names)
    info = bs.brokers.get(bid)
    if info is None:
        raise _Reject(Code.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                      f"BrokerId: {bid} hasn't been registered in broker-set: {name}", names)
    records: list[Record] = []
    if options and bs.options is not None:
        diffs = _options_diff(bs.options, options)
        if diffs:
            raise _Reject(Code.INCONSISTENT_BROKER_OPTIONS,
                          f"Broker options of broker {bid} differ from broker-set {name}: "
                          + ", ".join(diffs))
    if info.address != address:
        records.append(BrokerAddressUpdated(cluster, name, bid, address))
    new_broker_epoch = state.broker_epoch + 1
    records.append(BrokerRegistered(cluster, name, bid, new_broker_epoch))
    if options and bs.options is None:
        records.append(BrokerOptionsSet(name, dict(sorted(options.items()))))

    response: dict[str, Any] = {"cluster_name": cluster, "broker_name": name,
                                "broker_epoch": new_broker_epoch}
    master = bs.master_broker_id
    ss_set, ss_epoch = set(bs.sync_state_set), bs.sync_state_set_epoch
    master_epoch = bs.master_epoch

    # mqctl: a bounced master (re-registers while its old heartbeat row is still alive) does not keep
    # the role by default: the alive SyncStateSet members compete with what it reports now (not while
    # failover is paused).
    if master == bid and ctx.is_alive(name, bid) and state.pause_of(name) is None:
        me = LiveInfo(
            broker_id=bid,
            broker_address=address,
            epoch=-1 if epoch is None else epoch,
            max_offset=-1 if max_offset is None else max_offset,
            election_priority=DEFAULT_ELECTION_PRIORITY if priority is None else priority,
        )
        live: dict[int, LiveInfo] = dict(ctx.rows(name))
        live[bid] = me
        candidates = {b for b in bs.sync_state_set if b != bid and ctx.is_alive(name, b)} | {bid}
        winner = election.freshest(candidates, live)
        if winner is not None and winner != bid:
            records.append(MasterElected(name, winner))
            master, master_epoch = winner, bs.master_epoch + 1
            ss_set, ss_epoch = {winner}, bs.sync_state_set_epoch + 1

    if master is not None and ctx.is_alive(name, master):
        response.update({
            "master_broker_id": master,
            "master_address": bs.address_of(master) if master != bid else address,
            "master_epoch": master_epoch,
            "sync_state_set_epoch": ss_epoch,
        })
    response["sync_state_set"] = _sync_state_set_body(ss_set, ss_epoch)
    return Result(Code.SUCCESS, "", response, records)


def _heartbeat(state: ControllerState, req: Mapping[str, Any], ctx: Context) -> Result:
    if req.get("broker_id") is None:
        raise _invalid("Heart beat with empty brokerId")
    _str(req, "cluster_name")
    _str(req, "broker_addr")
    name = _str(req, "broker_name", required=True)
    bid = _id(req, "broker_id")
    _int(req, "epoch", lo=INT32_MIN, hi=INT32_MAX)
    _int(req, "max_offset", lo=INT64_MIN, hi=INT64_MAX)
    _int(req, "confirm_offset", lo=INT64_MIN, hi=INT64_MAX)
    _int(req, "heartbeat_timeout_mills", lo=1, hi=INT64_MAX)
    _int(req, "election_priority", lo=INT32_MIN, hi=INT32_MAX)
    broker_epoch = _opt_broker_epoch(req)
    bs = state.broker_sets.get(name)
    if bs is not None:
        _check_broker_epoch(bs, bid, broker_epoch)
    return Result(Code.SUCCESS, "Heart beat success", {}, [])


def _alter_sync_state_set(state: ControllerState, req: Mapping[str, Any], ctx: Context) -> Result:
    name = _str(req, "broker_name", required=True)
    _str(req, "cluster_name")
    req_master = _id(req, "master_broker_id")
    req_master_epoch = _req_int(req, "master_epoch", lo=INT32_MIN, hi=INT32_MAX)
    req_ss_epoch = _req_int(req, "sync_state_set_epoch", lo=INT32_MIN, hi=INT32_MAX)
    if req.get("new_sync_state_set") is None:
        raise _invalid("Invalid request: new_sync_state_set is missing")
    new_set = _id_list(req, "new_sync_state_set")
    broker_epoch = _opt_broker_epoch(req)

    def refuse(code: int, remark: str) -> _Reject:
        # RocketMQ's AlterSyncStateSetResponseHeader.newSyncStateSetEpoch is an int: 0 in a refusal
        return _Reject(code, "Rejecting alter syncStateSet request because " + remark,
                       {"new_sync_state_set_epoch": 0})

    fail = Code.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED
    bs = state.broker_sets.get(name)
    if bs is None:
        raise _Reject(fail, "Broker metadata is not existed", {"new_sync_state_set_epoch": 0})
    if set(new_set) == bs.sync_state_set:
        raise _Reject(fail, "The newSyncStateSet is equal with oldSyncStateSet, "
                            "no needed to update syncStateSet", {"new_sync_state_set_epoch": 0})
    # RocketMQ's remarks (ReplicasInfoManager.alterSyncStateSet) put the values in braces
    if bs.master_broker_id is None or bs.master_broker_id != req_master:
        raise refuse(Code.CONTROLLER_INVALID_MASTER,
                     f"the current leader is:{{{_java(bs.master_broker_id)}}}, not {{{req_master}}}")
    _check_broker_epoch(bs, req_master, broker_epoch)
    if req_master_epoch != bs.master_epoch:
        raise refuse(Code.CONTROLLER_FENCED_MASTER_EPOCH,
                     f"the current master epoch is:{{{bs.master_epoch}}}, not {{{req_master_epoch}}}")
    if req_ss_epoch != bs.sync_state_set_epoch:
        raise refuse(Code.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
                     f"the current syncStateSet epoch is:{{{bs.sync_state_set_epoch}}}, "
                     f"not {{{req_ss_epoch}}}")
    for replica in new_set:  # ascending (mqctl; RocketMQ: a HashSet's order), the same answer everywhere
        if replica not in bs.brokers:
            raise refuse(Code.CONTROLLER_INVALID_REPLICAS, f"the replicas {{{replica}}} don't exist")
        if not ctx.is_alive(name, replica):
            raise refuse(Code.CONTROLLER_BROKER_NOT_ALIVE, f"the replicas {{{replica}}} don't alive")
    if bs.master_broker_id not in new_set:
        raise refuse(fail, "the newSyncStateSet don't contains origin leader "
                           f"{{{_java(bs.master_broker_id)}}}")
    new_epoch = bs.sync_state_set_epoch + 1
    return Result(
        Code.SUCCESS, "",
        {"new_sync_state_set_epoch": new_epoch, "sync_state_set": _sync_state_set_body(new_set, new_epoch)},
        [SyncStateSetAltered(name, tuple(sorted(new_set)))],
    )


def _elect_master(state: ControllerState, req: Mapping[str, Any], ctx: Context) -> Result:
    _str(req, "cluster_name")
    name = _str(req, "broker_name", required=True)
    designate = _bool(req, "designate_elect")
    raw_id = _int(req, "broker_id", lo=-1, hi=MAX_ID)
    broker_id = None if raw_id is None or raw_id == -1 else raw_id
    if designate and broker_id is None:
        raise _invalid("Invalid request: broker_id is required when designate_elect is true")
    controller_trigger = broker_id is None
    broker_epoch = _opt_broker_epoch(req)

    bs = state.broker_sets.get(name)
    if bs is None:
        raise _Reject(Code.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, "Broker hasn't been registered")
    if not designate and broker_id is not None:
        _check_broker_epoch(bs, broker_id, broker_epoch)
    pause = state.pause_of(name)
    if pause is not None and not designate:
        # mqctl: `mqctl failover pause`; an operator's designated election (electMaster -b) still works
        raise _Reject(Code.CONTROLLER_ELECT_MASTER_FAILED, _paused_text(name, pause))

    def is_alive(b: int) -> bool:
        return ctx.is_alive(name, b)

    live = ctx.rows(name)
    all_replicas = set(bs.brokers) if state.cfg_bool("enableElectUncleanMaster") else None
    old_master = bs.master_broker_id
    new_master: int | None = None
    if bs.master_epoch == 0:  # isFirstTimeForElect
        wait_for = state.cfg_int("waitFor")
        if wait_for > 1 and not designate:
            alive = [b for b in bs.brokers if is_alive(b)]
            if len(alive) < wait_for:
                raise _Reject(Code.WAITING_FOR_REPLICAS,
                              f"waiting for {wait_for} replicas ({len(alive)}/{wait_for})")
            new_master = election.freshest(alive, live)
        else:
            if broker_id is not None and broker_id not in bs.brokers:
                # mqctl: RocketMQ elects any id the first time, even an unregistered one
                # (a master without an address); refuse it like RegisterBroker does.
                raise _Reject(Code.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                              f"BrokerId: {broker_id} hasn't been registered in broker-set: {name}")
            new_master = broker_id
    if new_master is None:
        new_master = election.elect(bs.sync_state_set, all_replicas, old_master,
                                    broker_id if designate else None, is_alive, live)

    if new_master is not None and new_master == old_master:
        raise _Reject(
            Code.CONTROLLER_MASTER_STILL_EXIST,
            f"The old master {old_master} is still alive, not need to elect new master for broker {name}",
            {
                "master_broker_id": old_master,
                "master_address": bs.address_of(old_master),
                "master_epoch": bs.master_epoch,
                "sync_state_set_epoch": bs.sync_state_set_epoch,
                "sync_state_set": sorted(bs.sync_state_set),
            },
        )
    if new_master is not None:
        return Result(
            Code.SUCCESS, "",
            {
                "master_broker_id": new_master,
                "master_address": bs.address_of(new_master),
                "master_epoch": bs.master_epoch + 1,
                "sync_state_set_epoch": bs.sync_state_set_epoch + 1,
                "sync_state_set": [new_master],
                "broker_member_group": {
                    "cluster": bs.cluster_name,
                    "broker_name": name,
                    "broker_addrs": {b: i.address for b, i in sorted(bs.brokers.items())},
                },
            },
            [MasterElected(name, new_master)],
        )
    if controller_trigger:
        # mqctl: before the first master (masterEpoch 0) there is nothing to clear; RocketMQ's
        # ElectMaster(false) would bump masterEpoch and so disable the brokers' first election.
        records: list[Record] = [] if bs.master_epoch == 0 else [MasterElected(name, None)]
        return Result(Code.CONTROLLER_MASTER_NOT_AVAILABLE,
                      "Old master has down and failed to elect a new broker master", {}, records)
    raise _Reject(Code.CONTROLLER_ELECT_MASTER_FAILED, "Failed to elect a new master")


def _get_replica_info(state: ControllerState, req: Mapping[str, Any], ctx: Context) -> Result:
    name = _str(req, "broker_name", required=True)
    bs = state.broker_sets.get(name)
    if bs is None:
        raise _Reject(Code.CONTROLLER_BROKER_METADATA_NOT_EXIST, "Broker metadata is not existed")
    response: dict[str, Any] = {
        "master_address": bs.address_of(bs.master_broker_id),
        "master_epoch": bs.master_epoch,
        "sync_state_set": _sync_state_set_body(bs.sync_state_set, bs.sync_state_set_epoch),
    }
    if bs.master_broker_id is not None:
        response["master_broker_id"] = bs.master_broker_id
    return Result(Code.SUCCESS, "", response)


def _replica_identity(bs: BrokerSet, broker_id: int, ctx: Context) -> dict[str, Any]:
    info = bs.brokers[broker_id]
    out: dict[str, Any] = {
        "broker_name": bs.broker_name,
        "broker_id": broker_id,
        "broker_address": info.address,
        "alive": ctx.is_alive(bs.broker_name, broker_id),
        "broker_epoch": info.broker_epoch,
    }
    row = ctx.row(bs.broker_name, broker_id)
    if row is not None:
        out.update({
            "heartbeat_age_ms": ctx.now_ms - row.last_heartbeat_ms,
            "epoch": row.epoch,
            "max_offset": row.max_offset,
            "confirm_offset": row.confirm_offset,
            "election_priority": row.election_priority,
        })
    return out


def _get_sync_state_data(state: ControllerState, req: Mapping[str, Any], ctx: Context) -> Result:
    names = req.get("broker_names")
    if names is None:
        names = []
    if not isinstance(names, list | tuple) or not all(isinstance(n, str) for n in names):
        raise _invalid("Invalid request: broker_names must be a list of strings")
    wanted = sorted(set(names)) if names else sorted(state.broker_sets)
    table: dict[str, Any] = {}
    for name in wanted:
        bs = state.broker_sets.get(name)
        if bs is None:
            continue  # RocketMQ: unknown names are silently omitted
        info: dict[str, Any] = {
            "master_address": bs.address_of(bs.master_broker_id),
            "master_epoch": bs.master_epoch,
            "sync_state_set_epoch": bs.sync_state_set_epoch,
            "in_sync_replicas": [_replica_identity(bs, b, ctx) for b in sorted(bs.brokers)
                                 if b in bs.sync_state_set],
            "not_in_sync_replicas": [_replica_identity(bs, b, ctx) for b in sorted(bs.brokers)
                                     if b not in bs.sync_state_set],
            "cluster_name": bs.cluster_name,
        }
        if bs.master_broker_id is not None:
            info["master_broker_id"] = bs.master_broker_id
        pause = state.pause_of(name)
        if pause is not None:
            info["failover_paused"] = True
            info["failover_pause_reason"] = str(pause.get("reason", ""))
        table[name] = info
    return Result(Code.SUCCESS, "", {"replicas_info_table": table})


_JAVA_LONG_RE = re.compile(r"^[+-]?[0-9]+$")


def _parse_clean_ids(text: str) -> list[int]:
    """Java `split(";")` + Long.parseLong, with Java's exception text."""
    parts = text.split(";")
    while parts and parts[-1] == "":  # Java's split drops trailing empty strings
        parts.pop()
    ids: set[int] = set()
    for part in parts:
        if not _JAVA_LONG_RE.match(part) or not INT64_MIN <= int(part) <= INT64_MAX:
            raise _Reject(Code.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                          "Please set the option <brokerControllerIdsToClean> according to the format, "
                          f'exception: java.lang.NumberFormatException: For input string: "{part}"')
        n = int(part)
        if not 0 <= n <= MAX_ID:
            raise _invalid(f"Invalid request: broker_controller_ids_to_clean id {n} is out of range "
                           f"[0, {MAX_ID}]")
        ids.add(n)
    return sorted(ids)


def _clean_broker_data(state: ControllerState, req: Mapping[str, Any], ctx: Context) -> Result:
    _str(req, "cluster_name")
    name = _str(req, "broker_name", required=True)
    ids_text = _str(req, "broker_controller_ids_to_clean", max_len=64 * 1024)
    clean_living = _bool(req, "is_clean_living_broker")
    bad = Code.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
    bs = state.broker_sets.get(name)
    ids: list[int] | None = None
    if not clean_living:
        if not ids_text.strip():
            if bs is not None and bs.master_broker_id is not None:
                raise _Reject(bad, f"Broker {name} is still alive, clean up failure")
        else:
            ids = _parse_clean_ids(ids_text)
            for bid in ids:
                if ctx.is_alive(name, bid):
                    raise _Reject(bad, f"Broker [{name},  {bid}] is still alive, clean up failure")
    if bs is None:
        raise _Reject(bad, f"Broker {name} is not existed,clean broker data failure.")
    return Result(Code.SUCCESS, "", {},
                  [BrokerDataCleaned(name, tuple(ids) if ids else None)])


def _get_config(state: ControllerState, req: Mapping[str, Any], ctx: Context) -> Result:
    """RocketMQ's keys with their defaults, the replicated config over them, and mqctlNotHonoured;
    the node adds NODE_CONFIG_KEYS."""
    config = {**ROCKETMQ_CONFIG, **{k: v for k, (_, v) in _LEVEL_KEYS.items()}, **state.config,
              NOT_HONOURED_KEY: ";".join(NOT_HONOURED_CONFIG_KEYS)}
    return Result(Code.SUCCESS, "", {"config": dict(sorted(config.items()))})


def _update_config(state: ControllerState, req: Mapping[str, Any], ctx: Context) -> Result:
    raw = req.get("config")
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping) or not all(isinstance(k, str) for k in raw):
        raise _invalid("Invalid request: config must be a map of strings")
    for key in sorted(raw):
        if not isinstance(raw[key], str):
            raise _invalid(f"Invalid request: the value of config {key} must be a string")
    if any(k in CONFIG_BLACKLIST for k in raw):
        raise _Reject(Code.NO_PERMISSION, "Can not update config in black list.")
    # RocketMQ's Configuration.update merges only the keys it has (mergeIfExist) and answers SUCCESS;
    # mqctl also leaves alone the keys it does not honour. Both are answered in `ignored_config`
    # (key -> why) for the node to log; only honoured keys reach the record.
    updates: dict[str, str] = {}
    ignored: dict[str, str] = {}
    for key in sorted(raw):
        if key in _LEVEL_KEYS and state.feature_level < _LEVEL_KEYS[key][0]:
            raise _needs_level(f"config {key}", _LEVEL_KEYS[key][0], state)
        if key in HONOURED_CONFIG_KEYS:
            try:
                updates[key] = _normalize_config_value(key, raw[key])
            except ValueError as e:
                raise _invalid(f"Invalid request: {e}") from None
        elif key in _MQCTL_NODE_KEYS:
            ignored[key] = "set when the node starts"
        elif key == NOT_HONOURED_KEY:
            ignored[key] = "read only"
        elif key in NOT_HONOURED_CONFIG_KEYS:
            ignored[key] = "not honoured by mqctl"
        else:
            ignored[key] = "unknown key"
    response: dict[str, Any] = {"ignored_config": ignored} if ignored else {}
    if not updates:
        return Result(Code.SUCCESS, "", response)
    return Result(Code.SUCCESS, "", response, [ConfigUpdated(updates)])


# --------------------------------------------------------------------------------------------
# Operator decisions (mqctl extensions, feature level 3 where they write new records)


def _paused_text(broker_name: str, pause: Mapping[str, Any]) -> str:
    reason = str(pause.get("reason") or "no reason given")
    return (f"automatic failover of {broker_name} is paused ({reason}): `mqctl failover resume`, or elect "
            "a master with `mqctl electMaster -b ID`")


def _needs_level(what: str, level: int, state: ControllerState) -> _Reject:
    return _Reject(Code.FEATURE_LEVEL_TOO_LOW,
                   f"{what} needs feature level {level}; the group is at {state.feature_level}: raise it "
                   f"with `mqctl quorum feature-level {level}` once every node runs a release that speaks it")


HISTORY_PAGE = 500  # entries per GetHistory answer (a gRPC message stays far below 1 MiB)


def _get_history(state: ControllerState, req: Mapping[str, Any], ctx: Context) -> Result:
    """The decision history, oldest first, after `after_seq` and from `since_ms`, one page at a time."""
    name = _str(req, "broker_name")
    since = _int(req, "since_ms", lo=0, hi=INT64_MAX) or 0
    after = _int(req, "after_seq", lo=0, hi=INT64_MAX) or 0
    limit = min(_int(req, "limit", lo=0, hi=INT64_MAX) or HISTORY_PAGE, HISTORY_PAGE)
    if state.feature_level < HISTORY_LEVEL:
        raise _needs_level("the decision history", HISTORY_LEVEL, state)
    wanted = [e for e in state.history if int(e["seq"]) > after and int(e["time_ms"]) >= since
              and (not name or e.get("broker_name") == name)]
    return Result(Code.SUCCESS, "", {
        "entries": wanted[:limit],
        "more": len(wanted) > limit,
        "last_seq": state.history_seq,
        "history_max_entries": state.cfg_int("historyMaxEntries"),
        "loss_total": {n: v for n, v in sorted(state.loss_total.items()) if not name or n == name},
        "failover_paused": {(n or "*"): str(p.get("reason", ""))
                            for n, p in sorted(state.failover_paused.items())
                            if not name or n in (name, ALL_BROKER_SETS)},
    })


def _pause_failover(state: ControllerState, req: Mapping[str, Any], ctx: Context) -> Result:
    name = _str(req, "broker_name")
    paused = _bool(req, "paused")
    reason = _str(req, "reason", max_len=1024)
    if state.feature_level < HISTORY_LEVEL:
        raise _needs_level("failover pause and resume", HISTORY_LEVEL, state)
    if name and name not in state.broker_sets:
        raise _Reject(Code.CONTROLLER_BROKER_METADATA_NOT_EXIST,
                      f"broker set {name} is not known to the controller")
    scope = name or "every broker set"
    current = state.failover_paused.get(name)
    after = dict(state.failover_paused)
    if paused:
        after[name] = {"reason": reason, "since_ms": ctx.now_ms}
    else:
        after.pop(name, None)
    response = {"failover_paused": {(n or "*"): str(p.get("reason", "")) for n, p in sorted(after.items())}}
    if not paused and current is None:
        remark = f"automatic failover of {scope} was not paused"
        if name and ALL_BROKER_SETS in state.failover_paused:
            remark += " on its own; it stays paused by the pause of every broker set (resume without -b)"
        return Result(Code.SUCCESS, remark, response)
    if paused and current is not None and current.get("reason") == reason:
        return Result(Code.SUCCESS, f"automatic failover of {scope} was already paused", response)
    remark = f"automatic failover of {scope} {'paused' if paused else 'resumed'}"
    if not paused and name and ALL_BROKER_SETS in state.failover_paused:
        remark += "; it stays paused by the pause of every broker set (resume without -b)"
    return Result(Code.SUCCESS, remark, response, [FailoverPauseSet(name, paused, reason, ctx.now_ms)])


def _switchover_plan(bs: BrokerSet, ctx: Context, target: int | None) -> dict[str, Any]:
    """Where a switchover of `bs` moves the master and how far the new one is behind (from the
    heartbeats' maxOffset); raises _Reject when there is nowhere to move it."""
    name, master = bs.broker_name, bs.master_broker_id
    if master is None or not ctx.is_alive(name, master):
        raise _Reject(Code.CONTROLLER_MASTER_NOT_AVAILABLE,
                      f"{name} has no alive master: nothing to switch over (the controller elects one on its "
                      "own, or `mqctl electMaster`)")
    if target is None:
        candidates = {b for b in bs.sync_state_set if b != master and ctx.is_alive(name, b)}
        target = election.freshest(candidates, ctx.rows(name))
        if target is None:
            raise _Reject(Code.CONTROLLER_ELECT_MASTER_FAILED,
                          f"{name} has no alive SyncStateSet member besides the master {master} "
                          f"(SyncStateSet {sorted(bs.sync_state_set)})")
    elif target == master:
        raise _Reject(Code.CONTROLLER_MASTER_STILL_EXIST, f"broker {target} is already the master of {name}",
                      {"new_master_broker_id": target, "old_master_broker_id": master})
    elif target not in bs.brokers:
        raise _Reject(Code.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                      f"BrokerId: {target} hasn't been registered in broker-set: {name}")
    elif not ctx.is_alive(name, target):
        raise _Reject(Code.CONTROLLER_BROKER_NOT_ALIVE, f"broker {target} of {name} is not alive")
    elif target not in bs.sync_state_set:
        raise _Reject(Code.CONTROLLER_INVALID_REPLICAS,
                      f"broker {target} is not in the SyncStateSet {sorted(bs.sync_state_set)} of {name}: a "
                      "switchover stays inside it (`mqctl electMaster --accept-data-loss` otherwise)")
    master_row, target_row = ctx.row(name, master), ctx.row(name, target)
    master_offset = master_row.max_offset if master_row is not None else -1
    target_offset = target_row.max_offset if target_row is not None else -1
    known = master_offset >= 0 and target_offset >= 0
    plan: dict[str, Any] = {
        "broker_name": name, "old_master_broker_id": master, "new_master_broker_id": target,
        "master_max_offset": master_offset, "candidate_max_offset": target_offset,
        "caught_up": known and target_offset >= master_offset, "master_epoch": bs.master_epoch,
    }
    if known:
        plan["gap_bytes"] = max(0, master_offset - target_offset)
    return plan


def _not_caught_up(plan: Mapping[str, Any]) -> str:
    gap = plan.get("gap_bytes")
    behind = (f"{gap} bytes behind" if gap is not None else
              "of unknown offset (no maxOffset in its heartbeats)")
    return (f"broker {plan['new_master_broker_id']} of {plan['broker_name']} is {behind}: maxOffset "
            f"{plan['candidate_max_offset']}, the master {plan['old_master_broker_id']} has "
            f"{plan['master_max_offset']}; wait (--timeout) or force it (--force: it may lose those bytes)")


def _switchover(state: ControllerState, req: Mapping[str, Any], ctx: Context) -> Result:
    name = _str(req, "broker_name", required=True)
    target = _int(req, "broker_id", lo=0, hi=MAX_ID)
    force, dry_run = _bool(req, "force"), _bool(req, "dry_run")
    bs = state.broker_sets.get(name)
    if bs is None:
        raise _Reject(Code.CONTROLLER_BROKER_METADATA_NOT_EXIST, "Broker metadata is not existed")
    plan = _switchover_plan(bs, ctx, target)
    if not plan["caught_up"] and not force:
        raise _Reject(Code.NOT_CAUGHT_UP, _not_caught_up(plan), plan)
    if dry_run:
        return Result(Code.SUCCESS, "dry run: nothing changed", {**plan, "dry_run": True})
    return Result(Code.SUCCESS, "", {**plan, "master_epoch": bs.master_epoch + 1},
                  [MasterElected(name, plan["new_master_broker_id"])])


def preferred_replica(bs: BrokerSet, ctx: Context) -> int | None:
    """Kafka's preferred leader: the highest election priority (the lowest number, from the
    heartbeats), then the lowest broker id, among every registered replica."""
    def key(b: int) -> tuple[int, int]:
        row = ctx.row(bs.broker_name, b)
        return (row.election_priority if row is not None else DEFAULT_ELECTION_PRIORITY, b)

    return min(bs.brokers, key=key) if bs.brokers else None


def _rebalance(state: ControllerState, req: Mapping[str, Any], ctx: Context) -> Result:
    """A switchover to the preferred replica of every broker set (of a cluster) where it is an alive,
    caught-up SyncStateSet member but not the master; the others are listed with the reason."""
    cluster = _str(req, "cluster_name")
    dry_run = _bool(req, "dry_run")
    sets = [bs for _, bs in sorted(state.broker_sets.items()) if not cluster or bs.cluster_name == cluster]
    if cluster and not sets:
        raise _Reject(Code.CONTROLLER_BROKER_METADATA_NOT_EXIST, f"cluster {cluster} has no broker set")
    moves: list[dict[str, Any]] = []
    records: list[Record] = []
    for bs in sets:
        preferred = preferred_replica(bs, ctx)
        move: dict[str, Any] = {"broker_name": bs.broker_name, "cluster_name": bs.cluster_name}
        if bs.master_broker_id is not None:
            move["master_broker_id"] = bs.master_broker_id
        if preferred is not None:
            move["preferred_broker_id"] = preferred
        pause = state.pause_of(bs.broker_name)
        if preferred is None or preferred == bs.master_broker_id:
            move["action"], move["reason"] = "none", "the preferred replica is the master"
        elif pause is not None:
            move["action"], move["reason"] = "skip", f"failover paused ({pause.get('reason') or 'no reason'})"
        elif not ctx.is_alive(bs.broker_name, preferred) or preferred not in bs.sync_state_set:
            move["action"] = "skip"
            move["reason"] = "the preferred replica is not an alive SyncStateSet member"
        else:
            try:
                plan = _switchover_plan(bs, ctx, preferred)
            except _Reject as r:
                move["action"], move["reason"] = "skip", r.remark
            else:
                move.update({k: plan[k] for k in ("master_max_offset", "candidate_max_offset") if k in plan})
                if plan.get("gap_bytes") is not None:
                    move["gap_bytes"] = plan["gap_bytes"]
                if plan["caught_up"]:
                    move["action"], move["reason"] = "move", "the preferred replica has caught up"
                    records.append(MasterElected(bs.broker_name, preferred))
                else:
                    move["action"], move["reason"] = "skip", _not_caught_up(plan)
        moves.append(move)
    return Result(Code.SUCCESS, "dry run: nothing changed" if dry_run else "",
                  {"moves": moves, "dry_run": dry_run}, [] if dry_run else records)


# --- the history: one entry per broker set a decision changed ------------------------------

_WHAT: dict[type, str] = {
    BrokerIdApplied: "broker id applied", BrokerAddressUpdated: "address changed",
    BrokerRegistered: "registered", BrokerOptionsSet: "options set",
    SyncStateSetAltered: "SyncStateSet altered", BrokerDataCleaned: "data cleaned",
    ConfigUpdated: "config changed",
}
_ADMIN_METHODS = frozenset({"CleanBrokerData", "UpdateConfig", "PauseFailover"})


def _cause(state: ControllerState, method: str, req: Mapping[str, Any], ctx: Context, name: str,
           records: list[Record]) -> str:
    bs = state.broker_sets.get(name)
    if method == "Switchover":
        return "switchover"
    if method == "Rebalance":
        return "rebalance"
    if method in _ADMIN_METHODS or (method == "ElectMaster" and req.get("designate_elect")):
        return "admin request"
    if method == "ElectMaster" and req.get("broker_id") in (None, -1):
        old = bs.master_broker_id if bs is not None else None
        if old is not None and not ctx.is_alive(name, old):
            return f"lease expired for broker {old}"
        return "controller (no master)" if old is None else "controller"
    if method == "RegisterBroker" and any(isinstance(r, MasterElected) for r in records):
        return f"bounced master {req.get('broker_id')}"
    for key in ("broker_id", "applied_broker_id", "master_broker_id"):
        if isinstance(req.get(key), int):
            return f"broker request (broker {req.get(key)})"
    return "broker request"


# What `_cause` says, as the few values of a metric label (mqctl_elections_total's cause).
ELECTION_CAUSES: tuple[tuple[str, str], ...] = (
    ("lease expired", "lease_expired"), ("bounced master", "bounced_master"), ("switchover", "switchover"),
    ("rebalance", "rebalance"), ("admin request", "admin"), ("controller", "controller"),
    ("broker request", "broker_request"))


def election_cause(cause: str) -> str:
    """The kind of a history entry's cause (ELECTION_CAUSES), "other" for none of them."""
    return next((kind for prefix, kind in ELECTION_CAUSES if cause.startswith(prefix)), "other")


def _why(method: str, req: Mapping[str, Any], bs: BrokerSet, new: int | None, pool: set[int],
         live: Mapping[int, LiveInfo]) -> str:
    if new is None:
        return ("no alive candidate (no SyncStateSet member alive; unclean election disabled or no "
                "replica alive)")
    if method == "ElectMaster" and req.get("designate_elect"):
        return f"designated by the admin request (electMaster -b {new})"
    if method == "Switchover" and req.get("broker_id") is not None:
        return f"the switchover's target (--to {new})"
    if method == "Rebalance":
        return "the preferred replica (highest election priority, then lowest id)"
    if method == "ElectMaster" and bs.master_epoch == 0 and isinstance(req.get("broker_id"), int) \
            and req["broker_id"] >= 0:
        return f"first election: the broker that asked ({new})"
    if bs.master_epoch == 0:
        where = "alive replica (first election, once waitFor replicas were alive)"
    elif new in bs.sync_state_set:
        where = "alive SyncStateSet member"
    else:
        where = "alive replica outside the SyncStateSet (unclean: no SyncStateSet member was alive)"
    others = pool - {new}
    runner = election.freshest(others, live)
    if runner is None:
        return f"the only {where}"
    kw, kr = election.election_key(new, live.get(new)), election.election_key(runner, live.get(runner))
    if kw[0] != kr[0]:
        by = f"higher epoch ({-kw[0]} > {-kr[0]} of broker {runner})"
    elif kw[1] != kr[1]:
        by = f"higher maxOffset ({-kw[1]} > {-kr[1]} of broker {runner})"
    elif kw[2] != kr[2]:
        by = f"higher election priority ({kw[2]} < {kr[2]} of broker {runner})"
    else:
        by = f"lower brokerId than broker {runner}"
    return f"freshest {where}: {by}"


def _election_note(state: ControllerState, bs: BrokerSet, method: str, req: Mapping[str, Any], ctx: Context,
                   record: MasterElected) -> dict[str, Any]:
    name = bs.broker_name
    live: dict[int, LiveInfo] = dict(ctx.rows(name))
    alive = {b for b in bs.brokers if ctx.is_alive(name, b)}
    if method == "RegisterBroker":  # the bounced master competes with what it reports now
        bid = int(req["broker_id"])
        live[bid] = LiveInfo(bid, epoch=_opt(req, "epoch", -1), max_offset=_opt(req, "max_offset", -1),
                             election_priority=_opt(req, "election_priority", DEFAULT_ELECTION_PRIORITY))
    old = bs.master_broker_id if bs.master_broker_id is not None else bs.last_master_broker_id
    new = record.new_master_broker_id
    if method == "RegisterBroker":
        pool = ({b for b in bs.sync_state_set if b in alive} | {int(req["broker_id"])})
    elif new is not None and new not in bs.sync_state_set:
        pool = alive
    elif method == "Switchover":
        pool = {b for b in bs.sync_state_set if b in alive} - {bs.master_broker_id}
    else:
        pool = {b for b in bs.sync_state_set if b in alive}
    candidates = []
    for b in sorted(bs.brokers):
        row = live.get(b)
        candidates.append({
            "broker_id": b, "epoch": row.epoch if row else -1, "max_offset": row.max_offset if row else -1,
            "election_priority": row.election_priority if row else DEFAULT_ELECTION_PRIORITY,
            "alive": b in alive, "in_sync_state_set": b in bs.sync_state_set,
        })
    old_row, new_row = live.get(old) if old is not None else None, live.get(new) if new is not None else None
    old_offset = old_row.max_offset if old_row is not None else -1
    new_offset = new_row.max_offset if new_row is not None else -1
    note: dict[str, Any] = {
        "candidates": candidates, "reason": _why(method, req, bs, new, pool, live),
        "unclean": new is not None and new not in bs.sync_state_set and bs.master_epoch > 0,
        "master_epoch": bs.master_epoch + 1,
        "old_master_max_offset": old_offset, "new_master_max_offset": new_offset,
    }
    if old is not None:
        note["old_master_broker_id"] = old
    if new is not None:
        note["new_master_broker_id"] = new
        if old is not None and old != new and old_offset >= 0 and new_offset >= 0:
            note["loss_bytes"] = max(0, old_offset - new_offset)
    return note


def _opt(req: Mapping[str, Any], key: str, default: int) -> int:
    v = req.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) else default


def _detail(state: ControllerState, r: Record) -> str:
    bs = state.broker_sets.get(getattr(r, "broker_name", ""))
    if isinstance(r, BrokerIdApplied):
        return f"id {r.new_broker_id} at {r.broker_address}"
    if isinstance(r, BrokerAddressUpdated):
        return f"id {r.broker_id} now at {r.broker_address}"
    if isinstance(r, BrokerRegistered):
        return f"id {r.broker_id}, brokerEpoch {r.broker_epoch}"
    if isinstance(r, BrokerOptionsSet):
        return "options " + ", ".join(f"{k}={v}" for k, v in sorted(r.options.items()))
    if isinstance(r, SyncStateSetAltered):
        epoch = (bs.sync_state_set_epoch if bs is not None else 0) + 1
        return f"SyncStateSet {list(r.new_sync_state_set)} (syncStateSetEpoch {epoch})"
    if isinstance(r, BrokerDataCleaned):
        ids = r.broker_id_set_to_clean
        return f"ids {list(ids)}" if ids else "the whole broker set"
    if isinstance(r, ConfigUpdated):
        return ", ".join(f"{k}={v}" for k, v in sorted(r.config.items()))
    if isinstance(r, MasterElected):
        epoch = (bs.master_epoch if bs is not None else 0) + 1
        if r.new_master_broker_id is None:
            return f"no master (masterEpoch {epoch})"
        return f"master {r.new_master_broker_id} (masterEpoch {epoch})"
    if isinstance(r, FailoverPauseSet):
        return r.reason
    return ""


def _history(state: ControllerState, method: str, req: Mapping[str, Any], ctx: Context,
             records: list[Record]) -> list[Record]:
    """The DecisionNoted records of a decision: one per broker set it changed ("" for config)."""
    groups: dict[str, list[Record]] = {}
    for r in records:
        if not isinstance(r, (MetaSet, FeatureLevelSet, DecisionNoted)):
            groups.setdefault(getattr(r, "broker_name", ""), []).append(r)
    notes: list[Record] = []
    for name, rs in groups.items():
        bs = state.broker_sets.get(name)
        whats: list[str] = []
        entry: dict[str, Any] = {"time_ms": ctx.now_ms, "term": ctx.term, "broker_name": name,
                                 "cluster_name": bs.cluster_name if bs is not None else
                                 str(getattr(rs[0], "cluster_name", ""))}
        for r in rs:
            if isinstance(r, MasterElected):
                whats.append("master elected" if r.new_master_elected else "master cleared")
                if bs is not None:
                    entry["election"] = _election_note(state, bs, method, req, ctx, r)
            elif isinstance(r, FailoverPauseSet):
                whats.append("failover paused" if r.paused else "failover resumed")
            else:
                whats.append(_WHAT[type(r)])
        entry["what"] = ", ".join(dict.fromkeys(whats))
        entry["detail"] = "; ".join(d for d in (_detail(state, r) for r in rs) if d)
        entry["cause"] = _cause(state, method, req, ctx, name, rs)
        notes.append(DecisionNoted(entry))
    return notes


_Handler = Callable[[ControllerState, Mapping[str, Any], Context], Result]

_HANDLERS: dict[str, _Handler] = {
    "GetNextBrokerId": _get_next_broker_id,
    "ApplyBrokerId": _apply_broker_id,
    "RegisterBroker": _register_broker,
    "Heartbeat": _heartbeat,
    "AlterSyncStateSet": _alter_sync_state_set,
    "ElectMaster": _elect_master,
    "GetReplicaInfo": _get_replica_info,
    "GetSyncStateData": _get_sync_state_data,
    "CleanBrokerData": _clean_broker_data,
    "GetConfig": _get_config,
    "UpdateConfig": _update_config,
    "GetHistory": _get_history,
    "PauseFailover": _pause_failover,
    "Switchover": _switchover,
    "Rebalance": _rebalance,
}

METHODS: tuple[str, ...] = tuple(_HANDLERS)


def needs_controller_election(state: ControllerState, broker_name: str, ctx: Context) -> bool:
    """Should the leader trigger an election for this broker set now? (RocketMQ's
    scanNeedReelectBrokerSets, run on every leader tick instead of every 5 s.)

    Never while failover is paused for the set. Yes when some registered replica is alive and: the
    master is dead; or there is no master after
    an earlier one (a SyncStateSet member, or any replica with unclean election, is alive); or, before
    the first master, `waitFor` > 1 replicas are alive (with waitFor 1 the brokers ask, as in RocketMQ).
    """
    bs = state.broker_sets.get(broker_name)
    if bs is None or state.pause_of(broker_name) is not None:
        return False
    alive = {b for b in bs.brokers if ctx.is_alive(broker_name, b)}
    if not alive:
        return False
    if bs.master_broker_id is not None:
        return bs.master_broker_id not in alive
    if bs.master_epoch == 0:
        wait_for = state.cfg_int("waitFor")
        return wait_for > 1 and len(alive) >= wait_for
    return bool(alive & bs.sync_state_set) or state.cfg_bool("enableElectUncleanMaster")


def handle(state: ControllerState, method: str, request: Mapping[str, Any], ctx: Context) -> Result:
    """Decide `request` against `state` (never mutated). The caller applies `result.records`."""
    fn = _HANDLERS.get(method) if isinstance(method, str) else None
    if fn is None:
        return Result(Code.REQUEST_CODE_NOT_SUPPORTED, f" request type {method} not supported")
    if not isinstance(request, Mapping):
        return Result(Code.CONTROLLER_INVALID_REQUEST, "Invalid request: the request must be a map")
    try:
        result = fn(state, request, ctx)
        if result.records and state.feature_level >= HISTORY_LEVEL:
            result.records.extend(_history(state, method, request, ctx, result.records))
        return result
    except _Reject as r:
        return Result(r.code, r.remark, dict(r.response), [])
    except Exception as e:
        return Result(Code.SYSTEM_ERROR, f"internal error: {type(e).__name__}: {e}")
