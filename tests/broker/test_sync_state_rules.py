"""The master's RIP-44 SyncStateSet rules without a controller: the agent's state is set up directly over
a real store directory and slaves are played with FetchLog requests (what ``handle_fetch`` answers)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from broker_fixtures import fast_config

from mqctl.broker.agent import BrokerAgent
from mqctl.broker.epoch_file_cache import EpochCache
from mqctl.broker.log import open_log
from mqctl.broker.peers import FetchRequest


@pytest.fixture
def master(tmp_path) -> Iterator[BrokerAgent]:
    """Broker 1 back as master of epoch 1 with SyncStateSet {1, 2}, after a restart: its checkpoint says
    everything it holds was confirmed (both members had it); no slave has fetched since."""
    cfg = fast_config(tmp_path / "m", "127.0.0.1:1", "ssrules", peer_transport="local", address="m1")
    agent = BrokerAgent(cfg)
    agent.root.mkdir(parents=True)
    agent._log = open_log(agent.root, "commitlog", cfg.commitlog_file_size)
    agent._epochs = EpochCache(agent.root)
    agent._epochs.append(1, 0)
    for i in range(6):
        agent._log.append("TopicTest", f"m{i}".encode() * 20, ("127.0.0.1", 10911))
    agent.broker_id = 1
    agent._confirm = agent._log.max_offset
    with agent._lock:
        agent._change_to_master(1, 2, {1, 2})
    try:
        yield agent
    finally:
        agent._log.close()


def fetch(agent: BrokerAgent, broker_id: int, offset: int) -> None:
    resp = agent.handle_fetch(
        FetchRequest("cluster-b", "ssrules", broker_id, f"b{broker_id}", offset, 1, 1024, 0)
    )
    assert resp.code == 0, resp


def test_a_member_not_connected_yet_keeps_the_confirm_offset(master: BrokerAgent) -> None:
    """AutoSwitchHAService.computeConfirmOffset: a SyncStateSet member without a connection leaves the
    confirmOffset as it was; it must not fall to 0 (every replica would then look caught up)."""
    end = master.max_offset
    assert master.status().confirm_offset == end
    fetch(master, 2, end)
    assert master.status().confirm_offset == end


def test_a_lagging_slave_does_not_join_while_a_member_is_not_connected(master: BrokerAgent) -> None:
    """maybeExpandInSyncStateSet: a slave joins only once it reached the confirmOffset. Slave 3 is behind
    what the SyncStateSet confirmed; member 2 has not fetched yet. 3 must not join: an election could
    then pick it and lose acknowledged messages."""
    end = master.max_offset
    fetch(master, 3, master.messages()[3].offset)
    assert master._pending_ss is None
    assert master.status().sync_state_set == (1, 2)
    # once 3 has everything the set confirmed, it joins (the change goes to the controller)
    fetch(master, 2, end)
    fetch(master, 3, end)
    assert master._pending_ss == {1, 2, 3}
