"""Helpers for the tests of `mqctl serve --metrics-address` and `mqctl health`: real serve nodes
with an HTTP listener each, brokers registered and beating with the Python client."""

from __future__ import annotations

import socket
import ssl
import struct
import urllib.error
import urllib.request
from pathlib import Path
from typing import ClassVar

from harness import TEST_CLUSTER, Beater, StandInServer, register_broker

from mqctl.client import ControllerClient
from mqctl.errors import ControllerError
from mqctl.localgroup import LocalCluster, free_port, wait_until
from mqctl.remoting import codec
from mqctl.remoting.codec import FLAG_RESPONSE, RemotingCommand

# The lease of the brokers of the tests that look at verdicts (mqctl.localgroup's 1500 ms default would let a
# beat delayed on a loaded machine fail a master over, and the test's fixed broker reports then disagree)
LEASE_MS = 6000
LEASE_ARGS = ["--heartbeat-timeout", str(LEASE_MS)]


def cockpit_cluster(
    base: Path, size: int, extra_args: list[str] | None = None, wait: bool = True
) -> tuple[LocalCluster, dict[str, str]]:
    """A started group whose nodes each serve HTTP; -> (cluster, node name -> HTTP address)."""
    cluster = LocalCluster(str(base), size=size, extra_args=extra_args or [])
    http: dict[str, str] = {}
    for node in cluster.nodes:
        http[node.name] = f"127.0.0.1:{free_port()}"
        node.args += ["--metrics-address", http[node.name]]
    cluster.start(wait)
    return cluster, http


def get(url: str, timeout: float = 5.0, context: ssl.SSLContext | None = None) -> tuple[int, str, str]:
    """GET -> (status, content type, body), 4xx/5xx included."""
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=context) as answer:
            return answer.status, answer.headers.get("Content-Type", ""), answer.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.headers.get("Content-Type", ""), err.read().decode()


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """/metrics as {(sample name, sorted labels): value}, parsed by prometheus-client's parser."""
    from prometheus_client.parser import text_string_to_metric_families

    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def broker_set(
    client: ControllerClient,
    beater: Beater,
    name: str,
    alive: int,
    dead: int = 0,
    elect: bool = True,
    epochs: list[int] | None = None,
    max_offsets: list[int] | None = None,
    addresses: list[str] | None = None,
) -> dict[int, str]:
    """Register ``alive`` beating replicas (reporting ``epochs`` and ``max_offsets``, default 1 and
    1000) and ``dead`` silent ones; elect the first, put every alive replica in the SyncStateSet.
    -> broker id -> address."""
    ids: dict[int, str] = {}
    for i in range(alive + dead):
        address = addresses[i] if addresses else f"127.0.0.1:{free_port()}"
        bid, _ = register_broker(
            client, name, address, epoch=0, max_offset=0, heartbeat_timeout_mills=beater.lease_ms
        )
        ids[bid] = address
        if i < alive:
            beater.beat(
                name,
                bid,
                address,
                epoch=(epochs or [1] * alive)[i],
                max_offset=(max_offsets or [1000] * alive)[i],
                confirm_offset=0,
            )
    first = next(iter(ids))
    if elect and alive:

        def elected() -> bool:
            try:  # the controller may have elected one of them already
                client.elect_master(TEST_CLUSTER, name, first, designate_elect=True)
            except ControllerError:
                pass
            return client.get_replica_info(name).master_broker_id == first

        wait_until(elected, 20, what=f"{name}: broker {first} elected")
        info = client.get_replica_info(name)
        if alive > 1:
            client.alter_sync_state_set(
                name, first, info.master_epoch, list(ids)[:alive], info.sync_state_set_epoch
            )
    return ids


class AdminBroker(StandInServer):
    """The admin port of a broker whose metadata is the config/ files of ``store`` (written by RocketMQ's
    own managers, rocketmq_fixtures.ConfigDriver): it answers GET_ALL_TOPIC_CONFIG,
    GET_ALL_SUBSCRIPTIONGROUP_CONFIG, GET_ALL_CONSUMER_OFFSET and GET_ALL_DELAY_OFFSET with those files, as
    a broker answers them with what its managers' encode() writes there; anything else with code 3.
    It stands in for a live broker held with metadata its master lacks, which a real slave keeps only
    until its next copy from the master (seconds); the real broker's answers are
    tests/e2e/test_rocketmq_metadata.py's."""

    FILES: ClassVar[dict[int, str]] = {
        21: "topics.json",
        201: "subscriptionGroup.json",
        43: "consumerOffset.json",
        45: "delayOffset.json",
    }

    def __init__(self, store: Path) -> None:
        self.store = store
        self.requests = 0  # answered: a test that must not ask sees none
        super().__init__()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(10.0)
        with conn:
            while not self._stop.is_set():
                try:
                    prefix = conn.recv(4, socket.MSG_WAITALL)
                    if len(prefix) < 4:
                        return
                    cmd = codec.decode_frame(conn.recv(struct.unpack(">i", prefix)[0], socket.MSG_WAITALL))
                except (OSError, ValueError):
                    return
                self.requests += 1
                name = self.FILES.get(cmd.code)
                if name is None:
                    answer = RemotingCommand(
                        code=3,
                        opaque=cmd.opaque,
                        flag=FLAG_RESPONSE,
                        remark=f"request {cmd.code} not supported",
                    )
                else:
                    path = self.store / "config" / name
                    answer = RemotingCommand(
                        code=0,
                        opaque=cmd.opaque,
                        flag=FLAG_RESPONSE,
                        body=path.read_bytes() if path.exists() else b"",
                    )
                conn.sendall(codec.encode_frame(answer))
