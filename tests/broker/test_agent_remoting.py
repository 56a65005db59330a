"""Issue 8's end-to-end proof: mqctl broker agents switched to RocketMQ's remoting protocol register,
heartbeat, get elected and fail over against `mqctl serve --remoting-port`; the CLI in remoting mode
reads the same state as over gRPC."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from broker_fixtures import start_agent
from test_failover import one_master

from mqctl.client import ControllerClient
from mqctl.localgroup import LocalCluster, free_port, wait_until

pytestmark = pytest.mark.slow

MQCTL = str(Path(sys.executable).with_name("mqctl"))


def sync_state(address: str, protocol: str) -> dict:
    out = subprocess.run(
        [MQCTL, "getSyncStateSet", "-a", address, "--protocol", protocol, "-b", "rm", "-o", "json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)["brokers"][0]
    keep = ("masterBrokerId", "masterAddress", "masterEpoch", "syncStateSetEpoch")
    replicas = doc["inSyncReplicas"] + doc["notInSyncReplicas"]
    return {k: doc[k] for k in keep} | {
        "in": sorted(r["brokerId"] for r in doc["inSyncReplicas"]),
        "alive": sorted(r["brokerId"] for r in replicas if r["alive"]),
    }


def test_agents_over_remoting_register_elect_and_fail_over(tmp_path) -> None:
    port = free_port()
    remoting = f"127.0.0.1:{port}"
    with LocalCluster(str(tmp_path / "ctl"), size=1, extra_args=["--remoting-port", str(port)]) as ctl:
        ctl.start()
        agents = [
            start_agent(
                tmp_path / f"b{i}",
                remoting,
                "rm",
                controller_protocol="remoting",
                all_ack_in_sync_state_set=True,
            )
            for i in range(3)
        ]
        try:
            master = wait_until(lambda: one_master(agents), 30, what="one master, two slaves")
            wait_until(lambda: len(master.status().sync_state_set) == 3, 20, what="SyncStateSet of 3")
            acked = {}
            for i in range(30):
                r = master.put(f"m{i}".encode() * 10)
                assert r.ok, r
                acked[r.offset] = f"m{i}".encode() * 10
            old_epoch = master.master_epoch
            master.crash()
            others = [a for a in agents if a is not master]
            new = wait_until(lambda: one_master(others), 30, what="a new master followed by the other")
            assert new.master_epoch > old_epoch
            final = {m.offset: m.body for m in new.messages()}
            assert all(final.get(o) == b for o, b in acked.items())
            grpc_addr = ctl.nodes[0].grpc_address
            wait_until(
                lambda: sync_state(grpc_addr, "grpc")["alive"] == sorted(a.broker_id for a in others),
                20,
                what="the controller to see the old master dead",
            )
            assert sync_state(remoting, "remoting") == sync_state(grpc_addr, "grpc")
            with ControllerClient(grpc_addr) as client:
                assert client.get_replica_info("rm").master_broker_id == new.broker_id
        finally:
            for a in agents:
                a.stop()
