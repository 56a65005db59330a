"""What one controller node is started with (`mqctl serve` makes it from its ServeConfig,
mqctl/controller/config.py), and the values it answers for itself.

Apart from the node so that its parts and its callers read the settings without the node's wiring.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from mqctl.controller import core


@dataclass
class NodeSettings:
    raft_address: str
    partners: list[str]
    grpc_address: str
    data_dir: str | None
    raft_bind: str = ""  # where the Raft port listens (--raft-bind); "" = raft_address
    remoting_address: str = ""  # RocketMQ remoting front door, published like grpc_address
    group: str = "mqctl"
    cluster_secret: str | None = None
    wait_for: int = 1
    heartbeat_timeout_ms: int = 10_000
    scan_interval_ms: int = 5_000
    enable_elect_unclean_master: bool = False
    notify_broker_role_changed: bool = True
    # the highest feature level a new group starts at (0: the highest its initial members speak)
    initial_feature_level: int = 0
    # raise the level on its own once every member speaks a higher one (etcd's cluster version)
    auto_feature_level: bool = False
    extra_config: dict[str, str] = field(default_factory=dict)

    def critical_options(self) -> dict[str, str]:
        """Options every node of a group must agree on (a node refuses to join otherwise)."""
        return {
            "group": self.group,
            "waitFor": str(self.wait_for),
            "enableElectUncleanMaster": str(self.enable_elect_unclean_master).lower(),
        }

    def initial_config(self) -> dict[str, str]:
        cfg = core.default_config()
        cfg.update(
            {
                "waitFor": str(self.wait_for),
                "enableElectUncleanMaster": str(self.enable_elect_unclean_master).lower(),
                "notifyBrokerRoleChanged": str(self.notify_broker_role_changed).lower(),
                "heartbeatTimeoutMillis": str(self.heartbeat_timeout_ms),
                "scanNotActiveBrokerInterval": str(self.scan_interval_ms),
            }
        )
        cfg.update(self.extra_config)
        return cfg

    def local_config(self, others: list[str]) -> dict[str, str]:
        """The values of core.NODE_CONFIG_KEYS: this node's deployment, RocketMQ's names where it
        has them (docs/controller-rules.md); ``others``: the other members as the Raft log has them now."""
        members = sorted([self.raft_address, *others])
        port = (self.remoting_address or self.grpc_address).rpartition(":")[2]
        return {
            "rocketmqHome": self.data_dir or "",
            "configStorePath": os.path.join(self.data_dir, "raft.journal") if self.data_dir else "",
            "controllerStorePath": self.data_dir or "",
            "listenPort": port,
            "controllerDLegerGroup": self.group,
            "controllerDLegerPeers": ";".join(f"{m}-{m}" for m in members),
            "controllerDLegerSelfId": self.raft_address,
            "controllerGroup": self.group,
            "raftAddress": self.raft_address,
            "raftPeers": ",".join(self.partners),
            "listenAddress": self.grpc_address,
            "remotingAddress": self.remoting_address,
        }
