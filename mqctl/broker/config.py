"""Broker agent settings: RocketMQ's broker config keys (reference sections 5, 7.1) in seconds.

Defaults are RocketMQ's; tests shrink every period. Times are seconds (floats) so that a
simulation can run a whole failover in a couple of seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mqctl.controller.election import DEFAULT_ELECTION_PRIORITY
from mqctl.errors import UsageError

__all__ = ["AgentConfig"]


@dataclass
class AgentConfig:
    cluster_name: str
    broker_name: str
    store_dir: str
    controller_addresses: str = ""
    # "grpc" (mqctl's API) or "remoting" (RocketMQ's protocol: a RocketMQ controller or
    # `mqctl serve --remoting-port`); with remoting, roles come from GetReplicaInfo polling.
    controller_protocol: str = "grpc"
    # Where this broker's mqctl.v1.Broker service listens ("host:0" = any free port); the bound
    # address is what the broker registers with the controller.
    listen: str = "127.0.0.1:0"
    # "grpc": serve and call peers over gRPC; "local": call agents of this process directly (scale
    # runs: no server, no sockets between replicas; address is then a name, e.g. "broker-a-1").
    peer_transport: str = "grpc"
    address: str | None = None  # with peer_transport="local": the agent's name
    storage: str = "commitlog"  # "commitlog" (RocketMQ files) or "offsets" (offsets only)
    commitlog_file_size: int = 1 << 20  # RocketMQ's 1 GiB is pointless for tests
    # brokerHeartbeatInterval / controllerHeartBeatTimeoutMills
    heartbeat_interval: float = 1.0
    heartbeat_timeout_ms: int = 10000
    # syncBrokerMetadataPeriod: GetReplicaInfo polling, the backstop for lost notifications
    sync_metadata_period: float = 5.0
    # checkSyncStateSetPeriod / haMaxTimeSlaveNotCatchup
    check_sync_state_set_period: float = 5.0
    ha_max_time_slave_not_catchup: float = 15.0
    all_ack_in_sync_state_set: bool = False
    async_learner: bool = False
    election_priority: int = DEFAULT_ELECTION_PRIORITY  # brokerElectionPriority: lower wins
    watch_role_changes: bool = True  # WatchRoleChanges stream (polling always runs)
    # replication
    fetch_max_bytes: int = 256 * 1024
    fetch_wait: float = 0.5  # long-poll time on the master
    retry_interval: float = 0.5  # pause after a failed fetch/handshake/controller call
    put_timeout: float = 5.0  # how long a write waits for the SyncStateSet's acks
    # registration: RocketMQ retries 5 times with a random sleep < 1 s, then every 5 s
    register_retry_fast: int = 5
    register_retry_slow: float = 5.0
    controller_timeout: float = 5.0  # per controller call, retries included
    # ControllerClient's security keywords (token, tls_ca, tls_cert, tls_key, server_name): the
    # CLI's --token and --tls-* options (mqctl.cli.admin_cmd.Conn.security)
    controller_security: dict[str, Any] = field(default_factory=dict)
    options: dict[str, str] = field(default_factory=dict)  # RegisterBroker options (mqctl extension)

    def validate(self) -> None:
        for name in ("cluster_name", "broker_name"):
            v = getattr(self, name)
            if not v or "#" in v or "\n" in v:
                raise UsageError(f"{name} {v!r}: must be non-empty, without '#' or newline")
        if self.peer_transport not in ("grpc", "local"):
            raise UsageError(f"peer_transport {self.peer_transport!r}: expected grpc or local")
        if self.peer_transport == "local" and not self.address:
            raise UsageError("peer_transport 'local' needs an address (a name unique in this process)")
        if self.controller_protocol not in ("grpc", "remoting"):
            raise UsageError(f"controller_protocol {self.controller_protocol!r}: expected grpc or remoting")
        if self.storage not in ("commitlog", "offsets"):
            raise UsageError(f"storage {self.storage!r}: expected commitlog or offsets")
        if not self.controller_addresses:
            raise UsageError("controller_addresses is empty")
        for name in (
            "heartbeat_interval",
            "sync_metadata_period",
            "check_sync_state_set_period",
            "ha_max_time_slave_not_catchup",
            "fetch_wait",
            "retry_interval",
            "put_timeout",
            "controller_timeout",
        ):
            if getattr(self, name) <= 0:
                raise UsageError(f"{name} must be positive")
