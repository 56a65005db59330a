"""The whole runbook end to end: a real controller (mqctl serve via LocalCluster), brokers simulated by
processes that hold the store lock, register through ControllerClient and heartbeat, stores built with
mqctl.store.build. plan marks each step done as the stores and the controller show it."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness import Beater, register_broker, run_cli, tree_hash
from upgrade_fixtures import CLUSTER, LockHolder, SimBroker, file_bytes

from mqctl.client import ControllerClient
from mqctl.localgroup import LocalCluster, free_port
from mqctl.store.build import build_store
from mqctl.store.epochfile import EPOCH_FILE, read_epoch_file
from mqctl.store.identity import read_identity

NAME = "broker-a"
HISTORY = [(1, 0), (2, 3000), (3, 4500)]


def store_args(stores: list[Path]) -> list[str]:
    return [x for s in stores for x in ("--store", str(s))]


def plan(stores: list[Path], addr: str) -> dict:
    r = run_cli("upgrade", "plan", *store_args(stores), "-a", addr, "-o", "json")
    assert r.code == 0, r.err
    return r.json()


def status(doc: dict) -> dict[str, str]:
    return {s["id"]: s["status"] for s in doc["steps"]}


def check(stores: list[Path], addr: str) -> tuple[int, dict]:
    r = run_cli("upgrade", "check", *store_args(stores), "-a", addr, "-o", "json")
    return r.code, r.json()


@pytest.mark.slow
def test_full_runbook(tmp_path: Path) -> None:
    # --- before: an old controller whose data knows broker-a, two old (pre-5.1.1) brokers running
    master = build_store(tmp_path / "store-m", history=HISTORY, max_offset=7000, broker_id=None)
    slave = build_store(tmp_path / "store-s", history=HISTORY, max_offset=7000, broker_id=None)
    stores = [master, slave]
    cluster = LocalCluster(str(tmp_path / "ctl"), size=1)
    node = cluster.nodes[0]
    addr = cluster.addresses
    old_brokers = [LockHolder(master), LockHolder(slave)]
    try:
        cluster.start()
        with ControllerClient(addr) as c:
            beater = Beater(c, cluster_name=CLUSTER)
            for i in range(2):
                bid, _ = register_broker(c, NAME, f"127.0.0.1:{20911 + i}")
                beater.beat(NAME, bid, f"127.0.0.1:{20911 + i}")
            beater.stop()
        doc = plan(stores, addr)
        st = status(doc)
        assert doc["next"] == 1 and st["stop-controllers"] == "pending"
        assert "old data of cluster-a/broker-a" in doc["steps"][0]["evidence"]
        assert doc["brokerSets"][0]["master"] == str(master)
        code, chk = check(stores, addr)
        assert code == 7 and [c["status"] for c in chk["checks"] if c["check"] == "controller"] == ["FAIL"]

        # --- step 1: stop the old controllers; the data dir cannot be cleared while it runs
        r = run_cli("upgrade", "clear-controller-data", node.data_dir, "--yes")
        assert r.code == 2 and "a controller is running" in r.err
        cluster.stop()
        doc = plan(stores, addr)
        assert status(doc)["stop-controllers"] == "done" and doc["next"] == 2

        # --- step 2: clear the controller data (dry run first: nothing changes)
        before = tree_hash(Path(node.data_dir))
        assert run_cli("upgrade", "clear-controller-data", node.data_dir, "--dry-run").code == 0
        assert tree_hash(Path(node.data_dir)) == before
        r = run_cli(
            "upgrade",
            "clear-controller-data",
            node.data_dir,
            "--yes",
            "--backup-dir",
            str(tmp_path / "ctl-backup"),
        )
        assert r.code == 0, r.err
        assert sorted(p.name for p in Path(node.data_dir).iterdir()) == ["LOCK"]

        # --- step 3: start the new controllers (same node, cleared data)
        node.start()
        cluster.wait_for_leader()
        doc = plan(stores, addr)
        st = status(doc)
        controller_steps = ("stop-controllers", "clear-controller-data", "start-controllers")
        assert [st[k] for k in controller_steps] == ["done"] * 3
        assert doc["next"] == 4 and st["stop-slaves"] == "pending"

        # --- steps 4 and 5: slaves first, then the master
        code, chk = check(stores, addr)
        assert code == 7 and chk["phase"] == "stop-brokers"
        old_brokers[1].stop()
        assert plan(stores, addr)["next"] == 5
        old_brokers[0].stop()
        doc = plan(stores, addr)
        assert doc["next"] == 6
        code, chk = check(stores, addr)
        assert code == 0, [c for c in chk["checks"] if c["status"] == "FAIL"]

        # --- step 6: delete the epoch files (backup), twice is harmless
        before = {s: file_bytes(s) for s in stores}
        r = run_cli(
            "upgrade",
            "clear-epochs",
            "--store",
            str(master),
            "--store",
            str(slave),
            "--yes",
            "--backup-dir",
            str(tmp_path / "epoch-backup"),
        )
        assert r.code == 0, r.err
        assert not (master / EPOCH_FILE).exists() and not (slave / EPOCH_FILE).exists()
        assert run_cli("upgrade", "clear-epochs", *store_args(stores), "-y").code == 0
        doc = plan(stores, addr)
        assert status(doc)["clear-epochs"] == "done" and doc["next"] == 7

        # --- step 7: start the old master; step 8: wait until it is master
        m = SimBroker(master, addr, NAME, "127.0.0.1:30911", "master")
        try:
            assert read_identity(master) is not None and read_identity(master).broker_id == m.broker_id
            r = run_cli(
                "upgrade",
                "wait-master",
                "-a",
                addr,
                "-b",
                NAME,
                "--broker-id",
                str(m.broker_id),
                "--timeout",
                "30",
            )
            assert r.code == 0, r.err
            assert f"{NAME}: brokerId {m.broker_id} is master" in r.out
            assert "is master" in r.err  # the progress line went to stderr
            r = run_cli(
                "upgrade",
                "wait-master",
                "-a",
                addr,
                "-b",
                NAME,
                "--broker-id",
                str(m.broker_id),
                "--timeout",
                "30",
                "-o",
                "json",
            )
            assert r.code == 0 and (r.json()["brokerName"], r.json()["brokerId"]) == (NAME, m.broker_id)
            assert r.json()["masterAddress"] == "127.0.0.1:30911"
            entries = read_epoch_file(master).entries
            assert len(entries) == 1 and entries[0].start_offset == 7000  # a fresh history
            doc = plan(stores, addr)
            st = status(doc)
            assert st["start-master"] == "done" and st["wait-master"] == "done" and doc["next"] == 9
            assert f"--broker-id {m.broker_id}" in doc["steps"][7]["commands"][0]
            code, chk = check(stores, addr)
            assert code == 0, [c for c in chk["checks"] if c["status"] == "FAIL"]
            # a second broker id never becomes master: the documented timeout exit code
            r = run_cli(
                "upgrade", "wait-master", "-a", addr, "-b", NAME, "--broker-id", "99", "--timeout", "1"
            )
            assert r.code == 8 and "timed out after 1s" in r.err
            assert f"master is brokerId {m.broker_id}" in r.err

            # --- step 9: start the slaves
            s = SimBroker(slave, addr, NAME, "127.0.0.1:30912", "slave")
            try:
                assert s.broker_id != m.broker_id
                doc = plan(stores, addr)
                assert set(status(doc).values()) == {"done"} and doc["next"] is None
                code, chk = check(stores, addr)
                assert code == 0, [c for c in chk["checks"] if c["status"] == "FAIL"]
                # restoring the old epoch files now would clobber nothing silently: refused while running
                r = run_cli("upgrade", "restore", str(tmp_path / "epoch-backup"), "-y")
                assert r.code == 2 and "the broker is running" in r.err
            finally:
                s.stop()
        finally:
            m.stop()
        # the commitlogs were never touched
        after = {s: file_bytes(s) for s in stores}
        for s in stores:
            assert {k: v for k, v in after[s].items() if k.startswith("commitlog")} == {
                k: v for k, v in before[s].items() if k.startswith("commitlog")
            }
    finally:
        for h in old_brokers:
            h.stop()
        cluster.stop()


@pytest.mark.slow
def test_wait_master_times_out_without_a_controller(tmp_path: Path) -> None:
    port = free_port()
    r = run_cli(
        "upgrade",
        "wait-master",
        "-a",
        f"127.0.0.1:{port}",
        "-b",
        NAME,
        "--broker-id",
        "1",
        "--timeout",
        "1.5",
    )
    assert r.code == 8 and "controller unreachable" in r.err
    r = run_cli(
        "upgrade", "wait-master", "-a", f"127.0.0.1:{port}", "-b", NAME, "--broker-id", "1", "--timeout", "0"
    )
    assert r.code == 2 and "--timeout must be positive" in r.err
