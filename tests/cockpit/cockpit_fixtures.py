"""Helpers for the tests of `mqctl serve --metrics-address` and `mqctl health`: real serve nodes
with an HTTP listener each, brokers registered and beating with the Python client."""

from __future__ import annotations

import ssl
import urllib.error
import urllib.request
from pathlib import Path

from mqctl.client import ControllerClient
from mqctl.errors import ControllerError
from mqctl.testing import TEST_CLUSTER, Beater, LocalCluster, free_port, register_broker, wait_until


def cockpit_cluster(base: Path, size: int, extra_args: list[str] | None = None,
                    wait: bool = True) -> tuple[LocalCluster, dict[str, str]]:
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


def broker_set(client: ControllerClient, beater: Beater, name: str, alive: int, dead: int = 0,
               elect: bool = True) -> list[int]:
    """Register ``alive`` beating replicas and ``dead`` silent ones; elect the first, put every alive
    replica in the SyncStateSet. -> the ids."""
    ids = []
    for i in range(alive + dead):
        address = f"127.0.0.1:{free_port()}"
        bid, _ = register_broker(client, name, address, epoch=0, max_offset=0, heartbeat_timeout_mills=1500)
        ids.append(bid)
        if i < alive:
            beater.beat(name, bid, address, epoch=1, max_offset=1000, confirm_offset=1000)
    if elect and alive:
        def elected() -> bool:
            try:  # the controller may have elected one of them already
                client.elect_master(TEST_CLUSTER, name, ids[0], designate_elect=True)
            except ControllerError:
                pass
            return client.get_replica_info(name).master_broker_id == ids[0]

        wait_until(elected, 20, what=f"{name}: broker {ids[0]} elected")
        info = client.get_replica_info(name)
        if alive > 1:
            client.alter_sync_state_set(name, ids[0], info.master_epoch, ids[:alive],
                                        info.sync_state_set_epoch)
    return ids
