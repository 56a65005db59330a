"""The RocketMQ remoting front door of `mqctl serve --remoting-port` (docs/remoting.md).

Like mqctl/grpc/server.py it translates only: a frame's header and body become a NodeAPI request
dict (mqctl.remoting.headers), ``NodeAPI.call``/``metadata`` decides, and the answer goes back
with the core's code and remark in the server's serialize type (JSON unless the environment
says ``ROCKETMQ_SERIALIZE_TYPE=ROCKETMQ``, as for RocketMQ). The codes served and the calls that
need the token are the method table's (mqctl.methods). One asyncio loop in one thread
owns the sockets; node calls (which may wait for a Raft commit) run in a thread pool.

A malformed frame (bad length, header longer than the frame, undecodable header, a frame over
16 MiB) closes that connection only, with one log line (at most one a minute per client address, as
for refused connections). Per-peer limits (docs/serve.md#limits): connections in total and per
client address, requests processed at a time per connection (the connection is not read while
they are all busy), and an idle timeout on every read. After a successful election the
controller leader sends NOTIFY_BROKER_ROLE_CHANGED (1008) one-way to every alive replica of the
broker set that it heard over remoting (a registration, 1003, or a heartbeat, 904), at the
replica's registered address, on a new connection, as RocketMQ's ControllerManager does: a
broker serves 1008 only where it listens. Failed deliveries are retried and logged; a newer
masterEpoch supersedes an older pending one; an old master still alive (a switchover) is sent its
1008 before the others are, once delivered or given up; nothing else waits for them. At most
NOTIFY_PUSHERS elections are pushed at a time, the others queued in order.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import os
import socket
import ssl
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from mqctl import methods
from mqctl.address import parse_address
from mqctl.auth import token_matches
from mqctl.errors import Code, ControllerError, UsageError
from mqctl.peerlimits import PeerLog, PeerSlots, peer_address
from mqctl.remoting import codec, headers
from mqctl.remoting.codec import FLAG_ONEWAY, FLAG_RESPONSE, BodyError, FrameError, RemotingCommand

log = logging.getLogger("mqctl.remoting")

DEFAULT_CALL_TIMEOUT = 5.0  # RocketMQ's processor waits 5 s for the controller's future
IDLE_TIMEOUT = 120.0  # serverChannelMaxIdleTimeSeconds
MAX_IN_FLIGHT = 64  # requests being processed per connection
MAX_CONNECTIONS = 1024
MAX_CONNECTIONS_PER_ADDRESS = 256
MAX_REMEMBERED_BROKERS = 100_000
WRITE_TIMEOUT = 10.0
NOTIFY_TIMEOUT = 3.0  # RocketMQ's controller sends 1008 one-way with a 3000 ms timeout
NOTIFY_ATTEMPTS = 3
NOTIFY_RETRY_DELAY = 1.0
# Role changes pushed at a time; the rest wait in order. A fleet's first elections (3,334 broker sets)
# would otherwise open 10,000 connections at once: file descriptors a busy leader needs, and a
# burst of short-lived objects that left its memory in pieces it could not give back. A push to an
# address that never answers holds its pusher for the attempts (about 11 s): 256 of them still
# leave the others going.
NOTIFY_PUSHERS = 256
NOTIFY_LOG_BUDGET = 20  # 1008 lines logged a second, over all brokers


TOKEN_HOW = f"header {headers.TOKEN_KEY}"


def _new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop where it is installed (a dependency on Linux): its transports cost a heartbeat about
    half of asyncio's in CPU (bench/bench_scale.py); asyncio's loop otherwise."""
    try:
        import uvloop  # lazy: optional uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def configured_serialize_type(environ: dict[str, str] | None = None) -> int:
    """RocketMQ's serializeTypeConfigInThisServer: -Drocketmq.serialize.type / ROCKETMQ_SERIALIZE_TYPE."""
    env = os.environ if environ is None else environ
    name = (env.get("ROCKETMQ_SERIALIZE_TYPE") or "JSON").strip().upper()
    if name not in codec.SERIALIZE_TYPE_BY_NAME:
        raise UsageError(f"bad ROCKETMQ_SERIALIZE_TYPE {name!r} (JSON or ROCKETMQ)")
    return codec.SERIALIZE_TYPE_BY_NAME[name]


_BUSY, _BLOCKED = 1, 2  # why a connection is not read: its requests are all busy / its client does not read


class _Connection(asyncio.Protocol):
    """One client connection. Frames are cut from what arrives as it arrives (no coroutine per
    frame); heartbeats are answered at once, in order, and the answers to one read go out in one
    write; other requests run as tasks, at most ``max_in_flight`` at a time, and the connection is
    not read while they are all busy or while its client does not read its answers."""

    def __init__(self, server: RemotingServer) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.peer = ""
        self.address = ""
        self.closed = False
        self.idle = False  # closed by the idle timeout
        self.accepted = False
        self.last_frame = 0.0
        self.in_flight = 0
        self.tasks: set[asyncio.Task[None]] = set()
        self._paused = 0  # _BUSY | _BLOCKED
        self._chunks: list[bytes] = []  # what is left of a frame not complete yet
        self._have = 0
        self._need = 4  # bytes the next frame needs before it can be cut
        self._write_timer: asyncio.TimerHandle | None = None

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is no asyncio.Transport subclass
        peername = transport.get_extra_info("peername")
        self.peer = f"{peername[0]}:{peername[1]}" if isinstance(peername, tuple) else str(peername)
        self.address = peer_address(self.peer)
        self.last_frame = asyncio.get_running_loop().time()
        self.accepted = self.server._accept(self)
        if not self.accepted:
            self.close()

    def data_received(self, data: bytes) -> None:
        if self._chunks:
            self._chunks.append(data)
            self._have += len(data)
            if self._have < self._need:
                return
            data = b"".join(self._chunks)
            self._chunks = []
        self._cut(data)

    def eof_received(self) -> bool | None:
        return None  # close

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._write_timer is not None:
            self._write_timer.cancel()
        if self.accepted:
            self.server._forget(self)
            if self._have and self._need and not self.idle:
                self.server._peer_log.warning(
                    self.address, "connection from %s closed in the middle of a frame", self.peer
                )
        if exc is not None:
            log.debug("connection from %s failed: %s", self.peer, exc)

    def pause_writing(self) -> None:
        self._pause(_BLOCKED)
        self._write_timer = asyncio.get_running_loop().call_later(WRITE_TIMEOUT, self._write_timeout)

    def resume_writing(self) -> None:
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None
        self._resume(_BLOCKED)

    # frames

    def _cut(self, buf: bytes) -> None:
        """Serve every complete frame of ``buf``; keep the rest for the next read."""
        server = self.server
        pos, size, need = 0, len(buf), 4
        answers: list[bytes] = []
        try:
            while not self._paused and not self.closed:
                if size - pos < 4:
                    break
                end = pos + 4 + codec.frame_length(buf[pos : pos + 4])
                if end > size:
                    need = end - pos
                    break
                cmd = codec.decode_frame(buf[pos + 4 : end])
                pos = end
                if cmd.is_response:
                    log.debug("ignoring a response (opaque %s) from %s", cmd.opaque, self.peer)
                elif cmd.code == headers.BROKER_HEARTBEAT:
                    # the fleet's hot path: answered here, in order, without a worker thread (the
                    # node keeps heartbeats in memory and never waits for Raft on them)
                    answer = server._answer_now(cmd)
                    if not cmd.is_oneway:
                        answers.append(server._frame(self, answer))
                else:
                    self.in_flight += 1
                    if self.in_flight >= server._max_in_flight:
                        self._pause(_BUSY)
                    task = asyncio.get_running_loop().create_task(server._process(self, cmd))
                    self.tasks.add(task)
                    task.add_done_callback(self.tasks.discard)
        except FrameError as exc:
            server._peer_log.warning(
                self.address, "closing connection from %s: malformed frame: %s", self.peer, exc
            )
            self.close()
        if pos:
            self.last_frame = asyncio.get_running_loop().time()
        if answers:
            self.write(b"".join(answers))
        if pos < size and not self.closed:
            self._chunks = [buf[pos:] if pos else buf]
            self._have = size - pos
            self._need = 0 if self._paused else need
        else:
            self._have = 0

    def done(self) -> None:
        """A request task has answered: read again if its slot was what the connection waited for."""
        self.in_flight -= 1
        if self._paused & _BUSY and self.in_flight < self.server._max_in_flight:
            self._resume(_BUSY)

    def _pause(self, why: int) -> None:
        if not self._paused and self.transport is not None and not self.closed:
            self.transport.pause_reading()
        self._paused |= why

    def _resume(self, why: int) -> None:
        if not self._paused & why:
            return
        self._paused &= ~why
        if self._paused or self.closed:
            return
        if self._chunks:  # frames read before the pause
            data = b"".join(self._chunks)
            self._chunks = []
            self._cut(data)
        if not self._paused and not self.closed and self.transport is not None:
            self.transport.resume_reading()

    def _write_timeout(self) -> None:
        log.info("closing connection to %s: cannot write: timeout", self.peer)
        self.close()

    def write(self, data: bytes) -> None:
        """Queue a whole answer (frames never interleave); a client that does not read is not read
        from either (pause_writing) and is dropped after WRITE_TIMEOUT."""
        if self.closed or self.transport is None or self.transport.is_closing():
            return  # the client went away meanwhile
        self.transport.write(data)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            if self.transport is not None:
                self.transport.close()


class RemotingServer:
    """Serve RocketMQ remoting on ``host:port`` (port 0 = any; the bound port is ``.port``)."""

    def __init__(
        self,
        node: Any,
        host: str,
        port: int,
        *,
        token: str | None = None,
        serialize_type: int | None = None,
        max_workers: int = 16,
        max_connections: int = MAX_CONNECTIONS,
        max_connections_per_address: int = MAX_CONNECTIONS_PER_ADDRESS,
        max_in_flight: int = MAX_IN_FLIGHT,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        idle_timeout: float = IDLE_TIMEOUT,
    ) -> None:
        self._node = node
        self.host = host
        self.port = port
        self._token = token or None
        self.serialize_type = configured_serialize_type() if serialize_type is None else serialize_type
        self._conn_slots = PeerSlots(
            per_connection=0,
            per_address=max_connections_per_address,
            total=max_connections,
            what="connections",
            options=("", "--remoting-max-connections-per-address", "--remoting-max-connections"),
        )
        self._max_in_flight = max_in_flight
        self._peer_log = PeerLog(log)
        self._notify_log = PeerLog(log, interval=1.0, budget=NOTIFY_LOG_BUDGET)
        self._call_timeout = call_timeout
        self._idle_timeout = idle_timeout
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="mqctl-remoting")
        self._loop = asyncio.new_event_loop()  # replaced by start() (uvloop where it can serve)
        self._thread = threading.Thread(target=self._run_loop, name="mqctl-remoting", daemon=True)
        self._server: asyncio.base_events.Server | None = None
        self._conns: set[_Connection] = set()
        self._idle_task: asyncio.Task[None] | None = None
        self._opaque = itertools.count(1)
        self._watch: Any = None
        self._watcher: threading.Thread | None = None
        self._stopping = threading.Event()
        self.notifications_sent = 0
        # brokers heard over remoting on this node (their 904s reach every controller): they listen
        # for RocketMQ remoting at their registered address. By broker set, the ids below 64 as the
        # bits of one int (a fleet of 10,000 brokers in a few hundred KiB), the others as a set
        self._remoting_ids: dict[str, int] = {}
        self._remoting_big_ids: set[tuple[str, int]] = set()
        self._remoting_count = 0
        self._notify_epochs: dict[str, int] = {}  # broker set -> newest masterEpoch queued for it
        self._masters: dict[str, int] = {}  # broker set -> the master its last 1008 named
        # role changes waiting to be pushed: (change, targets, old master still to be told first)
        self._notify_queue: collections.deque[tuple[dict[str, Any], list[tuple[int, str]], int | None]] = (
            collections.deque()
        )
        self._pushers = 0

    # --- lifecycle ----------------------------------------------------------------------

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, tls: ssl.SSLContext | None = None, tls_mode: str = "enforcing") -> RemotingServer:
        """Bind and serve; UsageError with one line when the address cannot be used.

        ``tls`` (a server ssl.SSLContext, mqctl.auth.server_context) with ``tls_mode``
        as RocketMQ's tls.server.mode: "enforcing" (TLS only), "permissive" (TLS or plaintext,
        decided by a connection's first byte, as NettyRemotingServer's TlsModeHandler does) or
        "disabled" (plaintext; also what no ``tls`` means)."""
        if tls_mode not in TLS_MODES:
            raise UsageError(f"bad remoting TLS mode {tls_mode!r} ({', '.join(TLS_MODES)})")
        self._tls = tls if tls_mode != "disabled" else None
        self._tls_mode = tls_mode if self._tls is not None else "disabled"
        if self._tls_mode != "permissive":  # the permissive sniffer needs asyncio's own transports
            self._loop.close()
            self._loop = _new_event_loop()
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(self._listen(), self._loop)
        try:
            future.result(timeout=10)
        except OSError as exc:
            self._shutdown_loop()
            raise UsageError(
                f"cannot listen for RocketMQ remoting on {self.address}: {exc.strerror or exc}"
            ) from exc
        self._watcher = threading.Thread(target=self._watch_roles, name="mqctl-remoting-notify", daemon=True)
        self._watcher.start()
        log.info(
            "RocketMQ remoting listening on %s (responses in %s%s)",
            self.address,
            codec.SERIALIZE_TYPES[self.serialize_type],
            "" if self._tls is None else f", TLS {self._tls_mode}",
        )
        return self

    async def _listen(self) -> None:
        if self._tls is not None and self._tls_mode == "permissive":
            wait = min(self._idle_timeout, TLS_HANDSHAKE_TIMEOUT)
            self._server = await self._loop.create_server(
                lambda: _TlsSniffer(lambda: _Connection(self), self._tls, wait), self.host, self.port
            )
        else:
            self._server = await self._loop.create_server(
                lambda: _Connection(self),
                self.host,
                self.port,
                ssl=self._tls,
                ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT if self._tls is not None else None,
            )
        sockets = list(self._server.sockets or [])
        if sockets and not self.port:
            self.port = int(sockets[0].getsockname()[1])

    def stop(self) -> None:
        self._stopping.set()
        watch, self._watch = self._watch, None
        if watch is not None:
            try:
                watch.close()
            except Exception:  # pragma: no cover - best effort
                log.debug("closing the role watch failed", exc_info=True)

        async def close_all() -> None:
            if self._server is not None:
                self._server.close()
            for conn in list(self._conns):
                conn.close()

        if self._thread.is_alive():
            try:
                asyncio.run_coroutine_threadsafe(close_all(), self._loop).result(timeout=5)
            except Exception:  # pragma: no cover - best effort
                log.debug("closing remoting connections failed", exc_info=True)
        self._shutdown_loop()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _run_loop(self) -> None:
        self._loop.run_forever()

    def _shutdown_loop(self) -> None:
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)

    # --- connections --------------------------------------------------------------------

    def _accept(self, conn: _Connection) -> bool:
        """Count a new connection against the limits; False = refused (it is closed)."""
        refused = self._conn_slots.acquire(conn.peer, conn.address)
        if refused is not None:
            self._peer_log.warning(
                conn.address, "refusing connection from %s: %s", conn.peer, refused.message
            )
            return False
        self._conns.add(conn)
        if self._idle_task is None:
            self._idle_task = asyncio.get_running_loop().create_task(self._close_idle())
        return True

    def _forget(self, conn: _Connection) -> None:
        """A closed connection gives back its slot."""
        self._conns.discard(conn)
        self._conn_slots.release(conn.peer, conn.address)

    async def _close_idle(self) -> None:
        """Close connections that completed no frame for the idle timeout (also half-sent frames)."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(min(1.0, self._idle_timeout / 4))
            now = loop.time()
            for conn in list(self._conns):
                if not conn.closed and now - conn.last_frame > self._idle_timeout:
                    self._peer_log.log(
                        logging.INFO,
                        conn.address,
                        "closing connection from %s: idle for %.0f s",
                        conn.peer,
                        self._idle_timeout,
                    )
                    conn.idle = True
                    conn.close()

    def _frame(self, conn: _Connection, cmd: RemotingCommand) -> bytes:
        try:
            return codec.encode_frame(cmd)
        except ValueError as exc:
            log.error("cannot encode the answer to %s (code %s): %s", conn.peer, cmd.code, exc)
            return codec.encode_frame(
                RemotingCommand(
                    code=int(Code.SYSTEM_ERROR),
                    remark=f"cannot encode the answer: {exc}"[:200],
                    opaque=cmd.opaque,
                    flag=cmd.flag,
                    serialize_type=cmd.serialize_type,
                )
            )

    # --- requests -----------------------------------------------------------------------

    async def _process(self, conn: _Connection, cmd: RemotingCommand) -> None:
        try:
            answer = await self._answer(cmd)
            if answer is not None and not cmd.is_oneway:
                conn.write(self._frame(conn, answer))
        except Exception:
            log.exception("request code %s from %s failed", cmd.code, conn.peer)
        finally:
            conn.done()

    def _response(
        self,
        cmd: RemotingCommand,
        code: int,
        remark: str | None,
        ext: dict[str, str] | None = None,
        body: bytes = b"",
    ) -> RemotingCommand:
        return RemotingCommand(
            code=int(code),
            remark=remark or None,
            ext_fields=ext or None,
            body=body,
            opaque=cmd.opaque,
            flag=FLAG_RESPONSE,
            serialize_type=self.serialize_type,
        )

    async def _answer(self, cmd: RemotingCommand) -> RemotingCommand | None:
        decoded = self._decode(cmd)
        if isinstance(decoded, RemotingCommand):
            return decoded
        method, request = decoded
        loop = asyncio.get_running_loop()
        result = await loop.run_in_executor(self._pool, self._call, method, request)
        return self._reply(cmd, method, request, result)

    def _answer_now(self, cmd: RemotingCommand) -> RemotingCommand:
        """A request the node answers from memory at once (Heartbeat), on the loop's thread."""
        decoded = self._decode(cmd)
        if isinstance(decoded, RemotingCommand):
            return decoded
        method, request = decoded
        return self._reply(cmd, method, request, self._call(method, request))

    def _decode(self, cmd: RemotingCommand) -> tuple[str, dict[str, Any]] | RemotingCommand:
        """The NodeAPI request of a frame, or the refusal to send back."""
        if cmd.code not in methods.BY_REMOTING_CODE:
            return self._response(
                cmd, Code.REQUEST_CODE_NOT_SUPPORTED, f" request type {cmd.code} not supported"
            )
        try:
            method, request = headers.decode_request(cmd.code, cmd.ext_fields, cmd.body)
        except BodyError as exc:
            # RocketMQ: the decode exception reaches the Netty layer, which answers SYSTEM_ERROR.
            return self._response(cmd, Code.SYSTEM_ERROR, str(exc))
        refused = methods.check_token(method, request, lambda: self._token_ok(cmd), how=TOKEN_HOW)
        if refused is not None:
            return self._response(cmd, refused["code"], refused["remark"])
        return method, request

    def _reply(
        self, cmd: RemotingCommand, method: str, request: dict[str, Any], result: dict[str, Any]
    ) -> RemotingCommand:
        code = int(result.get("code", 0))
        if code == Code.SUCCESS and method in ("RegisterBroker", "Heartbeat"):
            self._remember(request)
        try:
            ext, body = headers.encode_response(method, result)
        except Exception as exc:
            log.exception("cannot encode the node's answer to %s: %r", method, result)
            return self._response(cmd, Code.SYSTEM_ERROR, f"internal error encoding {method}: {exc}"[:200])
        remark = result.get("remark") or None
        return self._response(cmd, code, remark, ext, body)

    def _token_ok(self, cmd: RemotingCommand) -> bool:
        if not self._token:
            return True
        got = (cmd.ext_fields or {}).get(headers.TOKEN_KEY, "")
        return token_matches(got, self._token)

    def _call(self, method: str, request: dict[str, Any]) -> dict[str, Any]:
        """NodeAPI.call/metadata, with the gRPC door's translation of failures."""
        try:
            result = (
                self._node.metadata()
                if methods.spec(method).entry is methods.Entry.METADATA
                else self._node.call(method, request, timeout=self._call_timeout)
            )
        except ControllerError as exc:
            return {"code": exc.code, "remark": exc.remark}
        except TimeoutError as exc:
            return {
                "code": int(Code.UNAVAILABLE),
                "remark": f"timed out waiting for the controller group "
                f"({exc or 'no quorum?'}); the request may still take effect",
            }
        except Exception as exc:
            log.exception("%s failed in the node", method)
            return {"code": int(Code.SYSTEM_ERROR), "remark": f"internal error in {method}: {exc}"[:200]}
        if not isinstance(result, dict):
            return {"code": int(Code.SYSTEM_ERROR), "remark": f"internal error: {method} returned no dict"}
        return result

    # --- NOTIFY_BROKER_ROLE_CHANGED -----------------------------------------------------

    def _remember(self, request: dict[str, Any]) -> None:
        """Note a replica registered (1003) or beating (904) over remoting: it listens for RocketMQ
        remoting at its registered address, where its 1008s go."""
        name, bid = request.get("broker_name"), request.get("broker_id")
        if not isinstance(name, str) or not isinstance(bid, int) or isinstance(bid, bool) or bid < 0:
            return
        if self._heard_over_remoting(name, bid) or self._remoting_count >= MAX_REMEMBERED_BROKERS:
            return
        self._remoting_count += 1
        name = sys.intern(name)  # one object per name in the node (mqctl.controller.liveness)
        if bid < 64:
            self._remoting_ids[name] = self._remoting_ids.get(name, 0) | 1 << bid
        else:
            self._remoting_big_ids.add((name, bid))

    def _heard_over_remoting(self, name: str, bid: int) -> bool:
        if 0 <= bid < 64:
            return bool(self._remoting_ids.get(name, 0) >> bid & 1)
        return (name, bid) in self._remoting_big_ids

    def _watch_roles(self) -> None:
        """One NodeAPI watch of every broker set; each election is pushed from the loop."""
        while not self._stopping.is_set():
            try:
                self._watch = self._node.watch("", "")
                for change in self._watch:
                    if self._stopping.is_set():
                        return
                    if change is None or change.get("master_broker_id") is None or change.get("code", 0):
                        continue
                    if not self._is_leader():
                        continue  # only the controller that decided notifies, as RocketMQ's leader
                    if not change.get("notify_broker_role_changed", True):
                        continue  # RocketMQ's notifyBrokerRoleChanged, as it was at the election
                    targets = self._notify_targets(change)
                    if targets:
                        self._loop.call_soon_threadsafe(self._notify, change, targets)
            except Exception:
                log.exception("role watch failed; watching again")
            if self._stopping.wait(1.0):
                return

    def _is_leader(self) -> bool:
        try:
            return bool(self._node.is_leader())
        except Exception:
            return False

    def _notify_targets(self, change: dict[str, Any]) -> list[tuple[int, str]]:
        """(brokerId, registered address) of the set's alive replicas, as RocketMQ's
        ControllerManager.notifyBrokerRoleChanged picks them from the BrokerMemberGroup; only
        replicas heard over remoting (a gRPC broker reads the WatchRoleChanges stream instead)."""
        name = str(change.get("broker_name") or "")
        # read here, without a barrier: this leader has just applied the election it pushes (a
        # barrier per election made a mass election wait on as many Raft round trips)
        info = (self._node.sync_state_data([name]).get("replicas_info_table") or {}).get(name)
        if info is None:
            log.warning("NOTIFY_BROKER_ROLE_CHANGED for %s not sent: the broker set is gone", name)
            return []
        replicas = [*info.get("in_sync_replicas", ()), *info.get("not_in_sync_replicas", ())]
        return [
            (int(r["broker_id"]), str(r.get("broker_address") or ""))
            for r in replicas
            if r.get("alive") and self._heard_over_remoting(name, int(r["broker_id"]))
        ]

    def _notify(self, change: dict[str, Any], targets: list[tuple[int, str]]) -> None:
        """Queue the change's NOTIFY_BROKER_ROLE_CHANGED; at most NOTIFY_PUSHERS changes are pushed
        at a time, in the order they were decided."""
        name = str(change.get("broker_name") or "")
        epoch = int(change.get("master_epoch") or 0)
        # a newer masterEpoch of the set supersedes a pending older notification
        self._notify_epochs[name] = max(epoch, self._notify_epochs.get(name, epoch))
        master = int(change["master_broker_id"])
        previous = self._masters.get(name)
        self._masters[name] = master
        self._notify_queue.append((change, targets, previous if previous != master else None))
        if self._pushers < NOTIFY_PUSHERS:
            self._pushers += 1
            self._loop.create_task(self._push_queued())

    async def _push_queued(self) -> None:
        try:
            while self._notify_queue and not self._stopping.is_set():
                change, targets, old_master = self._notify_queue.popleft()
                try:
                    await self._push(change, targets, old_master)
                except Exception:
                    log.exception("NOTIFY_BROKER_ROLE_CHANGED for %s failed", change.get("broker_name"))
        finally:
            self._pushers -= 1

    async def _push(
        self, change: dict[str, Any], targets: list[tuple[int, str]], old_master: int | None
    ) -> None:
        """One-way NOTIFY_BROKER_ROLE_CHANGED to each target's registered address (a new connection,
        as RocketMQ's controller opens to the address where the broker listens). An old master that
        is still alive (a switchover) is told its new role first: its 1008 is on the wire, or its
        attempts ran out, before the new master and the others are told. A dead old master is no
        target, so a failover waits for nobody."""
        name = str(change.get("broker_name") or "")
        epoch = int(change.get("master_epoch") or 0)
        ext = headers.dict_to_header(headers.ROLE_CHANGE_FIELDS, change, skip_empty=True)
        body = headers.sync_state_set_body(
            {
                "sync_state_set": change.get("sync_state_set") or [],
                "sync_state_set_epoch": change.get("sync_state_set_epoch", 0),
            }
        )

        async def deliver(bid: int, address: str) -> None:
            cmd = RemotingCommand(
                code=headers.NOTIFY_BROKER_ROLE_CHANGED,
                opaque=next(self._opaque) & 0x7FFFFFFF,
                flag=FLAG_ONEWAY,
                ext_fields=dict(ext),
                body=body,
                serialize_type=self.serialize_type,
            )
            await self._deliver(name, bid, address, epoch, cmd, change)

        targets = [(bid, address) for bid, address in targets if address]
        for bid, address in targets:
            if bid == old_master:
                await deliver(bid, address)
        await asyncio.gather(*(deliver(bid, address) for bid, address in targets if bid != old_master))

    async def _deliver(
        self, name: str, bid: int, address: str, epoch: int, cmd: RemotingCommand, change: dict[str, Any]
    ) -> None:
        host, _, port = address.rpartition(":")
        for attempt in range(1, NOTIFY_ATTEMPTS + 1):
            if self._stopping.is_set() or self._notify_epochs.get(name, epoch) > epoch:
                return
            writer: asyncio.StreamWriter | None = None
            try:
                _, opened = await asyncio.wait_for(
                    asyncio.open_connection(host.strip("[]"), int(port)), NOTIFY_TIMEOUT
                )
                writer = opened
                opened.write(codec.encode_frame(cmd))
                await asyncio.wait_for(opened.drain(), NOTIFY_TIMEOUT)
            except (OSError, ValueError, TimeoutError) as exc:
                # a mass election pushes to thousands of brokers: the last attempt's failure is a
                # warning, at most NOTIFY_LOG_BUDGET push lines a second in all (the rest are counted)
                failed = (
                    "NOTIFY_BROKER_ROLE_CHANGED to %s id %s at %s failed (attempt %d of %d): %s",
                    name,
                    bid,
                    address,
                    attempt,
                    NOTIFY_ATTEMPTS,
                    exc or "timeout",
                )
                if attempt < NOTIFY_ATTEMPTS:
                    log.debug(*failed)
                else:
                    self._notify_log.warning(f"{address}#{epoch}", *failed)
                if attempt < NOTIFY_ATTEMPTS:
                    await asyncio.sleep(NOTIFY_RETRY_DELAY)
                continue
            finally:
                if writer is not None:
                    writer.close()
            self._notify_log.note(
                logging.INFO,
                "NOTIFY_BROKER_ROLE_CHANGED to %s id %s at %s: master %s epoch %s",
                name,
                bid,
                address,
                change.get("master_broker_id"),
                epoch,
            )
            self.notifications_sent += 1
            return


TLS_MODES = ("enforcing", "permissive", "disabled")
TLS_HANDSHAKE_TIMEOUT = 10.0
TLS_RECORD_HANDSHAKE = 0x16  # the first byte of a TLS ClientHello (SslHandler.isEncrypted)


_UPGRADES: set[asyncio.Task[None]] = set()  # TLS handshakes under way (permissive mode)


class _TlsSniffer(asyncio.Protocol):
    """tls_mode permissive: nothing is read until the connection's first byte has been peeked at;
    0x16 (a TLS handshake record) -> the connection speaks TLS, anything else -> plaintext. Then the
    connection is served by the protocol ``serve`` makes, as a listener without TLS serves it."""

    def __init__(self, serve: Any, tls: ssl.SSLContext | None, timeout: float) -> None:
        self._serve = serve
        self._tls = tls
        self._timeout = timeout
        self._transport: asyncio.Transport | None = None
        self._peek: socket.socket | None = None
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)  # asyncio's loop (start() does not use uvloop here)
        self._transport = transport
        transport.pause_reading()  # the transport reads nothing: its first bytes stay in the kernel
        loop = asyncio.get_running_loop()
        try:  # a duplicate descriptor of the same socket, watched apart from the transport's
            self._peek = socket.socket(fileno=os.dup(transport.get_extra_info("socket").fileno()))
            self._peek.setblocking(False)
            loop.add_reader(self._peek.fileno(), self._decide)
        except OSError as exc:
            log.debug("remoting: cannot watch a new connection: %s", exc)
            self._drop()
            return
        self._timer = loop.call_later(self._timeout, self._drop)

    def _unwatch(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._peek is not None:
            asyncio.get_running_loop().remove_reader(self._peek.fileno())
            self._peek.close()
            self._peek = None

    def _drop(self) -> None:
        self._unwatch()
        if self._transport is not None:
            self._transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self._unwatch()

    def _decide(self) -> None:
        assert self._peek is not None and self._transport is not None
        try:
            first = self._peek.recv(1, socket.MSG_PEEK)
        except BlockingIOError:
            return
        except OSError:
            first = b""
        self._unwatch()
        if not first:
            self._transport.abort()
            return
        transport = self._transport
        loop = asyncio.get_running_loop()
        protocol = self._serve()
        if first[0] == TLS_RECORD_HANDSHAKE and self._tls is not None:
            task = loop.create_task(self._upgrade(transport, protocol))
            _UPGRADES.add(task)  # the loop keeps only a weak reference to a task
            task.add_done_callback(_UPGRADES.discard)
        else:
            transport.set_protocol(protocol)
            protocol.connection_made(transport)
            transport.resume_reading()

    async def _upgrade(self, transport: asyncio.Transport, protocol: asyncio.Protocol) -> None:
        assert self._tls is not None
        try:
            tls_transport = await asyncio.get_running_loop().start_tls(
                transport, protocol, self._tls, server_side=True, ssl_handshake_timeout=self._timeout
            )
        except (OSError, TimeoutError, ConnectionError) as exc:
            log.debug("remoting: TLS handshake failed: %s", exc)
            transport.abort()
            return
        if tls_transport is None:  # pragma: no cover - closed during the handshake
            transport.abort()
            return
        protocol.connection_made(tls_transport)


def start_remoting_server(
    node: Any, listen: str, *, tls: ssl.SSLContext | None = None, tls_mode: str = "enforcing", **kwargs: Any
) -> RemotingServer:
    """Parse ``HOST:PORT`` and start a RemotingServer (UsageError on a bad or busy address);
    ``tls``/``tls_mode``: RemotingServer.start."""
    host, port = parse_address(listen, "RocketMQ remoting listen address", any_port=True)
    return RemotingServer(node, host, port, **kwargs).start(tls=tls, tls_mode=tls_mode)


__all__ = ["RemotingServer", "configured_serialize_type", "start_remoting_server"]
