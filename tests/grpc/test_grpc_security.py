"""Bearer token for the mutating admin calls, TLS and mTLS."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
import pytest
from grpc_fixtures import CoreNode

from mqctl.auth import TlsConfig
from mqctl.client import ControllerClient
from mqctl.errors import Code, ControllerError, UsageError
from mqctl.grpc.security import check_bearer
from mqctl.v1 import controller_pb2 as pb
from mqctl.v1 import controller_pb2_grpc as pb_grpc

C, B = "DefaultCluster", "broker-a"
TOKEN = "s3cret-token"


def _setup_broker_set(c: ControllerClient) -> int:
    c.apply_broker_id(C, B, 1, "127.0.0.1:30911;x")
    return c.register_broker(C, B, 1, "127.0.0.1:30911").broker_epoch


ADMIN_CALLS: dict[str, Callable[[ControllerClient], Any]] = {
    "ElectMaster(designate_elect)": lambda c: c.elect_master(C, B, 1, True),
    "CleanBrokerData": lambda c: c.clean_broker_data(C, B, None, True),
    "UpdateConfig": lambda c: c.update_config({"enableElectUncleanMaster": "true"}),
}


@pytest.mark.parametrize("call", list(ADMIN_CALLS), ids=list(ADMIN_CALLS))
@pytest.mark.parametrize("token", [None, "wrong", TOKEN[:-1], TOKEN + "x"])
def test_admin_calls_need_the_token(serve: Any, call: str, token: str | None) -> None:
    served = serve(CoreNode(), token=TOKEN)
    with ControllerClient(served.address) as plain:
        _setup_broker_set(plain)
    served.node.calls.clear()
    with ControllerClient(served.address, token=token) as c, pytest.raises(ControllerError) as e:
        ADMIN_CALLS[call](c)
    assert e.value.code == Code.UNAUTHENTICATED
    assert "requires a token" in e.value.remark
    assert served.node.calls == []  # refused before the node saw it


@pytest.mark.parametrize("call", list(ADMIN_CALLS), ids=list(ADMIN_CALLS))
def test_admin_calls_accepted_with_the_token(serve: Any, call: str) -> None:
    served = serve(CoreNode(), token=TOKEN)
    with ControllerClient(served.address, token=TOKEN) as c:
        _setup_broker_set(c)
        ADMIN_CALLS[call](c)
    assert served.node.methods_called()[-1] in call


def test_broker_calls_do_not_need_the_token(serve: Any) -> None:
    served = serve(CoreNode(), token=TOKEN)
    with ControllerClient(served.address) as c:
        epoch = _setup_broker_set(c)
        # broker-triggered ElectMaster (designate_elect false) is not an admin call
        assert c.elect_master(C, B, 1, broker_epoch=epoch).master_broker_id == 1
        c.heartbeat(C, "127.0.0.1:30911", B, 1)
        assert c.get_replica_info(B).master_broker_id == 1
        assert c.get_config().config


def test_token_header_on_the_raw_stub(serve: Any) -> None:
    served = serve(CoreNode(), token=TOKEN)
    with grpc.insecure_channel(served.address) as ch:
        stub = pb_grpc.ControllerStub(ch)
        req = pb.UpdateConfigRequest(config={"enableElectUncleanMaster": "true"})
        resp, call = stub.UpdateConfig.with_call(req, timeout=5)
        assert call.code() == grpc.StatusCode.OK and resp.code == Code.UNAUTHENTICATED
        resp = stub.UpdateConfig(req, timeout=5, metadata=[("authorization", "Bearer " + TOKEN)])
        assert resp.code == 0
        resp = stub.UpdateConfig(req, timeout=5, metadata=[("authorization", TOKEN)])  # no "Bearer "
        assert resp.code == Code.UNAUTHENTICATED


def test_check_bearer() -> None:
    assert check_bearer([], None) and check_bearer(None, "")
    assert not check_bearer([], "t")
    assert check_bearer([("Authorization", "Bearer t")], "t")
    assert check_bearer([("x", "y"), ("authorization", "Bearer nope"), ("authorization", "Bearer t")], "t")
    assert not check_bearer([("authorization", "bearer t")], "t")
    assert not check_bearer([("authorization", "Bearer tt")], "t")
    assert check_bearer([("authorization", b"Bearer t")], "t")


# -- TLS -------------------------------------------------------------------------------------


def test_tls_with_a_self_signed_ca(serve: Any, pki: Any) -> None:
    served = serve(CoreNode(), tls=TlsConfig(pki.server_cert, pki.server_key))
    with ControllerClient(served.address, tls_ca=pki.ca) as c:
        assert c.get_next_broker_id(C, B).next_broker_id == 1
        assert c.get_metadata().is_leader
    # a plaintext client cannot talk to it; nor can one that trusts another CA
    for kwargs in ({}, {"tls_ca": pki.other_ca}):
        with ControllerClient(served.address, timeout=1.0, **kwargs) as c:
            with pytest.raises(ControllerError) as e:
                c.get_next_broker_id(C, B)
        assert e.value.code == Code.UNAVAILABLE
        assert e.value.remark.startswith(f"no controller reachable at {served.address} (last error: ")


def test_tls_server_name_override(serve: Any, pki_named: Any) -> None:
    served = serve(CoreNode(), tls=TlsConfig(pki_named.server_cert, pki_named.server_key))
    with ControllerClient(served.address, tls_ca=pki_named.ca, server_name="mqctl.test") as c:
        assert c.get_next_broker_id(C, B).next_broker_id == 1
    with ControllerClient(served.address, tls_ca=pki_named.ca, timeout=1.0) as c:
        with pytest.raises(ControllerError):
            c.get_next_broker_id(C, B)  # 127.0.0.1 is not in the certificate


def test_mtls_refuses_a_client_without_a_certificate(serve: Any, pki: Any) -> None:
    served = serve(CoreNode(), tls=TlsConfig(pki.server_cert, pki.server_key, client_ca_file=pki.ca))
    with ControllerClient(served.address, tls_ca=pki.ca, timeout=1.0) as c:
        with pytest.raises(ControllerError) as e:
            c.get_next_broker_id(C, B)
    assert e.value.code == Code.UNAVAILABLE
    assert "TLS" in e.value.remark  # the hint
    assert served.node.calls == []
    with ControllerClient(
        served.address, tls_ca=pki.ca, tls_cert=pki.client_cert, tls_key=pki.client_key
    ) as c:
        assert c.get_next_broker_id(C, B).next_broker_id == 1
    # token and mTLS together
    served2 = serve(
        CoreNode(), token=TOKEN, tls=TlsConfig(pki.server_cert, pki.server_key, client_ca_file=pki.ca)
    )
    with ControllerClient(
        served2.address, TOKEN, tls_ca=pki.ca, tls_cert=pki.client_cert, tls_key=pki.client_key
    ) as c:
        c.update_config({"enableElectUncleanMaster": "true"})


def test_bad_tls_files_are_one_line_usage_errors(tmp_path: Any, pki: Any) -> None:
    from mqctl.grpc.server import build_server

    missing = str(tmp_path / "nope.pem")
    with pytest.raises(UsageError, match=r"cannot read TLS certificate .*nope.pem"):
        build_server(CoreNode(), "127.0.0.1:0", tls=TlsConfig(missing, pki.server_key))
    junk = tmp_path / "junk.pem"
    junk.write_text("hello")
    with pytest.raises(UsageError, match="is not a PEM file"):
        build_server(CoreNode(), "127.0.0.1:0", tls=TlsConfig(pki.server_cert, str(junk)))
    with pytest.raises(UsageError, match="needs both"):
        ControllerClient("127.0.0.1:1", tls_ca=pki.ca, tls_cert=pki.client_cert)
