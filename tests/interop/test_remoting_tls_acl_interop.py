"""TLS and ACL signing over RocketMQ remoting against RocketMQ's own Java code (docs/remoting.md#tls-and-acl).

java_acl/TlsAclDriver.java, compiled here against ../shared/rocketmq-broker/lib (RocketMQ 5.3.3, the
jars that hold RocketMQ's acl and auth modules; rocketmq-java/lib has neither), configured as RocketMQ
is, with the tls.* system properties:

- the Signature mqctl computes equals what RocketMQ's AclClientRPCHook adds to the same request;
- RocketMQ's NettyRemotingClient with tls.enable=true (server certificate checked against the test CA,
  a client certificate for mutual TLS) against `mqctl serve` TLS, enforcing and permissive;
- mqctl's remoting client (and the CLI) against RocketMQ's NettyRemotingServer with TLS (with and
  without required client certificates) that authenticates every request with RocketMQ's ACL 2.0 code
  (DefaultAuthenticationContextBuilder + DefaultAuthenticationHandler's signature check).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from interop_fixtures import CLASSPATH, JVM_OPTS, SHARED
from tls_pki import PkiFiles, write_pki

from mqctl.auth import client_context
from mqctl.localgroup import LocalCluster, free_port, wait_until
from mqctl.remoting import codec, headers
from mqctl.remoting.acl import AclCredentials
from mqctl.remoting.client import RemotingConnection, RemotingControllerClient, RemotingError

BROKER_LIB = SHARED / "rocketmq-broker" / "lib"
SOURCE = Path(__file__).resolve().parent / "java_acl" / "TlsAclDriver.java"
JVM = [o for o in JVM_OPTS if o != "-Dtls.server.mode=disabled"]  # the driver speaks TLS


def _classpath() -> str:
    listed = (BROKER_LIB / "classpath.txt").read_text().split()
    return os.pathsep.join(str(BROKER_LIB / jar) for jar in listed)


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory, java_tools: None) -> list[str]:
    """``java ... TlsAclDriver`` (compiled once for this module) without its arguments."""
    if not (BROKER_LIB / "classpath.txt").is_file():
        pytest.fail(f"RocketMQ 5.3.3's classes are missing: {BROKER_LIB}", pytrace=False)
    out = tmp_path_factory.mktemp("tls-acl-classes")
    p = subprocess.run(
        ["javac", "-nowarn", "-encoding", "UTF-8", "-cp", _classpath(), "-d", str(out), str(SOURCE)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if p.returncode != 0:
        pytest.fail(f"javac failed on {SOURCE}:\n{p.stdout}{p.stderr}", pytrace=False)
    logs = tmp_path_factory.mktemp("tls-acl-logs")
    return ["java", *JVM, f"-Drocketmq.client.logRoot={logs}", "-cp", f"{out}{os.pathsep}{_classpath()}"]


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> PkiFiles:
    return write_pki(tmp_path_factory.mktemp("pki"))


def _tls_client_props(pki: PkiFiles, *, cert: bool = False) -> list[str]:
    """RocketMQ's client TLS, verifying the server: tls.enable, tls.client.authServer + trustCertPath
    (tls.test.mode.enable=false, else RocketMQ trusts any certificate), a client certificate for mTLS."""
    props = [
        "-Dtls.enable=true",
        "-Dtls.test.mode.enable=false",
        "-Dtls.client.authServer=true",
        f"-Dtls.client.trustCertPath={pki.ca}",
    ]
    if cert:
        props += [f"-Dtls.client.certPath={pki.client_cert}", f"-Dtls.client.keyPath={pki.client_key}"]
    return props


def _java_client(driver: list[str], props: list[str], address: str, code: int, *acl: str) -> dict[str, Any]:
    """``driver`` is java [options] -cp CP: the tls.* properties go before -cp."""
    cmd = [*driver[:-2], *props, *driver[-2:], "TlsAclDriver", "client", address, str(code), *acl]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    doc: dict[str, Any] = json.loads(p.stdout.strip().splitlines()[-1])
    return doc


# --- the signature ----------------------------------------------------------------------------


def _cases() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = [
        {"code": 1005, "ext": {}, "body": b""},
        {
            "code": 1002,
            "ext": {
                "clusterName": "c",
                "brokerName": "broker-a",
                "brokerId": "1",
                "designateElect": "true",
                "mqctlToken": "t0ken",
            },
            "body": b"",
        },
        # upper case before lower, digits and '_' where ASCII puts them; UTF-8 values
        {"code": 7, "ext": {"b": "x", "A": "é", "_k": "1", "a1": "ü€", "Z": ""}, "body": b"\x00\xffbody"},
        # Java orders keys by UTF-16 code units: U+1F600 (a surrogate pair, D83D...) before U+FFFD
        {"code": 8, "ext": {"\ufffd": "1", "\U0001f600": "2", "k": "😀"}, "body": "ε".encode()},
        {
            "code": 9,
            "ext": {"AccessKey": "someone-else", "Signature": "stale"},
            "body": b"b",
            "securityToken": "tok-1",
        },
    ]
    for method, request in [
        ("ElectMaster", {"cluster_name": "c", "broker_name": "b", "broker_id": 2, "designate_elect": True}),
        (
            "AlterSyncStateSet",
            {
                "cluster_name": "c",
                "broker_name": "b",
                "master_broker_id": 1,
                "master_epoch": 3,
                "new_sync_state_set": [1, 2],
                "sync_state_set_epoch": 4,
            },
        ),
        ("GetSyncStateData", {"broker_names": ["b", "c"]}),
    ]:
        code, ext, body = headers.encode_request(method, request)
        cases.append({"code": code, "ext": ext, "body": body})
    return cases


def test_mqctl_s_signature_is_rocketmq_s(driver: list[str]) -> None:
    cases = _cases()
    payload = [
        {
            "accessKey": "rocketmq2",
            "secretKey": "12345678",
            "securityToken": c.get("securityToken"),
            "code": c["code"],
            "ext": c["ext"],
            "body": base64.b64encode(c["body"]).decode(),
        }
        for c in cases
    ]
    p = subprocess.run(
        [*driver, "TlsAclDriver", "sign"],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=60,
        encoding="utf-8",
    )
    assert p.returncode == 0, p.stderr
    rocketmq = json.loads(p.stdout)
    for case, theirs in zip(cases, rocketmq, strict=True):
        credentials = AclCredentials("rocketmq2", "12345678", case.get("securityToken"))
        assert credentials.sign(case["ext"], case["body"]) == theirs, case


# --- RocketMQ's NettyRemotingClient against mqctl serve ----------------------------------------


def _serve(
    tmp_path: Path, pki: PkiFiles, *, mtls: bool = False, env: dict[str, str] | None = None
) -> tuple[LocalCluster, str]:
    args = ["--tls-cert", pki.server_cert, "--tls-key", pki.server_key]
    args += ["--tls-ca", pki.ca] if mtls else []
    cluster = LocalCluster(str(tmp_path / "c"), size=1, extra_args=args)
    port = free_port()
    cluster.nodes[0].args += ["--remoting-port", str(port)]
    address = f"127.0.0.1:{port}"
    cluster.nodes[0].start(env)
    cert = {"tls_cert": pki.client_cert, "tls_key": pki.client_key} if mtls else {}
    with RemotingControllerClient([address], tls_ca=pki.ca, timeout=10, **cert) as client:
        wait_until(lambda: client.get_metadata().is_leader, 90, what="mqctl serve over TLS")
    return cluster, address


@pytest.mark.slow
def test_rocketmq_client_over_tls_to_mqctl_serve(driver: list[str], pki: PkiFiles, tmp_path: Path) -> None:
    cluster, address = _serve(tmp_path, pki)
    try:
        answer = _java_client(driver, _tls_client_props(pki), address, headers.GET_METADATA_INFO)
        assert answer["tls"] and answer["code"] == 0, answer
        assert answer["ext"]["controllerLeaderAddress"] == address
        assert answer["ext"]["isLeader"] == "true"
        # signed by RocketMQ's AclClientRPCHook: mqctl serve does not check ACL, the request is served
        signed = _java_client(driver, _tls_client_props(pki), address, headers.GET_METADATA_INFO, "ak", "sk")
        assert signed.get("code") == 0, signed
        # enforcing: RocketMQ's plaintext client gets no answer
        plain = _java_client(driver, ["-Dtls.enable=false"], address, headers.GET_METADATA_INFO)
        assert not plain["tls"] and "error" in plain, plain
        # RocketMQ's client checking the certificate against a CA that did not sign it
        wrong_ca = [*_tls_client_props(pki)[:-1], f"-Dtls.client.trustCertPath={pki.other_ca}"]
        other = _java_client(driver, wrong_ca, address, headers.GET_METADATA_INFO)
        assert "error" in other, other
        # RocketMQ's mqadmin (../shared/rocketmq-java, the develop branch) with the same properties
        mqadmin = ["java", *JVM_OPTS, *_tls_client_props(pki), "-cp", CLASSPATH, "MQAdmin"]
        p = subprocess.run(
            [*mqadmin, "getControllerMetaData", "-a", address], capture_output=True, text=True, timeout=60
        )
        assert p.returncode == 0, p.stdout + p.stderr
        assert f"#ControllerLeaderAddress\t{address}" in p.stdout, p.stdout
    finally:
        cluster.stop()


@pytest.mark.slow
def test_rocketmq_client_with_a_certificate_to_mqctl_serve_mtls(
    driver: list[str], pki: PkiFiles, tmp_path: Path
) -> None:
    cluster, address = _serve(tmp_path, pki, mtls=True)
    try:
        answer = _java_client(driver, _tls_client_props(pki, cert=True), address, headers.GET_METADATA_INFO)
        assert answer.get("code") == 0 and answer["ext"]["controllerLeaderAddress"] == address, answer
        no_cert = _java_client(driver, _tls_client_props(pki), address, headers.GET_METADATA_INFO)
        assert "error" in no_cert, no_cert
    finally:
        cluster.stop()


@pytest.mark.slow
def test_rocketmq_clients_tls_and_plaintext_to_mqctl_serve_permissive(
    driver: list[str], pki: PkiFiles, tmp_path: Path
) -> None:
    cluster, address = _serve(tmp_path, pki, env={"MQCTL_REMOTING_TLS_MODE": "permissive"})
    try:
        tls = _java_client(driver, _tls_client_props(pki), address, headers.GET_METADATA_INFO)
        plain = _java_client(driver, ["-Dtls.enable=false"], address, headers.GET_METADATA_INFO)
        assert tls["tls"] and tls["code"] == 0, tls
        assert not plain["tls"] and plain["code"] == 0, plain
        assert tls["ext"] == plain["ext"]
    finally:
        cluster.stop()


# --- mqctl against RocketMQ's NettyRemotingServer with TLS and ACL -----------------------------


class JavaServer:
    """TlsAclDriver server: RocketMQ's NettyRemotingServer, TLS enforcing, ACL 2.0 authentication."""

    def __init__(
        self, driver: list[str], pki: PkiFiles, users: dict[str, str], log: Path, require_client_cert: bool
    ) -> None:
        props = [
            "-Dtls.server.mode=enforcing",
            "-Dtls.test.mode.enable=false",
            f"-Dtls.server.certPath={pki.server_cert}",
            f"-Dtls.server.keyPath={pki.server_key}",
        ]
        if require_client_cert:
            props += [
                "-Dtls.server.need.client.auth=require",
                "-Dtls.server.authClient=true",
                f"-Dtls.server.trustCertPath={pki.ca}",
            ]
        else:
            props += ["-Dtls.server.need.client.auth=none"]
        self._err = open(log, "wb")  # noqa: SIM115 (the child's stderr; closed on stop)
        self.proc = subprocess.Popen(
            [
                *driver[:-2],
                *props,
                *driver[-2:],
                "TlsAclDriver",
                "server",
                str(free_port()),
                *(f"{k}:{v}" for k, v in users.items()),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._err,
            text=True,
        )
        assert self.proc.stdout is not None
        ready = json.loads(self.proc.stdout.readline() or "{}")
        assert ready.get("event") == "ready", log.read_text()
        self.address = f"127.0.0.1:{ready['port']}"

    def next_event(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        doc: dict[str, Any] = json.loads(self.proc.stdout.readline())
        return doc

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        self._err.close()


@pytest.fixture(params=[False, True], ids=["tls", "mtls"])
def java_server(
    request: pytest.FixtureRequest, driver: list[str], pki: PkiFiles, tmp_path: Path
) -> Iterator[tuple[JavaServer, bool]]:
    server = JavaServer(driver, pki, {"rocketmq2": "12345678"}, tmp_path / "server.err", request.param)
    try:
        yield server, request.param
    finally:
        server.stop()


def test_mqctl_over_tls_signed_to_rocketmq_server(
    java_server: tuple[JavaServer, bool], pki: PkiFiles
) -> None:
    server, mtls = java_server
    cert = (pki.client_cert, pki.client_key) if mtls else (None, None)
    tls = client_context(pki.ca, *cert)
    good = AclCredentials("rocketmq2", "12345678")
    ext, body = {"clusterName": "c", "brokerName": "broker-é"}, b"a body"
    for serialize_type in (codec.JSON, codec.ROCKETMQ):
        with RemotingConnection(server.address, tls=tls, acl=good, serialize_type=serialize_type) as conn:
            answer = conn.invoke(1002, ext, body)
        assert (answer.code, answer.ext_fields) == (0, {"user": "rocketmq2"}), answer.remark
        event = server.next_event()
        assert event["user"] == "rocketmq2" and event["ext"]["brokerName"] == "broker-é"
    with RemotingConnection(server.address, tls=tls, acl=AclCredentials("rocketmq2", "wrong")) as conn:
        refused = conn.invoke(1002, ext, body)
    assert (refused.code, refused.remark) == (16, "check signature failed.")
    assert server.next_event()["refused"] == "check signature failed."
    with RemotingConnection(server.address, tls=tls) as conn:  # not signed
        unsigned = conn.invoke(1002, ext, body)
    assert unsigned.code == 16 and server.next_event()["refused"] == unsigned.remark
    with pytest.raises(RemotingError):  # plaintext to RocketMQ's enforcing TLS server
        with RemotingConnection(server.address, connect_timeout=3, acl=good) as conn:
            conn.invoke(1002, ext, body, timeout=3)
    if mtls:
        with pytest.raises(RemotingError):  # no client certificate: the handshake or the connection fails
            no_cert = client_context(pki.ca)
            with RemotingConnection(server.address, connect_timeout=3, tls=no_cert, acl=good) as c:
                c.invoke(1002, ext, body, timeout=3)


def test_mqctl_cli_over_tls_signed_to_rocketmq_server(
    java_server: tuple[JavaServer, bool], pki: PkiFiles
) -> None:
    """`mqctl getControllerConfig --protocol remoting` with --tls-* and MQCTL_ACCESS_KEY/SECRET_KEY:
    the Java server answers GET_CONTROLLER_CONFIG (1010) with aclUser=<the authenticated user>."""
    server, mtls = java_server
    cert = ["--tls-cert", pki.client_cert, "--tls-key", pki.client_key] if mtls else []
    env = {**os.environ, "MQCTL_ACCESS_KEY": "rocketmq2", "MQCTL_SECRET_KEY": "12345678"}
    env.pop("MQCTL_CONTROLLER", None)
    cmd = [
        sys.executable,
        "-m",
        "mqctl",
        "getControllerConfig",
        "-a",
        server.address,
        "--protocol",
        "remoting",
        "--tls-ca",
        pki.ca,
        *cert,
        "-o",
        "json",
        "--timeout",
        "10",
    ]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "rocketmq2" in json.dumps(json.loads(p.stdout))
    assert server.next_event()["user"] == "rocketmq2"
    env["MQCTL_SECRET_KEY"] = "wrong"
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)
    # getControllerConfig reports a node that did not answer its config as unreachable (exit 6)
    assert p.returncode == 6 and "NO_PERMISSION (16): check signature failed." in p.stderr
