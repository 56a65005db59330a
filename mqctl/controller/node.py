"""A controller node: the replicated core plus what lives only in the leader's memory.

The node owns three things the pure core must not: the clock, the heartbeat table
(RocketMQ DLedger mode keeps heartbeats out of the log) and the watchers of role changes.
It stamps each write with a Context (now + the heartbeat rows of the broker set concerned),
appends it to the Raft log and returns what the core decided when the entry was applied.

Here are the NodeAPI entry points (call, metadata, watch, ...), the tick, and the wiring of the
node's parts, each a job of its own with its own state: its Raft group and the one path of a write
(node_raft.NodeRaft), the leader's work on each tick (leader_work.LeaderWork), the group's feature
level (feature_levels.FeatureLevels), the role changes it tells after an election, the node's part
in the 1008 push (role_changes.RoleChanges), and the watches that carry them (watches.RoleWatches).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from mqctl import methods
from mqctl.controller import core, quorum, records
from mqctl.controller.feature_levels import FeatureLevels
from mqctl.controller.leader_work import LeaderWork
from mqctl.controller.liveness import HeartbeatTable
from mqctl.controller.node_raft import META_GROUP_ID, META_GROUP_OPTIONS, META_NODE_PREFIX, NodeRaft
from mqctl.controller.node_settings import NodeSettings
from mqctl.controller.role_changes import RoleChanges
from mqctl.controller.watches import RoleWatch, RoleWatches
from mqctl.errors import Code, MqctlError

if TYPE_CHECKING:
    from mqctl.controller.raftlog import RaftSeam

log = logging.getLogger("mqctl.node")

RAFT_STATES = {0: "follower", 1: "candidate", 2: "leader"}

TRANSFER_AGAIN_S = 2.0  # a transfer not taken by then is asked for again, until the caller's timeout
SYNC_STATE_PART = 256  # broker sets a GetSyncStateData reads under one hold of the state lock


def now_ms() -> int:
    return int(time.time() * 1000)


class NodeStopped(Exception):
    pass


class ControllerNode:
    """Implements NodeAPI (docs/architecture.md) on top of ControllerSyncObj."""

    def __init__(self, settings: NodeSettings) -> None:
        self.settings = settings
        self.heartbeats = HeartbeatTable()
        self._lock = threading.Lock()  # the heartbeat table's (and the leader work's set of broker sets)
        self._stop = threading.Event()
        self._hash_cache: tuple[int, str] = (-1, "")
        self._fatal_error: str | None = None
        self.joined = False  # published, the group's id applied and checked (sd_notify's READY=1)
        self.raft = NodeRaft(
            settings.raft_address,
            settings.partners,
            settings.grpc_address,
            settings.remoting_address,
            stopped_because=lambda: self.fatal_error,
        )
        self.feature_levels = FeatureLevels(self.raft, auto=settings.auto_feature_level)
        self.leader_work = LeaderWork(
            self.raft,
            self.feature_levels,
            self.heartbeats,
            self._lock,
            self._context,
            now_ms,
            group_options=settings.critical_options(),
            heartbeat_timeout_ms=settings.heartbeat_timeout_ms,
            scan_interval_ms=settings.scan_interval_ms,
            initial_feature_level=settings.initial_feature_level,
        )
        self.watches = RoleWatches()
        self.role_changes = RoleChanges(self.raft, self.watches, now_ms)
        # last: the Raft layer's thread may apply entries (and call _on_apply) from here on
        self.sync: RaftSeam = self.raft.open(
            settings.data_dir,
            secret=settings.cluster_secret,
            bind_address=settings.raft_bind or settings.raft_address,
            initial_config=settings.initial_config(),
            on_apply=self._on_apply,
        )
        self._ticker = threading.Thread(target=self._tick_loop, name="mqctl-ticker", daemon=True)

    # --- lifecycle ----------------------------------------------------------------------

    def start(self) -> None:
        self.raft.wait_bound(self.settings.raft_bind or self.settings.raft_address)
        self._ticker.start()

    def stop(self) -> None:
        self._stop.set()
        self.watches.close_all()
        try:
            self.sync.destroy_synchronous()
        except Exception:  # already stopped
            pass

    @property
    def state(self) -> core.ControllerState:
        return self.sync.state

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

    def is_serving(self) -> bool:
        return self.fatal_error is None and not self._stop.is_set() and self.sync.leader_id() is not None

    def is_leader(self) -> bool:
        return self.raft.is_leader()

    def leader_raft_address(self) -> str:
        return self.raft.leader_raft_address()

    def leader_grpc_address(self) -> str:
        return self.raft.leader_grpc_address()

    def members(self) -> list[str]:
        return self.raft.members()

    # --- NodeAPI ------------------------------------------------------------------------

    def call(self, method: str, request: dict[str, Any], *, timeout: float = 5.0) -> dict[str, Any]:
        if method == "GetSnapshot":
            return self._snapshot(timeout)
        on_leader = method in methods.WRITE_METHODS or method in methods.FRESH_READ_METHODS
        if on_leader and not self.is_leader():
            return self.raft.not_leader()  # before the request is read, as RocketMQ's followers answer
        try:  # the one place a transport's request becomes the method's typed request
            typed = core.decode(method, request)
        except core.Refusal as refusal:
            answer = core.refused(refusal).answer()
            return self._naming_the_leader(answer) if method == "Heartbeat" else answer
        if isinstance(typed, core.Heartbeat):
            return self._heartbeat(typed)
        if isinstance(typed, quorum.ChangeQuorumRequest):
            return self._change_quorum(typed, timeout)
        if method in methods.LOCAL_READ_METHODS:
            return self._local(typed)
        if method in methods.FRESH_READ_METHODS:
            try:
                self.sync.read_barrier_sync(timeout=timeout)  # shared with concurrent reads
            except Exception as exc:
                # a read changes nothing, so "outcome unknown" does not apply: answer UNAVAILABLE
                # (with the leader if known) and let the client retry elsewhere
                answer = self.raft.unavailable(exc)
                if answer["code"] == int(Code.SYSTEM_ERROR):
                    answer = {
                        "code": int(Code.UNAVAILABLE),
                        "leader_address": self.leader_grpc_address(),
                        "remark": "timed out waiting for the read barrier to commit",
                    }
                return answer
            if not self.is_leader():
                return self.raft.not_leader()
            return self._local(typed)
        response = self._replicate(typed, timeout)
        if isinstance(typed, core.RegisterBrokerRequest) and response.get("code") == 0:
            self._note_registration(typed, response)
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
                    "grpc_address": self.raft.grpc_address_of(addr),
                    "remoting_address": self.raft.remoting_address_of(addr),
                    "is_leader": addr == leader,
                    "is_self": addr == self.settings.raft_address,
                    "connected": (
                        addr == self.settings.raft_address
                        or status.get("partner_node_status_server_" + addr) == 2
                    ),
                    "match_index": int(status.get("match_idx_server_" + addr, 0) or 0),
                    "next_index": int(status.get("next_node_idx_server_" + addr, 0) or 0),
                    "max_feature_level": self.feature_levels.speaks(addr),
                }
            )
        with self.sync.state_lock:  # the hash with the index of the state it hashes (health compares them)
            feature_level, state_hash = self.state.feature_level, self._state_hash()
            # the status, read before, may lag the entry just applied; entries after the last one
            # the state machine executed (no-ops, membership) do not change the state
            last_applied = max(int(status.get("last_applied", 0)), self.sync.applied_index)
        return {
            "code": 0,
            "remark": "",
            "group": self.settings.group,
            "group_id": str(self.raft.meta(META_GROUP_ID, "")),
            "controller_leader_id": leader,
            "controller_leader_address": self.leader_grpc_address(),
            "is_leader": self.is_leader(),
            "self_id": self.settings.raft_address,
            "peers": peers,
            "term": int(status.get("raft_term", 0)),
            "commit_index": int(status.get("commit_idx", 0)),
            "last_applied": last_applied,
            "has_quorum": bool(status.get("has_quorum", False)),
            "state_hash": state_hash,
            "state": RAFT_STATES.get(int(status.get("state", 0)), "unknown"),
            "log_length": int(status.get("log_len", 0)),
            "feature_level": feature_level,
            "max_feature_level": records.MAX_FEATURE_LEVEL,
            "record_versions": records.record_versions(),
            "problem": self.fatal_error or self.sync.storage_error or "",
        }

    def sync_state_data(self, broker_names: list[str] | None = None) -> dict[str, Any]:
        """GetSyncStateData of some broker sets (every one when None) as this node sees it, without a
        barrier: for what must not wait on Raft (the metrics and status page of `mqctl serve
        --metrics-address`; the 1008 push after an election this node has just applied)."""
        answer = self._sync_state_table(core.GetSyncStateDataRequest(list(broker_names or [])))
        with self.sync.state_lock:
            lease = self.state.config.get("heartbeatTimeoutMillis", self.settings.heartbeat_timeout_ms)
        return {"replicas_info_table": answer.get("replicas_info_table", {}), "lease_ms": int(lease)}

    def _sync_state_table(self, request: core.GetSyncStateDataRequest) -> dict[str, Any]:
        """GetSyncStateData a few hundred broker sets at a time, each part with its own heartbeat
        rows and its own hold of the state lock, as RocketMQ reads one broker set at a time: a read
        of a whole fleet neither holds the lock that writes wait for nor builds every row of the
        heartbeat table at once (what it builds at its peak the process keeps)."""
        names = request.broker_names
        if 0 < len(names) <= SYNC_STATE_PART:
            return self._answer(request)
        if not names:
            with self.sync.state_lock:
                names = sorted(self.state.broker_sets)
        table: dict[str, Any] = {}
        for at in range(0, len(names), SYNC_STATE_PART):  # the core checks and sorts each part
            part = self._answer(core.GetSyncStateDataRequest(names[at : at + SYNC_STATE_PART]))
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
            return self.raft.not_leader()
        try:
            self.sync.read_barrier_sync(timeout=timeout)
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

    def _change_quorum(self, request: quorum.ChangeQuorumRequest, timeout: float) -> dict[str, Any]:
        """Membership and leadership changes (pysyncobj addNodeToCluster, removeNodeFromCluster,
        transferLeadership), on the leader; waits for the outcome."""
        from pysyncobj import FAIL_REASON  # lazy: pysyncobj

        action, target = request.action, request.raft_address
        if action == "feature-level":
            return self.feature_levels.raise_to(request.feature_level, timeout)
        if not self.is_leader():
            return self.raft.not_leader()
        me = self.settings.raft_address
        members = self.members()
        refused = quorum.membership_refusal(action, target, me, members, self.sync.active_members())
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
            again = time.monotonic() + TRANSFER_AGAIN_S
            while time.monotonic() < deadline:
                leader = self.leader_raft_address()
                if leader and leader != me:
                    break
                if leader == me and time.monotonic() >= again:
                    # TimeoutNow is one message, lost with a connection that drops under it; a target
                    # that got it and campaigns ignores another of the same term
                    self.sync.change_membership(action, target or None, lambda _result, _error: None)
                    again = time.monotonic() + TRANSFER_AGAIN_S
                time.sleep(0.02)
            leader = self.leader_raft_address()
            if not leader or leader == me:
                return {
                    "code": int(Code.SYSTEM_ERROR),
                    "remark": "the transfer was sent but no other node took the leadership in time",
                }
            remark = f"{leader} leads now"
        group = quorum.ChangeQuorumResult(
            self.leader_raft_address(), self.leader_grpc_address(), tuple(sorted([me, *self.members()]))
        )
        return core.Result(Code.SUCCESS, remark, group).answer()

    def watch(self, cluster_name: str, broker_name: str) -> RoleWatch:
        return self.role_changes.subscribe(cluster_name, broker_name)

    # --- internals ----------------------------------------------------------------------

    def _context(self, broker_names: list[str]) -> core.Context:
        with self._lock:
            live = {name: self.heartbeats.with_last(name) for name in broker_names if name}
        return core.Context(now_ms=now_ms(), live=live, term=self.sync.term())

    def _broker_names_of(self, request: core.Request) -> list[str]:
        with self.sync.state_lock:
            return core.broker_names_of(self.state, request)

    def _local(self, request: core.Request) -> dict[str, Any]:
        if isinstance(request, core.GetSyncStateDataRequest):
            return self._sync_state_table(request)
        answer = self._answer(request)
        if isinstance(request, core.GetConfigRequest):
            answer["config"] = dict(
                sorted({**answer.get("config", {}), **self.settings.local_config(self.members())}.items())
            )
        return answer

    def _answer(self, request: core.Request) -> dict[str, Any]:
        ctx = self._context(self._broker_names_of(request))
        with self.sync.state_lock:  # not while pysyncobj's thread is half-way through an entry
            result = core.handle(self.state, request, ctx)
        return result.answer()

    def _replicate(self, request: core.Request, timeout: float) -> dict[str, Any]:
        names = self._broker_names_of(request)

        def decide(state: core.ControllerState) -> core.Result:
            return core.handle(state, request, self._context(names))

        return self.raft.decide_and_commit(decide, timeout)

    def _heartbeat(self, beat: core.Heartbeat) -> dict[str, Any]:
        # Accepted on every node (RocketMQ brokers beat to all controllers); each node keeps
        # its own table, so a follower that becomes leader already knows who is alive.
        # The hot path of a fleet: it reads the applied state without the state lock (the rule reads
        # one broker set's brokerEpoch of one replica, a single attribute, and only for a heartbeat
        # that carries a brokerEpoch; a heartbeat racing an apply is ordered before or after it, as on
        # the wire), so a long holder of that lock (a snapshot, a large read) never delays it.
        now = now_ms()
        result = core.handle(self.state, beat, core.Context(now_ms=now, live={}))
        if result.code == 0:
            with self._lock:
                self.heartbeats.on_heartbeat(beat, now)
        return self._naming_the_leader({"code": int(result.code), "remark": result.remark or ""})

    def _naming_the_leader(self, answer: dict[str, Any]) -> dict[str, Any]:
        if not self.is_leader():
            # accepted here all the same; the leader's address tells a broker that beats one node
            # only where the beats count (the gRPC client moves its heartbeat stream there)
            answer["leader_address"] = self.leader_grpc_address()
        return answer

    def _note_registration(self, request: core.RegisterBrokerRequest, response: dict[str, Any]) -> None:
        # a field the broker left out (None) keeps the heartbeat row's value (RocketMQ)
        with self._lock:
            self.heartbeats.on_registration(request, int(response.get("broker_epoch", 0)), now_ms())

    def _on_apply(self, state: core.ControllerState, applied: list[records.Record]) -> None:
        """Runs on every node after an entry is applied: the broker sets it touched are looked at
        for an election on the next tick, and watchers hear about new masters."""
        for r in applied:
            if isinstance(r, records.FeatureLevelSet):
                log.info("the group is at feature level %s now", r.level)
        touched_sets = {name for r in applied if isinstance(name := getattr(r, "broker_name", None), str)}
        if any(isinstance(r, records.FailoverPauseSet) and not r.broker_name for r in applied):
            touched_sets |= set(state.broker_sets)  # every set resumed (or paused) at once
        self.leader_work.look_at(touched_sets)
        self.role_changes.on_apply(state, applied)

    # --- the tick -----------------------------------------------------------------------

    def _tick_loop(self) -> None:
        published = False
        checked_group = ""
        stall_said = 0.0
        while not self._stop.wait(0.02):
            stall_said = self.raft.say_stall(stall_said)
            try:
                if not self.sync.is_ready():
                    continue
                term = self.sync.term()
                # After a restart or an election, apply everything committed so far before acting
                # on the state: a new leader that has not yet applied the old entries would see no
                # group id and mint another, or miss a broker set.
                if not self.raft.catch_up():
                    continue
                if not published:
                    published = self._publish_self()
                group_id = str(self.raft.meta(META_GROUP_ID) or "")
                if group_id and group_id != checked_group:
                    # checked again whenever it changes: a node started on another group's data
                    # first sees its own old group id, then this group's once it has caught up
                    checked_group = group_id
                    self._check_group()
                if published and checked_group and not self.fatal_error:
                    self.joined = True
                if self.is_leader():
                    self.leader_work.lead(term)
                else:
                    self.leader_work.follow()
            except Exception:
                log.exception("ticker error")

    def _publish_self(self) -> bool:
        key = META_NODE_PREFIX + self.settings.raft_address
        mine: dict[str, Any] = {
            "grpc": self.settings.grpc_address,
            "maxFeatureLevel": records.MAX_FEATURE_LEVEL,
        }
        if self.settings.remoting_address:
            mine["remoting"] = self.settings.remoting_address
        if self.raft.meta(key) == mine:
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
        from mqctl.controller.datadir import record_group_id  # lazy: the raft fork

        group_id = str(self.raft.meta(META_GROUP_ID))
        theirs = self.raft.meta(META_GROUP_OPTIONS) or {}
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
