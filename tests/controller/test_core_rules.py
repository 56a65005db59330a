"""RocketMQ rules of the pure core (reference sections 3.3 and 12)."""

from __future__ import annotations

from typing import Any

import pytest
from core_fixtures import ADDR, ALL, NOW, C, S, call, ctx, wire

from mqctl.controller.core import Context, ControllerState, LiveInfo, Result, decide
from mqctl.errors import Code


def add_broker(state: ControllerState, bid: int, c: Context | None = None) -> Result:
    r = call(state, "GetNextBrokerId", {"cluster_name": C, "broker_name": S})
    assert r.code == 0 and r.response["next_broker_id"] == bid
    r = call(
        state,
        "ApplyBrokerId",
        {
            "cluster_name": C,
            "broker_name": S,
            "applied_broker_id": bid,
            "register_check_code": f"{ADDR[bid]};1690000000000",
        },
    )
    assert r.code == 0, r.remark
    return call(
        state,
        "RegisterBroker",
        {"cluster_name": C, "broker_name": S, "broker_id": bid, "broker_address": ADDR[bid]},
        c,
    )


def elect(
    state: ControllerState, c: Context, broker_id: int | None = None, designate: bool = False, **extra: Any
) -> Result:
    req: dict[str, Any] = {"cluster_name": C, "broker_name": S, **extra}
    if broker_id is not None:
        req["broker_id"] = broker_id
    if designate:
        req["designate_elect"] = True
    return call(state, "ElectMaster", req, c)


def alter(
    state: ControllerState,
    c: Context,
    new_set: list[int],
    master: int,
    master_epoch: int,
    ss_epoch: int,
    **extra: Any,
) -> Result:
    return call(
        state,
        "AlterSyncStateSet",
        {
            "broker_name": S,
            "master_broker_id": master,
            "master_epoch": master_epoch,
            "new_sync_state_set": new_set,
            "sync_state_set_epoch": ss_epoch,
            **extra,
        },
        c,
    )


def replica_info(state: ControllerState) -> dict[str, Any]:
    r = call(state, "GetReplicaInfo", {"broker_name": S})
    assert r.code == 0
    return r.response


def fixture_m(**config: Any) -> ControllerState:
    st = ControllerState(config=config)
    for bid in (1, 2, 3):
        r = add_broker(st, bid)
        assert r.code == 0 and "master_broker_id" not in r.response
        data = call(st, "GetSyncStateData", {"broker_names": [S]}).response["replicas_info_table"][S]
        assert [x["broker_address"] for x in data["not_in_sync_replicas"]][-1] == ADDR[bid]
    assert elect(st, ALL, 1).code == 0
    assert elect(st, ALL, 2).code == Code.CONTROLLER_MASTER_STILL_EXIST
    assert elect(st, ALL, 3).code == Code.CONTROLLER_MASTER_STILL_EXIST
    r = alter(st, ALL, [1, 2, 3], 1, 1, 1)
    assert r.code == 0 and r.response["new_sync_state_set_epoch"] == 2
    return st


# ---------------------------------------------------------------- reference section 12, rows 1-21


def test_01_first_election_broker_trigger() -> None:
    st = ControllerState()
    add_broker(st, 1)
    r = elect(st, Context(NOW), 1)  # first time: no alive check
    assert r.code == 0 and r.remark == ""
    assert r.response["master_broker_id"] == 1
    assert r.response["master_address"] == ADDR[1]
    assert r.response["master_epoch"] == 1 and r.response["sync_state_set_epoch"] == 1
    assert r.response["sync_state_set"] == [1]
    assert r.response["broker_member_group"] == {"cluster": C, "broker_name": S, "broker_addrs": {1: ADDR[1]}}
    assert wire(r) == [
        {"type": "ElectMaster", "new_master_elected": True, "broker_name": S, "new_master_broker_id": 1}
    ]
    info = replica_info(st)
    assert info["master_broker_id"] == 1 and info["master_address"] == ADDR[1] and info["master_epoch"] == 1
    assert info["sync_state_set"] == {"sync_state_set": [1], "sync_state_set_epoch": 1}


def test_02_second_elect_is_master_still_exist() -> None:
    st = ControllerState()
    for b in (1, 2, 3):
        add_broker(st, b)
    elect(st, ALL, 1)
    before = st.state_hash()
    for b in (2, 3):
        r = elect(st, ALL, b)
        assert r.code == Code.CONTROLLER_MASTER_STILL_EXIST and wire(r) == []
        assert r.response == {
            "master_broker_id": 1,
            "master_address": ADDR[1],
            "master_epoch": 1,
            "sync_state_set_epoch": 1,
            "sync_state_set": [1],
        }
    assert st.state_hash() == before


def test_03_sync_state_data_after_m() -> None:
    st = fixture_m()
    r = call(st, "GetSyncStateData", {"broker_names": [S]}, ALL)
    d = r.response["replicas_info_table"][S]
    assert d["master_broker_id"] == 1 and d["master_epoch"] == 1 and d["sync_state_set_epoch"] == 2
    assert len(d["in_sync_replicas"]) == 3 and d["not_in_sync_replicas"] == []
    assert all(x["alive"] for x in d["in_sync_replicas"])
    assert d["cluster_name"] == C and d["master_address"] == ADDR[1]


def test_04_register_after_election_gets_master() -> None:
    st = ControllerState()
    add_broker(st, 1)
    add_broker(st, 2)
    assert elect(st, ALL, 1).code == 0
    r = add_broker(st, 3, ALL)
    assert r.code == 0 and r.response["master_broker_id"] == 1 and r.response["master_address"] == ADDR[1]
    assert r.response["master_epoch"] == 1 and r.response["sync_state_set_epoch"] == 1
    assert r.response["sync_state_set"] == {"sync_state_set": [1], "sync_state_set_epoch": 1}
    d = call(st, "GetSyncStateData", {"broker_names": [S]}, ALL).response["replicas_info_table"][S]
    assert d["master_epoch"] == 1 and d["sync_state_set_epoch"] == 1
    assert len(d["in_sync_replicas"]) == 1 and len(d["not_in_sync_replicas"]) == 2


def test_register_without_alive_master_has_no_master_fields() -> None:
    st = ControllerState()
    add_broker(st, 1)
    add_broker(st, 2)
    elect(st, ALL, 1)
    r = add_broker(st, 3, ctx(alive=(2, 3), dead=(1,)))
    assert "master_broker_id" not in r.response and "master_epoch" not in r.response
    assert r.response["sync_state_set"] == {"sync_state_set": [1], "sync_state_set_epoch": 1}


def test_05_only_3_alive_broker_trigger() -> None:
    st = fixture_m()
    r = elect(st, ctx(alive=(3,), dead=(1, 2)), 3)
    assert r.code == 0 and r.response["master_broker_id"] == 3 and r.response["master_address"] == ADDR[3]
    assert r.response["master_epoch"] == 2 and r.response["sync_state_set_epoch"] == 3
    d = call(st, "GetSyncStateData", {"broker_names": [S]}).response["replicas_info_table"][S]
    assert [x["broker_id"] for x in d["in_sync_replicas"]] == [3] and len(d["not_in_sync_replicas"]) == 2


def test_06_controller_trigger_all_alive_still_exist() -> None:
    st = fixture_m()
    c = ctx(alive=(1, 2, 3), info={1: (1, 1, 2**31 - 1), 2: (1, 2, 2**31 - 1), 3: (1, 3, 2**31 - 1)})
    assert elect(st, c).code == Code.CONTROLLER_MASTER_STILL_EXIST
    assert elect(st, c, -1).code == Code.CONTROLLER_MASTER_STILL_EXIST


@pytest.mark.parametrize(
    "info,winner",
    [
        ({2: (1, 2, 2**31 - 1), 3: (0, 3, 2**31 - 1)}, 2),  # 07 higher epoch wins
        ({2: (1, 2, 2**31 - 1), 3: (1, 3, 2**31 - 1)}, 3),  # 08 higher offset wins
        ({2: (1, 3, 2), 3: (1, 3, 1)}, 3),  # 09 lower priority value wins
    ],
)
def test_07_08_09_controller_trigger_policy(info: dict[int, tuple[int, int, int]], winner: int) -> None:
    st = fixture_m()
    r = elect(st, ctx(alive=(2, 3), dead=(1,), info=info))
    assert r.code == 0 and r.response["master_broker_id"] == winner
    assert r.response["master_address"] == ADDR[winner] and r.response["master_epoch"] == 2


def after_10() -> tuple[ControllerState, int]:
    st = fixture_m()
    r = elect(st, ctx(alive=(2, 3), dead=(1,)))
    assert r.code == 0 and r.response["master_broker_id"] != 1 and r.response["master_epoch"] == 2
    new = r.response["master_broker_id"]
    r = alter(st, ALL, [1, 2, 3], new, 2, 3)
    assert r.code == 0 and r.response["new_sync_state_set_epoch"] == 4
    assert replica_info(st)["sync_state_set"]["sync_state_set_epoch"] == 4
    return st, new


def test_10_controller_trigger_then_alter() -> None:
    after_10()


def test_11_admin_elect_dead_broker_no_fallback() -> None:
    st, new = after_10()
    other = ({2, 3} - {new}).pop()
    r = elect(st, ctx(alive=(2, 3), dead=(1,)), 1, designate=True)
    assert r.code == Code.CONTROLLER_ELECT_MASTER_FAILED and r.remark == "Failed to elect a new master"
    assert wire(r) == [] and r.response == {}
    assert other != new


def test_12_admin_elect_current_master() -> None:
    st, new = after_10()
    assert elect(st, ALL, new, designate=True).code == Code.CONTROLLER_MASTER_STILL_EXIST


def test_13_admin_elect_1_when_current_master_dead() -> None:
    st, new = after_10()
    alive = tuple(b for b in (1, 2, 3) if b != new)
    r = elect(st, ctx(alive=alive, dead=(new,)), 1, designate=True)
    assert r.code == 0 and r.response["master_broker_id"] == 1 and r.response["master_address"] == ADDR[1]
    assert r.response["master_epoch"] == 3


def after_14() -> ControllerState:
    st = fixture_m()
    assert alter(st, ALL, [1], 1, 1, 2).code == 0
    r = elect(st, ctx(alive=(2, 3), dead=(1,)))
    assert r.code == Code.CONTROLLER_MASTER_NOT_AVAILABLE
    assert r.remark == "Old master has down and failed to elect a new broker master"
    assert wire(r) == [
        {"type": "ElectMaster", "new_master_elected": False, "broker_name": S, "new_master_broker_id": None}
    ]
    info = replica_info(st)
    assert "master_broker_id" not in info and info["master_address"] == "" and info["master_epoch"] == 2
    assert info["sync_state_set"] == {"sync_state_set": [1], "sync_state_set_epoch": 3}
    return st


def test_14_controller_trigger_no_candidate() -> None:
    after_14()


def test_15_16_broker_trigger_after_no_master() -> None:
    st = after_14()
    r = elect(st, ctx(alive=(2, 3), dead=(1,)), 2)
    assert r.code == Code.CONTROLLER_ELECT_MASTER_FAILED and wire(r) == []
    assert "master_broker_id" not in r.response and "master_address" not in r.response
    r = elect(st, ALL, 1)
    assert r.code == 0 and r.response["master_broker_id"] == 1 and r.response["master_epoch"] == 3


def test_17_unclean_election() -> None:
    st = fixture_m(enableElectUncleanMaster=True)
    assert alter(st, ALL, [1], 1, 1, 2).code == 0
    r = elect(st, ctx(alive=(2, 3), dead=(1,)))
    assert r.code == 0 and r.response["master_broker_id"] in (2, 3) and r.response["master_epoch"] == 2
    assert replica_info(st)["sync_state_set"]["sync_state_set"] == [r.response["master_broker_id"]]


def test_18_clean_alive_id_refused() -> None:
    st = fixture_m()
    r = call(
        st,
        "CleanBrokerData",
        {"cluster_name": C, "broker_name": S, "broker_controller_ids_to_clean": "1"},
        ALL,
    )
    assert r.code == Code.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
    assert r.remark == f"Broker [{S},  1] is still alive, clean up failure"


def test_19_clean_whole_set_with_master_refused() -> None:
    st = fixture_m()
    r = call(st, "CleanBrokerData", {"cluster_name": C, "broker_name": S}, Context(NOW))
    assert r.code == Code.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
    assert r.remark == f"Broker {S} is still alive, clean up failure"


@pytest.mark.parametrize("ids", ["1", "1;2;3"])
def test_20_clean_dead_ids(ids: str) -> None:
    st = fixture_m()
    r = call(
        st,
        "CleanBrokerData",
        {"cluster_name": C, "broker_name": S, "broker_controller_ids_to_clean": ids},
        ctx(dead=(1, 2, 3)),
    )
    assert r.code == 0
    if ids == "1":
        view = st.broker_set_view(S)
        assert view is not None and view["broker_ids"] == [2, 3] and view["sync_state_set"] == [2, 3]
    else:
        assert st.broker_set_view(S) is None
        r = call(st, "GetReplicaInfo", {"broker_name": S})
        assert r.code == Code.CONTROLLER_BROKER_METADATA_NOT_EXIST


def test_21_clean_unknown_set_living() -> None:
    st = fixture_m()
    r = call(
        st,
        "CleanBrokerData",
        {
            "cluster_name": C,
            "broker_name": "broker12",
            "broker_controller_ids_to_clean": "1;2;3",
            "is_clean_living_broker": True,
        },
    )
    assert r.code == Code.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
    assert r.remark == "Broker broker12 is not existed,clean broker data failure."


# ---------------------------------------------------------------- more clean cases


def test_clean_living_removes_whole_set_without_parsing_ids() -> None:
    st = fixture_m()
    r = call(
        st,
        "CleanBrokerData",
        {"broker_name": S, "broker_controller_ids_to_clean": "x;y", "is_clean_living_broker": True},
        ALL,
    )
    assert r.code == 0 and wire(r) == [
        {"type": "CleanBrokerData", "broker_name": S, "broker_id_set_to_clean": None}
    ]
    assert st.broker_sets == {}
    assert call(st, "GetNextBrokerId", {"cluster_name": C, "broker_name": S}).response["next_broker_id"] == 1


def test_clean_bad_id_format() -> None:
    st = fixture_m()
    r = call(st, "CleanBrokerData", {"broker_name": S, "broker_controller_ids_to_clean": "1;x"})
    assert r.code == Code.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
    assert r.remark == (
        "Please set the option <brokerControllerIdsToClean> according to the format, "
        'exception: java.lang.NumberFormatException: For input string: "x"'
    )
    r = call(st, "CleanBrokerData", {"broker_name": S, "broker_controller_ids_to_clean": "1;;2"})
    assert r.code == Code.CONTROLLER_INVALID_CLEAN_BROKER_METADATA and 'string: ""' in r.remark
    r = call(st, "CleanBrokerData", {"broker_name": S, "broker_controller_ids_to_clean": "-1"})
    assert r.code == Code.CONTROLLER_INVALID_REQUEST


def test_clean_whole_set_without_master_ok_and_unknown_fails() -> None:
    st = ControllerState()
    add_broker(st, 1)
    assert call(st, "CleanBrokerData", {"broker_name": S}).code == 0
    assert st.broker_sets == {}
    r = call(st, "CleanBrokerData", {"broker_name": S})
    assert r.code == Code.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
    assert r.remark == f"Broker {S} is not existed,clean broker data failure."


def test_clean_id_of_set_with_empty_sync_state_set_drops_set() -> None:
    # RocketMQ drops the SyncStateInfo when its set becomes empty; the broker set then no longer exists.
    st = ControllerState()
    add_broker(st, 1)
    add_broker(st, 2)
    assert call(st, "CleanBrokerData", {"broker_name": S, "broker_controller_ids_to_clean": "2"}).code == 0
    assert st.broker_sets == {}


# ---------------------------------------------------------------- getNextBrokerId / applyBrokerId


def test_next_broker_id_and_apply_rules() -> None:
    st = ControllerState()
    r = call(st, "GetNextBrokerId", {"cluster_name": C, "broker_name": S})
    assert r.response == {"cluster_name": C, "broker_name": S, "next_broker_id": 1}
    r = call(
        st,
        "ApplyBrokerId",
        {"cluster_name": C, "broker_name": S, "applied_broker_id": 2, "register_check_code": "a:1;1"},
    )
    assert r.code == Code.CONTROLLER_BROKER_ID_INVALID
    assert r.remark == (
        f"Broker-set: {S} hasn't been registered in controller, but broker try to apply brokerId: 2"
    )
    req = {
        "cluster_name": C,
        "broker_name": S,
        "applied_broker_id": 1,
        "register_check_code": "127.0.0.1:30911;5",
    }
    r = call(st, "ApplyBrokerId", req)
    assert r.code == 0 and r.response == {"cluster_name": C, "broker_name": S}
    assert wire(r)[0]["broker_address"] == "127.0.0.1:30911"
    h = st.state_hash()
    r = call(st, "ApplyBrokerId", req)  # idempotent: same check code
    assert r.code == 0 and st.state_hash() == h
    r = call(st, "ApplyBrokerId", {**req, "register_check_code": "127.0.0.1:30912;6"})
    assert r.code == Code.CONTROLLER_BROKER_ID_INVALID
    assert r.remark == f"Fail to apply brokerId: 1 in broker-set: {S}"
    # nothing checks the id against nextAssignBrokerId; the counter is +1 per added broker
    r = call(st, "ApplyBrokerId", {**req, "applied_broker_id": 7, "register_check_code": "x;1"})
    assert r.code == 0
    assert call(st, "GetNextBrokerId", {"cluster_name": C, "broker_name": S}).response["next_broker_id"] == 3


def test_fifty_conflicting_apply_broker_id_exactly_one_wins() -> None:
    st = ControllerState()
    results = []
    for i in range(50):
        results.append(
            call(
                st,
                "ApplyBrokerId",
                {
                    "cluster_name": C,
                    "broker_name": S,
                    "applied_broker_id": 1,
                    "register_check_code": f"127.0.0.1:{30910 + i};{i}",
                },
            )
        )
    assert [r.code for r in results].count(0) == 1
    assert results[0].code == 0
    assert all(r.code == Code.CONTROLLER_BROKER_ID_INVALID for r in results[1:])
    view = st.broker_set_view(S)
    assert view is not None and view["brokers"][1]["address"] == "127.0.0.1:30910"
    assert view["next_assign_broker_id"] == 2


# ---------------------------------------------------------------- registerBroker


def test_register_unknown_set_and_id() -> None:
    st = ControllerState()
    r = call(
        st, "RegisterBroker", {"cluster_name": C, "broker_name": S, "broker_id": 1, "broker_address": "a"}
    )
    assert r.code == Code.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
    assert r.remark == f"Broker-set: {S} hasn't been registered in controller"
    add_broker(st, 1)
    r = call(
        st, "RegisterBroker", {"cluster_name": C, "broker_name": S, "broker_id": 5, "broker_address": "a"}
    )
    assert r.code == Code.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
    assert r.remark == f"BrokerId: 5 hasn't been registered in broker-set: {S}"


def test_register_address_update_event() -> None:
    st = ControllerState()
    add_broker(st, 1)
    r = call(
        st,
        "RegisterBroker",
        {"cluster_name": C, "broker_name": S, "broker_id": 1, "broker_address": "127.0.0.1:30919"},
    )
    assert r.code == 0
    assert wire(r)[0] == {
        "type": "UpdateBrokerAddress",
        "cluster_name": C,
        "broker_name": S,
        "broker_address": "127.0.0.1:30919",
        "broker_id": 1,
    }
    assert [e["type"] for e in wire(r)] == ["UpdateBrokerAddress", "RegisterBroker"]
    view = st.broker_set_view(S)
    assert view is not None and view["brokers"][1]["address"] == "127.0.0.1:30919"
    assert view["brokers"][1]["register_check_code"] == f"{ADDR[1]};1690000000000"


# ---------------------------------------------------------------- alterSyncStateSet check order


def test_alter_check_order() -> None:
    st = ControllerState()
    fail = Code.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED
    r = alter(st, ALL, [1], 1, 1, 1)
    assert r.code == fail and r.remark == "Broker metadata is not existed"
    for b in (1, 2, 3):
        add_broker(st, b)
    # no master yet, set differs: 2002 (RocketMQ 5.1.1 NPE)
    assert alter(st, ALL, [1], 1, 0, 0).code == Code.CONTROLLER_INVALID_MASTER
    elect(st, ALL, 1)
    # 2. equal set is checked before everything else
    r = alter(st, ALL, [1], 2, 9, 9)
    assert r.code == fail and "equal with oldSyncStateSet" in r.remark
    # RocketMQ's remarks byte for byte (ReplicasInfoManager.alterSyncStateSet: values in braces), and
    # its header: newSyncStateSetEpoch is an int, 0 in a refusal
    rejecting = "Rejecting alter syncStateSet request because "
    invalid_master, invalid_replicas = Code.CONTROLLER_INVALID_MASTER, Code.CONTROLLER_INVALID_REPLICAS
    not_alive = Code.CONTROLLER_BROKER_NOT_ALIVE
    # 3. wrong master
    r = alter(st, ALL, [1, 2], 2, 9, 9)
    assert (r.code, r.remark) == (invalid_master, rejecting + "the current leader is:{1}, not {2}")
    assert r.response == {"new_sync_state_set_epoch": 0}
    # 4. master epoch
    r = alter(st, ALL, [1, 2], 1, 2, 9)
    assert (r.code, r.remark) == (
        Code.CONTROLLER_FENCED_MASTER_EPOCH,
        rejecting + "the current master epoch is:{1}, not {2}",
    )
    # 5. ss epoch
    r = alter(st, ALL, [1, 2], 1, 1, 9)
    assert (r.code, r.remark) == (
        Code.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
        rejecting + "the current syncStateSet epoch is:{1}, not {9}",
    )
    # 6. unregistered (in sorted order, before a dead one with a larger id) / dead
    r = alter(st, ALL, [1, 9, 2], 1, 1, 1)
    assert (r.code, r.remark) == (invalid_replicas, rejecting + "the replicas {9} don't exist")
    r = alter(st, ctx(alive=(1,), dead=(2,)), [1, 2, 9], 1, 1, 1)
    assert (r.code, r.remark) == (not_alive, rejecting + "the replicas {2} don't alive")
    assert alter(st, ctx(alive=(1, 3)), [1, 2], 1, 1, 1).code == Code.CONTROLLER_BROKER_NOT_ALIVE
    # 7. master not contained
    r = alter(st, ALL, [2, 3], 1, 1, 1)
    assert (r.code, r.remark) == (fail, rejecting + "the newSyncStateSet don't contains origin leader {1}")
    # 8. success
    r = alter(st, ALL, [1, 3], 1, 1, 1)
    assert r.code == 0 and r.response == {
        "new_sync_state_set_epoch": 2,
        "sync_state_set": {"sync_state_set": [1, 3], "sync_state_set_epoch": 2},
    }
    assert wire(r) == [{"type": "AlterSyncStateSet", "broker_name": S, "new_sync_state_set": [1, 3]}]
    assert replica_info(st)["sync_state_set"] == {"sync_state_set": [1, 3], "sync_state_set_epoch": 2}


# ---------------------------------------------------------------- electMaster details


def test_elect_unknown_set() -> None:
    r = elect(ControllerState(), ALL, 1)
    assert r.code == Code.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
    assert r.remark == "Broker hasn't been registered"


def test_first_election_controller_trigger_uses_policy() -> None:
    st = ControllerState()
    add_broker(st, 1)
    add_broker(st, 2)
    # the SyncStateSet is empty before the first election and unclean is off: nothing to elect
    r = elect(st, ALL)
    assert r.code == Code.CONTROLLER_MASTER_NOT_AVAILABLE
    # mqctl: no ElectMaster(false) before the first master, so the brokers can still do the first election
    assert wire(r) == [] and replica_info(st)["master_epoch"] == 0
    assert elect(st, ALL, 2).response["master_broker_id"] == 2
    # with unclean election the controller trigger elects among all registered replicas
    st2 = ControllerState(config={"enableElectUncleanMaster": "true"})
    add_broker(st2, 1)
    add_broker(st2, 2)
    c = ctx(alive=(1, 2), info={1: (-1, 5, 9), 2: (-1, 7, 9)})
    assert elect(st2, c).response["master_broker_id"] == 2


def test_first_election_admin_designated_no_alive_check() -> None:
    st = ControllerState(config={"waitFor": "3"})
    add_broker(st, 1)
    add_broker(st, 2)
    r = elect(st, Context(NOW), 2, designate=True)  # admin behaves as RocketMQ even with waitFor
    assert r.code == 0 and r.response["master_broker_id"] == 2


def test_designate_requires_broker_id() -> None:
    st = fixture_m()
    assert elect(st, ALL, designate=True).code == Code.CONTROLLER_INVALID_REQUEST


def test_designated_with_unclean_picks_assigned_outside_set() -> None:
    st = fixture_m(enableElectUncleanMaster=True)
    alter(st, ALL, [1], 1, 1, 2)
    r = elect(st, ctx(alive=(2, 3), dead=(1,)), 3, designate=True)
    assert r.code == 0 and r.response["master_broker_id"] == 3


def test_broker_trigger_does_not_prefer_requester() -> None:
    st = fixture_m()
    c = ctx(alive=(2, 3), dead=(1,), info={2: (1, 10, 5), 3: (1, 5, 5)})
    r = elect(st, c, 3)
    assert r.code == 0 and r.response["master_broker_id"] == 2


# ---------------------------------------------------------------- reads


def test_get_replica_info_unknown() -> None:
    r = call(ControllerState(), "GetReplicaInfo", {"broker_name": S})
    assert r.code == Code.CONTROLLER_BROKER_METADATA_NOT_EXIST
    assert r.remark == "Broker metadata is not existed"


def test_get_sync_state_data_unknown_omitted_and_all() -> None:
    st = fixture_m()
    r = call(st, "GetSyncStateData", {"broker_names": ["nope", S]}, ALL)
    assert r.code == 0 and list(r.response["replicas_info_table"]) == [S]
    assert call(st, "GetSyncStateData", {"broker_names": ["nope"]}).response == {"replicas_info_table": {}}
    r = call(st, "GetSyncStateData", {}, ALL)
    assert list(r.response["replicas_info_table"]) == [S]
    assert list(call(st, "GetSyncStateData", {"broker_names": []}).response["replicas_info_table"]) == [S]


def test_get_sync_state_data_extension_fields() -> None:
    st = fixture_m()
    rows = {1: LiveInfo(1, ADDR[1], 7, 3, 100, 90, 4, NOW - 250, 10_000)}
    r = call(st, "GetSyncStateData", {"broker_names": [S]}, Context(NOW, {S: rows}))
    ins = r.response["replicas_info_table"][S]["in_sync_replicas"]
    one, two = ins[0], ins[1]
    assert one == {
        "broker_name": S,
        "broker_id": 1,
        "broker_address": ADDR[1],
        "alive": True,
        "broker_epoch": 1,
        "heartbeat_age_ms": 250,
        "epoch": 3,
        "max_offset": 100,
        "confirm_offset": 90,
        "election_priority": 4,
    }
    assert two == {
        "broker_name": S,
        "broker_id": 2,
        "broker_address": ADDR[2],
        "alive": False,
        "broker_epoch": 2,
    }


def test_unknown_method() -> None:
    r = decide(ControllerState(), "Nope", {}, Context(NOW))
    assert r.code == Code.REQUEST_CODE_NOT_SUPPORTED and r.remark == " request type Nope not supported"
    assert wire(r) == []


# ---------------------------------------------------------------- heartbeat (pure check)


def test_heartbeat_check() -> None:
    st = fixture_m()
    r = call(st, "Heartbeat", {"cluster_name": C, "broker_name": S, "broker_addr": ADDR[1]})
    assert r.code == Code.CONTROLLER_INVALID_REQUEST and r.remark == "Heart beat with empty brokerId"
    r = call(
        st,
        "Heartbeat",
        {
            "cluster_name": C,
            "broker_name": S,
            "broker_addr": ADDR[1],
            "broker_id": 1,
            "epoch": 1,
            "max_offset": 5,
        },
    )
    assert r.code == 0 and r.remark == "Heart beat success" and wire(r) == [] and r.response == {}
    # unknown broker sets are fine (RocketMQ does not check registration)
    assert call(st, "Heartbeat", {"broker_name": "other", "broker_id": 4}).code == 0


# ---------------------------------------------------------------- input validation (mqctl)


@pytest.mark.parametrize(
    "method,req,field",
    [
        ("GetNextBrokerId", {"cluster_name": C}, "broker_name"),
        ("GetNextBrokerId", {"cluster_name": C, "broker_name": "x" * 256}, "broker_name"),
        (
            "ApplyBrokerId",
            {"broker_name": S, "applied_broker_id": 1, "register_check_code": "a;1"},
            "cluster_name",
        ),
        (
            "ApplyBrokerId",
            {"cluster_name": C, "broker_name": S, "register_check_code": "a;1"},
            "applied_broker_id",
        ),
        (
            "ApplyBrokerId",
            {"cluster_name": C, "broker_name": S, "applied_broker_id": -2, "register_check_code": "a;1"},
            "applied_broker_id",
        ),
        (
            "ApplyBrokerId",
            {
                "cluster_name": C,
                "broker_name": S,
                "applied_broker_id": 2**53 + 1,
                "register_check_code": "a;1",
            },
            "applied_broker_id",
        ),
        (
            "ApplyBrokerId",
            {"cluster_name": C, "broker_name": S, "applied_broker_id": "1", "register_check_code": "a;1"},
            "applied_broker_id",
        ),
        (
            "ApplyBrokerId",
            {"cluster_name": C, "broker_name": S, "applied_broker_id": True, "register_check_code": "a;1"},
            "applied_broker_id",
        ),
        (
            "ApplyBrokerId",
            {"cluster_name": C, "broker_name": S, "applied_broker_id": 1},
            "register_check_code",
        ),
        ("RegisterBroker", {"cluster_name": C, "broker_name": S, "broker_id": 1}, "broker_address"),
        ("RegisterBroker", {"cluster_name": C, "broker_name": S, "broker_address": "a"}, "broker_id"),
        (
            "RegisterBroker",
            {"cluster_name": C, "broker_name": S, "broker_id": 1, "broker_address": "a", "options": {"k": 1}},
            "options",
        ),
        (
            "RegisterBroker",
            {"cluster_name": C, "broker_name": S, "broker_id": 1, "broker_address": "a", "epoch": 2**40},
            "epoch",
        ),
        ("Heartbeat", {"broker_id": 1}, "broker_name"),
        ("Heartbeat", {"broker_name": S, "broker_id": 1, "broker_epoch": -1}, "broker_epoch"),
        (
            "AlterSyncStateSet",
            {"broker_name": S, "master_epoch": 1, "sync_state_set_epoch": 1, "new_sync_state_set": [1]},
            "master_broker_id",
        ),
        (
            "AlterSyncStateSet",
            {"broker_name": S, "master_broker_id": 1, "sync_state_set_epoch": 1, "new_sync_state_set": [1]},
            "master_epoch",
        ),
        (
            "AlterSyncStateSet",
            {"broker_name": S, "master_broker_id": 1, "master_epoch": 1, "sync_state_set_epoch": 1},
            "new_sync_state_set",
        ),
        (
            "AlterSyncStateSet",
            {
                "broker_name": S,
                "master_broker_id": 1,
                "master_epoch": 1,
                "sync_state_set_epoch": 1,
                "new_sync_state_set": [1, -3],
            },
            "new_sync_state_set",
        ),
        ("ElectMaster", {"cluster_name": C}, "broker_name"),
        ("ElectMaster", {"broker_name": S, "broker_id": -2}, "broker_id"),
        ("ElectMaster", {"broker_name": S, "broker_id": 1, "designate_elect": "yes"}, "designate_elect"),
        ("GetReplicaInfo", {}, "broker_name"),
        ("GetSyncStateData", {"broker_names": "a"}, "broker_names"),
        ("CleanBrokerData", {"broker_controller_ids_to_clean": "1"}, "broker_name"),
    ],
)
def test_invalid_requests(method: str, req: dict[str, Any], field: str) -> None:
    st = fixture_m()
    r = call(st, method, req, ALL)
    assert r.code == Code.CONTROLLER_INVALID_REQUEST, (r.code, r.remark)
    assert field in r.remark and wire(r) == []


def test_non_mapping_request() -> None:
    r = decide(ControllerState(), "GetConfig", [], Context(NOW))  # type: ignore[arg-type]
    assert r.code == Code.CONTROLLER_INVALID_REQUEST
