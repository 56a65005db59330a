"""ControllerNode in-process (a real single-node pysyncobj group on a loopback port): the
thread-facing parts the pure-core tests cannot reach (role watches, reads racing the apply thread)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator

import pytest

from mqctl.controller.node import ControllerNode
from mqctl.controller.node_settings import NodeSettings
from mqctl.localgroup import free_port, wait_until


@pytest.fixture
def node(tmp_path) -> Iterator[ControllerNode]:
    # level 1: the view keeps no history (ControllerState.decision_view), so from level 3 on its hash
    # is not the applied state's, which these tests compare
    settings = NodeSettings(
        raft_address=f"127.0.0.1:{free_port()}",
        partners=[],
        grpc_address="127.0.0.1:1",
        data_dir=str(tmp_path),
        initial_feature_level=1,
    )
    n = ControllerNode(settings)
    n.start()
    try:
        wait_until(
            lambda: n.is_leader() and n.state.meta.get("groupId"),
            timeout=20,
            what="the single node to lead and mint its group id",
        )
        yield n
    finally:
        n.stop()


def _ok(answer: dict) -> dict:
    assert answer["code"] == 0, answer
    return answer


def _change(epoch: int) -> dict:
    return {
        "code": 0,
        "remark": "",
        "cluster_name": "c",
        "broker_name": "a",
        "master_address": "x:1",
        "master_broker_id": 1,
        "master_epoch": epoch,
        "sync_state_set_epoch": epoch,
        "sync_state_set": [1],
    }


def test_lagging_watch_keeps_the_newest_role_and_closes_cleanly(node: ControllerNode) -> None:
    watch = node.watch("c", "a")
    for epoch in range(1, 1202):  # more than the watch buffers: the subscriber is not reading
        watch.push(_change(epoch))
    node.stop()  # closes every watch; must not raise although the buffer is full
    seen = [change["master_epoch"] for change in watch]
    assert seen[-1] == 1201, "the newest role change was dropped, so the subscriber ends on a stale role"
    assert seen == sorted(seen)
    assert len(seen) <= 1000


def test_fresh_reads_never_see_an_entry_half_applied(node: ControllerNode) -> None:
    """GetSyncStateData runs on a gRPC thread while pysyncobj's thread applies entries: it must
    see each entry entirely or not at all (here: CleanBrokerData removing ids one by one)."""
    ids = list(range(1, 41))
    for bid in ids:
        _ok(
            node.call(
                "ApplyBrokerId",
                {
                    "cluster_name": "c",
                    "broker_name": "a",
                    "applied_broker_id": bid,
                    "register_check_code": f"127.0.0.1:{30910 + bid};{bid}",
                },
            )
        )
    _ok(node.call("ElectMaster", {"cluster_name": "c", "broker_name": "a", "broker_id": 1}))
    clean = ";".join(str(b) for b in ids[1:])
    stop = threading.Event()
    errors: list[object] = []

    def churn() -> None:
        try:
            while not stop.is_set():
                _ok(
                    node.call(
                        "CleanBrokerData",
                        {"cluster_name": "c", "broker_name": "a", "broker_controller_ids_to_clean": clean},
                    )
                )
                for bid in ids[1:]:
                    _ok(
                        node.call(
                            "ApplyBrokerId",
                            {
                                "cluster_name": "c",
                                "broker_name": "a",
                                "applied_broker_id": bid,
                                "register_check_code": f"127.0.0.1:{30910 + bid};{bid}",
                            },
                        )
                    )
        except BaseException as exc:
            errors.append(exc)

    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: widens any race window
    writer = threading.Thread(target=churn, daemon=True)
    writer.start()
    try:
        for _ in range(6000):
            answer = node.call("GetSyncStateData", {"broker_names": ["a"]})
            assert answer["code"] == 0, answer
            info = answer["replicas_info_table"]["a"]
            seen = sorted(r["broker_id"] for r in info["in_sync_replicas"] + info["not_in_sync_replicas"])
            # ApplyBrokerId entries add 2, 3, ... one by one; one CleanBrokerData entry removes them
            # all: every whole state is a prefix 1..k, a half-applied clean leaves a gap.
            assert seen == list(range(1, len(seen) + 1)), f"a CleanBrokerData half applied: {seen}"
    finally:
        sys.setswitchinterval(old_interval)
        stop.set()
        writer.join(timeout=30)
    assert not errors, errors


def test_a_decision_is_appended_only_in_the_term_it_was_made_in(node: ControllerNode) -> None:
    """FORK.md change 11: with leaderTerm, a command is never appended in another term (nor
    forwarded to another leader), so a decision never lands after entries it did not see."""
    from pysyncobj import FAIL_REASON

    from mqctl.controller import records

    term = int(node.sync._getTerm())
    entry = records.encode_entry([records.MetaSet("probe", "x")])
    outcomes: list[int] = []
    done = threading.Event()

    def callback(_res: object, error: int) -> None:
        outcomes.append(error)
        done.set()

    node.sync.execute(entry, callback=callback, leaderTerm=term + 1)
    assert done.wait(10) and outcomes == [FAIL_REASON.NOT_LEADER]
    assert "probe" not in node.state.meta
    done.clear()
    node.sync.execute(entry, callback=callback, leaderTerm=term)
    assert done.wait(10) and outcomes[-1] == FAIL_REASON.SUCCESS
    assert node.state.meta["probe"] == "x"


def test_pipelined_decisions_keep_the_view_equal_to_the_applied_state(node: ControllerNode) -> None:
    """Writes from many threads are decided against the leader's view (applied state + records
    not applied yet); once they are all answered, the view is the applied state, and exactly one
    of the conflicting ApplyBrokerId requests won."""
    answers: list[dict] = []
    lock = threading.Lock()

    def writer(w: int) -> None:
        for i in range(30):
            a = node.call(
                "ApplyBrokerId",
                {
                    "cluster_name": "c",
                    "broker_name": f"s{i}",
                    "applied_broker_id": 1,
                    "register_check_code": f"127.0.0.1:{w};{w}",
                },
            )
            with lock:
                answers.append(a)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert all(a["code"] in (0, 2014) for a in answers), answers
    assert sum(a["code"] == 0 for a in answers) == 30  # one winner per broker set
    with node.sync.state_lock:
        applied = node.state.state_hash()
    assert node.raft._view is not None and node.raft._view.state_hash() == applied


def test_a_whole_fleet_sync_state_read_is_made_in_parts_and_reads_as_one(node: ControllerNode) -> None:
    """GetSyncStateData of more broker sets than one part (SYNC_STATE_PART) is read a part at a
    time; the answer is the one table, in name order, whether the names are given or not, and a
    bad name anywhere is refused as the core refuses it."""
    from mqctl.controller import node as node_module

    names = [f"s{i:03d}" for i in range(node_module.SYNC_STATE_PART + 40)]
    for i, name in enumerate(names):
        _ok(
            node.call(
                "ApplyBrokerId",
                {
                    "cluster_name": "c",
                    "broker_name": name,
                    "applied_broker_id": 1,
                    "register_check_code": f"127.0.0.1:{i};1",
                },
            )
        )
    every = _ok(node.call("GetSyncStateData", {}))["replicas_info_table"]
    assert list(every) == names
    given = _ok(node.call("GetSyncStateData", {"broker_names": [*reversed(names), "nope", names[0]]}))
    assert given["replicas_info_table"] == every and list(given["replicas_info_table"]) == names
    assert node.sync_state_data()["replicas_info_table"] == every
    refused = node.call("GetSyncStateData", {"broker_names": [*names, 7]})
    assert refused["code"] != 0 and "broker_names" in refused["remark"]


def test_concurrent_fresh_reads_share_read_barriers(node: ControllerNode) -> None:
    """Fresh reads that arrive together share one Raft barrier (raftlog.read_barrier, ReadIndex's
    batching) instead of appending one entry each, and every read still sees each write its own
    thread had acknowledged before it asked."""
    threads, rounds = 16, 20
    errors: list[object] = []
    start = threading.Barrier(threads)

    def reader(t: int) -> None:
        try:
            start.wait(timeout=30)
            for r in range(rounds):
                if r % 5 == 0:  # a write of this thread's broker set, then reads that must see it
                    _ok(
                        node.call(
                            "ApplyBrokerId",
                            {
                                "cluster_name": "c",
                                "broker_name": f"s{t}",
                                "applied_broker_id": r + 1,
                                "register_check_code": f"127.0.0.1:{31000 + t};{r}",
                            },
                        )
                    )
                answer = _ok(node.call("GetSyncStateData", {"broker_names": [f"s{t}"]}))
                info = answer["replicas_info_table"][f"s{t}"]
                seen = {x["broker_id"] for x in info["in_sync_replicas"] + info["not_in_sync_replicas"]}
                assert r // 5 * 5 + 1 in seen, f"read {r} of s{t} misses its acknowledged write: {seen}"
        except BaseException as exc:
            errors.append(exc)

    before = node.sync.status()["log_len"]
    workers = [threading.Thread(target=reader, args=(t,), daemon=True) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
    assert not errors, errors[:3]
    writes, reads = threads * rounds // 5, threads * rounds
    appended = node.sync.status()["log_len"] - before
    # one entry per write, and barriers: one per read before (64 + 320 = 384 entries), now a few
    # dozen rounds for the 320 reads (110 entries in all on the 2-core VM, 2026-11-29)
    assert appended < writes + reads // 2, f"{appended} entries for {writes} writes and {reads} reads"
