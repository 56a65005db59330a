"""Random and mutated frames thrown at a real `mqctl serve --remoting-port` for a bounded time: the
server stays up, its memory stays bounded, other clients keep working, the state hash is unchanged."""

from __future__ import annotations

import os
import socket
import struct
import time
from collections.abc import Iterator

import pytest
from harness import TEST_CLUSTER, register_broker, start_remoting, with_remoting_ports
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from remoting_fixtures import raw, request

from mqctl.client import ControllerClient
from mqctl.localgroup import LocalCluster, metadata
from mqctl.remoting import codec, headers
from mqctl.remoting.codec import FLAG_ONEWAY, JSON, ROCKETMQ, RemotingCommand

pytestmark = pytest.mark.slow

FUZZ_SECONDS = 15.0
TOKEN = "fuzz-token"  # admin calls (clean, config, designated elections) are refused without it


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, str]]:
    cluster = LocalCluster(
        str(tmp_path_factory.mktemp("remoting-fuzz")), size=1, extra_args=["--token", TOKEN]
    )
    addresses = with_remoting_ports(cluster)
    with cluster:
        start_remoting(cluster, addresses)
        with ControllerClient(cluster.addresses, token=TOKEN, timeout=20) as client:
            # Some state to protect: broker-a with master 1, which sends no heartbeats (so nothing the
            # node does on its own changes the state during the run).
            register_broker(client, "broker-a", "127.0.0.1:9000")
            client.elect_master(TEST_CLUSTER, "broker-a", 1)
        yield cluster, addresses[0]


def _seed_frames() -> list[bytes]:
    """Well-formed requests for reads and an unknown broker set; mutations start from these."""
    reads = [
        (1005, {}, b""),
        (1010, {}, b""),
        (1004, {"brokerName": "broker-a"}, b""),
        (1006, {}, b'["broker-a"]'),
        (1012, {"clusterName": TEST_CLUSTER, "brokerName": "broker-a"}, b""),
        (
            904,
            {
                "clusterName": "fuzz",
                "brokerAddr": "127.0.0.1:30919",
                "brokerName": "fuzz-b",
                "brokerId": "7",
                "epoch": "1",
                "maxOffset": "5",
            },
            b"",
        ),
        (9999, {}, b"garbage"),
    ]
    out = []
    for i, (code, ext, body) in enumerate(reads):
        for stype in (JSON, ROCKETMQ):
            out.append(
                codec.encode_frame(
                    RemotingCommand(
                        code=code,
                        opaque=i,
                        ext_fields=ext or None,
                        body=body,
                        flag=FLAG_ONEWAY if i % 3 == 0 else 0,
                        serialize_type=stype,
                    )
                )
            )
    return out


SEEDS = _seed_frames()


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    frame = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "truncate", "insert", "length", "header_length"]))
        if kind == "flip" and frame:
            frame[draw(st.integers(0, len(frame) - 1))] = draw(st.integers(0, 255))
        elif kind == "truncate":
            del frame[draw(st.integers(0, len(frame))) :]
        elif kind == "insert":
            at = draw(st.integers(0, len(frame)))
            frame[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif kind == "length" and len(frame) >= 4:
            frame[0:4] = struct.pack(">i", draw(st.integers(-(2**31), 2**31 - 1)))
        elif kind == "header_length" and len(frame) >= 8:
            frame[4:8] = bytes([draw(st.integers(0, 3))]) + draw(st.binary(min_size=3, max_size=3))
    return bytes(frame)


_ext = st.dictionaries(
    st.sampled_from(
        [
            "clusterName",
            "brokerName",
            "brokerId",
            "brokerAddr",
            "epoch",
            "maxOffset",
            "designateElect",
            "heartbeatTimeoutMills",
            "x",
        ]
    ),
    st.text(max_size=12),
    max_size=5,
)
random_commands = st.builds(
    lambda code, ext, body, stype, flag: codec.encode_frame(
        RemotingCommand(code=code, ext_fields=ext or None, body=body, serialize_type=stype, flag=flag)
    ),
    st.sampled_from([1004, 1005, 1006, 1010, 1012, 904, 1007, 1008, 0, -1, 32767]),
    _ext,
    st.binary(max_size=64) | st.sampled_from([b"[]", b'["broker-a"]', b"{1:2}", b"[" * 2000]),
    st.sampled_from([JSON, ROCKETMQ]),
    st.sampled_from([0, FLAG_ONEWAY, 1, 0xFFFFFFF]),
)
frames = st.lists(st.binary(max_size=256) | mutated() | random_commands, min_size=1, max_size=5)


def _rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def _throw(address: str, data: bytes) -> None:
    host, _, port = address.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
            while sock.recv(65536):  # read until the server closes (it must: we sent EOF)
                pass
        except (ConnectionResetError, BrokenPipeError):
            pass


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs /proc to measure memory")
def test_fuzzed_frames_change_nothing(target: tuple[LocalCluster, str]) -> None:
    cluster, address = target
    node = cluster.nodes[0]
    assert node.proc is not None
    hash_before = metadata(node.grpc_address)["state_hash"]
    with raw(address) as bystander:
        assert request(bystander, RemotingCommand(code=1005, opaque=1)).code == 0
        for _ in range(50):  # warm up the allocator before measuring
            _throw(address, SEEDS[0] + SEEDS[1])
        rss_before = _rss_kb(node.proc.pid)
        end = time.monotonic() + FUZZ_SECONDS
        thrown = 0

        @given(frames)
        @settings(
            max_examples=5000,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
        def throw(batch: list[bytes]) -> None:
            nonlocal thrown
            if time.monotonic() > end:
                return
            _throw(address, b"".join(batch))
            thrown += 1

        throw()
        assert thrown > 100
        assert "Traceback" not in node.log_text(), node.log_text()[-3000:]
        assert node.alive(), node.log_text()[-2000:]
        # the connection opened before the storm still works
        answer = request(
            bystander, RemotingCommand(code=1004, opaque=2, ext_fields={"brokerName": "broker-a"})
        )
        assert answer.code == 0 and (answer.ext_fields or {}).get("masterBrokerId") == "1"
    rss_after = _rss_kb(node.proc.pid)
    assert rss_after - rss_before < 64 * 1024, f"RSS grew from {rss_before} kB to {rss_after} kB"
    assert metadata(node.grpc_address)["state_hash"] == hash_before
    # a line for the bad frames, at most one a minute per client address (docs/serve.md#limits)
    warnings = [line for line in node.log_text().splitlines() if "WARNING mqctl.remoting" in line]
    assert 1 <= len(warnings) <= 2, warnings
    assert "malformed frame" in warnings[0] or "in the middle of a frame" in warnings[0]
    assert headers.read_metadata_body(request_metadata(address))["is_leader"] is True


def request_metadata(address: str) -> bytes:
    with raw(address) as sock:
        return request(sock, RemotingCommand(code=1005, opaque=9)).body
