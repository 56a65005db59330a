"""`mqctl recover guard` (issue 31) against a real `mqctl serve` group: brokers simulated by controller
calls, each replica's broker service a real mqctl.v1.Broker server over a store built by
mqctl.store.build (GET_BROKER_EPOCH_CACHE's answer). The installed binary runs as an operator would run
it; tests/e2e/test_rocketmq_guard.py does the same with RocketMQ's own brokers.

broker-a: id 1, the old master, wrote epochs 1 and 2 up to 6000; id 2 had copied 5000 bytes of epoch 2
and was elected (epoch 3, from 5000): RocketMQ's AutoSwitchHAClient would cut id 1 at 5000."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from harness import Beater, register_broker, tree_hash

from mqctl.client import ControllerClient
from mqctl.localgroup import LocalCluster, free_port, wait_until
from mqctl.store.build import build_store

MQCTL = str(Path(sys.executable).with_name("mqctl"))
CLUSTER = "cluster-a"
REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MQCTL_")}
    return subprocess.run([MQCTL, *args], capture_output=True, text=True, timeout=timeout, env=env)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from mqctl.broker.epoch_service import serve_epoch_cache

    base = tmp_path_factory.mktemp("guard")
    cluster = LocalCluster(str(base / "ctl"), size=1)
    cluster.start()
    client = ControllerClient(cluster.addresses)
    beater = Beater(client)
    servers = []
    try:
        new_master = build_store(
            base / "master",
            history=[(1, 0), (2, 4000), (3, 5000)],
            max_offset=5500,
            cluster=CLUSTER,
            broker="broker-a",
            broker_id=2,
            record_size=500,
        )
        server = serve_epoch_cache(new_master, "127.0.0.1:0")
        servers.append(server)
        addr = f"127.0.0.1:{server.mqctl_port}"
        bid, _ = register_broker(client, "broker-a", "127.0.0.1:1", CLUSTER)  # the old master, id 1
        bid2, _ = register_broker(client, "broker-a", addr, CLUSTER, epoch=3, max_offset=5500)
        assert (bid, bid2) == (1, 2)
        beater.beat("broker-a", 2, addr, epoch=3, max_offset=5500, confirm_offset=5500)
        wait_until(
            lambda: client.elect_master(CLUSTER, "broker-a", 2).master_broker_id == 2, 20, what="id 2 master"
        )
        yield {"base": base, "addr": cluster.addresses, "master": new_master, "master_addr": addr}
    finally:
        beater.stop()
        client.close()
        for s in servers:
            s.stop(None)
        cluster.stop()


def old_master(path: Path, *, max_offset: int = 6000, broker: str = "broker-a") -> Path:
    return build_store(
        path,
        history=[(1, 0), (2, 4000)],
        max_offset=max_offset,
        cluster=CLUSTER,
        broker=broker,
        broker_id=1,
        record_size=500,
        abort=True,
    )


def guard(world, store: Path, out: Path | None, *extra: str) -> subprocess.CompletedProcess[str]:
    args = ["recover", "guard", str(store), "-a", world["addr"], "-o", "json", *extra]
    if out is not None:
        args += ["--out", str(out)]
    return run(*args)


def test_saves_the_tail_once_and_never_touches_the_store(world, tmp_path: Path) -> None:
    import pyarrow.dataset as ds

    store = old_master(tmp_path / "old")
    out = tmp_path / "salvage"
    out.mkdir()
    before = tree_hash(store)
    p = guard(world, store, out, "--dry-run")
    assert p.returncode == 10, p.stderr
    doc = json.loads(p.stdout)
    assert (doc["outcome"], doc["consistentPoint"], doc["maxOffset"], doc["bytesToLose"]) == (
        "would-save",
        5000,
        6000,
        1000,
    )
    assert list(out.iterdir()) == []
    p = guard(world, store, out)
    assert p.returncode == 10, p.stderr
    doc = json.loads(p.stdout)
    assert doc["outcome"] == "saved" and doc["messages"] == 2, doc
    assert doc["master"]["brokerId"] == 2 and doc["master"]["maxOffset"] == 5500
    assert doc["replay"].startswith(f"mqctl recover replay {doc['salvage']}")
    (only,) = list(out.iterdir())
    assert str(only) == doc["salvage"] and not only.name.startswith(".")
    rows = ds.dataset(only / "messages", format="parquet", partitioning="hive").to_table().to_pylist()
    assert sorted(r["physicalOffset"] for r in rows) == [5000, 5500]
    assert {r["brokerName"] for r in rows} == {"broker-a"}
    meta = json.loads((only / "guard.json").read_text())
    assert meta["digest"] == doc["digest"] and meta["consistentPoint"] == 5000
    assert tree_hash(store) == before  # never modifies the store
    # a second run finds its own salvage by digest and does nothing
    listing = tree_hash(out)
    p = guard(world, store, out)
    assert p.returncode == 10, p.stderr
    assert json.loads(p.stdout)["outcome"] == "already-saved"
    assert tree_hash(out) == listing
    # a damaged salvage is not taken for a complete one: moved aside, saved again
    part = next((only / "messages").rglob("*.parquet"))
    part.write_bytes(part.read_bytes()[:-100])
    p = guard(world, store, out)
    assert p.returncode == 10, p.stderr
    d2 = json.loads(p.stdout)
    assert d2["outcome"] == "saved" and "damaged" in d2["reason"] and d2["digest"] == doc["digest"]
    assert len([x for x in out.iterdir() if ".damaged-" in x.name]) == 1
    assert tree_hash(store) == before


def test_nothing_to_lose(world, tmp_path: Path) -> None:
    # the new master itself: the controller names it, it starts as master
    p = guard(world, world["master"], None)
    assert p.returncode == 0, p.stderr
    assert "is the master" in json.loads(p.stdout)["reason"]
    # a replica that holds nothing past the consistent point
    store = old_master(tmp_path / "caught", max_offset=5000)
    p = guard(world, store, None)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["outcome"] == "nothing-to-lose" and doc["consistentPoint"] == 5000
    assert doc["decisionReadBytes"] <= 8
    # a store without epoch entries: RocketMQ skips the truncation
    empty = build_store(
        tmp_path / "noepochs", history=[], max_offset=1000, cluster=CLUSTER, broker="broker-a", broker_id=3
    )
    p = guard(world, empty, None)
    assert p.returncode == 0, p.stderr
    assert "skip truncate" in json.loads(p.stdout)["reason"]


def test_cannot_decide_refuses_unless_allowed(world, tmp_path: Path) -> None:
    store = old_master(tmp_path / "old")
    out = tmp_path / "salvage"
    out.mkdir()
    dead = f"127.0.0.1:{free_port()}"
    p = run("recover", "guard", str(store), "-a", dead, "--out", str(out), "--timeout", "2")
    assert p.returncode == 11, p.stdout + p.stderr
    assert p.stderr.count("\n") == 1 and "cannot decide" in p.stderr and "Traceback" not in p.stderr
    p = run(
        "recover", "guard", str(store), "-a", dead, "--out", str(out), "--timeout", "2", "--allow-unverified"
    )
    assert p.returncode == 13, p.stderr
    p = run(
        "recover",
        "guard",
        str(store),
        "-a",
        dead,
        "--out",
        str(out),
        "--timeout",
        "2",
        "--allow-unverified",
        "--gate",
    )
    assert p.returncode == 0, p.stderr
    assert list(out.iterdir()) == []
    # an unreadable store: both epoch files corrupt
    for name in ("epochFileCheckpoint", "epochFileCheckpoint.bak"):
        (store / name).write_text("2\n123\n1-0\n")
    p = guard(world, store, out)
    assert p.returncode == 11, p.stderr
    assert "store cannot be read" in p.stderr and p.stderr.count("\n") == 1
    # a store of another broker set than the one named
    other = old_master(tmp_path / "other", broker="broker-z")
    p = guard(world, other, out, "-b", "broker-a")
    assert p.returncode == 11 and "belongs to broker-z" in p.stderr, p.stderr
    # a set the controller does not know
    p = guard(world, other, out)
    assert p.returncode == 11 and "broker-z" in p.stderr, p.stderr
    assert list(out.iterdir()) == []


def _incompressible_tail(root: Path, tail: int) -> Path:
    """id 1 of broker-a: epochs 1 and 2, 5000 bytes shared with the master, then `tail` bytes of records
    with random bodies and keys in epoch 2 (Parquet cannot compress them, and holds the properties twice:
    decoded and raw, so the salvage is larger than the tail)."""
    from mqctl.store.commitlog import COMMITLOG_DIR, CommitLogWriter, Message
    from mqctl.store.epochfile import EpochEntry, write_epoch_file
    from mqctl.store.identity import BrokerIdentity, write_identity

    build_store(
        root,
        history=[(1, 0), (2, 4000)],
        max_offset=5000,
        cluster=CLUSTER,
        broker="broker-a",
        broker_id=1,
        record_size=500,
        file_size=64 << 20,
    )
    with CommitLogWriter(root / COMMITLOG_DIR, 64 << 20) as w:
        while w.offset < 5000 + tail:
            w.append(
                Message(
                    "T", os.urandom(100), {"UNIQ_KEY": os.urandom(8).hex(), "KEYS": os.urandom(150).hex()}
                )
            )
    write_identity(root, BrokerIdentity(CLUSTER, "broker-a", 1))
    write_epoch_file(root, [EpochEntry(1, 0), EpochEntry(2, 4000)])
    return root


def _tmpfs(path: Path, size: str):
    path.mkdir()
    p = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True, text=True
    )
    if p.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs (needs root): {p.stderr.strip()}")


def test_no_room_refuses_and_leaves_nothing(world, tmp_path: Path) -> None:
    out = tmp_path / "small"
    _tmpfs(out, "8m")
    try:
        big = _incompressible_tail(tmp_path / "big", 20 << 20)  # refused before writing
        p = guard(world, big, out)
        assert p.returncode == 12, p.stdout + p.stderr
        assert "no room" in p.stderr and p.stderr.count("\n") == 1
        assert list(out.iterdir()) == []
        # room by the estimate, not for the Parquet: the writer runs out of space half way
        mid = _incompressible_tail(tmp_path / "mid", (8 << 20) - (1 << 20) - (64 << 10))
        p = guard(world, mid, out)
        assert p.returncode == 12, p.stdout + p.stderr
        assert "no room for the" in p.stderr and "Traceback" not in p.stderr  # the writer's ENOSPC
        assert p.stderr.count("\n") == 1
        assert list(out.iterdir()) == []  # no partial salvage, no temp dir
    finally:
        subprocess.run(["umount", str(out)], check=False)


def _doc_block(lang_marker: str) -> str:
    text = (REPO / "docs" / "recovery.md").read_text()
    m = re.search(r"```" + lang_marker + r"\n(.*?)```", text, re.S)
    assert m, f"no ```{lang_marker} block in docs/recovery.md"
    return m.group(1)


def test_docs_examples_run_as_written(world, tmp_path: Path) -> None:
    """The ExecStartPre= line and the init container's command of docs/recovery.md, run as written with
    the example's paths and addresses replaced by this test's."""
    store = old_master(tmp_path / "old")
    out = tmp_path / "salvage"
    out.mkdir()
    unit = _doc_block("ini")
    (line,) = [ln for ln in unit.splitlines() if ln.startswith("ExecStartPre=")]
    argv = shlex.split(line.split("=", 1)[1])
    env = {k: v for k, v in os.environ.items() if not k.startswith("MQCTL_")}
    for ln in unit.splitlines():
        if ln.startswith("Environment="):
            k, v = ln.split("=", 1)[1].strip('"').split("=", 1)
            env[k] = v
    subst = {
        "/var/lib/rocketmq/store": str(store),
        "/var/lib/mqctl/salvage": str(out),
        "127.0.0.1:9878": world["addr"],
    }

    def fix(a: str) -> str:
        for k, v in subst.items():
            a = a.replace(k, v)
        return a

    env = {k: fix(v) for k, v in env.items()}
    assert Path(argv[0]).name == "mqctl"
    p = subprocess.run([MQCTL, *map(fix, argv[1:])], capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr  # --gate: saved lets the broker start
    assert len(list(out.iterdir())) == 1
    # the init container: its command and args, the same decision (already saved)
    pod = _doc_block("yaml")
    import yaml

    spec = yaml.safe_load(pod)
    (init,) = spec["spec"]["initContainers"]
    argv = [*init.get("command", []), *init.get("args", [])]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MQCTL_")}
    env.update({e["name"]: fix(str(e["value"])) for e in init.get("env", [])})
    assert Path(argv[0]).name == "mqctl"
    p = subprocess.run([MQCTL, *map(fix, argv[1:])], capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "already" in p.stdout
    assert len(list(out.iterdir())) == 1
