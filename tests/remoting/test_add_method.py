"""Issue 34's proof that the method table is the one place: a method added in a test by a row, its
rule and its typed request (tests/method_plugin/) is served by a real 3-node group on gRPC and on
RocketMQ remoting, decided by the core and replicated through Raft, guarded by the token rule of
its row, and called by both clients."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from harness import start_remoting, with_remoting_ports

from mqctl import methods
from mqctl.client import ControllerClient
from mqctl.errors import Code, ControllerError
from mqctl.localgroup import LocalCluster, wait_until
from mqctl.remoting.client import RemotingControllerClient

PLUGIN = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "method_plugin")
TOKEN = "t0ken-add-method"
KEY = "notifyBrokerRoleChanged"


@pytest.fixture(scope="module")
def plugin() -> Iterator[Any]:
    sys.path.insert(0, PLUGIN)
    try:
        import set_config_value

        yield set_config_value
    finally:
        sys.path.remove(PLUGIN)
        sys.modules.pop("set_config_value", None)
        methods.unregister("SetConfigValue")  # the other tests see the table as it ships


@pytest.fixture(scope="module")
def group(plugin: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, list[str]]]:
    cluster = LocalCluster(str(tmp_path_factory.mktemp("add-method")), size=3, extra_args=["--token", TOKEN])
    remoting = with_remoting_ports(cluster)
    with cluster:
        path = os.pathsep.join(p for p in (PLUGIN, os.environ.get("PYTHONPATH", "")) if p)
        start_remoting(cluster, remoting, env={"PYTHONPATH": path})
        cluster.wait_for_bootstrap()
        yield cluster, remoting


def _config_everywhere(cluster: LocalCluster, value: str) -> bool:
    for node in cluster.nodes:
        with ControllerClient(node.grpc_address, timeout=10) as client:
            if client.get_config(address=node.grpc_address).config.get(KEY) != value:
                return False
    return True


def test_a_method_added_by_its_row_alone_is_served_on_both_transports(
    plugin: Any, group: tuple[LocalCluster, list[str]]
) -> None:
    cluster, remoting = group
    assert "SetConfigValue" in methods.WRITE_METHODS and methods.BY_REMOTING_CODE[plugin.CODE] is plugin.ROW
    doors: list[tuple[type[Any], str]] = [
        (ControllerClient, cluster.nodes[0].grpc_address),
        (RemotingControllerClient, ";".join(remoting)),
    ]
    for value, (client_cls, address) in zip(("false", "true"), doors, strict=True):
        with client_cls(address, token=TOKEN, timeout=20) as admin:
            ack = admin.call("SetConfigValue", {"config": {KEY: value}})
            assert (type(ack).__name__, ack.remark) == ("Ack", "")  # a success: the row names Ack
            # the row's rule decided it and Raft applied it on every node
            wait_until(lambda v=value: _config_everywhere(cluster, v), 20, what=f"{KEY}={value} everywhere")
            # the typed request's read() refuses a bad request with its one clear error
            with pytest.raises(ControllerError) as err:
                admin.call("SetConfigValue", {"config": {KEY: value, "waitFor": "1"}})
            assert (err.value.code, err.value.remark) == (
                Code.CONTROLLER_INVALID_REQUEST,
                "Invalid request: SetConfigValue sets one key",
            )
            with pytest.raises(ControllerError) as err:  # and the rule refuses what it does not do
                admin.call("SetConfigValue", {"config": {"controllerType": "jRaft"}})
            assert err.value.remark == "Invalid request: controllerType is not honoured"
        # the row's token rule, on each transport
        with client_cls(address, timeout=20) as anonymous, pytest.raises(ControllerError) as err:
            anonymous.call("SetConfigValue", {"config": {KEY: value}})
        assert err.value.code == Code.UNAUTHENTICATED
    # the decision history names the cause from the row's caller
    with ControllerClient(cluster.nodes[0].grpc_address, timeout=20) as client:
        entries = client.get_history().entries
    config_entries = [e for e in entries if e.get("what") == "config changed"]
    assert len(config_entries) >= 2 and {e["cause"] for e in config_entries} == {"admin request"}
