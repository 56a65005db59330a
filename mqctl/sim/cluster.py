"""A simulated RocketMQ cluster: S broker sets of R BrokerAgent replicas against a real controller group.

The controller group is real ``mqctl serve`` processes (``mqctl.localgroup.LocalCluster``) started here, or
an existing group given by address. The brokers are ``mqctl.broker`` agents in this process, each with
its own store directory, controller client and (by default) its own gRPC ``mqctl.v1.Broker`` server.

While it runs, the simulation
* produces messages to every set's master at a given rate (``allAckInSyncStateSet`` by default) and
  records every acknowledged one;
* samples every agent's status and the controller's view of every set (``History``), so that the
  invariants of ``mqctl.sim.invariants`` can be checked at the end;
* applies faults: crash/restart and isolate/reconnect brokers, SIGKILL/restart controller nodes,
  from a seeded plan (``mqctl.sim.faults``) or one at a time (``perform``).

``settle()`` heals everything and waits until each set has one master followed by every replica at
the same log end; ``report()`` then checks the invariants. Rendering is the CLI's job: ``view()``
returns plain data and ``on_event`` receives one line per thing that happened.
"""

from __future__ import annotations

import logging
import os
import shutil
import string
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mqctl.broker.agent import AgentStatus, BrokerAgent, Role
from mqctl.broker.config import AgentConfig
from mqctl.errors import UsageError
from mqctl.sim.faults import LEADER, MASTER, Fault, describe
from mqctl.sim.inject import Network
from mqctl.sim.invariants import (
    AckedMessage,
    Check,
    History,
    LogView,
    check_acked,
    check_epoch_files,
    check_epochs_monotonic,
    check_one_master,
    check_prefix,
    check_state_hashes,
)

if TYPE_CHECKING:
    from mqctl.client import ControllerClient, ReplicasInfo
    from mqctl.localgroup import LocalCluster

log = logging.getLogger("mqctl.sim")

__all__ = [
    "BrokerSet",
    "Replica",
    "ReplicaView",
    "Report",
    "SetView",
    "SimSettings",
    "Simulation",
    "set_names",
]


def set_names(count: int) -> list[str]:
    """broker-a, broker-b, ... broker-z, broker-27, ..."""
    letters = string.ascii_lowercase
    return [f"broker-{letters[i]}" if i < len(letters) else f"broker-{i + 1}" for i in range(count)]


@dataclass
class SimSettings:
    sets: int = 2
    replicas: int = 3
    controllers: int = 3  # nodes started by the simulation (ignored with ``addresses``)
    addresses: str | None = None  # an existing controller group: "h:p;h:p"
    cluster_name: str = "SimCluster"
    rate: float = 20.0  # messages per second per broker set (0: no producer)
    body_size: int = 100
    storage: str = "commitlog"  # or "offsets" (no bodies: the acked check compares offsets)
    peer_transport: str = "grpc"  # or "local" (agents call each other in-process)
    all_ack: bool = True  # allAckInSyncStateSet
    heartbeat_interval: float = 0.2
    heartbeat_timeout_ms: int = 1500  # the brokers' lease (the controller elects once it ends)
    put_timeout: float = 2.0
    base_dir: str | None = None  # default: a new temporary directory, removed at close()
    keep: bool = False  # keep base_dir at close()
    agent_options: dict[str, Any] = field(default_factory=dict)  # more AgentConfig fields
    # with ``addresses``: the group's --token and --tls-* (ControllerClient's keywords), for the
    # agents and the simulation's own client alike
    controller_security: dict[str, Any] = field(default_factory=dict)
    controller_timeout: float = 5.0  # each controller call, retries included

    def validate(self) -> None:
        if not 1 <= self.sets <= 500:
            raise UsageError(f"--sets {self.sets}: expected 1..500")
        if not 1 <= self.replicas <= 9:
            raise UsageError(f"--replicas {self.replicas}: expected 1..9")
        if self.addresses is None and self.controllers not in (1, 3, 5):
            raise UsageError(f"--controllers {self.controllers}: expected 1, 3 or 5")
        if self.rate < 0:
            raise UsageError(f"--rate {self.rate}: must be 0 or more")
        if self.storage not in ("commitlog", "offsets"):
            raise UsageError(f"--storage {self.storage!r}: expected commitlog or offsets")
        if self.peer_transport not in ("grpc", "local"):
            raise UsageError(f"--peers {self.peer_transport!r}: expected grpc or local")
        if self.body_size < 16:
            raise UsageError(f"--body-size {self.body_size}: at least 16 bytes")


class Replica:
    """One replica slot of a set: its configuration and its current agent (a new one per restart)."""

    def __init__(self, broker_set: str, index: int, config: AgentConfig, network: Network) -> None:
        self.broker_set = broker_set
        self.index = index
        self.config = config
        self.network = network
        self.agent: BrokerAgent | None = None
        self.incarnation = 0
        self.last: AgentStatus | None = None  # last sampled status
        self.truncations = 0  # over every incarnation
        self.bytes_truncated = 0
        self.lock = threading.Lock()

    @property
    def name(self) -> str:
        return f"{self.broker_set}/r{self.index}"

    @property
    def alive(self) -> bool:
        return self.agent is not None and self.agent.alive

    def start(self) -> BrokerAgent:
        with self.lock:
            if self.agent is not None and self.agent.alive:
                return self.agent
            self._fold_stats()
            agent = self.network.agent(self.config, name=self.name).start()
            self.agent = agent
            self.incarnation += 1
            return agent

    def crash(self) -> None:
        with self.lock:
            if self.agent is not None:
                self.agent.crash()

    def stop(self) -> None:
        with self.lock:
            if self.agent is not None:
                self.agent.stop()

    def _fold_stats(self) -> None:
        if self.agent is not None:
            self.truncations += self.agent.stats["truncations"]
            self.bytes_truncated += self.agent.stats["bytes_truncated"]
            self.agent = None

    def total_truncations(self) -> tuple[int, int]:
        a = self.agent
        extra = (a.stats["truncations"], a.stats["bytes_truncated"]) if a is not None else (0, 0)
        return self.truncations + extra[0], self.bytes_truncated + extra[1]


@dataclass
class BrokerSet:
    name: str
    replicas: list[Replica]
    acked: int = 0
    failed: int = 0
    seq: int = 0

    def master(self) -> Replica | None:
        """The replica a producer writes to: alive, MASTER, highest masterEpoch (a cut-off old master
        may still think it leads an older epoch)."""
        best: tuple[int, Replica] | None = None
        for r in self.replicas:
            a = r.agent
            if a is None or not a.alive or a.role != Role.MASTER:
                continue
            if best is None or a.master_epoch > best[0]:
                best = (a.master_epoch, r)
        return best[1] if best else None


@dataclass(frozen=True)
class ReplicaView:
    name: str
    index: int
    state: str  # up, isolated, crashed, stopped, failed
    broker_id: int | None
    role: str
    master_epoch: int
    master_id: int | None
    max_offset: int
    lag: int | None  # master's max offset - this one's (None when there is no master)
    truncations: int
    error: str | None


@dataclass(frozen=True)
class SetView:
    name: str
    master_id: int | None
    master_epoch: int
    sync_state_set: tuple[int, ...]
    sync_state_set_epoch: int
    controller_master: int | None  # the controller's view (last poll)
    controller_epoch: int
    acked: int
    failed: int
    replicas: tuple[ReplicaView, ...]


@dataclass(frozen=True)
class ControllerView:
    name: str
    address: str
    alive: bool
    leader: bool


@dataclass
class Report:
    checks: list[Check]
    stats: dict[str, Any]
    seed: int | None = None

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "seed": self.seed,
            "stats": self.stats,
            "checks": [{"name": c.name, "ok": c.ok, "detail": c.detail} for c in self.checks],
        }


class Simulation:
    """See the module docstring. Use as a context manager, or call close()."""

    def __init__(self, settings: SimSettings, on_event: Callable[[str], None] | None = None) -> None:
        settings.validate()
        self.settings = settings
        self.on_event = on_event
        self.t0 = time.monotonic()
        self.events: deque[tuple[float, str]] = deque(maxlen=500)
        self.history = History()
        self.cluster: LocalCluster | None = None
        self.network = Network()
        self.client: ControllerClient | None = None
        self.sets: list[BrokerSet] = []
        self.base_dir = ""
        self._own_dir = False
        self._stop = threading.Event()
        self._producing = threading.Event()
        self._threads: list[threading.Thread] = []
        self._producers: list[threading.Thread] = []
        self._ctl_view: dict[str, ReplicasInfo] = {}
        self._leader_name = ""
        self._lock = threading.Lock()
        self.faults_applied = 0  # crashes, isolations and controller kills, planned or not
        self.failovers: list[tuple[str, int, int]] = []  # (set, old, new masterEpoch), controller's view
        self.closed = False

    # ------------------------------------------------------------------ events

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def event(self, text: str) -> None:
        t = self.elapsed()
        self.events.append((t, text))
        log.info("%s", text)
        if self.on_event is not None:
            self.on_event(text)

    # ------------------------------------------------------------------ lifecycle

    @property
    def addresses(self) -> str:
        if self.settings.addresses:
            return self.settings.addresses
        assert self.cluster is not None
        return self.cluster.addresses

    def start(self, ready_timeout: float = 60.0) -> Simulation:
        """Controllers (unless given), every agent, the observers; returns when each set has a master
        followed by every replica with a full SyncStateSet."""
        from mqctl.client import ControllerClient  # lazy: grpc, protobuf
        from mqctl.localgroup import LocalCluster  # lazy: start-up

        s = self.settings
        if s.base_dir:
            self.base_dir = os.path.abspath(s.base_dir)
            os.makedirs(self.base_dir, exist_ok=True)
        else:
            self.base_dir = tempfile.mkdtemp(prefix="mqctl-sim-")
            self._own_dir = True
        if s.addresses is None:
            self.cluster = LocalCluster(os.path.join(self.base_dir, "controllers"), size=s.controllers)
            self.event(
                f"starting {s.controllers} controller node(s) (mqctl serve processes) in {self.base_dir}"
            )
            self.cluster.start(wait=False)
            leader = self.cluster.wait_for_leader(60)
            self.event(f"controller group up: {leader.name} leads ({self.cluster.addresses})")
        self.client = ControllerClient(
            self.addresses, timeout=min(3.0, s.controller_timeout), **s.controller_security
        )
        if s.addresses is not None:  # a given group that does not answer (a wrong port, TLS or
            self.client.get_metadata()  # certificate) is one clear error now, not brokers without a master
        for name in set_names(s.sets):
            replicas = [
                Replica(name, i, self._agent_config(name, i), self.network) for i in range(s.replicas)
            ]
            self.sets.append(BrokerSet(name, replicas))
        self.event(
            f"starting {s.sets} broker set(s) x {s.replicas} replicas (cluster {s.cluster_name}, "
            f"{s.storage} logs, allAckInSyncStateSet={'on' if s.all_ack else 'off'})"
        )
        for bs in self.sets:
            for r in bs.replicas:
                r.start()
        self._spawn(self._sample_agents, "sim-agents")
        self._spawn(self._poll_controller, "sim-controller")
        self.wait_ready(ready_timeout)
        for bs in self.sets:
            m = bs.master()
            if m is not None and m.agent is not None:
                st = m.agent.status()
                self.event(
                    f"{bs.name}: master {m.name} (id {st.broker_id}) at masterEpoch "
                    f"{st.master_epoch}, SyncStateSet {list(st.sync_state_set)}"
                )
        return self

    def _agent_config(self, name: str, index: int) -> AgentConfig:
        s = self.settings
        opts: dict[str, Any] = dict(
            heartbeat_interval=s.heartbeat_interval,
            heartbeat_timeout_ms=s.heartbeat_timeout_ms,
            sync_metadata_period=0.5,
            check_sync_state_set_period=0.3,
            ha_max_time_slave_not_catchup=1.5,
            fetch_wait=0.3,
            retry_interval=0.2,
            put_timeout=s.put_timeout,
            commitlog_file_size=256 * 1024,
            controller_timeout=s.controller_timeout,
            controller_security=s.controller_security,
            register_retry_fast=50,
            all_ack_in_sync_state_set=s.all_ack,
            storage=s.storage,
            peer_transport=s.peer_transport,
        )
        if s.peer_transport == "local":
            opts["address"] = f"{name}-r{index}"
        opts.update(s.agent_options)
        store = os.path.join(self.base_dir, "brokers", name, f"r{index}")
        return AgentConfig(s.cluster_name, name, store, self.addresses, **opts)

    def _spawn(self, target: Callable[..., None], name: str, *args: Any) -> threading.Thread:
        t = threading.Thread(target=target, args=args, name=name, daemon=True)
        t.start()
        self._threads.append(t)
        return t

    def close(self) -> None:
        """Stop everything this simulation started and remove its temporary directory (unless keep)."""
        if self.closed:
            return
        self.closed = True
        self._stop.set()
        self._producing.clear()
        for t in self._producers + self._threads:
            if t.ident is not None:  # an interrupt may come between creating and starting a thread
                t.join(10)

        def stop_replica(r: Replica) -> None:
            try:
                r.stop()
            except Exception:  # a store that cannot be flushed: crash it, the process is ending anyway
                log.exception("stopping %s", r.name)
                r.crash()

        stoppers = [
            threading.Thread(target=stop_replica, args=(r,), daemon=True)
            for bs in self.sets
            for r in bs.replicas
        ]
        for t in stoppers:
            t.start()
        for t in stoppers:
            t.join(15)
        if self.client is not None:
            self.client.close()
        if self.cluster is not None:
            self.cluster.stop_all()
        if self._own_dir and not self.settings.keep:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def __enter__(self) -> Simulation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ observers

    def _sample_agents(self) -> None:
        while not self._stop.wait(0.05):
            for bs in self.sets:
                for r in bs.replicas:
                    self._sample(bs, r)
            self.history.samples += 1

    def _sample(self, bs: BrokerSet, r: Replica) -> None:
        a = r.agent
        if a is None or not a.alive:
            return
        st = a.status()
        r.last = st
        if st.broker_id is None:
            return
        self.history.epoch(f"agent {r.name} #{r.incarnation}", st.master_epoch)
        if st.role == Role.MASTER:
            self.history.claim(bs.name, st.master_epoch, st.broker_id, f"agent {r.name}")

    def _poll_controller(self) -> None:
        assert self.client is not None
        names = [bs.name for bs in self.sets]
        while not self._stop.wait(0.3):
            try:
                table = self.client.get_sync_state_data(names).replicas_info_table
            except Exception:  # a controller failover: the next poll retries
                continue
            for name, info in table.items():
                old = self._ctl_view.get(name)
                self._ctl_view[name] = info
                self.history.epoch(f"controller {name}", info.master_epoch)
                if info.master_broker_id is not None:
                    self.history.claim(name, info.master_epoch, info.master_broker_id, "controller")
                if old is not None and info.master_epoch > old.master_epoch:
                    self.failovers.append((name, old.master_epoch, info.master_epoch))
                    who = f"id {info.master_broker_id}" if info.master_broker_id is not None else "no master"
                    self.event(
                        f"controller: {name} masterEpoch {old.master_epoch} -> {info.master_epoch}, {who}"
                    )
            if self.cluster is not None:
                leader = self.client.leader or ""
                name = next((n.name for n in self.cluster.nodes if n.grpc_address == leader), "")
                if name and name != self._leader_name:
                    if self._leader_name:
                        self.event(f"controller leader is now {name}")
                    self._leader_name = name

    # ------------------------------------------------------------------ producer

    def start_producer(self) -> None:
        if self.settings.rate <= 0 or self._producing.is_set():
            return
        self._producing.set()
        for bs in self.sets:
            t = threading.Thread(target=self._produce, args=(bs,), name=f"sim-produce-{bs.name}", daemon=True)
            self._producers.append(t)
            t.start()
        self.event(f"producing {self.settings.rate:g} msg/s to each set's master")

    def stop_producer(self) -> None:
        if not self._producing.is_set():
            return
        self._producing.clear()
        for t in self._producers:
            t.join(self.settings.put_timeout + 5)
        self._producers = []
        self.event(f"producer stopped: {self.history.acked_count()} messages acknowledged")

    def _body(self, bs: BrokerSet, seq: int) -> bytes:
        head = f"{bs.name}|{seq}|".encode()
        return head + b"." * max(0, self.settings.body_size - len(head))

    def _produce(self, bs: BrokerSet) -> None:
        interval = 1.0 / self.settings.rate
        next_t = time.monotonic()
        while self._producing.is_set() and not self._stop.is_set():
            delay = next_t - time.monotonic()
            if delay > 0 and self._stop.wait(delay):
                return
            next_t = max(next_t + interval, time.monotonic() - 1.0)
            m = bs.master()
            agent = m.agent if m is not None else None
            if agent is None:
                continue
            seq = bs.seq
            bs.seq += 1
            r = agent.put(self._body(bs, seq), timeout=self.settings.put_timeout)
            if r.ok:
                bs.acked += 1
                self.history.ack(bs.name, AckedMessage(r.offset, r.end, self._body(bs, seq), r.master_epoch))
            else:
                bs.failed += 1

    # ------------------------------------------------------------------ faults

    def crash(self, replica: Replica, why: str = "") -> None:
        epoch = replica.agent.master_epoch if replica.agent is not None else 0
        role = replica.agent.role.value if replica.agent is not None else "?"
        replica.crash()
        self.faults_applied += 1
        self.event(f"crash {replica.name} ({role}, masterEpoch {epoch}){why}")

    def restart(self, replica: Replica) -> None:
        if replica.alive:
            return
        replica.start()
        self.event(f"restart {replica.name} (incarnation {replica.incarnation})")

    def isolate(self, replica: Replica, on: bool = True) -> None:
        a = replica.agent
        if a is None or not a.alive:
            return
        self.network.isolate(a, on)
        self.faults_applied += on
        self.event(
            f"{'isolate' if on else 'reconnect'} {replica.name} ({a.role.value}, "
            f"masterEpoch {a.master_epoch})"
        )

    def kill_controller(self, index: int = LEADER) -> int | None:
        """SIGKILL a controller node (LEADER: the current leader); returns its index."""
        if self.cluster is None:
            self.event("no controller fault: the controller group was not started by this simulation")
            return None
        nodes = self.cluster.nodes
        if index == LEADER:
            leader = self.cluster.leader()
            if leader is None:
                self.event("no controller leader to kill right now")
                return None
            index = nodes.index(leader)
        alive = [n for n in nodes if n.alive()]
        if nodes[index] in alive and len(alive) - 1 < len(nodes) // 2 + 1:
            self.event(f"not killing {nodes[index].name}: the group would lose its quorum")
            return None
        if not nodes[index].alive():
            return None
        was_leader = self._leader_name == nodes[index].name
        nodes[index].kill()
        self.faults_applied += 1
        self.event(f"SIGKILL controller {nodes[index].name}{' (the leader)' if was_leader else ''}")
        return index

    def restart_controller(self, index: int) -> None:
        if self.cluster is None:
            return
        node = self.cluster.nodes[index]
        if node.alive():
            return
        node.start()
        self.event(f"restart controller {node.name}")

    def heal_all(self) -> None:
        for bs in self.sets:
            for r in bs.replicas:
                a = r.agent
                if a is not None and a.alive and self.network.is_isolated(a):
                    self.isolate(r, False)
                elif not r.alive:
                    self.restart(r)
        if self.cluster is not None:
            for i, n in enumerate(self.cluster.nodes):
                if not n.alive():
                    self.restart_controller(i)

    def perform(self, action: str, set_index: int = 0) -> None:
        """One keyboard action (mqctl.sim.faults.KEYS)."""
        bs = self.sets[set_index % len(self.sets)]
        if action == "crash_master":
            m = bs.master()
            self.crash(m) if m is not None else self.event(f"{bs.name} has no master to crash")
        elif action == "crash_slave":
            slaves = [
                r for r in bs.replicas if r.alive and r.agent is not None and r.agent.role == Role.SLAVE
            ]
            self.crash(slaves[0]) if slaves else self.event(f"{bs.name} has no live slave")
        elif action == "isolate_master":
            m = bs.master()
            self.isolate(m) if m is not None else self.event(f"{bs.name} has no master to isolate")
        elif action == "restart_brokers":
            for r in bs.replicas:
                self.restart(r)
        elif action == "kill_controller_leader":
            self.kill_controller(LEADER)
        elif action == "restart_controllers":
            if self.cluster is not None:
                for i in range(len(self.cluster.nodes)):
                    self.restart_controller(i)
        elif action == "heal_all":
            self.heal_all()
        else:
            raise UsageError(f"unknown action {action!r}")

    def apply_fault(self, f: Fault) -> Callable[[], None] | None:
        """Apply one planned fault now; returns how to heal it (None if it could not be applied)."""
        names = [bs.name for bs in self.sets]
        self.event(f"fault: {describe(f, names)}")
        if f.kind == "kill_controller":
            idx = self.kill_controller(f.target)
            if idx is None:
                return None
            return lambda: self.restart_controller(idx)
        bs = self.sets[f.set_index]
        replica = bs.master() if f.target == MASTER else bs.replicas[f.target % len(bs.replicas)]
        if replica is None or not replica.alive:
            what = "master" if f.target == MASTER else "live replica"
            self.event(f"fault skipped: {bs.name} has no {what}")
            return None
        if f.kind == "crash_broker":
            self.crash(replica)
            return lambda: self.restart(replica)
        agent = replica.agent
        self.isolate(replica)

        def heal() -> None:
            if replica.agent is agent and agent is not None and agent.alive:
                self.isolate(replica, False)

        return heal

    def run(
        self,
        duration: float,
        plan: list[Fault] | None = None,
        stop: threading.Event | None = None,
        tick: Callable[[], None] | None = None,
    ) -> None:
        """Run for ``duration`` seconds (0: until ``stop``), applying ``plan`` (times from now); every
        fault is healed at its end, or when the run ends."""
        start = time.monotonic()
        pending = sorted(plan or [], key=lambda f: f.at)
        heals: list[tuple[float, Callable[[], None]]] = []
        while not self._stop.is_set():
            now = time.monotonic() - start
            if (duration > 0 and now >= duration) or (stop is not None and stop.is_set()):
                break
            while pending and pending[0].at <= now:
                f = pending.pop(0)
                heal = self.apply_fault(f)
                if heal is not None:
                    heals.append((f.end, heal))
            due = [h for h in heals if h[0] <= now]
            heals = [h for h in heals if h[0] > now]
            for _, heal in due:
                heal()
            if tick is not None:
                tick()
            time.sleep(0.05)
        for _, heal in heals:
            heal()

    # ------------------------------------------------------------------ convergence

    def set_problem(self, bs: BrokerSet, full_sync_state_set: bool = False, ctl: bool = True) -> str | None:
        """Why the set is not settled yet (None = one master, every replica following it at the same
        masterEpoch and log end, the controller agreeing)."""
        agents = [r.agent for r in bs.replicas]
        if any(a is None or not a.alive for a in agents):
            return "a replica is down"
        statuses = [a.status() for a in agents if a is not None]
        masters = [s for s in statuses if s.role == Role.MASTER]
        if len(masters) != 1:
            return f"{len(masters)} masters"
        m = masters[0]
        isolated = next((a.name for a in agents if a is not None and self.network.is_isolated(a)), None)
        if isolated is not None:
            return f"{isolated} is isolated"
        for st in statuses:
            if st is m:
                continue
            if st.role != Role.SLAVE or st.master_id != m.broker_id or st.master_epoch != m.master_epoch:
                return f"{st.name} is {st.role.value} of id {st.master_id} at epoch {st.master_epoch}"
            if st.max_offset != m.max_offset:
                return f"{st.name} at {st.max_offset}, master at {m.max_offset}"
        if full_sync_state_set and len(m.sync_state_set) != len(statuses):
            return f"SyncStateSet {list(m.sync_state_set)}"
        if ctl:
            assert self.client is not None
            info = self.client.get_replica_info(bs.name)
            if info.master_broker_id != m.broker_id or info.master_epoch != m.master_epoch:
                return (
                    f"controller says master {info.master_broker_id} at {info.master_epoch}, "
                    f"agent {m.broker_id} at {m.master_epoch}"
                )
        return None

    def _wait_sets(self, timeout: float, what: str, full: bool) -> list[str]:
        deadline = time.monotonic() + timeout
        problems: list[str] = []
        while time.monotonic() < deadline and not self._stop.is_set():
            problems = []
            for bs in self.sets:
                try:
                    p = self.set_problem(bs, full_sync_state_set=full)
                except Exception as exc:  # controller unreachable for a moment
                    p = f"controller: {exc}"
                if p:
                    problems.append(f"{bs.name}: {p}")
            if not problems:
                return []
            time.sleep(0.1)
        return problems or [f"stopped before {what}"]

    def wait_ready(self, timeout: float = 60.0) -> None:
        problems = self._wait_sets(timeout, "ready", full=True)
        if problems:
            raise TimeoutError(f"broker sets not ready after {timeout:g}s: {'; '.join(problems[:3])}")
        self.event(f"all {len(self.sets)} set(s) ready: one master each, every replica in the SyncStateSet")

    def wait_failover(self, bs: BrokerSet, old_epoch: int, timeout: float = 30.0) -> tuple[Replica, float]:
        """Until a master at a newer epoch is followed by every other live replica; -> (master, seconds)."""
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            m = bs.master()
            if m is not None and m.agent is not None and m.agent.master_epoch > old_epoch:
                st = m.agent.status()
                others = [
                    r.agent for r in bs.replicas if r is not m and r.agent is not None and r.agent.alive
                ]
                if all(
                    o.role == Role.SLAVE and o.master_id == st.broker_id and o.master_epoch == st.master_epoch
                    for o in others
                ):
                    return m, time.monotonic() - start
            time.sleep(0.01)
        raise TimeoutError(f"{bs.name}: no new master followed by every replica after {timeout:g}s")

    def settle(self, timeout: float = 60.0) -> list[str]:
        """Stop producing, heal every fault, wait until every set is settled; -> remaining problems."""
        self.stop_producer()
        self.heal_all()
        if self.cluster is not None:
            try:
                self.cluster.wait_for_leader(timeout)
            except TimeoutError as exc:
                return [str(exc)]
        problems = self._wait_sets(timeout, "settled", full=False)
        if not problems:
            self.event("settled: every set has one master, every replica follows it at the same log end")
        return problems

    # ------------------------------------------------------------------ views and report

    def controllers(self) -> list[ControllerView]:
        if self.cluster is None:
            from mqctl.client import parse_addresses  # lazy: grpc, protobuf

            return [
                ControllerView(a, a, True, a == (self.client.leader if self.client else None))
                for a in parse_addresses(self.addresses)
            ]
        return [
            ControllerView(n.name, n.grpc_address, n.alive(), n.name == self._leader_name)
            for n in self.cluster.nodes
        ]

    def view(self) -> list[SetView]:
        out = []
        for bs in self.sets:
            m = bs.master()
            mst = m.last if m is not None else None
            rows = []
            for r in bs.replicas:
                st = r.last
                a = r.agent
                if a is None or not a.alive:
                    state = a.role.value if a is not None else "down"
                elif self.network.is_isolated(a):
                    state = "isolated"
                else:
                    state = "up"
                alive = a is not None and a.alive
                lag = (
                    (mst.max_offset - st.max_offset)
                    if (mst is not None and st is not None and alive)
                    else None
                )
                rows.append(
                    ReplicaView(
                        r.name,
                        r.index,
                        state,
                        st.broker_id if st else None,
                        (a.role.value if a is not None else "down"),
                        st.master_epoch if st else 0,
                        st.master_id if st else None,
                        st.max_offset if st else -1,
                        lag,
                        r.total_truncations()[0],
                        st.error if st else None,
                    )
                )
            ctl = self._ctl_view.get(bs.name)
            out.append(
                SetView(
                    bs.name,
                    mst.broker_id if mst else None,
                    mst.master_epoch if mst else 0,
                    mst.sync_state_set if mst else (),
                    mst.sync_state_set_epoch if mst else 0,
                    ctl.master_broker_id if ctl else None,
                    ctl.master_epoch if ctl else 0,
                    bs.acked,
                    bs.failed,
                    tuple(rows),
                )
            )
        return out

    def _log_view(self, r: Replica) -> LogView | None:
        a = r.agent
        if a is None or not a.alive:
            return None
        st = a.status()
        records = None
        if self.settings.storage == "commitlog":
            records = tuple((m.offset, m.body) for m in a.messages())
        return LogView(r.name, st.max_offset, records, st.epochs)

    def state_hashes(self) -> dict[str, str]:
        from mqctl.client import parse_addresses  # lazy: grpc, protobuf

        assert self.client is not None
        out: dict[str, str] = {}
        if self.cluster is not None:
            return self.cluster.hashes()
        for addr in parse_addresses(self.addresses):
            try:
                out[addr] = self.client.get_metadata(addr).state_hash
            except Exception as exc:  # reported as a node that did not answer
                log.debug("metadata of %s: %s", addr, exc)
        return out

    def report(self, settle_problems: list[str] | None = None, seed: int | None = None) -> Report:
        """Check every invariant on what was recorded and on the logs as they are now."""
        checks = [
            Check(
                "every set settled",
                not settle_problems,
                "; ".join(settle_problems)
                if settle_problems
                else "one master per set, every replica following it at the same log end",
            )
        ]
        checks.append(check_one_master(self.history))
        checks.append(check_epochs_monotonic(self.history))
        masters: dict[str, LogView | None] = {}
        others: dict[str, list[LogView]] = {}
        every: dict[str, list[LogView]] = {}
        for bs in self.sets:
            m = bs.master()
            masters[bs.name] = self._log_view(m) if m is not None else None
            views = [(r, self._log_view(r)) for r in bs.replicas]
            others[bs.name] = [v for r, v in views if v is not None and r is not m]
            every[bs.name] = [v for _, v in views if v is not None]
        checks.append(check_epoch_files(every))
        expected = len(self.cluster.nodes) if self.cluster is not None else len(self.controllers())
        hashes: dict[str, str] = {}
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:  # a last AlterSyncStateSet may still be replicating
            try:
                hashes = self.state_hashes()
            except Exception as exc:  # a node restarting
                log.debug("state hashes: %s", exc)
                hashes = {}
            if len(hashes) == expected and len(set(hashes.values())) == 1:
                break
            time.sleep(0.2)
        checks.append(check_state_hashes(hashes, expected))
        checks.append(check_acked(self.history, masters))
        checks.append(check_prefix(masters, others))
        truncs = [r.total_truncations() for bs in self.sets for r in bs.replicas]
        stats = {
            "seconds": round(self.elapsed(), 1),
            "sets": len(self.sets),
            "replicas": self.settings.replicas,
            "acknowledged": self.history.acked_count(),
            "failed_writes": sum(bs.failed for bs in self.sets),
            "faults": self.faults_applied,
            "failovers": len(self.failovers),
            "truncations": sum(t[0] for t in truncs),
            "bytes_truncated": sum(t[1] for t in truncs),
            "samples": self.history.samples,
        }
        return Report(checks, stats, seed)
