"""mqctl.admin.health: each verdict rule on its own (the pure function the CLI, /health, the status
page and the metrics share; tests/cockpit/test_health_cmd.py runs them on real nodes)."""

from __future__ import annotations

from typing import Any

from mqctl.admin import health


def replica(
    bid: int,
    alive: bool = True,
    age: int | None = 100,
    epoch: int | None = 1,
    offset: int | None = 1000,
    address: str = "",
) -> dict[str, Any]:
    return {
        "broker_id": bid,
        "alive": alive,
        "heartbeat_age_ms": age,
        "epoch": epoch,
        "max_offset": offset,
        "broker_address": address or f"127.0.0.1:{10910 + bid}",
    }


def bset(
    master: int | None, in_sync: list[dict[str, Any]], out: list[dict[str, Any]] | None = None, epoch: int = 1
) -> dict[str, Any]:
    return {
        "master_broker_id": master,
        "master_epoch": epoch,
        "cluster_name": "c",
        "in_sync_replicas": in_sync,
        "not_in_sync_replicas": out or [],
    }


def verdict(info: dict[str, Any], lease: int = 10_000, max_lag: int = 1 << 20) -> tuple[str, list[str]]:
    check = health.broker_set_health("b", info, lease, max_lag)
    return check["verdict"], check["reasons"]


def test_ok() -> None:
    assert verdict(bset(1, [replica(1), replica(2)])) == ("OK", [])


def test_warn_rules() -> None:
    assert verdict(bset(1, [replica(1)], [replica(2)])) == (
        "WARN",
        ["WARN: SyncStateSet has 1 members but 2 replicas are alive (not in it: 2)"],
    )
    assert verdict(bset(1, [replica(1), replica(2, age=6000)]))[1] == [
        "WARN: the last heartbeat of broker 2 is 6.0 s old (lease 10 s)"
    ]
    assert verdict(bset(1, [replica(1), replica(2, age=5000)])) == ("OK", [])  # exactly half: not yet
    assert verdict(bset(1, [replica(1, offset=3 << 20), replica(2, offset=1 << 20)]))[1] == [
        f"WARN: replica 2 lags the master by {2 << 20} bytes (more than {1 << 20})"
    ]
    assert verdict(bset(1, [replica(1, offset=-1), replica(2, offset=0)])) == ("OK", [])  # unknown offsets
    assert verdict(bset(1, [replica(1)], [replica(2, alive=False, age=None)]))[1] == [
        "WARN: replica 2 is not alive"
    ]


def test_crit_rules_come_first() -> None:
    assert verdict(bset(None, [], [replica(1)]))[1][0] == "CRIT: no master"
    got = verdict(bset(1, [replica(1, alive=False, age=None), replica(2)]))
    assert got == ("CRIT", ["CRIT: master 1 is not alive"])
    got = verdict(bset(1, [replica(1), replica(2, epoch=3)], epoch=2))
    assert got[0] == "CRIT"
    assert got[1][0].startswith(
        "CRIT: replicas disagree on the master: broker 2 reports epoch 3, the controller's masterEpoch is 2"
    )


def meta(**kw: Any) -> dict[str, Any]:
    base = {
        "controller_leader_id": "127.0.0.1:9880",
        "is_leader": True,
        "has_quorum": True,
        "term": 3,
        "self_id": "127.0.0.1:9880",
        "problem": "",
        "peers": [
            {"raft_address": "127.0.0.1:9880", "is_self": True, "connected": True},
            {"raft_address": "127.0.0.1:9881", "is_self": False, "connected": True},
        ],
    }
    return {**base, **kw}


def test_controller_rules() -> None:
    assert health.controller_health(meta())["verdict"] == "OK"
    peers = [{"raft_address": "127.0.0.1:9881", "is_self": False, "connected": False}]
    assert health.controller_health(meta(peers=peers))["reasons"] == [
        "WARN: controller peer 127.0.0.1:9881 is unreachable"
    ]
    # a follower does not know whom the leader reaches
    assert health.controller_health(meta(is_leader=False, peers=peers))["verdict"] == "OK"
    assert health.controller_health(meta(controller_leader_id=""))["reasons"] == [
        "CRIT: no controller leader"
    ]
    assert health.controller_health(meta(has_quorum=False))["verdict"] == "CRIT"
    assert health.controller_health(None, "no controller node answered: x")["reasons"] == [
        "CRIT: no controller node answered: x"
    ]


def test_summary_names_the_worst() -> None:
    doc = health.health_doc(meta(), {"a": bset(1, [replica(1)]), "b": bset(None, [])}, 10_000)
    assert doc["verdict"] == "CRIT" and doc["summary"] == "CRIT: b: no master"
    doc = health.health_doc(meta(), {"a": bset(1, [replica(1)])}, 10_000)
    assert doc["summary"] == "OK: controller group and 1 broker set(s) healthy"
