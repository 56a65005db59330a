"""`mqctl health` (and --doctor) against a real three-node group: every verdict, its exit status
(0 OK, 1 WARN, 2 CRIT) and the worst verdict in the first line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from cockpit_fixtures import LEASE_ARGS, LEASE_MS, broker_set
from harness import Beater

from mqctl.client import ControllerClient
from mqctl.localgroup import LocalCluster, wait_until

pytestmark = pytest.mark.slow

MQCTL = str(Path(sys.executable).with_name("mqctl"))


def mqctl(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MQCTL_")}
    return subprocess.run(
        [MQCTL, *args], capture_output=True, text=True, timeout=60, env={**env, "COLUMNS": "200"}
    )


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    cluster = LocalCluster(str(tmp_path_factory.mktemp("health")), size=3, extra_args=LEASE_ARGS).start()
    client = ControllerClient(cluster.addresses)
    beater = Beater(client, lease_ms=LEASE_MS)
    try:
        sets = {
            "set-ok": broker_set(client, beater, "set-ok", alive=2),
            "set-dead-replica": broker_set(client, beater, "set-dead-replica", alive=1, dead=1),
            "set-lagging": broker_set(client, beater, "set-lagging", alive=2, max_offsets=[64 << 20, 1000]),
            "set-ahead": broker_set(client, beater, "set-ahead", alive=2, epochs=[1, 99]),
        }
        ok_address = sets["set-ok"][1]
        sets["set-conflict"] = broker_set(
            client, beater, "set-conflict", alive=0, dead=1, elect=False, addresses=[ok_address]
        )
        lone = broker_set(client, beater, "set-master-dead", alive=1)
        beater.silence("set-master-dead", 1)
        sets["set-master-dead"] = lone

        def master_gone() -> bool:
            info = client.get_sync_state_data(["set-master-dead"]).replicas_info_table["set-master-dead"]
            return not any(r.alive for r in info.in_sync_replicas + info.not_in_sync_replicas)

        wait_until(master_gone, 30, what="the lone master seen dead")
        yield {"cluster": cluster, "client": client, "sets": sets}
    finally:
        beater.stop()
        client.close()
        cluster.stop()


def _json(world: dict[str, Any], *args: str) -> tuple[int, dict[str, Any]]:
    out = mqctl("health", "-a", world["cluster"].addresses, "-o", "json", *args)
    return out.returncode, json.loads(out.stdout)


def _check(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in doc["checks"] if c["name"] == name)


def _expect(
    world: dict[str, Any], code: int, *args: str, reason: str = "", check: str = ""
) -> dict[str, Any]:
    """The document once `mqctl health ARGS` exits ``code`` (with ``reason`` among ``check``'s reasons):
    a heartbeat of the test's beater may come late on a loaded machine, so each verdict is waited for."""

    def got() -> dict[str, Any] | None:
        rc, doc = _json(world, *args)
        if rc != code or (reason and not any(reason in r for r in _check(doc, check)["reasons"])):
            return None
        return doc

    doc: dict[str, Any] = wait_until(got, 30, what=f"mqctl health {' '.join(args)} exiting {code} {reason}")
    return doc


def test_ok_exits_0(world: dict[str, Any]) -> None:
    doc = _expect(world, 0, "-b", "set-ok")
    assert doc["verdict"] == "OK" and [c["verdict"] for c in doc["checks"]] == ["OK", "OK"]
    assert _check(doc, "set-ok")["syncStateSet"] == [1, 2]
    addresses = world["cluster"].addresses
    out = wait_until(
        lambda: (o := mqctl("health", "-a", addresses, "-b", "set-ok")).returncode == 0 and o,
        30,
        what="mqctl health -b set-ok exiting 0",
    )
    assert out.stdout.splitlines()[0].startswith("OK: controller group and 1 broker")


@pytest.mark.parametrize(
    "name, reason",
    [
        ("set-dead-replica", "replica 2 is not alive"),
        ("set-lagging", "replica 2 lags the master by 67107864 bytes"),
    ],
)
def test_warn_exits_1(world: dict[str, Any], name: str, reason: str) -> None:
    doc = _expect(world, 1, "-b", name, reason=reason, check=name)
    assert doc["verdict"] == "WARN"
    # the table form too, waited for as the document was (a late heartbeat of the test's beater)
    addresses = world["cluster"].addresses
    out = wait_until(
        lambda: (o := mqctl("health", "-a", addresses, "-b", name)).returncode == 1 and o,
        30,
        what=f"mqctl health -b {name} exiting 1",
    )
    assert out.stdout.splitlines()[0].startswith(f"WARN: {name}: ")


@pytest.mark.parametrize(
    "name, reason",
    [
        ("set-ahead", "replicas disagree on the master: broker 2 reports epoch 99"),
        ("set-master-dead", "not alive"),
    ],
)
def test_crit_exits_2(world: dict[str, Any], name: str, reason: str) -> None:
    doc = _expect(world, 2, "-b", name, reason=reason, check=name)
    assert doc["verdict"] == "CRIT"
    out = mqctl("health", "-a", world["cluster"].addresses, "-b", name, "-o", "yaml")
    assert out.returncode == 2 and yaml.safe_load(out.stdout)["summary"].startswith(f"CRIT: {name}")


def test_the_whole_cluster_is_its_worst_set(world: dict[str, Any]) -> None:
    code, doc = _json(world, "-c", "cluster-a")
    assert code == 2 and doc["summary"].startswith("CRIT: ")
    assert {c["name"] for c in doc["checks"]} == {"controller", *world["sets"]}
    assert mqctl("health", "-a", world["cluster"].addresses, "-c", "no-such-cluster").returncode == 5
    out = mqctl("health", "-a", world["cluster"].addresses, "-b", "x", "-c", "y")
    assert out.returncode == 2 and "not both" in out.stderr and "Traceback" not in out.stderr


def test_doctor(world: dict[str, Any]) -> None:
    def complete() -> dict[str, Any] | None:  # every finding this module's broker sets should show
        code, doc = _json(world, "--doctor")
        names = {f["brokerName"] for f in doc.get("findings", [])}
        wanted = {"set-dead-replica", "set-ahead", "set-master-dead", "set-conflict"}
        return doc if code == 2 and wanted <= names and "set-lagging" not in names else None

    doc = wait_until(complete, 30, what="the doctor's findings")
    never = next(f for f in doc["findings"] if f["brokerName"] == "set-dead-replica")
    assert "no heartbeat from it" in never["finding"]
    assert "cleanBrokerMetadata" in never["fix"] and "-b 2" in never["fix"]
    ahead = next(f for f in doc["findings"] if f["brokerName"] == "set-ahead")
    assert "epoch 99, ahead of the controller's masterEpoch" in ahead["finding"]
    assert "recover reseed" in ahead["fix"]
    ok_address = world["sets"]["set-ok"][1]
    conflict = next(f for f in doc["findings"] if f"address {ok_address}" in f["finding"])
    assert "set-ok broker 1" in conflict["finding"] and "set-conflict broker 1" in conflict["finding"]
    assert "-bn set-conflict -b 1" in conflict["fix"]  # the one that is not alive
    dead_master = [f["finding"] for f in doc["findings"] if f["brokerName"] == "set-master-dead"]
    assert any(
        f.startswith(("no master and no replica alive", "master 1 is not alive and no other"))
        for f in dead_master
    ), dead_master
    assert [f for f in doc["findings"] if f["brokerName"] in ("set-ok", "set-lagging")] == []
    rows = {(r["brokerName"], r["brokerId"]): r for r in doc["replicas"]}
    assert rows[("set-lagging", 2)]["lagBytes"] == (64 << 20) - 1000
    ahead_row = rows[("set-ahead", 2)]
    assert (ahead_row["reportedEpoch"], ahead_row["controllerRole"]) == (99, "slave")
    table = mqctl("health", "-a", world["cluster"].addresses, "--doctor")
    assert "controller vs heartbeats" in table.stdout and "fix: " in table.stdout


def test_controller_verdicts(world: dict[str, Any]) -> None:
    """Last in this module: stops two of the three nodes."""
    cluster: LocalCluster = world["cluster"]
    leader = cluster.wait_for_leader()
    followers = [n for n in cluster.nodes if n is not leader]
    followers[0].stop()

    def peer_warned() -> dict[str, Any] | None:
        code, doc = _json(world, "-b", "set-ok")
        return doc if code == 1 else None

    doc = wait_until(peer_warned, 30, what="WARN for an unreachable controller peer")
    reasons = _check(doc, "controller")["reasons"]
    assert any(followers[0].raft_address in r and "unreachable" in r for r in reasons), reasons
    followers[1].stop()

    # CRIT for the lost quorum, said by the node that still answers; under load (14 on two cores)
    # that node missed a 3 s deadline every time, also CRIT but "no controller node answered", so
    # the command gets 10 s and the verdict naming the quorum is waited for
    def crit() -> dict[str, Any] | None:
        code, doc = _json(world, "-b", "set-ok", "--timeout", "10")
        reasons = doc["checks"][0]["reasons"] if code == 2 else []
        return doc if any("leader" in r or "quorum" in r for r in reasons) else None

    doc = wait_until(crit, 60, what="CRIT without a controller quorum")
    assert doc["checks"][0]["verdict"] == "CRIT"
