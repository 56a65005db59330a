"""ControllerNode in-process (a real single-node pysyncobj group on a loopback port): the
thread-facing parts the pure-core tests cannot reach (role watches, reads racing the apply thread)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mqctl.controller.node import ControllerNode, NodeSettings
from mqctl.testing import free_port, wait_until


@pytest.fixture
def node(tmp_path) -> Iterator[ControllerNode]:
    settings = NodeSettings(raft_address=f"127.0.0.1:{free_port()}", partners=[],
                            grpc_address="127.0.0.1:1", data_dir=str(tmp_path))
    n = ControllerNode(settings)
    n.start()
    try:
        wait_until(lambda: n.is_leader() and n.state.meta.get("groupId"), timeout=20,
                   what="the single node to lead and mint its group id")
        yield n
    finally:
        n.stop()


def _ok(answer: dict) -> dict:
    assert answer["code"] == 0, answer
    return answer


def _change(epoch: int) -> dict:
    return {"code": 0, "remark": "", "cluster_name": "c", "broker_name": "a", "master_address": "x:1",
            "master_broker_id": 1, "master_epoch": epoch, "sync_state_set_epoch": epoch,
            "sync_state_set": [1]}


def test_lagging_watch_keeps_the_newest_role_and_closes_cleanly(node: ControllerNode) -> None:
    watch = node.watch("c", "a")
    for epoch in range(1, 1202):  # more than the watch buffers: the subscriber is not reading
        watch.push(_change(epoch))
    node.stop()  # closes every watch; must not raise although the buffer is full
    seen = [change["master_epoch"] for change in watch]
    assert seen[-1] == 1201, "the newest role change was dropped, so the subscriber ends on a stale role"
    assert seen == sorted(seen)
    assert len(seen) <= 1000
