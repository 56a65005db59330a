"""The last differences from RocketMQ's ReplicasInfoManager / DefaultElectPolicy found by comparing the
two with the same scripts (issue 35), each pinned as mqctl decides it. docs/controller-rules.md
("Deliberate differences from RocketMQ", 13 to 18) gives what RocketMQ answers and why mqctl differs."""

from __future__ import annotations

from typing import Any

import pytest
from test_core_rules import (
    ADDR,
    NOW,
    C,
    S,
    add_broker,
    alter,
    call,
    ctx,
    elect,
    fixture_m,
    replica_info,
    wire,
)

from mqctl.controller.core import Context, ControllerState, needs_controller_election
from mqctl.errors import Code

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
REJECTING = "Rejecting alter syncStateSet request because "


# ---------------------------------------------------------------- 13. AlterSyncStateSet: ascending order


@pytest.mark.parametrize("new_set", [[1, 2, 17], [17, 2, 1], [2, 17, 1]])
def test_alter_names_the_first_bad_replica_in_ascending_order(new_set: list[int]) -> None:
    """Ids 1 and 2 applied, 2 elected first, only 1 beats; master 2 asks for [1, 2, 17]. RocketMQ checks
    in HashSet order (1, 17, 2: 17 shares 1's bucket) and answers 2003 for 17; mqctl checks ascending,
    whatever order the request lists, and answers 2006 for 2."""
    st = ControllerState()
    add_broker(st, 1)
    add_broker(st, 2)
    assert elect(st, Context(NOW), 2).response["master_broker_id"] == 2
    r = alter(st, ctx(alive=(1,)), new_set, 2, 1, 1)
    assert r.code == Code.CONTROLLER_BROKER_NOT_ALIVE
    assert r.remark == REJECTING + "the replicas {2} don't alive"
    assert r.response == {"new_sync_state_set_epoch": 0} and wire(r) == []
    # with 2 alive, 17 is the first bad one
    r = alter(st, ctx(alive=(1, 2)), new_set, 2, 1, 1)
    assert r.code == Code.CONTROLLER_INVALID_REPLICAS
    assert r.remark == REJECTING + "the replicas {17} don't exist"


# ---------------------------------------------------------------- 14. the election key at the int32 limits


def _unclean_set_with_dead_master() -> ControllerState:
    """Ids 1, 2, 3; 3 was elected first and is dead, its SyncStateSet {3}; unclean election on."""
    st = ControllerState(config={"enableElectUncleanMaster": "true"})
    for bid in (1, 2, 3):
        add_broker(st, bid)
    assert elect(st, Context(NOW), 3).response["master_broker_id"] == 3
    return st


@pytest.mark.parametrize(
    "info,winner",
    [
        # electionPriority -2**31 against none (2**31-1): RocketMQ's `o1 - o2` overflows and elects 2
        ({1: (0, 100, INT32_MIN), 2: (0, 100, INT32_MAX)}, 1),
        # epoch -2**31 against 1: RocketMQ's `o2.epoch - o1.epoch` overflows and elects 1, the lower epoch
        ({1: (INT32_MIN, 100, INT32_MAX), 2: (1, 100, INT32_MAX)}, 2),
        # maxOffset gap of 3 * 2**30 (deliberate difference 1): RocketMQ's `(int)(o2 - o1)` overflows and
        # elects 2, the broker with less data
        ({1: (1, 3 * 2**30 + 100, INT32_MAX), 2: (1, 100, INT32_MAX)}, 1),
    ],
    ids=["priority", "epoch", "offset"],
)
def test_election_key_is_exact_at_the_int32_limits(
    info: dict[int, tuple[int, int, int]], winner: int
) -> None:
    st = _unclean_set_with_dead_master()
    r = elect(st, ctx(alive=(1, 2), dead=(3,), info=info), 2)  # broker 2 asks
    assert r.code == 0 and r.response["master_broker_id"] == winner
    assert replica_info(st)["master_broker_id"] == winner


# ---------------------------------------------------------------- 15. registration from a new address


def test_master_registering_from_a_new_address_is_answered_with_the_new_one() -> None:
    """RocketMQ answers from the state before its own UpdateBrokerAddressEvent is applied, so its
    masterAddress is the old one; mqctl's answer is the state after this registration, as every epoch
    in an answer is."""
    st = fixture_m()
    moved = "127.0.0.1:9100"
    rows = ctx(alive=(1, 2, 3), info={1: (1, 100, INT32_MAX), 2: (1, 100, INT32_MAX), 3: (1, 100, INT32_MAX)})
    r = call(
        st,
        "RegisterBroker",
        {
            "cluster_name": C,
            "broker_name": S,
            "broker_id": 1,
            "broker_address": moved,
            "epoch": 1,
            "max_offset": 100,
        },
        rows,
    )
    assert r.code == 0
    assert r.response["master_broker_id"] == 1 and r.response["master_address"] == moved
    assert [e["type"] for e in wire(r)] == ["UpdateBrokerAddress", "RegisterBroker"]
    assert replica_info(st)["master_address"] == moved
    # a slave that moves is not the master: the answer names the master's (unchanged) address
    r = call(
        st,
        "RegisterBroker",
        {"cluster_name": C, "broker_name": S, "broker_id": 2, "broker_address": "127.0.0.1:9101"},
        rows,
    )
    assert r.response["master_broker_id"] == 1 and r.response["master_address"] == moved


# ---------------------------------------------------------------- 16. a registerCheckCode without address


@pytest.mark.parametrize("code", [";;", ";", ";1690000000000", " ;1690000000000", "", "   "])
def test_register_check_code_without_address_is_refused(code: str) -> None:
    """RocketMQ: `;;` and `;` fail with SYSTEM_ERROR 1 (an ArrayIndexOutOfBoundsException: Java's split
    leaves no element 0), `;1` stores a broker with an empty address. mqctl refuses every one with 2005,
    before the broker set is looked at, so a new set, a new id and a retry of a known id are alike, and
    stores nothing."""
    st = ControllerState()
    # a new broker set
    r = call(
        st,
        "ApplyBrokerId",
        {"cluster_name": C, "broker_name": S, "applied_broker_id": 1, "register_check_code": code},
    )
    assert r.code == Code.CONTROLLER_INVALID_REQUEST and "register_check_code" in r.remark
    assert wire(r) == [] and st.broker_sets == {}
    add_broker(st, 1)
    before = st.state_hash()
    for bid in (1, 2):  # a retry for an existing id (RocketMQ: 1 for `;`), and a new id
        r = call(
            st,
            "ApplyBrokerId",
            {"cluster_name": C, "broker_name": S, "applied_broker_id": bid, "register_check_code": code},
        )
        assert r.code == Code.CONTROLLER_INVALID_REQUEST, (bid, r.code, r.remark)
        assert wire(r) == [] and st.state_hash() == before
    if code.strip():  # what the broker is told
        assert r.remark == (
            f"Invalid request: register_check_code {code!r} has no broker address before its "
            "first ';' (expected <brokerAddr>;<timestamp>)"
        )
    else:
        assert r.remark == "Invalid request: register_check_code is empty"


def test_register_check_code_with_address_and_no_timestamp_is_taken() -> None:
    """Only the address part must be there: RocketMQ takes `addr` or `addr;` too (split's element 0)."""
    st = ControllerState()
    for bid, code in ((1, "127.0.0.1:9000"), (2, "127.0.0.1:9001;")):
        r = call(
            st,
            "ApplyBrokerId",
            {"cluster_name": C, "broker_name": S, "applied_broker_id": bid, "register_check_code": code},
        )
        assert r.code == 0 and wire(r)[0]["broker_address"] == ADDR[bid]


# ---------------------------------------------------------------- 17. a master no longer registered


def _master_cleaned_while_dead() -> ControllerState:
    """Master 1 of SyncStateSet {1, 2, 3}: its lease ended and an admin cleaned its id before the
    controller elected (within RocketMQ's 5 s scan; in mqctl, which looks on every leader tick, while
    failover is paused)."""
    st = fixture_m()
    r = call(
        st,
        "CleanBrokerData",
        {"cluster_name": C, "broker_name": S, "broker_controller_ids_to_clean": "1"},
        ctx(alive=(2, 3), dead=(1,)),
    )
    assert r.code == 0
    info = replica_info(st)
    assert info["master_broker_id"] == 1 and info["sync_state_set"]["sync_state_set"] == [2, 3]
    assert info.get("master_address", "") == ""  # a master without an address: nobody can reach it
    return st


def test_a_cleaned_master_that_beats_again_is_replaced() -> None:
    """It beats again without registering. RocketMQ's scanNeedReelectBrokerSets finds nothing (the
    master is alive) and the set keeps a master without an address; mqctl elects, because the master is
    not a registered broker of the set."""
    st = _master_cleaned_while_dead()
    beats = ctx(alive=(1, 2, 3), info={2: (1, 100, INT32_MAX), 3: (1, 200, INT32_MAX)})
    assert needs_controller_election(st, S, beats)
    r = elect(st, beats)  # the controller's own trigger
    assert r.code == 0 and r.response["master_broker_id"] == 3
    assert r.response["master_address"] == ADDR[3]
    assert replica_info(st)["master_broker_id"] == 3


def test_a_cleaned_master_alone_is_not_elected() -> None:
    """Only the unregistered master beats: nothing registered is alive, so there is nothing to elect
    (and the master never comes back without applying for an id and registering)."""
    st = _master_cleaned_while_dead()
    only_old = ctx(alive=(1,), dead=(2, 3))
    assert not needs_controller_election(st, S, only_old)
    r = elect(st, only_old, 1)  # it asks itself: not in the SyncStateSet, not registered
    assert r.code == Code.CONTROLLER_ELECT_MASTER_FAILED


# ---------------------------------------------------------------- what RocketMQ only logs


def test_what_rocketmq_logs_and_mqctl_does_not() -> None:
    """A retried ApplyBrokerId with the same check code writes nothing (RocketMQ logs a no-op event);
    a CleanBrokerData without ids writes `broker_id_set_to_clean` null (RocketMQ's event: an empty
    set). Nothing in mqctl reads RocketMQ's event log, so neither is changed."""
    st = ControllerState()
    add_broker(st, 1)
    req: dict[str, Any] = {
        "cluster_name": C,
        "broker_name": S,
        "applied_broker_id": 1,
        "register_check_code": f"{ADDR[1]};1690000000000",
    }
    r = call(st, "ApplyBrokerId", req)
    assert r.code == 0 and wire(r) == []
    r = call(st, "CleanBrokerData", {"cluster_name": C, "broker_name": S}, Context(NOW, {S: {}}))
    assert r.code == 0 and wire(r) == [
        {"type": "CleanBrokerData", "broker_name": S, "broker_id_set_to_clean": None}
    ]
