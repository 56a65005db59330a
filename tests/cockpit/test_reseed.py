"""`mqctl recover reseed`: a lost controller rebuilt from broker store directories (written by
mqctl.store.build, the stores' test fixture), shown as a plan, seeded, served: the brokers
re-register with their ids and the freshest is elected at the next masterEpoch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from harness import Beater

from mqctl.client import ControllerClient
from mqctl.localgroup import LocalCluster, wait_until
from mqctl.store.build import build_store

pytestmark = pytest.mark.slow

MQCTL = str(Path(sys.executable).with_name("mqctl"))
CLUSTER = "cluster-a"


def mqctl(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MQCTL_")}
    return subprocess.run(
        [MQCTL, *args], capture_output=True, text=True, timeout=60, env={**env, "COLUMNS": "200"}
    )


def _stores(base: Path) -> dict[tuple[str, int], Path]:
    specs = {
        ("broker-a", 1): ([(1, 0), (2, 5000)], 9000),  # the freshest of broker-a
        ("broker-a", 2): ([(1, 0), (2, 5000)], 8000),
        ("broker-a", 3): ([(1, 0)], 3000),
        ("broker-b", 1): ([(1, 0), (3, 100)], 200),
    }
    return {
        key: build_store(
            base / f"{key[0]}-{key[1]}",
            history=history,
            max_offset=max_offset,
            cluster=CLUSTER,
            broker=key[0],
            broker_id=key[1],
            record_size=100,
        )
        for key, (history, max_offset) in specs.items()
    }


def test_reseed_plan_seed_serve_elect(tmp_path: Path) -> None:
    stores = _stores(tmp_path / "stores")
    (tmp_path / "stores" / "empty").mkdir()
    args = [a for s in [*stores.values(), tmp_path / "stores" / "empty"] for a in ("--store", str(s))]
    cluster = LocalCluster(str(tmp_path / "ctl"), size=1)
    node = cluster.nodes[0]
    target = ["--data-dir", node.data_dir, "--raft", node.raft_address, "--group-id", "reseeded-1"]

    out = mqctl("recover", "reseed", *args, *target, "--dry-run", "-o", "json")
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    sets = {s["brokerName"]: s for s in plan["brokerSets"]}
    assert (sets["broker-a"]["masterEpoch"], sets["broker-a"]["masterCandidates"]) == (2, [1])
    assert sets["broker-a"]["nextBrokerId"] == 4
    assert (sets["broker-b"]["masterEpoch"], sets["broker-b"]["masterCandidates"]) == (3, [1])
    assert [u["store"] for u in plan["unmatched"]] == [str(tmp_path / "stores" / "empty")]
    assert plan["dryRun"] and not os.path.exists(node.data_dir)

    out = mqctl("recover", "reseed", *args, *target)
    assert out.returncode == 0, out.stderr
    assert "start it with: mqctl serve --raft" in out.stdout and "master candidates 1" in out.stdout
    cluster.start()
    try:
        with ControllerClient(cluster.addresses) as client:
            assert client.get_metadata().group_id == "reseeded-1"
            before = client.get_sync_state_data().replicas_info_table
            assert before["broker-a"].master_broker_id is None and before["broker-a"].master_epoch == 2
            assert {r.broker_id for r in before["broker-a"].in_sync_replicas} == {1}
            # the brokers come back with their store's identity: register (no new id) and beat
            beater = Beater(client)
            try:
                for (name, bid), _ in sorted(stores.items()):
                    address = f"127.0.0.1:{10910 + 10 * (name == 'broker-b') + bid}"
                    client.register_broker(CLUSTER, name, bid, address)
                    last_epoch = 3 if name == "broker-b" else (2 if bid < 3 else 1)
                    offset = {
                        ("broker-a", 1): 9000,
                        ("broker-a", 2): 8000,
                        ("broker-a", 3): 3000,
                        ("broker-b", 1): 200,
                    }[(name, bid)]
                    beater.beat(name, bid, address, epoch=last_epoch, max_offset=offset)

                def elected() -> bool:
                    a = client.get_replica_info("broker-a")
                    b = client.get_replica_info("broker-b")
                    got = (a.master_broker_id, a.master_epoch, b.master_broker_id, b.master_epoch)
                    return got == (1, 3, 1, 4)

                wait_until(elected, 30, what="the freshest replicas elected at the next masterEpoch")
                new_id = client.get_next_broker_id(CLUSTER, "broker-a").next_broker_id
                assert new_id == 4
            finally:
                beater.stop()
    finally:
        cluster.stop()
    # a second reseed keeps the first directory aside
    out = mqctl("recover", "reseed", *args, *target, "-o", "json")
    assert out.returncode == 0 and json.loads(out.stdout)["backup"]
    assert any(".backup-" in d for d in os.listdir(tmp_path / "ctl"))


def test_reseed_refuses_conflicts_and_damaged_stores(tmp_path: Path) -> None:
    stores = _stores(tmp_path / "stores")
    twin = build_store(
        tmp_path / "twin", history=[(1, 0)], max_offset=100, cluster=CLUSTER, broker="broker-a", broker_id=2
    )
    out = mqctl(
        "recover",
        "reseed",
        "--store",
        str(stores[("broker-a", 2)]),
        "--store",
        str(twin),
        "--data-dir",
        str(tmp_path / "d"),
    )
    assert out.returncode == 2 and "broker id 2 is in two stores" in out.stderr
    assert "Traceback" not in out.stderr and not (tmp_path / "d").exists()
    damaged = stores[("broker-a", 1)]
    (damaged / "brokerIdentity").write_bytes(b"\xff\xfe")
    out = mqctl("recover", "reseed", "--store", str(damaged), "--data-dir", str(tmp_path / "d"))
    assert out.returncode == 4 and "brokerIdentity" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "d").exists()
