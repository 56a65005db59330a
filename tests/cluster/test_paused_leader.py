"""A paused controller leader (SIGSTOP: a GC or VM stall, a process swapped out) must not stall a
long-lived client (issue 17): the client's call to it goes unanswered, the client asks the other
nodes who leads now, and its writes succeed there; idempotent ones (ApplyBrokerId, RegisterBroker)
are retried there, the others answer "outcome unknown" at once instead of after the whole timeout.
When the old leader resumes it serves no write as leader, and nothing acknowledged is lost."""

from __future__ import annotations

import signal
import time

import pytest
from harness import TEST_CLUSTER as CLUSTER

from mqctl.client import ControllerClient
from mqctl.errors import Code, ControllerError
from mqctl.localgroup import LocalCluster, wait_until

pytestmark = pytest.mark.slow


def test_a_long_lived_client_writes_again_soon_after_the_leader_is_paused(trio: LocalCluster) -> None:
    acked: list[str] = []
    with ControllerClient(trio.addresses, timeout=20) as client:
        for i in range(5):
            client.apply_broker_id(CLUSTER, f"before-{i}", 1, f"127.0.0.1:{30000 + i};x")
            acked.append(f"before-{i}")
        leader = trio.leader()
        assert leader is not None and leader.proc is not None
        leader.proc.send_signal(signal.SIGSTOP)
        try:
            paused = time.monotonic()
            # the client still thinks the paused node leads: this call is sent to it first
            client.apply_broker_id(CLUSTER, "during-0", 1, "127.0.0.1:31000;x")
            took = time.monotonic() - paused
            acked.append("during-0")
            # generous bound (a loaded machine); without the probe it was the whole 20 s timeout
            assert took < 10, f"the first write after the pause took {took:.1f} s"
            for i in range(1, 5):
                client.apply_broker_id(CLUSTER, f"during-{i}", 1, f"127.0.0.1:{31000 + i};x")
                acked.append(f"during-{i}")
            new_leader = trio.leader([n for n in trio.nodes if n is not leader])
            assert new_leader is not None and new_leader is not leader
        finally:
            leader.proc.send_signal(signal.SIGCONT)
        # the old leader resumes as a follower: a write sent to it alone is not served by it as leader
        wait_until(lambda: trio.leader() is new_leader, 30, what="the old leader to step down")
        with ControllerClient(leader.grpc_address, timeout=5) as pinned:
            with pytest.raises(ControllerError) as refused:
                pinned._call(
                    "ApplyBrokerId",
                    {
                        "cluster_name": CLUSTER,
                        "broker_name": "pinned",
                        "applied_broker_id": 1,
                        "register_check_code": "x;1",
                    },
                    address=leader.grpc_address,
                    follow=False,
                )
            assert refused.value.code == Code.CONTROLLER_NOT_LEADER
        trio.wait_for_same_hash()
        table = client.get_sync_state_data(acked).replicas_info_table
        assert sorted(table) == sorted(acked)


def test_a_non_idempotent_write_to_a_paused_leader_answers_outcome_unknown_early(trio: LocalCluster) -> None:
    with ControllerClient(trio.addresses, timeout=20) as client:
        client.apply_broker_id(CLUSTER, "set-a", 1, "127.0.0.1:30911;x")
        leader = trio.leader()
        assert leader is not None and leader.proc is not None
        leader.proc.send_signal(signal.SIGSTOP)
        try:
            started = time.monotonic()
            with pytest.raises(ControllerError) as e:
                client.elect_master(CLUSTER, "set-a", 1)
            assert e.value.code == Code.UNAVAILABLE and "outcome unknown" in e.value.remark
            assert "leads now" in e.value.remark
            assert time.monotonic() - started < 10  # not the whole 20 s timeout
            # the next write goes to the new leader at once
            client.apply_broker_id(CLUSTER, "set-b", 1, "127.0.0.1:30912;x")
        finally:
            leader.proc.send_signal(signal.SIGCONT)
        trio.wait_for_same_hash()
