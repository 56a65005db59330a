"""`mqctl serve`: start a controller node (see mqctl.serve)."""

from __future__ import annotations

import inspect
import os
from typing import Any

import typer

from mqctl.cli import debug_enabled, root_app

# The flags of `mqctl serve`, in the order --help lists them: (flag, type, help). Each is also a key of
# the --config file and an MQCTL_* variable (mqctl.controller.config.load); none has a default here, so
# that an absent flag leaves the file's or the environment's value.
_FLAGS: tuple[tuple[str, type, str], ...] = (
    ("--listen", str, "gRPC HOST:PORT [default: 127.0.0.1:9878]"),
    ("--advertise", str, "gRPC HOST:PORT published to clients and other nodes [default: --listen]"),
    ("--raft", str, "this node's Raft HOST:PORT [default: 127.0.0.1:9880]"),
    (
        "--raft-bind",
        str,
        "HOST:PORT the Raft port listens on, when the other nodes reach it at another address "
        "(--raft) [default: --raft]",
    ),
    ("--peers", str, "the other nodes' Raft HOST:PORT,... (none: one node)"),
    ("--data-dir", str, "data directory [default: ~/.local/share/mqctl/controller-HOST-PORT]"),
    ("--group", str, "controller group name [default: mqctl]"),
    ("--wait-for", int, "first election of a broker set waits for N alive replicas [default: 1]"),
    ("--token", str, "bearer token required by mutating admin calls"),
    (
        "--tls-cert",
        str,
        "server certificate (PEM) of the gRPC port and of --remoting-port (see --remoting-tls-mode)",
    ),
    ("--tls-key", str, "server private key (PEM) of --tls-cert"),
    ("--tls-ca", str, "CA for client certificates (enables mTLS)"),
    ("--cluster-secret", str, "Raft password; required when a Raft address is not on loopback"),
    ("--heartbeat-timeout", str, "broker heartbeat timeout, ms or e.g. 10s [default: 10000]"),
    ("--scan-interval", str, "expired-heartbeat scan interval [default: 5000]"),
    (
        "--enable-elect-unclean-master/--disable-elect-unclean-master",
        bool,
        "allow electing outside the SyncStateSet",
    ),
    (
        "--initial-feature-level",
        int,
        "the highest feature level a new group starts at (a group whose journals are empty); an "
        "existing group keeps its level [default: 0, the highest every initial member speaks]",
    ),
    (
        "--auto-feature-level/--no-auto-feature-level",
        bool,
        "when this node leads, raise the group's feature level once every member speaks a higher one "
        "(etcd's cluster version); off: `mqctl quorum feature-level N` raises it",
    ),
    ("--log-level", str, "debug, info, warning, error"),
    ("--log-format", str, "text or json"),
    (
        "--remoting-port",
        int,
        "also serve RocketMQ remoting (brokers, mqadmin) on this port of the --listen host; "
        "RocketMQ's default is 9878 [default: off]",
    ),
    (
        "--remoting-tls-mode",
        str,
        "with --tls-cert, the remoting port's TLS as RocketMQ's tls.server.mode: TLS only, TLS or "
        "plaintext, plaintext [default: enforcing]",
    ),
    (
        "--advertise-remoting",
        str,
        "remoting HOST:PORT published to brokers and other nodes [default: the --advertise host, the "
        "--remoting-port]",
    ),
    (
        "--metrics-address",
        str,
        "serve Prometheus /metrics, /health, /ready and a status page over HTTP (HTTPS with "
        "--tls-cert) on HOST:PORT [default: off]",
    ),
    # per-peer limits of the listeners (docs/serve.md#limits)
    ("--grpc-max-message-size", int, "largest gRPC request message, bytes [default: 1048576]"),
    (
        "--grpc-max-streams",
        int,
        "concurrent gRPC calls per connection (HTTP/2 MAX_CONCURRENT_STREAMS) [default: 100]",
    ),
    ("--grpc-max-connections", int, "open gRPC connections [default: 1024]"),
    ("--grpc-max-watches", int, "watch streams on this node [default: 256]"),
    ("--grpc-max-watches-per-connection", int, "watch streams per connection, 0 = no limit [default: 16]"),
    ("--grpc-max-watches-per-address", int, "watch streams per client address, 0 = no limit [default: 64]"),
    ("--grpc-max-heartbeat-streams", int, "HeartbeatStream streams on this node [default: 256]"),
    (
        "--grpc-max-heartbeat-streams-per-connection",
        int,
        "heartbeat streams per connection, 0 = no limit [default: 16]",
    ),
    (
        "--grpc-max-heartbeat-streams-per-address",
        int,
        "heartbeat streams per client address, 0 = no limit [default: 64]",
    ),
    (
        "--grpc-heartbeat-stream-idle",
        str,
        "cancel a heartbeat stream that sends no message and takes no answer for this long, ms or "
        "e.g. 30s [default: 30000]",
    ),
    (
        "--grpc-keepalive",
        str,
        "ping a gRPC connection with calls this often, ms or e.g. 30s [default: 30000]",
    ),
    (
        "--grpc-keepalive-timeout",
        str,
        "close a gRPC connection whose ping is not answered in time [default: 10000]",
    ),
    ("--grpc-idle-timeout", str, "close a gRPC connection without calls for this long [default: 300000]"),
    (
        "--grpc-handshake-timeout",
        str,
        "close a new gRPC connection whose handshake takes longer [default: 10000]",
    ),
    (
        "--grpc-max-stalled",
        int,
        "gRPC calls whose request message is over 1 s late (each holds a worker), 0 = no limit [default: 8]",
    ),
    (
        "--grpc-max-stalled-per-connection",
        int,
        "late gRPC calls of one connection, 0 = no limit [default: 2]",
    ),
    (
        "--grpc-max-stalled-per-address",
        int,
        "late gRPC calls of one client address, 0 = no limit [default: 4]",
    ),
    ("--remoting-max-connections", int, "open remoting connections [default: 1024]"),
    (
        "--remoting-max-connections-per-address",
        int,
        "remoting connections per client address, 0 = no limit [default: 256]",
    ),
    (
        "--remoting-max-in-flight",
        int,
        "requests of one remoting connection processed at a time [default: 64]",
    ),
    ("--remoting-idle-timeout", str, "close a remoting connection silent for this long [default: 120000]"),
    (
        "--handover-timeout",
        str,
        "on SIGTERM a leader hands its leadership to a caught-up follower for at most this long, ms "
        "or e.g. 5s; 0 = off [default: 5000]",
    ),
)
_METAVARS = {"--remoting-tls-mode": "enforcing|permissive|disabled"}


def _parameter(flag: str, kind: type, help: str) -> inspect.Parameter:
    name = flag[2:].split("/")[0].replace("-", "_")
    option = typer.Option(None, flag, help=help, metavar=_METAVARS.get(flag))
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=kind)


def serve(**flags: Any) -> None:
    """Run a controller node (single node on loopback by default)."""

    if not debug_enabled():
        # gRPC's C core logs its own lines on stderr (add_port.cc on a busy port, next to mqctl's
        # "cannot listen on ..."): only mqctl's lines, unless --debug or GRPC_VERBOSITY says otherwise.
        # Read when grpc is first imported, which is below.
        os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    # lazy: start-up
    from mqctl.controller import config as serve_config
    from mqctl.serve import run

    config = flags.pop("config")
    cfg = serve_config.load(flags, config)
    raise typer.Exit(run(cfg))


serve.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
    [
        *(_parameter(*row) for row in _FLAGS),
        inspect.Parameter(
            "config",
            inspect.Parameter.KEYWORD_ONLY,
            default=typer.Option(
                None,
                "--config",
                "-c",
                help="TOML config file (keys as the long flags; flags > MQCTL_* env > file)",
            ),
            annotation=str,
        ),
    ],
    return_annotation=None,
)
root_app.command("serve")(serve)
