"""The gRPC transport: proto <-> dict, the bearer-token check, and nothing else.

``ControllerServicer`` converts each request to a dict (mqctl.controller.convert), calls the
node (``NodeAPI.call``/``metadata``/``watch``, docs/architecture.md) and converts the answer
back. It decides nothing. Every answer carries ``code`` and ``remark`` and the gRPC status is
OK whenever this server answered; see docs/grpc-api.md.

The unary methods that go through ``NodeAPI.call`` are generated from the method table
(mqctl.methods); GetMetadata and WatchRoleChanges are written out below. Which calls need the
token is the table's rule (``methods.check_token``); this module only reads the bearer metadata.
"""

from __future__ import annotations

import errno
import logging
import socket
import threading
from collections.abc import Iterator
from concurrent import futures
from typing import Any, Protocol

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from mqctl import methods
from mqctl.controller.convert import RPC_TYPES, dict_to_message, message_to_dict
from mqctl.errors import Code, ControllerError, UsageError
from mqctl.security import TlsConfig, check_bearer, server_credentials
from mqctl.v1 import controller_pb2 as pb
from mqctl.v1 import controller_pb2_grpc as pb_grpc

log = logging.getLogger("mqctl.grpc")

SERVICE_NAME = "mqctl.v1.Controller"

# RPC name -> (request class, response class) of the calls answered by NodeAPI.call.
UNARY_METHODS: dict[str, tuple[type[Any], type[Any]]] = {
    name: types for name, types in RPC_TYPES.items() if methods.spec(name).entry is methods.Entry.CALL
}
TOKEN_HOW = "metadata 'authorization: Bearer <token>'"

DEFAULT_CALL_TIMEOUT = 5.0
MAX_CALL_TIMEOUT = 30.0


class NodeAPI(Protocol):
    """What the transport needs from the node (the full contract is in docs/architecture.md)."""

    def call(self, method: str, request: dict[str, Any], *, timeout: float = 5.0) -> dict[str, Any]: ...

    def metadata(self) -> dict[str, Any]: ...

    def watch(self, cluster_name: str, broker_name: str) -> Any: ...

    def is_serving(self) -> bool: ...


def _short(exc: BaseException, limit: int = 200) -> str:
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _error(code: int, remark: str, leader_address: str = "") -> dict[str, Any]:
    return {"code": int(code), "remark": remark, "leader_address": leader_address}


class ControllerServicer(pb_grpc.ControllerServicer):
    """gRPC servicer over a NodeAPI; one instance per server."""

    def __init__(self, node: NodeAPI, *, token: str | None = None, max_watches: int = 8) -> None:
        self._node = node
        self._token = token or None
        self._watch_slots = threading.BoundedSemaphore(max(1, max_watches))

    # -- unary calls -------------------------------------------------------------------------

    def _node_timeout(self, context: grpc.ServicerContext) -> float:
        remaining: float | None = context.time_remaining()
        if remaining is None:
            return DEFAULT_CALL_TIMEOUT
        # Leave the client a little time to receive the answer.
        return max(0.05, min(MAX_CALL_TIMEOUT, remaining * 0.9))

    def _answer(self, method: str, request: Any, context: grpc.ServicerContext) -> Any:
        response_cls = UNARY_METHODS[method][1]
        req = message_to_dict(request)
        refused = methods.check_token(
            method, req, lambda: check_bearer(context.invocation_metadata(), self._token), how=TOKEN_HOW
        )
        if refused is not None:
            return response_cls(**refused)
        try:
            result = self._node.call(method, req, timeout=self._node_timeout(context))
        except ControllerError as exc:
            result = _error(exc.code, exc.remark, exc.leader_address)
        except TimeoutError as exc:
            result = _error(
                Code.UNAVAILABLE,
                f"timed out waiting for the controller group ({exc or 'no quorum?'}); "
                "the request may still take effect",
            )
        except Exception as exc:
            log.exception("%s failed in the node", method)
            result = _error(Code.SYSTEM_ERROR, f"internal error in {method}: {_short(exc)}")
        return self._to_message(method, result, response_cls)

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

    def GetMetadata(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        try:
            result = self._node.metadata()
        except Exception as exc:
            log.exception("GetMetadata failed in the node")
            result = _error(Code.SYSTEM_ERROR, f"internal error in GetMetadata: {_short(exc)}")
        return self._to_message("GetMetadata", result, pb.GetMetadataResponse)

    # -- the role-change stream --------------------------------------------------------------

    def WatchRoleChanges(self, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:  # noqa: N802
        """Stream RoleChange messages until the client cancels or the node ends the watch.

        Each open stream holds one server worker thread, so at most ``max_watches`` streams
        run at once; one more is answered with a single RoleChange carrying code 2 SYSTEM_BUSY.
        """
        if not self._watch_slots.acquire(blocking=False):
            yield pb.RoleChange(
                code=int(Code.SYSTEM_BUSY),
                remark="too many WatchRoleChanges streams open on this controller; retry later",
                cluster_name=request.cluster_name,
                broker_name=request.broker_name,
            )
            return
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
            self._watch_slots.release()


def _unary(method: str) -> Any:
    """The servicer method of a unary RPC answered by NodeAPI.call."""

    def rpc(self: ControllerServicer, request: Any, context: grpc.ServicerContext) -> Any:
        return self._answer(method, request, context)

    row = methods.spec(method)
    rpc.__name__ = rpc.__qualname__ = row.grpc_method
    rpc.__doc__ = row.doc
    return rpc


for _row in methods.METHODS:
    if _row.entry is methods.Entry.CALL and _row.grpc_method not in ControllerServicer.__dict__:
        setattr(ControllerServicer, _row.grpc_method, _unary(_row.name))
_missing = [r.grpc_method for r in methods.METHODS if r.grpc_method not in ControllerServicer.__dict__]
if _missing:  # pragma: no cover - a row whose entry point has no handler here
    raise ImportError(f"grpc_server: no servicer method for {_missing}")


class _Health(health.HealthServicer):  # type: ignore[misc]  # grpc_health ships no types
    """grpc.health.v1 reporting SERVING while ``node.is_serving()``, for "" and the controller."""

    SERVICES = ("", SERVICE_NAME)

    def __init__(self, node: NodeAPI) -> None:
        super().__init__()
        self._node = node
        self.refresh()

    def refresh(self) -> None:
        try:
            serving = bool(self._node.is_serving())
        except Exception:
            log.exception("node.is_serving() failed")
            serving = False
        resp = health_pb2.HealthCheckResponse
        status = resp.SERVING if serving else resp.NOT_SERVING
        for service in self.SERVICES:
            with self._lock:
                changed = self._server_status.get(service) != status
            if changed:
                self.set(service, status)

    def Check(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        self.refresh()
        return super().Check(request, context)

    def Watch(self, request: Any, context: grpc.ServicerContext,  # noqa: N802
              send_response_callback: Any = None) -> Any:
        self.refresh()
        return super().Watch(request, context, send_response_callback)


def _bind_error(listen: str) -> str:
    """Why binding ``listen`` failed, as one line (grpc only says "Failed to bind")."""
    host, _, port = listen.rpartition(":")
    host = host.strip("[]") or "0.0.0.0"
    try:
        infos = socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM)
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


def build_server(
    node: NodeAPI,
    listen: str,
    *,
    token: str | None = None,
    tls: TlsConfig | None = None,
    max_workers: int = 16,
) -> grpc.Server:
    """Build, bind and start the gRPC server for ``node`` on ``listen`` (HOST:PORT, port 0 = any).

    The bound port is ``server.mqctl_port``, the health servicer ``server.mqctl_health``
    (call ``server.mqctl_health.enter_graceful_shutdown()`` before stopping). A busy or
    unusable address raises ``UsageError`` with one line, e.g.
    "cannot listen on 127.0.0.1:9878: address already in use".
    """
    host, sep, port_text = listen.rpartition(":")
    if not sep or not host or not port_text.isdigit() or int(port_text) > 65535:
        raise UsageError(f"cannot listen on {listen!r}: expected HOST:PORT")
    credentials = server_credentials(tls) if tls is not None else None
    if token and tls is None and host not in ("127.0.0.1", "localhost", "::1", "[::1]"):
        log.warning("a token is set but TLS is not: the token crosses the network in clear text")

    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="mqctl-grpc"),
        # Without this, grpc sets SO_REUSEPORT and a second server could share a busy port.
        options=[("grpc.so_reuseport", 0)],
    )
    servicer = ControllerServicer(node, token=token, max_watches=max(1, max_workers // 2))
    pb_grpc.add_ControllerServicer_to_server(servicer, server)  # type: ignore[no-untyped-call]
    health_servicer = _Health(node)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    try:
        if credentials is not None:
            port = server.add_secure_port(listen, credentials)
        else:
            port = server.add_insecure_port(listen)
    except RuntimeError:
        port = 0
    if not port:
        server.stop(None)
        raise UsageError(_bind_error(listen))
    server.start()
    server.mqctl_port = port
    server.mqctl_health = health_servicer

    def refresh_health() -> None:
        # wait_for_termination returns True on timeout, False once the server has stopped.
        while server.wait_for_termination(timeout=1.0):
            health_servicer.refresh()

    threading.Thread(target=refresh_health, name="mqctl-grpc-health", daemon=True).start()
    log.info("gRPC API listening on %s:%d%s%s", host, port, " (TLS)" if tls else "",
             " (token required for admin calls)" if token else "")
    return server
