"""The gRPC transport: proto <-> dict, the bearer-token check, and nothing else.

``ControllerServicer`` converts each request to a dict (mqctl.grpc.convert), calls the
node (``NodeAPI.call``/``metadata``/``watch``, docs/architecture.md) and converts the answer
back. It decides nothing. Every answer carries ``code`` and ``remark`` and the gRPC status is
OK whenever this server answered; see docs/grpc-api.md.

The unary methods that go through ``NodeAPI.call`` are generated from the method table
(mqctl.methods); GetMetadata and WatchRoleChanges are written out below. Which calls need the
token is the table's rule (``methods.check_token``); this module only reads the bearer metadata.

Hostile clients (docs/serve.md#limits, ``GrpcLimits``):

- every request deserializer is ``safe_deserializer``, which never raises (grpcio logs a six-line
  traceback and keeps memory for each request whose deserializer raises): bytes that are not a
  valid request message become an ``Undecodable`` marker, answered with INVALID_ARGUMENT and at
  most one log line a minute per client address (``PeerLog``);
- the handlers are registered request-streaming (``_handlers``; the wire is the same for the
  clients), so that they see the peer before its request message arrives. A unary call's message
  is read under a ``CallGuard``: a call whose message is late holds a worker thread, so only a
  few may be late per connection, per client address and in total, the others are refused or
  cancelled (``context.cancel()``). A watch stream (WatchRoleChanges, the health service's
  Watch) takes its slot per connection, per client address and in total before its request is
  read; watch streams run in their own thread pool, never on the unary workers;
- a heartbeat stream (HeartbeatStream) likewise takes a slot of its own kind (a broker's liveness
  must not wait for watchers) and runs in its own pool; one more is refused with
  RESOURCE_EXHAUSTED, an undecodable message ends the stream with INVALID_ARGUMENT, and a stream
  that neither sends a message nor takes its answers for ``heartbeat_stream_idle`` is cancelled
  (``IdleStreams``);
- message size, concurrent streams per connection, connections, keepalive pings, idle and
  handshake timeouts are grpc core options; invalid UTF-8 in call metadata, which grpcio logs with
  a traceback, is one warning a minute (``_MetadataEncodingFilter``).

grpc.aio would hold no thread for a stalled call, but grpcio 1.85's aio server stops for good on a
call whose path is not UTF-8 (``rpc_state.method().decode()`` in its main loop), one HEADERS frame.
"""

from __future__ import annotations

import errno
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass
from typing import Any, NoReturn, Protocol

import grpc
from grpc_health.v1 import health_pb2

from mqctl import methods
from mqctl.address import is_loopback, parse_address
from mqctl.auth import TlsConfig
from mqctl.errors import Code, ControllerError, UsageError
from mqctl.grpc.convert import dict_to_message, message_to_dict
from mqctl.grpc.security import check_bearer, server_credentials
from mqctl.peerlimits import CallGuard, IdleStreams, PeerLog, PeerSlots, peer_address
from mqctl.v1 import controller_pb2 as pb

log = logging.getLogger("mqctl.grpc")

SERVICE_NAME = "mqctl.v1.Controller"

TOKEN_HOW = "metadata 'authorization: Bearer <token>'"

DEFAULT_CALL_TIMEOUT = 5.0
MAX_CALL_TIMEOUT = 30.0
HEALTH_SERVICE = "grpc.health.v1.Health"
STREAM_SPARE_THREADS = 4
SWEEP_PERIOD = 0.2  # s between two looks at the calls whose request message is late


@dataclass(frozen=True)
class GrpcLimits:
    """The gRPC door's per-peer limits: docs/serve.md#limits, the `mqctl serve` option in brackets."""

    max_message_bytes: int = 1 << 20  # one request message (--grpc-max-message-size)
    max_streams_per_connection: int = 100  # HTTP/2 MAX_CONCURRENT_STREAMS (--grpc-max-streams)
    max_connections: int = 1024  # open connections (--grpc-max-connections)
    watches_per_connection: int = 16  # watch streams of one connection (--grpc-max-watches-per-connection)
    watches_per_address: int = 64  # ... of one client address (--grpc-max-watches-per-address)
    max_watches: int = 256  # ... on this node (--grpc-max-watches)
    # HeartbeatStream streams (--grpc-max-heartbeat-streams-per-connection, ...-per-address, ...)
    heartbeat_streams_per_connection: int = 16
    heartbeat_streams_per_address: int = 64
    max_heartbeat_streams: int = 256
    heartbeat_stream_idle: float = 30.0  # s without a message or answer taken (--grpc-heartbeat-stream-idle)
    keepalive_time: float = 30.0  # s between pings on a connection with calls (--grpc-keepalive)
    keepalive_timeout: float = 10.0  # s for a ping's answer (--grpc-keepalive-timeout)
    idle_timeout: float = 300.0  # s without calls, then the connection is closed (--grpc-idle-timeout)
    handshake_timeout: float = 10.0  # s for a new connection's handshake (--grpc-handshake-timeout)
    # calls whose request message is over stall_time late, each holding a unary worker
    stalled_per_connection: int = 2  # (--grpc-max-stalled-per-connection)
    stalled_per_address: int = 4  # (--grpc-max-stalled-per-address)
    max_stalled: int = 8  # (--grpc-max-stalled)
    stall_time: float = 1.0

    def server_options(self) -> list[tuple[str, int]]:
        """grpc core channel arguments for the server's ``options``."""

        def ms(seconds: float) -> int:
            return min(2**31 - 1, max(1, int(seconds * 1000)))

        return [
            ("grpc.max_receive_message_length", self.max_message_bytes),
            ("grpc.max_concurrent_streams", self.max_streams_per_connection),
            ("grpc.max_allowed_incoming_connections", self.max_connections),
            ("grpc.keepalive_time_ms", ms(self.keepalive_time)),
            ("grpc.keepalive_timeout_ms", ms(self.keepalive_timeout)),
            # grpcio 1.85's server closes a connection whose keepalive ping is not acknowledged
            # only with this one (keepalive_timeout_ms alone leaves it open: tests/grpc/test_grpc_limits.py)
            ("grpc.http2.ping_timeout_ms", ms(self.keepalive_timeout)),
            ("grpc.max_connection_idle_ms", ms(self.idle_timeout)),
            ("grpc.server_handshake_timeout_ms", ms(self.handshake_timeout)),
        ]

    def _limit(self, name: str) -> dict[str, Any]:
        """One limit's three numbers and the flags that set them: ``name`` names the fields
        (``{name}_per_connection``, ``{name}_per_address``, ``max_{name}``) and the flags alike."""
        flag = "--grpc-max-" + name.replace("_", "-")
        return {
            "per_connection": getattr(self, f"{name}_per_connection"),
            "per_address": getattr(self, f"{name}_per_address"),
            "total": getattr(self, f"max_{name}"),
            "options": (f"{flag}-per-connection", f"{flag}-per-address", flag),
        }

    def call_guard(self) -> CallGuard:
        return CallGuard(**self._limit("stalled"), stall=self.stall_time)

    def watch_slots(self) -> PeerSlots:
        return PeerSlots(**self._limit("watches"), what="watch streams")

    def heartbeat_slots(self) -> PeerSlots:
        return PeerSlots(**self._limit("heartbeat_streams"), what="heartbeat streams")


class Undecodable:
    """What ``safe_deserializer`` returns for bytes that are not a valid request message."""

    __slots__ = ("error", "size", "type_name")

    def __init__(self, type_name: str, size: int, error: str) -> None:
        self.type_name = type_name
        self.size = size
        self.error = error

    def __repr__(self) -> str:
        return f"Undecodable({self.type_name}, {self.size} bytes, {self.error})"


def safe_deserializer(cls: type[Any]) -> Callable[[bytes], Any]:
    """``cls.FromString`` that never raises: an ``Undecodable`` instead of DecodeError (or any
    other exception: a RecursionError, a MemoryError). grpcio logs a six-line traceback and keeps
    memory for each request whose deserializer raises (issue 20); the servicer answers the marker
    with INVALID_ARGUMENT."""
    from_string = cls.FromString
    type_name = str(cls.DESCRIPTOR.full_name)

    def deserialize(data: bytes) -> Any:
        try:
            return from_string(data)
        except Exception as exc:
            return Undecodable(type_name, len(data), _short(exc, 160))

    deserialize.__qualname__ = deserialize.__name__ = f"safe_{cls.__name__}_FromString"
    return deserialize


class NodeAPI(Protocol):
    """What the transport needs from the node (the full contract is in docs/architecture.md)."""

    def call(self, method: str, request: dict[str, Any], *, timeout: float = 5.0) -> dict[str, Any]: ...

    def metadata(self) -> dict[str, Any]: ...

    def watch(self, cluster_name: str, broker_name: str) -> Any: ...

    def is_serving(self) -> bool: ...


def _short(exc: BaseException, limit: int = 200) -> str:
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _abort(context: grpc.ServicerContext, code: grpc.StatusCode, details: str) -> NoReturn:
    """``context.abort``: ends the call with ``code`` (grpc sends the status, logs nothing)."""
    context.abort(code, details)
    raise AssertionError("context.abort returned")  # pragma: no cover


def _error(code: int, remark: str, leader_address: str = "") -> dict[str, Any]:
    return {"code": int(code), "remark": remark, "leader_address": leader_address}


class ControllerServicer:
    """gRPC servicer over a NodeAPI; one instance per server.

    Its methods take the request message, as the generated ``add_ControllerServicer_to_server``
    registers them; ``build_server`` registers them request-streaming instead (``_handlers``), with
    the per-peer limits applied before the request message is read."""

    def __init__(
        self,
        node: NodeAPI,
        *,
        token: str | None = None,
        limits: GrpcLimits | None = None,
        peer_log: PeerLog | None = None,
    ) -> None:
        self._node = node
        self._token = token or None
        self.limits = limits or GrpcLimits()
        self.watch_slots = self.limits.watch_slots()
        self.heartbeat_slots = self.limits.heartbeat_slots()
        self.heartbeat_streams = IdleStreams(self.limits.heartbeat_stream_idle)
        self.call_guard = self.limits.call_guard()
        self.peer_log = peer_log or PeerLog(log)
        # Watch streams block a thread each: their own pool, never the unary workers; heartbeat
        # streams another pool (beats never wait for a watcher's thread). A stream holds a thread
        # only with its slot: the spare threads answer the refusals.
        self.watch_pool = futures.ThreadPoolExecutor(
            max_workers=max(1, self.limits.max_watches) + STREAM_SPARE_THREADS,
            thread_name_prefix="mqctl-grpc-watch",
        )
        self.heartbeat_pool = futures.ThreadPoolExecutor(
            max_workers=max(1, self.limits.max_heartbeat_streams) + STREAM_SPARE_THREADS,
            thread_name_prefix="mqctl-grpc-heartbeat",
        )

    def __getattr__(self, name: str) -> Any:
        """The unary RPC of every row of the method table answered by NodeAPI.call (a row added
        with ``methods.register`` too), taking the request message as generated servicers do."""
        row = next((r for r in methods.METHODS if r.grpc_method == name), None)
        if row is None or row.entry is not methods.Entry.CALL or row.streaming:
            raise AttributeError(name)

        def rpc(request: Any, context: grpc.ServicerContext) -> Any:
            return self._answer(row.name, request, context)

        rpc.__name__ = rpc.__qualname__ = name
        rpc.__doc__ = row.doc
        return rpc

    # -- hostile input -----------------------------------------------------------------------

    def refuse_undecodable(
        self, method: str, request: Undecodable, context: grpc.ServicerContext
    ) -> NoReturn:
        """Answer INVALID_ARGUMENT (raises, as ``context.abort`` does); at most one log line a
        minute per client address."""
        peer = str(context.peer())
        self.peer_log.warning(
            peer_address(peer),
            "undecodable %s request from %s (%d bytes: %s): answered INVALID_ARGUMENT",
            method,
            peer,
            request.size,
            request.error,
        )
        _abort(
            context,
            grpc.StatusCode.INVALID_ARGUMENT,
            f"{method}: the request is not a valid {request.type_name} message ({request.error})",
        )

    def read_request(self, method: str, requests: Iterator[Any], context: grpc.ServicerContext) -> Any:
        """The one request message of a unary call registered request-streaming, read under the
        call guard: a call whose message is late holds this worker, so only a few may be late per
        connection, per client address and in total; one more is refused with RESOURCE_EXHAUSTED,
        and ``sweep`` cancels the late ones beyond the limits."""
        peer = str(context.peer())
        address = peer_address(peer)
        token, refused = self.call_guard.enter(peer, address, context.cancel)
        if refused is not None:
            self.peer_log.warning(address, "refused a %s call from %s: %s", method, peer, refused)
            _abort(context, grpc.StatusCode.RESOURCE_EXHAUSTED, refused)
        try:
            request = next(requests, None)
        finally:
            self.call_guard.leave(token)
        if request is None:
            _abort(
                context, grpc.StatusCode.INVALID_ARGUMENT, f"{method}: the call carries no request message"
            )
        if isinstance(request, Undecodable):
            self.refuse_undecodable(method, request, context)
        return request

    def sweep(self) -> None:
        """Cancel the calls whose request message is late beyond the limits (``CallGuard``) and
        the idle heartbeat streams (``IdleStreams``)."""
        for address, count in self.call_guard.sweep().items():
            self.peer_log.warning(
                address,
                "cancelled %d call(s) from %s whose request message did not arrive within %.1f s "
                "(at most %d per connection, %d per address, %d in total may wait)",
                count,
                address,
                self.call_guard.stall,
                self.call_guard.per_connection,
                self.call_guard.per_address,
                self.call_guard.total,
            )
        for address, count in self.heartbeat_streams.sweep().items():
            self.peer_log.warning(
                address,
                "cancelled %d heartbeat stream(s) from %s that sent no message and took no "
                "answer for %.1f s (--grpc-heartbeat-stream-idle)",
                count,
                address,
                self.heartbeat_streams.idle,
            )

    def take_watch_slot(
        self, method: str, context: grpc.ServicerContext
    ) -> tuple[str | None, Callable[[], None]]:
        """A watch slot for this stream: (None, release) or (why it is refused, a no-op)."""
        return self.take_slot(self.watch_slots, method, context)

    def take_slot(
        self, slots: PeerSlots, method: str, context: grpc.ServicerContext
    ) -> tuple[str | None, Callable[[], None]]:
        """A slot of ``slots`` for this stream: (None, release) or (why it is refused, a no-op).
        The release runs once, at the latest when the RPC ends (``context.add_callback``)."""
        peer = str(context.peer())
        address = peer_address(peer)
        refusal = slots.acquire(peer, address)
        if refusal is not None:
            self.peer_log.warning(address, "refused a %s stream from %s: %s", method, peer, refusal.message)
            return refusal.message, lambda: None
        lock = threading.Lock()
        held = [True]

        def release() -> None:
            with lock:
                if not held[0]:
                    return
                held[0] = False
            slots.release(peer, address)

        if not context.add_callback(release):  # the RPC has already ended
            release()
        return None, release

    # -- unary calls -------------------------------------------------------------------------

    def _node_timeout(self, context: grpc.ServicerContext) -> float:
        remaining: float | None = context.time_remaining()
        if remaining is None:
            return DEFAULT_CALL_TIMEOUT
        # Leave the client a little time to receive the answer.
        return max(0.05, min(MAX_CALL_TIMEOUT, remaining * 0.9))

    def _answer(self, method: str, request: Any, context: grpc.ServicerContext) -> Any:
        response_cls = methods.spec(method).types()[1]
        if isinstance(request, Undecodable):
            self.refuse_undecodable(method, request, context)
        req = message_to_dict(request)
        refused = methods.check_token(
            method, req, lambda: check_bearer(context.invocation_metadata(), self._token), how=TOKEN_HOW
        )
        if refused is not None:
            return response_cls(**refused)
        return self._to_message(
            method, self._call_node(method, req, self._node_timeout(context)), response_cls
        )

    def _call_node(self, method: str, req: dict[str, Any], timeout: float) -> Any:
        """The node's answer to one request; its exceptions become answers."""
        try:
            return self._node.call(method, req, timeout=timeout)
        except ControllerError as exc:
            return _error(exc.code, exc.remark, exc.leader_address)
        except TimeoutError as exc:
            return _error(
                Code.UNAVAILABLE,
                f"timed out waiting for the controller group ({exc or 'no quorum?'}); "
                "the request may still take effect",
            )
        except Exception as exc:
            log.exception("%s failed in the node", method)
            return _error(Code.SYSTEM_ERROR, f"internal error in {method}: {_short(exc)}")

    def _to_message(self, method: str, result: Any, response_cls: type[Any]) -> Any:
        try:
            if not isinstance(result, dict):
                raise TypeError(f"node returned {type(result).__name__}, not a dict")
            return dict_to_message(result, response_cls)
        except Exception as exc:
            log.exception("%s: cannot encode the node's answer %r", method, result)
            return response_cls(
                code=int(Code.SYSTEM_ERROR), remark=f"internal error encoding {method}: {_short(exc)}"
            )

    def GetMetadata(self, request: Any, context: grpc.ServicerContext) -> Any:
        if isinstance(request, Undecodable):
            self.refuse_undecodable("GetMetadata", request, context)
        try:
            result = self._node.metadata()
        except Exception as exc:
            log.exception("GetMetadata failed in the node")
            result = _error(Code.SYSTEM_ERROR, f"internal error in GetMetadata: {_short(exc)}")
        return self._to_message("GetMetadata", result, pb.GetMetadataResponse)

    # -- the heartbeat stream ------------------------------------------------------------------

    def HeartbeatStream(self, requests: Iterator[Any], context: grpc.ServicerContext) -> Iterator[Any]:
        """Answer each message's beats in order, one message for each, as Heartbeat answers them.

        The stream holds a thread of the heartbeat pool: it takes its slot (per connection, per
        client address, in total) before it reads a message, and one more is refused with
        RESOURCE_EXHAUSTED. It ends when the client ends it, with INVALID_ARGUMENT at an
        undecodable message, and is cancelled when idle (``sweep``)."""
        refused, release = self.take_slot(self.heartbeat_slots, "HeartbeatStream", context)
        try:
            if refused is not None:
                _abort(context, grpc.StatusCode.RESOURCE_EXHAUSTED, refused)
            token_refused = methods.check_token(
                "HeartbeatStream",
                {},
                lambda: check_bearer(context.invocation_metadata(), self._token),
                how=TOKEN_HOW,
            )
            if token_refused is not None:
                _abort(context, grpc.StatusCode.UNAUTHENTICATED, token_refused["remark"])
            stream = self.heartbeat_streams.enter(peer_address(str(context.peer())), context.cancel)
            try:
                for message in requests:
                    self.heartbeat_streams.touch(stream)
                    if isinstance(message, Undecodable):
                        self.refuse_undecodable("HeartbeatStream", message, context)
                    timeout = self._node_timeout(context)
                    yield pb.HeartbeatStreamResponse(
                        answers=[
                            self._heartbeat_answer(
                                self._call_node("Heartbeat", message_to_dict(beat), timeout)
                            )
                            for beat in message.beats
                        ]
                    )
                    self.heartbeat_streams.touch(stream)
            finally:
                self.heartbeat_streams.leave(stream)
        finally:
            release()

    def _heartbeat_answer(self, result: Any) -> Any:
        """The node's answer to a beat as a HeartbeatResponse: built field by field, the generic
        conversion (``_to_message``) being a tenth of a stream's CPU a beat; it remains for an
        answer of another shape."""
        try:
            return pb.HeartbeatResponse(
                code=result["code"], remark=result["remark"], leader_address=result.get("leader_address", "")
            )
        except (KeyError, TypeError, ValueError, AttributeError):
            return self._to_message("Heartbeat", result, pb.HeartbeatResponse)

    # -- the role-change stream --------------------------------------------------------------

    def WatchRoleChanges(self, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        """Stream RoleChange messages until the client cancels or the node ends the watch.

        Each open stream holds one thread (of the watch pool when served by ``build_server``). The
        streams are limited per connection, per client address and in total (``GrpcLimits``); one
        more is answered with a single RoleChange carrying code 2 SYSTEM_BUSY and the limit in the
        remark."""
        refused, release = self.take_watch_slot("WatchRoleChanges", context)
        try:
            if refused is not None:
                yield self._busy(refused, request)
                return
            if isinstance(request, Undecodable):
                self.refuse_undecodable("WatchRoleChanges", request, context)
            yield from self.watch_role_changes(request, context)
        finally:
            release()

    def _busy(self, refused: str, request: Any = None) -> Any:
        names = (
            {}
            if request is None or isinstance(request, Undecodable)
            else {"cluster_name": request.cluster_name, "broker_name": request.broker_name}
        )
        return pb.RoleChange(code=int(Code.SYSTEM_BUSY), remark=refused, **names)

    def watch_role_changes(self, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        """The stream of one watch, its slot already taken."""
        watch = None
        try:
            try:
                watch = self._node.watch(request.cluster_name, request.broker_name)
            except ControllerError as exc:
                yield pb.RoleChange(code=exc.code, remark=exc.remark, leader_address=exc.leader_address)
                return
            except Exception as exc:
                log.exception("WatchRoleChanges: node.watch failed")
                yield pb.RoleChange(code=int(Code.SYSTEM_ERROR), remark=f"internal error: {_short(exc)}")
                return
            close = getattr(watch, "close", None)
            if callable(close):
                context.add_callback(close)
            for change in watch:
                if not context.is_active():
                    break
                if change is None:  # a keep-alive tick from the node: lets us notice cancellation
                    continue
                yield self._to_message("WatchRoleChanges", change, pb.RoleChange)
        except Exception as exc:
            log.exception("WatchRoleChanges stream failed")
            if context.is_active():
                yield pb.RoleChange(code=int(Code.SYSTEM_ERROR), remark=f"internal error: {_short(exc)}")
        finally:
            close = getattr(watch, "close", None)
            if callable(close):
                try:
                    close()
                except Exception:  # pragma: no cover - best effort
                    log.debug("closing a role watch failed", exc_info=True)


class Health:
    """grpc.health.v1 for "" and the controller: SERVING while ``node.is_serving()`` and until
    ``enter_graceful_shutdown()``; an unknown service is NOT_FOUND (Check) or SERVICE_UNKNOWN
    (Watch), as grpc's own health servicer answers. The status is refreshed on each Check, when a
    Watch starts and every second; Watch streams count against the watch limits."""

    SERVICES = ("", SERVICE_NAME)
    POLL = 0.2  # how often a Watch stream looks at the status

    def __init__(self, node: NodeAPI, servicer: ControllerServicer) -> None:
        self._node = node
        self._servicer = servicer
        self._serving = False
        self._shutdown = False
        self.refresh()

    def refresh(self) -> None:
        try:
            self._serving = bool(self._node.is_serving())
        except Exception:
            log.exception("node.is_serving() failed")
            self._serving = False

    def enter_graceful_shutdown(self) -> None:
        """NOT_SERVING from now on (before the server stops)."""
        self._shutdown = True

    def status(self, service: str) -> int:
        resp = health_pb2.HealthCheckResponse
        if service not in self.SERVICES:
            return int(resp.SERVICE_UNKNOWN)
        return int(resp.SERVING if self._serving and not self._shutdown else resp.NOT_SERVING)

    def Check(self, requests: Iterator[Any], context: grpc.ServicerContext) -> Any:
        request = self._servicer.read_request("Health.Check", requests, context)
        if request.service not in self.SERVICES:
            _abort(context, grpc.StatusCode.NOT_FOUND, f"unknown service {request.service!r}")
        self.refresh()
        return health_pb2.HealthCheckResponse(status=self.status(request.service))

    def List(self, requests: Iterator[Any], context: grpc.ServicerContext) -> Any:
        self._servicer.read_request("Health.List", requests, context)
        answer = health_pb2.HealthListResponse()
        for service in self.SERVICES:
            answer.statuses[service].status = self.status(service)
        return answer

    def Watch(self, requests: Iterator[Any], context: grpc.ServicerContext) -> Iterator[Any]:
        refused, release = self._servicer.take_watch_slot("Health.Watch", context)
        try:
            if refused is not None:
                _abort(context, grpc.StatusCode.RESOURCE_EXHAUSTED, refused)
            request: Any = next(requests, None)
            if request is None:
                _abort(context, grpc.StatusCode.INVALID_ARGUMENT, "Health.Watch: the call carries no request")
            if isinstance(request, Undecodable):
                self._servicer.refuse_undecodable("Health.Watch", request, context)
            self.refresh()
            last = None
            while context.is_active():
                status = self.status(request.service)
                if status != last:
                    last = status
                    yield health_pb2.HealthCheckResponse(status=status)
                time.sleep(self.POLL)
        finally:
            release()


def _handlers(servicer: ControllerServicer, health: Health) -> list[Any]:
    """The generic handlers of mqctl.v1.Controller and grpc.health.v1.Health, registered
    request-streaming (the clients' unary and server-streaming calls are the same on the wire),
    every request deserializer a ``safe_deserializer``."""

    def unary(name: str, behavior: Callable[[Any, grpc.ServicerContext], Any]) -> Any:
        def rpc(requests: Iterator[Any], context: grpc.ServicerContext) -> Any:
            return behavior(servicer.read_request(name, requests, context), context)

        return rpc

    def watch(requests: Iterator[Any], context: grpc.ServicerContext) -> Iterator[Any]:
        # the slot first: a stalled watch request counts as a watch of its connection and address
        refused, release = servicer.take_watch_slot("WatchRoleChanges", context)
        try:
            if refused is not None:
                yield servicer._busy(refused)
                return
            request = next(requests, None)
            if request is None:
                _abort(
                    context,
                    grpc.StatusCode.INVALID_ARGUMENT,
                    "WatchRoleChanges: the call carries no request message",
                )
            if isinstance(request, Undecodable):
                servicer.refuse_undecodable("WatchRoleChanges", request, context)
            yield from servicer.watch_role_changes(request, context)
        finally:
            release()

    def in_pool(behavior: Any, pool: futures.ThreadPoolExecutor) -> Any:
        def stream(requests: Iterator[Any], context: grpc.ServicerContext) -> Any:
            return behavior(requests, context)

        stream.experimental_thread_pool = pool  # type: ignore[attr-defined]
        return stream

    controller: dict[str, Any] = {}
    for row in methods.METHODS:
        request_cls, response_cls = row.types()
        deserializer = safe_deserializer(request_cls)
        if row.client_streaming:
            controller[row.grpc_method] = grpc.stream_stream_rpc_method_handler(
                in_pool(getattr(servicer, row.grpc_method), servicer.heartbeat_pool),
                request_deserializer=deserializer,
                response_serializer=response_cls.SerializeToString,
            )
        elif row.streaming:
            controller[row.grpc_method] = grpc.stream_stream_rpc_method_handler(
                in_pool(watch, servicer.watch_pool),
                request_deserializer=deserializer,
                response_serializer=response_cls.SerializeToString,
            )
        else:
            controller[row.grpc_method] = grpc.stream_unary_rpc_method_handler(
                unary(row.grpc_method, getattr(servicer, row.grpc_method)),
                request_deserializer=deserializer,
                response_serializer=response_cls.SerializeToString,
            )
    req, resp = health_pb2.HealthCheckRequest, health_pb2.HealthCheckResponse
    health_handlers = {
        "Check": grpc.stream_unary_rpc_method_handler(
            health.Check,
            request_deserializer=safe_deserializer(req),
            response_serializer=resp.SerializeToString,
        ),
        "List": grpc.stream_unary_rpc_method_handler(
            health.List,
            request_deserializer=safe_deserializer(health_pb2.HealthListRequest),
            response_serializer=health_pb2.HealthListResponse.SerializeToString,
        ),
        "Watch": grpc.stream_stream_rpc_method_handler(
            in_pool(health.Watch, servicer.watch_pool),
            request_deserializer=safe_deserializer(req),
            response_serializer=resp.SerializeToString,
        ),
    }
    return [
        grpc.method_handlers_generic_handler(SERVICE_NAME, controller),
        grpc.method_handlers_generic_handler(HEALTH_SERVICE, health_handlers),
    ]


class _MetadataEncodingFilter(logging.Filter):
    """grpcio logs call metadata that is not UTF-8 with a traceback (``grpc._cython.cygrpc``:
    "Invalid encoding on ..."; it reads it as latin-1 and goes on): one warning line a minute
    instead, without the traceback."""

    def __init__(self) -> None:
        super().__init__()
        self._limit = PeerLog(log)

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith("Invalid encoding on"):
            return True
        value = record.args[0] if isinstance(record.args, tuple) and record.args else record.args
        self._limit.warning(
            "metadata", "a client sent call metadata that is not UTF-8 (read as latin-1): %.60r", value
        )
        return False


_ENCODING_FILTER = _MetadataEncodingFilter()


def _bind_error(listen: str, host: str, port: int) -> str:
    """Why binding ``listen`` failed, as one line (grpc only says "Failed to bind")."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, ValueError) as exc:
        return f"cannot listen on {listen}: bad address ({exc})"
    for family, stype, proto, _, addr in infos:
        try:
            with socket.socket(family, stype, proto) as s:
                s.bind(addr)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return f"cannot listen on {listen}: address already in use"
            return f"cannot listen on {listen}: {exc.strerror or exc}"
    return f"cannot listen on {listen}: the gRPC server could not bind it"


def bind_port(server: grpc.Server, listen: str, credentials: grpc.ServerCredentials | None = None) -> int:
    """The port ``server`` listens on at ``listen``; 0 when it cannot bind it (grpc raises, or
    answers 0). The broker's peer server binds the same way."""
    try:
        if credentials is not None:
            return int(server.add_secure_port(listen, credentials))
        return int(server.add_insecure_port(listen))
    except RuntimeError:
        return 0


def build_server(
    node: NodeAPI,
    listen: str,
    *,
    token: str | None = None,
    tls: TlsConfig | None = None,
    max_workers: int = 16,
    limits: GrpcLimits | None = None,
) -> grpc.Server:
    """Build, bind and start the gRPC server for ``node`` on ``listen`` (HOST:PORT, port 0 = any).

    ``max_workers`` threads answer the unary calls; watch streams have their own threads, up to
    ``limits.max_watches``. ``limits`` (default ``GrpcLimits()``) are the per-peer limits of
    docs/serve.md#limits. The bound port is ``server.mqctl_port``, the health service
    ``server.mqctl_health`` (call ``server.mqctl_health.enter_graceful_shutdown()`` before
    stopping), the servicer ``server.mqctl_servicer``. A busy or unusable address raises
    ``UsageError`` with one line, e.g. "cannot listen on 127.0.0.1:9878: address already in use".
    """
    host, wanted_port = parse_address(listen, "listen address", any_port=True)
    credentials = server_credentials(tls) if tls is not None else None
    if token and tls is None and not is_loopback(host):
        log.warning("a token is set but TLS is not: the token crosses the network in clear text")
    cygrpc_log = logging.getLogger("grpc._cython.cygrpc")
    if _ENCODING_FILTER not in cygrpc_log.filters:
        cygrpc_log.addFilter(_ENCODING_FILTER)

    limits = limits or GrpcLimits()
    servicer = ControllerServicer(node, token=token, limits=limits)
    health = Health(node, servicer)
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="mqctl-grpc"),
        handlers=_handlers(servicer, health),
        # Without so_reuseport 0, grpc sets SO_REUSEPORT and a second server could share a busy port.
        options=[("grpc.so_reuseport", 0), *limits.server_options()],
    )
    port = bind_port(server, listen, credentials)
    if not port:
        server.stop(None)
        servicer.watch_pool.shutdown(wait=False)
        servicer.heartbeat_pool.shutdown(wait=False)
        raise UsageError(_bind_error(listen, host or "0.0.0.0", wanted_port))
    server.start()
    server.mqctl_port = port
    server.mqctl_health = health
    server.mqctl_servicer = servicer

    def housekeeping() -> None:
        # wait_for_termination returns True on timeout, False once the server has stopped.
        ticks = 0
        while server.wait_for_termination(timeout=SWEEP_PERIOD):
            servicer.sweep()
            ticks += 1
            if ticks % round(1.0 / SWEEP_PERIOD) == 0:
                health.refresh()
        servicer.watch_pool.shutdown(wait=False)
        servicer.heartbeat_pool.shutdown(wait=False)

    threading.Thread(target=housekeeping, name="mqctl-grpc-housekeeping", daemon=True).start()
    log.info(
        "gRPC API listening on %s:%d%s%s",
        host,
        port,
        " (TLS)" if tls else "",
        " (token required for admin calls)" if token else "",
    )
    return server
