"""RocketMQ header fields and bodies <-> the NodeAPI dicts (proto field names), per request code.

Both directions, so the server and the client share one table:

- server: ``decode_request(code, ext_fields, body) -> (method, request)`` and
  ``encode_response(method, result) -> (ext_fields, body)``;
- client: ``encode_request(method, request) -> (code, ext_fields, body)`` and
  ``decode_response(method, ext_fields, body) -> result``.

Header values travel as text (Java ``toString()``; booleans ``true``/``false``); a number that
does not parse is passed on as text so that the core answers 2005 naming the field, as it does
for gRPC. Keys that are not RocketMQ's are mqctl extensions (docs/remoting.md); RocketMQ ignores
unknown header keys and unknown body properties, so they are safe to send to it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, cast

from mqctl import methods
from mqctl.remoting.codec import (
    BodyError,
    IntKeys,
    fastjson_dumps,
    fastjson_loads,
    properties_dumps,
    properties_loads,
)

# RequestCode. The controller methods' codes are the method table's (mqctl.methods): the remoting
# door serves exactly ``methods.BY_REMOTING_CODE``; the codes below are the ones named in code.
REQUEST_CODES: dict[str, int] = {s.code_name: s.code for s in methods.METHODS if s.code is not None}
GET_METADATA_INFO = REQUEST_CODES["CONTROLLER_GET_METADATA_INFO"]
BROKER_HEARTBEAT = REQUEST_CODES["BROKER_HEARTBEAT"]
NOTIFY_BROKER_ROLE_CHANGED = REQUEST_CODES["NOTIFY_BROKER_ROLE_CHANGED"]  # pushed one-way by the controller
GET_BROKER_EPOCH_CACHE = 1007  # served by brokers (AdminBrokerProcessor), not by a controller
REQUEST_CODES["GET_BROKER_EPOCH_CACHE"] = GET_BROKER_EPOCH_CACHE
GET_BROKER_CLUSTER_INFO = 106  # served by name servers (mqadmin's -n), not by a controller
REQUEST_CODES["GET_BROKER_CLUSTER_INFO"] = GET_BROKER_CLUSTER_INFO

# The mqctl extension header that carries the bearer token of `mqctl serve --token` (admin calls).
TOKEN_KEY = "mqctlToken"

STR, INT, BOOL = methods.STR, methods.INT, methods.BOOL
Field = methods.Field

# NotifyBrokerRoleChangedRequestHeader: the 1008 the controller pushes (WatchRoleChanges' row)
ROLE_CHANGE_FIELDS: tuple[Field, ...] = methods.spec("WatchRoleChanges").remoting_codec.request

_JAVA_LONG = re.compile(r"[+-]?[0-9]+\Z")


# ---------------------------------------------------------------------------------------------
# Header values


def to_text(value: Any) -> str:
    """Java ``toString()`` of a header field."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def from_text(kind: str, text: str) -> Any:
    """Parse a header value as RocketMQ does (Long.parseLong, Boolean.parseBoolean)."""
    if kind == INT:
        if text.isdigit() and text.isascii():  # the usual header: ASCII digits only
            return int(text)
        return int(text) if _JAVA_LONG.match(text) else text  # unparsable: the core answers 2005
    if kind == BOOL:
        return text.lower() == "true"
    return text


def header_to_dict(fields: tuple[Field, ...], ext: Mapping[str, str] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, name, kind in fields:
        if ext is not None and key in ext:
            out[name] = from_text(kind, ext[key])
    return out


def dict_to_header(fields: tuple[Field, ...], d: Mapping[str, Any], *, skip_empty: bool) -> dict[str, str]:
    """None is omitted (fastjson drops nulls); with ``skip_empty`` an empty string too, because
    RocketMQ has null where the core has "" (masterAddress with no master)."""
    out: dict[str, str] = {}
    for key, name, _kind in fields:
        value = d.get(name)
        if value is None or (skip_empty and value == ""):
            continue
        out[key] = to_text(value)
    return out


# ---------------------------------------------------------------------------------------------
# Bodies


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, str) and _JAVA_LONG.match(value):
            return int(value)
        raise BodyError(f"{what} is not an integer: {value!r}")
    return value


def _obj(value: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise BodyError(f"{what} is not a JSON object")
    return value


def _list(value: Any, what: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise BodyError(f"{what} is not a JSON array")
    return value


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _camel_dict(d: Mapping[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {camel(k): d[k] for k in keys if d.get(k) is not None}


def _snake_dict(d: Mapping[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: d[camel(k)] for k in keys if d.get(camel(k)) is not None}


def sync_state_set_body(d: Mapping[str, Any]) -> bytes:
    """SyncStateSet: {"syncStateSet":[1,2],"syncStateSetEpoch":3}."""
    return fastjson_dumps(
        {
            "syncStateSet": [int(x) for x in d.get("sync_state_set") or []],
            "syncStateSetEpoch": int(d.get("sync_state_set_epoch", 0)),
        }
    )


def read_sync_state_set(body: bytes) -> dict[str, Any]:
    doc = _obj(fastjson_loads(body), "the SyncStateSet body")
    return {
        "sync_state_set": sorted(
            {_int(x, "syncStateSet id") for x in _list(doc.get("syncStateSet"), "syncStateSet")}
        ),
        "sync_state_set_epoch": _int(doc.get("syncStateSetEpoch", 0), "syncStateSetEpoch"),
    }


def elect_master_body(d: Mapping[str, Any]) -> bytes:
    """ElectMasterResponseBody: brokerMemberGroup (Map<Long,String> brokerAddrs) and syncStateSet."""
    doc: dict[str, Any] = {"syncStateSet": [int(x) for x in d.get("sync_state_set") or []]}
    group = d.get("broker_member_group")
    if group:
        doc["brokerMemberGroup"] = {
            "cluster": group.get("cluster"),
            "brokerName": group.get("broker_name"),
            "brokerAddrs": IntKeys({int(k): str(v) for k, v in (group.get("broker_addrs") or {}).items()}),
        }
    return fastjson_dumps(doc)


def read_elect_master_body(body: bytes) -> dict[str, Any]:
    doc = _obj(fastjson_loads(body), "the ElectMasterResponseBody")
    out: dict[str, Any] = {
        "sync_state_set": sorted(
            _int(x, "syncStateSet id") for x in _list(doc.get("syncStateSet"), "syncStateSet")
        )
    }
    group = doc.get("brokerMemberGroup")
    if group is not None:
        group = _obj(group, "brokerMemberGroup")
        addrs = _obj(group.get("brokerAddrs") or {}, "brokerAddrs")
        out["broker_member_group"] = {
            "cluster": str(group.get("cluster") or ""),
            "broker_name": str(group.get("brokerName") or ""),
            "broker_addrs": {_int(k, "brokerAddrs key"): str(v) for k, v in addrs.items()},
        }
    return out


REPLICA_IDENTITY_KEYS = (
    "broker_name",
    "broker_id",
    "broker_address",
    "alive",
    # mqctl extensions
    "heartbeat_age_ms",
    "epoch",
    "max_offset",
    "confirm_offset",
    "election_priority",
    "broker_epoch",
)
REPLICAS_INFO_KEYS = (
    "master_broker_id",
    "master_address",
    "master_epoch",
    "sync_state_set_epoch",
    "cluster_name",
    # mqctl extensions, only while a set's failover is paused (`mqctl failover pause`)
    "failover_paused",
    "failover_pause_reason",
)


def sync_state_data_body(d: Mapping[str, Any]) -> bytes:
    """BrokerReplicasInfo: {"replicasInfoTable":{name: ReplicasInfo}} (broker names stay as they are)."""
    table = {}
    for name, info in (d.get("replicas_info_table") or {}).items():
        doc = _camel_dict(info, REPLICAS_INFO_KEYS)
        for key in ("in_sync_replicas", "not_in_sync_replicas"):
            doc[camel(key)] = [_camel_dict(r, REPLICA_IDENTITY_KEYS) for r in info.get(key) or []]
        table[name] = doc
    return fastjson_dumps({"replicasInfoTable": table})


def read_sync_state_data(body: bytes) -> dict[str, Any]:
    doc = _obj(fastjson_loads(body), "the BrokerReplicasInfo body")
    table: dict[str, Any] = {}
    for name, info in _obj(doc.get("replicasInfoTable") or {}, "replicasInfoTable").items():
        info = _obj(info, f"replicasInfoTable[{name!r}]")
        entry = _snake_dict(info, REPLICAS_INFO_KEYS)
        for key in ("in_sync_replicas", "not_in_sync_replicas"):
            entry[key] = [
                _snake_dict(_obj(r, "ReplicaIdentity"), REPLICA_IDENTITY_KEYS)
                for r in _list(info.get(camel(key)), camel(key))
            ]
        table[str(name)] = entry
    return {"replicas_info_table": table}


def read_broker_names(body: bytes) -> list[str]:
    names = _list(fastjson_loads(body), "the broker name list")
    if not all(isinstance(n, str) for n in names):
        raise BodyError("the broker name list holds something else than strings")
    return names


METADATA_KEYS = (
    "group",
    "group_id",
    "controller_leader_id",
    "controller_leader_address",
    "is_leader",
    "self_id",
    "term",
    "commit_index",
    "last_applied",
    "has_quorum",
    "state_hash",
    "state",
    "log_length",
)
PEER_KEYS = (
    "raft_address",
    "grpc_address",
    "remoting_address",
    "is_leader",
    "is_self",
    "connected",
    "match_index",
    "next_index",
)


def metadata_view(meta: Mapping[str, Any]) -> dict[str, Any]:
    """node.metadata() as a remoting client sees it: the leader address is the leader's remoting
    address, and peers is DLedger's "id:address;" string (id = Raft address)."""
    view = dict(meta)
    peers = list(meta.get("peers") or [])
    leader = next((p for p in peers if p.get("is_leader")), None)
    view["controller_leader_address"] = str(leader.get("remoting_address") or "") if leader else ""
    view["peers"] = "".join(f"{p.get('raft_address', '')}:{p.get('remoting_address') or ''};" for p in peers)
    view["peer_list"] = peers
    return view


_PEER_ITEM = re.compile(r"(?:(?P<ident>.*):)?(?P<addr>(?:\[[^\]]*\]|[^:\[\]]*):[0-9]+)")


def parse_peers(text: str, leader_id: str, leader_address: str = "") -> list[dict[str, Any]]:
    """The ``peers`` text of a CONTROLLER_GET_METADATA_INFO (1005) answer -> peers (id as
    raft_address, the address clients use as grpc_address, as the Peer dataclass names it).

    Both of RocketMQ's controller modes:

    - DLedger (DLedgerController.getControllerMetadata): ``id + ":" + address + ";"`` per member of
      the DLedger peer map, ``n0:127.0.0.1:9878;n1:127.0.0.1:9868;``, and the leader's id
      (``n0``) as controllerLeaderId (mqctl's own answer has Raft addresses as ids:
      ``127.0.0.1:9880:127.0.0.1:9878;``);
    - JRaft (JRaftController.getControllerMetadata): the controller RPC address of each peer of
      the initial configuration, ``127.0.0.1:9770;127.0.0.1:9771;``, with the leader's PeerId (its
      Raft endpoint, ``127.0.0.1:9880``, not in the list) as controllerLeaderId and its RPC address
      as controllerLeaderAddress. A JRaft peer has no id here; the leader gets ``leader_id``.

    The leader is the peer whose id is ``leader_id``, or, without ids, whose address is
    ``leader_address``. An item without a HOST:PORT (JRaft writes ``null`` for a peer without an
    RPC address; mqctl writes ``id:`` for a node without a remoting door) is an id without an
    address.
    """
    peers = []
    for raw in text.split(";"):
        item = raw.strip()
        if not item:
            continue
        m = _PEER_ITEM.fullmatch(item)
        if m is None:  # "null", or mqctl's "id:" of a node without a remoting address
            ident, addr = item[:-1] if item.endswith(":") else item, ""
        else:
            ident, addr = m.group("ident") or "", m.group("addr")
        if ident:
            is_leader = bool(leader_id) and ident == leader_id
        else:
            is_leader = bool(leader_address) and addr == leader_address
            ident = leader_id if is_leader else ""
        peers.append(
            {
                "raft_address": ident,
                "grpc_address": addr,
                "remoting_address": addr,
                "is_leader": is_leader,
            }
        )
    return peers


def _dump_nested(
    d: Mapping[str, Any], keys: tuple[str, ...], items: str, item_keys: tuple[str, ...], name: str
) -> bytes:
    """A body of ``keys`` and one list ``name`` of objects of ``item_keys`` (from ``d[items]``)."""
    doc = _camel_dict(d, keys)
    doc[name] = [_camel_dict(x, item_keys) for x in d.get(items) or []]
    return fastjson_dumps(doc)


def _load_nested(
    body: bytes,
    what: tuple[str, str],
    keys: tuple[str, ...],
    name: str,
    item_keys: tuple[str, ...],
    items: str,
    *,
    ints: tuple[str, ...] = (),
    item_ints: bool = False,
) -> dict[str, Any]:
    """``_dump_nested`` read back; ``what`` names the body and an item in the errors, ``ints`` the
    keys read as integers (``item_ints``: every key of an item)."""
    doc = _obj(fastjson_loads(body), what[0])
    out = _snake_dict(doc, keys)
    for key in ints:
        if key in out:
            out[key] = _int(out[key], camel(key))
    out[items] = [
        {
            k: _int(v, camel(k)) if item_ints else v
            for k, v in _snake_dict(_obj(x, what[1]), item_keys).items()
        }
        for x in _list(doc.get(name), name)
    ]
    return out


def metadata_body(view: Mapping[str, Any]) -> bytes:
    return _dump_nested(view, METADATA_KEYS, "peer_list", PEER_KEYS, "peers")


def read_metadata_body(body: bytes) -> dict[str, Any]:
    return _load_nested(body, ("the metadata body", "peer"), METADATA_KEYS, "peers", PEER_KEYS, "peers")


EPOCH_CACHE_KEYS = ("cluster_name", "broker_name", "broker_id", "max_offset")
EPOCH_ENTRY_KEYS = ("epoch", "start_offset", "end_offset")


def epoch_cache_body(d: Mapping[str, Any]) -> bytes:
    """EpochEntryCache (the GET_BROKER_EPOCH_CACHE body a broker answers)."""
    return _dump_nested(d, EPOCH_CACHE_KEYS, "epoch_list", EPOCH_ENTRY_KEYS, "epochList")


def read_epoch_cache(body: bytes) -> dict[str, Any]:
    return _load_nested(
        body,
        ("the EpochEntryCache body", "EpochEntry"),
        EPOCH_CACHE_KEYS,
        "epochList",
        EPOCH_ENTRY_KEYS,
        "epoch_list",
        ints=("broker_id", "max_offset"),
        item_ints=True,
    )


def read_cluster_info(body: bytes) -> dict[str, Any]:
    """ClusterInfo, a name server's answer to GET_BROKER_CLUSTER_INFO (106):
    ``{"brokerAddrTable": {name: BrokerData}, "clusterAddrTable": {cluster: [names]}}``, BrokerData
    ``{"cluster", "brokerName", "brokerAddrs": {id: address}}`` (fastjson writes the Long ids bare)
    -> ``{"broker_addr_table": {name: {"cluster", "broker_name", "broker_addrs": {id: address}}},
    "cluster_addr_table": {cluster: [names]}}``, in the body's order."""
    doc = _obj(fastjson_loads(body), "the ClusterInfo body")
    brokers: dict[str, Any] = {}
    for name, data in _obj(doc.get("brokerAddrTable") or {}, "brokerAddrTable").items():
        data = _obj(data, f"brokerAddrTable[{name!r}]")
        addrs = _obj(data.get("brokerAddrs") or {}, "brokerAddrs")
        brokers[str(name)] = {
            "cluster": str(data.get("cluster") or ""),
            "broker_name": str(data.get("brokerName") or name),
            "broker_addrs": {_int(k, "brokerAddrs key"): str(v) for k, v in addrs.items()},
        }
    clusters: dict[str, list[str]] = {}
    for cluster, names in _obj(doc.get("clusterAddrTable") or {}, "clusterAddrTable").items():
        clusters[str(cluster)] = [str(n) for n in _list(names, f"clusterAddrTable[{cluster!r}]")]
    return {"broker_addr_table": brokers, "cluster_addr_table": clusters}


def rocketmq_nulls(result: Mapping[str, Any]) -> Mapping[str, Any]:
    """A GetSyncStateData answer with RocketMQ's nulls where the core has "": a broker set without a master
    has masterAddress null in RocketMQ's BrokerReplicasInfo (ReplicasInfoManager.getSyncStateData,
    fastjson leaves it out), which mqadmin getSyncStateSet prints as ``#MasterAddr\tnull``; an empty
    string would print as nothing. (Response headers leave empty strings out already.)"""
    table = result.get("replicas_info_table")
    if not isinstance(table, dict):
        return result
    fixed = {
        name: (
            {k: v for k, v in info.items() if not (k == "master_address" and v == "")}
            if isinstance(info, dict)
            else info
        )
        for name, info in table.items()
    }
    return {**result, "replicas_info_table": fixed}


# ---------------------------------------------------------------------------------------------
# The bodies the method table's rows name (methods.RemotingCodec)


class Body:
    """One body of a method: ``dump`` writes it from the dict (proto field names), ``load`` reads
    it into the dict; ``view`` is the dict the header fields are written from (the same dict but for
    GetMetadata)."""

    def __init__(
        self,
        dump: Callable[[Mapping[str, Any]], bytes],
        load: Callable[[bytes, dict[str, Any]], None],
        view: Callable[[Mapping[str, Any]], Mapping[str, Any]] = lambda d: d,
    ) -> None:
        self.dump, self.load, self.view = dump, load, view


def _load_new_sync_state_set(body: bytes, request: dict[str, Any]) -> None:
    if body:
        sss = read_sync_state_set(body)
        request["new_sync_state_set"] = sss["sync_state_set"]
        request["sync_state_set_epoch"] = sss["sync_state_set_epoch"]


def _dump_new_sync_state_set(request: Mapping[str, Any]) -> bytes:
    return sync_state_set_body(
        {
            "sync_state_set": request.get("new_sync_state_set") or [],
            "sync_state_set_epoch": request.get("sync_state_set_epoch", 0),
        }
    )


def _load_broker_names(body: bytes, request: dict[str, Any]) -> None:
    # mqctl: no body or an empty list = every broker set (RocketMQ answers code 1)
    request["broker_names"] = read_broker_names(body) if body else []


def _load_config(body: bytes, d: dict[str, Any]) -> None:
    # RocketMQ reads the body as new String(body, UTF-8): bytes that are not UTF-8 become U+FFFD
    d["config"] = properties_loads(body.decode("utf-8", errors="replace").encode("utf-8")) if body else {}


def _dump_sync_state_set(d: Mapping[str, Any]) -> bytes:
    sss = d.get("sync_state_set")
    return sync_state_set_body(sss) if isinstance(sss, Mapping) else b""


def _load_sync_state_set(body: bytes, d: dict[str, Any]) -> None:
    if body:
        d["sync_state_set"] = read_sync_state_set(body)


def _load_metadata(body: bytes, d: dict[str, Any]) -> None:
    if body:
        detail = read_metadata_body(body)
        d.update({k: v for k, v in detail.items() if k not in d or k == "peers"})
    else:
        d["peers"] = parse_peers(
            str(d.get("peers") or ""),
            str(d.get("controller_leader_id") or ""),
            str(d.get("controller_leader_address") or ""),
        )


def _loading(read: Callable[[bytes], dict[str, Any]]) -> Callable[[bytes, dict[str, Any]], None]:
    def load(body: bytes, d: dict[str, Any]) -> None:
        if body:
            d.update(read(body))

    return load


NEW_SYNC_STATE_SET = Body(_dump_new_sync_state_set, _load_new_sync_state_set)
BROKER_NAMES = Body(
    lambda request: fastjson_dumps([str(n) for n in request.get("broker_names") or []]), _load_broker_names
)
CONFIG = Body(lambda d: properties_dumps(d.get("config") or {}), _load_config)
SYNC_STATE_SET = Body(_dump_sync_state_set, _load_sync_state_set)
ELECT_MASTER = Body(elect_master_body, _loading(read_elect_master_body))
SYNC_STATE_DATA = Body(lambda d: sync_state_data_body(rocketmq_nulls(d)), _loading(read_sync_state_data))
METADATA = Body(metadata_body, _load_metadata, metadata_view)


# ---------------------------------------------------------------------------------------------
# Requests and responses


def _codec(method: str) -> methods.RemotingCodec:
    return methods.spec(method).remoting_codec


def _body(ref: str) -> Body | None:
    return cast(Body, methods.resolve(ref)) if ref else None


def decode_request(code: int, ext: Mapping[str, str] | None, body: bytes) -> tuple[str, dict[str, Any]]:
    """Server side. KeyError for a code this front door does not serve; BodyError for a bad body."""
    row = methods.BY_REMOTING_CODE[code]
    request = header_to_dict(row.remoting_codec.request, ext)
    reader = _body(row.remoting_codec.request_body)
    if reader is not None:
        reader.load(body, request)
    return row.name, request


def encode_response(method: str, result: Mapping[str, Any]) -> tuple[dict[str, str], bytes]:
    """Server side: the NodeAPI answer -> (extFields, body). ``code``/``remark`` travel in the frame."""
    codec = _codec(method)
    writer = _body(codec.response_body)
    view = result if writer is None else writer.view(result)
    ext = dict_to_header(codec.response, view, skip_empty=True)
    return ext, (b"" if writer is None else writer.dump(view))


def encode_request(method: str, request: Mapping[str, Any]) -> tuple[int, dict[str, str], bytes]:
    """Client side: a request dict -> (code, extFields, body)."""
    row = methods.spec(method)
    if row.remoting_code is None:
        raise KeyError(method)
    ext = dict_to_header(row.remoting_codec.request, request, skip_empty=False)
    writer = _body(row.remoting_codec.request_body)
    return row.remoting_code, ext, (b"" if writer is None else writer.dump(request))


def decode_response(method: str, ext: Mapping[str, str] | None, body: bytes) -> dict[str, Any]:
    """Client side: (extFields, body) -> the answer dict with proto field names."""
    codec = _codec(method)
    out = header_to_dict(codec.response, ext)
    reader = _body(codec.response_body)
    if reader is not None:
        reader.load(body, out)
    return out
