"""The remoting door's per-peer limits on a real `mqctl serve --remoting-port` (docs/serve.md#limits,
issue 20): connections per client address, the idle timeout (also in the middle of a frame), and at
most one log line a minute per client address for what a client can repeat at will."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator

import pytest
from harness import start_remoting, with_remoting_ports
from remoting_fixtures import raw, request

from mqctl.localgroup import LocalCluster, wait_until
from mqctl.remoting.codec import RemotingCommand, encode_frame

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, str]]:
    cluster = LocalCluster(
        str(tmp_path_factory.mktemp("remoting-limits")),
        size=1,
        extra_args=["--remoting-max-connections-per-address", "3", "--remoting-idle-timeout", "2s"],
    )
    addresses = with_remoting_ports(cluster)
    with cluster:
        start_remoting(cluster, addresses)
        yield cluster, addresses[0]


def _closed_within(sock: socket.socket, seconds: float) -> float | None:
    start = time.monotonic()
    sock.settimeout(0.05)
    while time.monotonic() - start < seconds:
        try:
            if not sock.recv(65536):
                return time.monotonic() - start
        except TimeoutError:
            continue
        except ConnectionResetError:
            return time.monotonic() - start
    return None


def _metadata_ok(sock: socket.socket, opaque: int = 1) -> bool:
    return request(sock, RemotingCommand(code=1005, opaque=opaque)).code == 0


def test_connections_per_address(address: tuple[LocalCluster, str]) -> None:
    cluster, addr = address
    node = cluster.nodes[0]
    time.sleep(2.5)  # the fixture's own probe connections are gone
    lines_before = node.log_text().count("refusing connection")
    with raw(addr) as a, raw(addr) as b, raw(addr) as c:
        assert all(_metadata_ok(s) for s in (a, b, c))
        for _ in range(20):  # the fourth and later are closed at once
            with raw(addr) as extra:
                took = _closed_within(extra, 1.0)
                assert took is not None and took < 0.5
        assert _metadata_ok(a, 2)  # the three keep working
    # one log line for the 20 (at most one a minute per client address)
    log = node.log_text()
    assert log.count("refusing connection") - lines_before == 1
    assert "from 127.0.0.1: at most 3 (--remoting-max-connections-per-address)" in log
    time.sleep(0.3)
    with raw(addr) as again:  # closed connections give their place back
        assert _metadata_ok(again)


def test_idle_and_half_sent_frames_are_closed(address: tuple[LocalCluster, str]) -> None:
    _, addr = address
    time.sleep(0.5)
    with raw(addr) as silent:
        took = _closed_within(silent, 5)
        assert took is not None and 1.5 < took < 4
    with raw(addr) as slow:  # a frame's length, then nothing: a slowloris
        slow.sendall(struct.pack(">i", 100) + b"\x00\x00")
        took = _closed_within(slow, 5)
        assert took is not None and 1.5 < took < 4
    with raw(addr) as busy:  # a connection that talks stays open
        for i in range(8):
            assert _metadata_ok(busy, i)
            time.sleep(0.5)


def test_a_client_gone_before_its_answers_costs_no_traceback(address: tuple[LocalCluster, str]) -> None:
    """A client that sends more requests than are processed at a time on its connection (64, so the
    door stops reading it) and closes: the answers meet a closed transport (uvloop raises where
    asyncio's loop ignored the write). No traceback, and the door serves on."""
    cluster, addr = address
    node = cluster.nodes[0]
    for i in range(10):
        frames = b"".join(
            encode_frame(
                RemotingCommand(
                    code=code,
                    opaque=k,
                    ext_fields={
                        "brokerName": f"gone-{i}-{k}",
                        "brokerId": "1",
                        "clusterName": "c",
                        "appliedBrokerId": "1",
                        "registerCheckCode": f"127.0.0.1:{20000 + k};1",
                    },
                )
            )
            for k in range(150)
            for code in (1013, 904)
        )
        with raw(addr) as gone:
            gone.sendall(frames)

    def serves() -> bool:  # once the closed connections have given their places back (3 per address)
        with raw(addr) as still:
            return _metadata_ok(still)

    wait_until(serves, 20, what="the remoting door to serve again")
    assert "Traceback" not in node.log_text()
