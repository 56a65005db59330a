"""Snapshot format, determinism and totality of the core (incl. hypothesis property tests)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from core_fixtures import wire
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqctl import methods
from mqctl.controller.core import (
    Context,
    ControllerState,
    InconsistentRecord,
    LiveInfo,
    Result,
    decide,
)
from mqctl.controller.records import FeatureLevelSet, MetaSet, RecordError, decode, encode
from mqctl.errors import Code

METHODS = sorted(s.name for s in methods.METHODS if s.rule_ref)  # the methods the core decides


C = "cluster-a"
NAMES = ["a", "b"]


def run(state: ControllerState, method: str, req: dict[str, Any], ctx: Context) -> Result:
    r = decide(state, method, req, ctx)
    for e in wire(r):
        json.dumps(e)  # JSON-safe
        state.apply(decode(e))
    return r


def test_decision_view_decides_like_a_copy_and_never_changes_its_state() -> None:
    """The leader's view shares broker sets with the applied state until it changes one: records
    applied to the view leave the state alone, and the state that applies them after ends where
    the view did (but for the history entries and their counts, which the view does not keep)."""
    from mqctl.controller.core import MAX_FEATURE_LEVEL

    state = ControllerState()
    state.apply(FeatureLevelSet(MAX_FEATURE_LEVEL))
    steps = scripted_events()
    for method, req, ctx in steps[:6]:  # set "a": ids and registrations, applied
        assert run(state, method, req, ctx).code == 0
    assert (
        run(
            state,
            "ApplyBrokerId",
            {"cluster_name": C, "broker_name": "b", "applied_broker_id": 1, "register_check_code": "h:9;1"},
            steps[0][2],
        ).code
        == 0
    )
    view = state.decision_view()
    before = state.state_hash()
    pending: list[dict[str, Any]] = []
    for method, req, ctx in steps[6:]:
        pending += wire(run(view, method, req, ctx))
        assert state.state_hash() == before  # nothing the view did reached the state
    assert view.broker_sets["b"] is state.broker_sets["b"]  # untouched: shared, not copied
    assert view.broker_sets["a"] is not state.broker_sets["a"]
    for e in pending:
        state.apply(decode(e))
    got, want = view.to_dict(), state.to_dict()
    assert want["history"] and got.pop("history") == []
    assert want["elections"] and got.pop("elections") == {} and got.pop("loss_total") == {}
    for kept_apart in ("history", "elections", "loss_total"):
        want.pop(kept_apart)
    assert got == want


def test_context_round_trip_restores_int_keys() -> None:
    ctx = Context(5000, {"a": {1: LiveInfo(1, "h:1", 3, 2, 100, 90, 7, 4000, 1000)}, "b": {}})
    d = json.loads(json.dumps(ctx.to_dict()))
    back = Context.from_dict(d)
    assert back == ctx and back.is_alive("a", 1) and not back.is_alive("a", 2)
    assert not Context(5001, ctx.live).is_alive("a", 1)


def scripted_events() -> list[tuple[str, dict[str, Any], Context]]:
    alive = Context(
        1000, {"a": {b: LiveInfo(b, f"h:{b}", 0, 1, b * 10, -1, 9, 1000, 10_000) for b in (1, 2, 3)}}
    )
    steps: list[tuple[str, dict[str, Any], Context]] = []
    for b in (1, 2, 3):
        steps.append(
            (
                "ApplyBrokerId",
                {
                    "cluster_name": C,
                    "broker_name": "a",
                    "applied_broker_id": b,
                    "register_check_code": f"h:{b};1",
                },
                alive,
            )
        )
        steps.append(
            (
                "RegisterBroker",
                {
                    "cluster_name": C,
                    "broker_name": "a",
                    "broker_id": b,
                    "broker_address": f"h:{b}",
                    "options": {"k": "v"},
                },
                alive,
            )
        )
    steps += [
        ("ElectMaster", {"cluster_name": C, "broker_name": "a", "broker_id": 1}, alive),
        (
            "AlterSyncStateSet",
            {
                "broker_name": "a",
                "master_broker_id": 1,
                "master_epoch": 1,
                "new_sync_state_set": [1, 2, 3],
                "sync_state_set_epoch": 1,
            },
            alive,
        ),
        ("UpdateConfig", {"config": {"waitFor": "2"}}, alive),
        ("ElectMaster", {"broker_name": "a", "broker_id": 3, "designate_elect": True}, alive),
        ("CleanBrokerData", {"broker_name": "a", "broker_controller_ids_to_clean": "9"}, alive),
    ]
    return steps


def test_snapshot_round_trip_and_replay_on_two_copies() -> None:
    one, two = ControllerState(), ControllerState()
    events: list[dict[str, Any]] = []
    for method, req, ctx in scripted_events():
        r = run(one, method, req, ctx)
        assert r.code == 0, (method, r.remark)
        events += wire(r)
    one.apply(MetaSet("group_id", "g"))
    events.append({"type": "SetMeta", "key": "group_id", "value": "g"})
    for e in json.loads(json.dumps(events)):
        two.apply(decode(e))
    assert one.state_hash() == two.state_hash()
    snap = json.loads(json.dumps(one.to_dict()))
    back = ControllerState.from_dict(snap)
    assert back.to_dict() == one.to_dict() and back.state_hash() == one.state_hash()
    assert back.copy().state_hash() == one.state_hash()
    assert (
        one.state_hash()
        == __import__("hashlib")
        .sha256(json.dumps(one.to_dict(), sort_keys=True, separators=(",", ":")).encode())
        .hexdigest()
    )
    view = back.broker_set_view("a")
    assert view is not None and view["master_broker_id"] == 3 and view["options"] == {"k": "v"}
    assert back.config["waitFor"] == "2" and back.meta == {"group_id": "g"}
    assert back.broker_names() == ["a"] and back.cluster_of("a") == C and back.cluster_of("z") is None


def test_unreadable_records_are_refused() -> None:
    for e in [
        {},
        {"type": "Nope"},
        {"type": "ApplyBrokerId", "broker_name": "a"},
        {"type": "ElectMaster", "broker_name": "a", "new_master_elected": "yes"},
        {"type": "SetMeta", "key": 5, "value": 1},
        {"type": "ElectMaster", "v": 2, "broker_name": "a", "new_master_elected": False},
        {"type": "SetFeatureLevel", "level": 99},
        {"type": "ElectMaster", "v": True},
        [],
        None,
        "x",
    ]:
        with pytest.raises(RecordError):
            decode(e)


def test_inconsistent_records_raise_and_change_nothing() -> None:
    st_ = ControllerState()
    st_.apply(
        decode(
            {
                "type": "ApplyBrokerId",
                "cluster_name": C,
                "broker_name": "a",
                "broker_address": "h",
                "register_check_code": "h;1",
                "new_broker_id": 1,
            }
        )
    )
    h = st_.state_hash()
    for e in [
        {"type": "ElectMaster", "broker_name": "zz", "new_master_elected": True, "new_master_broker_id": 1},
        {"type": "ElectMaster", "broker_name": "a", "new_master_elected": True, "new_master_broker_id": 7},
        {"type": "AlterSyncStateSet", "broker_name": "zz", "new_sync_state_set": [1]},
        {"type": "AlterSyncStateSet", "broker_name": "a", "new_sync_state_set": [1, 9]},
        {
            "type": "ApplyBrokerId",
            "cluster_name": C,
            "broker_name": "b",
            "broker_address": "h",
            "register_check_code": "h;1",
            "new_broker_id": 2,
        },
        {
            "type": "ApplyBrokerId",
            "cluster_name": C,
            "broker_name": "a",
            "broker_address": "h",
            "register_check_code": "other;1",
            "new_broker_id": 1,
        },
        {
            "type": "UpdateBrokerAddress",
            "cluster_name": C,
            "broker_name": "zz",
            "broker_address": "x",
            "broker_id": 1,
        },
        {
            "type": "UpdateBrokerAddress",
            "cluster_name": C,
            "broker_name": "a",
            "broker_address": "x",
            "broker_id": 4,
        },
        {"type": "RegisterBroker", "cluster_name": C, "broker_name": "a", "broker_id": 1, "broker_epoch": 0},
        {"type": "CleanBrokerData", "broker_name": "zz", "broker_id_set_to_clean": [1]},
        {"type": "SetBrokerOptions", "broker_name": "zz", "options": {"a": "b"}},
        {"type": "UpdateConfig", "config": {"waitFor": "0"}},
        {"type": "UpdateConfig", "config": {"nope": "1"}},
    ]:
        with pytest.raises(InconsistentRecord):
            st_.apply(decode(e))
        assert st_.state_hash() == h, e
    st_.apply(FeatureLevelSet(2))
    with pytest.raises(InconsistentRecord):
        st_.apply(FeatureLevelSet(1))


def test_record_wire_format_is_stable() -> None:
    """Entries written by mqctl 0.1 ({"events": [...]}, no "v") read as version 1; the encoding of
    every record round-trips."""
    from mqctl.controller.records import RECORD_TYPES, decode_entry, encode_entry, record_versions

    old = {"events": [{"type": "SetMeta", "key": "groupId", "value": "g"}]}
    assert decode_entry(old) == [MetaSet("groupId", "g")]
    samples = [
        decode(
            {
                "type": "ApplyBrokerId",
                "cluster_name": C,
                "broker_name": "a",
                "broker_address": "h",
                "register_check_code": "h;1",
                "new_broker_id": 1,
            }
        ),
        decode(
            {
                "type": "UpdateBrokerAddress",
                "cluster_name": C,
                "broker_name": "a",
                "broker_address": "x",
                "broker_id": 1,
            }
        ),
        decode(
            {
                "type": "RegisterBroker",
                "cluster_name": C,
                "broker_name": "a",
                "broker_id": 1,
                "broker_epoch": 3,
            }
        ),
        decode({"type": "SetBrokerOptions", "broker_name": "a", "options": {"b": "2", "a": "1"}}),
        decode(
            {"type": "ElectMaster", "broker_name": "a", "new_master_elected": True, "new_master_broker_id": 1}
        ),
        decode(
            {
                "type": "ElectMaster",
                "broker_name": "a",
                "new_master_elected": False,
                "new_master_broker_id": None,
            }
        ),
        decode({"type": "AlterSyncStateSet", "broker_name": "a", "new_sync_state_set": [3, 1]}),
        decode({"type": "CleanBrokerData", "broker_name": "a", "broker_id_set_to_clean": None}),
        decode({"type": "CleanBrokerData", "broker_name": "a", "broker_id_set_to_clean": [2]}),
        decode({"type": "UpdateConfig", "config": {"waitFor": "2"}}),
        decode({"type": "SetMeta", "key": "k", "value": {"x": [1]}}),
        decode({"type": "SetFeatureLevel", "v": 1, "level": 2}),
        decode(
            {
                "type": "NoteDecision",
                "v": 1,
                "entry": {
                    "time_ms": 5,
                    "term": 2,
                    "broker_name": "a",
                    "what": "master elected",
                    "cause": "switchover",
                },
            }
        ),
        decode(
            {
                "type": "SetFailoverPause",
                "v": 1,
                "broker_name": "",
                "paused": True,
                "reason": "r",
                "since_ms": 5,
            }
        ),
    ]
    assert {type(r).WIRE for r in samples} == set(RECORD_TYPES) == set(record_versions())
    assert decode_entry(json.loads(encode_entry(samples))) == samples
    assert encode(samples[4]) == {
        "type": "ElectMaster",
        "v": 1,
        "broker_name": "a",
        "new_master_elected": True,
        "new_master_broker_id": 1,
    }


def test_snapshot_of_a_newer_version_or_feature_level_is_refused() -> None:
    from mqctl.controller.core import SnapshotVersionError

    doc = ControllerState().to_dict()
    assert "feature_level" not in doc  # level 1: the same document (and hash) as mqctl 0.1
    for bad in ({**doc, "version": 99}, {**doc, "feature_level": 99}):
        with pytest.raises(SnapshotVersionError, match="upgrade this node"):
            ControllerState.from_dict(bad)
    st_ = ControllerState()
    st_.apply(FeatureLevelSet(2))
    assert ControllerState.from_dict(st_.to_dict()).feature_level == 2


def test_handle_is_deterministic_and_json_safe_for_every_method() -> None:
    for method in METHODS:
        r = decide(ControllerState(), method, {}, Context(0))
        json.dumps({"code": r.code, "remark": r.remark, "response": r.response, "events": wire(r)})
        assert r.code != Code.SYSTEM_ERROR, (method, r.remark)


# ---------------------------------------------------------------- property tests

ids = st.sampled_from([1, 1, 2, 2, 3, 3, 0, 4, -1, -2])
names = st.sampled_from(["a", "a", "a", "b", ""])
row_st = st.builds(
    lambda bid, alive, epoch, off, prio, bepoch: LiveInfo(
        bid, f"h:{bid}", bepoch, epoch, off, -1, prio, 1000 if alive else 0, 500
    ),
    st.integers(1, 4),
    st.booleans(),
    st.integers(-1, 3),
    st.sampled_from([-1, 0, 5, 2**31, 2**40]),
    st.sampled_from([1, 2, 2**31 - 1]),
    st.integers(0, 6),
)
ctx_st = st.builds(
    lambda rows_a, rows_b: Context(
        1000, {"a": {r.broker_id: r for r in rows_a}, "b": {r.broker_id: r for r in rows_b}}
    ),
    st.lists(row_st, max_size=4),
    st.lists(row_st, max_size=3),
)
maybe = st.one_of(st.none(), st.just("garbage"), st.just(True))


def _req(method: str, name: str, bid: int, other: int, flag: bool, data: st.DataObject) -> dict[str, Any]:
    if method == "GetNextBrokerId":
        return {"cluster_name": C, "broker_name": name}
    if method == "ApplyBrokerId":
        return {
            "cluster_name": C,
            "broker_name": name,
            "applied_broker_id": bid,
            "register_check_code": f"h:{bid};{data.draw(st.integers(0, 2))}",
        }
    if method == "RegisterBroker":
        req: dict[str, Any] = {
            "cluster_name": C,
            "broker_name": name,
            "broker_id": bid,
            "broker_address": data.draw(st.sampled_from([f"h:{bid}", "moved:1"])),
        }
        if flag:
            req.update(epoch=data.draw(st.integers(-1, 3)), max_offset=data.draw(st.integers(-1, 2**41)))
        req["options"] = data.draw(st.sampled_from([{}, {"x": "1"}, {"x": "2"}]))
        return req
    if method == "Heartbeat":
        return {"broker_name": name, "broker_id": bid, "broker_epoch": data.draw(st.integers(0, 8))}
    if method == "AlterSyncStateSet":
        return {
            "broker_name": name,
            "master_broker_id": max(bid, 0),
            "master_epoch": data.draw(st.integers(0, 4)),
            "sync_state_set_epoch": data.draw(st.integers(0, 5)),
            "new_sync_state_set": data.draw(st.lists(st.integers(0, 4), max_size=4)),
            "broker_epoch": data.draw(st.integers(0, 8)),
        }
    if method == "ElectMaster":
        req = {"cluster_name": C, "broker_name": name, "designate_elect": flag}
        if bid != -2:
            req["broker_id"] = bid
        return req
    if method == "GetReplicaInfo":
        return {"broker_name": name}
    if method == "GetSyncStateData":
        return {"broker_names": data.draw(st.lists(names, max_size=2))}
    if method == "CleanBrokerData":
        return {
            "broker_name": name,
            "broker_controller_ids_to_clean": data.draw(st.sampled_from(["", "1", "1;2", "x", str(other)])),
            "is_clean_living_broker": flag,
        }
    if method == "UpdateConfig":
        return {
            "config": data.draw(
                st.sampled_from(
                    [
                        {"waitFor": "2"},
                        {"waitFor": "1"},
                        {"enableElectUncleanMaster": "true"},
                        {"configStorePath": "x"},
                        {"waitFor": "-1"},
                        {"historyMaxEntries": "3"},
                    ]
                )
            )
        }
    if method == "PauseFailover":
        return {"broker_name": name, "paused": flag, "reason": data.draw(st.sampled_from(["", "upgrade"]))}
    if method == "Switchover":
        req = {"broker_name": name, "force": flag, "dry_run": data.draw(st.booleans())}
        if bid >= 0:
            req["broker_id"] = bid
        return req
    if method == "Rebalance":
        return {"cluster_name": data.draw(st.sampled_from(["", C, "other"])), "dry_run": flag}
    if method == "GetHistory":
        return {"broker_name": name, "after_seq": data.draw(st.integers(0, 5))}
    return {}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_sequences_replicate_identically(data: st.DataObject) -> None:
    one, two = ControllerState(), ControllerState()
    if data.draw(st.booleans()):  # at feature level 3: decisions noted in the history, failover pauses
        for state in (one, two):
            state.apply(FeatureLevelSet(2))
            state.apply(FeatureLevelSet(3))
    if data.draw(st.booleans()):  # start from a registered broker set
        for method, req, ctx in scripted_events()[: data.draw(st.integers(1, 8))]:
            run(one, method, req, ctx)
            run(two, method, req, ctx)
    n = data.draw(st.integers(1, 40))
    for _ in range(n):
        method = data.draw(st.sampled_from(list(METHODS) + ["Bogus"]))
        req = _req(method, data.draw(names), data.draw(ids), data.draw(ids), data.draw(st.booleans()), data)
        if data.draw(st.integers(0, 20)) == 0:
            req[data.draw(st.sampled_from(sorted(req) or ["k"]))] = data.draw(maybe)
        ctx = data.draw(ctx_st)
        # the log carries the request and context as JSON
        logged = json.loads(json.dumps({"req": req, "ctx": ctx.to_dict()}))
        r1 = run(one, method, req, ctx)
        r2 = run(two, method, logged["req"], Context.from_dict(logged["ctx"]))
        assert r1.code != Code.SYSTEM_ERROR, r1.remark
        assert (r1.code, r1.remark, wire(r1)) == (r2.code, r2.remark, wire(r2))
        assert one.state_hash() == two.state_hash()
        back = ControllerState.from_dict(json.loads(json.dumps(one.to_dict())))
        assert back.state_hash() == one.state_hash()
        for bs in one.broker_sets.values():
            assert bs.next_assign_broker_id >= 1 and bs.master_epoch >= 0
            assert bs.sync_state_set_epoch >= 0


event_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-3, 5), st.text(max_size=3), st.sampled_from(NAMES)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=6,
)
event_st = st.fixed_dictionaries(
    {
        "type": st.sampled_from(
            [
                "ApplyBrokerId",
                "AlterSyncStateSet",
                "ElectMaster",
                "CleanBrokerData",
                "UpdateBrokerAddress",
                "RegisterBroker",
                "SetBrokerOptions",
                "UpdateConfig",
                "SetMeta",
                "Nope",
            ]
        )
    },
    optional=dict.fromkeys(
        [
            "cluster_name",
            "broker_name",
            "broker_address",
            "register_check_code",
            "new_broker_id",
            "new_sync_state_set",
            "new_master_elected",
            "new_master_broker_id",
            "broker_id_set_to_clean",
            "broker_id",
            "broker_epoch",
            "options",
            "config",
            "key",
            "value",
        ],
        event_values,
    ),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(event_st, max_size=15))
def test_a_record_is_read_and_applied_whole_or_refused_without_change(events: list[dict[str, Any]]) -> None:
    """Replay throws on a record it cannot read or that does not fit (the node then stops), never
    half-applies one and never skips one silently; every node reaches the same verdict."""
    one, two = ControllerState(), ControllerState()
    for state in (one, two):
        state.apply(
            decode(
                {
                    "type": "ApplyBrokerId",
                    "cluster_name": C,
                    "broker_name": "a",
                    "broker_address": "h",
                    "register_check_code": "h;1",
                    "new_broker_id": 1,
                }
            )
        )
    for e in events:
        verdicts = []
        for state, doc in ((one, e), (two, json.loads(json.dumps(e)))):
            before = state.state_hash()
            try:
                state.apply(decode(doc))
                verdicts.append("applied")
            except RecordError:
                verdicts.append("unreadable")
                assert state.state_hash() == before
            except InconsistentRecord:
                verdicts.append("inconsistent")
                assert state.state_hash() == before
        assert verdicts[0] == verdicts[1]
        assert one.state_hash() == two.state_hash()
        json.dumps(one.to_dict())
