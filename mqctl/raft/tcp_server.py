# This file is a fork of pysyncobj/tcp_server.py from pysyncobj 0.3.17
# (https://github.com/bakwc/PySyncObj), used under the MIT License:
#
#   The MIT License (MIT)
#
#   Copyright (c) 2016 Filipp Ozinov
#
#   Permission is hereby granted, free of charge, to any person obtaining a copy
#   of this software and associated documentation files (the "Software"), to deal
#   in the Software without restriction, including without limitation the rights
#   to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
#   copies of the Software, and to permit persons to whom the Software is
#   furnished to do so, subject to the following conditions:
#
#   The above copyright notice and this permission notice shall be included in all
#   copies or substantial portions of the Software.
#
#   THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
#   IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
#   FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
#   AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
#   LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
#   OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
#   SOFTWARE.
#
# Every change is marked with a "# mqctl:" comment and described in mqctl/raft/FORK.md.

# mqctl: typed, ruff- and mypy-clean (FORK.md, change T5); absolute imports; the connections are
# mqctl's fork of pysyncobj's (FORK.md)
import errno
import socket
from collections.abc import Callable
from typing import Any

from pysyncobj.poller import POLL_EVENT_TYPE

from mqctl.raft.tcp_connection import TcpConnection, _getAddrType

_BACKLOG = 128       # mqctl: connections the kernel queues before they are accepted (change T3)
_ACCEPT_BATCH = 64   # mqctl: connections accepted per poll (change T3)


class SERVER_STATE:
    UNBINDED = (0,)  # upstream's trailing comma made it a tuple; the value is kept
    BINDED = 1


class TcpServer:

    def __init__(
            self, poller: Any, host: str, port: int | str,
            onNewConnection: Callable[[TcpConnection], None],
            sendBufferSize: int = 2 ** 13,
            recvBufferSize: int = 2 ** 13,
            connectionTimeout: float = 3.5,
            keepalive: Any = None,
            onAcceptError: Callable[[OSError], None] | None = None,
            clock: Callable[[], float] | None = None,
    ) -> None:
        self.__poller = poller
        self.__host = host
        self.__port = int(port)
        self.__hostAddrType = _getAddrType(host)
        self.__sendBufferSize = sendBufferSize
        self.__recvBufferSize = recvBufferSize
        self.__socket: socket.socket | None = None
        self.__fileno: int | None = None
        self.__keepalive = keepalive
        self.__state: object = SERVER_STATE.UNBINDED
        self.__onNewConnectionCallback = onNewConnection
        self.__connectionTimeout = connectionTimeout
        self.__onAcceptError = onAcceptError  # mqctl: FORK.md, change T3
        self.__clock = clock  # mqctl: the connections' clock (FORK.md, change T4)

    def bind(self) -> None:
        sock = self.__socket = socket.socket(self.__hostAddrType, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.__sendBufferSize)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.__recvBufferSize)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setblocking(False)
        sock.bind((self.__host, self.__port))
        sock.listen(_BACKLOG)  # mqctl: was 5 (change T3)
        self.__fileno = sock.fileno()
        self.__poller.subscribe(self.__fileno,
                                self.__onNewConnection,
                                POLL_EVENT_TYPE.READ | POLL_EVENT_TYPE.ERROR)
        self.__state = SERVER_STATE.BINDED

    def unbind(self) -> None:
        self.__state = SERVER_STATE.UNBINDED
        if self.__fileno is not None:
            self.__poller.unsubscribe(self.__fileno)
            self.__fileno = None
        if self.__socket is not None:
            self.__socket.close()

    def __onNewConnection(self, descr: int, event: int) -> None:
        if event & POLL_EVENT_TYPE.READ:
            # mqctl: up to _ACCEPT_BATCH waiting connections per poll, not one: with a backlog of 5,
            # a burst of connections (a flood) delayed a peer's by SYN retransmissions (change T3)
            for _ in range(_ACCEPT_BATCH):
                if not self.__acceptOne():
                    break

        if event & POLL_EVENT_TYPE.ERROR:
            self.unbind()
            return

    def __acceptOne(self) -> bool:
        # mqctl: a failed accept (no file descriptor left: EMFILE, ENFILE; a connection reset
        # before it was accepted) or a failed setsockopt on the new socket loses that connection
        # only; upstream unbound the server for good, so that the node never listened again
        # (FORK.md, change T3). False when nothing more is waiting.
        if self.__socket is None:
            return False
        try:
            sock, addr = self.__socket.accept()
        except OSError as e:
            if e.errno not in (errno.EAGAIN, errno.EWOULDBLOCK) and self.__onAcceptError:
                self.__onAcceptError(e)
            return False
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.__sendBufferSize)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.__recvBufferSize)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setblocking(False)
            conn = TcpConnection(
                poller=self.__poller,
                socket=sock,
                timeout=self.__connectionTimeout,
                sendBufferSize=self.__sendBufferSize,
                recvBufferSize=self.__recvBufferSize,
                keepalive=self.__keepalive,
                clock=self.__clock,  # mqctl: change T4
            )
        except OSError:
            sock.close()
            return True
        conn.peerHost = addr[0]  # mqctl: the client's address, for limits and log lines (T3)
        self.__onNewConnectionCallback(conn)
        return True
