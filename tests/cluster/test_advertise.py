"""Nodes reached only through a TCP proxy: `--advertise` (gRPC) and `--advertise-remoting` (issue 20).

Every node of a 3-node group listens for gRPC and remoting on ports of its own and publishes the
proxy's addresses in front of them. A client given one follower's proxied gRPC address, and a
broker (RocketMQ's remoting protocol) given one follower's proxied remoting address, find the
leader at its published address, through the proxy, and their writes succeed; the addresses the
nodes listen on appear nowhere in what a node publishes. (`--raft-bind` through a proxy:
tests/raft/test_partition.py.)
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import Counter
from pathlib import Path

import pytest

from mqctl.client import ControllerClient
from mqctl.localgroup import LocalCluster, free_port, metadata, wait_until
from mqctl.remoting.client import RemotingControllerClient

pytestmark = pytest.mark.slow

CLUSTER = "advertise-cluster"


class Forwarder:
    """A TCP proxy: each key of `routes` (where it listens) forwards to its value; counts the
    connections it forwarded per listening address."""

    def __init__(self, routes: dict[str, str]) -> None:
        self.routes = routes
        self.connections: Counter[str] = Counter()
        self._loop = asyncio.new_event_loop()
        self._servers: list[asyncio.base_events.Server] = []
        self._thread = threading.Thread(target=self._loop.run_forever, name="forwarder", daemon=True)

    def __enter__(self) -> Forwarder:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    async def _start(self) -> None:
        for listen, target in self.routes.items():
            host, port = listen.rsplit(":", 1)
            self._servers.append(
                await asyncio.start_server(
                    lambda r, w, at=listen, to=target: self._forward(r, w, at, to), host, int(port)
                )
            )

    async def _stop(self) -> None:
        for server in self._servers:
            server.close()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _forward(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, at: str, target: str
    ) -> None:
        self.connections[at] += 1
        host, port = target.rsplit(":", 1)
        try:
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
        except OSError:
            writer.close()
            return
        await asyncio.gather(self._pump(reader, up_writer), self._pump(up_reader, writer))

    @staticmethod
    async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.CancelledError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()


def test_clients_and_brokers_reach_the_nodes_at_their_advertised_addresses(tmp_path: Path) -> None:
    cluster = LocalCluster(str(tmp_path), size=3)
    grpc_of: dict[str, str] = {}  # node name -> the gRPC address it publishes (the proxy's)
    remoting_of: dict[str, str] = {}  # ... its remoting address
    routes: dict[str, str] = {}
    listening: list[str] = []
    for node in cluster.nodes:
        grpc_of[node.name] = f"127.0.0.1:{free_port()}"
        remoting_port = free_port()
        remoting_of[node.name] = f"127.0.0.1:{free_port()}"
        node.args += [
            "--advertise",
            grpc_of[node.name],
            "--remoting-port",
            str(remoting_port),
            "--advertise-remoting",
            remoting_of[node.name],
        ]
        routes[grpc_of[node.name]] = node.grpc_address
        routes[remoting_of[node.name]] = f"127.0.0.1:{remoting_port}"
        listening += [node.grpc_address, f"127.0.0.1:{remoting_port}"]
    with Forwarder(routes) as proxy, cluster:
        cluster.start()
        leader = cluster.wait_for_leader(60)
        follower = next(n for n in cluster.nodes if n is not leader)
        expected = {n.raft_address: grpc_of[n.name] for n in cluster.nodes}
        for node in cluster.nodes:
            # each node publishes its addresses through the log once it runs: wait for all three
            meta = wait_until(
                lambda n=node: (
                    (m := metadata(n.grpc_address))
                    and {p["raft_address"]: p["grpc_address"] for p in m["peers"]} == expected
                    and m
                ),
                20,
                what=f"{node.name} to know every node's published address",
            )
            assert meta["controller_leader_address"] == grpc_of[leader.name], (node.name, meta)
            assert not [a for a in listening if a in str(meta)], meta

        # a client that knows one follower, at its published address, finds the leader at its own
        before = proxy.connections[grpc_of[leader.name]]
        with ControllerClient(grpc_of[follower.name], timeout=20) as client:
            assert client.get_metadata().controller_leader_address == grpc_of[leader.name]
            client.apply_broker_id(CLUSTER, "grpc-set", 1, "127.0.0.1:30000;grpc")
            reg = client.register_broker(CLUSTER, "grpc-set", 1, "127.0.0.1:30000")
            assert reg.broker_epoch > 0
        assert proxy.connections[grpc_of[leader.name]] > before

        # a broker, the same over RocketMQ's remoting protocol (CONTROLLER_GET_METADATA_INFO names
        # the leader's published remoting address)
        before = proxy.connections[remoting_of[leader.name]]
        with RemotingControllerClient(remoting_of[follower.name], timeout=20) as broker:
            meta = broker.get_metadata(remoting_of[follower.name])
            assert meta.controller_leader_address == remoting_of[leader.name], meta
            assert not [a for a in listening if a in str(meta)], meta
            broker.apply_broker_id(CLUSTER, "remoting-set", 1, "127.0.0.1:30001;remoting")
            reg = broker.register_broker(CLUSTER, "remoting-set", 1, "127.0.0.1:30001")
            assert reg.broker_epoch > 0
            broker.heartbeat(
                CLUSTER,
                "127.0.0.1:30001",
                "remoting-set",
                1,
                heartbeat_timeout_mills=10_000,
                broker_epoch=reg.broker_epoch,
            )
            elected = broker.elect_master(CLUSTER, "remoting-set", 1)
            assert elected.master_broker_id == 1
        assert proxy.connections[remoting_of[leader.name]] > before
        wait_until(lambda: len(set(cluster.hashes().values())) == 1, 20, what="equal state hashes")
