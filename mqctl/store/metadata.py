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
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar, cast

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


# ---- topics.json ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TopicConfig:
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

    _KNOWN = frozenset(
        (
            "topicName",
            "readQueueNums",
            "writeQueueNums",
            "perm",
            "topicFilterType",
            "topicSysFlag",
            "order",
            "attributes",
        )
    )

    @classmethod
    def from_json(cls, name: str, v: Any, path: str) -> TopicConfig:
        w = f"topic {name!r}"
        d = _obj(v, w, path)
        return cls(
            _str(d, "topicName", name, w, path),
            _int(d, "readQueueNums", 16, w, path),
            _int(d, "writeQueueNums", 16, w, path),
            _int(d, "perm", 6, w, path),
            _str(d, "topicFilterType", "SINGLE_TAG", w, path),
            _int(d, "topicSysFlag", 0, w, path),
            _bool(d, "order", False, w, path),
            _str_map(d, "attributes", w, path),
            _extra(d, cls._KNOWN),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "attributes": self.attributes,
            "order": self.order,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicFilterType": self.topic_filter_type,
            "topicName": self.topic_name,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
            **self.extra,
        }


@dataclass(frozen=True)
class TopicsFile:
    source: Source
    topics: dict[str, TopicConfig]
    data_version: DataVersion | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            **_versioned(self.data_version),
            "topicConfigTable": {k: t.to_json() for k, t in self.topics.items()},
            **self.extra,
        }


def _parse_topics(doc: Any, path: str) -> TopicsFile:
    d = _obj(doc, "the file", path)
    table = _obj(d.get("topicConfigTable", {}), "topicConfigTable", path)
    return TopicsFile(
        Source(path),
        {k: TopicConfig.from_json(k, v, path) for k, v in table.items()},
        _data_version(d, path),
        _extra(d, ("dataVersion", "topicConfigTable")),
    )


# ---- subscriptionGroup.json ---------------------------------------------------------------------------


@dataclass(frozen=True)
class SubscriptionGroupConfig:
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

    _KNOWN = frozenset(
        (
            "groupName",
            "consumeEnable",
            "consumeFromMinEnable",
            "consumeBroadcastEnable",
            "consumeMessageOrderly",
            "retryQueueNums",
            "retryMaxTimes",
            "brokerId",
            "whichBrokerWhenConsumeSlowly",
            "notifyConsumerIdsChangedEnable",
            "groupSysFlag",
            "consumeTimeoutMinute",
            "attributes",
        )
    )

    @classmethod
    def from_json(cls, name: str, v: Any, path: str) -> SubscriptionGroupConfig:
        w = f"group {name!r}"
        d = _obj(v, w, path)
        return cls(
            _str(d, "groupName", name, w, path),
            _bool(d, "consumeEnable", True, w, path),
            _bool(d, "consumeFromMinEnable", True, w, path),
            _bool(d, "consumeBroadcastEnable", True, w, path),
            _bool(d, "consumeMessageOrderly", False, w, path),
            _int(d, "retryQueueNums", 1, w, path),
            _int(d, "retryMaxTimes", 16, w, path),
            _int(d, "brokerId", 0, w, path),
            _int(d, "whichBrokerWhenConsumeSlowly", 1, w, path),
            _bool(d, "notifyConsumerIdsChangedEnable", True, w, path),
            _int(d, "groupSysFlag", 0, w, path),
            _int(d, "consumeTimeoutMinute", 15, w, path),
            _str_map(d, "attributes", w, path),
            _extra(d, cls._KNOWN),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "attributes": self.attributes,
            "brokerId": self.broker_id,
            "consumeBroadcastEnable": self.consume_broadcast_enable,
            "consumeEnable": self.consume_enable,
            "consumeFromMinEnable": self.consume_from_min_enable,
            "consumeMessageOrderly": self.consume_message_orderly,
            "consumeTimeoutMinute": self.consume_timeout_minute,
            "groupName": self.group_name,
            "groupSysFlag": self.group_sys_flag,
            "notifyConsumerIdsChangedEnable": self.notify_consumer_ids_changed_enable,
            "retryMaxTimes": self.retry_max_times,
            "retryQueueNums": self.retry_queue_nums,
            "whichBrokerWhenConsumeSlowly": self.which_broker_when_consume_slowly,
            **self.extra,
        }


@dataclass(frozen=True)
class SubscriptionGroupsFile:
    source: Source
    groups: dict[str, SubscriptionGroupConfig]
    forbidden: dict[str, dict[str, int]] = field(default_factory=dict)  # group -> topic -> forbidden bits
    data_version: DataVersion | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            **_versioned(self.data_version),
            "forbiddenTable": self.forbidden,
            "subscriptionGroupTable": {k: g.to_json() for k, g in self.groups.items()},
            **self.extra,
        }


def _parse_groups(doc: Any, path: str) -> SubscriptionGroupsFile:
    d = _obj(doc, "the file", path)
    table = _obj(d.get("subscriptionGroupTable", {}), "subscriptionGroupTable", path)
    forbidden = {
        g: {t: int(b) for t, b in _obj(m, f"forbiddenTable {g!r}", path).items()}
        for g, m in _obj(d.get("forbiddenTable", {}), "forbiddenTable", path).items()
    }
    return SubscriptionGroupsFile(
        Source(path),
        {k: SubscriptionGroupConfig.from_json(k, v, path) for k, v in table.items()},
        forbidden,
        _data_version(d, path),
        _extra(d, ("dataVersion", "subscriptionGroupTable", "forbiddenTable")),
    )


# ---- consumerOffset.json, lmqConsumerOffset.json ---------------------------------------------------


@dataclass(frozen=True)
class ConsumerOffsetsFile:
    """offsets: "topic@group" -> queueId -> committed offset. `groupTopicMap`, derived by RocketMQ from the
    table, is recomputed when written (if the file had it)."""

    source: Source
    offsets: dict[str, dict[int, int]]
    data_version: DataVersion | None = None
    extra: dict[str, Any] = field(default_factory=dict)

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


def _offset_table(d: Mapping[str, Any], key: str, path: str) -> dict[str, dict[int, int]]:
    table = _obj(d.get(key, {}), key, path)
    return {k: _long_map(v, f"{key} {k!r}", path) for k, v in table.items()}


def _parse_offsets(doc: Any, path: str) -> ConsumerOffsetsFile:
    d = _obj(doc, "the file", path)
    return ConsumerOffsetsFile(
        Source(path),
        _offset_table(d, "offsetTable", path),
        _data_version(d, path),
        _extra(d, ("dataVersion", "offsetTable")),
    )


@dataclass(frozen=True)
class LmqConsumerOffsetsFile:
    """lmq_offsets: "topic@group" -> offset (a light message queue has one queue); `offsets` as in
    consumerOffset.json (usually empty)."""

    source: Source
    lmq_offsets: dict[str, int]
    offsets: dict[str, dict[int, int]] = field(default_factory=dict)
    data_version: DataVersion | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _parse_lmq(doc: Any, path: str) -> LmqConsumerOffsetsFile:
    d = _obj(doc, "the file", path)
    lmq: dict[str, int] = {}
    for k, v in _obj(d.get("lmqOffsetTable", {}), "lmqOffsetTable", path).items():
        if isinstance(v, bool) or not isinstance(v, int):
            raise store_error(path, f"lmqOffsetTable {k!r}: {v!r} is not an integer")
        lmq[k] = v
    return LmqConsumerOffsetsFile(
        Source(path),
        lmq,
        _offset_table(d, "offsetTable", path),
        _data_version(d, path),
        _extra(d, ("dataVersion", "offsetTable", "lmqOffsetTable")),
    )


# ---- delayOffset.json ------------------------------------------------------------------------------


@dataclass(frozen=True)
class DelayOffsetsFile:
    """offsets: delay level -> how far ScheduleMessageService has delivered that level's queue."""

    source: Source
    offsets: dict[int, int]
    data_version: DataVersion | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            **_versioned(self.data_version),
            "offsetTable": {str(k): v for k, v in self.offsets.items()},
            **self.extra,
        }


def _parse_delay(doc: Any, path: str) -> DelayOffsetsFile:
    d = _obj(doc, "the file", path)
    return DelayOffsetsFile(
        Source(path),
        _long_map(d.get("offsetTable", {}), "offsetTable", path),
        _data_version(d, path),
        _extra(d, ("dataVersion", "offsetTable")),
    )


# ---- the files mqctl reads but does not compare field by field ------------------------------------------


@dataclass(frozen=True)
class ConsumerFilterFile:
    """filters: topic -> group -> ConsumerFilterData (expression, expressionType, clientVersion, ...)."""

    source: Source
    filters: dict[str, dict[str, dict[str, Any]]]
    extra: dict[str, Any] = field(default_factory=dict)


def _parse_filter(doc: Any, path: str) -> ConsumerFilterFile:
    d = _obj(doc, "the file", path)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for topic, v in _obj(d.get("filterDataByTopic", {}), "filterDataByTopic", path).items():
        by_group = _obj(
            _obj(v, f"filterDataByTopic {topic!r}", path).get("groupFilterData", {}),
            f"filterDataByTopic {topic!r} groupFilterData",
            path,
        )
        out[topic] = {g: _obj(x, f"filter of {topic!r}/{g!r}", path) for g, x in by_group.items()}
    return ConsumerFilterFile(Source(path), out, _extra(d, ("filterDataByTopic",)))


@dataclass(frozen=True)
class ConsumerOrderInfoFile:
    """table: "topic@group" -> queueId -> OrderInfo (popTime, invisibleTime, offsets, ...) of orderly POP."""

    source: Source
    table: dict[str, dict[int, dict[str, Any]]]
    extra: dict[str, Any] = field(default_factory=dict)


def _parse_order_info(doc: Any, path: str) -> ConsumerOrderInfoFile:
    d = _obj(doc, "the file", path)
    table: dict[str, dict[int, dict[str, Any]]] = {}
    for k, v in _obj(d.get("table", {}), "table", path).items():
        table[k] = {
            _int_key(q, f"table {k!r}", path): _obj(x, f"table {k!r} {q}", path)
            for q, x in _obj(v, f"table {k!r}", path).items()
        }
    return ConsumerOrderInfoFile(Source(path), table, _extra(d, ("table",)))


@dataclass(frozen=True)
class TopicQueueMappingFile:
    """mappings: static topic -> TopicQueueMappingDetail (bname, epoch, totalQueues, hostedQueues, ...)."""

    source: Source
    mappings: dict[str, dict[str, Any]]
    data_version: DataVersion | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _parse_mapping(doc: Any, path: str) -> TopicQueueMappingFile:
    d = _obj(doc, "the file", path)
    m = _obj(d.get("topicQueueMappingInfoMap", {}), "topicQueueMappingInfoMap", path)
    return TopicQueueMappingFile(
        Source(path),
        {k: _obj(v, f"mapping {k!r}", path) for k, v in m.items()},
        _data_version(d, path),
        _extra(d, ("dataVersion", "topicQueueMappingInfoMap")),
    )


@dataclass(frozen=True)
class MessageRequestModeFile:
    """modes: topic -> group -> {mode: PULL|POP, popShareQueueNum, ...}."""

    source: Source
    modes: dict[str, dict[str, dict[str, Any]]]
    extra: dict[str, Any] = field(default_factory=dict)


def _parse_request_mode(doc: Any, path: str) -> MessageRequestModeFile:
    d = _obj(doc, "the file", path)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for topic, v in _obj(d.get("messageRequestModeMap", {}), "messageRequestModeMap", path).items():
        out[topic] = {
            g: _obj(x, f"mode of {topic!r}/{g!r}", path)
            for g, x in _obj(v, f"messageRequestModeMap {topic!r}", path).items()
        }
    return MessageRequestModeFile(Source(path), out, _extra(d, ("messageRequestModeMap",)))


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
    with_source: Callable[[T, Source], T],
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
        return with_source(decode(bdata, str(bak)), Source(str(bak), why))
    except StoreError as exc:
        raise StoreError(f"{d}: {why}, and {exc}") from None


def _resourced(v: T, s: Source) -> T:
    return cast(T, replace(cast(Any, v), source=s))


# the bodies of a broker's GET_ALL_* answers are what the managers persist: decoded the same way
decode_topics = _decode_json(_parse_topics)
decode_subscription_groups = _decode_json(_parse_groups)
decode_consumer_offsets = _decode_json(_parse_offsets)
decode_delay_offsets = _decode_json(_parse_delay)


def read_topics(store: str | Path) -> TopicsFile:
    return _load(store, TOPICS, decode_topics, lambda s: TopicsFile(s, {}), _resourced)


def read_subscription_groups(store: str | Path) -> SubscriptionGroupsFile:
    return _load(
        store,
        SUBSCRIPTION_GROUPS,
        decode_subscription_groups,
        lambda s: SubscriptionGroupsFile(s, {}),
        _resourced,
    )


def read_consumer_offsets(store: str | Path) -> ConsumerOffsetsFile:
    return _load(
        store, CONSUMER_OFFSETS, decode_consumer_offsets, lambda s: ConsumerOffsetsFile(s, {}), _resourced
    )


def read_lmq_consumer_offsets(store: str | Path) -> LmqConsumerOffsetsFile:
    return _load(
        store,
        LMQ_CONSUMER_OFFSETS,
        _decode_json(_parse_lmq),
        lambda s: LmqConsumerOffsetsFile(s, {}),
        _resourced,
    )


def read_delay_offsets(store: str | Path) -> DelayOffsetsFile:
    return _load(store, DELAY_OFFSETS, decode_delay_offsets, lambda s: DelayOffsetsFile(s, {}), _resourced)


def read_consumer_filter(store: str | Path) -> ConsumerFilterFile:
    return _load(
        store, CONSUMER_FILTER, _decode_json(_parse_filter), lambda s: ConsumerFilterFile(s, {}), _resourced
    )


def read_consumer_order_info(store: str | Path) -> ConsumerOrderInfoFile:
    return _load(
        store,
        CONSUMER_ORDER_INFO,
        _decode_json(_parse_order_info),
        lambda s: ConsumerOrderInfoFile(s, {}),
        _resourced,
    )


def read_topic_queue_mapping(store: str | Path) -> TopicQueueMappingFile:
    return _load(
        store,
        TOPIC_QUEUE_MAPPING,
        _decode_json(_parse_mapping),
        lambda s: TopicQueueMappingFile(s, {}),
        _resourced,
    )


def read_message_request_mode(store: str | Path) -> MessageRequestModeFile:
    return _load(
        store,
        MESSAGE_REQUEST_MODE,
        _decode_json(_parse_request_mode),
        lambda s: MessageRequestModeFile(s, {}),
        _resourced,
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


def read_timer_checkpoint(store: str | Path) -> TimerCheckpoint:
    """An all-zero file (RocketMQ's fresh mmap) decodes like any other: zeros."""
    return _load(store, TIMER_CHECK, _decode_timer, lambda s: TimerCheckpoint(s), _resourced)


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
