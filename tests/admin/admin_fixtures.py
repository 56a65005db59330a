"""Fixtures for the admin command tests: the installed `mqctl` binary against real controllers.

Brokers are simulated with ControllerClient calls (register, heartbeat threads); each replica's
"broker service" is a real mqctl.v1.Broker server (mqctl.broker.epoch_service) over a store
directory built with mqctl.store.build, registered with the controller under its address.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import Beater, register_broker

from mqctl.client import ControllerClient
from mqctl.localgroup import LocalCluster, wait_until

CLUSTER = "cluster-a"
MQCTL = str(Path(sys.executable).with_name("mqctl"))


def run(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run the installed binary; colours off unless the test asks (not a terminal anyway)."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("MQCTL_")}
    full_env.update({"COLUMNS": "200", **(env or {})})
    return subprocess.run([MQCTL, *args], capture_output=True, text=True, timeout=timeout, env=full_env)


def register(client: ControllerClient, broker_name: str, address: str, **kw: Any) -> int:
    return register_broker(client, broker_name, address, CLUSTER, **kw)[0]


@dataclass
class World:
    """A controller group with broker-a (ids 1, 2 alive with broker services; 3 dead) and broker-b
    (id 1 alive, no broker service)."""

    cluster: LocalCluster
    client: ControllerClient
    beater: Beater
    stores: dict[int, Path]
    servers: list[Any] = field(default_factory=list)
    addrs: dict[int, str] = field(default_factory=dict)

    @property
    def leader_address(self) -> str:
        node = self.cluster.leader()
        assert node is not None
        return node.grpc_address

    @property
    def follower_address(self) -> str:
        leader = self.cluster.leader()
        return next(n.grpc_address for n in self.cluster.nodes if n is not leader and n.alive())


# broker-a: id 1 wrote epochs 1 and 2 (master), id 2 is 1000 bytes behind in epoch 2
HISTORY = {1: [(1, 0), (2, 4000)], 2: [(1, 0), (2, 4000)], 3: [(1, 0)]}
MAX_OFFSET = {1: 6000, 2: 5000, 3: 3000}


def build_world(base: Path, size: int, extra_args: list[str] | None = None) -> World:
    from mqctl.broker.epoch_service import serve_epoch_cache
    from mqctl.store.build import build_store

    cluster = LocalCluster(str(base / "ctl"), size=size, extra_args=extra_args or [])
    os.makedirs(cluster.base_dir, exist_ok=True)
    cluster.start()
    client = ControllerClient(cluster.addresses, token=_token(extra_args))
    beater = Beater(client)
    world = World(cluster, client, beater, {})
    try:
        for bid in (1, 2, 3):
            store = build_store(
                base / f"store{bid}",
                history=HISTORY[bid],
                max_offset=MAX_OFFSET[bid],
                cluster=CLUSTER,
                broker="broker-a",
                broker_id=bid,
                record_size=500,
            )
            world.stores[bid] = store
            server = serve_epoch_cache(store, "127.0.0.1:0")
            world.servers.append(server)
            world.addrs[bid] = f"127.0.0.1:{server.mqctl_port}"
        for bid in (1, 2, 3):
            got = register(
                client,
                "broker-a",
                world.addrs[bid],
                epoch=HISTORY[bid][-1][0],
                max_offset=MAX_OFFSET[bid],
                confirm_offset=5000,
                heartbeat_timeout_mills=1500,
            )
            assert got == bid
        for bid in (1, 2):
            beater.beat(
                "broker-a",
                bid,
                world.addrs[bid],
                epoch=HISTORY[bid][-1][0],
                max_offset=MAX_OFFSET[bid],
                confirm_offset=5000,
            )
        elected = client.elect_master(CLUSTER, "broker-a", 1)
        assert elected.master_broker_id == 1
        client.alter_sync_state_set(
            "broker-a", 1, elected.master_epoch or 1, [1, 2], elected.sync_state_set_epoch or 1
        )
        b1 = register(client, "broker-b", "127.0.0.1:1")
        beater.beat("broker-b", b1, "127.0.0.1:1", epoch=1, max_offset=100, confirm_offset=100)
        client.elect_master(CLUSTER, "broker-b", b1)

        def three_dead() -> bool:
            info = client.get_sync_state_data(["broker-a"]).replicas_info_table["broker-a"]
            alive = {r.broker_id: r.alive for r in (*info.in_sync_replicas, *info.not_in_sync_replicas)}
            return alive == {1: True, 2: True, 3: False}

        wait_until(three_dead, 15, what="broker-a ids 1, 2 alive and 3 dead")
    except BaseException:
        close_world(world)
        raise
    return world


def _token(extra_args: list[str] | None) -> str | None:
    args = extra_args or []
    return args[args.index("--token") + 1] if "--token" in args else None


def close_world(world: World) -> None:
    world.beater.stop()
    world.client.close()
    for s in world.servers:
        s.stop(None)
    world.cluster.stop()
