"""A real RocketMQ 5.3.3 broker (../shared/rocketmq-broker, compiled unchanged) whose controllerAddr is
`mqctl serve --remoting-port` serving TLS only (--tls-cert/--tls-key, remoting_tls_mode enforcing): the
broker, started with RocketMQ's client TLS properties (tls.enable=true, the server certificate checked
against the test CA), applies for its id, registers, heartbeats and is elected master over TLS, and
mqctl's CLI reads the result over TLS with --protocol remoting (docs/remoting.md#tls-and-acl).

RocketMQ's name server runs in tls.server.mode=permissive with the same certificate (the broker's
tls.enable applies to every client of the broker, the name server's too); the broker's own port stays
plaintext (tls.server.mode=disabled), where mqctl's 1008 pushes arrive. Everything runs in a private
network namespace with only loopback, as tests/e2e/test_rocketmq_broker_set.py.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
from rocketmq_fixtures import (
    JOPTS,
    MQCTL,
    Namespace,
    broker_classpath,
    broker_conf,
    require_rocketmq,
    rocketmq_env,
)
from tls_pki import write_pki

pytestmark = pytest.mark.slow

NAMESRV = "127.0.0.1:9876"
GRPC, RAFT, REMOTING = "127.0.0.1:9870", "127.0.0.1:9880", 9890
BROKER_PORT, BROKER_HA = 10911, 10912


def test_rocketmq_broker_over_tls_to_mqctl_serve(tmp_path: Path) -> None:
    require_rocketmq()
    pki = write_pki(tmp_path / "pki")
    cp = ":".join(broker_classpath())
    ns = Namespace(tmp_path)
    try:
        ns.start(
            "controller",
            MQCTL,
            "serve",
            "--listen",
            GRPC,
            "--raft",
            RAFT,
            "--remoting-port",
            str(REMOTING),
            "--tls-cert",
            pki.server_cert,
            "--tls-key",
            pki.server_key,
            "--data-dir",
            str(tmp_path / "c"),
            "--heartbeat-timeout",
            "3000",
            "--scan-interval",
            "1000",
        )
        ns.wait_log(
            "controller", r"RocketMQ remoting listening on \S+ \(responses in JSON, TLS enforcing\)", 60
        )
        server_tls = [
            "-Dtls.server.mode=permissive",
            "-Dtls.test.mode.enable=false",
            f"-Dtls.server.certPath={pki.server_cert}",
            f"-Dtls.server.keyPath={pki.server_key}",
            "-Dtls.server.need.client.auth=none",
        ]
        conf = tmp_path / "namesrv.conf"
        conf.write_text("listenPort=9876\nbindAddress=127.0.0.1\n")
        ns.start(
            "namesrv",
            "java",
            *JOPTS,
            *server_tls,
            f"-Duser.home={tmp_path / 'namesrv-home'}",
            "-cp",
            cp,
            "org.apache.rocketmq.namesrv.NamesrvStartup",
            "-c",
            str(conf),
            env=rocketmq_env(ns),
        )
        ns.wait_log("namesrv", r"The Name Server boot success", 90)
        conf = tmp_path / "b0.conf"
        conf.write_text(
            broker_conf(
                controllers=[f"127.0.0.1:{REMOTING}"],
                namesrv=NAMESRV,
                port=BROKER_PORT,
                ha_port=BROKER_HA,
                store=tmp_path / "b0" / "store",
                extra={"controllerHeartBeatTimeoutMills": 3000, "mappedFileSizeCommitLog": 4194304},
            )
        )
        client_tls = [
            "-Dtls.enable=true",
            "-Dtls.test.mode.enable=false",
            "-Dtls.client.authServer=true",
            f"-Dtls.client.trustCertPath={pki.ca}",
        ]
        ns.start(
            "b0",
            "java",
            *JOPTS,
            *client_tls,
            f"-Duser.home={tmp_path / 'b0-home'}",
            "-cp",
            cp,
            "org.apache.rocketmq.broker.BrokerStartup",
            "-c",
            str(conf),
            env=rocketmq_env(ns),
        )
        ns.wait_log("b0", r"boot success", 180)

        def sync_state() -> dict | None:
            p = ns.run(
                MQCTL,
                "getSyncStateSet",
                "-b",
                "broker-a",
                "-a",
                f"127.0.0.1:{REMOTING}",
                "--protocol",
                "remoting",
                "--tls-ca",
                pki.ca,
                "-o",
                "json",
                "--timeout",
                "10",
                timeout=60,
            )
            if p.returncode != 0:
                return None
            doc: dict = json.loads(p.stdout)
            (bs,) = [s for s in doc["brokers"] if s.get("brokerName") == "broker-a"]
            return bs if bs.get("masterAddress") == f"127.0.0.1:{BROKER_PORT}" else None

        deadline, bs = time.monotonic() + 90, None
        while bs is None and time.monotonic() < deadline:
            bs = sync_state()
            if bs is None:
                time.sleep(1)
        assert bs is not None, f"no master over TLS; broker log tail:\n{ns.log('b0')[-3000:]}"
        assert bs["masterBrokerId"] == 1, bs
        # a plaintext client gets nothing from the TLS-only port
        p = ns.run(
            MQCTL,
            "getControllerMetaData",
            "-a",
            f"127.0.0.1:{REMOTING}",
            "--protocol",
            "remoting",
            "--timeout",
            "3",
            timeout=60,
        )
        assert p.returncode == 6, p.stdout + p.stderr
    finally:
        for p in ns.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in ns.procs.values():
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                pass
        ns.close()
