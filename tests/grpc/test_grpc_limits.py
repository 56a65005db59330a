"""The gRPC door's per-peer limits on real `mqctl serve` processes (docs/serve.md#limits, issue 20): one
greedy client cannot take every watch stream or every worker from the others; a silent, half-open or
idle connection is closed; oversized messages and extra connections are refused.

Everything runs on 127.0.0.1, so every client has the same address: the per-connection limits are the
ones that keep a greedy loopback client from the others; the per-address ones are checked by what the
greedy client itself sees (tests/controller/test_peerlimits.py checks them with other addresses).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from grpc_fuzz_payloads import (
    DATA,
    END_HEADERS,
    END_STREAM,
    HEADERS,
    PING,
    PREFACE,
    RST_STREAM,
    SETTINGS,
    frame,
    grpc_headers,
    grpc_message,
)
from harness import TEST_CLUSTER, register_broker

from mqctl.client import ControllerClient
from mqctl.errors import Code
from mqctl.localgroup import LocalCluster, metadata
from mqctl.v1 import controller_pb2 as pb
from mqctl.v1 import controller_pb2_grpc as pb_grpc

pytestmark = pytest.mark.slow

GET_CONFIG = "/mqctl.v1.Controller/GetConfig"
WATCH = "/mqctl.v1.Controller/WatchRoleChanges"


def _own_connection(address: str) -> grpc.Channel:
    """A channel with its own TCP connection (grpc shares connections between equal channels)."""
    return grpc.insecure_channel(address, options=[("grpc.use_local_subchannel_pool", 1)])


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One node with the default limits, except no per-address limit on late request messages
    (every client of the test shares 127.0.0.1)."""
    cluster = LocalCluster(
        str(tmp_path_factory.mktemp("grpc-limits")),
        size=1,
        extra_args=["--grpc-max-stalled-per-address", "0"],
    )
    with cluster:
        cluster.start()
        with ControllerClient(cluster.addresses, timeout=20) as client:
            register_broker(client, "broker-a", "127.0.0.1:9000")
            client.elect_master(TEST_CLUSTER, "broker-a", 1)
        yield cluster.nodes[0]


def _first(stream: Any) -> Any:
    return next(stream)


def _open(channel: grpc.Channel, request: Any, wait: float = 5.0) -> Any:
    """A watch stream that got its slot (a slot given back a moment ago may not be free yet)."""
    deadline = time.monotonic() + wait
    while True:
        stream = pb_grpc.ControllerStub(channel).WatchRoleChanges(request, timeout=60)
        first = _first(stream)
        if first.code == 0:
            return stream
        stream.cancel()
        assert first.code == Code.SYSTEM_BUSY and time.monotonic() < deadline, first
        time.sleep(0.05)


def _frames(sock: socket.socket, seconds: float) -> list[tuple[int, int, int]]:
    """(type, flags, stream) of the frames the server sends within ``seconds``."""
    out: list[tuple[int, int, int]] = []
    buf = b""
    end = time.monotonic() + seconds
    sock.settimeout(0.05)
    while time.monotonic() < end:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            continue
        if not chunk:
            break
        buf += chunk
        while len(buf) >= 9 and len(buf) >= 9 + int.from_bytes(buf[:3], "big"):
            length = int.from_bytes(buf[:3], "big")
            out.append((buf[3], buf[4], int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF))
            buf = buf[9 + length :]
    return out


def test_one_greedy_connection_cannot_take_every_watch(node: Any) -> None:
    """The issue's case: one connection opens 500 watch streams. It gets its 16; the other 484 get one
    RoleChange with SYSTEM_BUSY naming the limit; other clients still open theirs; the address limit
    (64) stops the same client's fifth connection; closing gives the slots back. (A connection that
    opens more than 100 streams at once gets REFUSED_STREAM from HTTP/2 for the others.)"""
    request = pb.WatchRoleChangesRequest(cluster_name=TEST_CLUSTER, broker_name="broker-a")
    greedy = [_own_connection(node.grpc_address) for _ in range(5)]
    try:
        # in batches of 50: HTTP/2 lets a connection have 100 streams at a time (--grpc-max-streams)
        stub = pb_grpc.ControllerStub(greedy[0])
        streams, firsts = [], []
        for _ in range(10):
            batch = [stub.WatchRoleChanges(request, timeout=60) for _ in range(50)]
            firsts += [_first(s) for s in batch]
            streams += batch
        opened = [f for f in firsts if f.code == 0]
        busy = [f for f in firsts if f.code == Code.SYSTEM_BUSY]
        assert len(opened) == 16 and len(busy) == 484, (len(opened), len(busy))
        assert all(f.master_broker_id == 1 for f in opened)
        assert (
            "too many watch streams on this connection: at most 16 (--grpc-max-watches-per-connection)"
            in busy[0].remark
        )
        # every other client still opens its watches and gets its answers
        with ControllerClient(node.grpc_address, timeout=10) as other:
            watches = [other.watch_role_changes(TEST_CLUSTER, "broker-a") for _ in range(3)]
            assert [next(w).master_broker_id for w in watches] == [1, 1, 1]
            assert other.get_replica_info("broker-a").master_broker_id == 1
            for w in watches:
                w.close()
        # the same client address: 16 more on each of three more connections (64 in all), then refused
        more = [_open(ch, request) for ch in greedy[1:4] for _ in range(16)]
        refused = _first(pb_grpc.ControllerStub(greedy[4]).WatchRoleChanges(request, timeout=10))
        assert refused.code == Code.SYSTEM_BUSY
        assert "from 127.0.0.1: at most 64 (--grpc-max-watches-per-address)" in refused.remark
        for s in streams + more:
            s.cancel()
    finally:
        for ch in greedy:
            ch.close()
    # the slots come back: a new connection opens 16 again
    with _own_connection(node.grpc_address) as again:
        deadline = time.monotonic() + 10
        while True:
            stream = pb_grpc.ControllerStub(again).WatchRoleChanges(request, timeout=10)
            first = _first(stream)
            stream.cancel()
            if first.code == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert first.code == 0


def _stall(address: str, calls: int, path: str = GET_CONFIG) -> socket.socket:
    """A connection with ``calls`` unary calls whose request message never comes (a slowloris)."""
    host, _, port = address.rpartition(":")
    sock = socket.create_connection((host, int(port)), timeout=5)
    data = PREFACE + frame(SETTINGS, 0, 0)
    for i in range(calls):
        data += frame(HEADERS, END_HEADERS, 2 * i + 1, grpc_headers(path))
    sock.sendall(data)
    return sock


def test_calls_without_their_message_cannot_hold_every_worker(node: Any) -> None:
    """A slowloris: calls whose request message never arrives hold a worker each. Beyond 2 per
    connection and 8 in all, they are cancelled about a second after they started, and a connection
    that had calls cancelled may then keep only 2 waiting at all: the 16 workers keep answering the
    others."""
    warnings_before = node.log_text().count("WARNING mqctl.grpc")
    socks = [_stall(node.grpc_address, 50) for _ in range(6)]  # 300 calls, more than 16 workers
    try:
        time.sleep(2.5)  # over a second late: the guard cancels what is beyond the limits
        start = time.monotonic()
        with ControllerClient(node.grpc_address, timeout=10) as bystander:
            for _ in range(20):
                assert bystander.get_replica_info("broker-a").master_broker_id == 1
        assert time.monotonic() - start < 5
        # 8 late calls are kept in all: a new connection's late calls are cancelled about a second later
        late = _stall(node.grpc_address, 3)
        socks.append(late)
        answered = {stream for ftype, _, stream in _frames(late, 3.0) if ftype in (HEADERS, RST_STREAM)}
        assert answered == {1, 3, 5}, answered
    finally:
        for s in socks:
            s.close()
    # one line a minute per client address (the greedy watch test's line may be the one of this minute)
    assert node.log_text().count("WARNING mqctl.grpc") - warnings_before <= 2


def test_oversized_message(node: Any) -> None:
    with _own_connection(node.grpc_address) as ch, pytest.raises(grpc.RpcError) as e:
        ch.unary_unary(GET_CONFIG)(b"\x0a" + b"\x80\x80\x40" + b"x" * (1 << 20), timeout=10)
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "larger than max" in e.value.details()


def _closed_within(sock: socket.socket, seconds: float, ack_pings: bool = False) -> float | None:
    """Seconds until the server closed ``sock`` (None: still open after ``seconds``)."""
    start = time.monotonic()
    buf = b""
    sock.settimeout(0.1)
    while time.monotonic() - start < seconds:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            continue
        except ConnectionResetError:
            return time.monotonic() - start
        if not chunk:
            return time.monotonic() - start
        buf += chunk
        while ack_pings and len(buf) >= 9:
            length = int.from_bytes(buf[:3], "big")
            if len(buf) < 9 + length:
                break
            if buf[3] == PING and not buf[4] & 1:
                sock.sendall(frame(PING, 1, 0, buf[9 : 9 + length]))
            buf = buf[9 + length :]
    return None


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A node with short connection timeouts and at most 3 connections."""
    args = [
        "--grpc-handshake-timeout",
        "1s",
        "--grpc-keepalive",
        "1s",
        "--grpc-keepalive-timeout",
        "1s",
        "--grpc-idle-timeout",
        "2s",
        "--grpc-max-connections",
        "3",
    ]
    cluster = LocalCluster(str(tmp_path_factory.mktemp("grpc-quick")), size=1, extra_args=args)
    with cluster:
        cluster.start()
        yield cluster.nodes[0]


def _connect(address: str) -> socket.socket:
    host, _, port = address.rpartition(":")
    return socket.create_connection((host, int(port)), timeout=5)


def test_silent_and_half_open_and_idle_connections_are_closed(quick: Any) -> None:
    address = quick.grpc_address
    # slowloris on the handshake: nothing, or half a preface
    with _connect(address) as s:
        took = _closed_within(s, 5)
        assert took is not None and 0.8 < took < 3
    with _connect(address) as s:
        s.sendall(PREFACE[:10])
        took = _closed_within(s, 5)
        assert took is not None and took < 3
    # half-open: a watch stream open, the server's pings never answered
    request = pb.WatchRoleChangesRequest(cluster_name=TEST_CLUSTER, broker_name="x").SerializeToString()
    with _connect(address) as s:
        s.sendall(
            PREFACE
            + frame(SETTINGS, 0, 0)
            + frame(SETTINGS, 1, 0)
            + frame(HEADERS, END_HEADERS, 1, grpc_headers(WATCH))
            + frame(DATA, END_STREAM, 1, grpc_message(request))
        )
        took = _closed_within(s, 8)
        assert took is not None and took < 5
    # ... while a peer that answers the pings keeps its watch
    with _connect(address) as s:
        s.sendall(
            PREFACE
            + frame(SETTINGS, 0, 0)
            + frame(SETTINGS, 1, 0)
            + frame(HEADERS, END_HEADERS, 1, grpc_headers(WATCH))
            + frame(DATA, END_STREAM, 1, grpc_message(request))
        )
        assert _closed_within(s, 4, ack_pings=True) is None
    # idle: the handshake done, no call for --grpc-idle-timeout
    with _connect(address) as s:
        s.sendall(PREFACE + frame(SETTINGS, 0, 0) + frame(SETTINGS, 1, 0))
        took = _closed_within(s, 8, ack_pings=True)
        assert took is not None and 1.5 < took < 6


def test_connections_beyond_the_maximum_are_refused(quick: Any) -> None:
    time.sleep(0.5)  # the previous test's connections are closed
    channels = [_own_connection(quick.grpc_address) for _ in range(4)]
    try:
        codes = []
        for ch in channels:
            try:
                pb_grpc.ControllerStub(ch).GetMetadata(pb.GetMetadataRequest(), timeout=3)
                codes.append("OK")
            except grpc.RpcError as err:
                codes.append(err.code().name)
        assert codes == ["OK", "OK", "OK", "UNAVAILABLE"], codes
    finally:
        for ch in channels:
            ch.close()
    # once they are closed, a new client connects
    deadline = time.monotonic() + 10
    while True:
        try:
            assert metadata(quick.grpc_address)["is_leader"]
            break
        except grpc.RpcError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_limits_are_checked_at_start(tmp_path: Any) -> None:
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "mqctl", "serve", "--grpc-max-watches", "0", "--data-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "grpc_max_watches" in proc.stderr and "expected 1 or more" in proc.stderr
