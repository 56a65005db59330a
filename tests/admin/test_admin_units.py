"""Pure parts of the admin commands: documents, lag, truncation estimates, quorum verdicts, YAML, codes."""

from __future__ import annotations

import json
from pathlib import Path

from mqctl.admin.elect import ElectAnswer, controller_answer, elect_plan, truncate_bytes
from mqctl.admin.output import to_json, to_yaml
from mqctl.admin.quorum import NodeView, quorum_doc
from mqctl.admin.syncstate import lag_bytes, select_broker_sets, sync_state_doc
from mqctl.client import Metadata, Peer, ReplicaIdentity, ReplicasInfo
from mqctl.errors import ControllerError
from mqctl.store.epochfile import EpochCacheView, EpochEntry

ROOT = Path(__file__).resolve().parents[2]


def _info() -> ReplicasInfo:
    return ReplicasInfo(
        master_broker_id=1,
        master_address="a:1",
        master_epoch=3,
        sync_state_set_epoch=4,
        cluster_name="c",
        in_sync_replicas=(
            ReplicaIdentity("b", 1, "a:1", True, 10, 3, 900, 800),
            ReplicaIdentity("b", 2, "a:2", True, 20, 3, 850, 800),
        ),
        not_in_sync_replicas=(
            ReplicaIdentity("b", 3, "a:3", False, None, None, None, None),
            ReplicaIdentity("b", 4, "a:4", True, 5, 2, 1000, 700),
        ),
    )


def test_sync_state_doc_and_lag() -> None:
    doc = sync_state_doc({"b": _info()})
    (b,) = doc["brokers"]
    assert doc["version"] == 1 and b["masterBrokerId"] == 1 and b["syncStateSetNums"] == 2
    lags = {r["brokerId"]: r["lagBytes"] for r in (*b["inSyncReplicas"], *b["notInSyncReplicas"])}
    assert lags == {1: 0, 2: 50, 3: None, 4: 0}
    assert lag_bytes(-1, 5) is None and lag_bytes(10, None) is None and lag_bytes(10, 4) == 6
    table = {"x": _info(), "y": ReplicasInfo(cluster_name="d")}
    assert list(select_broker_sets(table, cluster_name="d")[0]) == ["y"]
    assert select_broker_sets(table, ["x", "nope"])[1] == ["nope"]
    assert select_broker_sets(table, cluster_name="zz") == ({}, ["zz"])


def test_elect_plan_heartbeat_estimates_and_prediction() -> None:
    plan = elect_plan("c", "b", _info(), None, unclean=False)
    assert plan["predictedMasterId"] is None  # the old master is alive and in the SyncStateSet: 2011
    assert controller_answer("b", _info(), None, unclean=False).code == 2011
    assert plan["dataLoss"] is False and plan["estimateBasis"] == "maxOffset"
    by = {c["brokerId"]: c for c in plan["candidates"]}
    assert by[2]["truncateBytes"] == {"1": 50, "3": None, "4": 150}
    assert by[2]["totalTruncateBytes"] is None and by[3]["electable"] is False
    assert by[4]["electable"] is False
    plan = elect_plan("c", "b", _info(), 4, unclean=True)
    assert plan["dataLoss"] is True and plan["predictedMasterId"] == 4
    assert {c["brokerId"]: c["electable"] for c in plan["candidates"]}[4] is True
    assert elect_plan("c", "b", _info(), 2, unclean=False)["predictedMasterId"] == 2


def test_elect_plan_of_a_dead_designated_broker_is_the_refusal() -> None:
    """The designated broker is in the SyncStateSet but dead (registered, no heartbeat now)."""
    dead = ReplicasInfo(
        master_broker_id=1,
        master_address="a:1",
        master_epoch=3,
        sync_state_set_epoch=4,
        cluster_name="c",
        in_sync_replicas=(
            ReplicaIdentity("b", 1, "a:1", True, 10, 3, 900, 800),
            ReplicaIdentity("b", 2, "a:2", False, 20000, 3, 900, 800),
        ),
    )
    plan = elect_plan("c", "b", dead, 2, unclean=True)
    assert plan["predictedMasterId"] is None and plan["dataLoss"] is False
    assert {c["brokerId"]: c["electable"] for c in plan["candidates"]} == {1: True, 2: False}
    assert controller_answer("b", dead, 2, unclean=True) == ElectAnswer(2012, "Failed to elect a new master")
    # the first election (masterEpoch 0) takes the designated broker whether it is alive or not
    first = ReplicasInfo(
        cluster_name="c",
        in_sync_replicas=(),
        not_in_sync_replicas=(
            ReplicaIdentity("b", 1, "a:1", False),
            ReplicaIdentity("b", 2, "a:2", True, 5, 1, 10, 10),
        ),
    )
    assert controller_answer("b", first, 1, unclean=False) == ElectAnswer(0, "", 1)
    # waitFor 2 with one alive replica: the controller-triggered election waits
    assert controller_answer("b", first, None, unclean=False, wait_for=2).code == 2102


def test_controller_answer_is_the_controllers_answer() -> None:
    """On random broker sets: the answer rebuilt from GetSyncStateData is ElectMaster's own answer."""
    import random

    from mqctl.client import SyncStateDataResult
    from mqctl.controller import core

    rng = random.Random(16)
    for _ in range(3000):
        ids = list(range(1, rng.randint(1, 4) + 1))
        bs = core.BrokerSet("c", "b", brokers={i: core.BrokerInfo(f"127.0.0.1:{i}", "", i) for i in ids})
        if rng.random() < 0.8:
            bs.master_epoch = rng.randint(1, 5)
            bs.sync_state_set = frozenset(i for i in ids if rng.random() < 0.6)
            bs.sync_state_set_epoch = rng.randint(1, 5)
            if rng.random() < 0.7 and bs.sync_state_set:
                bs.master_broker_id = rng.choice(sorted(bs.sync_state_set))
        now = 100_000
        rows = {}
        for i in ids:
            kind = rng.choice(("none", "alive", "alive", "expired"))
            if kind != "none":
                rows[i] = core.LiveInfo(
                    i,
                    f"127.0.0.1:{i}",
                    i,
                    epoch=rng.choice((-1, 1, 2)),
                    max_offset=rng.choice((-1, 100, 200)),
                    election_priority=rng.choice((1, 2, 2**31 - 1)),
                    last_heartbeat_ms=now - (10 if kind == "alive" else 50_000),
                    timeout_ms=10_000,
                )
        unclean = rng.random() < 0.5
        wait_for = rng.choice((1, 1, 2, 3))
        state = core.ControllerState({"enableElectUncleanMaster": str(unclean).lower(), "waitFor": wait_for})
        state.broker_sets["b"] = bs
        ctx = core.Context(now_ms=now, live={"b": rows})
        designated = rng.choice((None, *ids))
        real = core.decide(
            state,
            "ElectMaster",
            {
                "cluster_name": "c",
                "broker_name": "b",
                "broker_id": designated,
                "designate_elect": designated is not None,
            },
            ctx,
        )
        sync = core.decide(state, "GetSyncStateData", {"broker_names": ["b"]}, ctx)
        info = SyncStateDataResult.from_dict(sync.response).replicas_info_table["b"]
        got = controller_answer("b", info, designated, unclean, wait_for)
        assert (got.code, got.remark) == (real.code, real.remark), (bs, rows, designated, unclean, wait_for)
        assert got.master_broker_id == (real.response.get("master_broker_id") if real.ok else None)


def test_truncation_from_epoch_caches() -> None:
    def cache(pairs: list[tuple[int, int]], max_offset: int) -> EpochCacheView:
        return EpochCacheView(entries=[EpochEntry(*p) for p in pairs], max_offset=max_offset)

    a = cache([(1, 0), (2, 100), (3, 300)], 500)
    b = cache([(1, 0), (2, 100)], 250)
    c = cache([(5, 0)], 40)
    info = _info()
    from mqctl.admin.elect import candidates_of

    cands = {x.broker_id: x for x in candidates_of(info)}
    caches = {1: a, 2: b, 4: c}
    # 1 under master 2: consistent point min(end of epoch 2 in 1 = 300, in 2 = 250) = 250
    assert truncate_bytes(cands[1], cands[2], caches) == (250, "epochCache")
    assert truncate_bytes(cands[2], cands[1], caches) == (0, "epochCache")
    # no common epoch: everything
    assert truncate_bytes(cands[1], cands[4], caches) == (500, "epochCache")
    caches[2] = EpochCacheView(error="down")
    assert truncate_bytes(cands[1], cands[2], caches)[1] == "maxOffset"


def _meta(addr: str, leader: bool, applied: int, h: str, quorum: bool = True) -> Metadata:
    peers = (
        Peer("r1", "g1", is_leader=True, is_self=leader, connected=True, match_index=applied),
        Peer(
            "r2",
            "g2",
            is_leader=False,
            is_self=not leader,
            connected=True,
            match_index=applied - 2,
            next_index=applied - 1,
        ),
    )
    return Metadata(
        group="mqctl",
        controller_leader_id="r1",
        controller_leader_address="g1",
        is_leader=leader,
        self_id="r1" if leader else "r2",
        peers=peers,
        term=2,
        commit_index=applied,
        last_applied=applied,
        has_quorum=quorum,
        state_hash=h,
        state="leader" if leader else "follower",
        address=addr,
    )


def test_quorum_doc_verdicts() -> None:
    ok = quorum_doc([NodeView("g1", _meta("g1", True, 10, "h")), NodeView("g2", _meta("g2", False, 10, "h"))])
    assert ok["healthy"] and ok["statesAgree"] is True and ok["leaderId"] == "r1"
    assert {p["raftAddress"]: p["lag"] for p in ok["peers"]} == {"r1": 0, "r2": 2}
    lead = NodeView("g1", _meta("g1", True, 10, "h"))
    bad = quorum_doc([lead, NodeView("g2", _meta("g2", False, 10, "x"))])
    assert not bad["healthy"] and bad["statesAgree"] is False and "differ" in bad["problems"][0]
    behind = quorum_doc([lead, NodeView("g2", _meta("g2", False, 8, "x"))])
    assert behind["healthy"] and behind["statesAgree"] is None and behind["nodes"][1]["lag"] == 2
    alone = NodeView("g1", _meta("g1", True, 10, "h", quorum=False))
    down = quorum_doc([alone, NodeView("g2", None, "refused")])
    assert not down["healthy"] and len(down["problems"]) == 2 and down["status"] == "unhealthy"
    follower = NodeView("g2", _meta("g2", False, 10, "h"))
    degraded = quorum_doc([lead, follower, NodeView("g3", None, "refused")])
    assert (
        not degraded["healthy"]
        and degraded["status"] == "degraded"
        and degraded["problems"] == ["g3: unreachable (refused)"]
    )
    assert ok["status"] == "healthy" and bad["status"] == "unhealthy"
    none = quorum_doc([NodeView("g2", None, "refused")])
    assert none["leaderId"] is None and none["nodes"][0]["state"] == "unreachable"


def test_yaml_is_pyyaml_and_reads_back_as_the_json_document() -> None:
    import yaml  # type: ignore[import-untyped,unused-ignore]

    doc = {
        "version": 1,
        "s": ["yes", "no", "1.5", "-3", "a b", "", "127.0.0.1:1", "plain", None, True, "~"],
        "e": {},
        "l": [],
        "n": [{"a": [{"b": 1}], "c": {"d": "x"}}],
        "ll": [[1], []],
        "nel": "a\x85b",
        "breaks": "l1\nl2\r\u2028\u2029",
        "u": "é 中文\ufeff",
        "t": (1, 2),
        3: "int key",
        "big": 2**70,
        "msg": "x" * 300,
    }
    text = to_yaml(doc)
    assert yaml.safe_load(text) == json.loads(to_json(doc))
    assert 'nel: "a\\Nb"' in text  # NEL escaped (the hand-written emitter wrote it raw)
    assert 'breaks: "l1\\nl2\\r\\L\\P"' in text and 'u: "é 中文\\uFEFF"' in text
    assert "- 'yes'" in text and "- '1.5'" in text and "- plain" in text and "e: {}" in text
    assert "'3': int key" in text and "t:\n- 1\n- 2" in text and "x" * 300 + "\n" in text + "\n"
    assert not text.endswith("\n") and text.startswith("version: 1\ns:\n- 'yes'\n")


def test_exit_codes_of_controller_errors() -> None:
    assert ControllerError(2104, "x").exit_code == 6
    assert ControllerError(2007, "x").exit_code == 6
    assert ControllerError(2008, "x").exit_code == 5
    assert ControllerError(2012, "x").exit_code == 3
    assert ControllerError(2103, "x").exit_code == 3


def test_epoch_end_offsets() -> None:
    two = [EpochEntry(1, 0), EpochEntry(2, 10)]
    assert EpochCacheView(entries=two, max_offset=30).ends() == [10, 30]
    assert EpochCacheView(entries=two).ends()[-1] == (1 << 63) - 1
    assert EpochCacheView(entries=[EpochEntry(1, 50)], max_offset=10).ends()[-1] == (1 << 63) - 1


def test_epoch_cache_answer_round_trip() -> None:
    """The answer the broker services send is what the admin commands and the agents read back."""
    cache = EpochCacheView("c", "b", 2, [EpochEntry(1, 0), EpochEntry(3, 40)], 90, problems=["p"])
    answer = cache.answer()
    assert answer["epoch_list"][-1] == {"epoch": 3, "start_offset": 40, "end_offset": 90}
    back = EpochCacheView.from_answer(answer, "127.0.0.1:10911")
    assert (back.cluster_name, back.broker_name, back.broker_id, back.entries, back.max_offset) == (
        "c",
        "b",
        2,
        cache.entries,
        90,
    )
    refused = EpochCacheView.from_answer(EpochCacheView(error="broker stopped").answer(), "127.0.0.1:10911")
    assert refused.error == "127.0.0.1:10911: code 1: broker stopped"


def test_epoch_service_answers_a_broken_store_with_code_1(tmp_path) -> None:
    from mqctl.admin.broker_epochs import fetch_epoch_cache
    from mqctl.broker.epoch_service import serve_epoch_cache

    (tmp_path / "epochFileCheckpoint").write_text("2\n5\n1-0\n")  # count 2, one entry, bad CRC
    server = serve_epoch_cache(tmp_path, "127.0.0.1:0")
    try:
        got = fetch_epoch_cache(f"127.0.0.1:{server.mqctl_port}", timeout=5)
        assert got.error is not None and "code 1" in got.error and "epochFileCheckpoint" in got.error
    finally:
        server.stop(None)
