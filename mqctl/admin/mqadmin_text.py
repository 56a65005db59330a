"""``-o mqadmin``: the admin documents printed exactly as RocketMQ's mqadmin prints the same answers,
so that scripts written for mqadmin keep parsing (docs/admin.md#-o-mqadmin).

Each function takes the command's document (the JSON of docs/admin.md) and returns mqadmin's text,
byte for byte: the format strings of the sub-commands (tools/.../command/ha/GetSyncStateSetSubCommand,
broker/GetBrokerEpochSubCommand, controller/GetControllerMetaDataSubCommand, ReElectMasterSubCommand,
CleanControllerBrokerMetaSubCommand, UpdateControllerConfigSubCommand), Java's ``null`` for a null
``%d``/``%s``, and Java's HashMap iteration order where mqadmin iterates a HashMap or a HashSet (the
broker sets of getSyncStateSet, the broker addresses of getBrokerEpoch): ``hash_map_order``.

Pure functions; tests/interop compares them with RocketMQ's own mqadmin on the same state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

__all__ = [
    "broker_epoch_text",
    "clean_text",
    "elect_text",
    "hash_map_order",
    "java_long_hash",
    "java_split",
    "java_string_hash",
    "metadata_text",
    "sync_state_text",
    "update_config_text",
]

K = TypeVar("K")


def java_string_hash(text: str) -> int:
    """String.hashCode() as an unsigned 32-bit value (over UTF-16 code units)."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h


def java_long_hash(value: int) -> int:
    """Long.hashCode() as an unsigned 32-bit value."""
    v = value & 0xFFFFFFFFFFFFFFFF
    return (v ^ (v >> 32)) & 0xFFFFFFFF


def hash_map_order(keys: Iterable[K], hash_of: Callable[[Any], int] = java_string_hash) -> list[K]:
    """The iteration order of a java.util.HashMap (or HashSet) created empty and filled with ``keys``
    in this order: by bucket (``(h ^ h >>> 16) & (capacity - 1)``, capacity 16 doubled whenever the
    size passes 3/4 of it), and within a bucket in insertion order (a resize keeps it)."""
    unique = list(dict.fromkeys(keys))
    capacity = 16
    while len(unique) > capacity * 3 // 4:
        capacity *= 2

    def bucket(key: K) -> int:
        h = hash_of(key)
        return (h ^ (h >> 16)) & (capacity - 1)

    return [
        k for _, _, k in sorted(((bucket(k), i, k) for i, k in enumerate(unique)), key=lambda t: (t[0], t[1]))
    ]


def java_split(text: str, sep: str) -> list[str]:
    """String.split with a literal one-character separator: trailing empty strings removed."""
    parts = text.split(sep)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def _j(value: Any) -> str:
    """A value as Java's ``%s``/``%d`` prints it (null for None)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# --- getSyncStateSet ----------------------------------------------------------------------------


def _replica_identity(broker_name: str, r: Mapping[str, Any]) -> str:
    """BrokerReplicasInfo.ReplicaIdentity.toString()."""
    return (
        f"ReplicaIdentity{{brokerName='{_j(broker_name)}', brokerId={_j(r.get('brokerId'))}, "
        f"brokerAddress='{_j(r.get('brokerAddress'))}', alive={_j(bool(r.get('alive')))}}}"
    )


def sync_state_text(doc: Mapping[str, Any]) -> str:
    """GetSyncStateSetSubCommand.printData: per broker set of the answer (a HashMap), its head, then
    ``InSyncReplica:`` and ``NotInSyncReplica:`` lines."""
    by_name = {b["brokerName"]: b for b in doc.get("brokers") or []}
    out = []
    for name in hash_map_order(by_name):
        b = by_name[name]
        ins, outs = b.get("inSyncReplicas") or [], b.get("notInSyncReplicas") or []
        out.append(
            f"\n#brokerName\t{_j(name)}\n#MasterBrokerId\t{_j(b.get('masterBrokerId'))}\n"
            f"#MasterAddr\t{_j(b.get('masterAddress') or None)}\n"
            f"#MasterEpoch\t{_j(b.get('masterEpoch'))}\n"
            f"#SyncStateSetEpoch\t{_j(b.get('syncStateSetEpoch'))}\n#SyncStateSetNums\t{len(ins)}\n"
        )
        out.extend(f"\nInSyncReplica:\t{_replica_identity(name, r)}\n" for r in ins)
        out.extend(f"\nNotInSyncReplica:\t{_replica_identity(name, r)}\n" for r in outs)
    return "".join(out)


# --- getBrokerEpoch -----------------------------------------------------------------------------


def broker_epoch_text(doc: Mapping[str, Any]) -> str:
    """GetBrokerEpochSubCommand.printData: per broker address (a HashSet), the cache's clusterName,
    brokerName, the address and brokerId, one ``#Epoch:`` per entry (the last one's endOffset is the
    maxOffset: the document has it so already), then a newline. A broker that did not answer is left
    out (mqadmin stops there with an exception; mqctl reports it on stderr and exits 6)."""
    answered = [b for b in doc.get("brokers") or [] if not b.get("error")]
    # the HashSet is filled as CommandUtil does: per broker set (a HashSet of names), its brokerAddrs
    # (a HashMap by broker id); the insertion order only matters within a bucket
    sets: dict[str, list[Mapping[str, Any]]] = {}
    for b in answered:
        sets.setdefault(str(b.get("brokerName") or ""), []).append(b)
    by_addr: dict[str, Mapping[str, Any]] = {}
    for name in hash_map_order(sets):
        ids = {int(b.get("brokerId") or 0): b for b in sets[name]}
        for bid in hash_map_order(ids, java_long_hash):
            by_addr.setdefault(str(ids[bid].get("brokerAddr") or ""), ids[bid])
        for b in sets[name]:  # two answers with one id (a misconfigured set): all of them
            by_addr.setdefault(str(b.get("brokerAddr") or ""), b)
    out = []
    for addr in hash_map_order(by_addr):
        b = by_addr[addr]
        out.append(
            f"\n#clusterName\t{_j(b.get('clusterName'))}\n#brokerName\t{_j(b.get('brokerName'))}"
            f"\n#brokerAddr\t{_j(addr or None)}\n#brokerId\t{_j(b.get('brokerId'))}"
        )
        out.extend(
            f"\n#Epoch: EpochEntry{{epoch={e['epoch']}, startOffset={e['startOffset']}, "
            f"endOffset={e['endOffset']}}}"
            for e in b.get("epochs") or []
        )
        out.append("\n")
    return "".join(out)


# --- getControllerMetaData ----------------------------------------------------------------------


def peers_text(peers: Iterable[Mapping[str, Any]]) -> str:
    """The ``peers`` field of a 1005 answer rebuilt from the document's peers: DLedger's (and
    mqctl's) ``id:address;`` per member, or JRaft's bare ``address;`` when the controller gave no ids
    (mqctl.remoting.headers.parse_peers names only the JRaft leader, with its PeerId)."""
    items = list(peers)
    jraft = any(not p.get("raftAddress") for p in items)
    return "".join(
        f"{p.get('grpcAddress') or ''};" if jraft else f"{p.get('raftAddress')}:{p.get('grpcAddress') or ''};"
        for p in items
    )


def metadata_text(doc: Mapping[str, Any]) -> str:
    """GetControllerMetaDataSubCommand: group, leader id and address, one ``#Peer:`` per ``;`` item of
    the answer's ``peers`` (``peersText`` when the caller has the 1005 header's own, else rebuilt)."""
    out = [
        f"\n#ControllerGroup\t{_j(doc.get('group'))}",
        f"\n#ControllerLeaderId\t{_j(doc.get('controllerLeaderId'))}",
        f"\n#ControllerLeaderAddress\t{_j(doc.get('controllerLeaderAddress'))}",
    ]
    peers = doc.get("peersText")
    if peers is None:
        peers = peers_text(doc.get("peers") or [])
    if peers:
        out.extend(f"\n#Peer:\t{p}" for p in java_split(peers, ";"))
    out.append("\n")
    return "".join(out)


# --- electMaster, cleanBrokerMetadata, updateControllerConfig -------------------------------------


def elect_text(cluster_name: str, broker_name: str, result: Mapping[str, Any]) -> str:
    """ReElectMasterSubCommand: the -c and -bn given, then the answer's master address and epochs (no
    ``#Broker`` lines: mqadmin reads the ElectMasterResponseBody as a BrokerMemberGroup, whose
    brokerAddrs is then null)."""
    return (
        f"\n#ClusterName\t{_j(cluster_name)}\n#BrokerName\t{_j(broker_name)}"
        f"\n#BrokerMasterAddr\t{_j(result.get('masterAddress') or None)}"
        f"\n#MasterEpoch\t{_j(result.get('masterEpoch'))}"
        f"\n#SyncStateSetEpoch\t{_j(result.get('syncStateSetEpoch'))}\n"
    )


def clean_text(broker_name: str) -> str:
    """CleanControllerBrokerMetaSubCommand's success line (with its space before the newline)."""
    return f"clear broker {broker_name} metadata from controller success! \n"


def update_config_text(servers: list[str], key: str, value: str) -> str:
    """UpdateControllerConfigSubCommand: the -a list as Java's List.toString, then key : value."""
    return f"update controller config success![{', '.join(servers)}]\n{key} : {value}\n"
