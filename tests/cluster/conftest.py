"""Fixtures for tests that run real `mqctl serve` processes on loopback ports."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from mqctl.client import ControllerClient
from mqctl.testing import LocalCluster

CLUSTER = "cluster-a"


class Beater:
    """Sends heartbeats for some brokers every `period` seconds, as a live broker would."""

    def __init__(self, client: ControllerClient, period: float = 0.2) -> None:
        self.client = client
        self.period = period
        self.brokers: dict[tuple[str, int], dict] = {}
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def beat(self, broker_name: str, broker_id: int, address: str, **fields: object) -> None:
        with self._lock:
            self.brokers[(broker_name, broker_id)] = dict(address=address, **fields)
        self._send(broker_name, broker_id)

    def silence(self, broker_name: str, broker_id: int) -> None:
        with self._lock:
            self.brokers.pop((broker_name, broker_id), None)

    def _send(self, broker_name: str, broker_id: int) -> None:
        with self._lock:
            f = dict(self.brokers.get((broker_name, broker_id)) or {})
        if not f:
            return
        address = f.pop("address")
        try:
            self.client.heartbeat(CLUSTER, address, broker_name, broker_id,
                                  heartbeat_timeout_mills=1500, **f)
        except Exception:
            pass  # a controller failover in progress; the next beat retries

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            with self._lock:
                keys = list(self.brokers)
            for name, bid in keys:
                self._send(name, bid)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


@pytest.fixture
def single(tmp_path) -> Iterator[LocalCluster]:
    cluster = LocalCluster(str(tmp_path), size=1)
    with cluster:
        cluster.start()
        yield cluster


@pytest.fixture
def trio(tmp_path) -> Iterator[LocalCluster]:
    cluster = LocalCluster(str(tmp_path), size=3)
    with cluster:
        cluster.start()
        yield cluster


def register(client: ControllerClient, broker_name: str, address: str, **kw: object) -> tuple[int, int]:
    """The broker's registration sequence (seed 000): next id, apply, register. -> (id, brokerEpoch)."""
    nid = client.get_next_broker_id(CLUSTER, broker_name).next_broker_id
    client.apply_broker_id(CLUSTER, broker_name, nid, f"{address};1700000000000")
    reg = client.register_broker(CLUSTER, broker_name, nid, address, **kw)
    return nid, reg.broker_epoch
