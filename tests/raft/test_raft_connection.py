"""The Raft connection's timeout counts the peer's silence, not this node's own lateness
(mqctl/raft/FORK.md, change T4): real sockets on loopback and pysyncobj's real poller, driven by
this test as a node's tick thread drives them, with the clock a node gives its connections (the
start of its last complete poll)."""

from __future__ import annotations

import time
from typing import Any

from pysyncobj.poller import createPoller

from mqctl.localgroup import free_port
from mqctl.raft.tcp_connection import CONNECTION_STATE, TcpConnection
from mqctl.raft.tcp_server import TcpServer

TIMEOUT = 1.0


class Loop:
    """A poller and the clock of a node's tick: when the last complete poll started."""

    def __init__(self) -> None:
        self.poller = createPoller("auto")
        self.completed = time.monotonic()

    def clock(self) -> float:
        return self.completed

    def poll(self, seconds: float = 0.3) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            started = time.monotonic()
            self.poller.poll(0.02)
            self.completed = started


def _pair(loop: Loop, clock: Any) -> tuple[TcpConnection, TcpConnection, list[object]]:
    """A server-side and a client-side connection on loopback; the messages the server side got.
    The listener is closed once they are connected."""
    accepted: list[TcpConnection] = []
    received: list[object] = []
    port = free_port()
    server = TcpServer(
        loop.poller,
        "127.0.0.1",
        port,
        onNewConnection=accepted.append,
        connectionTimeout=TIMEOUT,
        clock=clock,
    )
    server.bind()
    client = TcpConnection(loop.poller, timeout=TIMEOUT, clock=clock)
    assert client.connect("127.0.0.1", port)
    loop.poll()
    server.unbind()
    assert len(accepted) == 1 and client.state == CONNECTION_STATE.CONNECTED
    accepted[0].setOnMessageReceivedCallback(received.append)
    return accepted[0], client, received


def test_a_late_tick_reads_what_waited_instead_of_closing() -> None:
    loop = Loop()
    server_side, client, received = _pair(loop, loop.clock)
    time.sleep(1.5 * TIMEOUT)  # the tick thread stalls (a slow fsync, the GIL, no CPU)
    client.send({"type": "after the stall"})
    loop.poll()
    assert received == [{"type": "after the stall"}]
    assert client.state == server_side.state == CONNECTION_STATE.CONNECTED
    client.disconnect()
    server_side.disconnect()


def test_upstreams_clock_closes_on_its_own_lateness() -> None:
    """The same with upstream's clock (now): the late side closes a connection whose peer was not
    silent at all, before reading it."""
    loop = Loop()
    server_side, client, received = _pair(loop, None)
    time.sleep(1.5 * TIMEOUT)
    client.send({"type": "after the stall"})
    loop.poll()
    assert received == [] and client.state == CONNECTION_STATE.DISCONNECTED
    server_side.disconnect()


def test_a_silent_peer_still_times_out() -> None:
    loop = Loop()
    server_side, client, _received = _pair(loop, loop.clock)
    loop.poll(1.5 * TIMEOUT)  # polling all along: the client really sends nothing
    server_side.send({"type": "anyone there?"})
    assert server_side.state == CONNECTION_STATE.DISCONNECTED
    client.disconnect()
