"""A broker agent: RocketMQ's ReplicasManager + AutoSwitchHAService over a real store (docs/broker.md).

One agent = one replica of one broker set. Threads (all daemon, all stop with the agent):

* control: gets the persistent id (registration.py), registers, then applies role changes one at
  a time from a queue fed by WatchRoleChanges, GetReplicaInfo polling (the backstop: a lost
  notification only delays a change by one period), heartbeat answers and the master's SyncStateSet
  checks;
* heartbeat: every ``heartbeat_interval`` with brokerEpoch, epoch, maxOffset, confirmOffset and
  electionPriority;
* replication (slave only): handshake (the master's epoch cache, the RIP-44 truncation point,
  truncate) then FetchLog in a loop, recording the epoch changes the batches carry.

Many agents run in one process: each has its own store directory, client and threads, and
``LocalPeers`` avoids one gRPC server per agent. ``crash()`` stops an agent without any cleanup (the
abort file stays, nothing more is written), ``stop()`` is the clean shutdown. Faults (isolation, crashes
at given steps) are injected from outside, through the controller client and peers it is given
(mqctl.sim.inject).
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from mqctl.broker.config import AgentConfig
from mqctl.broker.epoch_file_cache import EpochCache, truncation_point
from mqctl.broker.log import BrokerLog, StoredMessage, open_log
from mqctl.broker.peers import (
    FetchRequest,
    FetchResponse,
    GrpcPeers,
    LocalPeers,
    Peers,
    PeerUnavailable,
    register_local,
    serve_agent,
    unregister_local,
)
from mqctl.broker.registration import AgentStopped, IdentityMismatch, Registrar, check_identity_files
from mqctl.errors import Code, ControllerError, MqctlError, UsageError
from mqctl.store.abort import hold_lock, remove_abort, write_abort
from mqctl.store.checkpoint import StoreCheckpoint, read_checkpoint, write_checkpoint
from mqctl.store.epochfile import LONG_MAX, EpochCacheView

log = logging.getLogger("mqctl.broker")

__all__ = ["AgentStatus", "BrokerAgent", "PutResult", "Role", "RoleWatchHub", "make_client"]

_OPEN_STORES: set[str] = set()  # fcntl locks are per process: guard same-process reuse too
_OPEN_LOCK = threading.Lock()


class Role(StrEnum):
    STARTING = "starting"  # not registered yet
    REGISTERED = "registered"  # registered, no master known (electing)
    MASTER = "master"
    SLAVE = "slave"
    STOPPED = "stopped"
    CRASHED = "crashed"
    FAILED = "failed"  # stopped by an error (identity mismatch, broken store)


@dataclass(frozen=True)
class PutResult:
    ok: bool
    status: str  # PUT_OK, FLUSH_SLAVE_TIMEOUT, NOT_MASTER, ROLE_CHANGED, ...
    offset: int = -1
    end: int = -1
    master_epoch: int = 0


@dataclass
class AgentStatus:
    name: str
    role: Role
    broker_id: int | None
    broker_epoch: int
    address: str
    master_id: int | None
    master_epoch: int
    sync_state_set: tuple[int, ...]
    sync_state_set_epoch: int
    max_offset: int
    confirm_offset: int
    epochs: tuple[tuple[int, int], ...]
    error: str | None


@dataclass
class _Slave:
    """The master's view of one slave (AutoSwitchHAConnection)."""

    ack: int = 0
    learner: bool = False
    address: str = ""
    last_seen: float = 0.0
    caught_up: float = 0.0  # lastCaughtUpTime
    last_master_max: int = LONG_MAX  # master max offset at the previous transfer
    last_transfer: float = 0.0


@dataclass
class _Event:
    kind: str  # role | poll | reregister | alter | elect
    payload: Any = None
    broker_epoch: int = 0


class RoleWatchHub:
    """One WatchRoleChanges stream for every agent of a cluster in this process (a controller serves a
    limited number of streams); dispatches each RoleChange to the agents of its broker set."""

    def __init__(self, client: Any, cluster_name: str, retry: float = 0.5) -> None:
        self._client = client
        self._cluster = cluster_name
        self._retry = retry
        self._subs: dict[str, list[Callable[[Any], None]]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._watch: Any = None
        self._thread = threading.Thread(target=self._run, name=f"mqctl-watch-{cluster_name}", daemon=True)
        self._thread.start()

    def subscribe(self, broker_name: str, callback: Callable[[Any], None]) -> None:
        with self._lock:
            self._subs.setdefault(broker_name, []).append(callback)

    def unsubscribe(self, broker_name: str, callback: Callable[[Any], None]) -> None:
        with self._lock:
            cbs = self._subs.get(broker_name, [])
            if callback in cbs:
                cbs.remove(callback)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._watch = self._client.watch_role_changes(self._cluster, "")
                for change in self._watch:
                    with self._lock:
                        cbs = list(self._subs.get(change.broker_name, ()))
                    for cb in cbs:
                        cb(change)
            except Exception as exc:  # unreachable for a while, client closed: try again
                if not self._stop.is_set():
                    log.debug("role watch: %s", exc)
            self._stop.wait(self._retry)

    def close(self) -> None:
        self._stop.set()
        w = self._watch
        if w is not None:
            w.close()
        self._thread.join(5)


class BrokerAgent:
    """See the module docstring. ``client``: a ControllerClient to share (default: its own, from
    ``make_client(config)``, or ``client_factory()``, which the agent then owns and closes);
    ``hub``: a RoleWatchHub to share; ``peers_factory``: how it reaches other agents (default from
    ``config.peer_transport``)."""

    def __init__(
        self,
        config: AgentConfig,
        *,
        client: Any = None,
        hub: RoleWatchHub | None = None,
        client_factory: Callable[[], Any] | None = None,
        peers_factory: Callable[[], Peers] | None = None,
        name: str | None = None,
    ) -> None:
        config.validate()
        self.config = config
        self.root = Path(config.store_dir)
        self.name = name or config.address or f"{config.broker_name}@{self.root.name}"
        self._own_client = client is None
        self._client = client
        self._hub = hub
        self._own_hub = False
        self._client_factory = client_factory or (lambda: make_client(config))
        self._peers_factory = peers_factory
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._events: queue.Queue[_Event] = queue.Queue()
        self._stop = threading.Event()
        self._dead = False
        self._threads: list[threading.Thread] = []
        self.role = Role.STARTING
        self.error: str | None = None
        self.broker_id: int | None = None
        self.broker_epoch = 0
        self.address = ""
        self.registered = threading.Event()
        self.finished = threading.Event()  # the agent ended (stopped, crashed or failed)
        # role state
        self.master_id: int | None = None
        self.master_address = ""
        self.master_epoch = 0
        self.sync_state_set: set[int] = set()
        self.sync_state_set_epoch = 0
        self._pending_ss: set[int] | None = None
        self._pending_unknown = False
        self._slaves: dict[int, _Slave] = {}
        self._confirm = 0
        self._repl_gen = 0
        self._log: BrokerLog | None = None
        self._epochs: EpochCache | None = None
        self._server: Any = None
        self._peers: Any = None
        self._lock_cm: Any = None
        self._store_key = ""
        self.stats: dict[str, int] = {
            "truncations": 0,
            "bytes_truncated": 0,
            "role_changes": 0,
            "ignored_notifications": 0,
            "alter_ok": 0,
            "alter_failed": 0,
        }

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> BrokerAgent:
        """Open the store (refusing a store whose identity belongs elsewhere, before writing anything),
        start the service and the control thread. Returns self."""

        self.root.mkdir(parents=True, exist_ok=True)
        check_identity_files(self.root, self.config.cluster_name, self.config.broker_name)
        key = os.path.realpath(self.root)
        with _OPEN_LOCK:
            if key in _OPEN_STORES:
                raise UsageError(f"{self.root}: store already open by another agent in this process")
            _OPEN_STORES.add(key)
        self._store_key = key
        try:
            self._lock_cm = hold_lock(self.root, create=True)
            self._lock_cm.__enter__()
            write_abort(self.root)
            self._log = open_log(self.root, self.config.storage, self.config.commitlog_file_size)
            self._epochs = EpochCache(self.root)
            self._drop_final_signature()
            # the log may have lost a tail in a crash: epochs past its end are void
            self._epochs.truncate_suffix_by_offset(self._log.max_offset + 1)
            cp = read_checkpoint(self.root)
            self._confirm = min(cp.confirm_phy_offset, self._log.max_offset) if cp else 0
            if self._client is None:
                self._client = self._client_factory()
            if self.config.peer_transport == "local":
                assert self.config.address
                self.address = self.config.address
                register_local(self.address, self)
                self._peers = self._peers_factory() if self._peers_factory else LocalPeers()
            else:
                self._server = serve_agent(self, self.config.listen)
                host = self.config.listen.rpartition(":")[0] or "127.0.0.1"
                self.address = f"{host}:{self._server.port}"
                self._peers = self._peers_factory() if self._peers_factory else GrpcPeers()
        except BaseException:
            self._release(clean=False)
            raise
        self._spawn(self._control_loop, "control")
        return self

    def _spawn(self, target: Callable[..., None], what: str, *args: Any) -> threading.Thread:
        self._threads = [t for t in self._threads if t.is_alive()]
        t = threading.Thread(target=target, args=args, name=f"mqctl-{what}-{self.name}", daemon=True)
        self._threads.append(t)
        t.start()
        return t

    def stop(self, timeout: float = 10.0) -> None:
        """Clean shutdown: threads end, the log is flushed, the checkpoint written, abort removed."""
        with self._lock:
            if self._dead:
                return
            self._stop.set()
            self._cond.notify_all()
        self._unblock()
        self._join(timeout)
        with self._lock:
            if self._dead:
                return
            self._dead = True
            if self.role not in (Role.FAILED,):
                self.role = Role.STOPPED
            if self._log is not None:
                self._log.flush()
                write_checkpoint(
                    self.root,
                    StoreCheckpoint(
                        confirm_phy_offset=self._confirm, master_flushed_offset=self._log.max_offset
                    ),
                )
                self._write_final_signature(self._log.max_offset)
            self._cond.notify_all()
        self._release(clean=True)

    # -- store signatures (seed 002, docs/store-formats.md) ------------------------------------

    def _initial_signature(self) -> Any:
        """The store's initial signature: kept once written; else set from identity and first epoch."""
        from mqctl.store.signature import derive_initial, read_signature  # lazy: start-up

        sig = read_signature(self.root)
        if sig is not None and sig.initial is not None:
            return sig.initial
        if self._epochs is None or not self._epochs.entries:
            return None
        first = self._epochs.entries[0]
        return derive_initial(
            self.config.cluster_name,
            self.config.broker_name,
            first.epoch,
            first.start_offset,
            source="mqctl-broker",
            time=int(time.time() * 1000),
        )

    def _drop_final_signature(self) -> None:
        """A running store is dirty until its next orderly shutdown: keep only the initial signature."""
        from mqctl.store.signature import Signature, read_signature, write_signature  # lazy: start-up

        sig = read_signature(self.root)
        if sig is not None and sig.final is not None:
            write_signature(self.root, Signature(sig.initial, None))

    def _write_final_signature(self, max_offset: int) -> None:
        """Orderly shutdown: the final signature says the store is clean and how far it got."""
        from mqctl.store.signature import Signature, make_final, write_signature  # lazy: start-up

        initial = self._initial_signature()
        last = self._epochs.last_entry if self._epochs is not None else None
        if initial is None or last is None or self.config.storage != "commitlog":
            return  # nothing written yet (no epoch), or no RocketMQ store to describe
        final = make_final(initial.id, last.epoch, last.start_offset, max_offset, int(time.time() * 1000))
        write_signature(self.root, Signature(initial, final))

    def crash(self) -> None:
        """Stop without cleanup, as kill -9 would: nothing is flushed or removed from now on."""
        with self._lock:
            if self._dead:
                return
            self._dead = True
            self.role = Role.CRASHED
            self._stop.set()
            self._cond.notify_all()
        self._release(clean=False)
        self._join(5.0)

    def _unblock(self) -> None:
        """End blocking controller and peer calls so that the threads notice the stop at once."""
        if self._hub is not None and self._own_hub:
            self._hub.close()
        if self._own_client and self._client is not None:
            self._client.close()
        if self._peers is not None:
            self._peers.close()

    def _join(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for t in list(self._threads):
            if t is not threading.current_thread():
                t.join(max(0.0, deadline - time.monotonic()))

    def _release(self, clean: bool) -> None:
        if self._hub is not None:
            self._hub.unsubscribe(self.config.broker_name, self._on_role_change)
            if self._own_hub:
                self._hub.close()
        if self._server is not None:
            self._server.stop()
            self._server = None
        if self.config.peer_transport == "local" and self.address:
            unregister_local(self.address, self)
        if self._peers is not None:
            self._peers.close()
        if self._own_client and self._client is not None:
            self._client.close()
        with self._lock:
            if self._log is not None:
                self._log.close()
                self._log = None
            if clean:
                remove_abort(self.root)
            if self._lock_cm is not None:
                self._lock_cm.__exit__(None, None, None)
                self._lock_cm = None
        with _OPEN_LOCK:
            _OPEN_STORES.discard(self._store_key)
        self.finished.set()

    @property
    def alive(self) -> bool:
        return not self._dead

    def reachable(self) -> bool:
        return not self._dead

    def _fail(self, message: str) -> None:
        log.error("%s: %s", self.name, message)
        with self._lock:
            self.error = message
            self.role = Role.FAILED
            self._stop.set()
        threading.Thread(target=self.stop, daemon=True).start()

    # ------------------------------------------------------------------ controller calls

    def _ctl(self, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        if self._dead:
            raise AgentStopped("agent stopped")
        return fn(*args, **kw)

    def _ctl_own(self, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        """A controller call that names this broker first (RegisterBroker, ElectMaster): its cluster,
        broker set and brokerId."""
        return self._ctl(fn, self.config.cluster_name, self.config.broker_name, self.broker_id, *args, **kw)

    def _post(self, event: _Event) -> None:
        self._events.put(event)

    def _on_role_change(self, change: Any) -> None:
        """From the watch hub: tagged with the registration it arrived under."""
        if self._dead:
            return
        self._post(_Event("role", change, self.broker_epoch))

    # ------------------------------------------------------------------ control thread

    def _control_loop(self) -> None:
        try:
            registrar = Registrar(
                self.root,
                self.config.cluster_name,
                self.config.broker_name,
                self.address,
                call=self._ctl,
                client=self._client,
                alive=lambda: not self._dead,
                stop=self._stop,
                retry_fast=self.config.register_retry_fast,
                retry_slow=self.config.register_retry_slow,
            )
            bid = registrar.obtain_id()
            with self._lock:
                self.broker_id = bid
            if self.config.watch_role_changes and self.config.controller_protocol == "grpc":
                if self._hub is None:
                    self._hub = RoleWatchHub(
                        self._client, self.config.cluster_name, self.config.retry_interval
                    )
                    self._own_hub = True
                self._hub.subscribe(self.config.broker_name, self._on_role_change)
            while not self._stop.is_set() and not self._register():
                self._stop.wait(self.config.retry_interval)
            if self._stop.is_set():
                return
            self._spawn(self._heartbeat_loop, "heartbeat")
            self._run_events()
        except AgentStopped:
            self.crash()
        except (IdentityMismatch, MqctlError) as exc:
            if self._stop.is_set():
                return  # stopping: the client was closed under a call
            self._fail(str(exc))
        except Exception as exc:  # a bug: stop loudly rather than limp on
            log.exception("%s: control thread failed", self.name)
            self._fail(f"internal error: {type(exc).__name__}: {exc}")

    def _register(self) -> bool:
        """RegisterBroker with what the election policy needs; apply the role it answers."""
        assert self.broker_id is not None
        with self._lock:
            epoch, max_offset, confirm = self._progress()
        try:
            r = self._ctl_own(
                self._client.register_broker,
                self.address,
                epoch=epoch,
                max_offset=max_offset,
                confirm_offset=confirm,
                election_priority=self.config.election_priority,
                options=self.config.options or None,
                heartbeat_timeout_mills=self.config.heartbeat_timeout_ms,
            )
        except ControllerError as exc:
            with self._lock:
                self.error = f"RegisterBroker: {exc}"
            log.info("%s: RegisterBroker failed: %s", self.name, exc)
            return False
        with self._lock:
            self.broker_epoch = int(r.broker_epoch)
            self.error = None
            if self.role == Role.STARTING:
                self.role = Role.REGISTERED
        self.registered.set()
        log.info("%s: registered as id %s (brokerEpoch %s)", self.name, self.broker_id, r.broker_epoch)
        if r.master_broker_id is not None:
            self._apply_role(
                r.master_broker_id,
                r.master_address,
                int(r.master_epoch or 0),
                int(r.sync_state_set_epoch or 0),
                r.sync_state_set,
                force=True,
            )
        else:
            self._send_heartbeat()
            self._elect()
        return True

    def _progress(self) -> tuple[int, int, int]:
        assert self._log is not None and self._epochs is not None
        return self._epochs.last_epoch, self._log.max_offset, self._confirm_offset()

    def _run_events(self) -> None:
        cfg = self.config
        next_poll = time.monotonic() + cfg.sync_metadata_period
        next_check = time.monotonic() + cfg.check_sync_state_set_period
        while not self._stop.is_set():
            now = time.monotonic()
            timeout = max(0.0, min(next_poll, next_check) - now)
            try:
                ev: _Event | None = self._events.get(timeout=min(timeout, 0.2))
            except queue.Empty:
                ev = None
            if self._stop.is_set():
                return
            if ev is not None:
                self._handle(ev)
            now = time.monotonic()
            if now >= next_poll:
                next_poll = now + cfg.sync_metadata_period
                self._poll()
            if now >= next_check:
                next_check = now + cfg.check_sync_state_set_period
                self._maybe_shrink()

    def _handle(self, ev: _Event) -> None:
        if ev.kind == "role":
            if ev.broker_epoch != self.broker_epoch:
                self.stats["ignored_notifications"] += 1  # sent to a previous registration
                return
            newer = self._adopt(ev.payload)
            if newer:
                self._elect()
            elif newer is False:
                self.stats["ignored_notifications"] += 1
        elif ev.kind == "poll":
            self._poll()
        elif ev.kind == "reregister":
            self._register()
        elif ev.kind == "alter":
            self._alter(ev.payload)
        elif ev.kind == "elect":
            self._elect()

    def _poll(self) -> None:
        """GetReplicaInfo: the backstop for lost notifications; also settles an AlterSyncStateSet whose
        answer was lost and re-registers when the controller forgot the broker set."""
        try:
            r = self._ctl(self._client.get_replica_info, self.config.broker_name)
        except ControllerError as exc:
            if exc.code == Code.CONTROLLER_BROKER_METADATA_NOT_EXIST:
                self._register()
            return
        with self._lock:
            if self.role == Role.MASTER and r.master_epoch == self.master_epoch and self._pending_unknown:
                # the controller's set is the truth: adopt it (bigger or smaller, it was accepted)
                if r.sync_state_set_epoch >= self.sync_state_set_epoch:
                    self._set_ss(set(r.sync_state_set), r.sync_state_set_epoch)
                self._pending_ss = None
                self._pending_unknown = False
        if self._adopt(r) is not None:  # no master: whether adopted or not, one is due
            self._elect()

    def _adopt(self, v: Any) -> bool | None:
        """The role a notification or GetReplicaInfo answer `v` names. With a master: applied (None).
        Without one: applied only when its masterEpoch is newer than this broker's; whether it was."""
        if v.master_broker_id is not None:
            self._apply_role(
                v.master_broker_id, v.master_address, v.master_epoch, v.sync_state_set_epoch, v.sync_state_set
            )
            return None
        with self._lock:
            newer = bool(v.master_epoch > self.master_epoch)
        if newer:
            self._apply_role(None, "", v.master_epoch, v.sync_state_set_epoch, v.sync_state_set)
        return newer

    def _elect(self) -> None:
        """Broker-triggered ElectMaster (an async learner never asks: it must never become master)."""
        if self.config.async_learner or self.broker_id is None:
            return
        try:
            r = self._ctl_own(self._client.elect_master, broker_epoch=self.broker_epoch)
        except ControllerError as exc:
            resp: Any = exc.response
            if (
                exc.code == Code.CONTROLLER_MASTER_STILL_EXIST
                and resp is not None
                and getattr(resp, "master_broker_id", None) is not None
            ):
                r = resp
            else:
                log.debug("%s: ElectMaster: %s", self.name, exc)
                return
        if r.master_broker_id is not None and r.master_epoch is not None:
            self._apply_role(
                r.master_broker_id,
                r.master_address,
                int(r.master_epoch),
                int(r.sync_state_set_epoch or 0),
                r.sync_state_set,
            )

    # ------------------------------------------------------------------ roles

    def _apply_role(
        self,
        master_id: int | None,
        master_address: str,
        master_epoch: int,
        ss_epoch: int,
        ss: Any,
        force: bool = False,
    ) -> None:
        """ReplicasManager.changeBrokerRole: act on a newer masterEpoch only; at the same epoch a master
        takes a newer SyncStateSet (the controller accepted it)."""
        with self._lock:
            if self._dead:
                return
            if master_epoch < self.master_epoch:
                self.stats["ignored_notifications"] += 1
                return
            if master_epoch == self.master_epoch and not force:
                if (
                    self.role == Role.MASTER
                    and master_id == self.broker_id
                    and ss_epoch > self.sync_state_set_epoch
                    and self._pending_ss is None
                ):
                    self._set_ss(set(ss), ss_epoch)
                return
            if (
                master_epoch == self.master_epoch
                and force
                and self.role in (Role.MASTER, Role.SLAVE)
                and master_id == self.master_id
            ):
                return
            self.stats["role_changes"] += 1
            if master_id is None:
                self.master_epoch = master_epoch
                self.master_id = None
                self.master_address = ""
                self._step_down(Role.REGISTERED)
                return
            if master_id == self.broker_id:
                self._change_to_master(master_epoch, ss_epoch, set(ss))
            else:
                self._change_to_slave(master_id, master_address, master_epoch)

    def _step_down(self, role: Role | None) -> None:
        """End the current role: replication stops, pending changes and slave progress are dropped."""
        if role is not None:
            self.role = role
        self._repl_gen += 1
        self._pending_ss = None
        self._pending_unknown = False
        self._slaves.clear()
        self._cond.notify_all()

    def _epoch_file_allows(self, epoch: int, refused: str) -> int | None:
        """AutoSwitchHAService refuses a masterEpoch older than the epoch file's last (logged, None);
        else that last epoch."""
        assert self._epochs is not None
        last = self._epochs.last_epoch
        if epoch < last:
            log.error(
                "%s: masterEpoch %d < last epoch %d in the epoch file: %s", self.name, epoch, last, refused
            )
            return None
        return last

    def _change_to_master(self, epoch: int, ss_epoch: int, ss: set[int]) -> None:
        """AutoSwitchHAService.changeToMaster: refuse an epoch older than the file's last; append
        (epoch, maxOffset) unless this broker resumes the epoch it already leads."""
        assert self._log is not None and self._epochs is not None and self.broker_id is not None
        last = self._epoch_file_allows(epoch, "not becoming master")
        if last is None:
            return
        self._step_down(None)
        if epoch > last:
            max_offset = self._log.max_offset
            self._epochs.truncate_suffix_by_offset(max_offset)  # empty epochs (see epoch_file_cache.py)
            if not self._epochs.append(epoch, max_offset):
                log.error(
                    "%s: could not append epoch %d-%d to %s",
                    self.name,
                    epoch,
                    max_offset,
                    self._epochs.entries,
                )
        self.master_epoch = epoch
        self.master_id = self.broker_id
        self.master_address = self.address
        self._set_ss(ss or {self.broker_id}, ss_epoch)
        self.role = Role.MASTER  # last: a reader without the lock sees the epoch first
        log.info(
            "%s: master at epoch %d, log end %d, SyncStateSet %s",
            self.name,
            epoch,
            self._log.max_offset,
            sorted(self.sync_state_set),
        )

    def _change_to_slave(self, master_id: int, master_address: str, epoch: int) -> None:
        if self._epoch_file_allows(epoch, f"not following {master_address}") is None:
            return
        self._step_down(None)
        self.master_epoch = epoch
        self.master_id = master_id
        self.master_address = master_address
        self.sync_state_set = set()
        self.role = Role.SLAVE
        gen = self._repl_gen
        log.info("%s: slave of %s (id %d) at epoch %d", self.name, master_address, master_id, epoch)
        self._spawn(self._replicate, f"repl{gen}", gen, master_id, master_address, epoch)

    def _set_ss(self, ss: set[int], ss_epoch: int) -> None:
        self.sync_state_set = set(ss)
        self.sync_state_set_epoch = ss_epoch
        now = time.monotonic()
        for m in ss:
            if m != self.broker_id:
                st = self._slaves.setdefault(m, _Slave())
                if st.caught_up == 0.0:
                    st.caught_up = now  # a member that never shows up leaves after the timeout
        self._confirm = self._confirm_offset()
        self._cond.notify_all()

    # ------------------------------------------------------------------ master: SyncStateSet

    def _effective_ss(self) -> set[int]:
        """While a change is pending, the union: acks wait for both the old and the new members."""
        ss = set(self.sync_state_set)
        if self._pending_ss is not None:
            ss |= self._pending_ss
        return ss

    def _confirm_offset(self) -> int:
        """Master: the smallest max offset among the SyncStateSet; slave: what its master confirmed.

        As AutoSwitchHAService.computeConfirmOffset, a member that has not fetched under this role yet
        leaves the value as it was: counting it as 0 would let any lagging slave pass the expansion
        check (ack >= confirmOffset) and join the set without the acknowledged messages."""
        if self._log is None:
            return self._confirm
        if self.role != Role.MASTER:
            return min(self._confirm, self._log.max_offset)
        value = self._log.max_offset
        for m in self._effective_ss():
            if m == self.broker_id:
                continue
            st = self._slaves.get(m)
            if st is None or st.last_seen == 0.0:
                return min(self._confirm, self._log.max_offset)
            value = min(value, st.ack)
        return value

    def _maybe_shrink(self) -> None:
        """maybeShrinkInSyncStateSet: drop members not caught up for haMaxTimeSlaveNotCatchup."""
        with self._lock:
            if self.role != Role.MASTER or self._pending_ss is not None:
                return
            now = time.monotonic()
            limit = self.config.ha_max_time_slave_not_catchup
            new = {
                m
                for m in self.sync_state_set
                if m == self.broker_id or now - self._slaves.get(m, _Slave(caught_up=now)).caught_up <= limit
            }
            if new == self.sync_state_set:
                return
            self._pending_ss = new
        self._alter(new)

    def _maybe_expand(self, bid: int, st: _Slave) -> None:
        """maybeExpandInSyncStateSet (under the lock): a slave that reached confirmOffset and the current
        epoch joins, unless it is an async learner."""
        if st.learner or self._pending_ss is not None or bid in self.sync_state_set:
            return
        assert self._epochs is not None
        last = self._epochs.last_entry
        if last is None or st.ack < self._confirm_offset() or st.ack < last.start_offset:
            return
        new = set(self.sync_state_set) | {bid}
        self._pending_ss = new
        self._post(_Event("alter", new))

    def _alter(self, new: set[int]) -> None:
        """AlterSyncStateSet; the new set is applied locally only once the controller accepted it."""
        with self._lock:
            if self.role != Role.MASTER or self.broker_id is None:
                self._pending_ss = None
                return
            epoch, ss_epoch = self.master_epoch, self.sync_state_set_epoch
        try:
            r = self._ctl(
                self._client.alter_sync_state_set,
                self.config.broker_name,
                self.broker_id,
                epoch,
                sorted(new),
                ss_epoch,
                broker_epoch=self.broker_epoch,
                cluster_name=self.config.cluster_name,
            )
        except ControllerError as exc:
            self.stats["alter_failed"] += 1
            with self._lock:
                if exc.code in (Code.UNAVAILABLE, Code.SYSTEM_ERROR):
                    self._pending_unknown = True  # maybe applied: the next poll settles it
                else:
                    self._pending_ss = None
            log.info("%s: AlterSyncStateSet %s refused: %s", self.name, sorted(new), exc)
            if exc.code not in (Code.UNAVAILABLE,):
                self._post(_Event("poll"))
            return
        self.stats["alter_ok"] += 1
        with self._lock:
            if self.role == Role.MASTER and self.master_epoch == epoch:
                self._pending_ss = None
                self._pending_unknown = False
                self._set_ss(set(r.sync_state_set) or new, int(r.new_sync_state_set_epoch))
                log.info(
                    "%s: SyncStateSet now %s (epoch %d)",
                    self.name,
                    sorted(self.sync_state_set),
                    self.sync_state_set_epoch,
                )

    # ------------------------------------------------------------------ heartbeats

    def _send_heartbeat(self) -> None:
        if self.broker_id is None or self._dead:
            return
        with self._lock:
            if self._log is None:
                return
            epoch, max_offset, confirm = self._progress()
        try:
            self._ctl(
                self._client.heartbeat,
                self.config.cluster_name,
                self.address,
                self.config.broker_name,
                self.broker_id,
                epoch,
                max_offset,
                confirm,
                self.config.heartbeat_timeout_ms,
                self.config.election_priority,
                broker_epoch=self.broker_epoch,
            )
        except ControllerError as exc:
            if exc.code == Code.STALE_BROKER_EPOCH:
                self._post(_Event("reregister"))
            log.debug("%s: heartbeat: %s", self.name, exc)

    def _heartbeat_loop(self) -> None:
        while not self._stop.wait(self.config.heartbeat_interval):
            try:
                self._send_heartbeat()
            except AgentStopped:
                return
            except Exception:
                log.exception("%s: heartbeat failed", self.name)

    # ------------------------------------------------------------------ writes (master)

    def put(self, body: bytes, topic: str = "TopicTest", timeout: float | None = None) -> PutResult:
        """Append one message as master. With allAckInSyncStateSet the answer waits until every member of
        the SyncStateSet (old and new while a change is pending) has it; FLUSH_SLAVE_TIMEOUT otherwise."""
        wait = self.config.put_timeout if timeout is None else timeout
        with self._cond:
            if self._dead or self._log is None:
                return PutResult(False, "STOPPED")
            if self.role != Role.MASTER:
                return PutResult(False, "NOT_MASTER")
            host, _, port = self.address.rpartition(":")
            try:
                store_host = (host if host and host[0].isdigit() else "127.0.0.1", int(port))
            except ValueError:
                store_host = ("127.0.0.1", 10911)
            offset, end = self._log.append(topic, body, store_host)
            epoch = self.master_epoch
            self._cond.notify_all()
            if not self.config.all_ack_in_sync_state_set:
                self._confirm = self._confirm_offset()
                return PutResult(True, "PUT_OK", offset, end, epoch)
            deadline = time.monotonic() + wait
            while True:
                if self._dead:
                    return PutResult(False, "STOPPED", offset, end, epoch)
                if self.role != Role.MASTER or self.master_epoch != epoch:
                    return PutResult(False, "ROLE_CHANGED", offset, end, epoch)
                if all(
                    m == self.broker_id or (m in self._slaves and self._slaves[m].ack >= end)
                    for m in self._effective_ss()
                ):
                    self._confirm = self._confirm_offset()
                    return PutResult(True, "PUT_OK", offset, end, epoch)
                left = deadline - time.monotonic()
                if left <= 0:
                    return PutResult(False, "FLUSH_SLAVE_TIMEOUT", offset, end, epoch)
                self._cond.wait(min(left, 0.5))

    # ------------------------------------------------------------------ service (master side)

    def handle_epoch_cache(self) -> EpochCacheView:
        with self._lock:
            if self._log is None or self._epochs is None:
                return EpochCacheView(broker_addr=self.address, error="broker stopped")
            return EpochCacheView(
                self.config.cluster_name,
                self.config.broker_name,
                self.broker_id,
                list(self._epochs.entries),
                self._log.max_offset,
                broker_addr=self.address,
            )

    def handle_fetch(self, req: FetchRequest) -> FetchResponse:
        """One FetchLog: record the slave's ack (its offset), maybe expand the SyncStateSet, long-poll for
        data, answer whole records of one epoch and one file (AutoSwitchHAConnection)."""
        deadline = time.monotonic() + max(0, req.wait_ms) / 1000.0
        with self._cond:
            if not self._is_master_at(req.master_epoch):
                return self._not_master(req)
            assert self._log is not None and self._epochs is not None
            if req.offset > self._log.max_offset:
                return FetchResponse(
                    int(Code.SYSTEM_ERROR),
                    f"slave offset {req.offset} is past the master's "
                    f"log end {self._log.max_offset}: handshake again",
                    max_offset=self._log.max_offset,
                    master_epoch=self.master_epoch,
                )
            now = time.monotonic()
            st = self._slaves.setdefault(req.broker_id, _Slave(caught_up=now))
            st.ack, st.learner, st.last_seen = req.offset, req.async_learner, now
            st.address = req.broker_address
            if st.ack >= st.last_master_max:
                st.caught_up = max(st.caught_up, st.last_transfer)
            if st.ack >= self._log.max_offset:
                st.caught_up = now
            self._maybe_expand(req.broker_id, st)
            self._confirm = self._confirm_offset()
            self._cond.notify_all()
            while self._log is not None and self._log.max_offset <= req.offset and not self._dead:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
                if not self._is_master_at(req.master_epoch):
                    return self._not_master(req)
            if self._log is None:
                return FetchResponse(int(Code.SYSTEM_ERROR), "broker stopped")
            found = self._epochs.entry_for(req.offset, self._log.max_offset)
            if found is None:
                return FetchResponse(
                    int(Code.SYSTEM_ERROR), f"offset {req.offset} is in no epoch of the master"
                )
            entry, end = found
            data, length = self._log.read_chunk(req.offset, max(1, req.max_bytes), end)
            st.last_master_max = self._log.max_offset
            st.last_transfer = time.monotonic()
            return FetchResponse(
                0,
                "",
                req.offset,
                data,
                length,
                entry.epoch,
                entry.start_offset,
                self._confirm,
                self._log.max_offset,
                self.master_epoch,
                -1 if self.broker_id is None else self.broker_id,
            )

    def _is_master_at(self, epoch: int) -> bool:
        return not self._dead and self.role == Role.MASTER and self.master_epoch == epoch

    def _not_master(self, req: FetchRequest) -> FetchResponse:
        return FetchResponse(
            int(Code.CONTROLLER_INVALID_MASTER),
            f"{self.name} is not master at masterEpoch {req.master_epoch} "
            f"(role {self.role.value}, masterEpoch {self.master_epoch})",
            master_epoch=self.master_epoch,
        )

    # ------------------------------------------------------------------ replication (slave side)

    def _replicate(self, gen: int, master_id: int, master_address: str, master_epoch: int) -> None:
        cfg = self.config
        handshaken = False

        def current() -> bool:
            return not self._dead and not self._stop.is_set() and gen == self._repl_gen

        while current():
            try:
                if not handshaken:
                    handshaken = self._handshake(gen, master_id, master_address)
                    if not handshaken:
                        self._stop.wait(cfg.retry_interval)
                    continue
                with self._lock:
                    if not current() or self._log is None:
                        return
                    offset = self._log.max_offset
                req = FetchRequest(
                    cfg.cluster_name,
                    cfg.broker_name,
                    self.broker_id or -1,
                    self.address,
                    offset,
                    master_epoch,
                    cfg.fetch_max_bytes,
                    int(cfg.fetch_wait * 1000),
                    cfg.async_learner,
                )
                resp = self._peers.fetch(master_address, req, cfg.fetch_wait + cfg.controller_timeout)
                if resp.code != 0:
                    log.info("%s: fetch from %s: %s %s", self.name, master_address, resp.code, resp.remark)
                    handshaken = False
                    if resp.code == Code.CONTROLLER_INVALID_MASTER:
                        self._post(_Event("poll"))
                    self._stop.wait(cfg.retry_interval)
                    continue
                with self._lock:
                    if not current() or self._log is None or self._epochs is None:
                        return
                    if resp.offset != self._log.max_offset:
                        handshaken = False
                        continue
                    if (
                        resp.epoch != self._epochs.last_epoch
                        and resp.epoch >= 0
                        and not self._epochs.append(resp.epoch, resp.epoch_start_offset)
                    ):
                        log.warning(
                            "%s: epoch %d-%d does not follow %s: handshake again",
                            self.name,
                            resp.epoch,
                            resp.epoch_start_offset,
                            self._epochs.entries,
                        )
                        handshaken = False
                        continue
                    if resp.length:
                        self._log.write_chunk(resp.offset, resp.data, resp.length)
                    self._confirm = min(resp.confirm_offset, self._log.max_offset)
            except PeerUnavailable as exc:
                log.debug("%s: master %s unavailable: %s", self.name, master_address, exc)
                handshaken = False
                self._stop.wait(cfg.retry_interval)
            except MqctlError as exc:
                log.warning("%s: replication from %s: %s", self.name, master_address, exc)
                handshaken = False
                self._stop.wait(cfg.retry_interval)

    def _handshake(self, gen: int, master_id: int, master_address: str) -> bool:
        """AutoSwitchHAClient.doTruncate: compare epoch caches, cut at the consistent point."""
        view = self._peers.epoch_cache(master_address, self.config.controller_timeout)
        if view.error is not None or view.broker_id != master_id or view.max_offset is None:
            log.info(
                "%s: %s is not broker %d yet (%s)",
                self.name,
                master_address,
                master_id,
                view.error or f"id {view.broker_id}",
            )
            return False
        with self._lock:
            if self._dead or gen != self._repl_gen or self._log is None or self._epochs is None:
                return False
            local_max = self._log.max_offset
            point = truncation_point(
                list(self._epochs.entries), local_max, list(view.entries), view.max_offset
            )
            if point < 0:
                self.error = (
                    f"no consistent point with master {master_address}: local epochs "
                    f"{[e.line() for e in self._epochs.entries]}, master's "
                    f"{[e.line() for e in view.entries]}; manual repair needed"
                )
                log.error("%s: %s", self.name, self.error)
                return False
            if point < local_max:
                log.info(
                    "%s: truncating log %d -> %d to follow %s", self.name, local_max, point, master_address
                )
                self.stats["truncations"] += 1
                self.stats["bytes_truncated"] += local_max - point
                self._log.truncate(point)
            self._epochs.truncate_suffix_by_offset(point)
            self._confirm = min(self._confirm, point)
            self.error = None
            return True

    # ------------------------------------------------------------------ inspection

    def status(self) -> AgentStatus:
        with self._lock:
            epochs = tuple((e.epoch, e.start_offset) for e in self._epochs.entries) if self._epochs else ()
            return AgentStatus(
                self.name,
                self.role,
                self.broker_id,
                self.broker_epoch,
                self.address,
                self.master_id,
                self.master_epoch,
                tuple(sorted(self.sync_state_set)),
                self.sync_state_set_epoch,
                self._log.max_offset if self._log is not None else -1,
                self._confirm_offset(),
                epochs,
                self.error,
            )

    @property
    def max_offset(self) -> int:
        with self._lock:
            return self._log.max_offset if self._log is not None else -1

    def messages(self) -> list[StoredMessage]:
        """Every message in the log (commitlog storage), read back through mqctl.store."""
        with self._lock:
            if self._log is None:
                return []
            return list(self._log.messages())

    def wait_role(self, role: Role, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while self.role != role:
            if self.finished.is_set():
                raise RuntimeError(f"{self.name} ended ({self.role.value}): {self.error}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name} is {self.role.value}, not {role.value}, after {timeout}s")
            time.sleep(0.02)


def make_client(config: AgentConfig) -> Any:
    """The agent's controller client: ControllerClient, or RemotingControllerClient when
    ``config.controller_protocol`` is remoting."""
    if config.controller_protocol == "remoting":
        from mqctl.remoting.client import RemotingControllerClient  # lazy: start-up

        # same methods and results as ControllerClient; no WatchRoleChanges stream over
        # remoting, so roles come from GetReplicaInfo polling (syncBrokerMetadataPeriod)
        return RemotingControllerClient(
            config.controller_addresses, timeout=config.controller_timeout, **config.controller_security
        )
    from mqctl.client import ControllerClient  # lazy: grpc, protobuf

    return ControllerClient(
        config.controller_addresses, timeout=config.controller_timeout, **config.controller_security
    )
