"""How agents talk to each other: the ``mqctl.v1.Broker`` gRPC service (GetBrokerEpochCache, FetchLog)
or, for scale runs, direct calls between agents of one process (``LocalPeers``). Both carry the same
dataclasses; the gRPC side only translates.
"""

from __future__ import annotations

import threading
from concurrent import futures
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from mqctl.errors import Code, UsageError
from mqctl.store.epochfile import EpochCacheView

if TYPE_CHECKING:
    import grpc

__all__ = [
    "LOCAL_AGENTS",
    "FetchRequest",
    "FetchResponse",
    "GrpcPeers",
    "LocalPeers",
    "PeerUnavailable",
    "Peers",
    "serve_agent",
    "serve_broker_service",
]


class PeerUnavailable(Exception):
    """The peer could not be asked (down, isolated, unknown address)."""


@dataclass(frozen=True)
class FetchRequest:
    cluster_name: str
    broker_name: str
    broker_id: int
    broker_address: str
    offset: int
    master_epoch: int
    max_bytes: int
    wait_ms: int
    async_learner: bool = False


@dataclass(frozen=True)
class FetchResponse:
    code: int
    remark: str = ""
    offset: int = 0
    data: bytes = b""
    length: int = 0
    epoch: int = -1
    epoch_start_offset: int = 0
    confirm_offset: int = 0
    max_offset: int = 0
    master_epoch: int = 0
    broker_id: int = -1


_R = TypeVar("_R", FetchRequest, FetchResponse)


def _record(cls: type[_R], message: Any) -> _R:
    """A FetchLog message as its record: broker.proto's FetchLogRequest and FetchLogResponse have the
    fields of FetchRequest and FetchResponse, by the same names."""
    return cls(**{f.name: getattr(message, f.name) for f in fields(cls)})


def _message(pb_type: Any, record: FetchRequest | FetchResponse) -> Any:
    return pb_type(**{f.name: getattr(record, f.name) for f in fields(record)})


class PeerHandler(Protocol):
    """The agent side of the service."""

    def handle_epoch_cache(self) -> EpochCacheView: ...

    def handle_fetch(self, request: FetchRequest) -> FetchResponse: ...

    def reachable(self) -> bool: ...


class Peers(Protocol):
    def epoch_cache(self, address: str, timeout: float) -> EpochCacheView: ...

    def fetch(self, address: str, request: FetchRequest, timeout: float) -> FetchResponse: ...

    def close(self) -> None: ...


# ------------------------------------------------------------------------------ in-process

LOCAL_AGENTS: dict[str, PeerHandler] = {}
_LOCAL_LOCK = threading.Lock()


class LocalPeers:
    """Calls agents of this process by address (their name); no sockets."""

    def _get(self, address: str) -> PeerHandler:
        with _LOCAL_LOCK:
            agent = LOCAL_AGENTS.get(address)
        if agent is None or not agent.reachable():
            raise PeerUnavailable(f"{address}: no such broker running here")
        return agent

    def epoch_cache(self, address: str, timeout: float) -> EpochCacheView:
        return self._get(address).handle_epoch_cache()

    def fetch(self, address: str, request: FetchRequest, timeout: float) -> FetchResponse:
        return self._get(address).handle_fetch(request)

    def close(self) -> None:
        pass


def register_local(address: str, agent: PeerHandler) -> None:
    with _LOCAL_LOCK:
        other = LOCAL_AGENTS.get(address)
        if other is not None and other is not agent and other.reachable():
            raise UsageError(f"local broker address {address!r} is already used in this process")
        LOCAL_AGENTS[address] = agent


def unregister_local(address: str, agent: PeerHandler) -> None:
    with _LOCAL_LOCK:
        if LOCAL_AGENTS.get(address) is agent:
            del LOCAL_AGENTS[address]


# ------------------------------------------------------------------------------ gRPC


class GrpcPeers:
    """One channel per peer address, reused."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stubs: dict[str, tuple[Any, Any]] = {}
        self._closed = False

    def _stub(self, address: str) -> Any:
        import grpc  # lazy: grpc

        from mqctl.v1 import broker_pb2_grpc  # lazy: protobuf

        with self._lock:
            if self._closed:
                raise PeerUnavailable("peer client closed")
            entry = self._stubs.get(address)
            if entry is None:
                options = [
                    ("grpc.initial_reconnect_backoff_ms", 100),
                    ("grpc.max_reconnect_backoff_ms", 1000),
                    ("grpc.max_receive_message_length", 64 << 20),
                ]
                channel = grpc.insecure_channel(address, options=options)
                entry = (channel, broker_pb2_grpc.BrokerStub(channel))
                self._stubs[address] = entry
            return entry[1]

    def epoch_cache(self, address: str, timeout: float) -> EpochCacheView:
        import grpc  # lazy: grpc

        from mqctl.v1 import broker_pb2 as pb  # lazy: protobuf

        try:
            r = self._stub(address).GetBrokerEpochCache(pb.GetBrokerEpochCacheRequest(), timeout=timeout)
        except grpc.RpcError as err:
            raise PeerUnavailable(f"{address}: {err.code().name}: {err.details()}") from None
        from mqctl.grpc.convert import message_to_dict  # lazy: protobuf

        return EpochCacheView.from_answer(message_to_dict(r), address)

    def fetch(self, address: str, request: FetchRequest, timeout: float) -> FetchResponse:
        import grpc  # lazy: grpc

        from mqctl.v1 import broker_pb2 as pb  # lazy: protobuf

        try:
            r = self._stub(address).FetchLog(_message(pb.FetchLogRequest, request), timeout=timeout)
        except grpc.RpcError as err:
            raise PeerUnavailable(f"{address}: {err.code().name}: {err.details()}") from None
        return _record(FetchResponse, r)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            stubs, self._stubs = self._stubs, {}
        for channel, _ in stubs.values():
            channel.close()


def _servicer(handler: PeerHandler) -> Any:
    import grpc  # lazy: grpc

    # lazy: protobuf
    from mqctl.v1 import broker_pb2 as pb
    from mqctl.v1 import broker_pb2_grpc as pb_grpc

    class AgentServicer(pb_grpc.BrokerServicer):
        """Translates only: the agent decides."""

        def GetBrokerEpochCache(self, request: Any, context: grpc.ServicerContext) -> Any:
            if not handler.reachable():
                context.abort(grpc.StatusCode.UNAVAILABLE, "broker isolated or stopped")
            try:
                return pb.GetBrokerEpochCacheResponse(**handler.handle_epoch_cache().answer())
            except Exception as exc:
                return pb.GetBrokerEpochCacheResponse(code=int(Code.SYSTEM_ERROR), remark=str(exc))

        def FetchLog(self, request: Any, context: grpc.ServicerContext) -> Any:
            if not handler.reachable():
                context.abort(grpc.StatusCode.UNAVAILABLE, "broker isolated or stopped")
            try:
                r = handler.handle_fetch(_record(FetchRequest, request))
            except Exception as exc:
                return pb.FetchLogResponse(code=int(Code.SYSTEM_ERROR), remark=str(exc))
            return _message(pb.FetchLogResponse, r)

    return AgentServicer()


@dataclass
class AgentServer:
    server: Any
    port: int
    extra: dict[str, Any] = field(default_factory=dict)

    def stop(self) -> None:
        self.server.stop(None)


def serve_agent(handler: PeerHandler, listen: str, max_workers: int = 8) -> AgentServer:
    """Start the agent's Broker service on ``listen`` (port 0 = any free port)."""
    server, port = serve_broker_service(
        _servicer(handler), listen, max_workers, "mqctl-agent", [("grpc.max_send_message_length", 64 << 20)]
    )
    return AgentServer(server, port)


def serve_broker_service(
    servicer: Any,
    listen: str,
    max_workers: int,
    thread_name_prefix: str,
    options: list[tuple[str, Any]] | None = None,
) -> tuple[grpc.Server, int]:
    """Start a gRPC server with ``servicer`` as the mqctl.v1.Broker service on ``listen`` (port 0 =
    any free port): (server, bound port). UsageError when it cannot listen there."""
    import grpc  # lazy: grpc

    from mqctl.grpc.server import bind_port  # lazy: grpc
    from mqctl.v1 import broker_pb2_grpc as pb_grpc  # lazy: protobuf

    pool = futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix=thread_name_prefix)
    server = grpc.server(pool, options=[("grpc.so_reuseport", 0), *(options or [])])
    pb_grpc.add_BrokerServicer_to_server(servicer, server)
    port = bind_port(server, listen)
    if not port:
        server.stop(None)
        raise UsageError(f"cannot listen on {listen}")
    server.start()
    return server, port
