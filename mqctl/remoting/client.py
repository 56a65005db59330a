"""A RocketMQ remoting client: the methods and result types of mqctl.client.ControllerClient over
RocketMQ's own protocol, for RocketMQ controllers and for `mqctl serve --remoting-port`.

```python
from mqctl.remoting.client import RemotingControllerClient

with RemotingControllerClient("127.0.0.1:9878") as c:
    print(c.get_sync_state_data(["broker-a"]).replicas_info_table)
    print(c.get_broker_epoch_cache("127.0.0.1:10911"))     # GET_BROKER_EPOCH_CACHE (1007) to a broker
```

Leader discovery is RocketMQ's: CONTROLLER_GET_METADATA_INFO (1005) to each address, the first
non-empty ``controllerLeaderAddress`` wins. Retries follow ControllerClient: reads and heartbeats
are retried on any transient failure until ``timeout``; writes only when they surely were not
executed (2007 NOT_LEADER, or the connection could not be opened). A non-SUCCESS answer raises
ControllerError. ``RemotingConnection`` is the single-socket layer underneath; it also collects
the one-way requests a controller sends (NOTIFY_BROKER_ROLE_CHANGED, 1008).

TLS (RocketMQ's ``tls.enable``: TLS on the remoting port itself) and ACL signing (RocketMQ's
AclClientRPCHook: AccessKey and Signature in every request) are off unless asked for:
``tls_ca``/``tls_cert``/``tls_key`` (or ``tls=True``), ``access_key``/``secret_key``
(mqctl.auth and mqctl.remoting.acl, docs/remoting.md#tls-and-acl).
"""

from __future__ import annotations

import itertools
import logging
import queue
import random
import socket
import ssl
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mqctl import methods
from mqctl.address import is_raft_port, parse_address, raft_port_error
from mqctl.api import (
    BACKOFF_INITIAL,
    BACKOFF_MAX,
    ConfigResult,
    ControllerApi,
    Metadata,
    RoleChange,
)
from mqctl.auth import client_context
from mqctl.errors import Code, ControllerError, UsageError
from mqctl.remoting import codec, headers
from mqctl.remoting.acl import AclCredentials
from mqctl.remoting.codec import FLAG_ONEWAY, FrameError, RemotingCommand
from mqctl.store.epochfile import EpochCacheView

log = logging.getLogger("mqctl.remoting.client")

__all__ = ["Pending", "RemotingConnection", "RemotingControllerClient", "RemotingError", "role_change_of"]


class RemotingError(OSError):
    """The connection failed; ``sent`` tells whether the request may have reached the server."""

    def __init__(self, message: str, *, sent: bool) -> None:
        super().__init__(message)
        self.sent = sent


def role_change_of(cmd: RemotingCommand) -> RoleChange:
    """A NOTIFY_BROKER_ROLE_CHANGED (1008) request -> RoleChange (the broker set is not in it)."""
    d = headers.header_to_dict(headers.ROLE_CHANGE_FIELDS, cmd.ext_fields)
    if cmd.body:
        sss = headers.read_sync_state_set(cmd.body)
        d["sync_state_set"] = sss["sync_state_set"]
        d.setdefault("sync_state_set_epoch", sss["sync_state_set_epoch"])
    return RoleChange.from_dict(d)


class _TlsStream:
    """A TLS client stream over a connected socket, safe for one reader thread and any number of
    writer threads: the TLS state (ssl.SSLObject over memory BIOs) is only touched under one lock,
    and records leave in the order they were sealed."""

    def __init__(
        self, sock: socket.socket, ctx: ssl.SSLContext, server_hostname: str | None, timeout: float
    ) -> None:
        self._sock = sock
        self._in, self._out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self._tls = ctx.wrap_bio(self._in, self._out, server_side=False, server_hostname=server_hostname)
        self._lock = threading.Lock()
        self._plain = bytearray()
        self._eof = False
        sock.settimeout(timeout)
        while True:
            try:
                self._tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                self._flush()
                data = sock.recv(1 << 16)
                if not data:
                    raise ConnectionError("closed by the server during the TLS handshake") from None
                self._in.write(data)
        self._flush()
        sock.settimeout(None)

    def _flush(self) -> None:
        data = self._out.read()
        if data:
            self._sock.sendall(data)

    def recv(self, n: int) -> bytes:
        while not self._plain and not self._eof:
            data = self._sock.recv(1 << 16)
            with self._lock:
                if data:
                    self._in.write(data)
                else:
                    self._in.write_eof()
                try:
                    while True:
                        chunk = self._tls.read(1 << 16)
                        if not chunk:
                            self._eof = True
                            break
                        self._plain += chunk
                except ssl.SSLWantReadError:
                    pass
                except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                    self._eof = True
                self._flush()  # a post-handshake message may want an answer
            if not data:
                self._eof = True
        chunk = bytes(self._plain[:n])
        del self._plain[:n]
        return chunk

    def sendall(self, data: bytes) -> None:
        with self._lock:
            self._tls.write(data)
            self._flush()

    def shutdown(self, how: int) -> None:
        self._sock.shutdown(how)

    def close(self) -> None:
        self._sock.close()


class _Slot:
    """Where the reader thread leaves one answer (a lock held until then: cheaper than a Queue, whose
    three Conditions cost more than the rest of a request when a producer keeps many in flight)."""

    __slots__ = ("_done", "_lock", "_value")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()
        self._value: RemotingCommand | None = None
        self._done = False

    def put(self, value: RemotingCommand | None) -> None:
        """The first value only (a slot is taken out of `_pending` under the connection's lock by
        whoever puts into it, so there is one)."""
        if self._done:
            return
        self._done = True
        self._value = value
        self._lock.release()

    def get(self, timeout: float) -> RemotingCommand | None:
        if not self._lock.acquire(timeout=timeout):
            raise queue.Empty
        self._lock.release()
        return self._value


@dataclass(frozen=True)
class Pending:
    """A request sent on a RemotingConnection whose answer has not been taken yet."""

    code: int
    opaque: int
    queue: _Slot


class RemotingConnection:
    """One TCP connection: requests matched to responses by opaque; a reader thread collects
    responses and the server's own requests (``incoming``, e.g. 1008 notifications).

    ``tls``: an ssl.SSLContext to speak TLS with (mqctl.auth.client_context; the server name checked
    is the address's host, or ``server_hostname``). ``acl``: sign every request as RocketMQ's
    AclClientRPCHook does."""

    _opaque = itertools.count(1)

    def __init__(
        self,
        address: str,
        *,
        connect_timeout: float = 3.0,
        serialize_type: int = codec.JSON,
        language: str = "PYTHON",
        tls: ssl.SSLContext | None = None,
        server_hostname: str | None = None,
        acl: AclCredentials | None = None,
    ) -> None:
        host, port = parse_address(address)
        self.address = address
        self.serialize_type = serialize_type
        self.language = language
        self.acl = acl
        try:
            sock = socket.create_connection((host, port), timeout=connect_timeout)
        except OSError as exc:
            raise RemotingError(f"{address}: cannot connect: {exc.strerror or exc}", sent=False) from None
        sock.settimeout(None)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock: socket.socket | _TlsStream = sock
        if tls is not None:
            try:
                self._sock = _TlsStream(sock, tls, server_hostname or host, connect_timeout)
            except ssl.SSLCertVerificationError as exc:
                sock.close()
                raise RemotingError(
                    f"{address}: TLS: the server's certificate was refused: {exc.verify_message or exc}",
                    sent=False,
                ) from None
            except (OSError, ConnectionError) as exc:
                sock.close()
                raise RemotingError(
                    f"{address}: TLS handshake failed: {exc.strerror or exc} (is the port serving TLS?)",
                    sent=False,
                ) from None
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._pending: dict[int, _Slot] = {}
        self.incoming: queue.Queue[RemotingCommand] = queue.Queue(maxsize=10_000)
        self.closed = False
        self.error = ""
        self._reader = threading.Thread(target=self._read_loop, name=f"remoting-{address}", daemon=True)
        self._reader.start()

    def close(self) -> None:
        with self._lock:
            if self.closed:
                return
            self.closed = True
            pending = list(self._pending.values())
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        for q in pending:
            q.put(None)

    def __enter__(self) -> RemotingConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _recv_exactly(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self._sock.recv(min(n, 1 << 20))
            if not chunk:
                raise ConnectionError("closed by the server")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def _read_loop(self) -> None:
        try:
            while True:
                total = codec.frame_length(self._recv_exactly(4))
                cmd = codec.decode_frame(self._recv_exactly(total))
                if cmd.is_response:
                    with self._lock:
                        q = self._pending.pop(cmd.opaque, None)
                    if q is not None:
                        q.put(cmd)
                else:
                    try:
                        self.incoming.put_nowait(cmd)
                    except queue.Full:
                        log.warning(
                            "%s: dropping a request from the server (nobody reads them)", self.address
                        )
        except (OSError, ConnectionError, FrameError) as exc:
            self.error = str(exc)
        finally:
            self.close()

    def _send(self, cmd: RemotingCommand) -> None:
        self._send_frames(codec.encode_frame(cmd))

    def _send_frames(self, frame: bytes) -> None:
        try:
            with self._send_lock:  # frames of requests sent from several threads never interleave
                self._sock.sendall(frame)
        except OSError as exc:
            self.close()
            raise RemotingError(f"{self.address}: cannot send: {exc.strerror or exc}", sent=True) from None

    def command(
        self, code: int, ext_fields: Mapping[str, str] | None = None, body: bytes = b"", flag: int = 0
    ) -> RemotingCommand:
        if self.acl is not None:
            ext_fields = self.acl.sign(ext_fields, body)
        return RemotingCommand(
            code=code,
            language=self.language,
            opaque=next(self._opaque) & 0x7FFFFFFF,
            flag=flag,
            ext_fields=dict(ext_fields) if ext_fields else None,
            body=body,
            serialize_type=self.serialize_type,
        )

    def invoke(
        self,
        code: int,
        ext_fields: Mapping[str, str] | None = None,
        body: bytes = b"",
        *,
        timeout: float = 5.0,
    ) -> RemotingCommand:
        """Send a request and wait for its response (RemotingError when the connection fails)."""
        return self.answer(self.request(code, ext_fields, body), timeout=timeout)

    def request(self, code: int, ext_fields: Mapping[str, str] | None = None, body: bytes = b"") -> Pending:
        """Send a request without waiting: many may be in flight on the connection (a producer's
        window); `answer` waits for each."""
        return self.requests([(code, ext_fields, body)])[0]

    def requests(self, reqs: list[tuple[int, Mapping[str, str] | None, bytes]]) -> list[Pending]:
        """Send several requests in one write (one system call for a window of them)."""
        cmds = [self.command(code, ext, body) for code, ext, body in reqs]
        slots = [_Slot() for _ in cmds]
        with self._lock:
            closed = self.closed
            if not closed:
                for cmd, q in zip(cmds, slots, strict=True):
                    self._pending[cmd.opaque] = q
        if closed:
            self._not_a_raft_port()
            raise RemotingError(f"{self.address}: connection closed ({self.error or 'closed'})", sent=False)
        self._send_frames(b"".join(codec.encode_frame(c) for c in cmds))
        return [Pending(c.code, c.opaque, q) for c, q in zip(cmds, slots, strict=True)]

    def answer(self, pending: Pending, *, timeout: float = 5.0) -> RemotingCommand:
        try:
            answer = pending.queue.get(timeout=max(0.001, timeout))
        except queue.Empty:
            with self._lock:
                self._pending.pop(pending.opaque, None)
            raise RemotingError(
                f"{self.address}: no answer to request code {pending.code} within {timeout:.1f} s", sent=True
            ) from None
        if answer is None:
            self._not_a_raft_port()
            raise RemotingError(f"{self.address}: connection closed ({self.error or 'closed'})", sent=True)
        return answer

    def _not_a_raft_port(self) -> None:
        """UsageError at once when the server that closed this connection is a Raft port (asked once
        per address, mqctl.address.is_raft_port), instead of retrying for the whole --timeout."""

        if is_raft_port(self.address):
            raise raft_port_error(self.address)

    def oneway(self, code: int, ext_fields: Mapping[str, str] | None = None, body: bytes = b"") -> None:
        if self.closed:
            raise RemotingError(f"{self.address}: connection closed ({self.error or 'closed'})", sent=False)
        self._send(self.command(code, ext_fields, body, flag=FLAG_ONEWAY))

    def next_incoming(self, timeout: float) -> RemotingCommand | None:
        try:
            return self.incoming.get(timeout=timeout)
        except queue.Empty:
            return None


class _Retry(Exception):
    pass


class RemotingControllerClient(ControllerApi):
    """ControllerClient's API over RocketMQ remoting. Thread-safe; one connection per address.

    ``addresses``: controller remoting addresses ("a:1;b:2", "a:1,b:2" or a list). ``token``: sent
    in the ``mqctlToken`` header of admin calls (`mqctl serve --token`; RocketMQ ignores it).
    ``timeout``: overall deadline per method, retries included. ``serialize_type``: the header
    encoding of requests (codec.JSON or codec.ROCKETMQ).

    TLS (off by default) is used when ``tls`` is true, or when it is None and any of
    ``tls_ca``/``tls_cert``/``tls_key`` is given: the server certificate is checked against
    ``tls_ca`` (the system roots when None) and the address's host (``server_name`` overrides it);
    cert+key = mutual TLS. ``access_key``/``secret_key`` (off by default) sign every request as
    RocketMQ's AclClientRPCHook does (``security_token``: its optional SecurityToken).
    """

    carries_broker_options = False

    def __init__(
        self,
        addresses: str | list[str],
        token: str | None = None,
        *,
        timeout: float = 10.0,
        serialize_type: int = codec.JSON,
        tls_ca: str | None = None,
        tls_cert: str | None = None,
        tls_key: str | None = None,
        tls: bool | None = None,
        server_name: str | None = None,
        access_key: str | None = None,
        secret_key: str | None = None,
        security_token: str | None = None,
    ) -> None:
        use_tls = self._open(addresses, timeout, tls, tls_ca, tls_cert, tls_key)
        self._tls = client_context(tls_ca, tls_cert, tls_key) if use_tls else None
        self._server_name = server_name
        self._acl = (
            AclCredentials(access_key or "", secret_key or "", security_token)
            if access_key or secret_key
            else None
        )
        self.serialize_type = serialize_type
        self._token = token or None
        self._lock = threading.Lock()
        self._conns: dict[str, RemotingConnection] = {}
        self._closed = False

    def close(self) -> None:
        with self._lock:
            self._closed = True
            conns, self._conns = self._conns, {}
        for conn in conns.values():
            conn.close()

    def connection(self, address: str) -> RemotingConnection:
        """The open connection to ``address`` (opened on demand; RemotingError(sent=False) if not)."""
        with self._lock:
            if self._closed:
                raise UsageError("the controller client is closed")
            conn = self._conns.get(address)
            if conn is not None and not conn.closed:
                return conn
        conn = RemotingConnection(
            address,
            connect_timeout=min(3.0, self.timeout),
            serialize_type=self.serialize_type,
            tls=self._tls,
            server_hostname=self._server_name,
            acl=self._acl,
        )
        with self._lock:
            old = self._conns.get(address)
            if old is not None and not old.closed:
                conn.close()
                return old
            self._conns[address] = conn
        return conn

    def _unreachable(self, last_error: str) -> ControllerError:
        return ControllerError(
            Code.UNAVAILABLE,
            f"no controller reachable at {', '.join(self.addresses)} (last error: {last_error or 'none'})",
        )

    # -- plumbing --------------------------------------------------------------------------

    def _invoke(
        self, address: str, code: int, ext: Mapping[str, str], body: bytes, deadline: float
    ) -> RemotingCommand:
        conn = self.connection(address)
        return conn.invoke(code, ext, body, timeout=max(0.001, deadline - time.monotonic()))

    def _metadata_of(self, address: str, deadline: float) -> dict[str, Any]:
        answer = self._invoke(
            address,
            headers.GET_METADATA_INFO,
            {},
            b"",
            min(deadline, time.monotonic() + max(1.0, self.timeout / 4)),
        )
        d = headers.decode_response("GetMetadata", answer.ext_fields, answer.body)
        d["code"], d["remark"] = answer.code, answer.remark or ""
        return d

    def _discover(self, deadline: float) -> str:
        errors = []
        for address in self.addresses:
            if time.monotonic() >= deadline:
                break
            try:
                d = self._metadata_of(address, deadline)
            except (RemotingError, FrameError, ValueError) as exc:
                errors.append(str(exc))
                continue
            if d["code"] != 0:
                errors.append(f"{address}: {d['code']}: {d['remark']}")
                continue
            leader = str(d.get("controller_leader_address") or "")
            if leader:
                return leader
            errors.append(f"{address}: no leader elected yet")
        raise _Retry("; ".join(errors[-3:]) or "deadline exceeded during leader discovery")

    def _call(self, method: str, request: Mapping[str, Any], *, address: str | None = None) -> dict[str, Any]:
        row = methods.spec(method)
        if row.remoting_code is None:
            raise UsageError(f"{method} is not a RocketMQ remoting call (gRPC only): use --protocol grpc")
        code, ext, body = headers.encode_request(method, request)
        if self._token and methods.requires_token(method, request):
            ext[headers.TOKEN_KEY] = self._token
        retry_any = row.retry_any
        deadline = self.call_deadline()
        last_error = ""
        attempt = 0
        while True:
            if time.monotonic() >= deadline:
                raise self._unreachable(last_error)
            try:
                target = address or self._leader or self._discover(deadline)
                self._leader = target if address is None else self._leader
                try:
                    answer = self._invoke(target, code, ext, body, deadline)
                except RemotingError as exc:
                    if address is None:
                        self._leader = None
                    if retry_any or not exc.sent:
                        raise _Retry(str(exc)) from None
                    raise ControllerError(
                        Code.UNAVAILABLE,
                        f"{method} outcome unknown (the connection failed "
                        f"after the request was sent; check with a read before retrying): "
                        f"{exc}",
                    ) from None
                d = headers.decode_response(method, answer.ext_fields, answer.body)
                d["code"], d["remark"] = answer.code, answer.remark or ""
                if answer.code == Code.CONTROLLER_NOT_LEADER and address is None:
                    self._leader = None
                    raise _Retry(f"{target}: not the leader")
                if answer.code == Code.UNAVAILABLE and retry_any:
                    raise _Retry(f"{target}: {d['remark']}")
                if answer.code != Code.SUCCESS:
                    try:
                        decoded: Any = methods.spec(method).typed_answer(d)
                    except Exception:  # pragma: no cover - a malformed error answer still raises cleanly
                        decoded = d
                    raise ControllerError(answer.code, d["remark"], response=decoded)
                return d
            except _Retry as r:
                last_error = str(r)
                delay = min(BACKOFF_MAX, BACKOFF_INITIAL * (2**attempt)) * random.uniform(0.5, 1.0)
                attempt += 1
                time.sleep(max(0.0, min(delay, deadline - time.monotonic())))

    # -- the API: ControllerApi's, with remoting's differences ----------------------------------

    def get_metadata(self, address: str | None = None) -> Metadata:
        """1005 from ``address``, or from the leader (the first node that answers if none)."""
        deadline = self.call_deadline()
        candidates = (
            [address] if address else list(dict.fromkeys([*filter(None, [self._leader]), *self.addresses]))
        )
        last = ""
        while time.monotonic() < deadline:
            for addr in candidates:
                try:
                    d = self._metadata_of(addr, deadline)
                except (RemotingError, FrameError, ValueError) as exc:
                    last = str(exc)
                    continue
                if d["code"] != 0:
                    raise ControllerError(d["code"], d["remark"])
                leader = str(d.get("controller_leader_address") or "")
                if address is None and leader and leader != addr and not d.get("is_leader"):
                    try:
                        return Metadata.from_dict(self._metadata_of(leader, deadline), address=leader)
                    except (RemotingError, FrameError, ValueError) as exc:
                        last = str(exc)
                return Metadata.from_dict(d, address=addr)
            time.sleep(min(BACKOFF_MAX, max(0.0, deadline - time.monotonic())))
        raise self._unreachable(last)

    def _send_oneway(self, method: str, request: Mapping[str, Any]) -> None:
        """One-way, as brokers send BROKER_HEARTBEAT (904): to the leader only here; call
        ``connection(addr).oneway`` per address to beat to every controller."""
        code, ext, body = headers.encode_request(method, request)
        deadline = self.call_deadline()
        try:
            target = self._leader or self._discover(deadline)
        except _Retry as r:
            raise self._unreachable(str(r)) from None
        self.connection(target).oneway(code, ext, body)

    def get_config(self, address: str | None = None) -> ConfigResult:
        """GET_CONTROLLER_CONFIG (1010); mqadmin asks each address directly (any node answers)."""
        return super().get_config(address or self.addresses[0])

    def change_quorum(self, action: str, raft_address: str = "", feature_level: int = 0) -> Any:
        raise UsageError("quorum changes are a gRPC-only mqctl extension: use --protocol grpc")

    def watch_role_changes(self, cluster_name: str, broker_name: str = "", *, reconnect: bool = True) -> Any:
        raise UsageError(
            "RocketMQ remoting has no role-change stream (a controller pushes 1008 to registered "
            "brokers only); use --protocol grpc, or RemotingConnection.incoming"
        )

    def get_broker_epoch_cache(self, broker_addr: str, *, timeout: float | None = None) -> EpochCacheView:
        """GET_BROKER_EPOCH_CACHE (1007) to a RocketMQ broker.

        As ``mqctl.admin.broker_epochs.fetch_epoch_cache``: a transport failure or a non-zero code comes back
        as ``.error``; the last entry's endOffset is the broker's maxOffset (mqadmin getBrokerEpoch)."""
        wait = self.timeout if timeout is None else timeout
        try:
            with RemotingConnection(
                broker_addr,
                connect_timeout=min(3.0, wait),
                serialize_type=self.serialize_type,
                tls=self._tls,
                server_hostname=self._server_name,
                acl=self._acl,
            ) as conn:
                answer = conn.invoke(headers.GET_BROKER_EPOCH_CACHE, None, b"", timeout=wait)
        except (RemotingError, FrameError) as exc:
            return EpochCacheView(broker_addr=broker_addr, error=str(exc))
        if answer.code != 0:
            answered = {"code": answer.code, "remark": answer.remark or ""}
            return EpochCacheView.from_answer(answered, broker_addr)
        try:
            return EpochCacheView.from_answer(headers.read_epoch_cache(answer.body), broker_addr)
        except codec.BodyError as exc:
            return EpochCacheView(broker_addr=broker_addr, error=f"{broker_addr}: {exc}")
