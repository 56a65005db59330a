"""A controller node: the replicated core plus what lives only in the leader's memory.

The node owns three things the pure core must not: the clock, the heartbeat table
(RocketMQ DLedger mode keeps heartbeats out of the log) and the watchers of role changes.
It stamps each write with a Context (now + the heartbeat rows of the broker set concerned),
appends it to the Raft log and returns what the core decided when the entry was applied.
"""

from __future__ import annotations

import logging
import os
import queue
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mqctl import methods
from mqctl.controller import core, quorum, records
from mqctl.controller.liveness import HeartbeatTable
from mqctl.errors import Code, MqctlError

if TYPE_CHECKING:
    from mqctl.controller.raftlog import RaftSeam

log = logging.getLogger("mqctl.node")

RAFT_STATES = {0: "follower", 1: "candidate", 2: "leader"}

# pysyncobj FAIL_REASON values: the entry was never appended / may have been.
NOT_APPENDED = {1: "queue full", 2: "no leader", 4: "not leader", 6: "request denied"}
OUTCOME_UNKNOWN = {3: "discarded", 5: "leader changed"}

META_GROUP_ID = "groupId"
META_GROUP_OPTIONS = "groupOptions"
META_NODE_PREFIX = "node/"
# Written with the group id by the first leader of a new group: the initial members and the highest
# level the group may start at. Cleared by the record that sets the group's starting level, once every
# initial member still in the group has published the levels it speaks (mqctl's bootstrap of Kafka's
# `kafka-storage format --release-version`).
META_BOOTSTRAP = "bootstrap"


RAFT_STALL_S = 10.0  # a Raft tick this long overdue is reported, with where the Raft thread is
VIEW_REFORK_SETS = 256  # broker sets a decision view may hold copies of before it is made anew
PEER_GRACE_MS = 2000  # a new leader's connections to its peers are up within this, or they are lost
SYNC_STATE_PART = 256  # broker sets a GetSyncStateData reads under one hold of the state lock


def now_ms() -> int:
    return int(time.time() * 1000)


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


class RoleWatch:
    """An iterator of RoleChange dicts for one subscriber; `close()` ends it."""

    def __init__(self, node: ControllerNode, cluster_name: str, broker_name: str) -> None:
        self.cluster_name = cluster_name
        self.broker_name = broker_name
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue(maxsize=1000)
        self._node = node
        self.closed = False
        self._lagging = False

    def matches(self, cluster_name: str, broker_name: str) -> bool:
        return (not self.broker_name or self.broker_name == broker_name) and (
            not self.cluster_name or not cluster_name or self.cluster_name == cluster_name
        )

    def push(self, change: dict[str, Any]) -> None:
        """Never blocks the state machine: a stuck subscriber loses its *oldest* changes, so the
        last one it reads is always the newest role."""
        while True:
            try:
                self._queue.put_nowait(change)
                return
            except queue.Full:
                try:
                    self._queue.get_nowait()
                except queue.Empty:
                    continue
                if not self._lagging:
                    self._lagging = True
                    log.warning(
                        "role watch for %s is not reading; dropping its oldest changes", self.broker_name
                    )

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._node._unwatch(self)
            try:
                self._queue.put_nowait(None)
            except queue.Full:  # __next__ ends once the queue is drained (closed is set)
                pass

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self

    def __next__(self) -> dict[str, Any]:
        while True:
            if self.closed and self._queue.empty():
                raise StopIteration
            try:
                item = self._queue.get(timeout=0.5)
            except queue.Empty:
                continue
            if item is None:
                raise StopIteration
            return item


class NodeStopped(Exception):
    pass


class _Failed(Exception):
    """A pysyncobj callback's FAIL_REASON, in the shape `_unavailable` reads."""

    def __init__(self, reason: int) -> None:
        super().__init__(f"reason {reason}")
        self.errorCode = reason


class ControllerNode:
    """Implements NodeAPI (docs/architecture.md) on top of ControllerSyncObj."""

    def __init__(self, settings: NodeSettings) -> None:
        from mqctl.controller.raftlog import ControllerSyncObj, make_conf

        self.settings = settings
        self.heartbeats = HeartbeatTable()
        self._lock = threading.Lock()
        self._watches: list[RoleWatch] = []
        self._stop = threading.Event()
        self._leader_since_ms: int | None = None
        self._leader_term = -1
        self._last_trigger_ms: dict[str, int] = {}
        self._last_scan_ms = 0
        self._hash_cache: tuple[int, str] = (-1, "")
        # broker sets the leader must look at for an election: their liveness changed, a record
        # touched them, or an election they need was not made yet (throttled, refused)
        self._pending: set[str] = set()
        self._fatal_error: str | None = None
        # Writes are decided one at a time (`_decide_lock`, held while deciding and appending)
        # against the leader's view: the applied state plus its appended, not yet applied records.
        self._decide_lock = threading.Lock()
        self._view: core.ControllerState | None = None
        self._view_term = -1
        # entries appended through the view and those resolved (applied or failed): when equal, the
        # applied state holds everything the view does, and the view may be made anew from it
        self._view_appended = 0
        self._view_resolved = 0
        self._caught_up_term = -1
        self.joined = False  # published, the group's id applied and checked (sd_notify's READY=1)
        self._level_checked = 0.0
        self._peers_checked = 0.0
        self._lost_peers: list[str] = []
        conf = make_conf(
            settings.data_dir,
            secret=settings.cluster_secret,
            bind_address=settings.raft_bind or settings.raft_address,
        )
        # the Raft layer, seen through its seam only (mqctl/controller/raftlog.py, RaftSeam)
        self.sync: RaftSeam = ControllerSyncObj(
            settings.raft_address,
            list(settings.partners),
            conf,
            settings.initial_config(),
            on_apply=self._on_apply,
        )
        self._ticker = threading.Thread(target=self._tick_loop, name="mqctl-ticker", daemon=True)

    # --- lifecycle ----------------------------------------------------------------------

    def start(self) -> None:
        from pysyncobj import SyncObjException

        try:
            self.sync.wait_bound()
        except SyncObjException as exc:
            self.sync.destroy()
            bind = self.settings.raft_bind or self.settings.raft_address
            raise OSError(
                f"cannot listen for Raft on {bind}: address already in use or not available"
            ) from exc
        self._ticker.start()

    def stop(self) -> None:
        self._stop.set()
        for watch in list(self._watches):
            watch.close()
        try:
            self.sync.destroy_synchronous()
        except Exception:  # already stopped
            pass

    def hand_over_leadership(self, timeout: float) -> str:
        """A controlled shutdown of a leader (SIGTERM): hand the leadership to a caught-up follower
        first (Raft's TimeoutNow, as etcd and Kafka do), so that the group elects at once instead of
        after an election timeout. No write is decided meanwhile (the decide lock is held), so a
        follower catches up with the last entries; a write waiting for the lock is then told the new
        leader. Returns the new leader's Raft address, "" if this node did not lead or none took
        over within ``timeout``."""
        from pysyncobj import FAIL_REASON

        me = self.settings.raft_address
        if not self.is_leader():
            return ""
        if not self._connected_followers():
            log.info("no follower connected to hand the leadership over to")
            return ""
        deadline = time.monotonic() + timeout
        if not self._decide_lock.acquire(timeout=timeout):
            return ""
        try:
            sent_at = -1.0
            refused = 0
            outcome: list[Any] = []
            while time.monotonic() < deadline:
                leader = self.leader_raft_address()
                if leader and leader != me:
                    log.info("handed the leadership over to %s (term %s)", leader, self.sync.term())
                    return leader
                if sent_at < 0 and not (self.is_leader() and self._connected_followers()):
                    break  # no longer leads (stepped down), or every follower is gone
                if self.is_leader() and time.monotonic() - sent_at > 1.0:
                    outcome.clear()
                    # None: the most caught-up connected follower; refused until one has every entry
                    self.sync.change_membership("transfer", None, lambda _r, error: outcome.append(error))
                    if outcome and outcome[0] == FAIL_REASON.SUCCESS:
                        sent_at = time.monotonic()
                    else:
                        refused += 1
                time.sleep(0.01)
            if sent_at < 0 and not self._connected_followers():
                log.info("no follower connected to hand the leadership over to")
                return ""
            log.warning(
                "no follower took the leadership within %.1f s (%s; refused %d times: no follower "
                "connected and caught up); stopping anyway, the group elects after its election "
                "timeout",
                timeout,
                "TimeoutNow sent" if sent_at >= 0 else "no TimeoutNow sent",
                refused,
            )
            return ""
        finally:
            self._decide_lock.release()

    def raft_stalled_for(self) -> float:
        """Seconds since the Raft thread last finished a tick (its poll)."""
        return float(time.monotonic() - self.sync.connection_clock())

    def _connected_followers(self) -> list[str]:
        status = self.sync.status()
        return [m for m in self.members() if status.get("partner_node_status_server_" + m) == 2]

    @property
    def state(self) -> core.ControllerState:
        return self.sync.state

    def _meta(self, key: str, default: Any = None) -> Any:
        """A replicated meta value, read under the state lock (never half an entry)."""
        with self.sync.state_lock:
            return self.state.meta.get(key, default)

    @property
    def fatal_error(self) -> str | None:
        """Why this node must stop: set by the node (wrong group, options) or by the state
        machine (a log entry or snapshot it cannot apply)."""
        return self._fatal_error or self.sync.halted or None

    @fatal_error.setter
    def fatal_error(self, value: str | None) -> None:
        self._fatal_error = value

    @property
    def fatal_exit_code(self) -> int:
        """4 (controller data unreadable) when the log or snapshot stopped the node, else 2."""
        return 4 if self.sync.halted and not self._fatal_error else 2

    def is_leader(self) -> bool:
        return bool(self.sync.is_leader())

    def is_serving(self) -> bool:
        return self.fatal_error is None and not self._stop.is_set() and self.sync.leader_id() is not None

    def leader_raft_address(self) -> str:
        return self.sync.leader_id() or ""

    def grpc_address_of(self, raft_address: str) -> str:
        if raft_address == self.settings.raft_address:
            return self.settings.grpc_address
        return str(self._meta(META_NODE_PREFIX + raft_address, {}).get("grpc", ""))

    def remoting_address_of(self, raft_address: str) -> str:
        if raft_address == self.settings.raft_address:
            return self.settings.remoting_address
        return str(self._meta(META_NODE_PREFIX + raft_address, {}).get("remoting", ""))

    def leader_grpc_address(self) -> str:
        leader = self.leader_raft_address()
        return self.grpc_address_of(leader) if leader else ""

    # --- NodeAPI ------------------------------------------------------------------------

    def call(self, method: str, request: dict[str, Any], *, timeout: float = 5.0) -> dict[str, Any]:
        if method == "Heartbeat":
            return self._heartbeat(request)
        if method == "ChangeQuorum":
            return self._change_quorum(request, timeout)
        if method == "GetSnapshot":
            return self._snapshot(timeout)
        if method in methods.LOCAL_READ_METHODS:
            return self._local(method, request)
        if method not in methods.WRITE_METHODS and method not in methods.FRESH_READ_METHODS:
            return {
                "code": int(Code.REQUEST_CODE_NOT_SUPPORTED),
                "remark": f" request type {method} not supported",
            }
        if not self.is_leader():
            return self._not_leader()
        if method in methods.FRESH_READ_METHODS:
            try:
                self.sync.barrier_sync(timeout=timeout)
            except Exception as exc:
                # a read changes nothing, so "outcome unknown" does not apply: answer UNAVAILABLE
                # (with the leader if known) and let the client retry elsewhere
                answer = self._unavailable(exc)
                if answer["code"] == int(Code.SYSTEM_ERROR):
                    answer = {
                        "code": int(Code.UNAVAILABLE),
                        "leader_address": self.leader_grpc_address(),
                        "remark": "timed out waiting for the read barrier to commit",
                    }
                return answer
            if not self.is_leader():
                return self._not_leader()
            return self._local(method, request)
        response = self._replicate(method, request, timeout)
        if method == "RegisterBroker" and response.get("code") == 0:
            self._note_registration(request, response)
        if method == "UpdateConfig" and response.get("ignored_config"):
            ignored = response.pop("ignored_config")
            log.info(
                "UpdateConfig: ignored %s",
                ", ".join(f"{key} ({why})" for key, why in sorted(ignored.items())),
            )
        return response

    def metadata(self) -> dict[str, Any]:
        status = self.sync.status()
        leader = self.leader_raft_address()
        peers = []
        for addr in sorted([self.settings.raft_address, *self.members()]):
            peers.append(
                {
                    "raft_address": addr,
                    "grpc_address": self.grpc_address_of(addr),
                    "remoting_address": self.remoting_address_of(addr),
                    "is_leader": addr == leader,
                    "is_self": addr == self.settings.raft_address,
                    "connected": (
                        addr == self.settings.raft_address
                        or status.get("partner_node_status_server_" + addr) == 2
                    ),
                    "match_index": int(status.get("match_idx_server_" + addr, 0) or 0),
                    "next_index": int(status.get("next_node_idx_server_" + addr, 0) or 0),
                    "max_feature_level": self._max_feature_level_of(addr),
                }
            )
        with self.sync.state_lock:
            feature_level = self.state.feature_level
        return {
            "code": 0,
            "remark": "",
            "group": self.settings.group,
            "group_id": str(self._meta(META_GROUP_ID, "")),
            "controller_leader_id": leader,
            "controller_leader_address": self.leader_grpc_address(),
            "is_leader": self.is_leader(),
            "self_id": self.settings.raft_address,
            "peers": peers,
            "term": int(status.get("raft_term", 0)),
            "commit_index": int(status.get("commit_idx", 0)),
            "last_applied": int(status.get("last_applied", 0)),
            "has_quorum": bool(status.get("has_quorum", False)),
            "state_hash": self._state_hash(),
            "state": RAFT_STATES.get(int(status.get("state", 0)), "unknown"),
            "log_length": int(status.get("log_len", 0)),
            "feature_level": feature_level,
            "max_feature_level": records.MAX_FEATURE_LEVEL,
            "record_versions": records.record_versions(),
            "problem": self.fatal_error or self.sync.storage_error or "",
        }

    def _max_feature_level_of(self, raft_address: str) -> int:
        """As the node published it; mqctl 0.1 nodes publish none and speak level 1."""
        if raft_address == self.settings.raft_address:
            return records.MAX_FEATURE_LEVEL
        published = self._meta(META_NODE_PREFIX + raft_address, {})
        level = published.get("maxFeatureLevel", 1) if isinstance(published, dict) else 1
        return level if isinstance(level, int) and not isinstance(level, bool) else 1

    def _raise_feature_level(self, level: int, timeout: float) -> dict[str, Any]:
        """`mqctl quorum feature-level N`: once every member speaks N, the group writes N's records."""
        members = sorted([self.settings.raft_address, *self.members()])

        def decide(state: core.ControllerState) -> core.Result:
            if level not in records.FEATURE_LEVELS:
                return core.Result(
                    Code.CONTROLLER_INVALID_REQUEST,
                    f"Invalid request: feature level {level} is not one of {sorted(records.FEATURE_LEVELS)}",
                )
            if level < state.feature_level:
                return core.Result(
                    Code.CONTROLLER_INVALID_REQUEST,
                    f"Invalid request: the group is at feature level {state.feature_level}; "
                    "a feature level is never lowered",
                )
            behind = [
                f"{m} (speaks {self._max_feature_level_of(m)}, or has not said yet)"
                for m in members
                if self._max_feature_level_of(m) < level
            ]
            if behind:
                return core.Result(
                    Code.CONTROLLER_INVALID_REQUEST,
                    f"not every member speaks feature level {level}: {', '.join(behind)}; upgrade them first",
                )
            if level == state.feature_level:
                return core.Result(Code.SUCCESS, f"the group is already at feature level {level}")
            return core.Result(
                Code.SUCCESS,
                f"the group is at feature level {level} now",
                {},
                [records.FeatureLevelSet(level)],
            )

        answer = self._decide_and_commit(decide, timeout)
        with self.sync.state_lock:
            answer["feature_level"] = self.state.feature_level
        answer.update(
            leader_id=self.leader_raft_address(), leader_address=self.leader_grpc_address(), members=members
        )
        return answer

    def sync_state_data(self, broker_names: list[str] | None = None) -> dict[str, Any]:
        """GetSyncStateData of some broker sets (every one when None) as this node sees it, without a
        barrier: for what must not wait on Raft (the metrics and status page of `mqctl serve
        --metrics-address`; the 1008 push after an election this node has just applied)."""
        answer = self._sync_state_table({"broker_names": broker_names} if broker_names else {})
        with self.sync.state_lock:
            lease = self.state.config.get("heartbeatTimeoutMillis", self.settings.heartbeat_timeout_ms)
        return {"replicas_info_table": answer.get("replicas_info_table", {}), "lease_ms": int(lease)}

    def _sync_state_table(self, request: dict[str, Any]) -> dict[str, Any]:
        """GetSyncStateData a few hundred broker sets at a time, each part with its own heartbeat
        rows and its own hold of the state lock, as RocketMQ reads one broker set at a time: a read
        of a whole fleet neither holds the lock that writes wait for nor builds every row of the
        heartbeat table at once (what it builds at its peak the process keeps)."""
        names = request.get("broker_names") or []
        if not isinstance(names, list | tuple) or 0 < len(names) <= SYNC_STATE_PART:
            return self._answer("GetSyncStateData", request)  # the core answers, or refuses, at once
        if not names:
            with self.sync.state_lock:
                names = sorted(self.state.broker_sets)
        table: dict[str, Any] = {}
        for at in range(0, len(names), SYNC_STATE_PART):  # the core checks and sorts each part
            part = self._answer("GetSyncStateData", {"broker_names": list(names[at : at + SYNC_STATE_PART])})
            if part["code"] != 0:
                return part
            table.update(part.get("replicas_info_table") or {})
        return {"code": 0, "remark": "", "replicas_info_table": dict(sorted(table.items()))}

    def history_view(self, last: int) -> dict[str, Any]:
        """The replicated history as this node has applied it, without a barrier: its feature level, the
        last ``last`` entries, each broker set's elections by cause and loss in all, for the metrics
        and status page (the same on every node once applied)."""
        with self.sync.state_lock:
            st = self.state
            return {
                "feature_level": st.feature_level,
                "entries": list(st.history[-last:]) if last > 0 else [],
                "elections": {n: dict(c) for n, c in st.elections.items()},
                "loss_total": dict(st.loss_total),
                "clusters": {n: bs.cluster_name for n, bs in st.broker_sets.items()},
            }

    def _snapshot(self, timeout: float) -> dict[str, Any]:
        """GetSnapshot: the leader's state after a read barrier, with the index it was applied at."""

        if not self.is_leader():
            return self._not_leader()
        try:
            self.sync.barrier_sync(timeout=timeout)
        except Exception:
            return {
                "code": int(Code.UNAVAILABLE),
                "leader_address": self.leader_grpc_address(),
                "remark": "timed out waiting for the read barrier to commit",
            }
        term = self.sync.term()
        with self.sync.state_lock:
            state_json, index = self.state.canonical_json(), self.sync.applied_index
            state_hash, level = self._state_hash(), self.state.feature_level
            group_id = str(self.state.meta.get(META_GROUP_ID, ""))
        return {
            "code": 0,
            "remark": "",
            "state_json": state_json,
            "applied_index": index,
            "term": term,
            "group": self.settings.group,
            "group_id": group_id,
            "state_hash": state_hash,
            "feature_level": level,
            "record_versions": records.record_versions(),
        }

    def _state_hash(self) -> str:
        """Computed once per applied entry, not on every GetMetadata (callers poll it)."""
        with self.sync.state_lock:
            version = self.sync.state_version
            if self._hash_cache[0] != version:
                self._hash_cache = (version, self.state.state_hash())
            return self._hash_cache[1]

    def members(self) -> list[str]:
        """The other nodes' Raft addresses as the Raft log has them now (membership changes included)."""
        try:
            return self.sync.members()
        except Exception:  # not started yet
            return sorted(self.settings.partners)

    def _change_quorum(self, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Membership and leadership changes (pysyncobj addNodeToCluster, removeNodeFromCluster,
        transferLeadership), on the leader; waits for the outcome."""
        from pysyncobj import FAIL_REASON

        action = str(request.get("action", ""))
        target = str(request.get("raft_address", "") or "")
        if action == "feature-level":
            return self._raise_feature_level(int(request.get("feature_level") or 0), timeout)
        refused = quorum.request_refusal(action, target)
        if refused is not None:
            return refused
        if not self.is_leader():
            return self._not_leader()
        me = self.settings.raft_address
        members = self.members()
        refused = quorum.membership_refusal(action, target, me, members)
        if refused is not None:
            return refused
        done = threading.Event()
        outcome: list[Any] = []

        def callback(result: Any, error: Any) -> None:
            outcome.append(error)
            done.set()

        self.sync.change_membership(action, target or None, callback)
        if not done.wait(timeout):
            return {
                "code": int(Code.SYSTEM_ERROR),
                "remark": f"timed out waiting for {action}; the outcome is unknown",
            }
        if outcome[0] != FAIL_REASON.SUCCESS:
            if outcome[0] == FAIL_REASON.REQUEST_DENIED:
                reason = (
                    "denied (a transfer target must be connected and caught up; one membership change "
                    "at a time)"
                )
            else:
                reason = f"failed (reason {outcome[0]})"
            return {"code": int(Code.SYSTEM_ERROR), "remark": f"{action} {target}: {reason}"}
        remark = f"{action} {target}: done".replace("  ", " ")
        if action == "transfer":
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                leader = self.leader_raft_address()
                if leader and leader != me:
                    break
                time.sleep(0.02)
            leader = self.leader_raft_address()
            if not leader or leader == me:
                return {
                    "code": int(Code.SYSTEM_ERROR),
                    "remark": "the transfer was sent but no other node took the leadership in time",
                }
            remark = f"{leader} leads now"
        return {
            "code": 0,
            "remark": remark,
            "leader_id": self.leader_raft_address(),
            "leader_address": self.leader_grpc_address(),
            "members": sorted([me, *self.members()]),
        }

    def watch(self, cluster_name: str, broker_name: str) -> RoleWatch:
        watch = RoleWatch(self, cluster_name, broker_name)
        # Under the state lock no entry is applied between reading the current role and
        # subscribing, so the current role can never arrive after a newer change.
        with self.sync.state_lock:
            with self._lock:
                self._watches.append(watch)
            current = self._role_of(broker_name) if broker_name else None
            if current is not None and current.get("master_broker_id") is not None:
                watch.push(current)
        return watch

    def _unwatch(self, watch: RoleWatch) -> None:
        with self._lock:
            if watch in self._watches:
                self._watches.remove(watch)

    # --- internals ----------------------------------------------------------------------

    def _context(self, broker_names: list[str]) -> core.Context:
        with self._lock:
            live = {name: self.heartbeats.with_last(name) for name in broker_names if name}
        return core.Context(now_ms=now_ms(), live=live, term=self.sync.term())

    def _broker_names_of(self, method: str, request: dict[str, Any]) -> list[str]:
        if method in ("GetSyncStateData", "Rebalance"):
            names = list(request.get("broker_names") or [])
            if names:
                return names
            with self.sync.state_lock:
                return sorted(self.state.broker_sets)
        return [str(request.get("broker_name", ""))]

    def _local(self, method: str, request: dict[str, Any]) -> dict[str, Any]:
        if method == "GetSyncStateData":
            return self._sync_state_table(request)
        answer = self._answer(method, request)
        if method == "GetConfig":
            answer["config"] = dict(sorted({**answer.get("config", {}), **self._node_local_config()}.items()))
        return answer

    def _answer(self, method: str, request: dict[str, Any]) -> dict[str, Any]:
        ctx = self._context(self._broker_names_of(method, request))
        with self.sync.state_lock:  # not while pysyncobj's thread is half-way through an entry
            result = core.handle(self.state, method, request, ctx)
        answer = dict(result.response)
        answer["code"] = int(result.code)
        answer["remark"] = result.remark or ""
        return answer

    def _node_local_config(self) -> dict[str, str]:
        """The values of core.NODE_CONFIG_KEYS: this node's deployment, RocketMQ's names where it
        has them (docs/controller-rules.md)."""
        s = self.settings
        members = sorted([s.raft_address, *self.members()])
        port = (s.remoting_address or s.grpc_address).rpartition(":")[2]
        return {
            "rocketmqHome": s.data_dir or "",
            "configStorePath": os.path.join(s.data_dir, "raft.journal") if s.data_dir else "",
            "controllerStorePath": s.data_dir or "",
            "listenPort": port,
            "controllerDLegerGroup": s.group,
            "controllerDLegerPeers": ";".join(f"{m}-{m}" for m in members),
            "controllerDLegerSelfId": s.raft_address,
            "controllerGroup": s.group,
            "raftAddress": s.raft_address,
            "raftPeers": ",".join(s.partners),
            "listenAddress": s.grpc_address,
            "remotingAddress": s.remoting_address,
        }

    def _replicate(self, method: str, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        names = self._broker_names_of(method, request)

        def decide(state: core.ControllerState) -> core.Result:
            return core.handle(state, method, request, self._context(names))

        return self._decide_and_commit(decide, timeout)

    def _decide_and_commit(
        self, decide: Callable[[core.ControllerState], core.Result], timeout: float
    ) -> dict[str, Any]:
        """Decide once, on the leader; append the records; answer when they are applied here.

        Decisions are made one at a time against the leader's view: the applied state plus the
        records of its entries not applied yet (Kafka's QuorumController), so writes pipeline and
        share fsyncs while each decision still sees every record that will precede it in the log.
        The view starts from the applied state after a barrier of the leader's term (every earlier
        entry applied), and each entry is appended by this leader in this term or not at all
        (`leaderTerm`, mqctl/raft/FORK.md change 11). A failure to append drops the view: the next
        decision starts again from a barrier."""
        from pysyncobj import FAIL_REASON

        deadline = time.monotonic() + timeout
        if not self._decide_lock.acquire(timeout=max(0.0, timeout)):
            return self._busy()
        try:
            if self.fatal_error:
                return {
                    "code": int(Code.SYSTEM_ERROR),
                    "remark": f"this controller node stopped: {self.fatal_error}",
                }
            if not self.is_leader():
                return self._not_leader()
            view = self._leader_view(deadline)
            if view is None:
                return {
                    "code": int(Code.UNAVAILABLE),
                    "leader_address": self.leader_grpc_address(),
                    "remark": "the new leader has not applied the earlier entries yet; retry",
                }
            result = decide(view)
            answer = dict(result.response)
            answer["code"] = int(result.code)
            answer["remark"] = result.remark or ""
            if not result.records:
                return answer
            try:
                for record in result.records:
                    view.apply(record)
            except core.InconsistentRecord as exc:  # a rule returned a record that does not fit: a bug
                self._view = None
                log.error("a decision did not fit the leader's view, nothing appended: %s", exc)
                return {"code": int(Code.SYSTEM_ERROR), "remark": f"internal error: {exc}"}
            done = threading.Event()
            outcome: list[Any] = []

            def committed(_res: Any, error: Any) -> None:
                outcome.append(error)
                self._view_resolved += 1  # only the Raft thread writes it
                done.set()

            try:
                self.sync.propose(
                    records.encode_entry(result.records), callback=committed, leader_term=self._view_term
                )
            except Exception as exc:  # not appended
                self._view = None
                return self._unavailable(exc)
            self._view_appended += 1
            if outcome and outcome[0] != FAIL_REASON.SUCCESS:  # refused at once (queue full)
                self._view = None
        finally:
            self._decide_lock.release()
        if not done.wait(max(0.0, deadline - time.monotonic())):
            return {
                "code": int(Code.SYSTEM_ERROR),
                "remark": "timed out waiting for the Raft commit; the outcome is unknown",
            }
        if outcome[0] != FAIL_REASON.SUCCESS:
            with self._decide_lock:
                self._view = None
            return self._unavailable(_Failed(outcome[0]))
        return answer

    def _leader_view(self, deadline: float) -> core.ControllerState | None:
        """The state decisions are made against (under the decide lock); None if the barrier of
        this term did not commit in time."""
        term = self.sync.term()
        if self._view is not None and self._view_term == term:
            if self._view.copied_sets() > VIEW_REFORK_SETS and self._view_resolved >= self._view_appended:
                # every entry of the view applied: its copies of the broker sets it changed equal the
                # state's, so share them again (a leader that registered a fleet would hold it twice)
                with self.sync.state_lock:
                    self._view = self.state.decision_view()
            return self._view
        self._caught_up_term = -1  # a new view starts after a barrier of this very term
        if not self._catch_up(max(0.01, deadline - time.monotonic())) or self._caught_up_term != term:
            return None
        with self.sync.state_lock:
            self._view = self.state.decision_view()
        self._view_term = term
        return self._view

    def _busy(self) -> dict[str, Any]:
        return {
            "code": int(Code.UNAVAILABLE),
            "leader_address": self.leader_grpc_address(),
            "remark": "an earlier write of this leader is not committed yet; the outcome of this "
            "one is not decided, retry",
        }

    def _commit_records(
        self, decide: Callable[[core.ControllerState], list[records.Record]], timeout: float = 5.0
    ) -> bool:
        """Node bookkeeping (group id, node addresses) through the same one decision path."""
        answer = self._decide_and_commit(lambda st: core.Result(Code.SUCCESS, "", {}, decide(st)), timeout)
        if answer["code"] != 0:
            log.debug("node records not committed: %s", answer.get("remark"))
            return False
        return True

    def _not_leader(self) -> dict[str, Any]:
        leader = self.leader_grpc_address()
        remark = "The controller is not in leader state"
        if leader:
            remark += f"; leader is {leader}"
        return {"code": int(Code.CONTROLLER_NOT_LEADER), "remark": remark, "leader_address": leader}

    def _unavailable(self, exc: Exception) -> dict[str, Any]:
        reason: object = getattr(exc, "errorCode", None)
        if reason == "timeout":
            # The entry may still commit: the outcome is unknown, as RocketMQ's 5 s wait.
            return {
                "code": int(Code.SYSTEM_ERROR),
                "remark": "timed out waiting for the Raft commit; the outcome is unknown",
            }
        if isinstance(reason, int) and reason in NOT_APPENDED:
            # pysyncobj never appended the entry: safe for the client to retry at the leader.
            answer = self._not_leader()
            answer["remark"] += f" ({NOT_APPENDED[reason]})"
            return answer
        fallback = str(reason or type(exc).__name__)
        name = OUTCOME_UNKNOWN.get(reason, fallback) if isinstance(reason, int) else fallback
        return {
            "code": int(Code.UNAVAILABLE),
            "remark": f"the Raft entry was not committed ({name}); the outcome is unknown",
            "leader_address": self.leader_grpc_address(),
        }

    def _heartbeat(self, request: dict[str, Any]) -> dict[str, Any]:
        # Accepted on every node (RocketMQ brokers beat to all controllers); each node keeps
        # its own table, so a follower that becomes leader already knows who is alive.
        # The hot path of a fleet: it reads the applied state without the state lock (the rule reads
        # one broker set's brokerEpoch of one replica, a single attribute, and only for a heartbeat
        # that carries a brokerEpoch; a heartbeat racing an apply is ordered before or after it, as on
        # the wire), so a long holder of that lock (a snapshot, a large read) never delays it.
        now = now_ms()
        result = core.handle(self.state, "Heartbeat", request, core.Context(now_ms=now, live={}))
        if result.code == 0:
            assert isinstance(result.request, core.Heartbeat)
            with self._lock:
                self.heartbeats.on_heartbeat(result.request, now)
        answer = {"code": int(result.code), "remark": result.remark or ""}
        if not self.is_leader():
            # accepted here all the same; the leader's address tells a broker that beats one node
            # only where the beats count (the gRPC client moves its heartbeat stream there)
            answer["leader_address"] = self.leader_grpc_address()
        return answer

    def _note_registration(self, request: dict[str, Any], response: dict[str, Any]) -> None:
        def given(key: str) -> int | None:  # absent: the heartbeat row keeps its value (RocketMQ)
            value = request.get(key)
            return None if value is None else int(value)

        with self._lock:
            self.heartbeats.on_register(
                str(request.get("cluster_name", "")),
                str(request.get("broker_name", "")),
                int(request.get("broker_id", 0)),
                str(request.get("broker_address", "")),
                int(response.get("broker_epoch", 0)),
                given("epoch"),
                given("max_offset"),
                given("confirm_offset"),
                given("election_priority"),
                given("heartbeat_timeout_mills"),
                now_ms(),
            )

    def _role_of(self, broker_name: str) -> dict[str, Any] | None:
        ctx = core.Context(now_ms=now_ms(), live={})
        with self.sync.state_lock:
            result = core.handle(self.state, "GetReplicaInfo", {"broker_name": broker_name}, ctx)
            if result.code != 0:
                return None
            cluster = self.state.cluster_of(broker_name) or ""
        resp = result.response
        sss = resp.get("sync_state_set") or {}
        change = {
            "code": 0,
            "remark": "",
            "cluster_name": cluster or "",
            "broker_name": broker_name,
            "master_address": resp.get("master_address") or "",
            "master_epoch": int(resp.get("master_epoch", 0)),
            "sync_state_set_epoch": int(sss.get("sync_state_set_epoch", 0)),
            "sync_state_set": sorted(int(x) for x in sss.get("sync_state_set", [])),
        }
        if resp.get("master_broker_id") is not None:
            change["master_broker_id"] = int(resp["master_broker_id"])
        return change

    def _on_apply(self, state: core.ControllerState, applied: list[records.Record]) -> None:
        """Runs on every node after an entry is applied: the broker sets it touched are looked at
        for an election on the next tick, and watchers hear about new masters."""
        for r in applied:
            if isinstance(r, records.FeatureLevelSet):
                log.info("the group is at feature level %s now", r.level)
        touched_sets = {name for r in applied if isinstance(name := getattr(r, "broker_name", None), str)}
        if any(isinstance(r, records.FailoverPauseSet) and not r.broker_name for r in applied):
            touched_sets |= set(state.broker_sets)  # every set resumed (or paused) at once
        with self._lock:
            self._pending |= touched_sets
        if not self._watches:
            return
        touched = sorted({r.broker_name for r in applied if isinstance(r, records.MasterElected)})
        for name in touched:
            change = self._role_of(name)
            if change is None:
                continue
            # the config in force when the election was applied decides whether brokers are told (1008)
            change["notify_broker_role_changed"] = state.cfg_bool("notifyBrokerRoleChanged")
            with self._lock:
                targets = [w for w in self._watches if w.matches(change["cluster_name"], name)]
            for watch in targets:
                watch.push(change)

    # --- the leader's periodic work -----------------------------------------------------

    def _tick_loop(self) -> None:
        published = False
        checked_group = ""
        stall_said = 0.0
        while not self._stop.wait(0.02):
            stall_said = self._say_raft_stall(stall_said)
            try:
                if not self.sync.is_ready():
                    continue
                term = self.sync.term()
                # After a restart or an election, apply everything committed so far before acting
                # on the state: a new leader that has not yet applied the old entries would see no
                # group id and mint another, or miss a broker set.
                if not self._catch_up():
                    continue
                if not published:
                    published = self._publish_self()
                group_id = str(self._meta(META_GROUP_ID) or "")
                if group_id and group_id != checked_group:
                    # checked again whenever it changes: a node started on another group's data
                    # first sees its own old group id, then this group's once it has caught up
                    checked_group = group_id
                    self._check_group()
                if published and checked_group and not self.fatal_error:
                    self.joined = True
                if self.is_leader():
                    if self._leader_since_ms is None or self._leader_term != term:
                        # a new term, even one the ticker did not see as a follower in between (it
                        # may have been blocked in an election call): start the grace period again
                        self._leader_since_ms = now_ms()
                        self._leader_term = term
                        self._last_scan_ms = 0  # every broker set is looked at when the grace ends
                        self._lost_peers = []
                        log.info("became leader (term %s)", term)
                    self._say_lost_peers(term)
                    self._leader_work()
                else:
                    if self._leader_since_ms is not None:
                        log.info("lost leadership")
                    self._leader_since_ms = None
            except Exception:
                log.exception("ticker error")

    def _say_lost_peers(self, term: int) -> None:
        """The leader says which members it cannot reach (once it has led for PEER_GRACE_MS, the time
        its connections take), again when that changes: the log of a group that lost a node names it."""
        now = time.monotonic()
        if (
            now - self._peers_checked < 0.5
            or self._leader_since_ms is None
            or now_ms() - self._leader_since_ms < PEER_GRACE_MS
        ):
            return
        self._peers_checked = now
        status = self.sync.status()
        members = self.members()
        lost = [m for m in members if status.get("partner_node_status_server_" + m) != 2]
        if lost == self._lost_peers:
            return
        if lost:
            log.warning(
                "leader (term %s) cannot reach %s; %d of %d nodes connected%s",
                term,
                ", ".join(lost),
                len(members) + 1 - len(lost),
                len(members) + 1,
                "" if status.get("has_quorum") else ", no quorum",
            )
        else:
            log.info("leader (term %s) reaches every member again", term)
        self._lost_peers = lost

    def _say_raft_stall(self, said: float) -> float:
        """A Raft thread that has not finished a tick for RAFT_STALL_S answers no peer: the group
        may elect without this node, or, if a majority is stalled, not at all. Say where it is (a
        disk that hangs, a lock), at most once per RAFT_STALL_S; returns when it was last said."""
        now = time.monotonic()
        stalled = now - self.sync.connection_clock()
        if stalled < RAFT_STALL_S or now - said < RAFT_STALL_S:
            return said
        frame = sys._current_frames().get(self.sync.tick_thread_ident() or -1)
        where = (
            " < ".join(
                f"{os.path.basename(f.filename)}:{f.lineno} {f.name}"
                for f in reversed(traceback.extract_stack(frame)[-12:])
            )
            if frame
            else "?"
        )
        log.warning("the Raft thread has not finished a tick for %.0f s; it is at %s", stalled, where)
        return now

    def _catch_up(self, timeout: float = 2.0) -> bool:
        """Apply everything committed in earlier terms (a barrier of this term), once per term."""
        term = self.sync.term()
        if term == self._caught_up_term:
            return True
        try:
            self.sync.barrier_sync(timeout=timeout)
        except Exception as exc:  # no leader yet, or an election in progress
            log.debug("catch-up barrier not committed yet: %s", exc)
            return False
        self._caught_up_term = term
        return True

    def _publish_self(self) -> bool:
        key = META_NODE_PREFIX + self.settings.raft_address
        mine: dict[str, Any] = {
            "grpc": self.settings.grpc_address,
            "maxFeatureLevel": records.MAX_FEATURE_LEVEL,
        }
        if self.settings.remoting_address:
            mine["remoting"] = self.settings.remoting_address
        if self._meta(key) == mine:
            return True
        # A blind write of a key only this node writes and no rule reads: safe to append from any
        # node (pysyncobj forwards it to the leader) without going through the leader's decisions.
        try:
            self.sync.propose_sync(records.encode_entry([records.MetaSet(key, mine)]), timeout=2.0)
        except Exception as exc:
            log.debug("node address not published yet: %s", exc)
            return False
        return True

    def _check_group(self) -> None:
        """Refuse to serve another group's data, or a group whose critical options differ."""
        from mqctl.controller.datadir import record_group_id

        group_id = str(self._meta(META_GROUP_ID))
        theirs = self._meta(META_GROUP_OPTIONS) or {}
        mine = self.settings.critical_options()
        diff = sorted(k for k in set(theirs) | set(mine) if theirs.get(k) != mine.get(k))
        if diff:
            self.fatal_error = "this node's options differ from the controller group's: " + ", ".join(
                f"{k} (group {theirs.get(k)!r}, this node {mine.get(k)!r})" for k in diff
            )
            return
        if self.settings.data_dir:
            try:
                problem = record_group_id(self.settings.data_dir, group_id)
            except MqctlError as exc:  # node.json became unreadable while running
                problem = str(exc)
            if problem:
                self.fatal_error = problem

    def _leader_work(self) -> None:
        if not self._meta(META_GROUP_ID):
            group_id, options = uuid.uuid4().hex, self.settings.critical_options()
            members = sorted([self.settings.raft_address, *self.members()])
            cap = self.settings.initial_feature_level or records.MAX_FEATURE_LEVEL
            bootstrap = {"members": members, "maxLevel": cap}

            def first(st: core.ControllerState) -> list[records.Record]:
                if st.meta.get(META_GROUP_ID):
                    return []
                minted: list[records.Record] = [
                    records.MetaSet(META_GROUP_ID, group_id),
                    records.MetaSet(META_GROUP_OPTIONS, options),
                    records.MetaSet(META_BOOTSTRAP, bootstrap),
                ]
                st = st.copy()
                for r in minted:
                    st.apply(r)
                return minted + self._level_records(st)

            self._commit_records(first)
            return
        if self._meta(META_BOOTSTRAP) is not None or self.settings.auto_feature_level:
            self._raise_level_if_due()
        now = now_ms()
        timeout_ms = self._config_int("heartbeatTimeoutMillis", self.settings.heartbeat_timeout_ms)
        scan_ms = self._config_int("scanNotActiveBrokerInterval", self.settings.scan_interval_ms)
        # A new leader has not heard every broker yet: wait one heartbeat timeout before
        # declaring anybody dead (its table may be empty or old).
        if self._leader_since_ms is None or now - self._leader_since_ms < timeout_ms:
            return
        # Only the broker sets whose liveness or state changed are looked at on a tick (deadlines in
        # the heartbeat table, records in _on_apply); every broker set once per scan interval.
        with self._lock:
            names = self._pending | self.heartbeats.take_changed(now)
            self._pending = set()
            gone = self.heartbeats.expired(now) if now - self._last_scan_ms >= scan_ms else None
        if gone is not None:
            self._last_scan_ms = now
            for cluster, name, broker_id in gone:
                log.info("broker %s/%s id %s is not alive any more", cluster, name, broker_id)
            with self.sync.state_lock:
                names = set(self.state.broker_sets)
        if names:
            self._elect_where_needed(sorted(names), now)

    def _published_levels(self, members: list[str]) -> dict[str, int | None]:
        """The newest level each member published (None: not yet); an mqctl 0.1 node publishes its
        address without a level, and speaks level 1. Read from the applied state: a node publishes
        through the log from any node (_publish_self), not through the leader's view."""
        out: dict[str, int | None] = {}
        for m in members:
            mine = self._meta(META_NODE_PREFIX + m)
            if not isinstance(mine, dict):
                out[m] = None
                continue
            level = mine.get("maxFeatureLevel", 1)
            out[m] = level if isinstance(level, int) and not isinstance(level, bool) else 1
        return out

    def _level_records(self, st: core.ControllerState) -> list[records.Record]:
        """Decided from replicated records only (the members' published levels, the bootstrap entry),
        so that whichever node leads decides the same: the new group's starting level once every
        initial member has said what it speaks, and with --auto-feature-level a raise once every
        member speaks a higher level."""
        current = sorted([self.settings.raft_address, *self.members()])
        boot = st.meta.get(META_BOOTSTRAP)
        if isinstance(boot, dict):
            initial = [m for m in boot.get("members") or [] if m in current]
            levels = self._published_levels(initial)
            if any(v is None for v in levels.values()):
                return []
            cap = boot.get("maxLevel", records.MAX_FEATURE_LEVEL)
            level = min([cap, *(v for v in levels.values() if v is not None)])
            out: list[records.Record] = [records.MetaSet(META_BOOTSTRAP, None)]
            if level > st.feature_level and level in records.FEATURE_LEVELS:
                out.insert(0, records.FeatureLevelSet(level))
            return out
        if not self.settings.auto_feature_level:
            return []
        levels = self._published_levels(current)
        if any(v is None for v in levels.values()):
            return []
        level = min(v for v in levels.values() if v is not None)
        if level > st.feature_level and level in records.FEATURE_LEVELS:
            return [records.FeatureLevelSet(level)]
        return []

    def _raise_level_if_due(self) -> None:
        now = time.monotonic()
        if now - self._level_checked < 0.5:
            return
        self._level_checked = now
        self._commit_records(self._level_records)

    def _config_int(self, key: str, default: int) -> int:
        with self.sync.state_lock:
            value = self.state.config.get(key, default)
        try:
            return int(value)
        except (TypeError, ValueError):
            return default

    def _elect_where_needed(self, names: list[str], now: int) -> None:
        """Trigger controller elections the moment masters' leases end (not a scan later): every
        broker set that needs one in one Raft entry, so a mass failure is one round trip."""
        with self._lock:
            ctx = core.Context(now_ms=now, live={name: self.heartbeats.snapshot(name) for name in names})
        due: list[tuple[str, str]] = []
        with self.sync.state_lock:
            for name in names:
                if core.needs_controller_election(self.state, name, ctx):
                    bs = self.state.broker_set(name)
                    assert bs is not None
                    due.append((bs.cluster_name, name))
        if not due:
            return
        with self._lock:  # looked at again on the next ticks until elected (or no longer needed)
            self._pending.update(name for _, name in due)
        due = [(c, n) for c, n in due if now - self._last_trigger_ms.get(n, 0) >= 1000]
        if not due:
            return
        for _, name in due:
            self._last_trigger_ms[name] = now
        answers: list[tuple[str, core.Result]] = []

        def decide(state: core.ControllerState) -> core.Result:
            answers.clear()
            out: list[records.Record] = []
            for cluster_name, name in due:
                request = {"cluster_name": cluster_name, "broker_name": name, "broker_id": -1}
                result = core.handle(state, "ElectMaster", request, self._context([name]))
                answers.append((name, result))
                out.extend(result.records)
            return core.Result(Code.SUCCESS, "", {}, out)

        answer = self._decide_and_commit(decide, 5.0)
        for name, result in answers:
            log.info(
                "controller-triggered election for %s: code %s %s master %s",
                name,
                int(result.code) if answer["code"] == 0 else answer["code"],
                result.remark or "" if answer["code"] == 0 else answer.get("remark", ""),
                result.response.get("master_broker_id"),
            )
