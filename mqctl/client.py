"""Python client for the mqctl controller's gRPC API (docs/grpc-api.md).

```python
from mqctl.client import ControllerClient

with ControllerClient("127.0.0.1:9878;127.0.0.1:9879", token=None) as c:
    bid = c.get_next_broker_id("DefaultCluster", "broker-a").next_broker_id
    c.apply_broker_id("DefaultCluster", "broker-a", bid, "check-code")
    reg = c.register_broker("DefaultCluster", "broker-a", bid, "127.0.0.1:30911")
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

Heartbeats go on one HeartbeatStream call to the leader per client (``HeartbeatStream``), shared
by its threads: a beat's cost on the node is a message, not a call. A node without that method, or
one that refuses more streams, gets unary Heartbeat calls instead.

The typed methods and result types are ``mqctl.api``'s (shared with the remoting client); this
module adds the gRPC transport, GetMetadata's leader lookup, ChangeQuorum, WatchRoleChanges and the
heartbeat stream.
"""

from __future__ import annotations

import logging
import math
import queue
import random
import re
import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

import grpc

from mqctl import methods
from mqctl.address import is_raft_port, raft_port_error

# The result types and parse_addresses live in mqctl.api (shared with the remoting client); they
# are re-exported here (``as``), their historical home.
from mqctl.api import BACKOFF_INITIAL, BACKOFF_MAX, ControllerApi
from mqctl.api import Ack as Ack
from mqctl.api import AlterSyncStateSetResult as AlterSyncStateSetResult
from mqctl.api import ApplyBrokerIdResult as ApplyBrokerIdResult
from mqctl.api import BrokerMemberGroup as BrokerMemberGroup
from mqctl.api import ChangeQuorumResult as ChangeQuorumResult
from mqctl.api import ConfigResult as ConfigResult
from mqctl.api import ElectMasterResult as ElectMasterResult
from mqctl.api import Metadata as Metadata
from mqctl.api import NextBrokerIdResult as NextBrokerIdResult
from mqctl.api import Peer as Peer
from mqctl.api import RegisterBrokerResult as RegisterBrokerResult
from mqctl.api import ReplicaIdentity as ReplicaIdentity
from mqctl.api import ReplicaInfoResult as ReplicaInfoResult
from mqctl.api import ReplicasInfo as ReplicasInfo
from mqctl.api import RoleChange as RoleChange
from mqctl.api import SyncStateDataResult as SyncStateDataResult
from mqctl.api import parse_addresses as parse_addresses
from mqctl.errors import Code, ControllerError, UsageError
from mqctl.grpc.convert import dict_to_message, message_to_dict
from mqctl.grpc.security import bearer_metadata, channel_credentials
from mqctl.v1 import controller_pb2 as pb
from mqctl.v1 import controller_pb2_grpc as pb_grpc

log = logging.getLogger("mqctl.client")

__all__ = ["ControllerClient", "HeartbeatStream", "RoleWatch"]  # and the re-exports above


# ---------------------------------------------------------------------------------------------
# Transport


_TRANSIENT = frozenset(
    {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.RESOURCE_EXHAUSTED}
)
# grpc's wording when the channel never reached the server: the request was not sent.
_NOT_SENT_MARKERS = (
    "failed to connect",
    "connection refused",
    "dns resolution failed",
    "handshake",
    "no route to host",
    "name resolution",
)

MAX_REDIRECTS = 5
# A call that has not been answered for PROBE_AFTER seconds makes the client ask the other nodes
# (each for at most PROBE_TIMEOUT) whether another one leads now; discovery asks every node at once
# and waits at most DISCOVERY_TIMEOUT per round.
PROBE_AFTER = 0.3
PROBE_AGAIN = 0.1  # while no other node leads yet: an election takes 0.15-0.35 s to start
PROBE_TIMEOUT = 0.3
DISCOVERY_TIMEOUT = 1.0
ELECTION_POLL = 0.02
# A node that refuses a heartbeat stream (RESOURCE_EXHAUSTED: its stream limits) is sent unary
# Heartbeat calls for this long before a stream is tried again.
STREAM_RETRY_AFTER = 30.0
MAX_BEATS_A_MESSAGE = 1000  # about 100 KiB, a tenth of the node's largest request message


def _not_sent(err: grpc.RpcError) -> bool:
    if err.code() != grpc.StatusCode.UNAVAILABLE:
        return False
    details = (err.details() or "").lower()
    return any(m in details for m in _NOT_SENT_MARKERS)


_LAST_ERROR_RE = re.compile(r"last error: (?:[A-Z_]+: )?(?:(?:ipv[46]|unix):\S+: )?(.*)$", re.S)


_NOT_LISTENING_MARKERS = (
    "connection refused",
    "dns resolution failed",
    "no route to host",
    "name resolution",
)


def _rpc_error_text(address: str, err: grpc.RpcError) -> str:
    """The one-line text of a failed call; UsageError at once when ``address`` turns out to be a
    Raft port (it closed the connection: asked once per address, mqctl.address.is_raft_port)."""
    code = err.code()
    details = (err.details() or "").strip()
    no_listener = any(m in details.lower() for m in _NOT_LISTENING_MARKERS)
    if code == grpc.StatusCode.UNAVAILABLE and not no_listener and is_raft_port(address):
        raise raft_port_error(address)
    # "failed to connect to all addresses; last error: UNKNOWN: ipv4:h:p: Connection refused"
    m = _LAST_ERROR_RE.search(details)
    if m and m.group(1).strip():
        details = m.group(1).strip()
    if len(details) > 300:
        details = details[:297] + "..."
    return f"{address}: {code.name if code else 'UNKNOWN'}: {details}"


class _Retry(Exception):
    """Internal: try again (after a backoff unless ``now``)."""

    def __init__(
        self, reason: str, target: str | None = None, now: bool = False, election: bool = False
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.target = target
        self.now = now
        # no leader yet (an election is running): asked again every ELECTION_POLL seconds, not after
        # a growing backoff, so that the client sees the new leader within a poll of its election
        self.election = election


class ControllerClient(ControllerApi):
    """A client for one controller group. Thread-safe; reuse one instance.

    ``addresses``: the gRPC addresses of some or all controller nodes ("a:1;b:2", "a:1,b:2"
    or a list). ``token``: sent as ``authorization: Bearer <token>`` with the admin calls only
    (``mqctl.methods.requires_token``; needed when the server has one). TLS is used when ``tls``
    is true, or when it is None and any of ``tls_ca``/``tls_cert``/``tls_key`` is given
    (``tls_ca`` None = system roots; cert+key = mTLS). ``server_name`` overrides the name checked
    against the server certificate. ``timeout``: overall deadline in seconds for each method,
    retries included.
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
        use_tls = self._open(addresses, timeout, tls, tls_ca, tls_cert, tls_key)
        self._token_metadata = bearer_metadata(token)  # sent with the admin calls only (mqctl.methods)
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
        self._rpcs: dict[tuple[str, str], Any] = {}
        self._closed = False
        self._heartbeats = HeartbeatStream(self)

    # -- plumbing -----------------------------------------------------------------------------

    def close(self) -> None:
        """Close every channel (open role watches end)."""
        with self._lock:
            self._closed = True
            channels, self._channels = self._channels, {}
            self._rpcs.clear()
        self._heartbeats.close()
        for channel, _ in channels.values():
            channel.close()

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

    def _rpc(self, address: str, method: str) -> Any:
        """The unary call of ``method`` as its row in the method table describes it (a row added by
        ``methods.register`` too), on the channel to ``address``."""
        key = (address, method)
        rpc = self._rpcs.get(key)
        if rpc is None:
            self._stub(address)
            row = methods.spec(method)
            request_cls, response_cls = row.types()
            rpc = self._rpcs[key] = self._channels[address][0].unary_unary(
                row.grpc_path,
                request_serializer=request_cls.SerializeToString,
                response_deserializer=response_cls.FromString,
            )
        return rpc

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
        resp = stub.GetMetadata(pb.GetMetadataRequest(), timeout=timeout)
        return message_to_dict(resp)

    def _metadata_futures(self, addresses: list[str], timeout: float) -> dict[str, Any]:
        """GetMetadata sent to every address at once; address -> grpc future."""
        request = pb.GetMetadataRequest()
        return {a: self._stub(a).GetMetadata.future(request, timeout=timeout) for a in addresses}

    def _discover(self, deadline: float) -> str:
        """Find the leader's address or raise _Retry. Every node is asked at once, and a node that
        says it leads is taken as soon as it answers: a stopped node (a paused process, a
        partition with TCP open) costs nothing when another answers."""
        timeout = max(0.05, min(deadline - time.monotonic(), DISCOVERY_TIMEOUT))
        pending = self._metadata_futures(list(self.addresses), timeout)
        done = threading.Event()
        for future in pending.values():
            future.add_done_callback(lambda _f: done.set())
        errors: list[str] = []
        named = ""
        majority = len(self.addresses) // 2 + 1
        while pending:
            if len(self.addresses) - len(pending) >= majority:
                # a majority answered and none leads: the election is still running (or the leader
                # is among the silent ones, then asked again within ELECTION_POLL); not waiting for
                # a dead node's connection attempt, which can take a reconnect backoff
                break
            done.clear()
            for address, future in list(pending.items()):
                if not future.done():
                    continue
                del pending[address]
                try:
                    d = message_to_dict(future.result())
                except grpc.RpcError as err:
                    errors.append(_rpc_error_text(address, err))
                    continue
                if d.get("code", 0) != 0:
                    errors.append(f"{address}: {d.get('code')}: {d.get('remark', '')}")
                elif d.get("is_leader"):
                    for other in pending.values():
                        other.cancel()
                    return address
                elif d.get("controller_leader_address"):
                    named = named or str(d["controller_leader_address"])
                else:
                    errors.append(f"{address}: no leader elected yet ({d.get('state') or 'unknown state'})")
            if pending:
                done.wait(0.05)
        if named:
            return named
        raise _Retry(
            "; ".join(errors[-3:]) or "deadline exceeded during leader discovery",
            election=any("no leader elected yet" in e for e in errors),
        )

    def _leader_elsewhere(self, target: str) -> str:
        """Another node that says it leads ("" when none does): asked while a call to ``target``
        is slow to answer, to tell a stopped leader from a busy one."""
        others = [a for a in self.addresses if a != target]
        for address, future in self._metadata_futures(others, PROBE_TIMEOUT).items():
            try:
                d = message_to_dict(future.result())
            except grpc.RpcError:
                continue
            if d.get("is_leader"):
                return address
        return ""

    def _call(
        self,
        method: str,
        request: Mapping[str, Any],
        *,
        address: str | None = None,
        follow: bool = True,
    ) -> dict[str, Any]:
        """Send ``method`` with retries; return the SUCCESS answer or raise ControllerError."""
        request_cls, _ = methods.spec(method).types()
        message = dict_to_message(request, request_cls)
        retry_any = methods.spec(method).retry_any
        metadata = self._token_metadata if methods.requires_token(method, request) else []
        deadline = self.call_deadline()
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
                return self._attempt(method, message, metadata, target, deadline, retry_any, follow)
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
                if r.election:
                    delay = ELECTION_POLL * random.uniform(0.5, 1.0)
                else:
                    delay = min(BACKOFF_MAX, BACKOFF_INITIAL * (2**attempt)) * random.uniform(0.5, 1.0)
                    attempt += 1
                time.sleep(max(0.0, min(delay, deadline - time.monotonic())))

    def _attempt(
        self,
        method: str,
        message: Any,
        metadata: list[tuple[str, str]],
        target: str,
        deadline: float,
        retry_any: bool,
        follow: bool,
    ) -> dict[str, Any]:
        rpc = self._rpc(target, method)
        remaining = max(0.001, deadline - time.monotonic())
        future = rpc.future(message, timeout=remaining, metadata=metadata)
        try:
            wait = PROBE_AFTER
            while True:
                try:
                    resp = future.result(timeout=wait)
                    break
                except grpc.FutureTimeoutError:
                    wait = PROBE_AGAIN
                # no answer yet: a leader that stopped (paused, cut off) is waited for only until
                # another node leads; a busy leader that the others still follow is waited for
                leader = self._leader_elsewhere(target) if follow and len(self.addresses) > 1 else ""
                if not leader:
                    continue
                future.cancel()
                reason = f"{target} did not answer {method} and {leader} leads now"
                if retry_any:
                    raise _Retry(reason, target=leader, now=True)
                self._leader = leader
                raise ControllerError(
                    Code.UNAVAILABLE,
                    f"{method} outcome unknown ({reason}; check with a read before retrying)",
                )
        except grpc.RpcError as err:
            text = _rpc_error_text(target, err)
            code = err.code()
            if code not in _TRANSIENT:
                raise ControllerError(Code.SYSTEM_ERROR, f"gRPC call {method} failed: {text}") from None
            if retry_any or _not_sent(err):
                # a node that refuses or drops connections is down (or restarting): its successor is
                # polled for, no backoff (that is for an overloaded node: RESOURCE_EXHAUSTED, timeouts)
                raise _Retry(text, election=code == grpc.StatusCode.UNAVAILABLE) from None
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
            raise _Retry(reason, election=not leader)
        if code == Code.UNAVAILABLE and retry_any:
            # a leader that names itself has just been elected and is applying its predecessor's
            # entries: asked again at the election's pace, not after a backoff
            raise _Retry(f"{target}: {d.get('remark', '')}", election=d.get("leader_address") == target)
        if code != Code.SUCCESS:
            try:
                decoded: Any = methods.spec(method).typed_answer(d)
            except Exception:  # pragma: no cover - a malformed error answer still raises cleanly
                decoded = d
            raise ControllerError(
                code,
                str(d.get("remark", "")),
                response=decoded,
                leader_address=str(d.get("leader_address", "")),
            )
        return d

    # -- the API: the typed methods are ControllerApi's; here what only gRPC has -----------------

    def _beat(self, request: Mapping[str, Any]) -> dict[str, Any]:
        return self._heartbeats.beat(request)

    def get_metadata(self, address: str | None = None) -> Metadata:
        """GetMetadata from ``address`` (any node), or from the leader when None (any node if none)."""
        if address is not None:
            d = self._call("GetMetadata", {}, address=address, follow=False)
            return Metadata.from_dict(d, address=address)
        deadline = self.call_deadline()
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

    def change_quorum(
        self, action: str, raft_address: str = "", feature_level: int = 0
    ) -> ChangeQuorumResult:
        """Controller group membership or leadership (admin; needs the token when the server has one):
        ``action`` "add" / "remove" a node by its Raft address, "transfer" the leadership to it
        ("" = the most caught-up follower), or "feature-level" to raise the group's feature level
        once every member speaks it. Runs on the leader and waits for the outcome."""
        d = self._call(
            "ChangeQuorum", {"action": action, "raft_address": raft_address, "feature_level": feature_level}
        )
        if action == "transfer":
            self._leader = None  # the leader moved
        return ChangeQuorumResult.from_dict(d)

    def watch_role_changes(
        self, cluster_name: str, broker_name: str = "", *, reconnect: bool = True
    ) -> RoleWatch:
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

    def __init__(
        self, client: ControllerClient, cluster_name: str, broker_name: str, *, reconnect: bool = True
    ) -> None:
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
        stream = client._stub(target).WatchRoleChanges(self._request)
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
                if not self._reconnect or err.code() not in _TRANSIENT:
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
                    raise ControllerError(
                        code,
                        str(d.get("remark", "")),
                        response=RoleChange.from_dict(d),
                        leader_address=leader,
                    )
            if deadline is None:
                deadline = time.monotonic() + self._client.timeout
            delay = min(BACKOFF_MAX, BACKOFF_INITIAL * (2**attempt)) * random.uniform(0.5, 1.0)
            attempt += 1
            time.sleep(max(0.0, min(delay, deadline - time.monotonic())))


class _Stream:
    """One HeartbeatStream call. The beats sent and not yet answered wait in order; the beats that
    queue up while grpc is busy sending go together in the next message (many brokers of one
    process, one message), and each answer resolves the oldest beat waiting."""

    def __init__(self, target: str, stub: pb_grpc.ControllerStub) -> None:
        self.target = target
        self.lock = threading.Lock()
        self.pending: deque[Future[Any]] = deque()
        self.dead = False
        self.beats: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.call = stub.HeartbeatStream(self._messages())
        threading.Thread(target=self._read, name="mqctl-heartbeat-stream", daemon=True).start()

    def send(self, beat: Any) -> Future[Any]:
        """Queue one HeartbeatRequest; its future gets its HeartbeatResponse."""
        future: Future[Any] = Future()
        with self.lock:
            if self.dead:
                raise _Retry(f"{self.target}: the heartbeat stream ended")
            self.pending.append(future)
            self.beats.put(beat)
        return future

    def _messages(self) -> Iterator[Any]:
        """The request messages (grpc reads them in a thread of its own): every beat queued."""
        while True:
            beat = self.beats.get()
            if beat is None:
                return
            beats = [beat]
            while len(beats) < MAX_BEATS_A_MESSAGE:
                try:
                    beat = self.beats.get_nowait()
                except queue.Empty:
                    break
                if beat is None:
                    yield pb.HeartbeatStreamRequest(beats=beats)
                    return
                beats.append(beat)
            yield pb.HeartbeatStreamRequest(beats=beats)

    def _read(self) -> None:
        error: BaseException = _Retry(f"{self.target}: the heartbeat stream ended")
        try:
            for message in self.call:
                with self.lock:
                    if len(message.answers) > len(self.pending):
                        error = _Retry(f"{self.target}: more heartbeat answers than beats")
                        break
                    futures = [self.pending.popleft() for _ in message.answers]
                for future, answer in zip(futures, message.answers, strict=True):
                    future.set_result(answer)
        except grpc.RpcError as err:
            error = err
        finally:
            self.close()
            with self.lock:
                left = list(self.pending)
                self.pending.clear()
            for future in left:
                future.set_exception(error)

    def close(self) -> None:
        with self.lock:
            if self.dead:
                return
            self.dead = True
        self.beats.put(None)  # ends the request messages
        self.call.cancel()


class HeartbeatStream:
    """The heartbeats of a ``ControllerClient``: one HeartbeatStream call to the leader, shared by
    every thread of the client, each beat answered in order on it (``beat`` waits for its answer);
    beats sent at once by many threads share messages.

    The stream is opened at the first beat and moved when the client learns of another leader, when
    it breaks (the leader died: rediscovered as any call does) and when the leader stops answering
    while another node leads. Beats are retried on any transient failure until the client's timeout,
    as unary heartbeats are. A node without the method (UNIMPLEMENTED) gets unary Heartbeat calls
    from then on; one that refuses the stream (RESOURCE_EXHAUSTED) for ``STREAM_RETRY_AFTER``."""

    def __init__(self, client: ControllerClient) -> None:
        self._client = client
        self._lock = threading.Lock()
        self._stream: _Stream | None = None
        self._unary_until = 0.0

    def close(self) -> None:
        with self._lock:
            stream, self._stream = self._stream, None
        if stream is not None:
            stream.close()

    def _open(self, deadline: float) -> _Stream:
        client = self._client
        with self._lock:
            stream = self._stream
            if stream is not None and not stream.dead and client._leader in (None, stream.target):
                return stream
            if stream is not None:
                stream.close()
            target = client._leader or client._discover(deadline)
            client._leader = target
            self._stream = _Stream(target, client._stub(target))
            return self._stream

    def _drop(self, stream: _Stream, forget_target: bool) -> None:
        stream.close()
        if forget_target and self._client._leader == stream.target:
            self._client._leader = None

    def beat(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """Send one heartbeat; the SUCCESS answer as a dict, or ControllerError."""
        client = self._client
        if time.monotonic() < self._unary_until:
            return client._call("Heartbeat", request)
        beat = dict_to_message(request, pb.HeartbeatRequest)
        deadline = time.monotonic() + client.timeout
        last_error = ""
        attempt = 0
        while True:
            stream = None
            election = False  # no leader, or it died: polled at the election's pace, no backoff
            try:
                stream = self._open(deadline)
                answer = message_to_dict(self._wait(stream, stream.send(beat), deadline))
            except _Retry as r:
                last_error = r.reason
                election = r.election
                if stream is not None:
                    self._drop(stream, forget_target=r.target is None)
                    if r.target is not None:
                        client._leader = r.target
                        continue
            except grpc.RpcError as err:
                code = err.code()
                if code in (grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.RESOURCE_EXHAUSTED):
                    assert stream is not None
                    self._drop(stream, forget_target=False)
                    pause = math.inf if code == grpc.StatusCode.UNIMPLEMENTED else STREAM_RETRY_AFTER
                    self._unary_until = time.monotonic() + pause
                    log.info("heartbeats as unary calls (%s)", _rpc_error_text(stream.target, err))
                    return client._call("Heartbeat", request)
                assert stream is not None
                last_error = _rpc_error_text(stream.target, err)
                if code not in _TRANSIENT and code != grpc.StatusCode.CANCELLED:
                    self._drop(stream, forget_target=False)
                    raise ControllerError(
                        Code.SYSTEM_ERROR, f"heartbeat stream failed: {last_error}"
                    ) from None
                election = code == grpc.StatusCode.UNAVAILABLE
                self._drop(stream, forget_target=True)
            else:
                code = int(answer.get("code", 0))
                leader = str(answer.get("leader_address") or "")
                if code == Code.SUCCESS:
                    if leader and leader != stream.target:
                        client._leader = leader  # a follower took the beat: the next one goes there
                    return answer
                if code == Code.CONTROLLER_NOT_LEADER and leader and leader != stream.target:
                    client._leader = leader
                    continue
                if code not in (Code.CONTROLLER_NOT_LEADER, Code.UNAVAILABLE):
                    raise ControllerError(
                        code,
                        str(answer.get("remark", "")),
                        response=Ack.from_dict(answer),
                        leader_address=leader,
                    )
                election = not leader or leader == stream.target  # an election, or a leader just elected
                last_error = f"{stream.target}: {answer.get('remark', '')}"
                self._drop(stream, forget_target=True)
            if time.monotonic() >= deadline:
                raise client._unreachable(last_error)
            if election:
                delay = ELECTION_POLL * random.uniform(0.5, 1.0)
            else:
                delay = min(BACKOFF_MAX, BACKOFF_INITIAL * (2**attempt)) * random.uniform(0.5, 1.0)
                attempt += 1
            time.sleep(max(0.0, min(delay, deadline - time.monotonic())))

    def _wait(self, stream: _Stream, future: Future[Any], deadline: float) -> Any:
        """The answer to one beat. A leader that does not answer is waited for only until another
        node leads (a paused process, a partition), as a unary call is."""
        client = self._client
        wait = PROBE_AFTER
        while True:
            try:
                return future.result(timeout=max(0.001, min(wait, deadline - time.monotonic())))
            except FutureTimeout:
                if time.monotonic() >= deadline:
                    raise _Retry(f"{stream.target} did not answer a heartbeat") from None
                wait = PROBE_AGAIN
                leader = client._leader_elsewhere(stream.target) if len(client.addresses) > 1 else ""
                if leader:
                    raise _Retry(
                        f"{stream.target} did not answer a heartbeat and {leader} leads now",
                        target=leader,
                        now=True,
                    ) from None
