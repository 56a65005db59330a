"""RocketMQ's controller config keys, their defaults and bounds, and what mqctl honours of them:
the data the state's config is normalised and read against (no handler here: configuration.py)."""

from __future__ import annotations

import re
from collections.abc import Mapping

from mqctl.controller.core.context import CONFIG_BLACKLIST, DEFAULT_HEARTBEAT_TIMEOUT_MS, HISTORY_LEVEL

# --------------------------------------------------------------------------------------------
# Config

_BOOL_KEYS = ("enableElectUncleanMaster", "notifyBrokerRoleChanged", "isProcessReadEvent")
_INT_KEYS: dict[str, tuple[int, int]] = {
    "scanNotActiveBrokerInterval": (1, 86_400_000),
    "scanInactiveMasterInterval": (1, 86_400_000),
    "electMasterMaxRetryCount": (0, 1000),
    "waitFor": (1, 1000),
    "heartbeatTimeoutMillis": (1, 86_400_000),
    "historyMaxEntries": (0, 1_000_000),
}
_ENUM_KEYS: dict[str, tuple[str, ...]] = {"controllerType": ("DLedger", "jRaft")}
_DEFAULT_CONFIG: dict[str, str] = {
    "controllerType": "DLedger",
    "electMasterMaxRetryCount": "3",
    "enableElectUncleanMaster": "false",
    "heartbeatTimeoutMillis": str(DEFAULT_HEARTBEAT_TIMEOUT_MS),
    "isProcessReadEvent": "false",
    "notifyBrokerRoleChanged": "true",
    "scanInactiveMasterInterval": "5000",
    "scanNotActiveBrokerInterval": "5000",
    "waitFor": "1",
}
_INT_RE = re.compile(r"^[+-]?[0-9]+$")
# Replicated keys of a later feature level: absent from the default config, so that the state (and its
# hash) of a group below that level stays the one its older members compute.
_LEVEL_KEYS: dict[str, tuple[int, str]] = {"historyMaxEntries": (HISTORY_LEVEL, "10000")}

# The keys an UpdateConfig changes: each changes what mqctl does (docs/controller-rules.md). The other
# replicated keys above are kept for the snapshots and logs that hold them (their values are still
# answered), but mqctl does not honour them, so an update leaves them alone.
HONOURED_CONFIG_KEYS = frozenset(
    {
        "enableElectUncleanMaster",
        "scanNotActiveBrokerInterval",
        "waitFor",
        "heartbeatTimeoutMillis",
        "notifyBrokerRoleChanged",
        "historyMaxEntries",
    }
)

# RocketMQ's GET_CONTROLLER_CONFIG answer is ControllerManager's `new Configuration(log,
# controllerConfig, nettyServerConfig)`: every non-null field of ControllerConfig and NettyServerConfig
# as MixAll.object2Properties writes it (the value's toString()). These are RocketMQ 5.x's defaults
# (tests/interop/test_controller_config_interop.py compares them with RocketMQ's own classes); the
# node answers the keys of NODE_CONFIG_KEYS itself, and the replicated config (above) overrides.
ROCKETMQ_CONFIG: dict[str, str] = {
    # ControllerConfig
    "configBlackList": "configBlackList;configStorePath",
    "controllerRequestThreadPoolQueueCapacity": "50000",
    "controllerThreadPoolNums": "16",
    "controllerType": "DLedger",
    "electMasterMaxRetryCount": "3",
    "enableElectUncleanMaster": "false",
    "isProcessReadEvent": "false",
    "jraftConfig": "org.apache.rocketmq.common.JraftConfig@0",  # Object.toString() of a JraftConfig
    "mappedFileSize": "1073741824",
    "metricGrpcExporterIntervalInMills": "60000",
    "metricGrpcExporterTimeOutInMills": "3000",
    "metricLoggingExporterIntervalInMills": "10000",
    "metricsExporterType": "DISABLE",
    "metricsGrpcExporterHeader": "",
    "metricsGrpcExporterTarget": "",
    "metricsInDelta": "false",
    "metricsLabel": "",
    "metricsPromExporterHost": "",
    "metricsPromExporterPort": "5557",
    "notifyBrokerRoleChanged": "true",
    "scanInactiveMasterInterval": "5000",
    "scanNotActiveBrokerInterval": "5000",
    # NettyServerConfig (mqctl binds to the host of --listen: listenAddress)
    "bindAddress": "0.0.0.0",
    "enableShutdownGracefully": "false",
    "serverAsyncSemaphoreValue": "64",
    "serverCallbackExecutorThreads": "0",
    "serverChannelMaxIdleTimeSeconds": "120",
    "serverNettyWorkerGroupEnable": "true",
    "serverOnewaySemaphoreValue": "256",
    "serverPooledByteBufAllocatorEnable": "true",
    "serverSelectorThreads": "3",
    "serverSocketBacklog": "1024",
    "serverSocketRcvBufSize": "0",
    "serverSocketSndBufSize": "0",
    "serverWorkerThreads": "8",
    "shutdownWaitTimeSeconds": "30",
    "useEpollNativeSelector": "false",
    "writeBufferHighWaterMark": "0",
    "writeBufferLowWaterMark": "0",
}
# Keys whose values describe one node and its deployment: the node answers them
# (NodeSettings.local_config). The first seven are RocketMQ's (ControllerConfig's rocketmqHome,
# configStorePath, controllerStorePath and DLedger settings, NettyServerConfig's listenPort), the
# others mqctl's own.
NODE_CONFIG_KEYS: tuple[str, ...] = (
    "rocketmqHome",
    "configStorePath",
    "controllerStorePath",
    "listenPort",
    "controllerDLegerGroup",
    "controllerDLegerPeers",
    "controllerDLegerSelfId",
    "controllerGroup",
    "raftAddress",
    "raftPeers",
    "listenAddress",
    "remotingAddress",
)
_MQCTL_NODE_KEYS = frozenset(
    {"controllerGroup", "raftAddress", "raftPeers", "listenAddress", "remotingAddress"}
)
# GetConfig's own key: RocketMQ's keys (and the replicated ones) that mqctl answers but does not
# honour; an update of one of them is ignored (and named in the node's log), as of an unknown key.
NOT_HONOURED_KEY = "mqctlNotHonoured"
NOT_HONOURED_CONFIG_KEYS: tuple[str, ...] = tuple(
    sorted(
        ({*ROCKETMQ_CONFIG, *NODE_CONFIG_KEYS, *_DEFAULT_CONFIG} - _MQCTL_NODE_KEYS)
        - HONOURED_CONFIG_KEYS
        - CONFIG_BLACKLIST
    )
)


def _normalize_config_value(key: str, value: object) -> str:
    """The canonical string for a config value; raises ValueError with an operator-facing text."""
    if key not in _DEFAULT_CONFIG and key not in _LEVEL_KEYS:
        raise ValueError(f"Unknown config key: {key}")
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, int):
        text = str(value)
    elif isinstance(value, str):
        text = value.strip()
    else:
        raise ValueError(f"Invalid value for config {key}: must be a string")
    if key in _BOOL_KEYS:
        if text.lower() not in ("true", "false"):
            raise ValueError(f"Invalid value for config {key}: {text!r} is not true or false")
        return text.lower()
    if key in _INT_KEYS:
        lo, hi = _INT_KEYS[key]
        if not _INT_RE.match(text) or len(text) > 20:
            raise ValueError(f"Invalid value for config {key}: {text!r} is not an integer")
        n = int(text)
        if not lo <= n <= hi:
            raise ValueError(f"Invalid value for config {key}: {n} is out of range [{lo}, {hi}]")
        return str(n)
    allowed = _ENUM_KEYS[key]
    if text not in allowed:
        raise ValueError(f"Invalid value for config {key}: {text!r} is not one of {', '.join(allowed)}")
    return text


def default_config(**overrides: object) -> dict[str, str]:
    """The default replicated controller config (strings), with validated overrides.

    Raises ValueError for an unknown key or an invalid value.
    """
    cfg = dict(_DEFAULT_CONFIG)
    for key, value in overrides.items():
        if key in CONFIG_BLACKLIST:
            raise ValueError(f"Config key {key} can not be set")
        cfg[key] = _normalize_config_value(key, value)
    return cfg


def _cfg_bool(config: Mapping[str, str], key: str) -> bool:
    return str(config.get(key, _DEFAULT_CONFIG[key])).lower() == "true"


def _cfg_int(config: Mapping[str, str], key: str) -> int:
    default = _DEFAULT_CONFIG[key] if key in _DEFAULT_CONFIG else _LEVEL_KEYS[key][1]
    try:
        return int(config.get(key, default))
    except ValueError:
        return int(default)
