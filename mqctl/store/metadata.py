"""A broker's metadata files under `<storePathRootDir>/config/`: one typed reader per file.

What a failover can lose besides messages: a slave copies topics, subscription groups and offsets from
its master only periodically, so a new master may lack some. The files are those of RocketMQ's
ConfigManager subclasses (BrokerPathConfigHelper, StorePathConfigHelper):

  topics.json              TopicConfigManager            topicConfigTable, dataVersion
  subscriptionGroup.json   SubscriptionGroupManager      subscriptionGroupTable, forbiddenTable, dataVersion
  consumerOffset.json      ConsumerOffsetManager         offsetTable ("topic@group" -> queueId -> offset)
  lmqConsumerOffset.json   LmqConsumerOffsetManager      lmqOffsetTable ("topic@group" -> offset)
  delayOffset.json         ScheduleMessageService        offsetTable (delay level -> offset)
  consumerFilter.json      ConsumerFilterManager         filterDataByTopic
  consumerOrderInfo.json   ConsumerOrderInfoManager      table ("topic@group" -> queueId -> order info)
  topicQueueMapping.json   TopicQueueMappingManager      topicQueueMappingInfoMap, dataVersion
  messageRequestMode.json  MessageRequestModeManager     messageRequestModeMap
  timercheck               TimerCheckpoint               56 bytes of big-endian longs (no .bak)

RocketMQ (ConfigManager.load) reads `<file>.bak` when the file is missing, empty or does not decode; so do
these readers, and `Source` says which file was read and why. A file that exists nowhere reads as empty,
as RocketMQ starts with an empty table. Files of RocketMQ 4.x (no stateVersion, no attributes, no
dataVersion in consumerOffset.json) read the same way, a missing field taking RocketMQ's default; a field
these readers do not know is kept in `extra` and written back.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, ClassVar, Self, TypeVar, cast

from mqctl.camel import camel
from mqctl.errors import StoreError
from mqctl.store import fastjson
from mqctl.store._util import read_bytes, store_error, string_to_file

__all__ = [
    "CONSUMER_FILTER",
    "CONSUMER_OFFSETS",
    "CONSUMER_ORDER_INFO",
    "DELAY_OFFSETS",
    "LMQ_CONSUMER_OFFSETS",
    "MESSAGE_REQUEST_MODE",
    "SUBSCRIPTION_GROUPS",
    "TIMER_CHECK",
    "TOPICS",
    "TOPIC_QUEUE_MAPPING",
    "ConsumerFilterFile",
    "ConsumerOffsetsFile",
    "ConsumerOrderInfoFile",
    "DataVersion",
    "DelayOffsetsFile",
    "LmqConsumerOffsetsFile",
    "MessageRequestModeFile",
    "Source",
    "SubscriptionGroupConfig",
    "SubscriptionGroupsFile",
    "TimerCheckpoint",
    "TopicConfig",
    "TopicQueueMappingFile",
    "TopicsFile",
    "config_dir",
    "decode_consumer_offsets",
    "decode_delay_offsets",
    "decode_subscription_groups",
    "decode_topics",
    "read_consumer_filter",
    "read_consumer_offsets",
    "read_consumer_order_info",
    "read_delay_offsets",
    "read_lmq_consumer_offsets",
    "read_message_request_mode",
    "read_subscription_groups",
    "read_timer_checkpoint",
    "read_topic_queue_mapping",
    "read_topics",
    "write_consumer_offsets",
    "write_delay_offsets",
    "write_subscription_groups",
    "write_topics",
]

TOPICS = "topics.json"
SUBSCRIPTION_GROUPS = "subscriptionGroup.json"
CONSUMER_OFFSETS = "consumerOffset.json"
LMQ_CONSUMER_OFFSETS = "lmqConsumerOffset.json"
DELAY_OFFSETS = "delayOffset.json"
CONSUMER_FILTER = "consumerFilter.json"
CONSUMER_ORDER_INFO = "consumerOrderInfo.json"
TOPIC_QUEUE_MAPPING = "topicQueueMapping.json"
MESSAGE_REQUEST_MODE = "messageRequestMode.json"
TIMER_CHECK = "timercheck"

T = TypeVar("T")


def config_dir(store: str | Path) -> Path:
    """`<store>/config`, or `store` itself when it is a config directory (holds topics.json, or is named
    config and has no config/ below it)."""
    p = Path(store)
    if (p / "config").is_dir():
        return p / "config"
    if p.name == "config" or (p / TOPICS).exists() or (p / (TOPICS + ".bak")).exists():
        return p
    return p / "config"


@dataclass(frozen=True)
class Source:
    """Which file a reader read: `path` ("" when neither the file nor its .bak exists) and, when it is not
    the file itself, why (`fallback`)."""

    path: str
    fallback: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.path or None, "fallback": self.fallback}

    def __str__(self) -> str:
        what = self.path or "nothing (empty)"
        return what if self.fallback is None else f"{what} ({self.fallback})"


# ---- typed field access: every complaint names the file and the field -------------------------------


def _obj(v: Any, where: str, path: str) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise store_error(path, f"{where}: expected an object, found {type(v).__name__}")
    return v


def _int(d: Mapping[str, Any], key: str, default: int, where: str, path: str) -> int:
    v = d.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int):
        raise store_error(path, f"{where}: {key} is {v!r}, expected an integer")
    return v


def _bool(d: Mapping[str, Any], key: str, default: bool, where: str, path: str) -> bool:
    v = d.get(key, default)
    if not isinstance(v, bool):
        raise store_error(path, f"{where}: {key} is {v!r}, expected true or false")
    return v


def _str(d: Mapping[str, Any], key: str, default: str, where: str, path: str) -> str:
    v = d.get(key, default)
    if not isinstance(v, str):
        raise store_error(path, f"{where}: {key} is {v!r}, expected a string")
    return v


def _str_map(d: Mapping[str, Any], key: str, where: str, path: str) -> dict[str, str]:
    v = d.get(key)
    if v is None:
        return {}
    m = _obj(v, f"{where}: {key}", path)
    return {str(k): str(x) for k, x in m.items()}


def _int_key(k: str, where: str, path: str) -> int:
    try:
        return int(k)
    except ValueError:
        raise store_error(path, f"{where}: key {k!r} is not an integer") from None


def _long_map(v: Any, where: str, path: str) -> dict[int, int]:
    """An Integer -> Long map (queue id or delay level -> offset)."""
    out: dict[int, int] = {}
    for k, x in _obj(v, where, path).items():
        if isinstance(x, bool) or not isinstance(x, int):
            raise store_error(path, f"{where}: {k}: {x!r} is not an integer")
        out[_int_key(k, where, path)] = x
    return out


def _extra(d: Mapping[str, Any], known: Collection[str]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k not in known}


@dataclass(frozen=True)
class DataVersion:
    """RocketMQ's DataVersion; `state_version` is None in a 4.x file (5.x added it)."""

    counter: int = 0
    timestamp: int = 0
    state_version: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    _KNOWN = frozenset(("counter", "timestamp", "stateVersion"))

    @classmethod
    def from_json(cls, v: Any, path: str) -> DataVersion:
        d = _obj(v, "dataVersion", path)
        sv = d.get("stateVersion")
        return cls(
            _int(d, "counter", 0, "dataVersion", path),
            _int(d, "timestamp", 0, "dataVersion", path),
            None if sv is None else _int(d, "stateVersion", 0, "dataVersion", path),
            _extra(d, cls._KNOWN),
        )

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"counter": self.counter}
        if self.state_version is not None:
            d["stateVersion"] = self.state_version
        d["timestamp"] = self.timestamp
        return {**d, **self.extra}

    def next_version(self, now_ms: int | None = None) -> DataVersion:
        """DataVersion.nextVersion: counter + 1, timestamp now."""
        return replace(
            self, counter=self.counter + 1, timestamp=int(time.time() * 1000) if now_ms is None else now_ms
        )


def _data_version(d: Mapping[str, Any], path: str) -> DataVersion | None:
    v = d.get("dataVersion")
    return None if v is None else DataVersion.from_json(v, path)


# ---- the config beans: one dataclass field per JSON property ----------------------------------------


_FIELD_READERS: dict[str, Callable[[Mapping[str, Any], str, Any, str, str], Any]] = {
    "int": _int,
    "bool": _bool,
    "str": _str,
    "dict[str, str]": lambda d, key, _default, where, path: _str_map(d, key, where, path),
}


_Spec = tuple[tuple[str, str, Any, Callable[..., Any]], ...]
_SPECS: dict[type, tuple[_Spec, tuple[tuple[str, str], ...]]] = {}


def _bean_fields(cls: type) -> tuple[_Spec, tuple[tuple[str, str], ...]]:
    """(attribute, JSON property, RocketMQ's default, reader by type) of each field but `extra`; and
    (JSON property, attribute) in the order RocketMQ's fastjson writes them: by name."""
    if cls not in _SPECS:
        spec = tuple(
            (f.name, camel(f.name), f.default, _FIELD_READERS[str(f.type)])
            for f in fields(cls)
            if f.name != "extra"
        )
        _SPECS[cls] = spec, tuple(sorted((key, attr) for attr, key, _, _ in spec))
    return _SPECS[cls]


class _Bean:
    """A RocketMQ config bean (TopicConfig, SubscriptionGroupConfig): a dataclass whose field x_y is the
    JSON property xY, checked by its type, a missing one taking RocketMQ's default (the first field's,
    the name, is the table's key); properties these readers do not know are kept in `extra` and written
    back."""

    _WHAT: ClassVar[str]
    extra: dict[str, Any]

    @classmethod
    def from_json(cls, name: str, v: Any, path: str) -> Self:
        w = f"{cls._WHAT} {name!r}"
        d = _obj(v, w, path)
        spec = _bean_fields(cls)[0]
        args = [
            read(d, key, name if i == 0 else default, w, path)
            for i, (_, key, default, read) in enumerate(spec)
        ]
        bean: Self = cast(Any, cls)(*args, _extra(d, {key for _, key, _, _ in spec}))
        return bean

    def to_json(self) -> dict[str, Any]:
        return {**{key: getattr(self, attr) for key, attr in _bean_fields(type(self))[1]}, **self.extra}


@dataclass(frozen=True)
class TopicConfig(_Bean):
    """org.apache.rocketmq.common.TopicConfig; defaults are RocketMQ's."""

    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = 6
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False
    attributes: dict[str, str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    _WHAT = "topic"


@dataclass(frozen=True)
class SubscriptionGroupConfig(_Bean):
    """org.apache.rocketmq.remoting.protocol.subscription.SubscriptionGroupConfig; defaults are RocketMQ's.
    groupRetryPolicy, subscriptionDataSet and the 5.x additions are kept as read, in `extra`."""

    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    consume_message_orderly: bool = False
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    group_sys_flag: int = 0
    consume_timeout_minute: int = 15
    attributes: dict[str, str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    _WHAT = "group"


# ---- the files: one table (or two) each, read and written by the table's row ---------------------------

# a JSON table's reader (value, the property's name, path) and writer; None: mqctl does not write the file
_Read = Callable[[Any, str, str], Any]
_Table = tuple[str, str, _Read, Callable[[Any], Any] | None]


@dataclass(frozen=True)
class _ConfigFile:
    """A ConfigManager file: which file was read, its tables (`_TABLES`: attribute, JSON property, reader,
    writer), its dataVersion when it has one, and the properties these readers do not know (`extra`,
    written back)."""

    source: Source
    extra: dict[str, Any] = field(default_factory=dict, kw_only=True)

    _TABLES: ClassVar[tuple[_Table, ...]]

    @classmethod
    def parse(cls, doc: Any, path: str) -> Self:
        d = _obj(doc, "the file", path)
        kw = {attr: read(d.get(key, {}), key, path) for attr, key, read, _ in cls._TABLES}
        known = [key for _, key, _, _ in cls._TABLES]
        if "data_version" in {f.name for f in fields(cls)}:
            kw["data_version"] = _data_version(d, path)
            known.append("dataVersion")
        return cls(Source(path), **kw, extra=_extra(d, known))

    def to_json(self) -> dict[str, Any]:
        doc = _versioned(getattr(self, "data_version", None))
        for key, attr, write in sorted((key, attr, write) for attr, key, _, write in self._TABLES):
            if write is None:
                raise TypeError(f"mqctl does not write {type(self).__name__}")
            doc[key] = write(getattr(self, attr))
        return {**doc, **self.extra}


def _each(read: Callable[[str, Any, str], T]) -> Callable[[Any, str, str], dict[str, T]]:
    """A table of beans: read(key, value, path) for each of its entries."""
    return lambda v, where, path: {k: read(k, x, path) for k, x in _obj(v, where, path).items()}


def _written(v: dict[str, _Bean]) -> dict[str, Any]:
    return {k: b.to_json() for k, b in v.items()}


# ---- topics.json ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TopicsFile(_ConfigFile):
    topics: dict[str, TopicConfig] = field(default_factory=dict)
    data_version: DataVersion | None = None

    _TABLES = (("topics", "topicConfigTable", _each(TopicConfig.from_json), _written),)


# ---- subscriptionGroup.json ---------------------------------------------------------------------------


def _forbidden(v: Any, where: str, path: str) -> dict[str, dict[str, int]]:
    return {
        g: {t: int(b) for t, b in _obj(m, f"{where} {g!r}", path).items()}
        for g, m in _obj(v, where, path).items()
    }


@dataclass(frozen=True)
class SubscriptionGroupsFile(_ConfigFile):
    groups: dict[str, SubscriptionGroupConfig] = field(default_factory=dict)
    forbidden: dict[str, dict[str, int]] = field(default_factory=dict)  # group -> topic -> forbidden bits
    data_version: DataVersion | None = None

    _TABLES = (
        ("forbidden", "forbiddenTable", _forbidden, lambda v: v),
        ("groups", "subscriptionGroupTable", _each(SubscriptionGroupConfig.from_json), _written),
    )


# ---- consumerOffset.json, lmqConsumerOffset.json ---------------------------------------------------


def _offset_table(v: Any, where: str, path: str) -> dict[str, dict[int, int]]:
    return {k: _long_map(x, f"{where} {k!r}", path) for k, x in _obj(v, where, path).items()}


@dataclass(frozen=True)
class ConsumerOffsetsFile(_ConfigFile):
    """offsets: "topic@group" -> queueId -> committed offset. `groupTopicMap`, derived by RocketMQ from the
    table, is recomputed when written (if the file had it)."""

    offsets: dict[str, dict[int, int]] = field(default_factory=dict)
    data_version: DataVersion | None = None

    _TABLES = (("offsets", "offsetTable", _offset_table, None),)

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {**_versioned(self.data_version), **self.extra}
        if "groupTopicMap" in doc:
            gt: dict[str, list[str]] = {}
            for key in self.offsets:
                topic, _, group = key.partition("@")
                gt.setdefault(group, []).append(topic)
            doc["groupTopicMap"] = gt
        doc["offsetTable"] = {k: {str(q): o for q, o in m.items()} for k, m in self.offsets.items()}
        return doc


def _lmq_table(v: Any, where: str, path: str) -> dict[str, int]:
    lmq: dict[str, int] = {}
    for k, x in _obj(v, where, path).items():
        if isinstance(x, bool) or not isinstance(x, int):
            raise store_error(path, f"{where} {k!r}: {x!r} is not an integer")
        lmq[k] = x
    return lmq


@dataclass(frozen=True)
class LmqConsumerOffsetsFile(_ConfigFile):
    """lmq_offsets: "topic@group" -> offset (a light message queue has one queue); `offsets` as in
    consumerOffset.json (usually empty)."""

    lmq_offsets: dict[str, int] = field(default_factory=dict)
    offsets: dict[str, dict[int, int]] = field(default_factory=dict)
    data_version: DataVersion | None = None

    _TABLES = (
        ("lmq_offsets", "lmqOffsetTable", _lmq_table, None),
        ("offsets", "offsetTable", _offset_table, None),
    )


# ---- delayOffset.json ------------------------------------------------------------------------------


@dataclass(frozen=True)
class DelayOffsetsFile(_ConfigFile):
    """offsets: delay level -> how far ScheduleMessageService has delivered that level's queue."""

    offsets: dict[int, int] = field(default_factory=dict)
    data_version: DataVersion | None = None

    _TABLES = (("offsets", "offsetTable", _long_map, lambda v: {str(k): x for k, x in v.items()}),)


# ---- the files mqctl reads but does not compare field by field ------------------------------------------


def _filter_table(v: Any, where: str, path: str) -> dict[str, dict[str, dict[str, Any]]]:
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for topic, x in _obj(v, where, path).items():
        by_group = _obj(
            _obj(x, f"{where} {topic!r}", path).get("groupFilterData", {}),
            f"{where} {topic!r} groupFilterData",
            path,
        )
        out[topic] = {g: _obj(y, f"filter of {topic!r}/{g!r}", path) for g, y in by_group.items()}
    return out


@dataclass(frozen=True)
class ConsumerFilterFile(_ConfigFile):
    """filters: topic -> group -> ConsumerFilterData (expression, expressionType, clientVersion, ...)."""

    filters: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)

    _TABLES = (("filters", "filterDataByTopic", _filter_table, None),)


def _tables_of_objects(entry: Callable[[str, str], str], key: Callable[[str, str, str], Any]) -> _Read:
    """A table of tables of JSON objects (topic -> group -> ..., "topic@group" -> queueId -> ...): key(k,
    where, path) reads an inner key, entry(k, q) names an object in a complaint."""

    def read(v: Any, where: str, path: str) -> dict[str, dict[Any, dict[str, Any]]]:
        return {
            k: {
                key(q, f"{where} {k!r}", path): _obj(y, entry(k, q), path)
                for q, y in _obj(x, f"{where} {k!r}", path).items()
            }
            for k, x in _obj(v, where, path).items()
        }

    return read


@dataclass(frozen=True)
class ConsumerOrderInfoFile(_ConfigFile):
    """table: "topic@group" -> queueId -> OrderInfo (popTime, invisibleTime, offsets, ...) of orderly POP."""

    table: dict[str, dict[int, dict[str, Any]]] = field(default_factory=dict)

    _TABLES = (("table", "table", _tables_of_objects(lambda k, q: f"table {k!r} {q}", _int_key), None),)


@dataclass(frozen=True)
class TopicQueueMappingFile(_ConfigFile):
    """mappings: static topic -> TopicQueueMappingDetail (bname, epoch, totalQueues, hostedQueues, ...)."""

    mappings: dict[str, dict[str, Any]] = field(default_factory=dict)
    data_version: DataVersion | None = None

    _TABLES = (
        (
            "mappings",
            "topicQueueMappingInfoMap",
            _each(lambda k, x, path: _obj(x, f"mapping {k!r}", path)),
            None,
        ),
    )


@dataclass(frozen=True)
class MessageRequestModeFile(_ConfigFile):
    """modes: topic -> group -> {mode: PULL|POP, popShareQueueNum, ...}."""

    modes: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)

    _TABLES = (
        (
            "modes",
            "messageRequestModeMap",
            _tables_of_objects(lambda t, g: f"mode of {t!r}/{g!r}", lambda g, _where, _path: g),
            None,
        ),
    )


# ---- reading with RocketMQ's .bak fallback ------------------------------------------------------------


def _decode_json(parse: Callable[[Any, str], T]) -> Callable[[bytes, str], T]:
    def decode(data: bytes, path: str) -> T:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise store_error(path, f"not UTF-8 text ({exc.reason})", offset=exc.start) from None
        return parse(fastjson.loads(text, path), path)

    return decode


def _load(
    store: str | Path,
    name: str,
    decode: Callable[[bytes, str], T],
    empty: Callable[[Source], T],
) -> T:
    """ConfigManager.load: the file, else (missing, empty or not decodable) its .bak; neither: empty."""
    d = config_dir(store)
    main, bak = d / name, d / (name + ".bak")
    data = read_bytes(main)
    if data is None:
        why, bad = f"{name} is missing", False
    elif not data.strip():
        why, bad = f"{name} is empty", False
    else:
        try:
            return decode(data, str(main))
        except StoreError as exc:
            detail = str(exc).removeprefix(str(main)).lstrip(": ")
            why, bad = f"{name} unreadable ({detail})", True
    bdata = read_bytes(bak)
    if bdata is None or not bdata.strip():
        if bad:
            raise StoreError(
                f"{d}: {why}, and no {bak.name} to fall back on (RocketMQ would start with an "
                f"empty table): restore {name} from a backup or another replica"
            )
        return empty(Source("", why + (f", {bak.name} empty" if bdata is not None else "")))
    try:
        return _resourced(decode(bdata, str(bak)), Source(str(bak), why))
    except StoreError as exc:
        raise StoreError(f"{d}: {why}, and {exc}") from None


def _resourced(v: T, s: Source) -> T:
    return cast(T, replace(cast(Any, v), source=s))


# the bodies of a broker's GET_ALL_* answers are what the managers persist: decoded the same way
decode_topics = _decode_json(TopicsFile.parse)
decode_subscription_groups = _decode_json(SubscriptionGroupsFile.parse)
decode_consumer_offsets = _decode_json(ConsumerOffsetsFile.parse)
decode_delay_offsets = _decode_json(DelayOffsetsFile.parse)


def _reader(
    name: str, decode: Callable[[bytes, str], T], empty: Callable[[Source], T]
) -> Callable[[str | Path], T]:
    def read(store: str | Path) -> T:
        return _load(store, name, decode, empty)

    return read


read_topics = _reader(TOPICS, decode_topics, TopicsFile)
read_subscription_groups = _reader(SUBSCRIPTION_GROUPS, decode_subscription_groups, SubscriptionGroupsFile)
read_consumer_offsets = _reader(CONSUMER_OFFSETS, decode_consumer_offsets, ConsumerOffsetsFile)
read_lmq_consumer_offsets = _reader(
    LMQ_CONSUMER_OFFSETS, _decode_json(LmqConsumerOffsetsFile.parse), LmqConsumerOffsetsFile
)
read_delay_offsets = _reader(DELAY_OFFSETS, decode_delay_offsets, DelayOffsetsFile)
read_consumer_filter = _reader(CONSUMER_FILTER, _decode_json(ConsumerFilterFile.parse), ConsumerFilterFile)
read_consumer_order_info = _reader(
    CONSUMER_ORDER_INFO, _decode_json(ConsumerOrderInfoFile.parse), ConsumerOrderInfoFile
)
read_topic_queue_mapping = _reader(
    TOPIC_QUEUE_MAPPING, _decode_json(TopicQueueMappingFile.parse), TopicQueueMappingFile
)
read_message_request_mode = _reader(
    MESSAGE_REQUEST_MODE, _decode_json(MessageRequestModeFile.parse), MessageRequestModeFile
)


# ---- timercheck -----------------------------------------------------------------------------------

_TIMER_FMT = ">7q"
_TIMER_USED = struct.calcsize(_TIMER_FMT)  # 56; the file is an mmap of 4096 bytes


@dataclass(frozen=True)
class TimerCheckpoint:
    """org.apache.rocketmq.store.timer.TimerCheckpoint (encode/decode): how far the timer wheel has read."""

    source: Source
    last_read_time_ms: int = 0
    last_timer_log_flush_pos: int = 0
    last_timer_queue_offset: int = 0
    master_timer_queue_offset: int = 0
    data_version: DataVersion = field(default_factory=DataVersion)


def _decode_timer(data: bytes, path: str) -> TimerCheckpoint:
    if len(data) < _TIMER_USED:
        raise store_error(
            path,
            f"short timer checkpoint: {len(data)} bytes, its fields need {_TIMER_USED}",
            offset=len(data),
        )
    rt, fp, qo, mo, sv, ts, ct = struct.unpack_from(_TIMER_FMT, data, 0)
    return TimerCheckpoint(Source(path), rt, fp, qo, mo, DataVersion(ct, ts, sv))


# an all-zero file (RocketMQ's fresh mmap) decodes like any other: zeros
read_timer_checkpoint = _reader(TIMER_CHECK, _decode_timer, TimerCheckpoint)


# ---- writing the way MixAll.string2File does --------------------------------------------------------


def _versioned(dv: DataVersion | None) -> dict[str, Any]:
    return {} if dv is None else {"dataVersion": dv.to_json()}


def _write(store: str | Path, name: str, doc: dict[str, Any]) -> Path:
    """New content to <file>.tmp (fsynced), the previous content to <file>.bak, then the rename."""
    path = config_dir(store) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    string_to_file(path, fastjson.dumps(doc).encode("utf-8"))
    return path


def write_topics(store: str | Path, f: TopicsFile) -> Path:
    return _write(store, TOPICS, f.to_json())


def write_subscription_groups(store: str | Path, f: SubscriptionGroupsFile) -> Path:
    return _write(store, SUBSCRIPTION_GROUPS, f.to_json())


def write_consumer_offsets(store: str | Path, f: ConsumerOffsetsFile) -> Path:
    return _write(store, CONSUMER_OFFSETS, f.to_json())


def write_delay_offsets(store: str | Path, f: DelayOffsetsFile) -> Path:
    return _write(store, DELAY_OFFSETS, f.to_json())
