"""The HTTP listener of `mqctl serve --metrics-address`: /metrics, /health, /ready and a read-only
status page at / (docs/serve.md#metrics-and-health-over-http).

Standard library HTTP (http.server), one thread per connection up to ``max_connections`` (more
are closed at once), a read timeout per connection, HTTP/1.0 (one request per connection): a
malformed or slow client costs one bounded thread and a one-line debug log, never a traceback.
With ``tls`` (serve's --tls-cert/--tls-key, and --tls-ca for client certificates) it is HTTPS.
"""

from __future__ import annotations

import html
import json
import logging
import socket
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from mqctl.admin import health
from mqctl.admin.decision_docs import _guard_pointer as pointer
from mqctl.admin.decision_docs import iso
from mqctl.controller.core import HISTORY_LEVEL
from mqctl.metrics import Metrics, node_status

log = logging.getLogger("mqctl.http")

READY_MAX_LAG = 100  # entries a ready node may be behind its commit index
PAGE_HISTORY = 20  # history entries on the status page, newest first (`mqctl history` has them all)


def health_answer(meta: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """/health: 200 while this node has a leader and that leader has a quorum, else 503 (reasons)."""
    check = health.controller_health(meta)
    return (503 if check["verdict"] == health.CRIT else 200), check


def ready_answer(meta: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """/ready: healthy, in the group (its id applied) and caught up with its commit index."""
    code, check = health_answer(meta)
    reasons = list(check["reasons"]) if code != 200 else []
    if not meta.get("group_id"):
        reasons.append("CRIT: this node has not applied the group's first entries yet")
    lag = int(meta.get("commit_index") or 0) - int(meta.get("last_applied") or 0)
    if lag > READY_MAX_LAG:
        reasons.append(f"CRIT: this node is {lag} entries behind its commit index")
    return (503 if reasons else 200), {
        "ready": not reasons,
        "reasons": reasons,
        "commitIndex": meta.get("commit_index"),
        "lastApplied": meta.get("last_applied"),
    }


_STYLE = """body{font-family:sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}
th,td{border:1px solid #bbb;padding:.25em .6em;text-align:left;vertical-align:top}th{background:#eee}
.OK{color:#17692a;font-weight:bold}
.WARN{color:#9a6700;font-weight:bold}.CRIT{color:#b3261e;font-weight:bold}
.note{color:#555}"""


def _e(value: Any) -> str:
    return html.escape("-" if value is None or value == "" else str(value), quote=True)


def _verdict(v: str) -> str:
    return f'<span class="{_e(v)}">{_e(v)}</span>'


def status_page(meta: dict[str, Any], data: dict[str, Any], history: dict[str, Any], now: float) -> str:
    """The read-only status page: plain HTML, every value escaped, no script, no external asset.
    ``history``: the node's history_view (the recent decisions, from feature level 3)."""
    leader = bool(meta.get("is_leader"))
    table = data["replicas_info_table"]
    doc = health.health_doc(meta, table if leader else None, int(data["lease_ms"]))
    out = [
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
        '<meta http-equiv="refresh" content="10">',
        f"<title>mqctl controller {_e(meta.get('group'))}</title><style>{_STYLE}</style></head><body>",
        f"<h1>mqctl controller <code>{_e(meta.get('group'))}</code></h1>",
        f'<p id="summary">{_verdict(doc["verdict"])} {_e(doc["summary"].split(": ", 1)[1])}</p>',
        f"<p>this node <code>{_e(meta.get('self_id'))}</code>: {_e(meta.get('state'))}, term "
        f"{_e(meta.get('term'))}, commit index {_e(meta.get('commit_index'))}, applied "
        f"{_e(meta.get('last_applied'))}; leader <code>{_e(meta.get('controller_leader_id'))}</code> "
        f"({_e(meta.get('controller_leader_address'))}); group id {_e(meta.get('group_id'))}; "
        f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime(now))}</p>",
        '<h2>Controller group</h2><table id="controller"><tr><th>Raft address</th><th>gRPC address</th>'
        "<th>leader</th><th>connected</th></tr>",
    ]
    for p in meta.get("peers", ()):
        out.append(
            f"<tr><td>{_e(p.get('raft_address'))}</td><td>{_e(p.get('grpc_address'))}</td>"
            f"<td>{'yes' if p.get('is_leader') else ''}</td>"
            f"<td>{'yes' if p.get('connected') else 'no'}</td></tr>"
        )
    out.append("</table>")
    for reason in doc["checks"][0]["reasons"]:
        out.append(f"<p>{_e(reason)}</p>")
    out.append("<h2>Broker sets</h2>")
    if not leader:
        out.append(
            '<p class="note">This node is not the leader: brokers send their heartbeats to the '
            "leader, so liveness and verdicts are shown on the leader's page.</p>"
        )
    verdicts = {c["name"]: c for c in doc["checks"][1:]}
    out.append(
        '<table id="broker-sets"><tr><th>cluster</th><th>brokerName</th><th>verdict</th>'
        "<th>master</th><th>masterEpoch</th><th>syncStateSet (epoch)</th><th>replicas</th>"
        "<th>reasons</th></tr>"
    )
    for name, info in sorted(table.items()):
        check = verdicts.get(name)
        rows = sorted(
            [*info.get("in_sync_replicas", ()), *info.get("not_in_sync_replicas", ())],
            key=lambda r: int(r["broker_id"]),
        )
        sss = sorted(int(r["broker_id"]) for r in info.get("in_sync_replicas", ()))
        replicas = "<br>".join(_replica(r, leader) for r in rows)
        out.append(
            f"<tr><td>{_e(info.get('cluster_name'))}</td><td>{_e(name)}</td>"
            f"<td>{_verdict(check['verdict']) if check else '-'}</td>"
            f"<td>{_e(info.get('master_broker_id'))} {_e(info.get('master_address'))}</td>"
            f"<td>{_e(info.get('master_epoch'))}</td>"
            f"<td>{_e(', '.join(map(str, sss)))} ({_e(info.get('sync_state_set_epoch'))})</td>"
            f"<td>{replicas}</td><td>{'<br>'.join(_e(r) for r in (check or {}).get('reasons', []))}"
            "</td></tr>"
        )
    out.append("</table>")
    if not table:
        out.append('<p class="note">No broker set is registered.</p>')
    out.extend(_history_section(history))
    out.append("</body></html>")
    return "\n".join(out)


def _history_section(view: dict[str, Any]) -> list[str]:

    out = ["<h2>Recent history</h2>"]
    if view["feature_level"] < HISTORY_LEVEL:
        return [
            *out,
            f'<p class="note" id="history-off">The decision history starts at feature level '
            f"{HISTORY_LEVEL}; this group is at {_e(view['feature_level'])}. Once every member "
            f"runs a version that speaks it, <code>mqctl quorum feature-level "
            f"{HISTORY_LEVEL}</code> raises it (it is never lowered).</p>",
        ]
    entries = view["entries"]
    if not entries:
        return [*out, '<p class="note" id="history-empty">No decision has been recorded yet.</p>']
    out.append(
        f'<p class="note">The last {len(entries)} decisions, newest first; <code>mqctl history</code> '
        "lists them all.</p>"
    )
    out.append(
        '<table id="history"><tr><th>time</th><th>term</th><th>brokerName</th><th>what</th>'
        "<th>detail</th><th>cause</th><th>loss bytes</th></tr>"
    )
    for e in reversed(entries):
        el = e.get("election") or {}
        detail = _e(e.get("detail"))
        if el:
            detail += f"<br>{_e(el.get('reason'))}"
        loss = el.get("loss_bytes", "unknown") if el.get("new_master_broker_id") is not None else "-"
        pointer = _guard_pointer(e, el)
        if pointer:
            detail += (
                f'<br><span class="guard">save it: <code>{_e(pointer["guard"])}</code>, then '
                f"<code>{_e(pointer['replay'])}</code></span>"
            )
        # unknown: a replica's maxOffset was not known; "-": no election, or no master came of it
        out.append(
            f"<tr><td>{_e(iso(int(e.get('time_ms', 0))))}</td><td>{_e(e.get('term'))}</td>"
            f"<td>{_e(e.get('broker_name'))}</td><td>{_e(e.get('what'))}</td><td>{detail}</td>"
            f"<td>{_e(e.get('cause'))}</td><td>{_e(loss)}</td></tr>"
        )
    out.append("</table>")
    totals = {n: v for n, v in sorted(view["loss_total"].items()) if v}
    if totals:
        out.append(
            "<p>bytes elections may have lost: "
            + ", ".join(f"{_e(n)} {_e(v)}" for n, v in totals.items())
            + "</p>"
        )
    return out


def _guard_pointer(e: dict[str, Any], el: dict[str, Any]) -> dict[str, str] | None:

    return pointer(e, el)


def _replica(r: dict[str, Any], leader: bool) -> str:
    text = f"{_e(r['broker_id'])} {_e(r.get('broker_address'))}"
    if leader:
        text += " alive" if r.get("alive") else " not alive"
        if r.get("heartbeat_age_ms") is not None:
            text += (
                f", heartbeat {int(r['heartbeat_age_ms']) / 1000:.1f} s ago, "
                f"maxOffset {_e(r.get('max_offset'))}"
            )
    return text


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.0"
    default_request_version = "HTTP/1.0"  # an unparsable request still gets a status line
    timeout = 10.0  # seconds to send a request (setup() sets it on the socket)

    def version_string(self) -> str:
        return "mqctl"

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)

    def do_HEAD(self) -> None:
        self._route(body=False)

    def do_GET(self) -> None:
        self._route(body=True)

    def _route(self, body: bool) -> None:
        path = urlsplit(self.path).path
        node, metrics = self.server.node, self.server.metrics
        try:
            if path == "/metrics":
                payload, ctype = metrics.exposition()
                self._send(200, payload, ctype, body)
            elif path in ("/health", "/ready"):
                answer = health_answer if path == "/health" else ready_answer
                code, doc = answer(node_status(node))
                self._send(code, (json.dumps(doc, indent=1) + "\n").encode(), "application/json", body)
            elif path in ("/", "/index.html"):
                page = status_page(
                    node_status(node), node.sync_state_data(), node.history_view(PAGE_HISTORY), time.time()
                )
                self._send(200, page.encode(), "text/html; charset=utf-8", body)
            else:
                self._send(404, b"not found: try /, /metrics, /health or /ready\n", "text/plain", body)
        except Exception as exc:  # one line, never a traceback: the page must not take the node down
            log.error("HTTP %s %s failed: %s: %s", self.command, path, type(exc).__name__, exc)
            self._send(500, b"internal error\n", "text/plain", body)

    def _send(self, code: int, payload: bytes, ctype: str, body: bool) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
        self.end_headers()
        if body:
            self.wfile.write(payload)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 64

    def __init__(
        self,
        address: tuple[str, int],
        node: Any,
        metrics: Metrics,
        tls: ssl.SSLContext | None,
        max_connections: int,
    ) -> None:
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.node, self.metrics, self.tls = node, metrics, tls
        self._slots = threading.BoundedSemaphore(max_connections)
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            log.debug("HTTP: too many connections, closing one from %s", client_address)
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except Exception:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def finish_request(self, request: Any, client_address: Any) -> None:
        if self.tls is not None:  # the handshake in this connection's thread, under the read timeout
            request.settimeout(_Handler.timeout)
            try:
                request = self.tls.wrap_socket(request, server_side=True)
            except (OSError, ssl.SSLError) as exc:
                log.debug("HTTP: TLS handshake with %s failed: %s", client_address, exc)
                return
            try:
                super().finish_request(request, client_address)
            finally:
                request.close()
            return
        super().finish_request(request, client_address)

    def handle_error(self, request: Any, client_address: Any) -> None:

        exc = sys.exc_info()[1]
        log.debug("HTTP: connection from %s: %s: %s", client_address, type(exc).__name__, exc)


class Cockpit:
    """The listener and its thread."""

    def __init__(
        self,
        node: Any,
        metrics: Metrics,
        address: tuple[str, int],
        tls: ssl.SSLContext | None = None,
        max_connections: int = 32,
    ) -> None:
        self._server = _Server(address, node, metrics, tls, max_connections)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.2}, name="mqctl-http", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
