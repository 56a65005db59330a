"""What the leader does on its own, tick by tick (every 20 ms): mints a new group's id, raises the
feature level when it is due (feature_levels.FeatureLevels), finds the brokers whose heartbeats
stopped and starts the elections their broker sets need, says which members it cannot reach.

Apart from the node because none of it answers a request: it is the leader's initiative, with a
state of its own (since when it leads, the broker sets to look at, when it last scanned or elected,
which members it could not reach), decided through the same one write path as every request
(NodeRaft.decide_and_commit).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field

from mqctl.controller import core, records
from mqctl.controller.feature_levels import FeatureLevels
from mqctl.controller.liveness import HeartbeatTable
from mqctl.controller.node_raft import META_BOOTSTRAP, META_GROUP_ID, META_GROUP_OPTIONS, NodeRaft

log = logging.getLogger("mqctl.node")

PEER_GRACE_MS = 2000  # a new leader's connections to its peers are up within this, or they are lost


def once_a_second(due: list[tuple[str, str]], last_ms: dict[str, int], now: int) -> list[tuple[str, str]]:
    """The elections of ``due`` to trigger now: a broker set's at most once a second (``last_ms``,
    brokerName -> when its last was triggered, is updated), so that a refused or slow election is not
    asked for again on every 20 ms tick."""
    due = [(c, n) for c, n in due if now - last_ms.get(n, 0) >= 1000]
    for _, name in due:
        last_ms[name] = now
    return due


@dataclass(eq=False)
class LeaderWork:
    """The leader's part of the node's tick.

    ``heartbeats`` is the node's table, read under ``lock`` (the lock the node updates it under);
    ``context`` stamps a decision with the clock and heartbeat rows of the broker sets named;
    ``group_options`` are the options every member must agree on, written with a new group's id;
    ``initial_feature_level`` the highest level it starts at (0: the highest its initial members speak)."""

    raft: NodeRaft
    levels: FeatureLevels
    heartbeats: HeartbeatTable
    lock: threading.Lock
    context: Callable[[list[str]], core.Context]
    clock: Callable[[], int]
    _: KW_ONLY
    group_options: dict[str, str]
    heartbeat_timeout_ms: int
    scan_interval_ms: int
    initial_feature_level: int
    _leader_since_ms: int | None = field(init=False, default=None)
    _leader_term: int = field(init=False, default=-1)
    _last_trigger_ms: dict[str, int] = field(init=False, default_factory=dict)
    _last_scan_ms: int = field(init=False, default=0)
    # broker sets the leader must look at for an election: their liveness changed, a record
    # touched them, or an election they need was not made yet (throttled, refused)
    _pending: set[str] = field(init=False, default_factory=set)
    _peers_checked: float = field(init=False, default=0.0)
    _lost_peers: list[str] = field(init=False, default_factory=list)

    def look_at(self, broker_names: set[str]) -> None:
        """Broker sets an applied record touched: looked at for an election on the next tick."""
        with self.lock:
            self._pending |= broker_names

    def lead(self, term: int) -> None:
        """A tick of this node as the leader of ``term``."""
        if self._leader_since_ms is None or self._leader_term != term:
            # a new term, even one the ticker did not see as a follower in between (it
            # may have been blocked in an election call): start the grace period again
            self._leader_since_ms = self.clock()
            self._leader_term = term
            self._last_scan_ms = 0  # every broker set is looked at when the grace ends
            self._lost_peers = []
            log.info("became leader (term %s)", term)
        self._say_lost_peers(term)
        self._work()

    def follow(self) -> None:
        """A tick of this node as a follower (or a candidate)."""
        if self._leader_since_ms is not None:
            log.info("lost leadership")
        self._leader_since_ms = None

    def _say_lost_peers(self, term: int) -> None:
        """The leader says which members it cannot reach (once it has led for PEER_GRACE_MS, the time
        its connections take), again when that changes: the log of a group that lost a node names it."""
        now = time.monotonic()
        if (
            now - self._peers_checked < 0.5
            or self._leader_since_ms is None
            or self.clock() - self._leader_since_ms < PEER_GRACE_MS
        ):
            return
        self._peers_checked = now
        status = self.raft.sync.status()
        members = self.raft.members()
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

    def _work(self) -> None:
        raft = self.raft
        if not raft.meta(META_GROUP_ID):
            group_id, options = uuid.uuid4().hex, dict(self.group_options)
            members = sorted([raft.raft_address, *raft.members()])
            cap = self.initial_feature_level or records.MAX_FEATURE_LEVEL
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
                return minted + self.levels.due(st)

            raft.commit_records(first)
            return
        if raft.meta(META_BOOTSTRAP) is not None or self.levels.auto:
            self.levels.raise_if_due()
        now = self.clock()
        timeout_ms = self._config_int("heartbeatTimeoutMillis", self.heartbeat_timeout_ms)
        scan_ms = self._config_int("scanNotActiveBrokerInterval", self.scan_interval_ms)
        # A new leader has not heard every broker yet: wait one heartbeat timeout before
        # declaring anybody dead (its table may be empty or old).
        if self._leader_since_ms is None or now - self._leader_since_ms < timeout_ms:
            return
        # Only the broker sets whose liveness or state changed are looked at on a tick (deadlines in
        # the heartbeat table, records in look_at); every broker set once per scan interval.
        with self.lock:
            names = self._pending | self.heartbeats.take_changed(now)
            self._pending = set()
            gone = self.heartbeats.expired(now) if now - self._last_scan_ms >= scan_ms else None
        if gone is not None:
            self._last_scan_ms = now
            for cluster, name, broker_id in gone:
                log.info("broker %s/%s id %s is not alive any more", cluster, name, broker_id)
            with raft.sync.state_lock:
                names = set(raft.sync.state.broker_sets)
        if names:
            self._elect_where_needed(sorted(names), now)

    def _config_int(self, key: str, default: int) -> int:
        with self.raft.sync.state_lock:
            value = self.raft.sync.state.config.get(key, default)
        try:
            return int(value)
        except (TypeError, ValueError):
            return default

    def _elect_where_needed(self, names: list[str], now: int) -> None:
        """Trigger controller elections the moment masters' leases end (not a scan later): every
        broker set that needs one in one Raft entry, so a mass failure is one round trip."""
        with self.lock:
            ctx = core.Context(now_ms=now, live={name: self.heartbeats.snapshot(name) for name in names})
        sync = self.raft.sync
        with sync.state_lock:
            due = core.elections_due(sync.state, names, ctx)
        if not due:
            return
        with self.lock:  # looked at again on the next ticks until elected (or no longer needed)
            self._pending.update(name for _, name in due)
        due = once_a_second(due, self._last_trigger_ms, now)
        if not due:
            return
        answers: list[tuple[str, core.Result]] = []

        def decide(state: core.ControllerState) -> core.Result:
            result, each = core.elect_each(state, due, lambda name: self.context([name]))
            answers[:] = each
            return result

        answer = self.raft.decide_and_commit(decide, 5.0)
        for name, result in answers:
            log.info(
                "controller-triggered election for %s: code %s %s master %s",
                name,
                int(result.code) if answer["code"] == 0 else answer["code"],
                result.remark or "" if answer["code"] == 0 else answer.get("remark", ""),
                result.response.get("master_broker_id"),
            )
