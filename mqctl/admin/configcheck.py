"""`mqctl check config`: a broker or controller configuration that silently makes acknowledged data losable
or failover impossible, found before it bites.

Pure rules over parsed properties (RocketMQ's broker.conf / controller.conf, its key names and defaults);
reading the files and asking live brokers and controllers is the caller's. Each finding has a severity
(WARN, CRIT), the reason, where the rule comes from (RocketMQ's source or issue) and the fix.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from mqctl.camel import camel_fields

__all__ = [
    "CRIT",
    "RULES",
    "WARN",
    "ConfigFile",
    "Finding",
    "check",
    "config_file",
    "parse_properties",
    "verdict",
]

WARN, CRIT = "WARN", "CRIT"
_RANK = {WARN: 1, CRIT: 2}

RULES = (
    "all-ack",
    "min-in-sync",
    "unclean-election",
    "ignored-role",
    "controller-addr",
    "heartbeat",
    "store-paths",
    "controller-store-path",
    "set-consistency",
    "known-bad-version",
    "kind",
)


@dataclass(frozen=True)
class ConfigFile:
    """One configuration: `name` (its path, or `broker 127.0.0.1:10911` when read online), its keys and
    the line of each key, `kind` broker / controller / unknown, and the text (for version names). The
    live values of a running broker or controller skip the rules about what is configured but
    overridden at run time (brokerRole, brokerId: the controller's; controllerStorePath)."""

    name: str
    props: dict[str, str]
    lines: dict[str, int] = field(default_factory=dict)
    text: str = ""
    live: bool = False  # the running values (GET_BROKER_CONFIG, GetControllerConfig), not a file

    @property
    def kind(self) -> str:
        p = self.props
        if p.get("enableControllerInNamesrv", "").lower() == "true" or any(k in p for k in _CONTROLLER_KEYS):
            return "controller"
        if any(k in p for k in _BROKER_KEYS):
            return "broker"
        return "unknown"

    def get(self, key: str) -> str | None:
        return self.props.get(key)

    def flag(self, key: str, default: bool) -> bool:
        v = self.props.get(key)
        return default if v is None else v.strip().lower() == "true"

    def num(self, key: str, default: int) -> int:
        v = self.props.get(key)
        try:
            return default if v is None else int(v.strip())
        except ValueError:
            return default

    @property
    def broker_set(self) -> str:
        return f"{self.props.get('brokerClusterName', 'DefaultCluster')}/{self.props.get('brokerName', '')}"


_CONTROLLER_KEYS = (
    "controllerDLegerPeers",
    "controllerDLegerGroup",
    "controllerDLegerSelfId",
    "controllerType",
    "jRaftInitConf",
    "jRaftServerId",
    "controllerStorePath",
    "enableElectUncleanMaster",
    "scanNotActiveBrokerInterval",
)
_BROKER_KEYS = (
    "brokerName",
    "brokerClusterName",
    "brokerRole",
    "brokerId",
    "storePathRootDir",
    "enableControllerMode",
    "controllerAddr",
    "namesrvAddr",
)


@dataclass(frozen=True)
class Finding:
    severity: str
    rule: str
    files: list[str]
    keys: list[str]
    message: str
    why: str
    source: str
    fix: str

    def to_dict(self) -> dict[str, Any]:
        return camel_fields(self)


# ---- java.util.Properties.load, the format RocketMQ reads its -c file with -------------------------

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(s: str) -> str:
    out, i = [], 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            n = s[i + 1]
            if n == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", s[i + 2 : i + 6]):
                out.append(chr(int(s[i + 2 : i + 6], 16)))
                i += 6
                continue
            out.append(_ESCAPES.get(n, n))
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def parse_properties(text: str) -> tuple[dict[str, str], dict[str, int]]:
    """(key -> value, key -> line number) as java.util.Properties.load reads them: comments (# !), logical
    lines continued by a trailing backslash, the key ending at the first unescaped '=', ':' or blank."""
    props: dict[str, str] = {}
    lines: dict[str, int] = {}
    phys = text.splitlines()
    i = 0
    while i < len(phys):
        start = i
        line = phys[i].lstrip()
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continued(line) and i < len(phys):
            line = line[:-1] + phys[i].lstrip()
            i += 1
        if _continued(line):
            line = line[:-1]
        m = re.match(r"((?:\\.|[^=:\s\\])*)\s*[=:]?\s*(.*)$", line, re.S)
        key, value = (m.group(1), m.group(2)) if m else (line, "")
        k = _unescape(key)
        props[k] = _unescape(value)
        lines[k] = start + 1
    return props, lines


def _continued(line: str) -> bool:
    n = len(line) - len(line.rstrip("\\"))
    return n % 2 == 1


def config_file(name: str, text: str) -> ConfigFile:
    props, lines = parse_properties(text)
    return ConfigFile(name, props, lines, text)


# ---- the rules --------------------------------------------------------------------------------------


def _where(f: ConfigFile, *keys: str) -> str:
    at = [f"{k} (line {f.lines[k]})" for k in keys if k in f.lines]
    return f"{f.name}: " + (", ".join(at) if at else ", ".join(keys) + " (default)")


def _all_ack(brokers: Sequence[ConfigFile]) -> Iterable[Finding]:
    for f in brokers:
        if f.flag("enableControllerMode", False) and not f.flag("allAckInSyncStateSet", False):
            yield Finding(
                CRIT,
                "all-ack",
                [f.name],
                ["allAckInSyncStateSet"],
                f"{_where(f, 'allAckInSyncStateSet')}: allAckInSyncStateSet="
                f"{f.get('allAckInSyncStateSet') or 'false'} with enableControllerMode=true",
                "a write is acknowledged once minInSyncReplicas replicas have it, not every "
                "member of the SyncStateSet, so the controller can elect a SyncStateSet member "
                "without it: acknowledged messages are lost on failover",
                "MessageStoreConfig.allAckInSyncStateSet (default false); AutoSwitchHAService."
                "computeConfirmOffset; docs/en/controller/deploy.md",
                "allAckInSyncStateSet=true on every broker of the set",
            )


def _min_in_sync(brokers: Sequence[ConfigFile]) -> Iterable[Finding]:
    per_set: dict[str, int] = {}
    for f in brokers:
        per_set[f.broker_set] = per_set.get(f.broker_set, 0) + 1
    for f in brokers:
        want = f.num("minInSyncReplicas", 1)
        total = f.num("totalReplicas", 0) if f.get("totalReplicas") else 0
        replicas = max(total, per_set[f.broker_set] if per_set[f.broker_set] > 1 else 0)
        if replicas and want > replicas:
            yield Finding(
                CRIT,
                "min-in-sync",
                [f.name],
                ["minInSyncReplicas"],
                f"{_where(f, 'minInSyncReplicas')}: minInSyncReplicas={want} but {f.broker_set} "
                f"has {replicas} replicas",
                "the master refuses every write (IN_SYNC_REPLICAS_NOT_ENOUGH) once fewer than "
                "minInSyncReplicas replicas are in sync, and there can never be that many",
                "MessageStoreConfig.minInSyncReplicas, totalReplicas; AutoSwitchHAService; "
                "apache/rocketmq#7709",
                f"minInSyncReplicas at most {replicas}",
            )


def _unclean(controllers: Sequence[ConfigFile]) -> Iterable[Finding]:
    for f in controllers:
        if f.flag("enableElectUncleanMaster", False):
            yield Finding(
                CRIT,
                "unclean-election",
                [f.name],
                ["enableElectUncleanMaster"],
                f"{_where(f, 'enableElectUncleanMaster')}: enableElectUncleanMaster=true",
                "a broker outside the SyncStateSet can be elected master: what the old master "
                "acknowledged and it lacks is truncated everywhere",
                "ControllerConfig.enableElectUncleanMaster; DefaultElectPolicy",
                "enableElectUncleanMaster=false (elect an unclean master by hand, knowingly: mqctl "
                "electMaster --accept-data-loss)",
            )


def _ignored_role(brokers: Sequence[ConfigFile]) -> Iterable[Finding]:
    for f in brokers:
        if not f.flag("enableControllerMode", False) or f.live:
            continue
        role = (f.get("brokerRole") or "").strip().upper()
        if role in ("SYNC_MASTER", "ASYNC_MASTER"):
            yield Finding(
                WARN,
                "ignored-role",
                [f.name],
                ["brokerRole"],
                f"{_where(f, 'brokerRole')}: brokerRole={role} in controller mode",
                "the controller decides who is master; a broker configured as master still starts "
                "as the controller says, so the file misleads whoever reads it",
                "BrokerController/ReplicasManager (controller mode); apache/rocketmq#4799; "
                "distribution/conf/controller/quick-start/broker-n0.conf",
                "brokerRole=SLAVE, as RocketMQ's controller quick-start",
            )
        bid = (f.get("brokerId") or "-1").strip()
        if bid != "-1":
            yield Finding(
                WARN,
                "ignored-role",
                [f.name],
                ["brokerId"],
                f"{_where(f, 'brokerId')}: brokerId={bid} in controller mode",
                "with persistent broker ids the controller assigns the id (brokerIdentity in the "
                "store); the configured one is not used",
                "docs/en/controller/persistent_unique_broker_id.md",
                "brokerId=-1",
            )


def _controller_addrs(f: ConfigFile) -> set[str]:
    if (f.get("controllerType") or "DLedger").strip().lower() == "jraft":
        raw = f.get("jRaftControllerRPCAddr") or ""
        return {a.strip() for a in raw.split(",") if a.strip()}
    peers = f.get("controllerDLegerPeers") or ""
    return {p.split("-", 1)[1].strip() for p in peers.split(";") if "-" in p}


def _controller_addr(brokers: Sequence[ConfigFile], controllers: Sequence[ConfigFile]) -> Iterable[Finding]:
    # a live controller's peer keys are its Raft peers (mqctl serve's are not the brokers' remoting
    # addresses): the group is taken from files only
    groups = {f.name: _controller_addrs(f) for f in controllers if not f.live and _controller_addrs(f)}
    if len({frozenset(g) for g in groups.values()}) > 1:
        yield Finding(
            CRIT,
            "controller-addr",
            sorted(groups),
            ["controllerDLegerPeers", "jRaftControllerRPCAddr"],
            "the controllers list different groups: "
            + "; ".join(f"{n}: {','.join(sorted(g))}" for n, g in groups.items()),
            "nodes that disagree on their peers cannot form one quorum, or form two",
            "ControllerConfig.controllerDLegerPeers, JraftConfig.jRaftInitConf",
            "the same peer list in every controller's file",
        )
    group = set().union(*groups.values()) if groups else set()
    for f in brokers:
        if not f.flag("enableControllerMode", False):
            continue
        if f.flag("fetchControllerAddrByDnsLookup", False):
            continue
        listed = {a.strip() for a in (f.get("controllerAddr") or "").split(";") if a.strip()}
        if not listed:
            yield Finding(
                CRIT,
                "controller-addr",
                [f.name],
                ["controllerAddr"],
                f"{_where(f, 'controllerAddr')}: enableControllerMode=true and no controllerAddr",
                "the broker cannot register: it never gets an id nor a role",
                "BrokerConfig.controllerAddr; ReplicasManager",
                "controllerAddr=HOST:PORT;HOST:PORT;... naming every controller",
            )
        elif group and not listed <= group:
            yield Finding(
                CRIT,
                "controller-addr",
                [f.name],
                ["controllerAddr"],
                f"{_where(f, 'controllerAddr')}: {', '.join(sorted(listed - group))} is not a "
                f"controller of the group ({', '.join(sorted(group))})",
                "the broker sends heartbeats and registrations to an address that is no controller",
                "BrokerConfig.controllerAddr; ControllerConfig.controllerDLegerPeers",
                f"controllerAddr={';'.join(sorted(group))}",
            )
        elif group and listed != group:
            yield Finding(
                WARN,
                "controller-addr",
                [f.name],
                ["controllerAddr"],
                f"{_where(f, 'controllerAddr')}: misses {', '.join(sorted(group - listed))}",
                "while the controllers the broker lists are down it has no controller, although "
                "the group still has a quorum",
                "BrokerConfig.controllerAddr; BrokerOuterAPI (heartbeats to each controller)",
                f"controllerAddr={';'.join(sorted(group))}",
            )


def _heartbeat(brokers: Sequence[ConfigFile], controllers: Sequence[ConfigFile]) -> Iterable[Finding]:
    scans = {f.name: f.num("scanNotActiveBrokerInterval", 5000) for f in controllers}
    scan = max(scans.values()) if scans else 5000
    where = f"scanNotActiveBrokerInterval={scan}" + ("" if scans else " (RocketMQ's default)")
    for f in brokers:
        if not f.flag("enableControllerMode", False):
            continue
        timeout = f.num("controllerHeartBeatTimeoutMills", 10000)
        interval = f.num("brokerHeartbeatInterval", 1000)
        if interval >= timeout:
            yield Finding(
                CRIT,
                "heartbeat",
                [f.name],
                ["brokerHeartbeatInterval", "controllerHeartBeatTimeoutMills"],
                f"{_where(f, 'brokerHeartbeatInterval', 'controllerHeartBeatTimeoutMills')}: "
                f"heartbeat every {interval} ms with a {timeout} ms timeout",
                "the controller declares the broker dead between two heartbeats and elects anew",
                "BrokerConfig.brokerHeartbeatInterval, controllerHeartBeatTimeoutMills; "
                "DefaultBrokerHeartbeatManager",
                "controllerHeartBeatTimeoutMills several heartbeats long",
            )
        if timeout <= scan:
            yield Finding(
                WARN,
                "heartbeat",
                [f.name, *scans],
                ["controllerHeartBeatTimeoutMills", "scanNotActiveBrokerInterval"],
                f"{_where(f, 'controllerHeartBeatTimeoutMills')}: timeout {timeout} ms not larger "
                f"than {where}",
                "a dead master is noticed only at the next scan: the timeout is not the failover "
                "time it looks like, and a short hiccup can expire a live broker",
                "DefaultBrokerHeartbeatManager (scan every scanNotActiveBrokerInterval)",
                "controllerHeartBeatTimeoutMills well above scanNotActiveBrokerInterval",
            )


def _store_paths(brokers: Sequence[ConfigFile]) -> Iterable[Finding]:
    for f in brokers:
        root = (f.get("storePathRootDir") or "").rstrip("/")
        for key, name in (
            ("storePathEpochFile", "epochFileCheckpoint"),
            ("storePathBrokerIdentity", "brokerIdentity"),
        ):
            v = f.get(key)
            if v and root and v.rstrip("/") != f"{root}/{name}":
                yield Finding(
                    WARN,
                    "store-paths",
                    [f.name],
                    [key],
                    f"{_where(f, key)}: {key}={v}, not {root}/{name}",
                    f"mqctl recover and mqctl upgrade read {name} in the store root "
                    "(storePathRootDir); here they would find none and treat the store as having "
                    "no epochs or identity",
                    "MessageStoreConfig.storePathEpochFile, BrokerConfig.storePathBrokerIdentity",
                    f"keep {key} at {root}/{name}, or copy the file there before running the tools",
                )


def _controller_store_path(controllers: Sequence[ConfigFile]) -> Iterable[Finding]:
    for f in controllers:
        dledger = (f.get("controllerType") or "DLedger").lower() == "dledger"
        if f.get("controllerStorePath") is None and dledger and not f.live:
            yield Finding(
                WARN,
                "controller-store-path",
                [f.name],
                ["controllerStorePath"],
                f"{f.name}: controllerStorePath not set",
                "its default moved between releases (5.1.x ~/DledgerController, later "
                "~/DLedgerController): after an upgrade the controller starts with empty data",
                "ControllerConfig.controllerStorePath",
                "controllerStorePath=<an explicit directory>",
            )


# options that must be equal on every replica of a broker set: how bad a difference is, RocketMQ's default
# (an unset key and its default are the same), why
_W = "the guarantee of an acknowledged write changes with the master"
CONSISTENT: dict[str, tuple[str, str, str]] = {
    "enableControllerMode": (CRIT, "false", "half a set in controller mode: two ways of electing a master"),
    "allAckInSyncStateSet": (CRIT, "false", _W),
    "minInSyncReplicas": (WARN, "1", _W),
    "totalReplicas": (WARN, "1", _W),
    "inSyncReplicas": (WARN, "1", _W),
    "enableAutoInSyncReplicas": (WARN, "false", _W),
    "mappedFileSizeCommitLog": (
        CRIT,
        "1073741824",
        "slaves copy the commitlog by offset into files of the master's size",
    ),
    "mappedFileSizeConsumeQueue": (WARN, "6000000", "consume queues are built differently on each replica"),
    "maxMessageSize": (WARN, "4194304", "a new master rejects what the old master accepted"),
    "messageDelayLevel": (
        WARN,
        "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h",
        "delay levels and delayOffset.json mean other delays after a failover",
    ),
    "timerWheelEnable": (WARN, "true", "timer messages stop being delivered after a failover"),
    "timerPrecisionMs": (WARN, "1000", "timer messages are delivered at another precision after a failover"),
    "enableLmq": (WARN, "false", "light message queues exist on some replicas only"),
    "enableMultiDispatch": (WARN, "false", "light message queues exist on some replicas only"),
    "controllerAddr": (WARN, "", "replicas asking different controllers see different masters"),
    "controllerHeartBeatTimeoutMills": (WARN, "10000", "failover time depends on which replica is master"),
    "brokerClusterName": (CRIT, "DefaultCluster", "not one broker set to the controller"),
}


def _norm(key: str, value: str) -> str:
    """A list of addresses is the same in any order."""
    if key == "controllerAddr":
        return ";".join(sorted(a.strip() for a in value.split(";") if a.strip()))
    return value.strip()


def _consistency(brokers: Sequence[ConfigFile]) -> Iterable[Finding]:
    by_set: dict[str, list[ConfigFile]] = {}
    for f in brokers:
        by_set.setdefault(f.props.get("brokerName", ""), []).append(f)
    for name, files in by_set.items():
        if len(files) < 2:
            continue
        for key, (sev, default, why) in CONSISTENT.items():
            vals = {f.name: _norm(key, f.get(key) or default) for f in files}
            if len(set(vals.values())) > 1:
                shown = ", ".join(
                    f"{n}={v}" + ("" if key in files[i].props else " (default)")
                    for i, (n, v) in enumerate(vals.items())
                )
                yield Finding(
                    sev,
                    "set-consistency",
                    list(vals),
                    [key],
                    f"{key} differs across broker {name}: {shown}",
                    why,
                    "RegisterBroker options (mqctl's INCONSISTENT_BROKER_OPTIONS, seed 002)",
                    f"the same {key} on every replica",
                )


# RocketMQ releases with a known failure in controller mode
BAD_VERSIONS: dict[str, tuple[str, str, str]] = {
    "5.1.2": (
        CRIT,
        "a broker in controller mode fails to start (NullPointerException)",
        "apache/rocketmq#6926 (a maintainer: do not upgrade to 5.1.2 with automatic master-slave switching)",
    ),
    "5.2.0": (
        WARN,
        "'Failed to find epochEntry' every second after delayed slaves and a master failure",
        "apache/rocketmq#9689, PR #9942",
    ),
    "5.1.1": (
        WARN,
        "the controller tries an election once when a master dies (no retry)",
        "ControllerManager.triggerElectMaster (retries electMasterMaxRetryCount from 5.2.0)",
    ),
}
_VERSION_RX = re.compile(
    r"(?:rocketmq[-_a-z]*?[-_ ]v?|version\s*[=: ]\s*v?|\bV)(\d+)[._](\d+)[._](\d+)", re.I
)


def versions_in(text: str) -> set[str]:
    return {".".join(m.groups()) for m in _VERSION_RX.finditer(text)}


def _versions(files: Sequence[ConfigFile], reported: dict[str, str]) -> Iterable[Finding]:
    for f in files:
        found = versions_in(f.text)
        if f.name in reported:
            found |= versions_in(reported[f.name])
        for v in sorted(found):
            if v in BAD_VERSIONS:
                sev, what, src = BAD_VERSIONS[v]
                yield Finding(
                    sev,
                    "known-bad-version",
                    [f.name],
                    [],
                    f"{f.name}: RocketMQ {v}",
                    what,
                    src,
                    "another release (the latest of its line)",
                )


def check(files: Sequence[ConfigFile], reported_versions: dict[str, str] | None = None) -> list[Finding]:
    """Every finding, most severe first. `reported_versions`: file name -> version text a live broker
    reported (GET_BROKER_RUNTIME_INFO's brokerVersionDesc)."""
    brokers = [f for f in files if f.kind == "broker"]
    controllers = [f for f in files if f.kind == "controller"]
    out: list[Finding] = [
        Finding(
            WARN,
            "kind",
            [f.name],
            [],
            f"{f.name}: neither a broker nor a controller configuration (no key of either)",
            "nothing could be checked in it",
            "BrokerConfig, MessageStoreConfig, ControllerConfig",
            "name a broker.conf or controller.conf",
        )
        for f in files
        if f.kind == "unknown"
    ]
    for rule in (
        _all_ack(brokers),
        _min_in_sync(brokers),
        _unclean(controllers),
        _ignored_role(brokers),
        _controller_addr(brokers, controllers),
        _heartbeat(brokers, controllers),
        _store_paths(brokers),
        _controller_store_path(controllers),
        _consistency(brokers),
        _versions(files, reported_versions or {}),
    ):
        out.extend(rule)
    out.sort(key=lambda x: -_RANK[x.severity])
    return out


def verdict(findings: Sequence[Finding]) -> str:
    """OK, WARN or CRIT: the most severe finding."""
    top = max((_RANK[f.severity] for f in findings), default=0)
    return {0: "OK", 1: WARN, 2: CRIT}[top]
