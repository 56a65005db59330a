"""The controller node's side of its Raft group: the Raft layer it opens, the writes it appends, the
group's own keys in the replicated state.

Apart from the node's entry points so that what a write waits on (the decide lock, the leader's view,
the commit callback) and how each way of not being appended is answered stand in one place, beside
what else needs the Raft layer alone: the barrier a new term starts with, the hand-over of the
leadership at shutdown, a stalled Raft thread, the members and the addresses they published.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mqctl.controller import core, records
from mqctl.errors import Code

if TYPE_CHECKING:
    from mqctl.controller.raftlog import ApplyHook, RaftSeam

log = logging.getLogger("mqctl.node")

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


class _Failed(Exception):
    """A pysyncobj callback's FAIL_REASON, in the shape `unavailable` reads."""

    def __init__(self, reason: int) -> None:
        super().__init__(f"reason {reason}")
        self.errorCode = reason


class NodeRaft:
    """One node's Raft layer (seen through RaftSeam only) and the one path of its writes.

    ``stopped_because`` tells why the node must stop (None while it may serve): no write is decided
    then. The Raft layer is opened (`open`) once the parts the apply hook reaches exist."""

    def __init__(
        self,
        raft_address: str,
        partners: list[str],
        grpc_address: str,
        remoting_address: str,
        stopped_because: Callable[[], str | None],
    ) -> None:
        self.raft_address = raft_address
        self._partners = list(partners)
        self._grpc_address = grpc_address
        self._remoting_address = remoting_address
        self._stopped_because = stopped_because
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

    def open(
        self,
        data_dir: str | None,
        *,
        secret: str | None,
        bind_address: str,
        initial_config: dict[str, str],
        on_apply: ApplyHook,
    ) -> RaftSeam:
        """Make the Raft layer (its thread starts here; ``on_apply`` may run from now on)."""
        from mqctl.controller.raftlog import ControllerSyncObj, make_conf  # lazy: pysyncobj, the raft fork

        conf = make_conf(data_dir, secret=secret, bind_address=bind_address)
        # the Raft layer, seen through its seam only (mqctl/controller/raftlog.py, RaftSeam)
        self.sync: RaftSeam = ControllerSyncObj(
            self.raft_address, list(self._partners), conf, initial_config, on_apply=on_apply
        )
        return self.sync

    def wait_bound(self, bind: str) -> None:
        """The Raft port listens, or OSError saying where it could not."""
        from pysyncobj import SyncObjException  # lazy: pysyncobj

        try:
            self.sync.wait_bound()
        except SyncObjException as exc:
            self.sync.destroy()
            raise OSError(
                f"cannot listen for Raft on {bind}: address already in use or not available"
            ) from exc

    # --- who leads, who is a member, where they listen -------------------------------------

    def is_leader(self) -> bool:
        return bool(self.sync.is_leader())

    def leader_raft_address(self) -> str:
        return self.sync.leader_id() or ""

    def members(self) -> list[str]:
        """The other nodes' Raft addresses as the Raft log has them now (membership changes included)."""
        try:
            return self.sync.members()
        except Exception:  # not started yet
            return sorted(self._partners)

    def connected_followers(self) -> list[str]:
        status = self.sync.status()
        return [m for m in self.members() if status.get("partner_node_status_server_" + m) == 2]

    def meta(self, key: str, default: Any = None) -> Any:
        """A replicated meta value, read under the state lock (never half an entry)."""
        with self.sync.state_lock:
            return self.sync.state.meta.get(key, default)

    def grpc_address_of(self, raft_address: str) -> str:
        if raft_address == self.raft_address:
            return self._grpc_address
        return str(self.meta(META_NODE_PREFIX + raft_address, {}).get("grpc", ""))

    def remoting_address_of(self, raft_address: str) -> str:
        if raft_address == self.raft_address:
            return self._remoting_address
        return str(self.meta(META_NODE_PREFIX + raft_address, {}).get("remoting", ""))

    def leader_grpc_address(self) -> str:
        leader = self.leader_raft_address()
        return self.grpc_address_of(leader) if leader else ""

    # --- the Raft thread and the leadership ------------------------------------------------

    def stalled_for(self) -> float:
        """Seconds since the Raft thread last finished a tick (its poll)."""
        return float(time.monotonic() - self.sync.connection_clock())

    def say_stall(self, said: float) -> float:
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

    def catch_up(self, timeout: float = 2.0) -> bool:
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

    def hand_over_leadership(self, timeout: float) -> str:
        """A controlled shutdown of a leader (SIGTERM): hand the leadership to a caught-up follower
        first (Raft's TimeoutNow, as etcd and Kafka do), so that the group elects at once instead of
        after an election timeout. No write is decided meanwhile (the decide lock is held), so a
        follower catches up with the last entries; a write waiting for the lock is then told the new
        leader. Returns the new leader's Raft address, "" if this node did not lead or none took
        over within ``timeout``."""
        from pysyncobj import FAIL_REASON  # lazy: pysyncobj

        me = self.raft_address
        if not self.is_leader():
            return ""
        if not self.connected_followers():
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
                if sent_at < 0 and not (self.is_leader() and self.connected_followers()):
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
            if sent_at < 0 and not self.connected_followers():
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

    # --- the one path of a write -----------------------------------------------------------

    def decide_and_commit(
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
        from pysyncobj import FAIL_REASON  # lazy: pysyncobj

        deadline = time.monotonic() + timeout
        if not self._decide_lock.acquire(timeout=max(0.0, timeout)):
            return self._busy()
        try:
            stopped = self._stopped_because()
            if stopped:
                return {
                    "code": int(Code.SYSTEM_ERROR),
                    "remark": f"this controller node stopped: {stopped}",
                }
            if not self.is_leader():
                return self.not_leader()
            view = self._leader_view(deadline)
            if view is None:
                return {
                    "code": int(Code.UNAVAILABLE),
                    "leader_address": self.leader_grpc_address(),
                    "remark": "the new leader has not applied the earlier entries yet; retry",
                }
            result = decide(view)
            answer = result.answer()
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
                return self.unavailable(exc)
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
            return self.unavailable(_Failed(outcome[0]))
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
                    self._view = self.sync.state.decision_view()
            return self._view
        self._caught_up_term = -1  # a new view starts after a barrier of this very term
        if not self.catch_up(max(0.01, deadline - time.monotonic())) or self._caught_up_term != term:
            return None
        with self.sync.state_lock:
            self._view = self.sync.state.decision_view()
        self._view_term = term
        return self._view

    def commit_records(
        self, decide: Callable[[core.ControllerState], list[records.Record]], timeout: float = 5.0
    ) -> bool:
        """Node bookkeeping (group id, node addresses) through the same one decision path."""
        answer = self.decide_and_commit(lambda st: core.Result(Code.SUCCESS, "", {}, decide(st)), timeout)
        if answer["code"] != 0:
            log.debug("node records not committed: %s", answer.get("remark"))
            return False
        return True

    # --- the answers of a write that was not made ------------------------------------------

    def _busy(self) -> dict[str, Any]:
        return {
            "code": int(Code.UNAVAILABLE),
            "leader_address": self.leader_grpc_address(),
            "remark": "an earlier write of this leader is not committed yet; the outcome of this "
            "one is not decided, retry",
        }

    def not_leader(self) -> dict[str, Any]:
        leader = self.leader_grpc_address()
        remark = "The controller is not in leader state"
        if leader:
            remark += f"; leader is {leader}"
        return {"code": int(Code.CONTROLLER_NOT_LEADER), "remark": remark, "leader_address": leader}

    def unavailable(self, exc: Exception) -> dict[str, Any]:
        reason: object = getattr(exc, "errorCode", None)
        if reason == "timeout":
            # The entry may still commit: the outcome is unknown, as RocketMQ's 5 s wait.
            return {
                "code": int(Code.SYSTEM_ERROR),
                "remark": "timed out waiting for the Raft commit; the outcome is unknown",
            }
        if isinstance(reason, int) and reason in NOT_APPENDED:
            # pysyncobj never appended the entry: safe for the client to retry at the leader.
            answer = self.not_leader()
            answer["remark"] += f" ({NOT_APPENDED[reason]})"
            return answer
        fallback = str(reason or type(exc).__name__)
        name = OUTCOME_UNKNOWN.get(reason, fallback) if isinstance(reason, int) else fallback
        return {
            "code": int(Code.UNAVAILABLE),
            "remark": f"the Raft entry was not committed ({name}); the outcome is unknown",
            "leader_address": self.leader_grpc_address(),
        }
