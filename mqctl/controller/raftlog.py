"""The replicated state machine on pysyncobj, and its JSON snapshot.

Every write is one log entry: the typed records (mqctl.controller.records) the leader decided;
every node applies the same records, so a node never re-decides and cannot fork. The snapshot
that pysyncobj writes at log compaction is JSON (the controller state plus the few Raft
bookkeeping values pysyncobj needs), never pickle.
"""

from __future__ import annotations

import base64
import errno
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol, cast

_INET_NTOP = socket.inet_ntop
from pysyncobj import SyncObjConf  # noqa: E402
from pysyncobj.config import FAIL_REASON  # noqa: E402
from pysyncobj.node import TCPNode  # noqa: E402
from pysyncobj.syncobj import SyncObjException  # noqa: E402

from mqctl.raft.syncobj import SyncObj  # noqa: E402 (mqctl's fork: durable log, FORK.md)
from mqctl.raft.syncobj import replicated as _replicated  # noqa: E402

# pysyncobj/win_inet_pton.py (imported by pysyncobj.tcp_connection) assigns a Windows-only
# socket.inet_ntop on every OS; restore the real one for everything else in this process.
socket.inet_ntop = _INET_NTOP

from mqctl.controller import core  # noqa: E402
from mqctl.controller.records import Record, RecordError, decode_entry  # noqa: E402
from mqctl.errors import Code  # noqa: E402
from mqctl.raft.journal import JournalFactory  # noqa: E402
from mqctl.raft.storage import Storage  # noqa: E402
from mqctl.raft.transport import GuardedTransport  # noqa: E402

# pysyncobj's decorator, typed: the method becomes a call that appends a log entry (and takes
# pysyncobj's sync=, timeout=, callback= keywords); it runs with the entry's arguments on apply
replicated = cast(Callable[[Callable[..., Any]], Callable[..., Any]], _replicated)

log = logging.getLogger("mqctl.raft")

SNAPSHOT_FORMAT = "mqctl-controller-snapshot/1"

# Free space a local snapshot must leave behind. Without it the snapshot's file takes the last
# pages of a nearly full disk while it is written, and the journal's next entry or the term and
# vote file fails for that while (seen on a full tmpfs: the node stopped acknowledging for a
# moment every 2 s retry). The snapshot fails at once instead, writing nothing.
SNAPSHOT_RESERVE = 256 * 1024
# seconds: a read barrier in flight this long (its answer lost, say) no longer holds back the next
READ_BARRIER_STALE = 1.0

# Called after each applied entry with (state, records): lets the node notify watchers.
ApplyHook = Callable[[core.ControllerState, list[Record]], None]


# A membership change's or a proposal's outcome: (result, pysyncobj FAIL_REASON value)
Callback = Callable[[Any, Any], None]


class RaftSeam(Protocol):
    """What the controller node (mqctl/controller/node.py, node_raft.py) may use of its Raft layer,
    and nothing else: propose an entry, the applied state it produces (with its lock), leadership and
    term, membership, status. `ControllerSyncObj` implements it on the fork (mqctl/raft/syncobj.py);
    the node is typed against this, so a call to anything private of the fork fails mypy."""

    state: core.ControllerState
    state_lock: threading.RLock
    halted: str
    state_version: int
    applied_index: int
    apply_observer: Callable[[float], None] | None

    @property
    def storage_error(self) -> str: ...
    def propose(self, entry_json: str, *, callback: Callback, leader_term: int | None = None) -> None: ...
    def propose_sync(self, entry_json: str, *, timeout: float) -> Any: ...
    def barrier_sync(self, *, timeout: float) -> None: ...
    def read_barrier(self, callback: Callback) -> None: ...
    def read_barrier_sync(self, *, timeout: float) -> None: ...
    def term(self) -> int: ...
    def is_leader(self) -> bool: ...
    def leader_id(self) -> str | None: ...
    def members(self) -> list[str]: ...
    def active_members(self) -> list[str]: ...
    def change_membership(self, action: str, target: str | None, callback: Callback) -> None: ...
    def status(self) -> dict[str, Any]: ...
    def is_ready(self) -> bool: ...
    def connection_clock(self) -> float: ...
    def tick_thread_ident(self) -> int | None: ...
    def wait_bound(self) -> None: ...
    def destroy(self) -> None: ...
    def destroy_synchronous(self) -> None: ...


def _encode_entry(entry: Any) -> list[Any]:
    command, idx, term = entry
    return [base64.b64encode(bytes(command)).decode("ascii"), int(idx), int(term)]


def _decode_entry(raw: list[Any]) -> tuple[bytes, int, int]:
    return (base64.b64decode(raw[0]), int(raw[1]), int(raw[2]))


class ControllerSyncObj(SyncObj):
    """pysyncobj node whose only replicated methods are `execute` and `barrier`."""

    def __init__(
        self,
        self_addr: str,
        partners: list[str],
        conf: SyncObjConf,
        initial_config: dict[str, str],
        on_apply: ApplyHook | None = None,
        transport: Any = None,
    ) -> None:
        self.state = core.ControllerState(config=dict(initial_config))
        # Held while an entry is decided and applied, and by readers on other threads (gRPC
        # workers, the ticker): a reader sees each entry entirely or not at all.
        self.state_lock = threading.RLock()
        self.halted = ""  # why this node stopped applying entries ("" while it applies them)
        # counts applied entries and loaded snapshots (under state_lock): what a cache of a value
        # derived from the state (its hash) is keyed by
        self.state_version = 0
        self._initial_config = dict(initial_config)
        self._on_apply = on_apply
        # mqctl serve --metrics-address: told each entry's apply time, in seconds (None: no metrics)
        self.apply_observer: Callable[[float], None] | None = None
        # the Raft index of the last entry applied to `state` (read with it under `state_lock`:
        # pysyncobj counts an entry as applied only after `execute` returns)
        self.applied_index = 0
        # fresh reads share barriers (read_barrier): the one in flight, and the callbacks of reads
        # that came after it was asked for, which wait for the next one (under _reads_lock)
        self._reads_lock = threading.Lock()
        self._reads_inflight_since: float | None = None
        self._reads_next: list[Callback] = []
        self._clock: Callable[[], float] = getattr(conf, "clock", None) or time.monotonic
        if getattr(conf, "journalFactory", None) is None:  # not made by make_conf
            conf.journalFactory = JournalFactory(Storage.from_env())
        self._journal_factory: JournalFactory = conf.journalFactory
        conf.serializer = self._save_snapshot
        conf.deserializer = self._load_snapshot
        # the Raft port's limits for whoever connects (mqctl/raft/transport.py)
        # (a test or the deterministic simulator may pass its own transport: mqctl/dsim)
        super().__init__(self_addr, partners, conf, transport=transport, transportClass=GuardedTransport)

    # --- the seam (RaftSeam): what the controller node uses ---------------------------------------

    def propose(self, entry_json: str, *, callback: Callback, leader_term: int | None = None) -> None:
        """Append an entry; `callback(answer, FAIL_REASON)` once applied here or refused. With
        `leader_term` only this node appends it, while it leads in that term (FORK.md, change 11)."""
        if leader_term is None:
            self.execute(entry_json, callback=callback)
        else:
            self.execute(entry_json, callback=callback, leaderTerm=leader_term)

    def propose_sync(self, entry_json: str, *, timeout: float) -> Any:
        """Append an entry (forwarded to the leader) and wait until it is applied here; raises
        pysyncobj's SyncObjException (its `errorCode` says why) when it is not."""
        return self.execute(entry_json, sync=True, timeout=timeout)

    def barrier_sync(self, *, timeout: float) -> None:
        """Wait until an entry appended now is applied here: every earlier entry is applied."""
        self.barrier(sync=True, timeout=timeout)

    def read_barrier(self, callback: Callback) -> None:
        """`callback(result, FAIL_REASON)` once a barrier appended after this call is applied here:
        every write acknowledged before the call is then in `state` (a fresh read's guarantee).

        Reads share barriers, as Raft's ReadIndex batches them: while a barrier is in flight, the
        reads that arrive wait for the next one, asked for as soon as it completes, for all of them
        at once (the one in flight may have been appended before they arrived: it does not prove
        leadership after their arrival). 300 brokers each reading once a second were 300 Raft
        entries a second; now one barrier per round trip. A barrier in flight for longer than
        READ_BARRIER_STALE (its answer lost with a connection, say) no longer holds the next back.
        """
        with self._reads_lock:
            now = self._clock()
            since = self._reads_inflight_since
            if since is not None and now - since < READ_BARRIER_STALE:
                self._reads_next.append(callback)
                return
            self._reads_inflight_since = now
            waiting = [*self._reads_next, callback]
            self._reads_next = []
        self._read_round(waiting, now)

    def _read_round(self, waiting: list[Callback], started: float) -> None:
        def done(result: Any, error: Any) -> None:
            with self._reads_lock:
                following: list[Callback] = []
                if self._reads_inflight_since == started:  # not replaced as stale meanwhile
                    following, self._reads_next = self._reads_next, []
                    now = self._clock()
                    self._reads_inflight_since = now if following else None
            for cb in waiting:
                cb(result, error)
            if following:
                self._read_round(following, now)

        self.barrier(callback=done)

    def read_barrier_sync(self, *, timeout: float) -> None:
        """read_barrier, waiting: raises pysyncobj's SyncObjException as barrier_sync does."""
        done = threading.Event()
        outcome: list[Any] = []

        def callback(_result: Any, error: Any) -> None:
            outcome.append(error)
            done.set()

        self.read_barrier(callback)
        if not done.wait(timeout):
            raise SyncObjException("Timeout")
        if outcome[0] != FAIL_REASON.SUCCESS:
            raise SyncObjException(outcome[0])

    def term(self) -> int:
        return int(self.raftCurrentTerm)

    def is_leader(self) -> bool:
        return bool(self._isLeader())

    def leader_id(self) -> str | None:
        leader = self._getLeader()
        return str(leader.id) if leader is not None else None

    def members(self) -> list[str]:
        """The other nodes' Raft addresses as the log has them now."""
        return sorted(str(n.id) for n in self.otherNodes)

    def active_members(self) -> list[str]:
        """The other members this leader hears from (connected, answering append_entries)."""
        return sorted(str(n.id) for n in self.activeNodes())

    def change_membership(self, action: str, target: str | None, callback: Callback) -> None:
        """`add`, `remove` (target required) or `transfer` (to target, or to any caught-up node)."""
        if action == "add":
            self.addNodeToCluster(target, callback=callback)
        elif action == "remove":
            self.removeNodeFromCluster(target, callback=callback)
        elif action == "transfer":
            self.transferLeadership(target or None, callback=callback)
        else:
            raise ValueError(f"unknown membership change {action!r}")

    def status(self) -> dict[str, Any]:
        return self.getStatus()

    def is_ready(self) -> bool:
        return bool(self.isReady())

    def connection_clock(self) -> float:
        return float(self.connectionClock())

    def tick_thread_ident(self) -> int | None:
        ident = self.tickThreadIdent()
        return int(ident) if ident is not None else None

    def wait_bound(self) -> None:
        self.waitBinded()

    @property
    def storage_error(self) -> str:
        """Why this node's Raft journal cannot store entries now ("" while it can). While set the
        node acknowledges no entry and takes no term (docs/raft-safety.md)."""
        journal = self._journal_factory.journal
        return (journal.error if journal is not None else None) or ""

    # --- replicated methods (the log entries) ---------------------------------------------

    @replicated
    def execute(self, entry_json: str) -> dict[str, Any]:
        """Apply one log entry: the records a leader decided (or, from a 0.1 leader at feature
        level 1, a command decided here as 0.1 did). An entry that cannot be read or does not fit
        the state halts this node: it applies nothing more and `mqctl serve` exits (code 4)."""
        if self.halted:
            return {"code": int(Code.SYSTEM_ERROR), "remark": f"this controller node stopped: {self.halted}"}
        started = time.perf_counter()
        with self.state_lock:
            try:
                records, answer = self._decide_entry(entry_json)
                for record in records:
                    self.state.apply(record)
                self.state_version += 1
            except (ValueError, KeyError, TypeError, core.InconsistentRecord) as exc:
                self.halted = f"cannot apply a Raft log entry: {exc}"
                log.error("%s; this node stops applying (the entry: %.300s)", self.halted, entry_json)
                return {"code": int(Code.SYSTEM_ERROR), "remark": self.halted}
            self.applied_index = int(self.raftLastApplied) + 1
            self._after_apply(records)
        if self.apply_observer is not None:
            self.apply_observer(time.perf_counter() - started)
        return answer

    def _decide_entry(self, entry_json: str) -> tuple[list[Record], dict[str, Any]]:
        doc = json.loads(entry_json)
        if not isinstance(doc, dict):
            raise RecordError("a log entry must be a JSON object")
        if "events" in doc:
            return decode_entry(doc), {"code": 0, "remark": ""}
        if self.state.feature_level >= 2:
            raise RecordError(
                f"a (method, request, context) command entry at feature level "
                f"{self.state.feature_level}: written by an mqctl 0.1 leader, which this "
                "group no longer admits; upgrade that node"
            )
        ctx = core.Context.from_dict(doc["ctx"])
        result = core.decide(self.state, doc["method"], doc["request"], ctx)
        return result.records, result.answer()

    @replicated
    def barrier(self) -> bool:
        return True

    def _after_apply(self, records: list[Record]) -> None:
        if self._on_apply is not None and records:
            try:
                self._on_apply(self.state, records)
            except Exception:  # a watcher problem must never stop the state machine
                log.exception("apply hook failed")

    # --- snapshot (JSON) ------------------------------------------------------------------

    def _save_snapshot(self, filename: str, raft_data: tuple[Any, ...]) -> None:
        """{"format", "raft", "state"}: the state as its canonical text (made a broker set at a
        time, mqctl.controller.core), not a tree of the whole state built to be dumped."""
        last_entry, prev_entry, cluster = raft_data
        raft = {
            "lastEntry": _encode_entry(last_entry),
            "prevEntry": _encode_entry(prev_entry),
            "cluster": sorted(node.id for node in cluster),
        }
        with self.state_lock:
            state = self.state.canonical_json()
        head = json.dumps({"format": SNAPSHOT_FORMAT, "raft": raft}, sort_keys=True)
        text = f'{head[:-1]}, "state": {state}}}'.encode()
        _require_room(os.path.dirname(os.path.abspath(filename)), len(text) + SNAPSHOT_RESERVE)
        with open(filename, "wb") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())

    def _load_snapshot(self, filename: str) -> tuple[Any, ...]:
        with open(filename, encoding="utf-8") as fh:
            doc = json.load(fh)
        if doc.get("format") != SNAPSHOT_FORMAT:
            self.halted = f"{filename}: not an mqctl controller snapshot"
            raise ValueError(self.halted)
        try:
            state = core.ControllerState.from_dict(doc["state"])
        except core.SnapshotVersionError as exc:
            self.halted = f"{filename}: {exc}"
            raise
        raft = doc["raft"]
        with self.state_lock:
            self.state = state
            self.state_version += 1
            self.applied_index = int(raft["lastEntry"][1])
        cluster = {TCPNode(addr) for addr in raft["cluster"]}
        return (_decode_entry(raft["lastEntry"]), _decode_entry(raft["prevEntry"]), cluster)


DNS_CACHE_S = 5.0  # how long a peer's resolved address is used before it is looked up again


def make_conf(
    data_dir: str | None, *, secret: str | None, fast: bool = True, bind_address: str | None = None
) -> SyncObjConf:
    """pysyncobj settings: the low-latency profile of toolchain-notes.md section 3.

    appendEntriesUseBatch=False sends each write at once (sub-millisecond commits instead of
    one appendEntriesPeriod). A large appendEntriesBatchSizeBytes keeps one resend in one
    message, so a follower's truncate-and-reappend of identical entries is atomic; see
    docs/raft-safety.md.
    """
    kwargs: dict[str, Any] = dict(
        appendEntriesUseBatch=False,
        appendEntriesBatchSizeBytes=8 * 1024 * 1024,
        dynamicMembershipChange=True,
        commandsWaitLeader=True,
        maxBindRetries=1,
        bindRetryTime=0.2,
        logCompactionMinEntries=5000,
        # test-only: MQCTL_COMPACTION_INTERVAL (seconds) snapshots sooner (docs/raft-safety.md)
        logCompactionMinTime=float(os.environ.get("MQCTL_COMPACTION_INTERVAL") or 60),
        password=secret,
        # Peers named by DNS (a StatefulSet's pods, mqctl-0.mqctl-peers:9880) get a new IP when they
        # are rescheduled, and only one node of a pair dials the other (pysyncobj: the greater
        # address): with pysyncobj's 600 s cache the pod restarted in a rolling update stayed cut off
        # from the nodes that dial it for up to ten minutes. A name is resolved only while its peer is
        # not connected, on the Raft thread, at most every 5 s (1 s after a failed lookup).
        dnsCacheTime=DNS_CACHE_S,
        dnsFailCacheTime=1.0,
    )
    if fast:
        kwargs.update(
            appendEntriesPeriod=0.03,
            raftMinTimeout=0.15,
            raftMaxTimeout=0.35,
            connectionTimeout=1.0,
            connectionRetryTime=0.5,
            autoTickPeriod=0.01,
        )
    if data_dir is not None:
        kwargs.update(
            journalFile=os.path.join(data_dir, "raft.journal"),
            fullDumpFile=os.path.join(data_dir, "raft.snapshot.json"),
        )
    conf = SyncObjConf(**kwargs)
    # CheckQuorum (mqctl/raft/FORK.md, change 13): a leader that has not heard from a majority for
    # one election timeout steps down (pysyncobj's default is 30 s, mqctl 0.1 had 2 s)
    conf.leaderFallbackTimeout = conf.raftMaxTimeout
    # The Raft port listens there (`--raft-bind`, else the node's own address); without it pysyncobj
    # would listen on every interface (0.0.0.0) at the port of the node's address
    conf.bindAddress = bind_address
    # mqctl's durable journal (mqctl/raft/journal.py) behind the file layer; the test-only crash
    # simulator and fault injection (MQCTL_CRASH_SIM, MQCTL_FAULT_INJECT) are read here, at start
    conf.journalFactory = JournalFactory(Storage.from_env())
    return conf


def _require_room(directory: str, need: int) -> None:
    """ENOSPC before a byte is written when `directory`'s file system has less than `need` free."""
    st = os.statvfs(directory)
    if st.f_bavail * st.f_frsize < need:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
