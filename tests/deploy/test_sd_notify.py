"""`mqctl serve` under systemd's Type=notify: READY=1 only once the node has joined its group, STATUS=
lines while it runs, STOPPING=1 on SIGTERM, through a real unix datagram socket named by $NOTIFY_SOCKET
(the socket systemd binds for the unit; here the test binds it)."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqctl.sdnotify import Notifier
from mqctl.testing import LocalCluster, NotifySocket, metadata

pytestmark = pytest.mark.slow


@pytest.fixture
def notify(tmp_path: Path) -> Iterator[NotifySocket]:
    sock = NotifySocket(str(tmp_path / "notify.sock"))
    try:
        yield sock
    finally:
        sock.close()


def test_ready_only_once_the_node_has_joined_its_group(tmp_path: Path, notify: NotifySocket) -> None:
    cluster = LocalCluster(str(tmp_path / "group"), size=3)
    first, *others = cluster.nodes
    with cluster:
        first.start(env={"NOTIFY_SOCKET": notify.path})
        # alone, a node of a three-node group has no leader: it is not ready, and says why
        notify.read(3.0)
        assert notify.messages, "no STATUS= while joining"
        assert not any("READY" in m for m in notify.messages), notify.messages
        assert all(m["STATUS"].startswith("joining the controller group") for m in notify.messages)
        for node in others:
            node.start()
        ready = notify.wait_for("READY", "1", 60)
        # READY=1 comes with the role the node took; by then the group's id is applied on it
        assert ready["STATUS"].startswith(("leader of the controller group", "follower of 127.0.0.1:"))
        assert metadata(first.grpc_address)["group_id"]
        assert "joined the controller group mqctl" in first.log_text()
        assert first.stop() == 0
        stopping = notify.wait_for("STOPPING", "1", 10)
        assert stopping
        assert notify.messages[-1] == {"STATUS": "stopping"}


def test_a_single_node_is_ready_and_a_missing_socket_costs_nothing(tmp_path: Path) -> None:
    cluster = LocalCluster(str(tmp_path / "one"), size=1)
    (node,) = cluster.nodes
    with cluster:
        # the abstract-namespace notation systemd may use ("@name") reaches a socket bound there
        abstract = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        name = f"mqctl-test-{os.getpid()}-{time.monotonic_ns()}"
        abstract.bind("\0" + name)
        try:
            node.start(env={"NOTIFY_SOCKET": "@" + name})
            abstract.settimeout(60)
            seen = []
            while not any(b"READY=1" in d for d in seen):
                seen.append(abstract.recv(4096))
            assert b"STATUS=leader of the controller group, term " in seen[-1]
        finally:
            abstract.close()
        assert node.stop() == 0
        # a supervisor whose socket is gone: one warning, the node serves and stops as usual
        before = len(node.log_text())
        node.start(env={"NOTIFY_SOCKET": str(tmp_path / "nobody-listens.sock")})
        cluster.wait_for_leader()
        assert node.stop() == 0
        assert node.log_text()[before:].count("sd_notify to ") == 1


def test_notifier_without_the_variable_sends_nothing(notify: NotifySocket) -> None:
    assert not Notifier({}).notify(READY="1")
    assert not Notifier({"NOTIFY_SOCKET": "relative/path"}).notify(READY="1")
    sender = Notifier({"NOTIFY_SOCKET": notify.path})
    assert sender.notify(READY="1", STATUS="a b=c")
    assert notify.read(1.0) == [{"READY": "1", "STATUS": "a b=c"}]
    sender.close()
