"""`mqctl serve` settings: flags > MQCTL_* environment > TOML file > defaults.

Kept apart from the CLI so the precedence and validation can be tested without a process.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, fields
from typing import Any

from mqctl.address import is_loopback, parse_address
from mqctl.errors import UsageError


@dataclass
class ServeConfig:
    listen: str = "127.0.0.1:9878"
    advertise: str = ""  # the gRPC address published to clients; default: listen
    raft: str = "127.0.0.1:9880"  # this node's Raft address: its id, what the other nodes dial
    raft_bind: str = ""  # where the Raft port listens; default: raft
    peers: str = ""
    data_dir: str = ""
    group: str = "mqctl"
    wait_for: int = 1
    token: str = ""
    tls_cert: str = ""
    tls_key: str = ""
    tls_ca: str = ""
    cluster_secret: str = ""
    heartbeat_timeout: int = 10_000  # ms
    scan_interval: int = 5_000  # ms
    enable_elect_unclean_master: bool = False
    notify_broker_role_changed: bool = True
    initial_feature_level: int = 0  # a new group's highest starting level; 0 = all its members speak
    auto_feature_level: bool = False  # raise the level once every member speaks a higher one
    log_level: str = "info"
    log_format: str = "text"
    remoting_port: int = 0  # RocketMQ remoting front door on the --listen host; 0 = off
    advertise_remoting: str = ""  # the remoting address published; default: advertised host, port
    # Per-peer limits of the listeners (docs/serve.md#limits; GrpcLimits, RemotingServer)
    grpc_max_message_size: int = 1 << 20  # bytes of one request message
    grpc_max_streams: int = 100  # concurrent streams (calls) per connection
    grpc_max_connections: int = 1024
    grpc_max_watches: int = 256  # watch streams on this node
    grpc_max_watches_per_connection: int = 16  # 0 = no limit
    grpc_max_watches_per_address: int = 64  # 0 = no limit
    grpc_max_heartbeat_streams: int = 256  # HeartbeatStream streams on this node
    grpc_max_heartbeat_streams_per_connection: int = 16  # 0 = no limit
    grpc_max_heartbeat_streams_per_address: int = 64  # 0 = no limit
    grpc_heartbeat_stream_idle: int = 30_000  # ms without a message or an answer taken, then cancelled
    grpc_keepalive: int = 30_000  # ms between the server's pings on a connection with calls
    grpc_keepalive_timeout: int = 10_000  # ms for a ping's answer, else the connection is closed
    grpc_idle_timeout: int = 300_000  # ms without calls, then the connection is closed
    grpc_handshake_timeout: int = 10_000  # ms for a new connection's handshake
    grpc_max_stalled: int = 8  # calls whose request message is over 1 s late
    grpc_max_stalled_per_connection: int = 2  # 0 = no limit
    grpc_max_stalled_per_address: int = 4  # 0 = no limit
    remoting_max_connections: int = 1024
    remoting_max_connections_per_address: int = 256  # 0 = no limit
    remoting_max_in_flight: int = 64  # requests processed at a time per connection
    remoting_idle_timeout: int = 120_000  # ms of silence, then the connection is closed
    # with tls_cert: RocketMQ's tls.server.mode of the remoting port (enforcing, permissive, disabled)
    remoting_tls_mode: str = "enforcing"
    # HTTP /metrics, /health, /ready and the status page (docs/serve.md#metrics-and-health-over-http)
    metrics_address: str = ""  # HOST:PORT; "" = off
    # ms a leader stopped by SIGTERM tries to hand its leadership to a caught-up follower; 0 = off
    handover_timeout: int = 5_000

    def advertise_address(self) -> str:
        return self.advertise or self.listen

    def remoting_listen(self) -> str:
        return f"{self.listen.rpartition(':')[0]}:{self.remoting_port}" if self.remoting_port else ""

    def remoting_advertise(self) -> str:
        """The remoting address published to clients: the advertised host, the remoting port."""
        if not self.remoting_port:
            return ""
        if self.advertise_remoting:
            return self.advertise_remoting
        return f"{self.advertise_address().rpartition(':')[0]}:{self.remoting_port}"

    def raft_bind_address(self) -> str:
        return self.raft_bind or self.raft

    def peer_list(self) -> list[str]:
        return [p.strip() for p in re.split(r"[,;]", self.peers) if p.strip()]


WILDCARDS = {"0.0.0.0", "::", ""}
DURATION_KEYS = {
    "heartbeat_timeout",
    "scan_interval",
    "grpc_keepalive",
    "grpc_keepalive_timeout",
    "grpc_idle_timeout",
    "grpc_handshake_timeout",
    "grpc_heartbeat_stream_idle",
    "remoting_idle_timeout",
    "handover_timeout",
}
ZERO_MEANS_OFF = {"handover_timeout"}  # durations that may be 0
# integer limits and their smallest value (0 = no limit where the minimum is 0)
LIMIT_MINIMUMS = {
    "grpc_max_message_size": 1024,
    "grpc_max_streams": 1,
    "grpc_max_connections": 1,
    "grpc_max_watches": 1,
    "grpc_max_watches_per_connection": 0,
    "grpc_max_watches_per_address": 0,
    "remoting_max_connections": 1,
    "remoting_max_connections_per_address": 0,
    "remoting_max_in_flight": 1,
    "grpc_max_stalled": 0,
    "grpc_max_stalled_per_connection": 0,
    "grpc_max_stalled_per_address": 0,
    "grpc_max_heartbeat_streams": 1,
    "grpc_max_heartbeat_streams_per_connection": 0,
    "grpc_max_heartbeat_streams_per_address": 0,
}
MIN_DURATION_MS = 100


def parse_duration_ms(value: Any, key: str) -> int:
    """Accept 1500, "1500", "1500ms", "1.5s"."""
    text = str(value).strip().lower()
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(ms|s)?", text)
    if not m:
        raise UsageError(f"bad value for {key}: {value!r} (expected milliseconds, or e.g. 500ms, 2s)")
    number = float(m.group(1))
    ms = int(number * 1000) if m.group(2) == "s" else int(number)
    if ms < MIN_DURATION_MS:
        raise UsageError(f"bad value for {key}: {value!r} is below the minimum of {MIN_DURATION_MS} ms")
    return ms


def _coerce(key: str, value: Any, source: str) -> Any:
    kinds = {f.name: f.type for f in fields(ServeConfig)}
    kind = kinds[key]
    if key in DURATION_KEYS:
        if key in ZERO_MEANS_OFF and re.fullmatch(r"0+(\.0*)?\s*(ms|s)?", str(value).strip().lower()):
            return 0
        return parse_duration_ms(value, f"{key} ({source})")
    if kind == "int":
        try:
            number = int(str(value))
        except ValueError:
            raise UsageError(f"bad value for {key} ({source}): {value!r} is not an integer") from None
        if key == "wait_for" and not 1 <= number <= 64:
            raise UsageError(f"bad value for wait_for ({source}): {number} (expected 1 to 64)")
        if key == "initial_feature_level":
            from mqctl.controller.records import FEATURE_LEVELS, MAX_FEATURE_LEVEL  # lazy: start-up

            if number and number not in FEATURE_LEVELS:
                raise UsageError(
                    f"bad value for initial_feature_level ({source}): {number} (expected 1 to "
                    f"{MAX_FEATURE_LEVEL}, 0 = the highest every initial member speaks)"
                )
        if key == "remoting_port" and not 0 <= number <= 65535:
            raise UsageError(f"bad value for remoting_port ({source}): {number} (1 to 65535, 0 = off)")
        if key in LIMIT_MINIMUMS and not LIMIT_MINIMUMS[key] <= number <= 2**31 - 1:
            least = LIMIT_MINIMUMS[key]
            raise UsageError(
                f"bad value for {key} ({source}): {number} (expected {least} or more"
                + (", 0 = no limit)" if least == 0 else ")")
            )
        return number
    if kind == "bool":
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off"):
            return False
        raise UsageError(f"bad value for {key} ({source}): {value!r} (expected true or false)")
    return str(value)


def load(
    flags: dict[str, Any], config_file: str | None = None, environ: dict[str, str] | None = None
) -> ServeConfig:
    env = os.environ if environ is None else environ
    names = {f.name for f in fields(ServeConfig)}
    values: dict[str, Any] = {}
    path = config_file or env.get("MQCTL_CONFIG")
    if path:
        try:
            with open(path, "rb") as fh:
                doc = tomllib.load(fh)
        except OSError as exc:
            raise UsageError(f"cannot read config file {path}: {exc.strerror}") from exc
        except tomllib.TOMLDecodeError as exc:
            raise UsageError(f"config file {path} is not valid TOML: {exc}") from exc
        section = doc.get("serve", doc)
        for raw_key, value in section.items():
            key = raw_key.replace("-", "_")
            if key not in names:
                raise UsageError(f"unknown key {raw_key!r} in config file {path}")
            values[key] = _coerce(key, value, f"config file {path}")
    for key in names:
        env_key = "MQCTL_" + key.upper()
        if env_key in env and env[env_key] != "":
            values[key] = _coerce(key, env[env_key], f"environment {env_key}")
    for key, value in flags.items():
        if value is not None:
            values[key] = _coerce(key, value, "--" + key.replace("_", "-"))
    cfg = ServeConfig(**values)
    validate(cfg)
    return cfg


def validate(cfg: ServeConfig) -> None:
    listen_host, _ = parse_address(cfg.listen, "--listen address")
    if cfg.advertise:
        adv_host, _ = parse_address(cfg.advertise, "--advertise address")
        if adv_host in WILDCARDS:
            raise UsageError(f"--advertise {cfg.advertise} is not an address clients can dial")
    elif listen_host in WILDCARDS:
        raise UsageError(
            f"--listen {cfg.listen} is not an address clients can dial; set --advertise "
            "HOST:PORT to the address the other nodes and clients should use"
        )
    parse_address(cfg.raft, "--raft address")
    if cfg.raft_bind:
        parse_address(cfg.raft_bind, "--raft-bind address")
    if cfg.advertise_remoting:
        host, _ = parse_address(cfg.advertise_remoting, "--advertise-remoting address")
        if host in WILDCARDS:
            raise UsageError(
                f"--advertise-remoting {cfg.advertise_remoting} is not an address clients can dial"
            )
        if not cfg.remoting_port:
            raise UsageError("--advertise-remoting needs --remoting-port (remoting is off)")
    if cfg.metrics_address:
        parse_address(cfg.metrics_address, "--metrics-address")
    for peer in cfg.peer_list():
        parse_address(peer, "--peers entry")
    if cfg.raft in cfg.peer_list():
        raise UsageError(f"--peers lists this node's own Raft address {cfg.raft}; give only the others")
    exposed = [
        a
        for a in [cfg.raft, cfg.raft_bind_address(), *cfg.peer_list()]
        if not is_loopback(parse_address(a, "address")[0])
    ]
    if exposed and not cfg.cluster_secret:
        raise UsageError(
            f"Raft address {exposed[0]} is not on loopback: Raft traffic is pickled, so anyone who can "
            "reach the port could run code. Set --cluster-secret (or MQCTL_CLUSTER_SECRET) on every node"
        )
    if bool(cfg.tls_cert) != bool(cfg.tls_key):
        raise UsageError("--tls-cert and --tls-key go together: give both or neither")
    if cfg.tls_ca and not cfg.tls_cert:
        raise UsageError("--tls-ca (client certificates) needs --tls-cert and --tls-key")
    for f in (cfg.tls_cert, cfg.tls_key, cfg.tls_ca):
        if f and not os.path.isfile(f):
            raise UsageError(f"TLS file {f} does not exist")
    if cfg.remoting_tls_mode not in ("enforcing", "permissive", "disabled"):
        raise UsageError(
            f"bad remoting_tls_mode {cfg.remoting_tls_mode!r} (enforcing: TLS only, "
            "permissive: TLS or plaintext, disabled: plaintext)"
        )
    if cfg.log_level.lower() not in ("debug", "info", "warning", "error"):
        raise UsageError(f"bad --log-level {cfg.log_level!r} (debug, info, warning, error)")
    if cfg.log_format not in ("text", "json"):
        raise UsageError(f"bad --log-format {cfg.log_format!r} (text or json)")
