"""The admin commands over RocketMQ remoting (`--protocol`), against `mqctl serve --remoting-port`:
they read the same state as over gRPC."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from admin_fixtures import World, build_world, close_world, run

from mqctl.localgroup import free_port, wait_until

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def rworld(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[World, str]]:
    port = free_port()
    w = build_world(tmp_path_factory.mktemp("admin-remoting"), 1, ["--remoting-port", str(port)])

    def row_of_3_dropped() -> bool:
        # the leader drops a dead broker's heartbeat row at its next scan; compare after that
        info = w.client.get_sync_state_data(["broker-a"]).replicas_info_table["broker-a"]
        three = [r for r in (*info.in_sync_replicas, *info.not_in_sync_replicas) if r.broker_id == 3]
        return bool(three) and three[0].max_offset is None

    try:
        wait_until(row_of_3_dropped, 15, what="broker 3's heartbeat row to expire")
        yield w, f"127.0.0.1:{port}"
    finally:
        close_world(w)


def _stable(doc: Any) -> Any:
    """Drop what changes between two reads (heartbeat ages)."""
    if isinstance(doc, dict):
        return {k: _stable(v) for k, v in doc.items() if "age" not in k.lower()}
    if isinstance(doc, list):
        return [_stable(v) for v in doc]
    return doc


@pytest.mark.parametrize("protocol", ["remoting", "auto"])
def test_get_sync_state_set_over_remoting_matches_grpc(rworld: tuple[World, str], protocol: str) -> None:
    world, remoting = rworld
    over_grpc = run("getSyncStateSet", "-a", world.leader_address, "--protocol", "grpc", "-o", "json")
    over_remoting = run("getSyncStateSet", "-a", remoting, "--protocol", protocol, "-o", "json")
    assert over_grpc.returncode == 0, over_grpc.stderr
    assert over_remoting.returncode == 0, over_remoting.stderr
    a, b = json.loads(over_grpc.stdout), json.loads(over_remoting.stdout)
    assert _stable(a) == _stable(b)
    assert {x["brokerName"] for x in b["brokers"]} == {"broker-a", "broker-b"}


def test_config_and_metadata_over_remoting(rworld: tuple[World, str]) -> None:
    world, remoting = rworld
    cfg = run("getControllerConfig", "-a", remoting, "--protocol", "remoting", "-o", "json")
    assert cfg.returncode == 0, cfg.stderr
    assert "enableElectUncleanMaster" in cfg.stdout
    up = run(
        "updateControllerConfig",
        "-a",
        remoting,
        "--protocol",
        "remoting",
        "-k",
        "enableElectUncleanMaster",
        "-v",
        "true",
    )
    assert up.returncode == 0, up.stderr
    again = run("getControllerConfig", "-a", world.leader_address, "--protocol", "grpc", "-o", "json")
    assert '"enableElectUncleanMaster": "true"' in again.stdout
    meta = run("getControllerMetaData", "-a", remoting, "--protocol", "remoting", "-o", "json")
    assert meta.returncode == 0, meta.stderr


def test_bad_protocol_is_a_usage_error(rworld: tuple[World, str]) -> None:
    _, remoting = rworld
    out = run("getSyncStateSet", "-a", remoting, "--protocol", "carrier-pigeon")
    assert out.returncode == 2
    assert "--protocol must be one of" in out.stderr
