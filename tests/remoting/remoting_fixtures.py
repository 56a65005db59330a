"""Helpers for tests/remoting: raw sockets to a real `mqctl serve --remoting-port` (harness starts them).

(A unique module name, so that test modules import it without clashing with other directories.)
"""

from __future__ import annotations

import queue
import socket
import struct
from collections.abc import Iterator
from contextlib import contextmanager

from harness import StandInServer

from mqctl.remoting import codec
from mqctl.remoting.codec import RemotingCommand


@contextmanager
def raw(address: str, timeout: float = 5.0) -> Iterator[socket.socket]:
    host, _, port = address.rpartition(":")
    sock = socket.create_connection((host, int(port)), timeout=timeout)
    try:
        yield sock
    finally:
        sock.close()


def recv_exactly(sock: socket.socket, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def recv_frame(sock: socket.socket) -> tuple[RemotingCommand, int] | None:
    """The next frame (and the serialize type it came in), or None when the server closed."""
    prefix = recv_exactly(sock, 4)
    if prefix is None:
        return None
    (total,) = struct.unpack(">i", prefix)
    payload = recv_exactly(sock, total)
    if payload is None:
        return None
    return codec.decode_frame(payload), payload[0]


def request(sock: socket.socket, cmd: RemotingCommand) -> RemotingCommand:
    sock.sendall(codec.encode_frame(cmd))
    got = recv_frame(sock)
    assert got is not None, "the server closed the connection"
    return got[0]


def closed_by_server(sock: socket.socket) -> bool:
    """True when the server closes ``sock`` (EOF or reset) before the socket timeout."""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


class BrokerListener(StandInServer):
    """Where a RocketMQ broker listens (its registered address): records the one-way requests a
    controller sends there, as a broker's NettyRemotingServer would receive them (1008)."""

    def __init__(self) -> None:
        self.received: queue.Queue[RemotingCommand] = queue.Queue()
        super().__init__()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(5.0)
        with conn:
            while not self._stop.is_set():
                try:
                    got = recv_frame(conn)
                except OSError:
                    return
                if got is None:
                    return
                self.received.put(got[0])

    def take(self) -> list[RemotingCommand]:
        out = []
        while True:
            try:
                out.append(self.received.get_nowait())
            except queue.Empty:
                return out
