"""The controller's methods, once: one row per method of ``mqctl.v1.Controller``.

A row owns or names everything about its method:

- who sends it, who answers it (``kind``: through the Raft log, after a read barrier, from the
  asked node, or the node itself), and its token rule;
- its typed request (``message``, read once from the transports' dict by ``core.decode``) and the
  core's rule that decides it (``rule_ref``);
- its gRPC messages (``request_type``/``response_type`` in mqctl/v1/controller.proto);
- its RocketMQ remoting form (``code`` and ``remoting_codec``: header fields and bodies);
- its typed response (``response``): what the rule answers, written as the transports' dict in one
  place (``core.Result.answer``) and read back into the same class by the clients.

The transports, both clients, the node and the docs (the method tables of docs/grpc-api.md and
docs/remoting.md, ``tools/gen-docs``) read the table when they are asked, so a method is added by
one row (``METHODS`` here, or ``register`` for a plugin or a test) plus its rule and its request and
response classes;
tests/test_methods.py adds one that way and calls it on both transports.

**The token policy** (``requires_token``; the only copy): with ``mqctl serve --token``, the mutating
admin calls need the token on every transport: ``CleanBrokerData``, ``UpdateConfig``, ``ChangeQuorum``,
``PauseFailover``, ``Switchover``, ``Rebalance`` always, and ``ElectMaster`` when ``designate_elect`` is
true. A designated election names the new master by an operator's choice (RocketMQ's
``ElectMasterRequestHeader.ofAdminTrigger``) and is an admin action; an election a broker asks for
itself (``designate_elect`` false, RocketMQ's ``ofBrokerTrigger``, or the controller's own with broker
id -1) is not: the core's election rules pick the master, and brokers cannot send the token (RocketMQ's
brokers do not know it).

Importing this module is cheap (no grpc, no protobuf): the proto classes are looked up by name
when ``MethodSpec.types()`` is called, so the CLI stays fast.
"""

from __future__ import annotations

import enum
import functools
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from mqctl.errors import Code

if TYPE_CHECKING:  # pragma: no cover
    from google.protobuf.message import Message

__all__ = [
    "BOOL",
    "BY_NAME",
    "BY_REMOTING_CODE",
    "FRESH_READ_METHODS",
    "INT",
    "LOCAL_READ_METHODS",
    "METHODS",
    "NODE_METHODS",
    "RETRY_ANY",
    "STR",
    "WRITE_METHODS",
    "Caller",
    "Entry",
    "Field",
    "Kind",
    "MethodSpec",
    "RemotingCodec",
    "Token",
    "check_token",
    "names",
    "register",
    "requires_token",
    "resolve",
    "spec",
    "unauthenticated",
    "unregister",
]

PROTO_SERVICE = "mqctl.v1.Controller"


STR, INT, BOOL = "str", "int", "bool"
Field = tuple[str, str, str]  # (RocketMQ header key, proto dict key, kind)


@dataclass(frozen=True)
class RemotingCodec:
    """How a method travels over RocketMQ remoting (mqctl.remoting.headers reads it): the header
    fields of its request and its response, and its bodies, each named "module:object" (an
    ``mqctl.remoting.headers.Body``; "": none)."""

    request: tuple[Field, ...] = ()
    response: tuple[Field, ...] = ()
    request_body: str = ""
    response_body: str = ""


class Kind(enum.Enum):
    """How the node answers a method."""

    LOCAL_READ = "local read"  # from the asked node's replicated state, no barrier (GetConfig)
    FRESH_READ = "fresh read"  # on the leader, after a replicated read barrier
    WRITE = "write"  # on the leader, decided and applied through the Raft log
    NODE = "node"  # node-level, outside the state machine (metadata, quorum, watches, heartbeats)


class Caller(enum.Enum):
    """Who sends it."""

    BROKER = "broker"
    ADMIN = "admin"
    ANY = "broker, admin"


class Token(enum.Enum):
    """When ``mqctl serve --token``'s token is required."""

    NEVER = "no"
    ALWAYS = "**yes**"
    DESIGNATED = "**yes** when `designate_elect` is true"


class Entry(enum.Enum):
    """The NodeAPI entry point that answers (docs/architecture.md)."""

    CALL = "call"  # NodeAPI.call(method, request); HeartbeatStream: call("Heartbeat", beat) per beat
    METADATA = "metadata"  # NodeAPI.metadata()
    WATCH = "watch"  # NodeAPI.watch(cluster_name, broker_name), a stream


_CORE = "mqctl.controller.core"
_RESOLVED: dict[str, Any] = {}


def resolve(ref: str) -> Any:
    """ "module:attribute" -> the attribute, imported once."""
    found = _RESOLVED.get(ref)
    if found is None:
        module, _, attr = ref.partition(":")
        found = _RESOLVED[ref] = getattr(importlib.import_module(module), attr)
    return found


_BODIES = "mqctl.remoting.headers:"  # where the remoting bodies are written and read


_WHERE = {
    Kind.LOCAL_READ: "the node asked",
    Kind.FRESH_READ: "leader, after a read barrier",
    Kind.WRITE: "leader (write, through the Raft log)",
}


@dataclass(frozen=True)
class MethodSpec:
    """One controller method. ``name`` is the NodeAPI method name and the proto RPC name."""

    name: str
    kind: Kind
    caller: Caller
    token: Token
    doc: str  # one line
    code: int | None = None  # RocketMQ RequestCode of this method (None: an mqctl extension)
    code_name: str = ""  # ... and its constant name in RocketMQ's RequestCode
    remoting: bool | None = None  # served by `mqctl serve --remoting-port` under ``code``; default:
    # when it has a code
    entry: Entry = Entry.CALL
    streaming: bool = False  # server-streaming RPC
    client_streaming: bool = False  # ... and client-streaming too (bidirectional)
    mutating: bool | None = None  # changes controller state; default: kind is WRITE
    idempotent: bool = False  # a repeat has the effect of one call for its caller: retried as a read
    where: str = ""  # who answers, for the docs; default from ``kind``
    grpc_method: str = ""  # default: ``name``
    request_type: str = ""  # message name in mqctl/v1/controller.proto; default NameRequest
    response_type: str = ""  # default NameResponse
    remoting_body: str = ""  # what the remoting request/response body holds, for the docs
    # The core's rule that decides it: "module:function" (".brokers:heartbeat": in the core), taking
    # (state, typed request, context) and returning a core.Result; "" for a node-level method. Named,
    # not imported, to keep this module cheap.
    rule_ref: str = ""
    # The typed request, "module:Class" with a ``read(mapping)`` classmethod and a ``METHOD`` name:
    # what the node decodes the transports' dict into, once. Default: ``{name}Request`` beside the
    # rule, so that a request is read and decided in one module.
    message: str = ""
    remoting_codec: RemotingCodec = RemotingCodec()
    # The typed response, "module:Class" (".brokers:NextBrokerIdResult": in the core): what the rule
    # answers (``to_dict``: the transports' dict) and the clients read back (``from_dict``); "":
    # the dict as it is. Default: an answer without fields.
    response: str = _CORE + ".responses:Ack"

    def __post_init__(self) -> None:
        defaults = {
            "remoting": self.code is not None if self.remoting is None else self.remoting,
            "mutating": self.kind is Kind.WRITE if self.mutating is None else self.mutating,
            "where": self.where or _WHERE.get(self.kind, ""),
            "grpc_method": self.grpc_method or self.name,
            "request_type": self.request_type or f"{self.name}Request",
            "response_type": self.response_type or f"{self.name}Response",
            "rule_ref": _CORE + self.rule_ref if self.rule_ref.startswith(".") else self.rule_ref,
            "message": self.message or self._beside_the_rule(f"{self.name}Request"),
            "response": _CORE + self.response if self.response.startswith(".") else self.response,
        }
        for key, value in defaults.items():
            object.__setattr__(self, key, value)
        if self.remoting and self.code is None:
            raise ValueError(f"{self.name}: served over remoting without a request code")
        if self.code is not None and not self.code_name:
            raise ValueError(f"{self.name}: request code {self.code} without its RocketMQ name")
        if self.mutating and self.caller is not Caller.BROKER and self.token is Token.NEVER:
            raise ValueError(f"{self.name}: a mutating admin method must require the token")
        if self.client_streaming and not self.streaming:
            raise ValueError(f"{self.name}: a client stream is answered by a stream (bidirectional)")
        if self.kind is not Kind.NODE and not self.rule_ref:
            raise ValueError(f"{self.name}: a {self.kind.value} is decided by a rule of the core")
        if self.token is Token.DESIGNATED and self.name != "ElectMaster":
            raise ValueError(f"{self.name}: only ElectMaster has a designated (admin) form")

    def _beside_the_rule(self, name: str) -> str:
        ref = _CORE + self.rule_ref if self.rule_ref.startswith(".") else self.rule_ref
        return f"{ref.partition(':')[0]}:{name}" if ref else ""

    @property
    def remoting_code(self) -> int | None:
        """The request code the remoting door serves for this method (None: not served)."""
        return self.code if self.remoting else None

    @property
    def retry_any(self) -> bool:
        """Clients retry it on any transient failure (it changes no controller state, or a repeat
        changes nothing more for its caller); other mutating calls are retried only when they surely
        were not executed."""
        return not self.mutating or self.idempotent

    @property
    def grpc_path(self) -> str:
        return f"/{PROTO_SERVICE}/{self.grpc_method}"

    @functools.cached_property
    def rule(self) -> Callable[..., Any]:
        """The core's rule for this method (imported on first use; an attribute after it, for the
        heartbeat's hot path)."""
        return cast("Callable[..., Any]", resolve(self.rule_ref))

    @functools.cached_property
    def read(self) -> Callable[[Mapping[str, Any]], Any]:
        """The typed request class's ``read`` (imported on first use)."""
        return cast("Callable[[Mapping[str, Any]], Any]", resolve(self.message).read)

    def typed_answer(self, answer: Mapping[str, Any]) -> Any:
        """An answer as the clients return it: the response class (imported on first use), or the dict."""
        return resolve(self.response).from_dict(answer) if self.response else dict(answer)

    def types(self) -> tuple[type[Message], type[Message]]:
        """(request class, response class) from mqctl.v1.controller_pb2 (imported here, lazily)."""
        proto = "mqctl.v1.controller_pb2:"
        return (
            cast("type[Message]", resolve(proto + self.request_type)),
            cast("type[Message]", resolve(proto + self.response_type)),
        )


METHODS: tuple[MethodSpec, ...] = (
    MethodSpec(
        "GetMetadata",
        Kind.NODE,
        Caller.ANY,
        Token.NEVER,
        "The answering node's view of the controller group: leader, peers, term, commit index, state hash.",
        code=1005,
        code_name="CONTROLLER_GET_METADATA_INFO",
        entry=Entry.METADATA,
        where="any node",
        remoting_body="response: the whole answer as JSON (mqctl extension)",
        remoting_codec=RemotingCodec(
            response=(
                ("group", "group", STR),
                ("controllerLeaderId", "controller_leader_id", STR),
                ("controllerLeaderAddress", "controller_leader_address", STR),
                ("isLeader", "is_leader", BOOL),
                ("peers", "peers", STR),
            ),
            response_body=_BODIES + "METADATA",
        ),
        response="mqctl.api:Metadata",
    ),
    MethodSpec(
        "GetNextBrokerId",
        Kind.FRESH_READ,
        Caller.BROKER,
        Token.NEVER,
        "The next unused broker id of a broker set.",
        code=1012,
        code_name="CONTROLLER_GET_NEXT_BROKER_ID",
        rule_ref=".brokers:get_next_broker_id",
        remoting_codec=RemotingCodec(
            request=(("clusterName", "cluster_name", STR), ("brokerName", "broker_name", STR)),
            response=(
                ("clusterName", "cluster_name", STR),
                ("brokerName", "broker_name", STR),
                ("nextBrokerId", "next_broker_id", INT),
            ),
        ),
        response=".brokers:NextBrokerIdResult",
    ),
    MethodSpec(
        "ApplyBrokerId",
        Kind.WRITE,
        Caller.BROKER,
        Token.NEVER,
        "Claim a broker id for a broker (its registerCheckCode).",
        code=1013,
        code_name="CONTROLLER_APPLY_BROKER_ID",
        idempotent=True,  # the same id with the same registerCheckCode succeeds again
        rule_ref=".brokers:apply_broker_id",
        remoting_codec=RemotingCodec(
            request=(
                ("clusterName", "cluster_name", STR),
                ("brokerName", "broker_name", STR),
                ("appliedBrokerId", "applied_broker_id", INT),
                ("registerCheckCode", "register_check_code", STR),
            ),
            response=(("clusterName", "cluster_name", STR), ("brokerName", "broker_name", STR)),
        ),
        response=".brokers:ApplyBrokerIdResult",
    ),
    MethodSpec(
        "RegisterBroker",
        Kind.WRITE,
        Caller.BROKER,
        Token.NEVER,
        "Register a replica: a new brokerEpoch, the current master (elects one if there is none).",
        code=1003,
        code_name="CONTROLLER_REGISTER_BROKER",
        remoting_body="response: SyncStateSet",
        idempotent=True,  # a repeat gives a newer brokerEpoch, which the broker keeps
        rule_ref=".brokers:register_broker",
        remoting_codec=RemotingCodec(
            request=(
                ("clusterName", "cluster_name", STR),
                ("brokerName", "broker_name", STR),
                ("brokerId", "broker_id", INT),
                ("brokerAddress", "broker_address", STR),
                # 5.0/5.1.0 sent these three; mqctl uses them (and the next two) to re-elect a
                # bounced master
                ("epoch", "epoch", INT),
                ("maxOffset", "max_offset", INT),
                ("heartbeatTimeoutMillis", "heartbeat_timeout_mills", INT),
                ("confirmOffset", "confirm_offset", INT),
                ("electionPriority", "election_priority", INT),
            ),
            response=(
                ("clusterName", "cluster_name", STR),
                ("brokerName", "broker_name", STR),
                ("masterBrokerId", "master_broker_id", INT),
                ("masterAddress", "master_address", STR),
                ("masterEpoch", "master_epoch", INT),
                ("syncStateSetEpoch", "sync_state_set_epoch", INT),
                ("brokerEpoch", "broker_epoch", INT),  # mqctl
            ),
            response_body=_BODIES + "SYNC_STATE_SET",
        ),
        response=".brokers:RegisterBrokerResult",
    ),
    MethodSpec(
        "Heartbeat",
        Kind.NODE,
        Caller.BROKER,
        Token.NEVER,
        "A broker's liveness beat, kept in each node's memory (not replicated).",
        code=904,
        code_name="BROKER_HEARTBEAT",
        where="every node (kept in memory)",
        remoting_body="usually one-way",
        rule_ref=".brokers:heartbeat",
        message=_CORE + ".brokers:Heartbeat",
        remoting_codec=RemotingCodec(
            request=(
                ("clusterName", "cluster_name", STR),
                ("brokerAddr", "broker_addr", STR),
                ("brokerName", "broker_name", STR),
                ("brokerId", "broker_id", INT),
                ("epoch", "epoch", INT),
                ("maxOffset", "max_offset", INT),
                ("confirmOffset", "confirm_offset", INT),
                ("heartbeatTimeoutMills", "heartbeat_timeout_mills", INT),
                ("electionPriority", "election_priority", INT),
                ("brokerEpoch", "broker_epoch", INT),  # mqctl
            )
        ),
    ),
    MethodSpec(
        "HeartbeatStream",
        Kind.NODE,
        Caller.BROKER,
        Token.NEVER,
        "Heartbeats on one long-lived stream, one or more beats per message, each answered in order "
        "as Heartbeat answers it (mqctl extension).",
        where="every node (kept in memory)",
        streaming=True,
        client_streaming=True,
    ),
    MethodSpec(
        "AlterSyncStateSet",
        Kind.WRITE,
        Caller.BROKER,
        Token.NEVER,
        "The master changes its SyncStateSet (fenced by masterEpoch and syncStateSetEpoch).",
        code=1001,
        code_name="CONTROLLER_ALTER_SYNC_STATE_SET",
        remoting_body="request and response: SyncStateSet",
        rule_ref=".elections:alter_sync_state_set",
        remoting_codec=RemotingCodec(
            request=(
                ("brokerName", "broker_name", STR),
                ("masterBrokerId", "master_broker_id", INT),
                ("masterEpoch", "master_epoch", INT),
                ("clusterName", "cluster_name", STR),
                ("brokerEpoch", "broker_epoch", INT),  # mqctl
            ),
            response=(("newSyncStateSetEpoch", "new_sync_state_set_epoch", INT),),
            request_body=_BODIES + "NEW_SYNC_STATE_SET",
            response_body=_BODIES + "SYNC_STATE_SET",
        ),
        response=".elections:AlterSyncStateSetResult",
    ),
    MethodSpec(
        "ElectMaster",
        Kind.WRITE,
        Caller.ANY,
        Token.DESIGNATED,
        "Elect a master: a broker's own request, or an operator's designated election (admin).",
        code=1002,
        code_name="CONTROLLER_ELECT_MASTER",
        remoting_body="response: ElectMasterResponseBody",
        rule_ref=".elections:elect_master",
        remoting_codec=RemotingCodec(
            request=(
                ("clusterName", "cluster_name", STR),
                ("brokerName", "broker_name", STR),
                ("brokerId", "broker_id", INT),
                ("designateElect", "designate_elect", BOOL),
                ("brokerEpoch", "broker_epoch", INT),  # mqctl
            ),
            response=(
                ("masterBrokerId", "master_broker_id", INT),
                ("masterAddress", "master_address", STR),
                ("masterEpoch", "master_epoch", INT),
                ("syncStateSetEpoch", "sync_state_set_epoch", INT),
            ),
            response_body=_BODIES + "ELECT_MASTER",
        ),
        response=".elections:ElectMasterResult",
    ),
    MethodSpec(
        "GetReplicaInfo",
        Kind.FRESH_READ,
        Caller.BROKER,
        Token.NEVER,
        "The master and SyncStateSet of one broker set.",
        code=1004,
        code_name="CONTROLLER_GET_REPLICA_INFO",
        remoting_body="response: SyncStateSet",
        rule_ref=".brokers:get_replica_info",
        remoting_codec=RemotingCodec(
            request=(("brokerName", "broker_name", STR),),
            response=(
                ("masterBrokerId", "master_broker_id", INT),
                ("masterAddress", "master_address", STR),
                ("masterEpoch", "master_epoch", INT),
            ),
            response_body=_BODIES + "SYNC_STATE_SET",
        ),
        response=".brokers:ReplicaInfoResult",
    ),
    MethodSpec(
        "GetSyncStateData",
        Kind.FRESH_READ,
        Caller.ADMIN,
        Token.NEVER,
        "Replicas, liveness and SyncStateSets of some or all broker sets.",
        code=1006,
        code_name="CONTROLLER_GET_SYNC_STATE_DATA",
        remoting_body="request: JSON list of names; response: BrokerReplicasInfo",
        rule_ref=".brokers:get_sync_state_data",
        remoting_codec=RemotingCodec(
            request_body=_BODIES + "BROKER_NAMES", response_body=_BODIES + "SYNC_STATE_DATA"
        ),
        response=".brokers:SyncStateDataResult",
    ),
    MethodSpec(
        "CleanBrokerData",
        Kind.WRITE,
        Caller.ADMIN,
        Token.ALWAYS,
        "Remove a broker set, or some of its replicas, from the controller's state.",
        code=1011,
        code_name="CLEAN_BROKER_DATA",
        rule_ref=".brokers:clean_broker_data",
        remoting_codec=RemotingCodec(
            request=(
                ("clusterName", "cluster_name", STR),
                ("brokerName", "broker_name", STR),
                ("brokerControllerIdsToClean", "broker_controller_ids_to_clean", STR),
                ("isCleanLivingBroker", "is_clean_living_broker", BOOL),
            )
        ),
    ),
    MethodSpec(
        "GetConfig",
        Kind.LOCAL_READ,
        Caller.ADMIN,
        Token.NEVER,
        "The controller configuration (replicated keys plus the asked node's own).",
        code=1010,
        code_name="GET_CONTROLLER_CONFIG",
        remoting_body="response: sorted properties",
        rule_ref=".configuration:get_config",
        remoting_codec=RemotingCodec(response_body=_BODIES + "CONFIG"),
        response=".configuration:ConfigResult",
    ),
    MethodSpec(
        "UpdateConfig",
        Kind.WRITE,
        Caller.ADMIN,
        Token.ALWAYS,
        "Change replicated controller configuration keys.",
        code=1009,
        code_name="UPDATE_CONTROLLER_CONFIG",
        remoting_body="request: properties",
        rule_ref=".configuration:update_config",
        response=".configuration:UpdateConfigResult",
        remoting_codec=RemotingCodec(request_body=_BODIES + "CONFIG"),
    ),
    MethodSpec(
        "WatchRoleChanges",
        Kind.NODE,
        Caller.BROKER,
        Token.NEVER,
        "Stream of role changes of a broker set (the current role first); the gRPC form of the "
        "1008 the controller pushes over remoting.",
        code=1008,
        code_name="NOTIFY_BROKER_ROLE_CHANGED",
        remoting=False,
        entry=Entry.WATCH,
        streaming=True,
        where="any node",
        response_type="RoleChange",
        remoting_codec=RemotingCodec(  # the 1008 the controller pushes: NotifyBrokerRoleChangedRequestHeader
            request=(
                ("masterAddress", "master_address", STR),
                ("masterEpoch", "master_epoch", INT),
                ("syncStateSetEpoch", "sync_state_set_epoch", INT),
                ("masterBrokerId", "master_broker_id", INT),
            )
        ),
        response=".brokers:RoleChange",
    ),
    MethodSpec(
        "ChangeQuorum",
        Kind.NODE,
        Caller.ADMIN,
        Token.ALWAYS,
        "Add or remove a controller node, or transfer the leadership (mqctl extension).",
        mutating=True,
        where="leader",
        message="mqctl.controller.quorum:ChangeQuorumRequest",  # decided by the node and Raft
        response="mqctl.controller.quorum:ChangeQuorumResult",
    ),
    MethodSpec(
        "GetHistory",
        Kind.LOCAL_READ,
        Caller.ADMIN,
        Token.NEVER,
        "The decision history with loss accounting, one page at a time (mqctl extension; feature level 3).",
        rule_ref=".decisions:get_history",
        response=".decisions:HistoryPage",
    ),
    MethodSpec(
        "PauseFailover",
        Kind.WRITE,
        Caller.ADMIN,
        Token.ALWAYS,
        "Pause or resume automatic failover of a broker set or of every set (mqctl extension; "
        "feature level 3).",
        rule_ref=".decisions:pause_failover",
        response=".decisions:PauseResult",
    ),
    MethodSpec(
        "Switchover",
        Kind.WRITE,
        Caller.ADMIN,
        Token.ALWAYS,
        "Move the master to a caught-up alive SyncStateSet member (mqctl extension).",
        rule_ref=".elections:switchover",
        response=".elections:SwitchoverResult",
    ),
    MethodSpec(
        "Rebalance",
        Kind.WRITE,
        Caller.ADMIN,
        Token.ALWAYS,
        "A switchover to every broker set's preferred replica (mqctl extension).",
        rule_ref=".elections:rebalance",
        response=".elections:RebalanceResult",
    ),
    MethodSpec(
        "GetSnapshot",
        Kind.NODE,
        Caller.ADMIN,
        Token.NEVER,
        "The replicated controller state at one applied index, after a read barrier (mqctl "
        "snapshot save; mqctl extension).",
        where="leader, after a read barrier",
        response="",  # the state document as it is
    ),
)

BY_NAME: dict[str, MethodSpec] = {}
BY_REMOTING_CODE: dict[int, MethodSpec] = {}


def spec(method: str) -> MethodSpec:
    """The row of ``method`` (KeyError for a method that does not exist)."""
    return BY_NAME[method]


def names(
    kind: Kind | None = None, *, entry: Entry | None = None, streaming: bool | None = None
) -> frozenset[str]:
    """The names of the methods matching every filter given."""
    return frozenset(
        s.name
        for s in METHODS
        if (kind is None or s.kind is kind)
        and (entry is None or s.entry is entry)
        and (streaming is None or s.streaming is streaming)
    )


# What the node asks (mqctl.controller.node): writes go through the Raft log, fresh reads pass a
# read barrier on the leader, local reads are answered from the asked node's state.
WRITE_METHODS: frozenset[str] = frozenset()
FRESH_READ_METHODS: frozenset[str] = frozenset()
LOCAL_READ_METHODS: frozenset[str] = frozenset()
NODE_METHODS: frozenset[str] = frozenset()
# Calls the clients retry on any transient failure; the others only when surely not executed.
RETRY_ANY: frozenset[str] = frozenset()


def _index() -> None:
    """Every view of the table, derived again from ``METHODS``."""
    global WRITE_METHODS, FRESH_READ_METHODS, LOCAL_READ_METHODS, NODE_METHODS, RETRY_ANY
    BY_NAME.clear()
    BY_NAME.update((s.name, s) for s in METHODS)
    BY_REMOTING_CODE.clear()
    BY_REMOTING_CODE.update((s.code, s) for s in METHODS if s.remoting and s.code is not None)
    WRITE_METHODS = names(Kind.WRITE)
    FRESH_READ_METHODS = names(Kind.FRESH_READ)
    LOCAL_READ_METHODS = names(Kind.LOCAL_READ)
    NODE_METHODS = names(Kind.NODE)
    RETRY_ANY = frozenset(s.name for s in METHODS if s.retry_any and not s.streaming)


def register(*rows: MethodSpec) -> None:
    """Add methods: a row, its rule and its request class are all a method needs. For a plugin or a
    test; the transports, the clients and the node read the table when they are asked."""
    global METHODS
    for row in rows:
        if row.name in BY_NAME or (row.remoting_code is not None and row.remoting_code in BY_REMOTING_CODE):
            raise ValueError(f"{row.name}: a method of that name or request code exists")
    METHODS = (*METHODS, *rows)
    _index()


def unregister(*names: str) -> None:
    """Remove methods that ``register`` added (a test's, when it is done)."""
    global METHODS
    METHODS = tuple(row for row in METHODS if row.name not in names)
    _index()


_index()


# ---------------------------------------------------------------------------------------------
# The token policy


def requires_token(method: str, request: Mapping[str, Any]) -> bool:
    """True for a mutating admin call: the server checks the token, the clients send it.

    Unknown methods need no token here (they are refused as unknown by the node)."""
    row = BY_NAME.get(method)
    if row is None or row.token is Token.NEVER:
        return False
    if row.token is Token.DESIGNATED:
        return bool(request.get("designate_elect"))
    return True


def unauthenticated(method: str, how: str) -> dict[str, Any]:
    """The answer to an admin call without the right token; ``how`` says how to send it."""
    return {
        "code": int(Code.UNAUTHENTICATED),
        "remark": f"{method} is an admin call: this controller requires a token "
        f"({how}, client option --token)",
    }


def check_token(
    method: str, request: Mapping[str, Any], token_ok: Callable[[], bool], *, how: str
) -> dict[str, Any] | None:
    """The transports' one check: None when the call may go on, else the 2103 answer.

    ``token_ok`` checks the credential the transport carries (called only for admin calls)."""
    if requires_token(method, request) and not token_ok():
        return unauthenticated(method, how)
    return None
