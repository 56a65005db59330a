"""A producer's requests over RocketMQ remoting (on mqctl.remoting.client.RemotingConnection, with its TLS
and ACL signing): SEND_MESSAGE_V2 (310, SendMessageRequestHeaderV2's one-letter fields), QUERY_MESSAGE
(12) by UNIQ_KEY (the broker's index, `_UNIQUE_KEY_QUERY`), GET_ROUTEINFO_BY_TOPIC (105) of a name
server. Request builders and answer readers only; mqctl.pipeline.replay drives them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mqctl.remoting import codec

SEND_MESSAGE_V2 = 310
QUERY_MESSAGE = 12
GET_ROUTEINFO_BY_TOPIC = 105

SUCCESS = 0
SYSTEM_ERROR = 1
SYSTEM_BUSY = 2
FLUSH_DISK_TIMEOUT = 10
SLAVE_NOT_AVAILABLE = 11
FLUSH_SLAVE_TIMEOUT = 12
MESSAGE_ILLEGAL = 13
SERVICE_NOT_AVAILABLE = 14
NO_PERMISSION = 16
TOPIC_NOT_EXIST = 17
QUERY_NOT_FOUND = 22
FLOW_CONTROL = 215

STORED = (SUCCESS, FLUSH_DISK_TIMEOUT, SLAVE_NOT_AVAILABLE, FLUSH_SLAVE_TIMEOUT)  # the master stored it
BUSY = (SYSTEM_BUSY, FLOW_CONTROL)  # flow control: not stored, retry later
CODE_NAMES = {
    SUCCESS: "SUCCESS",
    SYSTEM_ERROR: "SYSTEM_ERROR",
    SYSTEM_BUSY: "SYSTEM_BUSY",
    FLUSH_DISK_TIMEOUT: "FLUSH_DISK_TIMEOUT",
    SLAVE_NOT_AVAILABLE: "SLAVE_NOT_AVAILABLE",
    FLUSH_SLAVE_TIMEOUT: "FLUSH_SLAVE_TIMEOUT",
    MESSAGE_ILLEGAL: "MESSAGE_ILLEGAL",
    SERVICE_NOT_AVAILABLE: "SERVICE_NOT_AVAILABLE",
    NO_PERMISSION: "NO_PERMISSION",
    TOPIC_NOT_EXIST: "TOPIC_NOT_EXIST",
    QUERY_NOT_FOUND: "QUERY_NOT_FOUND",
    FLOW_CONTROL: "FLOW_CONTROL",
}
# MessageSysFlag: what a producer may set (compression and its type); the transaction bits and the
# IPv6 host bits are the broker's
SEND_SYSFLAG_MASK = 0x1 | (0x7 << 8)


def code_name(code: int) -> str:
    return f"{CODE_NAMES.get(code, 'CODE')} ({code})"


def properties_string(props: Mapping[str, str]) -> str:
    """MessageDecoder.messageProperties2String: name \\x01 value \\x02, each."""
    return "".join(f"{k}\x01{v}\x02" for k, v in props.items())


def send_header(
    *,
    group: str,
    topic: str,
    queue_id: int,
    sys_flag: int,
    born_timestamp: int,
    flag: int,
    properties: str,
    broker_name: str,
    reconsume_times: int = 0,
) -> dict[str, str]:
    """SendMessageRequestHeaderV2: a producerGroup, b topic, c defaultTopic (the topic itself: a
    replay never makes the broker create a topic from TBW102), d defaultTopicQueueNums, e queueId,
    f sysFlag, g bornTimestamp, h flag, i properties, j reconsumeTimes, k unitMode, m batch,
    n brokerName."""
    return {
        "a": group,
        "b": topic,
        "c": topic,
        "d": "4",
        "e": str(queue_id),
        "f": str(sys_flag & SEND_SYSFLAG_MASK),
        "g": str(born_timestamp),
        "h": str(flag),
        "i": properties,
        "j": str(reconsume_times),
        "k": "false",
        "m": "false",
        "n": broker_name,
    }


def query_uniq_header(topic: str, uniq_key: str, max_num: int = 32) -> dict[str, str]:
    """QueryMessageRequestHeader by UNIQ_KEY over the whole time range."""
    return {
        "topic": topic,
        "key": uniq_key,
        "maxNum": str(max_num),
        "beginTimestamp": "0",
        "endTimestamp": str((1 << 63) - 1),
        "_UNIQUE_KEY_QUERY": "true",
    }


def stored_uniq_keys(body: bytes) -> set[str]:
    """The UNIQ_KEY of each stored record in a QUERY_MESSAGE answer (the records as in the commitlog,
    one after the other; the index may answer other keys with the same hash)."""
    from mqctl.store.commitlog import RecordError, decode_properties, decode_record  # lazy: start-up

    out: set[str] = set()
    pos = 0
    while pos + 36 <= len(body):
        total = int.from_bytes(body[pos : pos + 4], "big", signed=True)
        phys = int.from_bytes(body[pos + 28 : pos + 36], "big", signed=True)
        if total <= 0 or pos + total > len(body):
            break
        try:
            rec = decode_record(body, pos, phys - pos, check_crc=False)
        except RecordError:
            break
        key = decode_properties(rec.properties).get("UNIQ_KEY")
        if key:
            out.add(key)
        pos += total
    return out


def read_route(body: bytes) -> dict[str, Any]:
    """TopicRouteData (fastjson): brokerDatas [{cluster, brokerName, brokerAddrs {id: addr}}],
    queueDatas [{brokerName, readQueueNums, writeQueueNums, perm}]."""
    doc = codec.fastjson_loads(body)
    if not isinstance(doc, dict):
        raise codec.BodyError("TopicRouteData: not a JSON object")
    return doc
