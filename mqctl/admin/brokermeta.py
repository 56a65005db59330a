"""A live broker's metadata through RocketMQ's broker admin requests (AdminBrokerProcessor), and putting
back what it lacks: the online side of `mqctl metadata diff` and `mqctl metadata sync`.

Read: GET_ALL_TOPIC_CONFIG (21), GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201), GET_ALL_CONSUMER_OFFSET (43) and
GET_ALL_DELAY_OFFSET (45); their bodies are what the managers' encode() writes to config/, so the readers of
mqctl.store.metadata decode them. Write: UPDATE_AND_CREATE_TOPIC (17, the topic in the header),
UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200, SubscriptionGroupConfig as the JSON body) and
UPDATE_CONSUMER_OFFSET (15). No request sets a delay offset: those are copied offline only.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from mqctl.errors import ControllerError, MqctlError, RefusedError, UnreachableError
from mqctl.recover.metadata import ReplicaMetadata, SyncPlan, compare
from mqctl.store import metadata as md

__all__ = [
    "GET_ALL_CONSUMER_OFFSET",
    "GET_ALL_DELAY_OFFSET",
    "GET_ALL_SUBSCRIPTIONGROUP_CONFIG",
    "GET_ALL_TOPIC_CONFIG",
    "GET_BROKER_CONFIG",
    "GET_BROKER_RUNTIME_INFO",
    "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP",
    "UPDATE_AND_CREATE_TOPIC",
    "UPDATE_CONSUMER_OFFSET",
    "drift_of_sets",
    "fetch_broker_config",
    "fetch_replica",
    "lacking",
    "lacks",
    "live_drift",
    "push_plan",
    "replica_drift",
    "require_metadata",
    "sync_fix",
    "sync_source",
]

UPDATE_CONSUMER_OFFSET = 15
UPDATE_AND_CREATE_TOPIC = 17
GET_ALL_TOPIC_CONFIG = 21
GET_BROKER_CONFIG = 26
GET_BROKER_RUNTIME_INFO = 28
GET_ALL_CONSUMER_OFFSET = 43
GET_ALL_DELAY_OFFSET = 45
UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200
GET_ALL_SUBSCRIPTIONGROUP_CONFIG = 201


class _Answer(Protocol):
    code: int
    remark: str | None
    body: bytes


class _Connection(Protocol):
    def invoke(
        self, code: int, ext_fields: Any = None, body: bytes = b"", *, timeout: float = 5.0
    ) -> Any: ...


Connect = Callable[[str], _Connection]


def _open(connect: Connect, address: str) -> _Connection:
    from mqctl.remoting.client import RemotingError  # lazy: start-up

    try:
        return connect(address)
    except (RemotingError, OSError) as exc:
        raise UnreachableError(f"broker {address}: {exc}") from None


def _ask(
    conn: _Connection,
    address: str,
    code: int,
    name: str,
    timeout: float,
    fields: dict[str, str] | None = None,
    body: bytes = b"",
) -> bytes:
    from mqctl.remoting.client import RemotingError  # lazy: start-up

    try:
        answer: _Answer = conn.invoke(code, fields, body, timeout=timeout)
    except (RemotingError, OSError) as exc:
        raise UnreachableError(f"broker {address}: {name}: {exc}") from None
    if answer.code != 0:  # refused: exit 3, as a controller's refusal
        raise ControllerError(
            answer.code, f"broker {address} refused {name} (request {code}): {answer.remark or ''}"
        )
    return answer.body or b""


def fetch_replica(
    connect: Connect,
    address: str,
    *,
    broker_set: str | None = None,
    broker_id: int | None = None,
    timeout: float = 5.0,
    deadline: float | None = None,
) -> ReplicaMetadata:
    """What the broker at `address` holds now (its tables in memory, as it would persist them): each
    request answered within `timeout` seconds and, with a `deadline` (time.monotonic()), all by then."""
    conn = _open(connect, address)
    got: dict[str, Any] = {}
    for code, name, decode in (
        (GET_ALL_TOPIC_CONFIG, md.TOPICS, md.decode_topics),
        (GET_ALL_SUBSCRIPTIONGROUP_CONFIG, md.SUBSCRIPTION_GROUPS, md.decode_subscription_groups),
        (GET_ALL_CONSUMER_OFFSET, md.CONSUMER_OFFSETS, md.decode_consumer_offsets),
        (GET_ALL_DELAY_OFFSET, md.DELAY_OFFSETS, md.decode_delay_offsets),
    ):
        wait = timeout if deadline is None else min(timeout, deadline - time.monotonic())
        if wait <= 0:
            raise UnreachableError(f"broker {address}: {name}: no answer in time")
        body = _ask(conn, address, code, name, wait)
        got[name] = decode(body or b"{}", f"broker {address} ({name}, request {code})")
    return ReplicaMetadata(
        address,
        broker_set,
        broker_id,
        got[md.TOPICS].topics,
        got[md.SUBSCRIPTION_GROUPS].groups,
        got[md.CONSUMER_OFFSETS].offsets,
        got[md.DELAY_OFFSETS].offsets,
        {
            name: {"request": code, "broker": address}
            for name, code in (
                (md.TOPICS, GET_ALL_TOPIC_CONFIG),
                (md.SUBSCRIPTION_GROUPS, GET_ALL_SUBSCRIPTIONGROUP_CONFIG),
                (md.CONSUMER_OFFSETS, GET_ALL_CONSUMER_OFFSET),
                (md.DELAY_OFFSETS, GET_ALL_DELAY_OFFSET),
            )
        },
    )


def live_drift(
    connect: Connect, broker_set: str, replicas: Sequence[tuple[int, str]], *, timeout: float = 5.0
) -> dict[str, Any]:
    """The drift of a broker set from its live replicas ((brokerId, address) each): mqctl.recover.metadata's
    compare of what each broker answers, the one comparer of `metadata diff`, `health --doctor` and
    `switchover --require-metadata`."""
    return compare(
        [
            fetch_replica(connect, address, broker_set=broker_set, broker_id=bid, timeout=timeout)
            for bid, address in replicas
        ]
    )


def drift_of_sets(
    connect: Connect, table: Mapping[str, Mapping[str, Any]], *, timeout: float = 5.0
) -> dict[str, dict[str, Any]]:
    """`health --doctor`'s metadata check: the live_drift of each set of a GetSyncStateData table (as
    dicts) from its alive replicas; a set with fewer than two is left out, one whose brokers do not
    answer (or refuse) is {"error": why}."""
    out: dict[str, dict[str, Any]] = {}
    for name, info in sorted(table.items()):
        alive = sorted(
            (int(r["broker_id"]), str(r["broker_address"]))
            for r in (*info.get("in_sync_replicas", ()), *info.get("not_in_sync_replicas", ()))
            if r.get("alive") and r.get("broker_address")
        )
        if len(alive) < 2:
            continue
        try:
            out[name] = live_drift(connect, name, alive, timeout=timeout)
        except MqctlError as exc:
            out[name] = {"error": str(exc)}
    return out


LACKS = (
    ("topicsMissing", "topics"),
    ("groupsMissing", "subscription groups"),
    ("offsetsMissing", "consumer offsets"),
)


def lacks(drift: Mapping[str, Any], replica: str) -> dict[str, int]:
    """What ``replica`` (its address) lacks that another replica of the drift has, by kind (LACKS), the
    kinds it lacks nothing of left out. A consumer offset that is only behind is not lacking: a slave
    copies its master's every few seconds, and one behind costs redelivery, not a skip."""
    row = next((r for r in drift["replicas"] if r["replica"] == replica), None)
    if row is None:
        return {}
    return {what: int(row[key]) for key, what in LACKS if row[key]}


def lacking(drift: Mapping[str, Any], replica: str) -> dict[str, list[str]]:
    """What ``replica`` lacks that another replica of the drift has, by name: topics,
    subscriptionGroups and consumerOffsets ("topic@group", once however many queues), the kinds it
    lacks nothing of left out (lacks counts them)."""
    out = {
        "topics": sorted(e["topic"] for e in drift["topics"] if replica in e["missingFrom"]),
        "subscriptionGroups": sorted(
            e["group"] for e in drift["subscriptionGroups"] if replica in e["missingFrom"]
        ),
        "consumerOffsets": sorted(
            {f"{e['topic']}@{e['group']}" for e in drift["consumerOffsets"] if replica in e["missingFrom"]}
        ),
    }
    return {kind: names for kind, names in out.items() if names}


def sync_source(drift: Mapping[str, Any], replica: str, master: str | None) -> str:
    """The replica (address) `metadata sync` takes what ``replica`` lacks from: the master (its address,
    if compared) for a slave; for the master (a failover to a slave that had not copied them) the other
    replica that lacks the least."""
    names = [str(r["replica"]) for r in drift["replicas"]]
    if master is not None and master in names and replica != master:
        return master
    return min((a for a in names if a != replica), key=lambda a: sum(lacks(drift, a).values()))


def sync_fix(source: str, replica: str) -> str:
    return f"mqctl metadata sync --from {source} --to {replica} --dry-run (then without --dry-run)"


def replica_drift(
    connect: Connect, info: Mapping[str, Any], *, broker_set: str | None = None, timeout: float = 3.0
) -> dict[str, Any]:
    """`history`'s metadata of one set (a GetSyncStateData row, as a dict), replica by replica. Every
    registered replica is asked, the controller's alive flag aside (an old master that lost its lease
    may still answer, and only it may have what the new master lacks), at most ``timeout`` seconds each;
    one that does not answer is "unreachable" (refuses: "refused"; answers what cannot be read:
    "unreadable") and the others are still compared, with live_drift's comparer. Each replica that
    answered says what it lacks by name (lacking), and where from to sync it when it lacks anything."""
    replicas = sorted(
        (int(r["broker_id"]), str(r["broker_address"]), bool(r.get("alive")), insync)
        for insync, rows in (
            (True, info.get("in_sync_replicas", ())),
            (False, info.get("not_in_sync_replicas", ())),
        )
        for r in rows
        if r.get("broker_address")
    )
    master = info.get("master_broker_id")
    answered: list[ReplicaMetadata] = []
    rows: list[dict[str, Any]] = []
    for bid, address, alive, insync in replicas:
        row: dict[str, Any] = {
            "brokerId": bid,
            "address": address,
            "role": "master" if bid == master else "slave",
            "alive": alive,
            "inSyncStateSet": insync,
            "status": "answered",
            "error": None,
        }
        try:
            answered.append(
                fetch_replica(
                    connect,
                    address,
                    broker_set=broker_set,
                    broker_id=bid,
                    timeout=timeout,
                    deadline=time.monotonic() + timeout,
                )
            )
        except MqctlError as exc:
            row["status"] = (
                "unreachable"
                if isinstance(exc, UnreachableError)
                else "refused"
                if isinstance(exc, ControllerError)
                else "unreadable"
            )
            row["error"] = str(exc)
        rows.append(row)
    drift = compare(answered) if len(answered) > 1 else None
    master_address = next((a for b, a, *_ in replicas if b == master), None)
    for row in rows:
        row["lacks"] = row["syncFrom"] = row["fix"] = None
        if drift is None or row["status"] != "answered":
            continue
        row["lacks"] = lacking(drift, row["address"])
        if row["lacks"]:
            row["syncFrom"] = sync_source(drift, row["address"], master_address)
            row["fix"] = sync_fix(row["syncFrom"], row["address"])
    return {
        "masterBrokerId": master,
        "replicasCompared": len(answered) if drift else 0,
        "differs": drift["differs"] if drift else None,
        "replicas": rows,
    }


def require_metadata(
    connect: Connect,
    broker_set: str,
    master: tuple[int, str],
    candidate: tuple[int, str],
    *,
    timeout: float = 5.0,
) -> None:
    """`switchover --require-metadata`: refuse (RefusedError, exit 3) while the candidate ((brokerId,
    address)) lacks topics, subscription groups or consumer offsets the master has, with the sync that
    puts them back; a broker that does not answer refuses too (UnreachableError): nothing was checked."""
    drift = live_drift(connect, broker_set, [master, candidate], timeout=timeout)
    missing = lacks(drift, candidate[1])
    if missing:
        what = ", ".join(f"{n} {kind}" for kind, n in missing.items())
        raise RefusedError(
            f"broker {candidate[0]} of {broker_set} lacks {what} that the master {master[0]} "
            f"has: put them back first (mqctl metadata sync --from {master[1]} --to "
            f"{candidate[1]}), or switch over without --require-metadata"
        )


def _topic_header(t: md.TopicConfig) -> dict[str, str]:
    """CreateTopicRequestHeader; attributes as AttributeParser.parseToString writes them (+key=value)."""
    fields = {
        "topic": t.topic_name,
        "defaultTopic": "TBW102",
        "readQueueNums": str(t.read_queue_nums),
        "writeQueueNums": str(t.write_queue_nums),
        "perm": str(t.perm),
        "topicFilterType": t.topic_filter_type,
        "topicSysFlag": str(t.topic_sys_flag),
        "order": "true" if t.order else "false",
    }
    if t.attributes:
        fields["attributes"] = ",".join(f"+{k}={v}" for k, v in sorted(t.attributes.items()))
    return fields


def push_plan(connect: Connect, address: str, plan: SyncPlan, *, timeout: float = 5.0) -> list[str]:
    """Send what `plan` adds and sets to the broker at `address`, in order: topics, groups, offsets (an
    offset of a group the broker does not know yet would be refused). Returns what was done, one line
    each; stops at the first refusal (ControllerError naming the request)."""
    conn = _open(connect, address)
    done: list[str] = []
    for name, t in sorted(plan.topics_added.items()):
        _ask(conn, address, UPDATE_AND_CREATE_TOPIC, f"topic {name}", timeout, _topic_header(t))
        done.append(f"added topic {name}")
    for name, g in sorted(plan.groups_added.items()):
        body = json.dumps(g.to_json(), separators=(",", ":")).encode()
        _ask(conn, address, UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, f"group {name}", timeout, None, body)
        done.append(f"added group {name}")
    for o in plan.offsets_set:
        fields = {
            "consumerGroup": o["group"],
            "topic": o["topic"],
            "queueId": str(o["queueId"]),
            "commitOffset": str(o["to"]),
        }
        _ask(
            conn,
            address,
            UPDATE_CONSUMER_OFFSET,
            f"offset {o['topic']}@{o['group']} queue {o['queueId']}",
            timeout,
            fields,
        )
        done.append(
            f"set offset {o['topic']}@{o['group']} queue {o['queueId']}: "
            f"{'-' if o['from'] is None else o['from']} -> {o['to']}"
        )
    return done


def fetch_broker_config(connect: Connect, address: str, *, timeout: float = 5.0) -> tuple[str, str]:
    """(its configuration as `key=value` lines, GET_BROKER_CONFIG; its version, brokerVersionDesc of
    GET_BROKER_RUNTIME_INFO) of the broker at `address`."""
    conn = _open(connect, address)
    text = _ask(conn, address, GET_BROKER_CONFIG, "broker config", timeout).decode("utf-8", "replace")
    info = _ask(conn, address, GET_BROKER_RUNTIME_INFO, "runtime info", timeout)
    try:
        table = json.loads(info.decode("utf-8", "replace")).get("table", {}) if info else {}
    except ValueError:
        table = {}
    return text, str(table.get("brokerVersionDesc", ""))
