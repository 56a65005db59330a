"""End to end against real controllers: allAckInSyncStateSet writes, master killed, a new master elected and
followed, the old master back as a slave after truncation, no acknowledged message lost (read from the final
master's commitlog files with mqctl.store); SyncStateSet shrink/expand; async learners; polling only."""

from __future__ import annotations

import pytest
from broker_fixtures import start_agent

from mqctl.broker.agent import BrokerAgent, Role
from mqctl.client import ControllerClient
from mqctl.localgroup import wait_until
from mqctl.sim.inject import Network
from mqctl.store.commitlog import CommitLog
from mqctl.store.epochfile import read_epoch_file

pytestmark = pytest.mark.slow


def one_master(agents: list[BrokerAgent]) -> BrokerAgent | None:
    masters = [a for a in agents if a.alive and a.role == Role.MASTER]
    followers = [a for a in agents if a.alive and a.role == Role.SLAVE]
    if (
        len(masters) == 1
        and all(f.master_id == masters[0].broker_id for f in followers)
        and len(masters) + len(followers) == len([a for a in agents if a.alive])
    ):
        return masters[0]
    return None


def put_all(master: BrokerAgent, start: int, count: int, acked: dict[int, bytes]) -> None:
    for i in range(start, start + count):
        body = f"acked-{i}-".encode() * 8
        r = master.put(body)
        assert r.ok, r
        acked[r.offset] = body


def commitlog_bodies(agent: BrokerAgent) -> dict[int, bytes]:
    """Read the store's files directly, as the recovery tools would."""
    log = CommitLog(agent.root / "commitlog", agent.config.commitlog_file_size)
    return {r.offset: r.body for r in log.iter_records() if r.offset < agent.max_offset}


def test_failover_truncation_no_acked_message_lost(trio, tmp_path) -> None:
    name = "fo"
    addrs = trio.addresses
    net = Network()
    agents = [
        start_agent(tmp_path / f"b{i}", addrs, name, network=net, all_ack_in_sync_state_set=True)
        for i in range(3)
    ]
    revived: BrokerAgent | None = None
    try:
        master = wait_until(lambda: one_master(agents), 30, what="one master, two slaves")
        wait_until(lambda: len(master.status().sync_state_set) == 3, 20, what="SyncStateSet of 3")
        acked: dict[int, bytes] = {}
        put_all(master, 0, 150, acked)
        # the master is cut off: what it takes now reaches no slave and is never acknowledged
        net.isolate(master)
        unacked = []
        for i in range(4):
            r = master.put(f"unacked-{i}".encode() * 8, timeout=0.3)
            assert not r.ok and r.status == "FLUSH_SLAVE_TIMEOUT", r
            unacked.append(f"unacked-{i}".encode() * 8)
        dirty_end = master.max_offset
        old_epoch = master.master_epoch
        master.crash()
        others = [a for a in agents if a is not master]
        new = wait_until(lambda: one_master(others), 30, what="a new master followed by the other")
        assert new.master_epoch > old_epoch
        put_all(new, 150, 100, acked)
        # the old master comes back: it must follow, cutting what nobody acknowledged
        revived = BrokerAgent(master.config).start()
        revived.wait_role(Role.SLAVE, 30)
        assert revived.master_id == new.broker_id
        assert revived.broker_id == master.broker_id, "same persistent id after the crash"
        everyone = others + [revived]
        wait_until(lambda: len({a.max_offset for a in everyone}) == 1, 30, what="every replica caught up")
        assert revived.stats["truncations"] >= 1
        assert (
            revived.stats["bytes_truncated"] > 0
            and revived.max_offset > dirty_end - revived.stats["bytes_truncated"]
        )
        put_all(new, 250, 20, acked)
        wait_until(lambda: len({a.max_offset for a in everyone}) == 1, 30, what="caught up again")
        final = commitlog_bodies(new)
        missing = [o for o, b in acked.items() if final.get(o) != b]
        assert not missing, f"acknowledged messages lost at offsets {missing[:5]}"
        for a in everyone:
            bodies = set(commitlog_bodies(a).values())
            assert not bodies & set(unacked), f"{a.name} still holds unacknowledged messages"
            assert commitlog_bodies(a) == final, f"{a.name} differs from the master"
            assert read_epoch_file(a.root).entries == read_epoch_file(new.root).entries
        epochs = [e.epoch for e in read_epoch_file(new.root).entries]
        assert epochs == sorted(set(epochs)) and epochs[-1] == new.master_epoch
        with ControllerClient(addrs) as client:
            info = client.get_replica_info(name)
            assert info.master_broker_id == new.broker_id and info.master_epoch == new.master_epoch
        assert trio.wait_for_same_hash(20)
    finally:
        for a in agents + ([revived] if revived else []):
            a.stop()


def test_sync_state_set_shrinks_and_expands_learner_never_joins(controller, tmp_path) -> None:
    name = "sss"
    addrs = controller.addresses
    net = Network()
    agents = [
        start_agent(tmp_path / f"b{i}", addrs, name, network=net, all_ack_in_sync_state_set=True)
        for i in range(3)
    ]
    learner = start_agent(tmp_path / "learner", addrs, name, network=net, async_learner=True)
    every = agents + [learner]
    try:
        master = wait_until(lambda: one_master(every), 30, what="roles")
        assert master is not learner
        wait_until(lambda: len(master.status().sync_state_set) == 3, 20, what="SyncStateSet of 3")
        put_all(master, 0, 30, {})
        slave = next(a for a in agents if a.role == Role.SLAVE)
        net.isolate(slave)
        with ControllerClient(addrs) as client:

            def controller_set() -> set[int]:
                return set(client.get_replica_info(name).sync_state_set)

            wait_until(lambda: slave.broker_id not in controller_set(), 20, what="shrink accepted")
            # the master applies the new set only once the controller answered: locally it follows
            wait_until(lambda: slave.broker_id not in master.status().sync_state_set, 10, what="local shrink")
            put_all(master, 30, 20, {})  # acked without the isolated slave
            net.isolate(slave, False)
            wait_until(lambda: slave.broker_id in controller_set(), 20, what="expand after catch-up")
            wait_until(lambda: set(master.status().sync_state_set) == controller_set(), 10, what="local set")
            put_all(master, 50, 20, {})
            wait_until(lambda: learner.max_offset == master.max_offset, 20, what="learner replicates")
            assert learner.broker_id not in controller_set()
            assert learner.role == Role.SLAVE and master.stats["alter_ok"] >= 3
    finally:
        for a in every:
            a.stop()


def test_polling_only_offsets_log_local_peers(controller, tmp_path) -> None:
    """No WatchRoleChanges at all: GetReplicaInfo polling alone drives the failover (scale mode)."""
    name = "poll"
    agents = [
        start_agent(
            tmp_path / f"b{i}",
            controller.addresses,
            name,
            all_ack_in_sync_state_set=True,
            watch_role_changes=False,
            storage="offsets",
            peer_transport="local",
            address=f"poll-{i}",
        )
        for i in range(3)
    ]
    revived: BrokerAgent | None = None
    try:
        master = wait_until(lambda: one_master(agents), 30, what="roles")
        wait_until(lambda: len(master.status().sync_state_set) == 3, 20, what="SyncStateSet of 3")
        ends = [master.put(b"x" * 100).end for _ in range(50)]
        master.crash()
        others = [a for a in agents if a is not master]
        new = wait_until(lambda: one_master(others), 30, what="new master by polling")
        assert new.max_offset >= ends[-1]
        revived = BrokerAgent(master.config).start()
        revived.wait_role(Role.SLAVE, 30)
        assert new.put(b"y" * 10).ok
        wait_until(lambda: len({a.max_offset for a in others + [revived]}) == 1, 20, what="caught up")
    finally:
        for a in agents + ([revived] if revived else []):
            a.stop()


def test_stale_notifications_are_ignored(controller, tmp_path) -> None:
    """A RoleChange from before the latest registration (older brokerEpoch) or with an older masterEpoch
    never moves the agent; the controller's view wins."""
    from mqctl.broker.agent import _Event
    from mqctl.client import RoleChange

    agent = start_agent(tmp_path / "b", controller.addresses, "stale")
    try:
        agent.wait_role(Role.MASTER, 30)
        epoch, bid = agent.master_epoch, agent.broker_id
        other = RoleChange(
            broker_name="stale",
            master_broker_id=(bid or 0) + 7,
            master_address="127.0.0.1:30919",
            master_epoch=epoch + 5,
            sync_state_set_epoch=9,
            sync_state_set=((bid or 0) + 7,),
        )
        before = agent.stats["ignored_notifications"]
        agent._post(_Event("role", other, agent.broker_epoch - 1))  # queued under an older registration
        older = RoleChange(broker_name="stale", master_broker_id=None, master_epoch=epoch - 1)
        agent._on_role_change(older)  # current registration, older epoch
        wait_until(lambda: agent.stats["ignored_notifications"] >= before + 2, 10, what="both ignored")
        assert agent.role == Role.MASTER and agent.master_epoch == epoch
        assert agent.put(b"still master").ok
    finally:
        agent.stop()
