"""Run one controller node: data directory, Raft node, its transports (gRPC, RocketMQ remoting), signals,
logs. The process around the core: it imports the transports, which import the core, never the reverse."""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import signal
import socket
import sys
import threading
import time
from typing import Any

from mqctl.address import parse_address
from mqctl.controller.config import ServeConfig
from mqctl.errors import StoreError, UsageError
from mqctl.sdnotify import Notifier

log = logging.getLogger("mqctl.serve")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return json.dumps(doc)


def setup_logging(cfg: ServeConfig) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if cfg.log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(cfg.log_level.upper())
    # pysyncobj logs its own chatter at INFO/WARNING; keep it out unless debugging, but never its
    # errors: an exception it logs (a failed tick, a snapshot it cannot load) is a bug to see.
    logging.getLogger("pysyncobj").setLevel(logging.ERROR if cfg.log_level != "debug" else logging.DEBUG)


def _check_port_free(address: str, what: str, busy: str = "") -> None:
    """pysyncobj retries a busy port in its own thread and logs a traceback; say it in one line."""

    host, port = parse_address(address, f"{what} address")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            if busy and exc.errno == errno.EADDRINUSE:
                raise UsageError(busy.format(address=address)) from exc
            raise UsageError(f"cannot listen for {what} on {address}: {exc.strerror}") from exc


def _remoting_tls(cfg: ServeConfig) -> dict[str, Any]:
    """--tls-cert/--tls-key/--tls-ca serve the remoting port too, in cfg.remoting_tls_mode."""
    if not cfg.tls_cert or cfg.remoting_tls_mode == "disabled":
        return {}
    from mqctl.auth import server_context  # lazy: start-up

    return {
        "tls": server_context(cfg.tls_cert, cfg.tls_key, cfg.tls_ca or None),
        "tls_mode": cfg.remoting_tls_mode,
    }


def _start_cockpit(cfg: ServeConfig, node: Any) -> tuple[Any, Any]:
    """--metrics-address: the HTTP listener, and the NodeAPI the transports use (the node with
    each request counted, once for every transport); (node, None) without it."""
    if not cfg.metrics_address:
        return node, None
    # lazy: prometheus_client
    from mqctl.metrics import Metrics
    from mqctl.status_http import Cockpit

    tls = None
    if cfg.tls_cert:
        from mqctl.auth import server_context  # lazy: start-up

        tls = server_context(cfg.tls_cert, cfg.tls_key, cfg.tls_ca or None)
    metrics = Metrics(node)
    try:
        cockpit = Cockpit(node, metrics, parse_address(cfg.metrics_address, "--metrics-address"), tls)
    except OSError as exc:
        raise UsageError(f"cannot listen for HTTP on {cfg.metrics_address}: {exc.strerror}") from exc
    cockpit.start()
    return metrics.api, cockpit


RAFT_SWITCH_INTERVAL = 0.001


def _status_line(node: Any) -> str:
    """What `systemctl status` shows (sd_notify STATUS=)."""
    if not node.joined:
        leader = node.leader_raft_address()
        return f"joining the controller group ({'leader ' + leader if leader else 'no leader yet'})"
    if node.is_leader():
        return f"leader of the controller group, term {node.sync.term()}"
    leader = node.leader_raft_address()
    return f"follower of {leader}" if leader else "no leader: the group is electing one"


def _missing_ancestor(path: str) -> str | None:
    """The outermost directory of ``path`` (itself included) that does not exist yet; None if it does."""
    path = os.path.abspath(path)
    missing = None
    while not os.path.exists(path):
        missing = path
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return missing


def _read_bytes(path: str) -> bytes | None:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError:
        return None


def _leave_as_found(data_dir: str, missing: str | None, found: set[str]) -> None:
    """Remove what a failed start created in ``data_dir`` (LOCK, node.json, the journal): every entry
    that was not there, and the directories it made (``missing``: the outermost). Entries that were
    there are left as they are."""

    try:
        for name in set(os.listdir(data_dir)) - found:
            path = os.path.join(data_dir, name)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.unlink(path)
        if missing is not None:
            path = os.path.abspath(data_dir)
            while True:
                os.rmdir(path)  # only empty ones
                if path == missing:
                    break
                path = os.path.dirname(path)
    except OSError as exc:
        log.warning("could not remove what the failed start created in %s: %s", data_dir, exc)


def run(cfg: ServeConfig) -> int:
    """Serve until SIGTERM/SIGINT; return the process exit code."""
    # lazy: start-up
    from mqctl import malloc
    from mqctl.auth import TlsConfig
    from mqctl.controller import datadir, records  # lazy: the raft fork
    from mqctl.controller.node import ControllerNode  # lazy: start-up
    from mqctl.controller.node_raft import RAFT_STALL_S  # lazy: start-up
    from mqctl.controller.node_settings import NodeSettings  # lazy: start-up
    from mqctl.grpc.server import GrpcLimits, build_server  # lazy: grpc, protobuf

    setup_logging(cfg)
    notifier = Notifier()
    # The Raft tick thread must run within its election timeout (0.15-0.35 s) whatever the request
    # threads do: a thread waiting for the GIL gets it after 1 ms instead of Python's 5 ms, so a
    # busy leader's heartbeats to its followers are not held back behind its own request handling
    # (a registration burst of 10,000 brokers cost the leadership otherwise; bench/bench_scale.py).
    sys.setswitchinterval(RAFT_SWITCH_INTERVAL)
    malloc.tune()
    data_dir = cfg.data_dir or datadir.default_data_dir(cfg.raft)
    missing = _missing_ancestor(data_dir)
    found = set(os.listdir(data_dir)) if missing is None else set()
    old_lock = _read_bytes(os.path.join(data_dir, datadir.LOCK_FILE)) if datadir.LOCK_FILE in found else None
    lock = None
    try:
        lock = datadir.prepare(data_dir, cfg.raft)
        print(f"mqctl controller: data directory {data_dir}", file=sys.stderr, flush=True)

        # every port before the node starts: a start that fails on one leaves the journal untouched
        _check_port_free(cfg.raft_bind_address(), "Raft")
        _check_port_free(cfg.listen, "gRPC", "cannot listen on {address}: address already in use")
        if cfg.remoting_port:
            _check_port_free(cfg.remoting_listen(), "RocketMQ remoting")
        if cfg.metrics_address:
            _check_port_free(cfg.metrics_address, "HTTP")
        settings = NodeSettings(
            raft_address=cfg.raft,
            raft_bind=cfg.raft_bind,
            partners=cfg.peer_list(),
            grpc_address=cfg.advertise_address(),
            remoting_address=cfg.remoting_advertise(),
            data_dir=data_dir,
            group=cfg.group,
            cluster_secret=cfg.cluster_secret or None,
            wait_for=cfg.wait_for,
            heartbeat_timeout_ms=cfg.heartbeat_timeout,
            scan_interval_ms=cfg.scan_interval,
            enable_elect_unclean_master=cfg.enable_elect_unclean_master,
            notify_broker_role_changed=cfg.notify_broker_role_changed,
            initial_feature_level=cfg.initial_feature_level,
            auto_feature_level=cfg.auto_feature_level,
        )
        try:
            node = ControllerNode(settings)
        except StoreError:  # a damaged Raft journal: the message names the file and offset (exit 4)
            raise
        except Exception as exc:  # a corrupt journal or snapshot
            raise UsageError(f"cannot load controller data from {data_dir}: {exc}") from exc
        try:
            node.start()
        except OSError as exc:
            raise UsageError(str(exc)) from exc
        try:
            api, cockpit = _start_cockpit(cfg, node)
        except Exception:
            node.stop()
            raise
        tls = None
        if cfg.tls_cert:
            tls = TlsConfig(cert_file=cfg.tls_cert, key_file=cfg.tls_key, client_ca_file=cfg.tls_ca or None)
        try:
            limits = GrpcLimits(
                max_message_bytes=cfg.grpc_max_message_size,
                max_streams_per_connection=cfg.grpc_max_streams,
                max_connections=cfg.grpc_max_connections,
                max_watches=cfg.grpc_max_watches,
                watches_per_connection=cfg.grpc_max_watches_per_connection,
                watches_per_address=cfg.grpc_max_watches_per_address,
                max_heartbeat_streams=cfg.grpc_max_heartbeat_streams,
                heartbeat_streams_per_connection=cfg.grpc_max_heartbeat_streams_per_connection,
                heartbeat_streams_per_address=cfg.grpc_max_heartbeat_streams_per_address,
                heartbeat_stream_idle=cfg.grpc_heartbeat_stream_idle / 1000,
                keepalive_time=cfg.grpc_keepalive / 1000,
                keepalive_timeout=cfg.grpc_keepalive_timeout / 1000,
                idle_timeout=cfg.grpc_idle_timeout / 1000,
                handshake_timeout=cfg.grpc_handshake_timeout / 1000,
                max_stalled=cfg.grpc_max_stalled,
                stalled_per_connection=cfg.grpc_max_stalled_per_connection,
                stalled_per_address=cfg.grpc_max_stalled_per_address,
            )
            server = build_server(api, cfg.listen, token=cfg.token or None, tls=tls, limits=limits)
        except Exception:
            if cockpit is not None:
                cockpit.stop()
            node.stop()
            raise
        remoting = None
        if cfg.remoting_port:
            from mqctl.remoting.server import start_remoting_server  # lazy: start-up

            try:
                remoting = start_remoting_server(
                    api,
                    cfg.remoting_listen(),
                    token=cfg.token or None,
                    max_connections=cfg.remoting_max_connections,
                    max_connections_per_address=cfg.remoting_max_connections_per_address,
                    max_in_flight=cfg.remoting_max_in_flight,
                    idle_timeout=cfg.remoting_idle_timeout / 1000,
                    **_remoting_tls(cfg),
                )
            except Exception:
                server.stop(None)
                if cockpit is not None:
                    cockpit.stop()
                node.stop()
                raise
    except BaseException:
        # a node that never started leaves the directory as it found it (issue 33)
        if lock is not None:
            lock.close()
        _leave_as_found(data_dir, missing, found)
        if old_lock is not None:  # the pid prepare wrote for people: the one that was there
            try:
                with open(os.path.join(data_dir, datadir.LOCK_FILE), "wb") as fh:
                    fh.write(old_lock)
            except OSError:
                pass
        raise

    stop = threading.Event()

    def _on_signal(signum: int, _frame: Any) -> None:
        log.info("received %s, shutting down", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    peers = ",".join(settings.partners) or "none (single node)"
    raft = cfg.raft if not cfg.raft_bind else f"{cfg.raft} (listening on {cfg.raft_bind})"
    log.info("serving gRPC on %s, Raft on %s, peers %s, group %s", cfg.listen, raft, peers, cfg.group)
    if cockpit is not None:
        scheme = "https" if cfg.tls_cert else "http"
        print(
            f"mqctl controller: metrics, health and status page on {scheme}://{cfg.metrics_address}/",
            file=sys.stderr,
            flush=True,
        )
    print(f"mqctl controller: gRPC {cfg.listen} Raft {raft} peers {peers}", file=sys.stderr, flush=True)
    versions = " ".join(f"{name}/v{v}" for name, v in records.record_versions().items())
    print(
        f"mqctl controller: speaks feature levels 1..{records.MAX_FEATURE_LEVEL}, records {versions}",
        file=sys.stderr,
        flush=True,
    )

    # Set by mqctl.localgroup (tests, `mqctl sim`, `mqctl demo`) for the nodes it starts: when that
    # process dies, even by SIGKILL, this node is reparented and shuts down instead of lingering.
    parent = os.environ.get("MQCTL_PARENT_PID", "")
    code = 0
    ready = False
    # WatchdogSec= of the unit: pinged while the Raft thread ticks; a Raft thread stuck for
    # RAFT_STALL_S (a lock, a hung disk) stops the pings, and systemd restarts the node
    watchdog, pinged = notifier.watchdog_interval(), 0.0
    while not stop.wait(0.2):
        if watchdog and time.monotonic() - pinged >= watchdog and node.raft.stalled_for() < RAFT_STALL_S:
            pinged = time.monotonic()
            notifier.notify(WATCHDOG="1")
        if not ready and node.joined:
            ready = True
            log.info("joined the controller group %s", cfg.group)
            notifier.status(_status_line(node), READY="1")
        elif notifier.enabled:
            notifier.status(_status_line(node))
        if parent.isdigit() and os.getppid() != int(parent):
            log.info("parent process %s is gone, shutting down", parent)
            break
        if node.fatal_error:
            print(f"mqctl: error: {node.fatal_error}", file=sys.stderr, flush=True)
            code = node.fatal_exit_code
            break
    notifier.notify(STOPPING="1")
    if code == 0 and cfg.handover_timeout and node.is_leader() and node.members():
        # while the transports still answer, so that clients are sent to the new leader
        notifier.status("handing the leadership over")
        log.info("handing the leadership over before shutting down")
        node.raft.hand_over_leadership(cfg.handover_timeout / 1000)
    notifier.status("stopping")
    server.mqctl_health.enter_graceful_shutdown()  # health says NOT_SERVING first
    if cockpit is not None:
        cockpit.stop()
    if remoting is not None:
        remoting.stop()
    server.stop(grace=1.0).wait(2.0)
    node.stop()
    lock.close()
    notifier.close()
    time.sleep(0)  # let daemon threads see the stop flag
    log.info("stopped")
    return code
