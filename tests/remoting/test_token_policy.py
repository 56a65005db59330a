"""The token policy on both doors of one real `mqctl serve --token T --remoting-port P`: every admin
method of the method table (mqctl/methods.py) is refused without the token (2103 UNAUTHENTICATED)
over gRPC and over RocketMQ remoting, and passes the token check with it (any other answer)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from harness import start_remoting, with_remoting_ports
from remoting_fixtures import raw, request

from mqctl import methods
from mqctl.client import ControllerClient
from mqctl.errors import Code, ControllerError
from mqctl.grpc.convert import dict_to_message, message_to_dict
from mqctl.localgroup import LocalCluster
from mqctl.methods import Token
from mqctl.remoting import headers
from mqctl.remoting.client import RemotingControllerClient
from mqctl.remoting.codec import RemotingCommand
from mqctl.v1 import controller_pb2_grpc as pb_grpc

pytestmark = pytest.mark.slow

TOKEN = "policy-token"
C, B = "token-cluster", "token-broker"

# One request per admin method, harmless on a fresh controller: each is refused by the core for its
# own reason (no such broker set, a bad action) or changes nothing (a config value set to its value).
ADMIN_REQUESTS: dict[str, dict[str, Any]] = {
    "ElectMaster": {"cluster_name": C, "broker_name": B, "broker_id": 1, "designate_elect": True},
    "CleanBrokerData": {"cluster_name": C, "broker_name": B, "broker_controller_ids_to_clean": "1"},
    "UpdateConfig": {"config": {"enableElectUncleanMaster": "false"}},
    "ChangeQuorum": {"action": "not-an-action", "raft_address": ""},
    "PauseFailover": {"broker_name": B, "paused": True, "reason": "r"},  # no such broker set
    "Switchover": {"broker_name": B},
    "Rebalance": {"cluster_name": C, "dry_run": True},
}
ADMIN = sorted(ADMIN_REQUESTS)
REMOTING_ADMIN = sorted(m for m in ADMIN if methods.spec(m).remoting_code is not None)


def test_every_admin_method_of_the_table_is_covered_here() -> None:
    assert set(ADMIN_REQUESTS) == {r.name for r in methods.METHODS if r.token is not Token.NEVER}
    for name, req in ADMIN_REQUESTS.items():
        assert methods.requires_token(name, req)
    # the admin methods without a RocketMQ code (mqctl extensions) are not served over remoting at all
    assert set(ADMIN) - set(REMOTING_ADMIN) == {"ChangeQuorum", "PauseFailover", "Switchover", "Rebalance"}
    for name in ("ChangeQuorum", "PauseFailover", "Switchover", "Rebalance"):
        assert methods.spec(name).remoting_code is None


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(gRPC address, remoting address) of a one-node group started with a token."""
    base = str(tmp_path_factory.mktemp("token-policy"))
    cluster = LocalCluster(base, size=1, extra_args=["--token", TOKEN])
    addresses = with_remoting_ports(cluster)
    with cluster:
        start_remoting(cluster, addresses)
        yield cluster.nodes[0].grpc_address, addresses[0]


def _grpc(address: str, method: str, req: dict[str, Any], metadata: list[tuple[str, str]]) -> dict[str, Any]:
    request_cls, _ = methods.spec(method).types()
    with grpc.insecure_channel(address) as channel:
        rpc = getattr(pb_grpc.ControllerStub(channel), methods.spec(method).grpc_method)
        resp, call = rpc.with_call(dict_to_message(req, request_cls), timeout=15, metadata=metadata)
    assert call.code() == grpc.StatusCode.OK
    return message_to_dict(resp)


def _remoting(address: str, method: str, req: dict[str, Any], token: str | None) -> RemotingCommand:
    code, ext, body = headers.encode_request(method, req)
    if token is not None:
        ext[headers.TOKEN_KEY] = token
    with raw(address, timeout=15) as sock:
        return request(sock, RemotingCommand(code=code, opaque=17, ext_fields=ext, body=body))


@pytest.mark.parametrize("method", ADMIN)
def test_grpc_refuses_admin_methods_without_the_token(node: tuple[str, str], method: str) -> None:
    address, _ = node
    req = ADMIN_REQUESTS[method]
    for metadata in ([], [("authorization", "Bearer wrong")], [("authorization", TOKEN)]):
        answer = _grpc(address, method, req, metadata)
        assert answer["code"] == Code.UNAUTHENTICATED, (method, metadata, answer)
        assert answer["remark"].startswith(f"{method} is an admin call: this controller requires a token")
    with_token = _grpc(address, method, req, [("authorization", "Bearer " + TOKEN)])
    assert with_token["code"] != Code.UNAUTHENTICATED, with_token


@pytest.mark.parametrize("method", REMOTING_ADMIN)
def test_remoting_refuses_admin_methods_without_the_token(node: tuple[str, str], method: str) -> None:
    _, address = node
    req = ADMIN_REQUESTS[method]
    for token in (None, "wrong", TOKEN + "x"):
        answer = _remoting(address, method, req, token)
        assert answer.code == Code.UNAUTHENTICATED, (method, token, answer)
        assert f"header {headers.TOKEN_KEY}" in (answer.remark or "")
    answer = _remoting(address, method, req, TOKEN)
    assert answer.code != Code.UNAUTHENTICATED, (answer.code, answer.remark)


def test_the_clients_send_the_token_exactly_when_the_table_says(node: tuple[str, str]) -> None:
    grpc_address, remoting_address = node
    doors = ((ControllerClient, grpc_address), (RemotingControllerClient, remoting_address))
    for client_cls, address in doors:
        with client_cls(address, timeout=15) as anonymous, pytest.raises(ControllerError) as err:
            anonymous.clean_broker_data(C, B, "1")
        assert err.value.code == Code.UNAUTHENTICATED
        with client_cls(address, token=TOKEN, timeout=15) as admin, pytest.raises(ControllerError) as err:
            admin.clean_broker_data(C, B, "1")
        assert err.value.code == Code.CONTROLLER_INVALID_CLEAN_BROKER_METADATA  # past the token check
    # a broker's own election needs no token on either door
    with ControllerClient(grpc_address, timeout=15) as broker, pytest.raises(ControllerError) as err:
        broker.elect_master(C, B, 1)
    assert err.value.code != Code.UNAUTHENTICATED
    own_election = {**ADMIN_REQUESTS["ElectMaster"], "designate_elect": False}
    answer = _remoting(remoting_address, "ElectMaster", own_election, None)
    assert answer.code != Code.UNAUTHENTICATED
