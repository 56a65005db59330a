"""TLS and ACL signing over RocketMQ remoting (docs/remoting.md#tls-and-acl), mqctl on both sides:
`mqctl serve --tls-cert/--tls-key [--tls-ca] --remoting-port` serves TLS on the remoting port
(enforcing by default; permissive and disabled as RocketMQ's tls.server.mode), and mqctl's remoting
client (RemotingControllerClient, the admin commands with --protocol remoting) speaks TLS and signs
its requests as RocketMQ's AclClientRPCHook. RocketMQ's own Java classes on the other side:
tests/interop/test_remoting_tls_acl_interop.py."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import TEST_CLUSTER, with_remoting_ports
from tls_pki import PkiFiles, write_pki

from mqctl.auth import client_context
from mqctl.errors import ControllerError, UsageError
from mqctl.localgroup import LocalCluster, wait_until
from mqctl.remoting import headers
from mqctl.remoting.acl import AclCredentials, signature
from mqctl.remoting.client import RemotingConnection, RemotingControllerClient, RemotingError

# --- the signature, by hand -----------------------------------------------------------------


def test_signature_is_rocketmq_s_hmac_sha1_of_sorted_values_and_body() -> None:
    ext = {"brokerName": "b", "AccessKey": "ak", "clusterName": "c", "Signature": "old"}
    content = "ak" + "b" + "c"  # AccessKey < brokerName < clusterName (upper case sorts first)
    want = base64.b64encode(hmac.new(b"sk", content.encode() + b"BODY", hashlib.sha1).digest()).decode()
    assert signature(ext, b"BODY", "sk") == want
    signed = AclCredentials("ak", "sk").sign({"brokerName": "b", "clusterName": "c"}, b"BODY")
    assert signed == {"brokerName": "b", "clusterName": "c", "AccessKey": "ak", "Signature": want}


def test_security_token_is_signed_too_and_unicode_is_utf8() -> None:
    signed = AclCredentials("ak", "sk", security_token="tok").sign({"x": "é"}, b"")
    content = "ak" + "tok" + "é"  # AccessKey < SecurityToken < x
    want = base64.b64encode(hmac.new(b"sk", content.encode(), hashlib.sha1).digest()).decode()
    assert signed["SecurityToken"] == "tok" and signed["Signature"] == want


def test_credentials_need_both_keys() -> None:
    with pytest.raises(UsageError):
        AclCredentials("ak", "")
    with pytest.raises(UsageError):
        RemotingControllerClient("127.0.0.1:1", access_key="ak")


def test_a_client_certificate_needs_its_key(tmp_path: Path) -> None:
    pki = write_pki(tmp_path)
    with pytest.raises(UsageError):
        client_context(pki.ca, pki.client_cert, None)
    with pytest.raises(UsageError, match="cannot read TLS CA"):
        client_context(str(tmp_path / "missing.pem"))


# --- real mqctl serve processes -----------------------------------------------------------


def _serve(
    tmp_path: Path, pki: PkiFiles, *, mtls: bool = False, env: dict[str, str] | None = None
) -> tuple[LocalCluster, str]:
    args = ["--tls-cert", pki.server_cert, "--tls-key", pki.server_key]
    if mtls:
        args += ["--tls-ca", pki.ca]
    cluster = LocalCluster(str(tmp_path / "c"), size=1, extra_args=args)
    address = with_remoting_ports(cluster)[0]
    for node in cluster.nodes:
        node.start(env)
    return cluster, address


def _leader(client: RemotingControllerClient) -> str:
    # the node answers before it has elected itself: wait for the answer that says it leads
    meta = wait_until(
        lambda: (m := client.get_metadata()).is_leader and m,
        30,
        what="remoting metadata over TLS from the leader",
    )
    return meta.controller_leader_address


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> PkiFiles:
    return write_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def tls_node(tmp_path_factory: pytest.TempPathFactory, pki: PkiFiles) -> Iterator[str]:
    cluster, address = _serve(tmp_path_factory.mktemp("tls"), pki)
    try:
        with RemotingControllerClient([address], tls_ca=pki.ca, timeout=20) as client:
            _leader(client)
        yield address
    finally:
        cluster.stop()


@pytest.mark.slow
def test_mqctl_client_over_tls_to_mqctl_serve(tls_node: str, pki: PkiFiles) -> None:
    with RemotingControllerClient([tls_node], tls_ca=pki.ca, timeout=20) as client:
        assert _leader(client)
        assert client.get_next_broker_id(TEST_CLUSTER, "tls-b").next_broker_id == 1
        assert client.get_config(tls_node).config  # a properties body over TLS


@pytest.mark.slow
def test_one_tls_connection_many_threads(tls_node: str, pki: PkiFiles) -> None:
    """The reader thread and any number of writers share one TLS connection (records sealed and
    sent in order, responses matched by opaque)."""
    from concurrent.futures import ThreadPoolExecutor

    with RemotingConnection(tls_node, tls=client_context(pki.ca), acl=AclCredentials("ak", "sk")) as conn:

        def ask(i: int) -> tuple[int, str]:
            answer = conn.invoke(headers.GET_METADATA_INFO, {"n": str(i)}, b"x" * (i * 997), timeout=20)
            return answer.code, answer.ext_fields.get("controllerLeaderAddress", "")

        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(ask, range(200)))
    assert answers == [(0, tls_node)] * 200


@pytest.mark.slow
def test_enforcing_refuses_plaintext_and_unknown_certificates(tls_node: str, pki: PkiFiles) -> None:
    with pytest.raises(RemotingError):  # the server closes the connection on a plaintext frame
        with RemotingConnection(tls_node, connect_timeout=3) as plain:
            plain.invoke(headers.GET_METADATA_INFO, timeout=3)
    with pytest.raises(RemotingError, match="certificate was refused") as err:
        RemotingConnection(tls_node, connect_timeout=3, tls=client_context(pki.other_ca))
    assert not err.value.sent
    with RemotingControllerClient([tls_node], tls_ca=pki.other_ca, timeout=2) as wrong_ca:
        with pytest.raises(ControllerError) as refused:
            wrong_ca.get_next_broker_id(TEST_CLUSTER, "tls-b")
        assert "certificate" in str(refused.value)
    with RemotingControllerClient([tls_node], tls_ca=pki.ca, server_name="somebody.else", timeout=2) as c:
        with pytest.raises(ControllerError, match="certificate"):
            c.get_next_broker_id(TEST_CLUSTER, "tls-b")


@pytest.mark.slow
def test_signed_requests_reach_mqctl_serve(tls_node: str, pki: PkiFiles) -> None:
    """mqctl serve does not check RocketMQ ACL signatures (docs/remoting.md): signed requests, as a
    client configured for a RocketMQ controller with ACL sends them, are served as unsigned ones."""
    with RemotingControllerClient(
        [tls_node], tls_ca=pki.ca, access_key="ak", secret_key="sk", timeout=20
    ) as client:
        assert _leader(client)
        assert client.get_next_broker_id(TEST_CLUSTER, "acl-b").next_broker_id == 1


@pytest.mark.slow
def test_cli_over_tls_and_acl(tls_node: str, pki: PkiFiles) -> None:
    env = {**os.environ, "MQCTL_ACCESS_KEY": "ak", "MQCTL_SECRET_KEY": "sk"}
    env.pop("MQCTL_CONTROLLER", None)
    cmd = [
        sys.executable,
        "-m",
        "mqctl",
        "getControllerMetaData",
        "-a",
        tls_node,
        "--protocol",
        "remoting",
        "--tls-ca",
        pki.ca,
        "-o",
        "json",
        "--timeout",
        "20",
    ]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["controllerLeaderAddress"] == tls_node
    p = subprocess.run(
        cmd[:-4] + ["-o", "json", "--timeout", "3"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**env, "MQCTL_SECRET_KEY": ""},
    )
    assert p.returncode == 2 and "--access-key and --secret-key go together" in p.stderr + p.stdout


@pytest.mark.slow
def test_cli_tls_server_name(tls_node: str, pki: PkiFiles) -> None:
    """--tls-server-name (MQCTL_TLS_SERVER_NAME): the name checked in the certificate instead of the
    host of -a (the test certificate has localhost and 127.0.0.1)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MQCTL_")}
    cmd = [
        sys.executable,
        "-m",
        "mqctl",
        "getControllerMetaData",
        "-a",
        tls_node,
        "--protocol",
        "remoting",
        "--tls-ca",
        pki.ca,
        "-o",
        "json",
    ]
    p = subprocess.run(
        [*cmd, "--tls-server-name", "localhost", "--timeout", "20"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert p.returncode == 0, p.stderr
    p = subprocess.run(
        [*cmd, "--timeout", "3"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**env, "MQCTL_TLS_SERVER_NAME": "somebody.else"},
    )
    assert p.returncode == 6 and "certificate" in p.stderr, p.stderr


@pytest.mark.slow
def test_mutual_tls(tmp_path: Path, pki: PkiFiles) -> None:
    cluster, address = _serve(tmp_path, pki, mtls=True)
    try:
        with RemotingControllerClient(
            [address], tls_ca=pki.ca, tls_cert=pki.client_cert, tls_key=pki.client_key, timeout=20
        ) as client:
            assert _leader(client)
        with RemotingControllerClient([address], tls_ca=pki.ca, timeout=3) as no_cert:
            with pytest.raises(ControllerError):
                no_cert.get_metadata()
    finally:
        cluster.stop()


@pytest.mark.slow
def test_permissive_serves_tls_and_plaintext_on_one_port(tmp_path: Path, pki: PkiFiles) -> None:
    cluster, address = _serve(tmp_path, pki, env={"MQCTL_REMOTING_TLS_MODE": "permissive"})
    try:
        with RemotingControllerClient([address], tls_ca=pki.ca, timeout=20) as tls:
            assert _leader(tls) == address
            with RemotingControllerClient([address], timeout=5) as plain:
                assert plain.get_metadata().controller_leader_address == address
                assert plain.get_next_broker_id(TEST_CLUSTER, "p").next_broker_id == 1
            assert tls.get_next_broker_id(TEST_CLUSTER, "p").next_broker_id == 1
    finally:
        cluster.stop()
    assert "TLS permissive" in cluster.nodes[0].log_text()


def test_bad_tls_mode_is_a_usage_error() -> None:
    from mqctl.controller.config import load

    with pytest.raises(UsageError, match="remoting_tls_mode"):
        load({}, environ={"MQCTL_REMOTING_TLS_MODE": "sometimes"})
    assert load({"remoting_tls_mode": "permissive"}, environ={}).remoting_tls_mode == "permissive"
    assert load({}, environ={}).remoting_tls_mode == "enforcing"
    p = subprocess.run(
        [sys.executable, "-m", "mqctl", "serve", "--remoting-tls-mode", "sometimes"],
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if not k.startswith("MQCTL_")},
    )
    assert p.returncode == 2 and "bad remoting_tls_mode 'sometimes'" in p.stderr, p.stderr
