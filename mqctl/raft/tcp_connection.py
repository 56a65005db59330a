# This file is a fork of pysyncobj/tcp_connection.py from pysyncobj 0.3.17
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

# mqctl: typed, ruff- and mypy-clean (FORK.md, change T5): imports sorted, `errno` for
# `socket.errno`, `OSError` for its alias `socket.error`; upstream's unused `import time` and second
# `import socket` dropped
import errno
import socket
import struct
import zlib
from collections.abc import Callable
from sys import platform
from typing import Any

import pysyncobj.pickle as pickle
import pysyncobj.win_inet_pton  # noqa: F401  (on Windows it adds socket.inet_pton)

# mqctl: absolute imports: everything but the forked files comes from the pinned pysyncobj package
from pysyncobj.monotonic import monotonic as monotonicTime
from pysyncobj.poller import POLL_EVENT_TYPE


class CONNECTION_STATE:
    DISCONNECTED = 0
    CONNECTING = 1
    CONNECTED = 2

def _getAddrType(addr: str) -> socket.AddressFamily:
    try:
        socket.inet_aton(addr)
        return socket.AF_INET
    except OSError:
        pass
    try:
        socket.inet_pton(socket.AF_INET6, addr)
        return socket.AF_INET6
    except OSError:
        pass
    raise Exception('unknown address type')


def set_keepalive_linux(sock: socket.socket, after_idle_sec: int = 1, interval_sec: int = 3,
                        max_fails: int = 5) -> None:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, after_idle_sec)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, interval_sec)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, max_fails)

def set_keepalive_osx(sock: socket.socket, after_idle_sec: int = 1, interval_sec: int = 3,
                      max_fails: int = 5) -> None:
    TCP_KEEPALIVE = 0x10
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    sock.setsockopt(socket.IPPROTO_TCP, TCP_KEEPALIVE, interval_sec)

def set_keepalive_windows(sock: socket.socket, after_idle_sec: int = 1, interval_sec: int = 3,
                          max_fails: int = 5) -> None:
    # mqctl: Windows only (typeshed declares both names for win32 only)
    sock.ioctl(socket.SIO_KEEPALIVE_VALS, (1, after_idle_sec * 1000, interval_sec * 1000))  # type: ignore[attr-defined,unused-ignore]


def set_keepalive(sock: socket.socket, after_idle_sec: int = 1, interval_sec: int = 3,
                  max_fails: int = 5) -> None:
    if platform == "linux" or platform == "linux2":
        set_keepalive_linux(sock, after_idle_sec, interval_sec, max_fails)
    elif platform == "darwin":
        set_keepalive_osx(sock, after_idle_sec, interval_sec, max_fails)
    elif platform == "win32":
        set_keepalive_windows(sock, after_idle_sec, interval_sec, max_fails)


class TcpConnection:

    def __init__(self, poller: Any, onMessageReceived: Callable[[Any], None] | None = None,
                 onConnected: Callable[[], None] | None = None,
                 onDisconnected: Callable[[], None] | None = None,
                 socket: socket.socket | None = None, timeout: float = 10.0,
                 sendBufferSize: int = 2 ** 13, recvBufferSize: int = 2 ** 13,
                 keepalive: tuple[int, int, int] | None = None,
                 clock: Callable[[], float] | None = None) -> None:
        self.sendRandKey: Any = None
        self.recvRandKey: Any = None
        self.recvLastTimestamp = 0
        self.encryptor: Any = None
        # mqctl: the largest frame accepted (None: no limit, as upstream), and why this connection was
        # closed on bad input (None: it was not); FORK.md, changes T1 and T2
        self.maxFrame: int | None = None
        self.rejectReason: str | None = None
        self.peerHost: str | None = None  # mqctl: the client's address of an accepted connection (change T3)
        # mqctl: written just before a connection is closed on bad input, while it has not said which
        # node it is (an accepted one): a client of another protocol learns where it is (change T6)
        self.rejectBanner: bytes | None = None
        self.__clock = clock or monotonicTime  # mqctl: what the timeout is measured to (change T4)

        self.__socket = socket
        self.__readBuffer = b''
        self.__writeBuffer = b''
        self.__lastReadTime: float = monotonicTime()
        self.__timeout = timeout
        self.__poller = poller
        self.__keepalive = keepalive
        if socket is not None:
            self.__socket = socket
            self.__fileno: int | None = socket.fileno()
            self.__state = CONNECTION_STATE.CONNECTED
            self.setSockoptKeepalive()
            self.__poller.subscribe(self.__fileno,
                                     self.__processConnection,
                                     POLL_EVENT_TYPE.READ | POLL_EVENT_TYPE.WRITE | POLL_EVENT_TYPE.ERROR)
        else:
            self.__state = CONNECTION_STATE.DISCONNECTED
            self.__fileno = None
            self.__socket = None

        self.__onMessageReceived = onMessageReceived
        self.__onConnected = onConnected
        self.__onDisconnected = onDisconnected
        self.__sendBufferSize = sendBufferSize
        self.__recvBufferSize = recvBufferSize

    def setSockoptKeepalive(self) -> None:
        if self.__socket is None:
            return
        if self.__keepalive is None:
            return
        set_keepalive(
            self.__socket,
            self.__keepalive[0],
            self.__keepalive[1],
            self.__keepalive[2],
        )

    def setOnConnectedCallback(self, onConnected: Callable[[], None] | None) -> None:
        self.__onConnected = onConnected

    def setOnMessageReceivedCallback(self, onMessageReceived: Callable[[Any], None] | None) -> None:
        self.__onMessageReceived = onMessageReceived

    def setOnDisconnectedCallback(self, onDisconnected: Callable[[], None] | None) -> None:
        self.__onDisconnected = onDisconnected

    def connect(self, host: str | None, port: int) -> bool:
        if host is None:
            return False
        self.__state = CONNECTION_STATE.DISCONNECTED
        self.__fileno = None
        sock = self.__socket = socket.socket(_getAddrType(host), socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.__sendBufferSize)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.__recvBufferSize)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.setSockoptKeepalive()
        sock.setblocking(False)
        self.__readBuffer = b''
        self.__writeBuffer = b''
        self.__lastReadTime = monotonicTime()

        try:
            sock.connect((host, port))
        except OSError as e:
            if e.errno not in (errno.EINPROGRESS, errno.EWOULDBLOCK):
                return False
        self.__fileno = sock.fileno()
        self.__state = CONNECTION_STATE.CONNECTING
        self.__poller.subscribe(self.__fileno,
                                 self.__processConnection,
                                 POLL_EVENT_TYPE.READ | POLL_EVENT_TYPE.WRITE | POLL_EVENT_TYPE.ERROR)
        return True

    def send(self, message: Any) -> None:
        if self.sendRandKey:
            message = (self.sendRandKey, message)
        data = zlib.compress(pickle.dumps(message), 3)
        if self.encryptor:
            data = self.encryptor.encrypt_at_time(data, int(monotonicTime()))
        data = struct.pack('i', len(data)) + data
        self.__writeBuffer += data
        self.__trySendBuffer()

    def fileno(self) -> int | None:
        return self.__fileno

    def disconnect(self) -> None:
        needCallDisconnect = False
        if self.__onDisconnected is not None and self.__state != CONNECTION_STATE.DISCONNECTED:
            needCallDisconnect = True
        self.sendRandKey = None
        self.recvRandKey = None
        self.recvLastTimestamp = 0
        if self.__socket is not None:
            self.__socket.close()
            self.__socket = None
        if self.__fileno is not None:
            self.__poller.unsubscribe(self.__fileno)
            self.__fileno = None
        self.__writeBuffer = b''
        self.__readBuffer = b''
        self.__state = CONNECTION_STATE.DISCONNECTED
        if needCallDisconnect and self.__onDisconnected is not None:  # mqctl: for mypy; checked above
            self.__onDisconnected()

    def getSendBufferSize(self) -> int:
        return len(self.__writeBuffer)

    def __processConnection(self, descr: int, eventType: int) -> None:
        poller = self.__poller
        if descr != self.__fileno:
            poller.unsubscribe(descr)
            return

        if eventType & POLL_EVENT_TYPE.ERROR:
            self.disconnect()
            return

        self.__processConnectionTimeout()
        if self.state == CONNECTION_STATE.DISCONNECTED:
            return

        if eventType & POLL_EVENT_TYPE.READ or eventType & POLL_EVENT_TYPE.WRITE:
            assert self.__socket is not None  # mqctl: for mypy; subscribed while it has a socket
            if self.__socket.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                self.disconnect()
                return

            if self.__state == CONNECTION_STATE.CONNECTING:
                if self.__onConnected is not None:
                    self.__onConnected()
                if self.__state == CONNECTION_STATE.DISCONNECTED:
                    return
                self.__state = CONNECTION_STATE.CONNECTED
                self.__lastReadTime = monotonicTime()
                return

        if eventType & POLL_EVENT_TYPE.WRITE:
            self.__trySendBuffer()
            if self.__state == CONNECTION_STATE.DISCONNECTED:
                return
            event = POLL_EVENT_TYPE.READ | POLL_EVENT_TYPE.ERROR
            if len(self.__writeBuffer) > 0:
                event |= POLL_EVENT_TYPE.WRITE
            poller.subscribe(descr, self.__processConnection, event)

        if eventType & POLL_EVENT_TYPE.READ:
            self.__tryReadBuffer()
            if self.__state == CONNECTION_STATE.DISCONNECTED:
                return

            while True:
                message = self.__processParseMessage()
                if message is None:
                    break
                if self.__onMessageReceived is not None:
                    self.__onMessageReceived(message)
                if self.__state == CONNECTION_STATE.DISCONNECTED:
                    return

    def __processConnectionTimeout(self) -> None:
        # mqctl: silence up to the clock (the start of the owner's last complete poll), not up to
        # now: after a stall of this node the bytes waiting in the socket are read first (change T4)
        if self.__clock() - self.__lastReadTime > self.__timeout:
            self.disconnect()
            return

    def __trySendBuffer(self) -> None:
        self.__processConnectionTimeout()
        if self.state == CONNECTION_STATE.DISCONNECTED:
            return
        while self.__processSend():
            pass

    def __processSend(self) -> bool:
        if not self.__writeBuffer:
            return False
        assert self.__socket is not None  # mqctl: for mypy; a disconnected one has no buffer
        try:
            res = self.__socket.send(self.__writeBuffer)
            if res < 0:
                self.disconnect()
                return False
            if res == 0:
                return False
            self.__writeBuffer = self.__writeBuffer[res:]
            return True
        except OSError as e:
            if e.errno not in (errno.EAGAIN, errno.EWOULDBLOCK):
                self.disconnect()
            return False

    def __tryReadBuffer(self) -> None:
        # mqctl: no more than one frame (and one recv) ahead of what is parsed: a sender faster than
        # this node no longer grows the buffer without bound; the poller is level-triggered, so what
        # is left in the socket is read in the next poll (FORK.md, change T1)
        limit = None if self.maxFrame is None else self.maxFrame + 4
        while (limit is None or len(self.__readBuffer) <= limit) and self.__processRead():
            pass
        self.__lastReadTime = monotonicTime()

    def __processRead(self) -> bool:
        assert self.__socket is not None  # mqctl: for mypy; read only while connected
        try:
            incoming = self.__socket.recv(self.__recvBufferSize)
        except OSError as e:
            if e.errno not in (errno.EAGAIN, errno.EWOULDBLOCK):
                self.disconnect()
            return False
        if self.__socket.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
            self.disconnect()
            return False
        if not incoming:
            self.disconnect()
            return False
        self.__readBuffer += incoming
        return True

    def __processParseMessage(self) -> Any:
        if len(self.__readBuffer) < 4:
            return None
        l = struct.unpack('i', self.__readBuffer[:4])[0]  # noqa: E741
        # mqctl: a length below zero or above the limit closes the connection before its bytes are
        # awaited (upstream buffered up to 2 GiB for it); FORK.md, change T1
        if l < 0 or (self.maxFrame is not None and l > self.maxFrame):
            self.__reject(f'a frame of {l} bytes (at most {self.maxFrame or 0})')
            return None
        if len(self.__readBuffer) - 4 < l:
            return None
        data = self.__readBuffer[4:4 + l]
        # mqctl: the reason of a rejected frame is kept for the transport's log line (FORK.md, T2)
        what = 'a frame that is not a Raft message'
        try:
            if self.encryptor:
                what = 'a frame that does not decrypt with this cluster secret (--cluster-secret)'
                dataTimestamp = self.encryptor.extract_timestamp(data)
                assert dataTimestamp >= self.recvLastTimestamp
                self.recvLastTimestamp = dataTimestamp
                # Unfortunately we can't get a timestamp and data in one go
                data = self.encryptor.decrypt(data)
                what = 'a frame that is not a Raft message'
            message = pickle.loads(zlib.decompress(data))
            if self.recvRandKey:
                randKey, message = message
                assert randKey == self.recvRandKey
        except:  # noqa: E722
            # Why no logging of security errors?
            self.__reject(what)
            return None
        self.__readBuffer = self.__readBuffer[4 + l:]
        return message

    def __reject(self, reason: str) -> None:
        # mqctl: closed on bad input, with the reason (FORK.md, change T2)
        self.rejectReason = reason
        if self.rejectBanner and self.__socket is not None:
            try:  # mqctl: change T6; the kernel sends it, whatever is left unsent is lost
                self.__socket.send(self.rejectBanner)
            except OSError:
                pass
        self.disconnect()

    @property
    def state(self) -> int:
        return self.__state
