"""The operator cockpit's rules in the pure core: the decision history with loss accounting, failover
pauses, switchover and rebalance; new records only at feature level 3."""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any

from mqctl.controller import core
from mqctl.controller.core import Context, ControllerState, LiveInfo, Result, decide
from mqctl.controller.records import DecisionNoted, FailoverPauseSet, FeatureLevelSet, MetaSet, decode, encode
from mqctl.errors import Code

C, B = "c1", "broker-a"


def state_at(level: int) -> ControllerState:
    st = ControllerState()
    for lv in range(2, level + 1):
        st.apply(FeatureLevelSet(lv))
    return st


def run(st: ControllerState, method: str, req: dict[str, Any], ctx: Context) -> Result:
    result = decide(st, method, req, ctx)
    for record in result.records:  # through the wire, as a follower reads them
        st.apply(decode(json.loads(json.dumps(encode(record)))))
    return result


def rows(
    offsets: dict[int, int],
    dead: tuple[int, ...] = (),
    epoch: int = 1,
    priority: dict[int, int] | None = None,
) -> dict[str, dict[int, LiveInfo]]:
    return {
        B: {
            b: LiveInfo(
                b,
                f"127.0.0.1:{b}",
                0,
                epoch,
                off,
                off,
                (priority or {}).get(b, 2**31 - 1),
                0 if b in dead else 10_000,
                1000,
            )
            for b, off in offsets.items()
        }
    }


def broker_set(
    st: ControllerState, offsets: dict[int, int], ids: tuple[int, ...] = (1, 2, 3), **kw: Any
) -> None:
    """ids registered, 1 master, SyncStateSet `ids`."""
    ctx = Context(10_000, rows(offsets, **kw), term=3)
    for b in ids:
        assert run(
            st,
            "ApplyBrokerId",
            {
                "cluster_name": C,
                "broker_name": B,
                "applied_broker_id": b,
                "register_check_code": f"127.0.0.1:{b};1",
            },
            ctx,
        ).ok
        assert run(
            st,
            "RegisterBroker",
            {"cluster_name": C, "broker_name": B, "broker_id": b, "broker_address": f"127.0.0.1:{b}"},
            ctx,
        ).ok
    assert run(st, "ElectMaster", {"cluster_name": C, "broker_name": B, "broker_id": 1}, ctx).ok
    assert run(
        st,
        "AlterSyncStateSet",
        {
            "broker_name": B,
            "master_broker_id": 1,
            "master_epoch": 1,
            "sync_state_set_epoch": 1,
            "new_sync_state_set": list(ids),
        },
        ctx,
    ).ok


def elections(st: ControllerState) -> list[dict[str, Any]]:
    return [e for e in st.history if "election" in e]


def test_every_decision_is_noted_with_time_term_and_cause() -> None:
    st = state_at(3)
    broker_set(st, {1: 500, 2: 500, 3: 500})
    whats = [(e["what"], e["cause"]) for e in st.history]
    assert whats[:2] == [
        ("broker id applied", "broker request (broker 1)"),
        ("registered", "broker request (broker 1)"),
    ]
    assert ("master elected", "broker request (broker 1)") in whats
    assert whats[-1] == ("SyncStateSet altered", "broker request (broker 1)")
    assert {e["time_ms"] for e in st.history} == {10_000} and {e["term"] for e in st.history} == {3}
    assert [e["seq"] for e in st.history] == list(range(1, len(st.history) + 1))
    first = elections(st)[0]["election"]
    assert first["reason"] == "first election: the broker that asked (1)" and "loss_bytes" not in first
    run(st, "UpdateConfig", {"config": {"enableElectUncleanMaster": "true"}}, Context(11_000, term=4))
    assert st.history[-1]["what"] == "config changed" and st.history[-1]["cause"] == "admin request"
    assert st.history[-1]["detail"] == "enableElectUncleanMaster=true"


def test_clean_election_on_lease_expiry_loses_nothing_and_names_every_candidate() -> None:
    st = state_at(3)
    broker_set(st, {1: 900, 2: 900, 3: 700})
    ctx = Context(10_000, rows({1: 900, 2: 900, 3: 700}, dead=(1,)), term=5)
    assert core.needs_controller_election(st, B, ctx)
    r = run(st, "ElectMaster", {"cluster_name": C, "broker_name": B, "broker_id": -1}, ctx)
    assert r.ok and r.response["master_broker_id"] == 2
    entry = st.history[-1]
    assert (entry["what"], entry["cause"], entry["term"]) == (
        "master elected",
        "lease expired for broker 1",
        5,
    )
    e = entry["election"]
    assert e["candidates"] == [
        {
            "broker_id": 1,
            "epoch": 1,
            "max_offset": 900,
            "election_priority": 2**31 - 1,
            "alive": False,
            "in_sync_state_set": True,
        },
        {
            "broker_id": 2,
            "epoch": 1,
            "max_offset": 900,
            "election_priority": 2**31 - 1,
            "alive": True,
            "in_sync_state_set": True,
        },
        {
            "broker_id": 3,
            "epoch": 1,
            "max_offset": 700,
            "election_priority": 2**31 - 1,
            "alive": True,
            "in_sync_state_set": True,
        },
    ]
    assert (e["old_master_broker_id"], e["new_master_broker_id"], e["loss_bytes"], e["unclean"]) == (
        1,
        2,
        0,
        False,
    )
    assert e["reason"] == "freshest alive SyncStateSet member: higher maxOffset (900 > 700 of broker 3)"
    assert st.loss_total == {B: 0}


def unclean_pair() -> ControllerState:
    """Brokers 1 (master, maxOffset 5000) and 2 (3000) of a set whose SyncStateSet is {1}; unclean
    elections enabled."""
    st = state_at(3)
    broker_set(st, {1: 5000, 2: 3000}, ids=(1, 2))
    run(
        st,
        "AlterSyncStateSet",
        {
            "broker_name": B,
            "master_broker_id": 1,
            "master_epoch": 1,
            "sync_state_set_epoch": 2,
            "new_sync_state_set": [1],
        },
        Context(10_000, rows({1: 5000, 2: 3000})),
    )
    run(st, "UpdateConfig", {"config": {"enableElectUncleanMaster": "true"}}, Context(10_000))
    return st


def test_unclean_election_counts_the_gap_and_the_total_per_broker_set() -> None:
    st = unclean_pair()
    ctx = Context(10_000, rows({1: 5000, 2: 3000}, dead=(1,)), term=6)
    assert run(st, "ElectMaster", {"cluster_name": C, "broker_name": B, "broker_id": -1}, ctx).ok
    e = st.history[-1]["election"]
    assert (e["unclean"], e["old_master_max_offset"], e["new_master_max_offset"], e["loss_bytes"]) == (
        True,
        5000,
        3000,
        2000,
    )
    assert e["reason"].startswith("the only alive replica outside the SyncStateSet")
    # back to 1 by an admin, then 2 dies with 1 behind again: the total adds up
    ctx = Context(10_000, rows({1: 3500, 2: 4000}, dead=(2,)), term=7)
    assert run(st, "ElectMaster", {"cluster_name": C, "broker_name": B, "broker_id": -1}, ctx).ok
    assert st.history[-1]["election"]["loss_bytes"] == 500
    assert st.loss_total == {B: 2500}
    page = decide(st, "GetHistory", {"broker_name": B}, ctx).response
    assert page["loss_total"] == {B: 2500} and [
        x["election"]["loss_bytes"] for x in page["entries"] if x.get("election", {}).get("loss_bytes")
    ] == [2000, 500]


def test_an_election_after_the_master_was_cleared_names_the_old_master_and_its_loss() -> None:
    """Broker 1 dies alone: the master is cleared. When 2 comes back (unclean allowed) its election
    names 1 as the old master, whether decided on this state, on a leader's decision view, or on a
    state loaded from a snapshot (where the old master comes from the history)."""
    st = unclean_pair()
    nobody = Context(10_000, rows({1: 5000, 2: 3000}, dead=(1, 2)), term=6)
    assert run(st, "ElectMaster", {"cluster_name": C, "broker_name": B, "broker_id": -1}, nobody).code != 0
    bs = st.broker_sets[B]
    assert bs.master_broker_id is None and st.history[-1]["what"] == "master cleared"
    back = Context(10_000, rows({1: 5000, 2: 3000}, dead=(1,)), term=7)
    loaded = ControllerState.from_dict(json.loads(st.canonical_json()))
    for where in (st.decision_view(), loaded, st):
        r = decide(where, "ElectMaster", {"cluster_name": C, "broker_name": B, "broker_id": -1}, back)
        assert r.ok and r.response["master_broker_id"] == 2
        note = next(x for x in r.records if isinstance(x, DecisionNoted)).entry["election"]
        assert (note["old_master_broker_id"], note["new_master_broker_id"], note["loss_bytes"]) == (
            1,
            2,
            2000,
        )


def test_the_canonical_text_is_json_dumps_of_the_state_byte_for_byte() -> None:
    """The hash every node compares (and an older release computes from json.dumps of the whole
    state) is made a broker set at a time with the kept history texts spliced in: same bytes,
    whatever the names and the meta hold."""
    st = state_at(3)
    broker_set(st, {1: 900, 2: 900, 3: 700})
    for name in ("history", "broker_sets", "é\u0001", '"history":[]'):
        run(
            st,
            "ApplyBrokerId",
            {
                "cluster_name": C,
                "broker_name": name,
                "applied_broker_id": 1,
                "register_check_code": "127.0.0.1:9;1",
            },
            Context(10_000),
        )
    st.apply(MetaSet("history", []))
    st.apply(MetaSet("x", "\u0001broker_sets\u0001"))
    want = json.dumps(st.to_dict(), sort_keys=True, separators=(",", ":"))
    assert len(st.history) > 8 and st.canonical_json() == want
    assert st.state_hash() == hashlib.sha256(want.encode("utf-8")).hexdigest()  # streamed, same bytes
    assert json.loads(want)["meta"] == {"history": [], "x": "\u0001broker_sets\u0001"}


def test_history_is_bounded_and_paged_and_part_of_the_state_hash() -> None:
    st = state_at(3)
    broker_set(st, {1: 1, 2: 1, 3: 1})
    n = len(st.history)
    before = st.state_hash()
    run(st, "UpdateConfig", {"config": {"historyMaxEntries": "4"}}, Context(20_000))
    assert len(st.history) == 4 and st.history[-1]["seq"] == n + 1 and st.state_hash() != before
    for i in range(600):
        run(
            st,
            "RegisterBroker",
            {"cluster_name": C, "broker_name": B, "broker_id": 2, "broker_address": "127.0.0.1:2"},
            Context(20_000 + i),
        )
    assert len(st.history) == 4 and st.history_seq == n + 601
    copy = ControllerState.from_dict(json.loads(st.canonical_json()))
    assert copy.state_hash() == st.state_hash() and copy.history == st.history
    run(st, "UpdateConfig", {"config": {"historyMaxEntries": "10000"}}, Context(30_000))
    for i in range(600):
        run(
            st,
            "RegisterBroker",
            {"cluster_name": C, "broker_name": B, "broker_id": 3, "broker_address": "127.0.0.1:3"},
            Context(40_000 + i),
        )
    first = decide(st, "GetHistory", {}, Context(0)).response
    assert len(first["entries"]) == core.HISTORY_PAGE and first["more"]
    rest = decide(st, "GetHistory", {"after_seq": first["entries"][-1]["seq"]}, Context(0)).response
    assert not rest["more"] and len(first["entries"]) + len(rest["entries"]) == len(st.history) == 605
    since = decide(st, "GetHistory", {"since_ms": 40_590}, Context(0)).response["entries"]
    assert [e["time_ms"] for e in since] == list(range(40_590, 40_600))


def test_below_level_3_nothing_new_is_written_and_the_cockpit_says_why() -> None:
    for level in (1, 2):
        st = state_at(level)
        broker_set(st, {1: 900, 2: 900, 3: 700})
        # a switchover works at any level: it writes MasterElected only
        ctx = Context(10_000, rows({1: 900, 2: 900, 3: 9}))
        r = run(st, "Switchover", {"broker_name": B, "broker_id": 2}, ctx)
        assert r.ok and [type(x).__name__ for x in r.records] == ["MasterElected"]
        ctx = Context(10_000, rows({1: 900, 2: 900, 3: 700}, dead=(2,)))
        r = run(st, "ElectMaster", {"cluster_name": C, "broker_name": B, "broker_id": -1}, ctx)
        assert r.records and not any(isinstance(x, DecisionNoted) for x in r.records)  # master cleared
        assert st.history == [] and "history" not in st.to_dict()
        for method, req in (
            ("GetHistory", {}),
            ("PauseFailover", {"paused": True}),
            ("UpdateConfig", {"config": {"historyMaxEntries": "5"}}),
        ):
            refused = decide(st, method, req, ctx)
            assert refused.code == Code.FEATURE_LEVEL_TOO_LOW and not refused.records
            assert f"needs feature level 3; the group is at {level}" in refused.remark
            assert "mqctl quorum feature-level 3" in refused.remark


def test_pause_blocks_automatic_elections_only() -> None:
    st = state_at(3)
    broker_set(st, {1: 900, 2: 900, 3: 700})
    dead_master = Context(10_000, rows({1: 900, 2: 900, 3: 700}, dead=(1,)), term=2)
    r = run(st, "PauseFailover", {"broker_name": B, "paused": True, "reason": "upgrade"}, dead_master)
    assert r.ok and [type(x) for x in r.records] == [FailoverPauseSet, DecisionNoted]
    assert st.history[-1]["what"] == "failover paused" and st.history[-1]["detail"] == "upgrade"
    assert not core.needs_controller_election(st, B, dead_master)
    for req in ({"broker_id": -1}, {"broker_id": 2}):
        refused = decide(st, "ElectMaster", {"cluster_name": C, "broker_name": B, **req}, dead_master)
        assert refused.code == Code.CONTROLLER_ELECT_MASTER_FAILED and "paused (upgrade)" in refused.remark
    info = decide(st, "GetSyncStateData", {}, dead_master).response["replicas_info_table"][B]
    assert info["failover_paused"] and info["failover_pause_reason"] == "upgrade"
    # a bounced master keeps its role while paused
    bounced = Context(10_000, rows({1: 900, 2: 900, 3: 700}))
    r = run(
        st,
        "RegisterBroker",
        {
            "cluster_name": C,
            "broker_name": B,
            "broker_id": 1,
            "broker_address": "127.0.0.1:1",
            "max_offset": 0,
        },
        bounced,
    )
    assert r.ok and st.broker_sets[B].master_broker_id == 1
    # the admin's designated election still works
    r = run(
        st,
        "ElectMaster",
        {"cluster_name": C, "broker_name": B, "broker_id": 2, "designate_elect": True},
        dead_master,
    )
    assert r.ok and st.history[-1]["cause"] == "admin request"
    assert "designated by the admin" in st.history[-1]["election"]["reason"]
    # a pause of every set; resuming one set leaves it paused by the other
    run(st, "PauseFailover", {"broker_name": "", "paused": True, "reason": "all"}, dead_master)
    r = run(st, "PauseFailover", {"broker_name": B, "paused": False}, dead_master)
    assert "stays paused by the pause of every broker set" in r.remark
    assert st.pause_of(B) == {"reason": "all", "since_ms": 10_000}
    r = run(st, "PauseFailover", {"paused": False}, dead_master)
    assert r.ok and st.pause_of(B) is None and st.failover_paused == {}
    assert decide(st, "PauseFailover", {"broker_name": "nope", "paused": True}, dead_master).code == 2008


def test_switchover_waits_for_the_candidate_refuses_with_numbers_and_forces() -> None:
    st = state_at(3)
    broker_set(st, {1: 900, 2: 800, 3: 850})
    behind = Context(10_000, rows({1: 900, 2: 800, 3: 850}), term=9)
    r = decide(st, "Switchover", {"broker_name": B}, behind)
    assert r.code == Code.NOT_CAUGHT_UP and not r.records
    assert r.response["new_master_broker_id"] == 3 and r.response["gap_bytes"] == 50
    assert "broker 3 of broker-a is 50 bytes behind: maxOffset 850, the master 1 has 900" in r.remark
    r = decide(st, "Switchover", {"broker_name": B, "broker_id": 2, "dry_run": True, "force": True}, behind)
    assert r.ok and r.response["dry_run"] and not r.records
    r = run(st, "Switchover", {"broker_name": B, "broker_id": 2, "force": True}, behind)
    assert r.ok and st.broker_sets[B].master_broker_id == 2 and st.broker_sets[B].sync_state_set == {2}
    e = st.history[-1]
    assert e["cause"] == "switchover" and e["election"]["loss_bytes"] == 100
    assert e["election"]["reason"] == "the switchover's target (--to 2)"
    caught_up = Context(10_000, rows({1: 900, 2: 900, 3: 900}))
    assert decide(st, "Switchover", {"broker_name": B}, caught_up).code == Code.CONTROLLER_ELECT_MASTER_FAILED
    for target, code in (
        (2, Code.CONTROLLER_MASTER_STILL_EXIST),
        (3, Code.CONTROLLER_INVALID_REPLICAS),
        (7, Code.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED),
    ):
        assert decide(st, "Switchover", {"broker_name": B, "broker_id": target}, caught_up).code == code
    no_master = Context(10_000, rows({1: 900, 2: 900, 3: 900}, dead=(2,)))
    r = decide(st, "Switchover", {"broker_name": B}, no_master)
    assert r.code == Code.CONTROLLER_MASTER_NOT_AVAILABLE


def test_rebalance_moves_to_the_preferred_caught_up_replica() -> None:
    st = state_at(3)
    broker_set(st, {1: 900, 2: 900, 3: 900})
    prio = {1: 5, 2: 1, 3: 1}
    lagging = Context(10_000, rows({1: 900, 2: 800, 3: 900}, priority=prio), term=4)
    r = decide(st, "Rebalance", {}, lagging)
    assert r.ok and not r.records
    assert r.response["moves"][0] | {"reason": ""} == {
        "broker_name": B,
        "cluster_name": C,
        "master_broker_id": 1,
        "preferred_broker_id": 2,
        "action": "skip",
        "reason": "",
        "master_max_offset": 900,
        "candidate_max_offset": 800,
        "gap_bytes": 100,
    }
    ready = Context(10_000, rows({1: 900, 2: 900, 3: 900}, priority=prio), term=4)
    dry = decide(st, "Rebalance", {"dry_run": True}, ready)
    assert dry.ok and not dry.records and dry.response["moves"][0]["action"] == "move"
    r = run(st, "Rebalance", {"cluster_name": C}, ready)
    assert r.ok and st.broker_sets[B].master_broker_id == 2 and st.history[-1]["cause"] == "rebalance"
    again = decide(st, "Rebalance", {}, ready).response["moves"][0]
    assert again["action"] == "none"
    assert decide(st, "Rebalance", {"cluster_name": "nope"}, ready).code == 2008


def test_a_first_election_with_wait_for_names_the_freshest_and_a_cleaned_set_starts_unpaused() -> None:
    st = state_at(3)
    run(st, "UpdateConfig", {"config": {"waitFor": "2"}}, Context(0))
    ctx = Context(10_000, rows({1: 100, 2: 300}), term=2)
    for b in (1, 2):
        run(
            st,
            "ApplyBrokerId",
            {
                "cluster_name": C,
                "broker_name": B,
                "applied_broker_id": b,
                "register_check_code": f"127.0.0.1:{b};1",
            },
            ctx,
        )
    r = run(st, "ElectMaster", {"cluster_name": C, "broker_name": B, "broker_id": -1}, ctx)
    assert r.ok and r.response["master_broker_id"] == 2
    e = st.history[-1]["election"]
    assert not e["unclean"] and "old_master_broker_id" not in e and "loss_bytes" not in e
    assert e["reason"] == (
        "freshest alive replica (first election, once waitFor replicas were alive): "
        "higher maxOffset (300 > 100 of broker 1)"
    )
    run(st, "PauseFailover", {"broker_name": B, "paused": True}, ctx)
    run(st, "CleanBrokerData", {"cluster_name": C, "broker_name": B, "is_clean_living_broker": True}, ctx)
    assert st.failover_paused == {} and st.history[-1]["what"] == "data cleaned"


def test_history_in_chunks_reads_as_the_list_of_its_entries() -> None:
    """History keeps its texts in chunked buffers (no object per entry); appends and trims at any
    point read back, index, slice and serialize as the plain list would."""
    from mqctl.controller.core import HISTORY_CHUNK, History

    rng = random.Random(11)
    history, want = History(), []
    for i in range(4 * HISTORY_CHUNK + 50):
        entry = {"seq": i, "what": "é" * rng.randrange(3), "detail": [1, {"b": None}]}
        history.append(entry)
        want.append(entry)
        if rng.random() < 0.2:
            keep = rng.randrange(0, 2 * HISTORY_CHUNK)
            history.trim(keep)
            want = want[len(want) - keep :] if keep < len(want) else want
        assert len(history) == len(want)
        if i % 37 == 0 or i == 4 * HISTORY_CHUNK + 49:
            assert list(history) == want and history[2:9] == want[2:9]
            assert "".join(history.json_parts()) == json.dumps(want, sort_keys=True, separators=(",", ":"))
            if want:
                assert history[-1] == want[-1] and history[0] == want[0]
    assert history == History(want) and repr(history) == f"History({len(want)} entries)"


def test_history_keeps_full_chunks_compressed() -> None:
    """A leader of 10,000 brokers keeps 10,000 entries of a few hundred bytes each: full chunks are
    held compressed, read back as they were, and the chunk being filled stays plain."""
    from mqctl.controller.core import HISTORY_CHUNK, History

    want = [
        {
            "seq": i,
            "what": "master elected",
            "broker_name": f"broker-{i:05d}",
            "detail": f"master 1 (masterEpoch {i % 7})",
        }
        for i in range(3 * HISTORY_CHUNK + 5)
    ]
    history = History(want)
    texts = sum(len(json.dumps(e, sort_keys=True, separators=(",", ":"))) + 1 for e in want)
    held = sum(len(buf) for buf, _ in history._chunks)
    assert held * 5 < texts, (held, texts)
    assert isinstance(history._chunks[-1][0], bytearray) and len(history._chunks[-1][1]) == 5
    assert list(history) == want and history[HISTORY_CHUNK + 3] == want[HISTORY_CHUNK + 3]
    history.trim(HISTORY_CHUNK + 10)
    assert list(history) == want[-(HISTORY_CHUNK + 10) :]
