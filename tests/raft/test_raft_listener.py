"""Hostile clients on the Raft port of a real node (issue 20; mqctl/raft/transport.py).

Against the leader of a 3-node group with a cluster secret, at once: random garbage, a frame cut
off, lengths above the limit or below zero (one followed by a 64 MiB stream), a frame encrypted
with another secret, a frame that decrypts to nothing, a slowloris (a byte every 0.5 s) and 200
silent connections. Every connection is closed by the node, the ones the node can judge at once
at once and the others when their handshake time (5 s) is up; the node logs at most one line for
all of it (they all come from 127.0.0.1), no traceback; its RSS stays within 16 MiB; the group
keeps its leader, term and state hash, and takes a write afterwards. Without a secret, first
messages that are not a node's address (a dict, a list such as pysyncobj's admin commands,
'readonly', a number, an unknown address) are closed too, where a dict raised a traceback.
"""

from __future__ import annotations

import os
import pickle
import random
import re
import socket
import struct
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

from mqctl.address import RAFT_BANNER, is_raft_port
from mqctl.client import ControllerClient
from mqctl.errors import UsageError
from mqctl.localgroup import LocalCluster, Node, metadata, wait_until
from mqctl.raft.transport import HANDSHAKE_TIMEOUT, MAX_HANDSHAKES
from mqctl.remoting.client import RemotingControllerClient

pytestmark = pytest.mark.slow

SECRET = "listener-test-secret"
CLOSE_SLACK = 5.0  # what a loaded machine may add to the node's closing a connection
RSS_GROWTH_MAX = 16 * 1024 * 1024
LOG_LINE = re.compile(r"raft port \S+: closed a connection from 127\.0\.0\.1")


def _frame(payload: bytes, length: int | None = None) -> bytes:
    return struct.pack("i", len(payload) if length is None else length) + payload


def _message(obj: object, password: str | None = None) -> bytes:
    """`obj` as pysyncobj frames it: pickled, zlib-compressed, encrypted with `password`'s key."""
    data = zlib.compress(pickle.dumps(obj, 2), 3)
    if password is not None:
        from pysyncobj.encryptor import getEncryptor

        data = getEncryptor(password).encrypt_at_time(data, int(time.monotonic()))
    return _frame(data)


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


class Attack:
    """One connection to `address`: sends what `send` sends, then waits until the node closes it
    (end of stream or a reset); `closed_after` is how long that took (None: not within `limit`)."""

    def __init__(self, name: str, address: str, send: Callable[[socket.socket], None], limit: float) -> None:
        self.name = name
        self.limit = limit
        self.closed_after: float | None = None
        self.error: str | None = None
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.started = time.monotonic()
        self.thread = threading.Thread(target=self._run, args=(send,), daemon=True)
        self.thread.start()

    def _run(self, send: Callable[[socket.socket], None]) -> None:
        try:
            send(self.sock)
        except OSError:
            pass  # the node closed it while this side was still sending
        # one blocking read (the node sends a connection that has not said which node it is nothing
        # but, when it closes it on bad input, mqctl.address.RAFT_BANNER): no polling, so that 250
        # waiting threads do not take the CPU the nodes need
        while (left := self.limit - (time.monotonic() - self.started)) > 0:
            self.sock.settimeout(left)
            try:
                if self.sock.recv(65536):
                    continue
            except TimeoutError:
                return
            except OSError:
                pass  # reset by the node
            self.closed_after = time.monotonic() - self.started
            return

    def join(self) -> Attack:
        self.thread.join(self.limit + 10)
        self.sock.close()
        return self


def _garbage(seed: int) -> Callable[[socket.socket], None]:
    def send(sock: socket.socket) -> None:
        rng = random.Random(seed)
        sock.sendall(rng.randbytes(rng.randint(1, 4000)))

    return send


def _slowloris(sock: socket.socket) -> None:
    data = _frame(b"x" * 100)
    for i in range(len(data)):
        sock.sendall(data[i : i + 1])
        time.sleep(0.5)


def _stream_after_huge_length(sock: socket.socket) -> None:
    sock.sendall(struct.pack("i", 0x7FFFFFFF))
    chunk = os.urandom(1 << 20)
    for _ in range(64):
        sock.sendall(chunk)


def _attacks(address: str) -> list[Attack]:
    at_once = CLOSE_SLACK  # judged on what arrived
    by_timeout = HANDSHAKE_TIMEOUT + CLOSE_SLACK
    attacks = [Attack(f"garbage {seed}", address, _garbage(seed), by_timeout) for seed in range(40)]
    cut_off = struct.pack("i", 1000) + b"0123456789"
    other_key = _message(os.urandom(32), "another secret")
    attacks += [
        Attack("frame cut off", address, lambda s: s.sendall(cut_off), by_timeout),
        Attack("length above the limit", address, lambda s: s.sendall(struct.pack("i", 1 << 30)), at_once),
        Attack("length below zero", address, lambda s: s.sendall(struct.pack("i", -5) + b"abc"), at_once),
        Attack("64 MiB after a 2 GiB length", address, _stream_after_huge_length, at_once),
        Attack("another secret", address, lambda s: s.sendall(other_key), at_once),
        Attack("not encrypted", address, lambda s: s.sendall(_message(os.urandom(32))), at_once),
        Attack("empty frame", address, lambda s: s.sendall(_frame(b"")), at_once),
        Attack("slowloris", address, _slowloris, by_timeout),
    ]
    attacks += [Attack(f"silent {i}", address, lambda s: None, by_timeout) for i in range(200)]
    return attacks


def _view(nodes: list[Node]) -> tuple[set[str], set[int], set[str]]:
    metas = [metadata(n.grpc_address) for n in nodes]
    return (
        {str(m.get("controller_leader_id")) for m in metas},
        {int(m.get("term", 0)) for m in metas},
        {str(m.get("state_hash")) for m in metas},
    )


def test_hostile_clients_on_the_raft_port(tmp_path: Path) -> None:
    cluster = LocalCluster(str(tmp_path), size=3, extra_args=["--cluster-secret", SECRET])
    with cluster:
        cluster.start()
        with ControllerClient(cluster.addresses, timeout=20) as client:
            client.apply_broker_id("listener-cluster", "before", 1, "127.0.0.1:30000;x")
        cluster.wait_for_same_hash(20)
        leader = cluster.wait_for_leader(30)
        before = _view(cluster.nodes)
        assert len(before[0]) == 1 and len(before[1]) == 1 and len(before[2]) == 1, before
        assert leader.proc is not None
        rss_before = _rss(leader.proc.pid)
        started = time.monotonic()
        attacks = [a.join() for a in _attacks(leader.raft_address)]
        open_ones = [a.name for a in attacks if a.closed_after is None]
        assert not open_ones, f"not closed by the node: {open_ones[:10]} (of {len(open_ones)})"
        silent = sorted(a.closed_after or 0 for a in attacks if a.name.startswith("silent"))
        # beyond MAX_HANDSHAKES waiting connections, the oldest are closed at once
        assert sum(t < HANDSHAKE_TIMEOUT - 1 for t in silent) >= 200 - MAX_HANDSHAKES - 10, silent
        rss_after = _rss(leader.proc.pid)
        assert rss_after - rss_before < RSS_GROWTH_MAX, (rss_before, rss_after)
        after = _view(cluster.nodes)
        assert after == before, f"the group moved: before {before}, after {after}"
        with ControllerClient(cluster.addresses, timeout=20) as client:
            client.apply_broker_id("listener-cluster", "after", 1, "127.0.0.1:30001;x")
        cluster.wait_for_same_hash(20)
        lines = [line for line in leader.log_text().splitlines() if LOG_LINE.search(line)]
        assert len(lines) == 1, lines[:5]
        print(
            f"{len(attacks)} hostile connections closed in {time.monotonic() - started:.1f} s; RSS "
            f"{rss_before / 2**20:.1f} -> {rss_after / 2**20:.1f} MiB; logged: {lines[0]}"
        )
        assert "Traceback" not in leader.log_text()


def test_first_messages_that_are_not_a_node_without_a_secret(tmp_path: Path) -> None:
    cluster = LocalCluster(str(tmp_path), size=1)
    with cluster:
        cluster.start()
        node = cluster.nodes[0]
        firsts: list[object] = [
            {"type": "append_entries"},
            ["status"],
            ["remove", "127.0.0.1:1"],
            "readonly",
            42,
            "127.0.0.1:1",
            b"bytes",
        ]
        attacks = [
            Attack(repr(m), node.raft_address, lambda s, m=m: s.sendall(_message(m)), CLOSE_SLACK)
            for m in firsts
        ]
        for attack in attacks:
            attack.join()
            assert attack.closed_after is not None, attack.name
        wait_until(lambda: metadata(node.grpc_address).get("is_leader"), 10, what="the node still leading")
        log = node.log_text()
        assert "Traceback" not in log, log[-3000:]
        lines = [line for line in log.splitlines() if LOG_LINE.search(line)]
        assert len(lines) == 1, lines


def _answer(address: str, data: bytes) -> tuple[bytes, float]:
    """What the node sends back to ``data`` before it closes the connection, and how long that took."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        started = time.monotonic()
        sock.sendall(data)
        got = b""
        while chunk := sock.recv(4096):
            got += chunk
        return got, time.monotonic() - started


def test_a_client_of_another_protocol_is_told_at_once(tmp_path: Path) -> None:
    """An HTTP/2 preface, a remoting frame, a frame of another cluster secret: the node answers the
    banner and closes at once; mqctl's clients (gRPC, remoting, the CLI's auto) say it is a Raft port
    instead of retrying for --timeout; the secret's handshake still keeps out a peer without it."""
    cluster = LocalCluster(str(tmp_path), size=3, extra_args=["--cluster-secret", SECRET])
    with cluster:
        cluster.start()
        raft = cluster.nodes[0].raft_address
        header = b'{"code":10,"opaque":1}....'
        remoting_frame = struct.pack(">i", 4 + len(header)) + struct.pack(">i", len(header)) + header
        for what, data in [
            ("HTTP/2", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
            ("remoting", remoting_frame),
            ("another secret", _message(os.urandom(32), "another secret")),
        ]:
            got, took = _answer(raft, data)
            assert got == RAFT_BANNER, (what, got)
            assert took < CLOSE_SLACK, (what, took)
        # a silent connection gets nothing (the banner answers bad input only)
        host, port = raft.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=HANDSHAKE_TIMEOUT + CLOSE_SLACK) as sock:
            assert sock.recv(4096) == b""
        assert not is_raft_port(cluster.nodes[0].grpc_address)
        for make in (
            lambda: ControllerClient([raft], timeout=30),
            lambda: RemotingControllerClient([raft], timeout=30),
        ):
            started = time.monotonic()
            with (
                make() as client,
                pytest.raises(
                    UsageError,
                    match=f"^{re.escape(raft)} is a Raft port, not the controller's gRPC or remoting port",
                ),
            ):
                client.get_metadata()
            took = time.monotonic() - started
            print(f"{type(client).__name__}: told in {took:.3f} s")
            assert took < 2.0, took  # 0.5 s on an idle machine; never the --timeout of 30 s
        for protocol in ("auto", "grpc", "remoting"):
            out = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "mqctl",
                    "getControllerMetaData",
                    "-a",
                    raft,
                    "--protocol",
                    protocol,
                    "--timeout",
                    "30",
                ],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert out.returncode == 2, (protocol, out.stderr)
            assert out.stderr.startswith(
                f"mqctl: error: {raft} is a Raft port, not the controller's gRPC or remoting port"
            ), out.stderr
            assert out.stderr.count("\n") == 1 and out.stdout == ""
        # the group's own connections still need the secret, and still work
        with ControllerClient(cluster.addresses, timeout=20) as client:
            client.apply_broker_id("listener-cluster", "after", 1, "127.0.0.1:30001;x")
        cluster.wait_for_same_hash(20)
        assert "Traceback" not in cluster.nodes[0].log_text()
