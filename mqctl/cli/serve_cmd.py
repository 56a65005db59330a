"""`mqctl serve`: start a controller node (see mqctl.serve)."""

from __future__ import annotations

import os

import typer

from mqctl.cli import debug_enabled, root_app


@root_app.command("serve")
def serve(
    listen: str = typer.Option(None, "--listen", help="gRPC HOST:PORT [default: 127.0.0.1:9878]"),
    advertise: str = typer.Option(
        None, "--advertise", help="gRPC HOST:PORT published to clients and other nodes [default: --listen]"
    ),
    raft: str = typer.Option(None, "--raft", help="this node's Raft HOST:PORT [default: 127.0.0.1:9880]"),
    raft_bind: str = typer.Option(
        None,
        "--raft-bind",
        help="HOST:PORT the Raft port listens on, when "
        "the other nodes reach it at another address (--raft) [default: --raft]",
    ),
    peers: str = typer.Option(None, "--peers", help="the other nodes' Raft HOST:PORT,... (none: one node)"),
    data_dir: str = typer.Option(
        None, "--data-dir", help="data directory [default: ~/.local/share/mqctl/controller-HOST-PORT]"
    ),
    group: str = typer.Option(None, "--group", help="controller group name [default: mqctl]"),
    wait_for: int = typer.Option(
        None, "--wait-for", help="first election of a broker set waits for N alive replicas [default: 1]"
    ),
    token: str = typer.Option(None, "--token", help="bearer token required by mutating admin calls"),
    tls_cert: str = typer.Option(
        None,
        "--tls-cert",
        help="server certificate (PEM) of the gRPC port and of --remoting-port (see --remoting-tls-mode)",
    ),
    tls_key: str = typer.Option(None, "--tls-key", help="server private key (PEM) of --tls-cert"),
    tls_ca: str = typer.Option(None, "--tls-ca", help="CA for client certificates (enables mTLS)"),
    cluster_secret: str = typer.Option(
        None, "--cluster-secret", help="Raft password; required when a Raft address is not on loopback"
    ),
    heartbeat_timeout: str = typer.Option(
        None, "--heartbeat-timeout", help="broker heartbeat timeout, ms or e.g. 10s [default: 10000]"
    ),
    scan_interval: str = typer.Option(
        None, "--scan-interval", help="expired-heartbeat scan interval [default: 5000]"
    ),
    enable_elect_unclean_master: bool = typer.Option(
        None,
        "--enable-elect-unclean-master/--disable-elect-unclean-master",
        help="allow electing outside the SyncStateSet",
    ),
    initial_feature_level: int = typer.Option(
        None,
        "--initial-feature-level",
        help="the highest feature "
        "level a new group starts at (a group whose journals are "
        "empty); an existing group keeps its level [default: 0, "
        "the highest every initial member speaks]",
    ),
    auto_feature_level: bool = typer.Option(
        None,
        "--auto-feature-level/--no-auto-feature-level",
        help="when this node leads, raise the group's feature level "
        "once every member speaks a higher one (etcd's cluster "
        "version); off: `mqctl quorum feature-level N` raises it",
    ),
    log_level: str = typer.Option(None, "--log-level", help="debug, info, warning, error"),
    log_format: str = typer.Option(None, "--log-format", help="text or json"),
    remoting_port: int = typer.Option(
        None,
        "--remoting-port",
        help="also serve RocketMQ remoting "
        "(brokers, mqadmin) on this port of the --listen host; RocketMQ's "
        "default is 9878 [default: off]",
    ),
    remoting_tls_mode: str = typer.Option(
        None,
        "--remoting-tls-mode",
        metavar="enforcing|permissive|disabled",
        help="with --tls-cert, the remoting port's TLS as RocketMQ's "
        "tls.server.mode: TLS only, TLS or plaintext, plaintext "
        "[default: enforcing]",
    ),
    advertise_remoting: str = typer.Option(
        None,
        "--advertise-remoting",
        help="remoting HOST:PORT "
        "published to brokers and other nodes [default: the "
        "--advertise host, the --remoting-port]",
    ),
    metrics_address: str = typer.Option(
        None,
        "--metrics-address",
        help="serve Prometheus /metrics, "
        "/health, /ready and a status page over HTTP (HTTPS with "
        "--tls-cert) on HOST:PORT [default: off]",
    ),
    # per-peer limits of the listeners (docs/serve.md#limits)
    grpc_max_message_size: int = typer.Option(
        None, "--grpc-max-message-size", help="largest gRPC request message, bytes [default: 1048576]"
    ),
    grpc_max_streams: int = typer.Option(
        None,
        "--grpc-max-streams",
        help="concurrent gRPC calls per connection (HTTP/2 MAX_CONCURRENT_STREAMS) [default: 100]",
    ),
    grpc_max_connections: int = typer.Option(
        None, "--grpc-max-connections", help="open gRPC connections [default: 1024]"
    ),
    grpc_max_watches: int = typer.Option(
        None, "--grpc-max-watches", help="watch streams on this node [default: 256]"
    ),
    grpc_max_watches_per_connection: int = typer.Option(
        None,
        "--grpc-max-watches-per-connection",
        help="watch streams per connection, 0 = no limit [default: 16]",
    ),
    grpc_max_watches_per_address: int = typer.Option(
        None,
        "--grpc-max-watches-per-address",
        help="watch streams per client address, 0 = no limit [default: 64]",
    ),
    grpc_max_heartbeat_streams: int = typer.Option(
        None, "--grpc-max-heartbeat-streams", help="HeartbeatStream streams on this node [default: 256]"
    ),
    grpc_max_heartbeat_streams_per_connection: int = typer.Option(
        None,
        "--grpc-max-heartbeat-streams-per-connection",
        help="heartbeat streams per connection, 0 = no limit [default: 16]",
    ),
    grpc_max_heartbeat_streams_per_address: int = typer.Option(
        None,
        "--grpc-max-heartbeat-streams-per-address",
        help="heartbeat streams per client address, 0 = no limit [default: 64]",
    ),
    grpc_heartbeat_stream_idle: str = typer.Option(
        None,
        "--grpc-heartbeat-stream-idle",
        help="cancel a heartbeat stream that sends no message "
        "and takes no answer for this long, ms or e.g. 30s "
        "[default: 30000]",
    ),
    grpc_keepalive: str = typer.Option(
        None,
        "--grpc-keepalive",
        help="ping a gRPC connection with calls this often, ms or e.g. 30s [default: 30000]",
    ),
    grpc_keepalive_timeout: str = typer.Option(
        None,
        "--grpc-keepalive-timeout",
        help="close a gRPC connection whose ping is not answered in time [default: 10000]",
    ),
    grpc_idle_timeout: str = typer.Option(
        None,
        "--grpc-idle-timeout",
        help="close a gRPC connection without calls for this long [default: 300000]",
    ),
    grpc_handshake_timeout: str = typer.Option(
        None,
        "--grpc-handshake-timeout",
        help="close a new gRPC connection whose handshake takes longer [default: 10000]",
    ),
    grpc_max_stalled: int = typer.Option(
        None,
        "--grpc-max-stalled",
        help="gRPC calls whose request "
        "message is over 1 s late (each holds a worker), 0 = no limit "
        "[default: 8]",
    ),
    grpc_max_stalled_per_connection: int = typer.Option(
        None,
        "--grpc-max-stalled-per-connection",
        help="late gRPC calls of one connection, 0 = no limit [default: 2]",
    ),
    grpc_max_stalled_per_address: int = typer.Option(
        None,
        "--grpc-max-stalled-per-address",
        help="late gRPC calls of one client address, 0 = no limit [default: 4]",
    ),
    remoting_max_connections: int = typer.Option(
        None, "--remoting-max-connections", help="open remoting connections [default: 1024]"
    ),
    remoting_max_connections_per_address: int = typer.Option(
        None,
        "--remoting-max-connections-per-address",
        help="remoting connections per client address, 0 = no limit [default: 256]",
    ),
    remoting_max_in_flight: int = typer.Option(
        None,
        "--remoting-max-in-flight",
        help="requests of one remoting connection processed at a time [default: 64]",
    ),
    remoting_idle_timeout: str = typer.Option(
        None,
        "--remoting-idle-timeout",
        help="close a remoting connection silent for this long [default: 120000]",
    ),
    handover_timeout: str = typer.Option(
        None,
        "--handover-timeout",
        help="on SIGTERM a leader hands its "
        "leadership to a caught-up follower for at most this long, ms or "
        "e.g. 5s; 0 = off [default: 5000]",
    ),
    config: str = typer.Option(
        None, "--config", "-c", help="TOML config file (keys as the long flags; flags > MQCTL_* env > file)"
    ),
) -> None:
    """Run a controller node (single node on loopback by default)."""

    if not debug_enabled():
        # gRPC's C core logs its own lines on stderr (add_port.cc on a busy port, next to mqctl's
        # "cannot listen on ..."): only mqctl's lines, unless --debug or GRPC_VERBOSITY says otherwise.
        # Read when grpc is first imported, which is below.
        os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    # lazy: start-up
    from mqctl.controller import config as serve_config
    from mqctl.serve import run

    flags = dict(
        listen=listen,
        advertise=advertise,
        raft=raft,
        raft_bind=raft_bind,
        peers=peers,
        data_dir=data_dir,
        group=group,
        wait_for=wait_for,
        token=token,
        tls_cert=tls_cert,
        tls_key=tls_key,
        tls_ca=tls_ca,
        cluster_secret=cluster_secret,
        heartbeat_timeout=heartbeat_timeout,
        scan_interval=scan_interval,
        enable_elect_unclean_master=enable_elect_unclean_master,
        initial_feature_level=initial_feature_level,
        auto_feature_level=auto_feature_level,
        log_level=log_level,
        log_format=log_format,
        remoting_port=remoting_port,
        advertise_remoting=advertise_remoting,
        remoting_tls_mode=remoting_tls_mode,
        metrics_address=metrics_address,
        grpc_max_message_size=grpc_max_message_size,
        grpc_max_streams=grpc_max_streams,
        grpc_max_connections=grpc_max_connections,
        grpc_max_watches=grpc_max_watches,
        grpc_max_watches_per_connection=grpc_max_watches_per_connection,
        grpc_max_watches_per_address=grpc_max_watches_per_address,
        grpc_max_heartbeat_streams=grpc_max_heartbeat_streams,
        grpc_max_heartbeat_streams_per_connection=grpc_max_heartbeat_streams_per_connection,
        grpc_max_heartbeat_streams_per_address=grpc_max_heartbeat_streams_per_address,
        grpc_heartbeat_stream_idle=grpc_heartbeat_stream_idle,
        grpc_keepalive=grpc_keepalive,
        grpc_keepalive_timeout=grpc_keepalive_timeout,
        grpc_idle_timeout=grpc_idle_timeout,
        grpc_handshake_timeout=grpc_handshake_timeout,
        grpc_max_stalled=grpc_max_stalled,
        grpc_max_stalled_per_connection=grpc_max_stalled_per_connection,
        grpc_max_stalled_per_address=grpc_max_stalled_per_address,
        remoting_max_connections=remoting_max_connections,
        remoting_max_connections_per_address=remoting_max_connections_per_address,
        remoting_max_in_flight=remoting_max_in_flight,
        remoting_idle_timeout=remoting_idle_timeout,
        handover_timeout=handover_timeout,
    )
    cfg = serve_config.load(flags, config)
    raise typer.Exit(run(cfg))
