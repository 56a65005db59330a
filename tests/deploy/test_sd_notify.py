"""`mqctl serve` under systemd's Type=notify: READY=1 only once the node has joined its group, STATUS=
lines while it runs, STOPPING=1 on SIGTERM, through a real unix datagram socket named by $NOTIFY_SOCKET
(the socket systemd binds for the unit; here the test binds it)."""

from __future__ import annotations

import itertools
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import NotifySocket

from mqctl.client import ControllerClient
from mqctl.errors import ControllerError
from mqctl.localgroup import LocalCluster, metadata, wait_until
from mqctl.sdnotify import Notifier

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


def test_watchdog_interval_is_half_of_watchdog_usec(notify: NotifySocket) -> None:
    on = {"NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": "30000000"}
    assert Notifier(on).watchdog_interval(on) == 15.0
    assert Notifier(on).watchdog_interval({**on, "WATCHDOG_PID": str(os.getpid())}) == 15.0
    assert Notifier(on).watchdog_interval({**on, "WATCHDOG_PID": "1"}) == 0.0  # another process's
    assert Notifier(on).watchdog_interval({"NOTIFY_SOCKET": notify.path}) == 0.0
    assert Notifier({}).watchdog_interval({"WATCHDOG_USEC": "30000000"}) == 0.0


def test_the_watchdog_is_pinged_while_the_raft_thread_ticks(tmp_path: Path, notify: NotifySocket) -> None:
    """WATCHDOG=1 every half WatchdogSec while the node's Raft thread ticks; a Raft thread stuck on its
    disk (MQCTL_FAULT_INJECT's SLOW: every fsync 14 s late) stops the pings after 10 s, so that systemd
    would restart the node, and they come back with the disk."""
    from mqctl.raft.storage import FAULT_FILE

    env = {"MQCTL_FAULT_INJECT": "1"}
    cluster = LocalCluster(str(tmp_path / "group"), size=3)
    slow, *others = cluster.nodes
    with cluster:
        slow.start(env={**env, "NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": "1000000"})
        for node in others:
            node.start(env=env)
        leader = cluster.wait_for_leader()
        if leader is slow:  # the stalled node must be a follower: its new term's fsync is what hangs

            def handed_over() -> bool:  # a transfer may time out under load: asked again
                with ControllerClient(cluster.addresses, timeout=30) as c:
                    try:
                        c.change_quorum("transfer", others[0].raft_address)
                    except ControllerError:
                        pass
                return cluster.leader() not in (None, slow)

            wait_until(handed_over, 120, interval=1, what="the leadership handed to another node")
            leader = cluster.wait_for_leader(exclude=slow)
        notify.read(2.0)
        assert sum(m.get("WATCHDOG") == "1" for m in notify.messages) >= 3, notify.messages
        notify.messages.clear()
        with open(os.path.join(slow.data_dir, FAULT_FILE), "w") as fh:
            fh.write("SLOW 14000")
        leader.kill()  # the slow node's election stores its new term: that fsync takes 14 s
        # every ping's arrival, until the stall was reported and the pings have come back for 2 s
        pings: list[float] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            before = len(notify.messages)
            notify.read(0.1)
            pings += [time.monotonic()] * sum(m.get("WATCHDOG") == "1" for m in notify.messages[before:])
            stalled = "the Raft thread has not finished a tick" in slow.log_text()
            if (
                stalled
                and len(pings) >= 2
                and pings[-1] - max(pings[:-1], default=0) < 1
                and max(b - a for a, b in itertools.pairwise(pings)) >= 2.5
            ):
                break
        os.unlink(os.path.join(slow.data_dir, FAULT_FILE))
        assert "the Raft thread has not finished a tick" in slow.log_text()
        gaps = [b - a for a, b in itertools.pairwise(pings)]
        # pinged every 0.5 s, but not from 10 s without a finished tick to the end of the 14 s fsync
        assert gaps and max(gaps) >= 2.5, gaps
        assert pings[-1] > pings[gaps.index(max(gaps))], "the pings did not come back"
