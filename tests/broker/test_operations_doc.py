"""docs/operations.md's maintenance window (pause, switchover, upgrade, resume) and its lost-controller
recovery (reseed) run as written (issue 14): the shell blocks are read from the document itself and run
with bash against a real three-node `mqctl serve` group (`$A`, `$T` as the document sets them) with
mqctl's broker agents as the replicas of broker-a and broker-b; then the group's data is lost and the
reseed block rebuilds it from the agents' live stores (the document's /data/... paths under a temporary
directory, its ports the first node's), and the agents, which never stopped, are followed again."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path

import pytest
from broker_fixtures import fast_config
from harness import with_default_sigint
from test_failover import one_master, put_all

from mqctl.broker.agent import BrokerAgent, Role
from mqctl.client import ControllerClient
from mqctl.localgroup import LocalCluster, metadata, wait_until, watch_log

pytestmark = pytest.mark.slow

DOC = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
BIN = str(Path(sys.executable).parent)
TOKEN = "maintenance-token"


def section(title: str) -> str:
    text = DOC.read_text()
    start = text.index(f"### {title}")
    end = text.find("\n### ", start + 1)
    return text[start:end]


def sh_blocks(text: str) -> list[str]:
    return [b for lang, b in re.findall(r"^ *```(\w*)\n(.*?)^ *```", text, re.S | re.M) if lang == "sh"]


def environment(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MQCTL_")}
    env.update(
        HOME=str(home),
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        COLUMNS="200",
        MQCTL_PARENT_PID=str(os.getpid()),
        **extra,
    )
    return env


def bash(block: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """A block as written (dedented), each command checked: the first failing one fails the block."""
    text = "\n".join(line.strip() for line in block.splitlines())
    return subprocess.run(
        ["bash", "-e", "-c", text], capture_output=True, text=True, env=env, timeout=timeout
    )


def heartbeat_offsets(client: ControllerClient, name: str) -> set[int | None]:
    info = client.get_sync_state_data([name]).replicas_info_table[name]
    return {r.max_offset for r in (*info.in_sync_replicas, *info.not_in_sync_replicas)}


def settled(agents: list[BrokerAgent], client: ControllerClient, name: str) -> bool:
    """Every replica has the same maxOffset, in the master's SyncStateSet, and the heartbeats say so."""
    master = one_master(agents)
    offsets = {a.max_offset for a in agents}
    return (
        master is not None
        and len(master.status().sync_state_set) == len(agents)
        and len(offsets) == 1
        and heartbeat_offsets(client, name) == offsets
    )


def test_maintenance_window_and_lost_controller_as_documented(tmp_path: Path) -> None:
    status, pause, switch, watch, back = sh_blocks(section("A maintenance window"))
    history_cmd = 'mqctl history -a "$A" -b broker-a --since 2h'
    assert f"`{history_cmd}`" in section("A maintenance window")
    data, home = tmp_path / "data", tmp_path / "home"
    home.mkdir()
    cluster = LocalCluster(str(tmp_path / "ctl"), size=3, extra_args=["--token", TOKEN])
    env = environment(home, A=cluster.addresses, T=TOKEN)
    agents: dict[str, BrokerAgent] = {}
    serve: subprocess.Popen[bytes] | None = None

    def agent(key: str) -> BrokerAgent:
        config = fast_config(data / key / "store", cluster.addresses, key.rsplit("-", 1)[0])
        agents[key] = BrokerAgent(replace(config, cluster_name="DefaultCluster")).start()
        return agents[key]

    try:
        cluster.start()
        client = ControllerClient(cluster.addresses, token=TOKEN, timeout=30)
        cluster.raise_feature_level(client, 3)
        agent("broker-a-0").wait_role(Role.MASTER, 30)  # broker 1, the preferred replica (lowest id)
        agent("broker-a-1")
        agent("broker-b-0").wait_role(Role.MASTER, 30)
        a = lambda: [agents["broker-a-0"], agents["broker-a-1"]]  # noqa: E731
        put_all(agents["broker-a-0"], 0, 20, {})
        wait_until(lambda: settled(a(), client, "broker-a"), 30, what="broker-a settled, SyncStateSet of 2")

        # 1-3: look, pause, move the master away from broker 1
        out = bash(status, env)
        assert out.returncode == 0 and "broker-a" in out.stdout, out.stdout + out.stderr
        out = bash(pause, env)
        assert out.returncode == 0 and "paused" in out.stdout, out.stderr
        out = bash(switch, env)
        assert out.returncode == 0, out.stdout + out.stderr
        wait_until(lambda: one_master(a()) is agents["broker-a-1"], 30, what="broker 2 master, 1 its slave")
        put_all(agents["broker-a-1"], 20, 10, {})

        # 4: upgrade broker 1 (stop, start on its store) while the document's watch runs
        agents["broker-a-0"].stop()
        watcher = subprocess.Popen(
            with_default_sigint(["bash", "-c", watch.strip()]),
            env={**env, "TTY_COMPATIBLE": "1"},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        threading.Timer(90, watcher.kill).start()  # a watch that never prints fails, never hangs
        agent("broker-a-0")
        wait_until(lambda: settled(a(), client, "broker-a"), 60, what="broker 1 back in the SyncStateSet")
        assert watcher.stdout is not None
        first = watcher.stdout.readline()  # it has shown the set once (rich redraws as on a terminal)
        watcher.send_signal(signal.SIGINT)
        shown, err = watcher.communicate(timeout=30)
        assert watcher.returncode == 0 and "broker-a" in first + shown, err

        # 5-6: resume, the master back to broker 1, and what the history says of it all
        out = bash(back, env)
        assert out.returncode == 0 and "move" in out.stdout, out.stdout + out.stderr
        wait_until(lambda: one_master(a()) is agents["broker-a-0"], 30, what="broker 1 master again")
        out = bash(history_cmd, env)
        assert out.returncode == 0, out.stderr
        for what in ("failover paused", "switchover", "registered", "failover resumed", "rebalance"):
            assert what in out.stdout, (what, out.stdout)
        entries = json.loads(bash(history_cmd + " -o json", env).stdout)["entries"]
        moves = [
            (e["cause"], e["election"]["newMasterBrokerId"], e["election"]["lossBytes"])
            for e in entries
            if e["what"] == "master elected" and e["cause"] in ("switchover", "rebalance")
        ]
        assert moves == [("switchover", 2, 0), ("rebalance", 1, 0)], moves
        epoch = client.get_replica_info("broker-a").master_epoch
        client.close()

        # the controller's data is lost; the brokers keep running with their stores
        for node in cluster.nodes:
            node.stop()
            shutil.rmtree(node.data_dir)
        (reseed,) = [b for b in sh_blocks(section("The controller's data is lost")) if "recover reseed" in b]
        node0 = cluster.nodes[0]
        text = (
            reseed.replace("/data/", f"{data}/")
            .replace("127.0.0.1:9878", node0.grpc_address)
            .replace("127.0.0.1:9880", node0.raft_address)
        )
        commands = [c.strip() for c in text.replace("\\\n", " ").splitlines() if c.strip()]
        assert [c.split()[1] for c in commands] == ["recover", "recover", "serve", "getSyncStateSet"]
        for command in commands[:2]:
            out = bash(command, env)
            assert out.returncode == 0, out.stdout + out.stderr
        log = tmp_path / "serve.log"
        log.touch()
        watch_log(str(log))
        with open(log, "ab") as sink:
            serve = subprocess.Popen(
                ["bash", "-c", "exec " + commands[2]], env=env, stdout=sink, stderr=subprocess.STDOUT
            )
        wait_until(lambda: metadata(node0.grpc_address).get("is_leader"), 30, what="the reseeded node leads")
        out = bash(commands[3], env)
        assert out.returncode == 0 and "broker-a" in out.stdout, out.stdout + out.stderr
        # the agents register again with the ids their stores hold and are elected at the next masterEpoch
        with ControllerClient(node0.grpc_address, timeout=30) as fresh:
            wait_until(
                lambda: fresh.get_replica_info("broker-a").master_broker_id is not None,
                30,
                what="broker-a elected again",
            )
            info = fresh.get_replica_info("broker-a")
            assert info.master_epoch == epoch + 1 and info.master_broker_id in (1, 2)
            wait_until(
                lambda: getattr(one_master(a()), "broker_id", None) == info.master_broker_id,
                30,
                what="the agents follow the reseeded controller",
            )
            wait_until(
                lambda: fresh.get_replica_info("broker-b").master_broker_id == 1,
                30,
                what="broker-b's one replica elected again",
            )
    finally:
        if serve is not None:
            serve.terminate()
            serve.wait(20)
        for ag in agents.values():
            ag.crash()
        cluster.stop()
