"""The Raft port: pysyncobj's TCPTransport with limits for whoever connects (issue 20).

pysyncobj accepted any number of connections, kept one that never said which node it is open for
as long as it sent nothing (or a byte a second), buffered up to 2 GiB for the length a frame
announced, took read-only nodes and its admin tool's commands (`syncobj_admin`: status, add and
remove a node, transfer the leadership) from anyone who could reach the port, raised a traceback
for a first message that cannot be a dictionary key, and unbound its listener for good when
`accept` failed once (EMFILE). Here, with the forked connection and server (mqctl/raft/FORK.md,
changes T1 to T3):

- a connection must say which node of the group it is (after the key exchange when the group has
  a cluster secret) within HANDSHAKE_TIMEOUT, in frames of at most HANDSHAKE_FRAME bytes; at most
  MAX_HANDSHAKES connections wait for that at once, the oldest is closed for a new one;
- a node's frames are limited to 4 x appendEntriesBatchSizeBytes (32 MiB in mqctl);
- read-only nodes and admin commands are refused (mqctl uses neither); so is a message that is
  not a pysyncobj message (a dict with a str 'type');
- whatever is refused closes the connection, with at most one log line a minute per client address;
- every connection's timeouts count the peer's silence up to the start of the node's last
  complete poll, not up to now (FORK.md, change T4): a node whose tick thread was late reads what
  its peers sent meanwhile instead of closing their connections.

docs/serve.md#limits lists them; tests/raft/test_raft_listener.py attacks a real node's port.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from pysyncobj.dns_resolver import globalDnsResolver
from pysyncobj.monotonic import monotonic
from pysyncobj.transport import TCPTransport

from mqctl.address import RAFT_BANNER
from mqctl.peerlimits import PeerLog
from mqctl.raft.tcp_connection import TcpConnection
from mqctl.raft.tcp_server import TcpServer

log = logging.getLogger("mqctl.raft.transport")

HANDSHAKE_TIMEOUT = 5.0  # seconds for a new connection to say which node it is
HANDSHAKE_FRAME = 64 * 1024  # bytes of one frame before it has
MAX_HANDSHAKES = 64  # connections waiting to say it, at once
NODE_FRAME_BATCHES = 4  # a node's frames: this many appendEntriesBatchSizeBytes


class GuardedTransport(TCPTransport):  # type: ignore[misc]
    """TCPTransport whose incoming connections are limited as the module says."""

    def __init__(self, syncObj: Any, selfNode: Any, otherNodes: Any) -> None:
        self._peer_log = PeerLog(log)
        self._waiting: dict[Any, float] = {}  # incoming connection -> accepted at, oldest first
        super().__init__(syncObj, selfNode, otherNodes)

    # --- the listener -------------------------------------------------------------------------

    def _createServer(self) -> None:
        conf = self._syncObj.conf
        bind = conf.bindAddress or self._selfNode.address
        host, port = bind.rsplit(":", 1)
        if bind is not conf.bindAddress:  # upstream: no bind address listens on every interface
            host = "::" if ":" in host else "0.0.0.0"
        if host != "0.0.0.0":
            host = globalDnsResolver().resolve(host)
        self._server = TcpServer(
            self._syncObj._poller,
            host,
            port,
            onNewConnection=self._onNewIncomingConnection,
            sendBufferSize=conf.sendBufferSize,
            recvBufferSize=conf.recvBufferSize,
            connectionTimeout=conf.connectionTimeout,
            onAcceptError=self._on_accept_error,
            clock=self._syncObj.connectionClock,
        )
        self._listening = bind

    def addNode(self, node: Any) -> None:
        """Upstream's, with mqctl's connection (its timeout on the node's clock, FORK.md T4) for the
        connections this node opens."""
        super().addNode(node)
        if node not in self._connections:
            return
        conf = self._syncObj.conf
        conn = TcpConnection(
            poller=self._syncObj._poller,
            timeout=conf.connectionTimeout,
            sendBufferSize=conf.sendBufferSize,
            recvBufferSize=conf.recvBufferSize,
            keepalive=conf.tcp_keepalive,
            clock=self._syncObj.connectionClock,
        )
        conn.encryptor = self._syncObj.encryptor
        conn.setOnConnectedCallback(functools.partial(self._onOutgoingConnected, conn))
        conn.setOnMessageReceivedCallback(functools.partial(self._onMessageReceived, node))
        conn.setOnDisconnectedCallback(functools.partial(self._onDisconnected, conn))
        self._connections[node] = conn

    def _on_accept_error(self, exc: OSError) -> None:
        self._peer_log.warning(
            "accept", "raft port %s: could not accept a connection: %s", self._listening, exc
        )

    def _onNewIncomingConnection(self, conn: Any) -> None:
        if len(self._waiting) >= MAX_HANDSHAKES:
            self._refuse(
                next(iter(self._waiting)),
                f"{MAX_HANDSHAKES} connections waited to say which node they are; the oldest is closed",
            )
        super()._onNewIncomingConnection(conn)
        conn.maxFrame = HANDSHAKE_FRAME
        conn.rejectBanner = RAFT_BANNER  # FORK.md, change T6
        self._waiting[conn] = monotonic()

    def _onIncomingMessageReceived(self, conn: Any, message: Any) -> None:
        """A message on a connection that has not yet said which node it is."""
        if self._syncObj.encryptor and not conn.sendRandKey:
            valid = isinstance(message, bytes)  # the other side's key
        else:
            valid = isinstance(message, str) and message in self._nodeAddrToNode
        if not valid:
            what = (
                f"says it is {message[:100]!r}, not a node of this group"
                if isinstance(message, str)
                else f"sent a {type(message).__name__} where a node says which node it is "
                "(read-only nodes and pysyncobj's admin commands are refused)"
            )
            self._refuse(conn, what)
            return
        super()._onIncomingMessageReceived(conn, message)
        if conn not in self._unknownConnections:  # a node of the group
            self._waiting.pop(conn, None)
            conn.rejectBanner = None
            conn.maxFrame = NODE_FRAME_BATCHES * self._syncObj.conf.appendEntriesBatchSizeBytes

    def _onMessageReceived(self, node: Any, message: Any) -> None:
        if not isinstance(message, dict) or not isinstance(message.get("type"), str):
            conn = self._connections.get(node)
            if conn is not None:
                self._refuse(conn, f"node {node} sent a {type(message).__name__} that is not a Raft message")
            return
        super()._onMessageReceived(node, message)

    def _onDisconnected(self, conn: Any) -> None:
        self._waiting.pop(conn, None)
        reason = getattr(conn, "rejectReason", None)
        if reason:
            conn.rejectReason = None
            host = getattr(conn, "peerHost", None) or "a node"
            self._peer_log.warning(
                host, "raft port %s: closed a connection from %s: %s", self._listening, host, reason
            )
        super()._onDisconnected(conn)

    def _onTick(self) -> None:
        super()._onTick()
        now = self._syncObj.connectionClock()  # not this node's lateness (FORK.md, change T4)
        for conn, accepted in list(self._waiting.items()):
            if now - accepted <= HANDSHAKE_TIMEOUT:
                break
            self._refuse(conn, f"it did not say which node it is within {HANDSHAKE_TIMEOUT:g} s")

    def _refuse(self, conn: Any, reason: str) -> None:
        self._waiting.pop(conn, None)
        conn.rejectReason = reason
        conn.disconnect()
        self._unknownConnections.discard(conn)
