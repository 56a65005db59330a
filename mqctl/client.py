"""Python client for the mqctl controller's gRPC API (docs/grpc-api.md).

```python
from mqctl.client import ControllerClient

with ControllerClient("127.0.0.1:9878;127.0.0.1:9879", token=None) as c:
    bid = c.get_next_broker_id("DefaultCluster", "broker-a").next_broker_id
    c.apply_broker_id("DefaultCluster", "broker-a", bid, "check-code")
    reg = c.register_broker("DefaultCluster", "broker-a", bid, "10.0.0.1:30911")
    print(reg.master_broker_id, reg.master_epoch, reg.broker_epoch)
```

Methods take positional parameters in the order of RocketMQ's request header fields and mqctl
extensions as keyword arguments. Results are frozen dataclasses whose attributes are the
snake_case RocketMQ field names. A non-SUCCESS answer raises ``mqctl.errors.ControllerError``
(``.code``, ``.remark``, ``.response`` = the decoded result, ``.leader_address``).

Leader and retries: the client asks each address for GetMetadata to find the leader, sends
requests there, follows 2007 CONTROLLER_NOT_LEADER to ``leader_address`` and retries transient
failures with bounded exponential backoff until ``timeout`` seconds have passed, then raises
ControllerError(2104 UNAVAILABLE, "no controller reachable at ... (last error: ...)").
Reads and heartbeats are retried on any transient failure. Writes (ApplyBrokerId,
RegisterBroker, AlterSyncStateSet, ElectMaster, CleanBrokerData, UpdateConfig) are retried only
when they surely were not executed: on NOT_LEADER, or on a connection failure before the
request was sent. A write whose outcome is unknown (connection lost after sending, deadline
exceeded, 2104 from the server) raises ControllerError(2104) saying so; check with a read.
"""

from __future__ import annotations

import logging
import random
import re
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

import grpc

from mqctl.controller.convert import RPC_TYPES, dict_to_message, message_to_dict
from mqctl.errors import Code, ControllerError, UsageError
from mqctl.security import bearer_metadata, channel_credentials
from mqctl.v1 import controller_pb2 as pb
from mqctl.v1 import controller_pb2_grpc as pb_grpc

log = logging.getLogger("mqctl.client")

__all__ = [
    "Ack",
    "AlterSyncStateSetResult",
    "ApplyBrokerIdResult",
    "BrokerMemberGroup",
    "ChangeQuorumResult",
    "ConfigResult",
    "ControllerClient",
    "ElectMasterResult",
    "Metadata",
    "NextBrokerIdResult",
    "Peer",
    "RegisterBrokerResult",
    "ReplicaIdentity",
    "ReplicaInfoResult",
    "ReplicasInfo",
    "RoleChange",
    "RoleWatch",
    "SyncStateDataResult",
    "parse_addresses",
]

# ---------------------------------------------------------------------------------------------
# Results


T = TypeVar("T")


def _pick(cls: type[T], d: Mapping[str, Any], **override: Any) -> T:
    """Build dataclass ``cls`` from the keys of ``d`` it knows; ``override`` wins."""
    kwargs = {f.name: d[f.name] for f in fields(cls) if f.name in d}  # type: ignore[arg-type]
    kwargs.update(override)
    return cls(**kwargs)


def _ids(value: Any) -> tuple[int, ...]:
    return tuple(int(v) for v in (value or ()))


@dataclass(frozen=True)
class Peer:
    raft_address: str = ""
    grpc_address: str = ""
    is_leader: bool = False
    is_self: bool = False
    connected: bool = False
    match_index: int = 0
    next_index: int = 0


@dataclass(frozen=True)
class Metadata:
    """GetMetadata: the answering node's view of the controller group."""

    group: str = ""
    group_id: str = ""
    controller_leader_id: str = ""
    controller_leader_address: str = ""
    is_leader: bool = False
    self_id: str = ""
    peers: tuple[Peer, ...] = ()
    term: int = 0
    commit_index: int = 0
    last_applied: int = 0
    has_quorum: bool = False
    state_hash: str = ""
    state: str = ""
    log_length: int = 0
    leader_address: str = ""
    remark: str = ""
    address: str = ""  # the address that answered

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], address: str = "") -> Metadata:
        return _pick(cls, d, peers=tuple(_pick(Peer, p) for p in d.get("peers", ())), address=address)


@dataclass(frozen=True)
class NextBrokerIdResult:
    cluster_name: str = ""
    broker_name: str = ""
    next_broker_id: int = 0
    remark: str = ""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> NextBrokerIdResult:
        return _pick(cls, d)


@dataclass(frozen=True)
class ApplyBrokerIdResult:
    cluster_name: str = ""
    broker_name: str = ""
    remark: str = ""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ApplyBrokerIdResult:
        return _pick(cls, d)


def _sync_state_set(d: Mapping[str, Any]) -> tuple[tuple[int, ...], int | None]:
    """Flatten a SyncStateSet body: (ids, epoch or None when the body is absent)."""
    body = d.get("sync_state_set")
    if isinstance(body, Mapping):
        return _ids(body.get("sync_state_set")), int(body.get("sync_state_set_epoch", 0))
    return _ids(body), None


@dataclass(frozen=True)
class RegisterBrokerResult:
    cluster_name: str = ""
    broker_name: str = ""
    master_broker_id: int | None = None
    master_address: str = ""
    master_epoch: int | None = None
    sync_state_set_epoch: int | None = None
    sync_state_set: tuple[int, ...] = ()
    broker_epoch: int = 0
    remark: str = ""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RegisterBrokerResult:
        ids, body_epoch = _sync_state_set(d)
        epoch = d.get("sync_state_set_epoch", body_epoch)
        return _pick(cls, d, sync_state_set=ids, sync_state_set_epoch=epoch)


@dataclass(frozen=True)
class Ack:
    """An answer without fields (Heartbeat, CleanBrokerData, UpdateConfig)."""

    remark: str = ""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Ack:
        return _pick(cls, d)


@dataclass(frozen=True)
class AlterSyncStateSetResult:
    new_sync_state_set_epoch: int = 0
    sync_state_set: tuple[int, ...] = ()
    sync_state_set_epoch: int | None = None  # from the SyncStateSet body, when sent
    remark: str = ""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> AlterSyncStateSetResult:
        ids, body_epoch = _sync_state_set(d)
        return _pick(cls, d, sync_state_set=ids, sync_state_set_epoch=body_epoch)


@dataclass(frozen=True)
class BrokerMemberGroup:
    cluster: str = ""
    broker_name: str = ""
    broker_addrs: dict[int, str] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BrokerMemberGroup:
        addrs = {int(k): str(v) for k, v in (d.get("broker_addrs") or {}).items()}
        return _pick(cls, d, broker_addrs=addrs)


@dataclass(frozen=True)
class ElectMasterResult:
    master_broker_id: int | None = None
    master_address: str = ""
    master_epoch: int | None = None
    sync_state_set_epoch: int | None = None
    sync_state_set: tuple[int, ...] = ()
    broker_member_group: BrokerMemberGroup | None = None
    remark: str = ""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ElectMasterResult:
        group = d.get("broker_member_group")
        return _pick(
            cls,
            d,
            sync_state_set=_ids(d.get("sync_state_set")),
            broker_member_group=BrokerMemberGroup.from_dict(group) if group is not None else None,
        )


@dataclass(frozen=True)
class ReplicaInfoResult:
    master_broker_id: int | None = None
    master_address: str = ""
    master_epoch: int = 0
    sync_state_set: tuple[int, ...] = ()
    sync_state_set_epoch: int = 0
    remark: str = ""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ReplicaInfoResult:
        ids, body_epoch = _sync_state_set(d)
        return _pick(cls, d, sync_state_set=ids, sync_state_set_epoch=body_epoch or 0)


@dataclass(frozen=True)
class ReplicaIdentity:
    broker_name: str = ""
    broker_id: int = 0
    broker_address: str = ""
    alive: bool = False
    heartbeat_age_ms: int | None = None
    epoch: int | None = None
    max_offset: int | None = None
    confirm_offset: int | None = None
    election_priority: int | None = None
    broker_epoch: int = 0


@dataclass(frozen=True)
class ReplicasInfo:
    master_broker_id: int | None = None
    master_address: str = ""
    master_epoch: int = 0
    sync_state_set_epoch: int = 0
    in_sync_replicas: tuple[ReplicaIdentity, ...] = ()
    not_in_sync_replicas: tuple[ReplicaIdentity, ...] = ()
    cluster_name: str = ""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ReplicasInfo:
        return _pick(
            cls,
            d,
            in_sync_replicas=tuple(_pick(ReplicaIdentity, r) for r in d.get("in_sync_replicas", ())),
            not_in_sync_replicas=tuple(_pick(ReplicaIdentity, r) for r in d.get("not_in_sync_replicas", ())),
        )


@dataclass(frozen=True)
class SyncStateDataResult:
    replicas_info_table: dict[str, ReplicasInfo] = field(default_factory=dict)
    remark: str = ""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SyncStateDataResult:
        table = {k: ReplicasInfo.from_dict(v) for k, v in (d.get("replicas_info_table") or {}).items()}
        return _pick(cls, d, replicas_info_table=table)


@dataclass(frozen=True)
class ConfigResult:
    config: dict[str, str] = field(default_factory=dict)
    remark: str = ""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ConfigResult:
        return _pick(cls, d, config=dict(d.get("config") or {}))


@dataclass(frozen=True)
class ChangeQuorumResult:
    leader_id: str = ""
    leader_address: str = ""
    members: tuple[str, ...] = ()
    remark: str = ""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ChangeQuorumResult:
        return _pick(cls, d, members=tuple(str(m) for m in d.get("members", ())))


@dataclass(frozen=True)
class RoleChange:
    """One NOTIFY_BROKER_ROLE_CHANGED: the broker set's master and SyncStateSet now."""

    cluster_name: str = ""
    broker_name: str = ""
    master_broker_id: int | None = None
    master_address: str = ""
    master_epoch: int = 0
    sync_state_set_epoch: int = 0
    sync_state_set: tuple[int, ...] = ()
    remark: str = ""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RoleChange:
        return _pick(cls, d, sync_state_set=_ids(d.get("sync_state_set")))


# ---------------------------------------------------------------------------------------------
# Transport


def parse_addresses(addresses: str | Iterable[str]) -> list[str]:
    """``"a:1;b:2"``, ``"a:1,b:2"`` or a list -> ``["a:1", "b:2"]`` (order kept, duplicates dropped)."""
    items = addresses.replace(";", ",").split(",") if isinstance(addresses, str) else list(addresses)
    out: list[str] = []
    for item in items:
        for part in str(item).replace(";", ",").split(","):
            addr = part.strip()
            if not addr:
                continue
            host, sep, port = addr.rpartition(":")
            if not sep or not host or not port.isdigit():
                raise UsageError(f"bad controller address {addr!r}: expected HOST:PORT")
            if addr not in out:
                out.append(addr)
    if not out:
        raise UsageError("no controller address given")
    return out


# Calls retried on any transient failure (reads, and the in-memory heartbeat).
_RETRY_ANY = frozenset(
    {"GetMetadata", "GetNextBrokerId", "Heartbeat", "GetReplicaInfo", "GetSyncStateData", "GetConfig",
     "WatchRoleChanges"}
)
_TRANSIENT = frozenset(
    {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.RESOURCE_EXHAUSTED}
)
# grpc's wording when the channel never reached the server: the request was not sent.
_NOT_SENT_MARKERS = ("failed to connect", "connection refused", "dns resolution failed",
                     "handshake", "no route to host", "name resolution")

BACKOFF_INITIAL = 0.05
BACKOFF_MAX = 1.0
MAX_REDIRECTS = 5


def _not_sent(err: grpc.RpcError) -> bool:
    if err.code() != grpc.StatusCode.UNAVAILABLE:  # type: ignore[attr-defined]
        return False
    details = (err.details() or "").lower()  # type: ignore[attr-defined]
    return any(m in details for m in _NOT_SENT_MARKERS)


_LAST_ERROR_RE = re.compile(r"last error: (?:[A-Z_]+: )?(?:(?:ipv[46]|unix):\S+: )?(.*)$", re.S)


def _rpc_error_text(address: str, err: grpc.RpcError) -> str:
    code = err.code()  # type: ignore[attr-defined]
    details = (err.details() or "").strip()  # type: ignore[attr-defined]
    # "failed to connect to all addresses; last error: UNKNOWN: ipv4:h:p: Connection refused"
    m = _LAST_ERROR_RE.search(details)
    if m and m.group(1).strip():
        details = m.group(1).strip()
    if len(details) > 300:
        details = details[:297] + "..."
    return f"{address}: {code.name if code else 'UNKNOWN'}: {details}"


class _Retry(Exception):
    """Internal: try again (after a backoff unless ``now``)."""

    def __init__(self, reason: str, target: str | None = None, now: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.target = target
        self.now = now


class ControllerClient:
    """A client for one controller group. Thread-safe; reuse one instance.

    ``addresses``: the gRPC addresses of some or all controller nodes ("a:1;b:2", "a:1,b:2"
    or a list). ``token``: sent as ``authorization: Bearer <token>`` (needed for admin calls
    when the server has one). TLS is used when ``tls`` is true, or when it is None and any of
    ``tls_ca``/``tls_cert``/``tls_key`` is given (``tls_ca`` None = system roots; cert+key =
    mTLS). ``server_name`` overrides the name checked against the server certificate.
    ``timeout``: overall deadline in seconds for each method, retries included.
    """

    def __init__(
        self,
        addresses: str | list[str],
        token: str | None = None,
        *,
        tls_ca: str | None = None,
        tls_cert: str | None = None,
        tls_key: str | None = None,
        timeout: float = 10.0,
        server_name: str | None = None,
        tls: bool | None = None,
    ) -> None:
        self.addresses = parse_addresses(addresses)
        if timeout <= 0:
            raise UsageError(f"timeout must be positive, got {timeout}")
        self.timeout = float(timeout)
        self._metadata = bearer_metadata(token)
        use_tls = tls if tls is not None else any(x is not None for x in (tls_ca, tls_cert, tls_key))
        self._credentials = channel_credentials(tls_ca, tls_cert, tls_key) if use_tls else None
        self._options: list[tuple[str, Any]] = [
            # Fail fast and reconnect quickly: the retry loop here does the waiting.
            ("grpc.initial_reconnect_backoff_ms", 100),
            ("grpc.min_reconnect_backoff_ms", 100),
            ("grpc.max_reconnect_backoff_ms", 1000),
        ]
        if server_name:
            self._options.append(("grpc.ssl_target_name_override", server_name))
        self._lock = threading.Lock()
        self._channels: dict[str, tuple[grpc.Channel, pb_grpc.ControllerStub]] = {}
        self._leader: str | None = None
        self._closed = False

    # -- plumbing -----------------------------------------------------------------------------

    def __enter__(self) -> ControllerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close every channel (open role watches end)."""
        with self._lock:
            self._closed = True
            channels, self._channels = self._channels, {}
        for channel, _ in channels.values():
            channel.close()

    @property
    def leader(self) -> str | None:
        """The leader's address as last learned (None before the first call or after a failure)."""
        return self._leader

    def _stub(self, address: str) -> pb_grpc.ControllerStub:
        with self._lock:
            if self._closed:
                raise UsageError("the controller client is closed")
            entry = self._channels.get(address)
            if entry is None:
                if self._credentials is not None:
                    channel = grpc.secure_channel(address, self._credentials, options=self._options)
                else:
                    channel = grpc.insecure_channel(address, options=self._options)
                entry = (channel, pb_grpc.ControllerStub(channel))
                self._channels[address] = entry
            return entry[1]

    def _unreachable(self, last_error: str) -> ControllerError:
        where = ", ".join(self.addresses)
        hint = ""
        if "Socket closed" in last_error:
            # What grpc says when the TLS handshake fails (plaintext vs TLS, unknown CA, no client cert).
            hint = "; a TLS mismatch? check the TLS options (CA, client certificate) against the server's"
        return ControllerError(
            Code.UNAVAILABLE, f"no controller reachable at {where} (last error: {last_error or 'none'}){hint}"
        )

    def _metadata_of(self, address: str, timeout: float) -> dict[str, Any]:
        stub = self._stub(address)
        resp = stub.GetMetadata(pb.GetMetadataRequest(), timeout=timeout, metadata=self._metadata)
        return message_to_dict(resp)

    def _discover(self, deadline: float) -> str:
        """Find the leader's address or raise _Retry."""
        errors: list[str] = []
        candidates = list(self.addresses)
        for address in candidates:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                d = self._metadata_of(address, min(remaining, max(1.0, self.timeout / 4)))
            except grpc.RpcError as err:
                errors.append(_rpc_error_text(address, err))
                continue
            if d.get("code", 0) != 0:
                errors.append(f"{address}: {d.get('code')}: {d.get('remark', '')}")
                continue
            if d.get("is_leader"):
                return address
            leader = d.get("controller_leader_address") or ""
            if leader:
                return str(leader)
            errors.append(f"{address}: no leader elected yet ({d.get('state') or 'unknown state'})")
        raise _Retry("; ".join(errors[-3:]) or "deadline exceeded during leader discovery")

    def _call(
        self,
        method: str,
        request: Mapping[str, Any],
        *,
        address: str | None = None,
        follow: bool = True,
    ) -> dict[str, Any]:
        """Send ``method`` with retries; return the SUCCESS answer or raise ControllerError."""
        request_cls, response_cls = _METHODS[method]
        message = dict_to_message(request, request_cls)
        retry_any = method in _RETRY_ANY
        deadline = time.monotonic() + self.timeout
        target: str | None = address
        last_error = ""
        attempt = 0
        redirects = 0
        while True:
            now = time.monotonic()
            if now >= deadline:
                raise self._unreachable(last_error)
            try:
                if target is None:
                    target = self._leader or self._discover(deadline)
                    self._leader = target
                return self._attempt(method, message, target, deadline, retry_any, follow)
            except _Retry as r:
                last_error = r.reason
                log.debug("retrying %s: %s", method, r.reason)
                if r.target is not None and redirects < MAX_REDIRECTS:
                    redirects += 1
                    target = r.target
                    self._leader = r.target
                    if r.now:
                        continue
                else:
                    if target is not None and target == self._leader:
                        self._leader = None
                    target = address  # pinned address: keep it; otherwise rediscover
                    redirects = 0
                delay = min(BACKOFF_MAX, BACKOFF_INITIAL * (2**attempt)) * random.uniform(0.5, 1.0)
                attempt += 1
                time.sleep(max(0.0, min(delay, deadline - time.monotonic())))

    def _attempt(
        self, method: str, message: Any, target: str, deadline: float, retry_any: bool, follow: bool
    ) -> dict[str, Any]:
        stub = self._stub(target)
        rpc = getattr(stub, method)
        remaining = max(0.001, deadline - time.monotonic())
        try:
            resp = rpc(message, timeout=remaining, metadata=self._metadata)
        except grpc.RpcError as err:
            text = _rpc_error_text(target, err)
            code = err.code()  # type: ignore[attr-defined]
            if code not in _TRANSIENT:
                raise ControllerError(Code.SYSTEM_ERROR, f"gRPC call {method} failed: {text}") from None
            if retry_any or _not_sent(err):
                raise _Retry(text) from None
            raise ControllerError(
                Code.UNAVAILABLE,
                f"{method} outcome unknown (the connection failed after the request was sent; "
                f"check with a read before retrying): {text}",
            ) from None
        d = message_to_dict(resp)
        code = int(d.get("code", 0))
        if code == Code.CONTROLLER_NOT_LEADER and follow:
            leader = str(d.get("leader_address") or "")
            reason = f"{target}: not the leader" + (
                f" (leader is {leader})" if leader else " (election running)"
            )
            if leader and leader != target:
                raise _Retry(reason, target=leader, now=True)
            raise _Retry(reason)
        if code == Code.UNAVAILABLE and retry_any:
            raise _Retry(f"{target}: {d.get('remark', '')}")
        if code != Code.SUCCESS:
            decoder = _DECODERS[method]
            try:
                decoded: Any = decoder(d)
            except Exception:  # pragma: no cover - a malformed error answer still raises cleanly
                decoded = d
            raise ControllerError(code, str(d.get("remark", "")), response=decoded,
                                  leader_address=str(d.get("leader_address", "")))
        return d

    # -- the API --------------------------------------------------------------------------------

    def get_metadata(self, address: str | None = None) -> Metadata:
        """GetMetadata from ``address`` (any node), or from the leader when None (any node if none)."""
        if address is not None:
            d = self._call("GetMetadata", {}, address=address, follow=False)
            return Metadata.from_dict(d, address=address)
        deadline = time.monotonic() + self.timeout
        try:
            target = self._leader or self._discover(deadline)
        except _Retry:
            target = None
        if target is not None:
            try:
                return Metadata.from_dict(self._call("GetMetadata", {}, address=target, follow=False), target)
            except ControllerError:
                self._leader = None
        # No leader known: the first node that answers.
        last = ""
        while time.monotonic() < deadline:
            for addr in self.addresses:
                try:
                    d = self._metadata_of(addr, max(0.05, min(deadline - time.monotonic(), 1.0)))
                    return Metadata.from_dict(d, address=addr)
                except grpc.RpcError as err:
                    last = _rpc_error_text(addr, err)
            time.sleep(min(BACKOFF_MAX, max(0.0, deadline - time.monotonic())))
        raise self._unreachable(last)

    def get_next_broker_id(self, cluster_name: str, broker_name: str) -> NextBrokerIdResult:
        d = self._call("GetNextBrokerId", {"cluster_name": cluster_name, "broker_name": broker_name})
        return NextBrokerIdResult.from_dict(d)

    def apply_broker_id(
        self, cluster_name: str, broker_name: str, applied_broker_id: int, register_check_code: str
    ) -> ApplyBrokerIdResult:
        d = self._call("ApplyBrokerId", {
            "cluster_name": cluster_name,
            "broker_name": broker_name,
            "applied_broker_id": applied_broker_id,
            "register_check_code": register_check_code,
        })
        return ApplyBrokerIdResult.from_dict(d)

    def register_broker(
        self,
        cluster_name: str,
        broker_name: str,
        broker_id: int,
        broker_address: str,
        *,
        epoch: int | None = None,
        max_offset: int | None = None,
        confirm_offset: int | None = None,
        election_priority: int | None = None,
        options: Mapping[str, str] | None = None,
        heartbeat_timeout_mills: int | None = None,
    ) -> RegisterBrokerResult:
        d = self._call("RegisterBroker", {
            "cluster_name": cluster_name,
            "broker_name": broker_name,
            "broker_id": broker_id,
            "broker_address": broker_address,
            "epoch": epoch,
            "max_offset": max_offset,
            "confirm_offset": confirm_offset,
            "election_priority": election_priority,
            "options": {str(k): str(v) for k, v in (options or {}).items()},
            "heartbeat_timeout_mills": heartbeat_timeout_mills,
        })
        return RegisterBrokerResult.from_dict(d)

    def heartbeat(
        self,
        cluster_name: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int | None,
        epoch: int | None = None,
        max_offset: int | None = None,
        confirm_offset: int | None = None,
        heartbeat_timeout_mills: int | None = None,
        election_priority: int | None = None,
        *,
        broker_epoch: int | None = None,
    ) -> Ack:
        d = self._call("Heartbeat", {
            "cluster_name": cluster_name,
            "broker_addr": broker_addr,
            "broker_name": broker_name,
            "broker_id": broker_id,
            "epoch": epoch,
            "max_offset": max_offset,
            "confirm_offset": confirm_offset,
            "heartbeat_timeout_mills": heartbeat_timeout_mills,
            "election_priority": election_priority,
            "broker_epoch": broker_epoch,
        })
        return Ack.from_dict(d)

    def alter_sync_state_set(
        self,
        broker_name: str,
        master_broker_id: int,
        master_epoch: int,
        new_sync_state_set: Iterable[int],
        sync_state_set_epoch: int,
        *,
        broker_epoch: int | None = None,
        cluster_name: str = "",
    ) -> AlterSyncStateSetResult:
        d = self._call("AlterSyncStateSet", {
            "broker_name": broker_name,
            "master_broker_id": master_broker_id,
            "master_epoch": master_epoch,
            "new_sync_state_set": [int(x) for x in new_sync_state_set],
            "sync_state_set_epoch": sync_state_set_epoch,
            "broker_epoch": broker_epoch,
            "cluster_name": cluster_name,
        })
        return AlterSyncStateSetResult.from_dict(d)

    def elect_master(
        self,
        cluster_name: str,
        broker_name: str,
        broker_id: int | None = None,
        designate_elect: bool = False,
        *,
        broker_epoch: int | None = None,
    ) -> ElectMasterResult:
        """ElectMaster: broker-triggered (broker_id), controller-triggered (None) or admin
        (``designate_elect=True``; needs the token when the server has one)."""
        d = self._call("ElectMaster", {
            "cluster_name": cluster_name,
            "broker_name": broker_name,
            "broker_id": broker_id,
            "designate_elect": designate_elect,
            "broker_epoch": broker_epoch,
        })
        return ElectMasterResult.from_dict(d)

    def get_replica_info(self, broker_name: str) -> ReplicaInfoResult:
        d = self._call("GetReplicaInfo", {"broker_name": broker_name})
        return ReplicaInfoResult.from_dict(d)

    def get_sync_state_data(self, broker_names: str | Iterable[str] | None = None) -> SyncStateDataResult:
        """GetSyncStateData for ``broker_names`` (a name or names; None or empty: every broker set)."""
        names = [broker_names] if isinstance(broker_names, str) else list(broker_names or ())
        d = self._call("GetSyncStateData", {"broker_names": names})
        return SyncStateDataResult.from_dict(d)

    def clean_broker_data(
        self,
        cluster_name: str,
        broker_name: str,
        broker_controller_ids_to_clean: str | Iterable[int] | None = None,
        is_clean_living_broker: bool = False,
    ) -> Ack:
        """CleanBrokerData (admin; needs the token when the server has one). Ids as "1;2;3" or
        a list; None cleans the whole broker set."""
        ids = broker_controller_ids_to_clean
        ids_text = ids if isinstance(ids, str) or ids is None else ";".join(str(int(i)) for i in ids)
        d = self._call("CleanBrokerData", {
            "cluster_name": cluster_name,
            "broker_name": broker_name,
            "broker_controller_ids_to_clean": ids_text or "",
            "is_clean_living_broker": is_clean_living_broker,
        })
        return Ack.from_dict(d)

    def get_config(self, address: str | None = None) -> ConfigResult:
        """The controller config, from the leader (or from ``address`` first when given)."""
        return ConfigResult.from_dict(self._call("GetConfig", {}, address=address))

    def update_config(self, config: Mapping[str, Any], address: str | None = None) -> Ack:
        """UpdateConfig (admin; needs the token when the server has one). Values are sent as text."""
        body = {str(k): (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in config.items()}
        return Ack.from_dict(self._call("UpdateConfig", {"config": body}, address=address))

    def change_quorum(self, action: str, raft_address: str = "") -> ChangeQuorumResult:
        """Controller group membership or leadership (admin; needs the token when the server has one):
        ``action`` "add" / "remove" a node by its Raft address, or "transfer" the leadership to it
        ("" = the most caught-up follower). Runs on the leader and waits for the outcome."""
        d = self._call("ChangeQuorum", {"action": action, "raft_address": raft_address})
        if action == "transfer":
            self._leader = None  # the leader moved
        return ChangeQuorumResult.from_dict(d)

    def watch_role_changes(self, cluster_name: str, broker_name: str = "", *,
                           reconnect: bool = True) -> RoleWatch:
        """Stream of RoleChange for a broker set ("" = every broker set of the cluster).

        The current role comes first (when the broker set has a master), then one per change.
        With ``reconnect`` the watch re-finds the leader when the stream breaks and resumes
        (the current role is sent again, so a change can be seen twice; never missed for long).
        It raises ControllerError(2104) when no controller answers for ``timeout`` seconds.
        Stop it with ``close()`` (or ``cancel()``), or use it as a context manager.
        """
        return RoleWatch(self, cluster_name, broker_name, reconnect=reconnect)


class RoleWatch(Iterator[RoleChange]):
    """Iterator of RoleChange from WatchRoleChanges; see ControllerClient.watch_role_changes."""

    def __init__(self, client: ControllerClient, cluster_name: str, broker_name: str, *,
                 reconnect: bool = True) -> None:
        self._client = client
        self._request = pb.WatchRoleChangesRequest(cluster_name=cluster_name, broker_name=broker_name)
        self._reconnect = reconnect
        self._lock = threading.Lock()
        self._stream: Any = None
        self._target: str | None = None
        self._closed = False
        self._ever_opened = False

    def __iter__(self) -> RoleWatch:
        return self

    def __enter__(self) -> RoleWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """End the stream; a blocked ``next()`` returns StopIteration."""
        with self._lock:
            self._closed = True
            stream, self._stream = self._stream, None
        if stream is not None:
            stream.cancel()

    cancel = close

    def _open(self, deadline: float) -> None:
        client = self._client
        target = self._target or client._leader or client._discover(deadline)
        stream = client._stub(target).WatchRoleChanges(self._request, metadata=client._metadata)
        with self._lock:
            if self._closed:
                stream.cancel()
                raise StopIteration
            self._stream = stream
            self._target = target
            self._ever_opened = True

    def _drop(self, forget_target: bool) -> None:
        with self._lock:
            stream, self._stream = self._stream, None
        if stream is not None:
            stream.cancel()
        if forget_target:
            if self._client._leader == self._target:
                self._client._leader = None
            self._target = None

    def __next__(self) -> RoleChange:
        # The deadline starts at the first failure: a healthy stream may stay quiet for hours.
        deadline: float | None = None if self._stream is not None else time.monotonic() + self._client.timeout
        attempt = 0
        last_error = ""
        while True:
            if self._closed:
                raise StopIteration
            if deadline is not None and time.monotonic() >= deadline:
                self.close()
                raise self._client._unreachable(last_error)
            try:
                if self._stream is None:
                    if self._ever_opened and not self._reconnect:
                        raise StopIteration
                    self._open(deadline if deadline is not None else time.monotonic() + self._client.timeout)
                msg = next(self._stream)
            except StopIteration:
                if self._closed or not self._reconnect:
                    self.close()
                    raise
                last_error = f"{self._target}: the stream ended"
                self._drop(forget_target=True)
            except _Retry as r:
                last_error = r.reason
            except grpc.RpcError as err:
                if self._closed:
                    raise StopIteration from None
                last_error = _rpc_error_text(self._target or "?", err)
                if not self._reconnect or err.code() not in _TRANSIENT:  # type: ignore[attr-defined]
                    self.close()
                    raise ControllerError(Code.UNAVAILABLE, f"role watch failed: {last_error}") from None
                self._drop(forget_target=True)
            else:
                d = message_to_dict(msg)
                code = int(d.get("code", 0))
                if code == Code.SUCCESS:
                    return RoleChange.from_dict(d)
                leader = str(d.get("leader_address") or "")
                if code == Code.CONTROLLER_NOT_LEADER:
                    last_error = f"{self._target}: not the leader"
                    self._drop(forget_target=True)
                    if leader:
                        self._target = leader
                        self._client._leader = leader
                        continue
                elif code in (Code.UNAVAILABLE, Code.SYSTEM_BUSY) and self._reconnect:
                    last_error = f"{self._target}: {d.get('remark', '')}"
                    self._drop(forget_target=code == Code.UNAVAILABLE)
                else:
                    self.close()
                    raise ControllerError(code, str(d.get("remark", "")), response=RoleChange.from_dict(d),
                                          leader_address=leader)
            if deadline is None:
                deadline = time.monotonic() + self._client.timeout
            delay = min(BACKOFF_MAX, BACKOFF_INITIAL * (2**attempt)) * random.uniform(0.5, 1.0)
            attempt += 1
            time.sleep(max(0.0, min(delay, deadline - time.monotonic())))


_METHODS: dict[str, tuple[type[Any], type[Any]]] = RPC_TYPES

_DECODERS: dict[str, Any] = {
    "GetMetadata": Metadata.from_dict,
    "GetNextBrokerId": NextBrokerIdResult.from_dict,
    "ApplyBrokerId": ApplyBrokerIdResult.from_dict,
    "RegisterBroker": RegisterBrokerResult.from_dict,
    "Heartbeat": Ack.from_dict,
    "AlterSyncStateSet": AlterSyncStateSetResult.from_dict,
    "ElectMaster": ElectMasterResult.from_dict,
    "GetReplicaInfo": ReplicaInfoResult.from_dict,
    "GetSyncStateData": SyncStateDataResult.from_dict,
    "CleanBrokerData": Ack.from_dict,
    "GetConfig": ConfigResult.from_dict,
    "UpdateConfig": Ack.from_dict,
    "ChangeQuorum": ChangeQuorumResult.from_dict,
}
