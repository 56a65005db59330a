"""`mqctl serve --metrics-address`: /metrics, /health, /ready and the status page of a real
three-node group, malformed HTTP, TLS."""

from __future__ import annotations

import json
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cockpit_fixtures import LEASE_ARGS, LEASE_MS, broker_set, cockpit_cluster, get, samples
from harness import TEST_CLUSTER, Beater

from mqctl.client import ControllerClient
from mqctl.localgroup import LocalCluster, wait_until

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    cluster, http = cockpit_cluster(tmp_path_factory.mktemp("cockpit"), 3, LEASE_ARGS)
    client = ControllerClient(cluster.addresses)
    beater = Beater(client, lease_ms=LEASE_MS)
    try:
        ids = list(broker_set(client, beater, "broker-a", alive=2, dead=1))
        yield {"cluster": cluster, "http": http, "client": client, "beater": beater, "ids": ids}
    finally:
        beater.stop()
        client.close()
        cluster.stop()


def _leader_http(group: dict[str, Any]) -> str:
    leader = group["cluster"].wait_for_leader()
    return str(group["http"][leader.name])


def test_metrics_of_the_leader(group: dict[str, Any]) -> None:
    ids = group["ids"]
    client: ControllerClient = group["client"]
    info = client.get_replica_info("broker-a")
    client.get_sync_state_data()  # a fresh read, counted with its latency
    labels = (("broker_name", "broker-a"), ("cluster", TEST_CLUSTER))

    def scraped() -> dict[Any, float] | None:
        status, ctype, text = get(f"http://{_leader_http(group)}/metrics")
        assert status == 200 and ctype.startswith("text/plain")
        got = samples(text)
        # wait for the third replica to be seen dead (it never beat) and two alive
        return got if got.get(("mqctl_broker_set_replicas_alive", labels)) == 2 else None

    got = wait_until(scraped, 30, what="the leader's metrics with two replicas alive")
    assert got[("mqctl_raft_role", (("role", "leader"),))] == 1
    assert got[("mqctl_raft_role", (("role", "follower"),))] == 0
    assert got[("mqctl_raft_term", ())] >= 1
    assert got[("mqctl_raft_commit_index", ())] >= got[("mqctl_raft_applied_index", ())] > 0
    assert got[("mqctl_raft_peers", ())] == 2
    assert got[("mqctl_raft_peers_connected", ())] == 2
    assert got[("mqctl_raft_has_quorum", ())] == 1
    assert got[("mqctl_controller_health", ())] == 0
    assert got[("mqctl_broker_set_master_id", labels)] == info.master_broker_id == ids[0]
    assert got[("mqctl_broker_set_master_epoch", labels)] == info.master_epoch
    assert got[("mqctl_broker_set_sync_state_set_size", labels)] == 2
    assert got[("mqctl_broker_set_replicas", labels)] == 3
    assert got[("mqctl_broker_set_health", labels)] == 1  # WARN: replica 3 is not alive
    age = got[("mqctl_broker_heartbeat_age_seconds", (("broker_id", str(ids[0])), *labels))]
    assert 0 <= age < LEASE_MS / 1000
    assert got[("mqctl_requests_total", (("code", "0"), ("method", "Heartbeat")))] > 0
    assert got[("mqctl_request_duration_seconds_count", (("method", "GetSyncStateData"),))] >= 1
    assert got[("mqctl_requests_total", (("code", "0"), ("method", "RegisterBroker")))] >= 3
    assert got[("mqctl_raft_apply_duration_seconds_count", ())] > 0
    assert ("mqctl_request_duration_seconds_count", (("method", "Heartbeat"),)) not in got
    assert got[("process_resident_memory_bytes", ())] > 0


def test_a_follower_exports_the_replicated_state_but_no_liveness(group: dict[str, Any]) -> None:
    cluster: LocalCluster = group["cluster"]
    leader = cluster.wait_for_leader()
    follower = next(n for n in cluster.nodes if n is not leader)
    _status, _, text = get(f"http://{group['http'][follower.name]}/metrics")
    got = samples(text)
    labels = (("broker_name", "broker-a"), ("cluster", TEST_CLUSTER))
    assert got[("mqctl_raft_role", (("role", "follower"),))] == 1
    assert got[("mqctl_broker_set_master_id", labels)] == group["ids"][0]
    assert ("mqctl_broker_set_replicas_alive", labels) not in got
    assert not any(name == "mqctl_broker_heartbeat_age_seconds" for name, _ in got)


def test_requests_refused_count_by_code(group: dict[str, Any]) -> None:
    client: ControllerClient = group["client"]
    from mqctl.errors import ControllerError

    with pytest.raises(ControllerError):
        client.get_replica_info("no-such-set")
    _, _, text = get(f"http://{_leader_http(group)}/metrics")
    assert samples(text)[("mqctl_requests_total", (("code", "2008"), ("method", "GetReplicaInfo")))] >= 1


def test_health_and_ready_on_every_node(group: dict[str, Any]) -> None:
    for name, address in group["http"].items():
        status, ctype, body = get(f"http://{address}/health")
        assert (status, ctype) == (200, "application/json"), (name, body)
        assert json.loads(body)["verdict"] in ("OK", "WARN")
        status, _, body = get(f"http://{address}/ready")
        assert status == 200 and json.loads(body)["ready"] is True, body
        status, _, body = get(f"http://{address}/nothing-here")
        assert status == 404


def _raw(address: str, payload: bytes, timeout: float = 10.0) -> bytes:
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(payload)
        sock.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


@pytest.mark.parametrize(
    "payload, status",
    [
        (b"GARBAGE\r\n\r\n", b"400"),
        (b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n", b"414"),
        (b"GET / HTTP/1.1\r\n" + b"".join(b"X-%d: y\r\n" % i for i in range(150)) + b"\r\n", b"431"),
        (b"GET / HTTP/1.1\r\nX: " + b"y" * 70_000 + b"\r\n\r\n", b"431"),
        (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(range(32)) + b"\r\n\r\n", b"400"),
        (b"POST /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello", b"501"),
        (b"GET /health HTTP/9.9\r\n\r\n", b"505"),
    ],
)
def test_malformed_http_is_refused_in_one_answer(
    group: dict[str, Any], payload: bytes, status: bytes
) -> None:
    address = _leader_http(group)
    answer = _raw(address, payload)
    assert answer.split(b" ", 2)[1] == status, answer[:200]
    assert get(f"http://{address}/health")[0] == 200  # still serving; the node's log has no traceback


def test_connections_are_bounded(group: dict[str, Any]) -> None:
    address = _leader_http(group)
    host, port = address.rsplit(":", 1)
    idle = [socket.create_connection((host, int(port)), timeout=5) for _ in range(40)]
    try:
        refused = 0
        for sock in idle:  # beyond 32 open connections the listener closes new ones at once
            sock.settimeout(2.0)
            try:
                refused += sock.recv(1) == b""
            except TimeoutError:
                pass
        assert refused >= 8
    finally:
        for sock in idle:
            sock.close()
    wait_until(lambda: get(f"http://{address}/health")[0] == 200, 20, what="the listener free again")


def test_status_page_escapes_what_brokers_send(group: dict[str, Any]) -> None:
    client: ControllerClient = group["client"]
    broker_set(client, group["beater"], "<i>x</i>&'\"", alive=1)
    status, ctype, page = get(f"http://{_leader_http(group)}/")
    assert (status, ctype) == (200, "text/html; charset=utf-8")
    assert "&lt;i&gt;x&lt;/i&gt;&amp;&#x27;&quot;" in page and "<i>x</i>" not in page
    assert "<script" not in page and "http://" not in page.split("</title>", 1)[1].split("<h2>", 1)[0]


def test_no_leader_makes_health_503_with_the_reason(group: dict[str, Any]) -> None:
    """Last in this module: it stops two of the three nodes."""
    cluster: LocalCluster = group["cluster"]
    group["beater"].stop()
    survivor, *others = cluster.nodes
    for node in others:
        node.stop()

    def unhealthy() -> dict[str, Any] | None:
        status, ctype, body = get(f"http://{group['http'][survivor.name]}/health")
        return json.loads(body) if status == 503 and ctype == "application/json" else None

    doc = wait_until(unhealthy, 30, what="/health 503 on the last node")
    assert doc["verdict"] == "CRIT"
    assert any("no controller leader" in r or "quorum" in r for r in doc["reasons"]), doc
    status, _, body = get(f"http://{group['http'][survivor.name]}/ready")
    assert status == 503 and json.loads(body)["ready"] is False


def test_https_with_the_serve_certificate(tmp_path: Path) -> None:
    from tls_pki import write_pki

    pki = write_pki(tmp_path / "pki")
    cluster, http = cockpit_cluster(
        tmp_path / "ctl", 1, ["--tls-cert", pki.server_cert, "--tls-key", pki.server_key], wait=False
    )
    # the test cluster's readiness check speaks plaintext gRPC, so cockpit_cluster cannot wait for the
    # leader here: wait on HTTPS instead
    try:
        address = http["node0"]
        context = ssl.create_default_context(cafile=pki.ca)
        wait_until(
            lambda: get(f"https://{address}/health", context=context)[0] == 200, 30, what="/health over HTTPS"
        )
        with pytest.raises(OSError):
            get(f"http://{address}/health")
        assert get(f"https://{address}/health", context=context)[0] == 200
    finally:
        cluster.stop()
