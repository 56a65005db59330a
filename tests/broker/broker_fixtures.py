"""Helpers for tests/broker (a unique module name so that test modules import it without clashes)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mqctl.broker.agent import BrokerAgent
from mqctl.broker.config import AgentConfig
from mqctl.sim.inject import Network

CLUSTER = "cluster-b"


def fast_config(store: str | os.PathLike[str], addresses: str, broker_name: str, **kw: Any) -> AgentConfig:
    """Every period small: a failover takes about two seconds against LocalCluster's 1.5 s timeout."""
    base: dict[str, Any] = dict(
        heartbeat_interval=0.2,
        heartbeat_timeout_ms=1500,
        sync_metadata_period=0.5,
        check_sync_state_set_period=0.3,
        ha_max_time_slave_not_catchup=1.5,
        fetch_wait=0.3,
        retry_interval=0.2,
        put_timeout=3.0,
        commitlog_file_size=64 * 1024,
        controller_timeout=5.0,
        register_retry_fast=50,
    )
    base.update(kw)
    return AgentConfig(CLUSTER, broker_name, os.fspath(store), addresses, **base)


def start_agent(
    store: str | os.PathLike[str],
    addresses: str,
    broker_name: str,
    *,
    network: Network | None = None,
    client_factory: Callable[[], Any] | None = None,
    **kw: Any,
) -> BrokerAgent:
    """A started agent; through ``network`` (mqctl.sim.inject) when faults are to be injected into it."""
    config = fast_config(store, addresses, broker_name, **kw)
    if network is not None:
        return network.agent(config, client_factory=client_factory).start()
    return BrokerAgent(config, client_factory=client_factory).start()


def snapshot(directory: str | os.PathLike[str]) -> dict[str, tuple[bytes, int]]:
    """Every file under ``directory`` with its bytes and mtime: proof that nothing was touched."""
    out: dict[str, tuple[bytes, int]] = {}
    for p in sorted(Path(directory).rglob("*")):
        if p.is_file():
            out[str(p.relative_to(directory))] = (p.read_bytes(), p.stat().st_mtime_ns)
    return out
