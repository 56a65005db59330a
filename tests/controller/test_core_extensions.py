"""mqctl extensions of the core: broker epoch, bounced master, wait-for-N, options, config."""

from __future__ import annotations

from typing import Any

import pytest
from core_fixtures import ADDR, ALL, NOW, C, S, call, ctx, wire

from mqctl.controller.core import Context, ControllerState, Result, decide, default_config
from mqctl.controller.records import RecordError, decode
from mqctl.errors import Code


def apply_id(state: ControllerState, bid: int) -> None:
    r = call(
        state,
        "ApplyBrokerId",
        {
            "cluster_name": C,
            "broker_name": S,
            "applied_broker_id": bid,
            "register_check_code": f"{ADDR[bid]};1",
        },
    )
    assert r.code == 0


def register(state: ControllerState, bid: int, c: Context | None = None, **extra: Any) -> Result:
    return call(
        state,
        "RegisterBroker",
        {"cluster_name": C, "broker_name": S, "broker_id": bid, "broker_address": ADDR[bid], **extra},
        c,
    )


def elect(state: ControllerState, c: Context, broker_id: int | None = None, **extra: Any) -> Result:
    req: dict[str, Any] = {"cluster_name": C, "broker_name": S, **extra}
    if broker_id is not None:
        req["broker_id"] = broker_id
    return call(state, "ElectMaster", req, c)


def three(**config: Any) -> ControllerState:
    st = ControllerState(config=config)
    for b in (1, 2, 3):
        apply_id(st, b)
        assert register(st, b).code == 0
    return st


def m_fixture() -> ControllerState:
    st = three()
    assert elect(st, ALL, 1).code == 0
    r = call(
        st,
        "AlterSyncStateSet",
        {
            "broker_name": S,
            "master_broker_id": 1,
            "master_epoch": 1,
            "new_sync_state_set": [1, 2, 3],
            "sync_state_set_epoch": 1,
        },
        ALL,
    )
    assert r.code == 0
    return st


# ---------------------------------------------------------------- broker epoch (KIP-380)


def test_register_assigns_strictly_increasing_cluster_wide_broker_epoch() -> None:
    st = ControllerState()
    apply_id(st, 1)
    apply_id(st, 2)
    epochs = [register(st, b).response["broker_epoch"] for b in (1, 2, 1, 1, 2)]
    assert epochs == [1, 2, 3, 4, 5]
    r = register(st, 2)
    assert wire(r)[-1] == {
        "type": "RegisterBroker",
        "cluster_name": C,
        "broker_name": S,
        "broker_id": 2,
        "broker_epoch": 6,
    }
    view = st.broker_set_view(S)
    assert view is not None
    assert view["brokers"][1]["broker_epoch"] == 4 and view["brokers"][2]["broker_epoch"] == 6
    assert st.broker_epoch == 6
    # another broker set shares the counter
    call(
        st,
        "ApplyBrokerId",
        {"cluster_name": C, "broker_name": "b", "applied_broker_id": 1, "register_check_code": "x;1"},
    )
    r = call(
        st, "RegisterBroker", {"cluster_name": C, "broker_name": "b", "broker_id": 1, "broker_address": "x"}
    )
    assert r.response["broker_epoch"] == 7


def test_stale_broker_epoch_heartbeat() -> None:
    st = three()
    register(st, 1)  # broker 1 now has brokerEpoch 4
    hb = {"cluster_name": C, "broker_name": S, "broker_addr": ADDR[1], "broker_id": 1}
    r = call(st, "Heartbeat", {**hb, "broker_epoch": 1})
    assert r.code == Code.STALE_BROKER_EPOCH
    assert r.remark == f"Stale brokerEpoch 1 for broker 1 in broker-set {S}, registered brokerEpoch is 4"
    assert call(st, "Heartbeat", {**hb, "broker_epoch": 4}).code == 0
    assert call(st, "Heartbeat", {**hb, "broker_epoch": 5}).code == 0
    assert call(st, "Heartbeat", hb).code == 0  # absent: RocketMQ broker, no check


def test_stale_broker_epoch_alter_sync_state_set() -> None:
    st = three()
    elect(st, ALL, 1)
    req = {
        "broker_name": S,
        "master_broker_id": 1,
        "master_epoch": 1,
        "new_sync_state_set": [1, 2],
        "sync_state_set_epoch": 1,
    }
    r = call(st, "AlterSyncStateSet", {**req, "broker_epoch": 0}, ALL)
    assert r.code == Code.STALE_BROKER_EPOCH and "registered brokerEpoch is 1" in r.remark
    # the stale check runs after the master check (2002) and before the epoch checks (2000)
    assert (
        call(st, "AlterSyncStateSet", {**req, "master_broker_id": 2, "broker_epoch": 0}, ALL).code
        == Code.CONTROLLER_INVALID_MASTER
    )
    assert (
        call(st, "AlterSyncStateSet", {**req, "master_epoch": 7, "broker_epoch": 0}, ALL).code
        == Code.STALE_BROKER_EPOCH
    )
    assert call(st, "AlterSyncStateSet", {**req, "broker_epoch": 1}, ALL).code == 0


def test_stale_broker_epoch_broker_triggered_elect() -> None:
    st = three()
    r = elect(st, ALL, 2, broker_epoch=1)
    assert r.code == Code.STALE_BROKER_EPOCH and wire(r) == []
    assert "broker 2" in r.remark and "registered brokerEpoch is 2" in r.remark
    assert elect(st, ALL, 2, broker_epoch=2).code == 0
    # controller and admin triggers carry no brokerEpoch check
    assert elect(st, ALL, 2, designate_elect=True, broker_epoch=0).code == Code.CONTROLLER_MASTER_STILL_EXIST


# ---------------------------------------------------------------- bounced master


def test_bounced_master_loses_to_fresher_alive_member() -> None:
    st = m_fixture()
    c = ctx(alive=(1, 2, 3), info={1: (1, 500, 9), 2: (1, 480, 9), 3: (1, 400, 9)})
    # broker 1 restarts with an empty disk while its old heartbeat row is still alive
    r = register(st, 1, c, epoch=-1, max_offset=-1)
    assert r.code == 0
    assert [e["type"] for e in wire(r)] == ["RegisterBroker", "ElectMaster"]
    assert wire(r)[1] == {
        "type": "ElectMaster",
        "new_master_elected": True,
        "broker_name": S,
        "new_master_broker_id": 2,
    }
    assert r.response["master_broker_id"] == 2 and r.response["master_address"] == ADDR[2]
    assert r.response["master_epoch"] == 2 and r.response["sync_state_set_epoch"] == 3
    assert r.response["sync_state_set"] == {"sync_state_set": [2], "sync_state_set_epoch": 3}
    info = call(st, "GetReplicaInfo", {"broker_name": S}).response
    assert info["master_broker_id"] == 2 and info["master_epoch"] == 2
    assert info["sync_state_set"] == {"sync_state_set": [2], "sync_state_set_epoch": 3}


def test_bounced_master_with_most_data_keeps_role() -> None:
    st = m_fixture()
    c = ctx(alive=(1, 2, 3), info={1: (1, 500, 9), 2: (1, 480, 9), 3: (1, 400, 9)})
    r = register(st, 1, c, epoch=1, max_offset=510, election_priority=9)
    assert r.code == 0 and [e["type"] for e in wire(r)] == ["RegisterBroker"]
    assert r.response["master_broker_id"] == 1 and r.response["master_epoch"] == 1


def test_bounced_master_ignores_dead_and_not_in_sync_members() -> None:
    st = three()
    elect(st, ALL, 1)
    call(
        st,
        "AlterSyncStateSet",
        {
            "broker_name": S,
            "master_broker_id": 1,
            "master_epoch": 1,
            "new_sync_state_set": [1, 2],
            "sync_state_set_epoch": 1,
        },
        ALL,
    )
    c = ctx(alive=(1, 3), dead=(2,), info={2: (5, 999, 1), 3: (5, 999, 1)})
    r = register(st, 1, c)  # 2 is dead, 3 not in sync: 1 stays
    assert [e["type"] for e in wire(r)] == ["RegisterBroker"] and r.response["master_broker_id"] == 1


def test_register_of_master_with_expired_row_is_plain() -> None:
    st = m_fixture()
    r = register(st, 1, ctx(alive=(2, 3), dead=(1,), info={2: (9, 9, 9)}))
    assert [e["type"] for e in wire(r)] == ["RegisterBroker"]
    assert "master_broker_id" not in r.response


# ---------------------------------------------------------------- wait for N


def test_wait_for_n_then_freshest_wins_not_the_asker() -> None:
    st = three(waitFor="3")
    r = elect(st, ctx(alive=(1,), dead=(2, 3)), 1)
    assert r.code == Code.WAITING_FOR_REPLICAS and wire(r) == []
    assert r.remark == "waiting for 3 replicas (1/3)"
    r = elect(st, ctx(alive=(1, 2)), 1)
    assert r.remark == "waiting for 3 replicas (2/3)"
    c = ctx(alive=(1, 2, 3), info={1: (-1, 10, 9), 2: (-1, 30, 9), 3: (-1, 20, 9)})
    r = elect(st, c, 1)
    assert r.code == 0 and r.response["master_broker_id"] == 2 and r.response["master_epoch"] == 1
    # afterwards, ordinary rules
    assert elect(st, c, 1).code == Code.CONTROLLER_MASTER_STILL_EXIST


def test_wait_for_n_controller_trigger() -> None:
    st = three(waitFor="2")
    assert elect(st, ctx(alive=(3,))).code == Code.WAITING_FOR_REPLICAS
    r = elect(st, ctx(alive=(2, 3), info={2: (1, 5, 9), 3: (1, 5, 9)}))
    assert r.code == 0 and r.response["master_broker_id"] == 2  # tie: lower id


def test_wait_for_1_is_rocketmq_first_election() -> None:
    st = three()
    r = elect(st, Context(NOW), 3)  # nobody alive, not the freshest: RocketMQ takes the asker
    assert r.code == 0 and r.response["master_broker_id"] == 3


# ---------------------------------------------------------------- options consistency


def test_options_recorded_then_checked() -> None:
    st = ControllerState()
    for b in (1, 2, 3):
        apply_id(st, b)
    r = register(st, 1, options={"inSyncReplicas": "2", "allAckInSyncStateSet": "true"})
    assert r.code == 0 and wire(r)[-1] == {
        "type": "SetBrokerOptions",
        "broker_name": S,
        "options": {"allAckInSyncStateSet": "true", "inSyncReplicas": "2"},
    }
    assert register(st, 2, options={"inSyncReplicas": "2", "allAckInSyncStateSet": "true"}).code == 0
    assert register(st, 3).code == 0  # no options: no check
    r = register(st, 3, options={"inSyncReplicas": "1", "extra": "x"})
    assert r.code == Code.INCONSISTENT_BROKER_OPTIONS and wire(r) == []
    assert r.remark == (
        f"Broker options of broker 3 differ from broker-set {S}: "
        "allAckInSyncStateSet (broker-set: 'true', request: <absent>), "
        "extra (broker-set: <absent>, request: 'x'), "
        "inSyncReplicas (broker-set: '2', request: '1')"
    )
    # options are recorded once; the same registration does not re-record
    r = register(st, 2, options={"inSyncReplicas": "2", "allAckInSyncStateSet": "true"})
    assert [e["type"] for e in wire(r)] == ["RegisterBroker"]


# ---------------------------------------------------------------- config


def test_default_config_and_get() -> None:
    cfg = default_config()
    assert cfg == {
        "controllerType": "DLedger",
        "electMasterMaxRetryCount": "3",
        "enableElectUncleanMaster": "false",
        "heartbeatTimeoutMillis": "10000",
        "isProcessReadEvent": "false",
        "notifyBrokerRoleChanged": "true",
        "scanInactiveMasterInterval": "5000",
        "scanNotActiveBrokerInterval": "5000",
        "waitFor": "1",
    }
    assert default_config(waitFor=3, enableElectUncleanMaster=True)["waitFor"] == "3"
    with pytest.raises(ValueError):
        default_config(nope="1")
    with pytest.raises(ValueError):
        default_config(waitFor="zero")
    r = call(ControllerState(config={"waitFor": "2"}), "GetConfig", {})
    assert r.code == 0 and r.response["config"]["waitFor"] == "2"
    assert list(r.response["config"]) == sorted(r.response["config"])


def test_update_config() -> None:
    st = ControllerState()
    r = call(st, "UpdateConfig", {"config": {"enableElectUncleanMaster": "TRUE", "waitFor": " 2"}})
    assert r.code == 0 and wire(r) == [
        {"type": "UpdateConfig", "config": {"enableElectUncleanMaster": "true", "waitFor": "2"}}
    ]
    assert st.config["enableElectUncleanMaster"] == "true" and st.config["waitFor"] == "2"
    r = call(
        st, "UpdateConfig", {"config": {"scanNotActiveBrokerInterval": "300", "heartbeatTimeoutMillis": "+7"}}
    )
    assert wire(r) == [
        {
            "type": "UpdateConfig",
            "config": {"heartbeatTimeoutMillis": "7", "scanNotActiveBrokerInterval": "300"},
        }
    ]


def test_update_config_ignores_unknown_and_not_honoured_keys() -> None:
    """RocketMQ's Configuration.update merges only the keys it has and answers SUCCESS; mqctl also
    leaves alone the keys it does not honour. The answer names them for the node's log; no record
    ever carries them."""
    st = ControllerState()
    r = call(
        st,
        "UpdateConfig",
        {
            "config": {
                "noSuchKey": "1",
                "mappedFileSize": "x",
                "notifyBrokerRoleChanged": "false",
                "controllerType": "zk",
                "serverWorkerThreads": "1",
                "raftAddress": "1.2.3.4:5",
                "mqctlNotHonoured": "",
                "waitFor": "3",
            }
        },
    )
    assert (r.code, r.remark) == (Code.SUCCESS, "")
    assert wire(r) == [
        {"type": "UpdateConfig", "config": {"notifyBrokerRoleChanged": "false", "waitFor": "3"}}
    ]
    assert r.response == {
        "ignored_config": {
            "controllerType": "not honoured by mqctl",
            "mappedFileSize": "not honoured by mqctl",
            "mqctlNotHonoured": "read only",
            "noSuchKey": "unknown key",
            "raftAddress": "set when the node starts",
            "serverWorkerThreads": "not honoured by mqctl",
        }
    }
    only_ignored = call(st, "UpdateConfig", {"config": {"noSuchKey": "1"}})
    assert only_ignored.code == Code.SUCCESS and wire(only_ignored) == []
    assert call(st, "UpdateConfig", {"config": {}}).response == {}


def test_get_config_has_rocketmq_s_keys_and_names_what_is_not_honoured() -> None:
    from mqctl.controller import core

    cfg = call(ControllerState(), "GetConfig", {}).response["config"]
    assert cfg["mappedFileSize"] == "1073741824" and cfg["serverWorkerThreads"] == "8"
    assert cfg["configBlackList"] == "configBlackList;configStorePath"
    not_honoured = cfg.pop(core.NOT_HONOURED_KEY).split(";")
    assert not_honoured == sorted(not_honoured) and "mappedFileSize" in not_honoured
    assert "notifyBrokerRoleChanged" not in not_honoured  # honoured: false stops the 1008 pushes
    # every key is honoured (an update changes it), black-listed, or listed as not honoured
    keys = {*cfg, *core.NODE_CONFIG_KEYS}
    assert not_honoured == list(core.NOT_HONOURED_CONFIG_KEYS)
    assert keys - set(not_honoured) - core.CONFIG_BLACKLIST - core.HONOURED_CONFIG_KEYS == {
        "controllerGroup",
        "raftAddress",
        "raftPeers",
        "listenAddress",
        "remotingAddress",
    }
    assert set(cfg) >= core.HONOURED_CONFIG_KEYS and not core.HONOURED_CONFIG_KEYS & set(not_honoured)


@pytest.mark.parametrize("key", ["configBlackList", "configStorePath", "rocketmqHome"])
def test_update_config_blacklist(key: str) -> None:
    st = ControllerState()
    r = call(st, "UpdateConfig", {"config": {"waitFor": "2", key: "x"}})
    assert r.code == Code.NO_PERMISSION and wire(r) == []
    assert r.remark == "Can not update config in black list."
    assert st.config["waitFor"] == "1"


@pytest.mark.parametrize(
    "cfg,needle",
    [
        ({"enableElectUncleanMaster": "yes"}, "enableElectUncleanMaster"),
        ({"waitFor": "0"}, "waitFor"),
        ({"waitFor": "1.5"}, "waitFor"),
        ({"heartbeatTimeoutMillis": "99999999999999999999999"}, "heartbeatTimeoutMillis"),
        ({"scanNotActiveBrokerInterval": "-1", "noSuchKey": "1"}, "scanNotActiveBrokerInterval"),
        ({"waitFor": 2}, "waitFor"),
    ],
)
def test_update_config_invalid(cfg: dict[str, Any], needle: str) -> None:
    st = ControllerState()
    r = call(st, "UpdateConfig", {"config": cfg})
    assert r.code == Code.CONTROLLER_INVALID_REQUEST and needle in r.remark and wire(r) == []


def test_unclean_via_update_config_takes_effect() -> None:
    st = m_fixture()
    call(
        st,
        "AlterSyncStateSet",
        {
            "broker_name": S,
            "master_broker_id": 1,
            "master_epoch": 1,
            "new_sync_state_set": [1],
            "sync_state_set_epoch": 2,
        },
        ALL,
    )
    dead1 = ctx(alive=(2, 3), dead=(1,))
    assert decide(st, "ElectMaster", {"broker_name": S}, dead1).code == Code.CONTROLLER_MASTER_NOT_AVAILABLE
    call(st, "UpdateConfig", {"config": {"enableElectUncleanMaster": "true"}})
    assert elect(st, dead1).code == 0


# ---------------------------------------------------------------- meta


def test_set_meta_event() -> None:
    st = ControllerState()
    h = st.state_hash()
    st.apply(decode({"type": "SetMeta", "key": "group_id", "value": "abc"}))
    st.apply(decode({"type": "SetMeta", "key": "node/x", "value": {"grpc": "h:1"}}))
    assert st.meta == {"group_id": "abc", "node/x": {"grpc": "h:1"}}
    assert st.state_hash() != h
    assert ControllerState.from_dict(st.to_dict()).meta == st.meta
    st.apply(decode({"type": "SetMeta", "key": "group_id", "value": None}))
    assert st.meta == {"node/x": {"grpc": "h:1"}}
    with pytest.raises(RecordError):  # not JSON-safe: unreadable
        decode({"type": "SetMeta", "key": "bad", "value": {1, 2}})


def test_first_election_of_an_unregistered_id_is_refused() -> None:
    from mqctl.controller import core

    state = core.ControllerState()
    ctx = core.Context(now_ms=0)
    res = core.decide(
        state,
        "ApplyBrokerId",
        {
            "cluster_name": "c",
            "broker_name": "b",
            "applied_broker_id": 1,
            "register_check_code": "127.0.0.1:9000;1",
        },
        ctx,
    )
    for ev in wire(res):
        state.apply(decode(ev))
    res = core.decide(state, "ElectMaster", {"cluster_name": "c", "broker_name": "b", "broker_id": 7}, ctx)
    assert res.code == 2010 and "BrokerId: 7" in res.remark and wire(res) == []
    res = core.decide(state, "ElectMaster", {"cluster_name": "c", "broker_name": "b", "broker_id": 1}, ctx)
    assert res.code == 0 and res.response["master_address"] == "127.0.0.1:9000"


def test_needs_controller_election() -> None:
    from mqctl.controller import core

    def live(*ids: int, now: int = 10_000) -> core.Context:
        rows = {i: core.LiveInfo(broker_id=i, last_heartbeat_ms=now, timeout_ms=1000) for i in ids}
        return core.Context(now_ms=now, live={"b": rows})

    def state(wait_for: int = 1, unclean: bool = False) -> core.ControllerState:
        st = core.ControllerState(
            config={"waitFor": str(wait_for), "enableElectUncleanMaster": str(unclean).lower()}
        )
        for i in (1, 2, 3):
            r = core.decide(
                st,
                "ApplyBrokerId",
                {
                    "cluster_name": "c",
                    "broker_name": "b",
                    "applied_broker_id": i,
                    "register_check_code": f"h:{i};1",
                },
                live(),
            )
            for ev in wire(r):
                st.apply(decode(ev))
        return st

    st = state()
    assert not core.needs_controller_election(st, "nope", live(1))
    assert not core.needs_controller_election(st, "b", live())  # nobody alive
    assert not core.needs_controller_election(st, "b", live(1, 2))  # first election: brokers ask
    assert core.needs_controller_election(state(wait_for=2), "b", live(1, 2))
    assert not core.needs_controller_election(state(wait_for=3), "b", live(1, 2))
    for ev in wire(
        core.decide(st, "ElectMaster", {"cluster_name": "c", "broker_name": "b", "broker_id": 1}, live(1))
    ):
        st.apply(decode(ev))
    assert not core.needs_controller_election(st, "b", live(1, 2))  # master alive
    assert core.needs_controller_election(st, "b", live(2))  # master dead
    for ev in wire(
        core.decide(st, "ElectMaster", {"cluster_name": "c", "broker_name": "b", "broker_id": -1}, live())
    ):
        st.apply(decode(ev))  # master cleared, set {1}
    assert st.broker_sets["b"].master_broker_id is None
    assert not core.needs_controller_election(st, "b", live(2))  # only outside the set
    assert core.needs_controller_election(st, "b", live(1))
    st.apply(decode({"type": "UpdateConfig", "config": {"enableElectUncleanMaster": "true"}}))
    assert core.needs_controller_election(st, "b", live(2))
