"""The deterministic simulator's world: one seed drives a controller group's clock, network and
disks, single-threaded, in one process, with the real Raft fork, journal, raftlog, core and records.

Events are ordered by (simulated time, the name of what acts, its own counter): never by the order
in which a node iterates a set, so a run does not depend on Python's string hashing. Each source
of randomness (a link's delays, a node's election timeouts, the faults, the workload) has its own
`random.Random` seeded from the run's seed and its name.
"""

from __future__ import annotations

import contextlib
import hashlib
import heapq
import pickle
import random
import traceback
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from pysyncobj.node import TCPNode
from pysyncobj.transport import Transport

from mqctl.controller import core, election, records
from mqctl.controller.raftlog import ControllerSyncObj, make_conf
from mqctl.dsim.disk import Disk, SimJournalFactory, SimStorage

CONNECTION_TIMEOUT = 1.0  # make_conf's connectionTimeout: a silent TCP connection is closed
CONNECTION_RETRY = 0.5  # make_conf's connectionRetryTime
TICK = 0.01  # make_conf's autoTickPeriod: how often a node's Raft ticks
CONTROLLER_TICK = 0.02  # mqctl/controller/node.py's ticker
EPOCH_MS = 1_700_000_000_000  # simulated wall clock at time 0

MUTATIONS = (
    "follower-acks-before-fsync",
    "term-vote-not-persisted",
    "prevote-off",
    "checkquorum-off",
    "leader-counts-before-durable",
    "skip-leader-term-check",
    "record-applied-twice",
    "election-ignores-sync-state-set",
    "membership-changes-at-once",
)
MEMBERSHIP_COMMAND = 2  # the first byte of a membership change's Raft entry (the fork's _COMMAND_TYPE)


class Violation(BaseException):
    """A checker found a run that breaks a property. Not an Exception: the checks on the applied
    stream run inside raftlog's apply hook, which logs and swallows what a watcher raises."""


def sub_rng(seed: int, name: str) -> random.Random:
    return random.Random(f"{seed}/{name}")


class NullPoller:
    """The fork polls no sockets in the simulator: messages arrive as events."""

    def subscribe(self, descr: Any, callback: Any, eventMask: Any) -> None:
        pass

    def unsubscribe(self, descr: Any) -> None:
        pass

    def poll(self, timeout: float) -> None:
        pass


class SimTransport(Transport):  # type: ignore[misc]
    """pysyncobj's Transport on the simulated network."""

    def __init__(self, node: SimNode) -> None:
        self._onMessageReceivedCallback = None
        self._onNodeConnectedCallback = None
        self._onNodeDisconnectedCallback = None
        self._onReadonlyNodeConnectedCallback = None
        self._onReadonlyNodeDisconnectedCallback = None
        self._onUtilityMessageCallbacks: dict[str, Any] = {}
        self.node = node
        self.peers: set[str] = set()

    @property
    def ready(self) -> bool:
        return True

    def tryGetReady(self) -> None:
        pass

    def waitReady(self) -> None:
        pass

    def send(self, node: Any, message: Any) -> bool:
        return self.node.world.net.send(self.node.addr, node.id, message)

    def addNode(self, node: Any) -> None:
        self.peers.add(node.id)
        net = self.node.world.net
        if net.pair(self.node.addr, node.id) in net.connected:
            # the connection the other node opened (it knew this one already) is this node's too now:
            # pysyncobj's TCPTransport closes an unknown node's connection and connects once it is
            # added, so both sides see it connected (here the simulated network keeps it open)
            self._onNodeConnected(TCPNode(node.id))
            return
        net.reconsider(self.node.addr, node.id)

    def dropNode(self, node: Any) -> None:
        self.peers.discard(node.id)
        self.node.world.net.reset(self.node.addr, node.id, "dropped")

    def destroy(self) -> None:
        pass


class Network:
    """TCP between the nodes: per connection, messages arrive in order or not at all. A message
    lost (a drop) breaks its connection, as a reset would; a direction cut (partition) loses what
    is sent that way and closes the connection once the other side has been silent for the
    connection timeout; a closed connection is opened again once both directions work."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.cut: set[tuple[str, str]] = set()  # (a, b): a's packets do not reach b
        self.slow: dict[tuple[str, str], float] = {}  # (a, b) -> extra delay, seconds
        self.drop_rate = 0.0
        self.connected: dict[tuple[str, str], int] = {}  # sorted pair -> connection number
        self.gen: dict[tuple[str, str], int] = {}
        self.last: dict[tuple[str, str], float] = {}
        self.rngs: dict[tuple[str, str], random.Random] = {}
        self.doomed: set[tuple[str, str]] = set()
        self.heard: dict[tuple[str, str], float] = {}  # (dst, src) -> when dst last heard src
        self.transfer_asked: dict[str, float] = {}  # node -> when it last got a timeout_now
        self.peers: dict[str, TCPNode] = {}

    @staticmethod
    def pair(a: str, b: str) -> tuple[str, str]:
        return (a, b) if a < b else (b, a)

    def rng(self, a: str, b: str) -> random.Random:
        r = self.rngs.get((a, b))
        if r is None:
            r = self.rngs[(a, b)] = sub_rng(self.world.seed, f"link {a}>{b}")
        return r

    def send(self, src: str, dst: str, message: Any) -> bool:
        p = self.pair(src, dst)
        if p not in self.connected:
            return False
        w = self.world
        w.stats["messages"] += 1
        if (src, dst) in self.cut:
            self.doom(p)
            return True
        r = self.rng(src, dst)
        if self.drop_rate and r.random() < self.drop_rate:
            w.stats["drop"] += 1
            w.note(f"net drop {src}>{dst} {message.get('type')}")
            self.reset(src, dst, "drop")
            return True
        delay = 0.0003 + r.random() * 0.0015 + self.slow.get((src, dst), 0.0) * r.random()
        t = max(w.now + delay, self.last.get((src, dst), 0.0))
        self.last[(src, dst)] = t
        blob = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        w.at(t, f"net {src}>{dst}", self.deliver, src, dst, self.gen.get(p, 0), blob)
        return True

    def deliver(self, src: str, dst: str, gen: int, blob: bytes) -> None:
        if self.gen.get(self.pair(src, dst), 0) != gen:
            return
        node = self.world.nodes_by_addr[dst]
        node.run(self._receive, node, src, gen, blob, name=f"net {src}>{dst}")

    def _receive(self, node: SimNode, src: str, gen: int, blob: bytes) -> None:
        if self.gen.get(self.pair(src, node.addr), 0) != gen or node.transport is None:
            return
        self.heard[(node.addr, src)] = self.world.now
        message = pickle.loads(blob)
        if message.get("type") == "timeout_now":
            self.transfer_asked[node.addr] = self.world.now
        peer = self.peers.get(src)
        if peer is None:  # one TCPNode per address: building one per message cost 5% of a run
            peer = self.peers[src] = TCPNode(src)
        node.transport._onMessageReceived(peer, message)

    def doom(self, p: tuple[str, str]) -> None:
        """A direction is cut: the connection dies once the connection timeout has passed."""
        if p in self.doomed:
            return
        self.doomed.add(p)
        gen = self.gen.get(p, 0)
        self.world.after(CONNECTION_TIMEOUT, f"conn {p[0]}-{p[1]}", self._doomed, p, gen)

    def _doomed(self, p: tuple[str, str], gen: int) -> None:
        self.doomed.discard(p)
        if self.gen.get(p, 0) == gen and ((p[0], p[1]) in self.cut or (p[1], p[0]) in self.cut):
            self.reset(p[0], p[1], "timeout")

    def reset(self, a: str, b: str, why: str) -> None:
        """The connection between a and b is closed: what was in flight is lost."""
        p = self.pair(a, b)
        self.gen[p] = self.gen.get(p, 0) + 1
        if p in self.connected:
            del self.connected[p]
            self.world.note(f"conn down {p[0]}-{p[1]} {why}")
            for x, y in (p, (p[1], p[0])):
                node = self.world.nodes_by_addr[x]
                if node.alive and node.transport is not None and y in node.transport.peers:
                    node.transport._onNodeDisconnected(TCPNode(y))
        self.world.after(CONNECTION_RETRY, f"conn {p[0]}-{p[1]}", self.reconsider, p[0], p[1])

    def reconsider(self, a: str, b: str) -> None:
        """Open the connection if both ends run, know each other and both directions work."""
        p = self.pair(a, b)
        if p in self.connected:
            return
        na, nb = self.world.nodes_by_addr[p[0]], self.world.nodes_by_addr[p[1]]
        if not (na.alive and nb.alive and na.transport and nb.transport):
            return
        if p[1] not in na.transport.peers and p[0] not in nb.transport.peers:
            return
        if (p[0], p[1]) in self.cut or (p[1], p[0]) in self.cut:
            return
        self.gen[p] = self.gen.get(p, 0) + 1
        self.connected[p] = self.gen[p]
        self.world.note(f"conn up {p[0]}-{p[1]}")
        for x, y in (p, (p[1], p[0])):
            node = self.world.nodes_by_addr[x]
            if y in node.transport.peers:  # type: ignore[union-attr]
                node.transport._onNodeConnected(TCPNode(y))  # type: ignore[union-attr]

    def reconsider_all(self) -> None:
        addrs = sorted(self.world.nodes_by_addr)
        for i, a in enumerate(addrs):
            for b in addrs[i + 1 :]:
                self.reconsider(a, b)

    def node_down(self, addr: str, *, at_once: bool) -> None:
        for p in sorted(self.connected):
            if addr in p:
                if at_once:
                    self.reset(p[0], p[1], "peer died")
                else:  # a power loss: the peer notices by the connection timeout
                    gen = self.gen.get(p, 0)
                    self.world.after(CONNECTION_TIMEOUT, f"conn {p[0]}-{p[1]}", self._gone, p, gen)

    def _gone(self, p: tuple[str, str], gen: int) -> None:
        if self.gen.get(p, 0) == gen:
            self.reset(p[0], p[1], "timeout")


class SimNode:
    """One controller node: a process (its Raft fork and controller) on a disk of its own."""

    def __init__(self, world: World, index: int, addr: str, partners: list[str]) -> None:
        self.world = world
        self.index = index
        self.addr = addr
        self.tick_name, self.ctl_name = f"tick {addr}", f"ctl {addr}"  # built once, not per tick
        self.partners = partners
        self.disk = Disk()
        self.generation = 0
        self.alive = False
        self.busy_until = 0.0
        self.debt = 0.0
        self._bg = 0
        self.sync: ControllerSyncObj | None = None
        self.transport: SimTransport | None = None
        self.ctl: Any = None
        self.tick_due: float | None = None
        self.rng = sub_rng(world.seed, f"node {addr}")
        self.applied: list[tuple[int, str]] = []  # (index, entry) this process applied, in order
        self._entry: str | None = None
        self.journal: Any = None
        self.member = True  # the operator runs it: a member, or joining (not stopped as removed)
        self.started_at = 0.0
        self.resumed_at = 0.0  # when a pause or a blocking fsync last ended

    # --- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        from mqctl.dsim.driver import Controller  # lazy: pysyncobj, the raft fork

        self.generation += 1
        self.alive = True
        self.busy_until = self.world.now
        self.started_at = self.resumed_at = self.world.now
        storage = SimStorage(self.disk, self._on_sync)
        conf = make_conf(None, secret=None)
        conf.journalFile = f"/sim/{self.addr}/raft.journal"
        conf.fullDumpFile = f"/sim/{self.addr}/raft.snapshot.json"  # never written: no compaction
        conf.journalFactory = SimJournalFactory(storage, self)
        conf.autoTick = False
        conf.clock = self.world.clock
        conf.random = random.Random(self.rng.random())
        conf.poller = NullPoller()
        conf.logCompactionMinEntries = 10**12
        conf.logCompactionMinTime = 10**12
        if self.world.mutation == "checkquorum-off":
            conf.leaderFallbackTimeout = 10**9
        self.transport = SimTransport(self)
        self.transport.peers = set(self.partners)
        self.applied = []
        self.ctl = Controller(self)
        with self.acting():
            self.sync = ControllerSyncObj(
                self.addr,
                list(self.partners),
                conf,
                self.world.initial_config,
                on_apply=self.ctl.on_apply,
                transport=self.transport,
            )
        self.ctl.attach(self.sync)
        if self.world.mutation == "prevote-off":  # a planted bug: every pre-vote round is won
            self.sync._SyncObj__preVoteWon = lambda: True  # type: ignore[attr-defined, unused-ignore]
        if self.world.mutation == "membership-changes-at-once":  # a planted bug: FORK.md change 28 undone
            sync = self.sync
            change = sync._SyncObj__changeCluster  # type: ignore[attr-defined]

            def at_once(request: Any) -> bool:
                sync._SyncObj__changeClusterIDx = None  # type: ignore[attr-defined]
                return bool(change(request))

            sync._SyncObj__changeCluster = at_once  # type: ignore[attr-defined]
        self._hook_entries(self.sync)
        self.tick_due = None
        self.schedule_tick(self.world.now + self.rng.random() * TICK)
        self.world.after(
            CONTROLLER_TICK * self.rng.random(), f"ctl {self.addr}", self._ctl_tick, self.generation
        )
        # a new process has no connection: its peers' old ones (to the process that died) are closed
        # as its new ones arrive
        for p in sorted(self.world.net.connected):
            if self.addr in p:
                self.world.net.reset(p[0], p[1], "restarted")
        self.world.net.reconsider_all()

    def _hook_entries(self, sync: ControllerSyncObj) -> None:
        """Keep each entry this node applies, and (a planted bug) apply some twice."""
        decide = sync._decide_entry
        node = self

        def hooked(entry_json: str) -> tuple[list[records.Record], dict[str, Any]]:
            node._entry = entry_json
            recs, answer = decide(entry_json)
            if (
                node.world.mutation == "record-applied-twice"
                and recs
                and isinstance(recs[-1], records.DecisionNoted)
                and node.rng.random() < 0.05
            ):
                recs = [*recs, recs[-1]]
            return recs, answer

        sync._decide_entry = hooked  # type: ignore[method-assign]

    def config(self) -> set[str]:
        """The members this node's Raft counts majorities of (itself included) now."""
        assert self.sync is not None
        return {self.addr, *self.sync.members()}

    def membership_entries(self, after: int) -> list[tuple[int, int]]:
        """(index, term) of the membership changes in this node's journal after index `after`."""
        journal = self.journal
        first = journal.entry_index(0)
        out = []
        for k in range(max(after + 1 - first, 0), len(journal)):
            entry = journal[k]
            if entry[0][:1] == bytes((MEMBERSHIP_COMMAND,)):
                out.append((entry[1], entry[2]))
        return out

    def stop(self) -> None:
        """The operator stops a node that is no longer a member (mqctl quorum remove, then stop it)."""
        self.member = False
        if self.alive:
            self.world.note(f"stop {self.addr} (not a member)")
            self.crash(power_loss=False, torn=False, counted=False)

    def wipe(self) -> None:
        """A new, empty data directory (docs/operations.md: replace a node's disk)."""
        assert not self.alive
        self.disk = Disk()
        self.world.stats["fresh disk"] += 1
        self.world.note(f"fresh disk {self.addr}")
        self.world.checker.forget(self.addr)

    def crash(self, power_loss: bool, torn: bool, *, counted: bool = True) -> None:
        if counted:
            self.world.stats["power loss" if power_loss else "crash"] += 1
        if torn:
            self.world.stats["torn write"] += 1
        self.alive = False
        self.generation += 1
        self.sync = None
        self.transport = None
        self.ctl = None
        if power_loss:
            lost = self.disk.power_loss(self.rng.random() if torn else None)
            torn_text = ", torn" if torn else ""
            self.world.note(f"power loss {self.addr} ({lost} unsynced bytes dropped{torn_text})")
        else:
            self.disk.crash()
            if counted:
                self.world.note(f"crash {self.addr}")
        self.world.net.node_down(self.addr, at_once=not power_loss)

    def pause(self, seconds: float) -> None:
        self.world.stats["pause"] += 1
        self.world.note(f"pause {self.addr} {seconds:.3f}s")
        self.busy_until = self.resumed_at = max(self.busy_until, self.world.now + seconds)
        if seconds > CONNECTION_TIMEOUT:
            self.world.net.node_down(self.addr, at_once=False)

    # --- running -----------------------------------------------------------------------------

    def _on_sync(self, path: str) -> None:
        if not self._bg:
            self.debt += self.world.disk_latency(self)

    @contextlib.contextmanager
    def background(self) -> Iterator[None]:
        self._bg += 1
        try:
            yield
        finally:
            self._bg -= 1

    @contextlib.contextmanager
    def acting(self) -> Iterator[None]:
        """Run node code: blocking fsyncs hold the node for their latency afterwards."""
        self.debt = 0.0
        self.world.acting = self
        try:
            yield
        finally:
            self.world.acting = None
            if self.debt:
                self.busy_until = self.resumed_at = max(self.busy_until, self.world.now + self.debt)
                self.debt = 0.0

    def run(self, fn: Callable[..., None], *args: Any, name: str) -> None:
        """Run `fn` on this node now, or when it is free (a pause, a blocking fsync)."""
        if not self.alive:
            return
        w = self.world
        if w.now < self.busy_until:
            w.at(self.busy_until, name, self._run_gen, self.generation, fn, args, name)
            return
        # acting(), inlined: this runs for every tick and message (bench/bench_dsim.py)
        self.debt = 0.0
        w.acting = self
        try:
            fn(*args)
        except Violation:
            raise
        except Exception as exc:
            where = traceback.extract_tb(exc.__traceback__)[-1]
            raise Violation(
                f"node {self.addr} raised {type(exc).__name__}: {exc} "
                f"({where.filename.rsplit('/', 1)[-1]}:{where.lineno} {where.name})"
            ) from exc
        finally:
            w.acting = None
            if self.debt:
                self.busy_until = self.resumed_at = max(self.busy_until, w.now + self.debt)
                self.debt = 0.0
        w.checker.after_step(self)  # World.after_step, inlined: after every tick and message

    def _run_gen(self, gen: int, fn: Callable[..., None], args: tuple[Any, ...], name: str) -> None:
        if gen == self.generation:
            self.run(fn, *args, name=name)

    def schedule_tick(self, t: float) -> None:
        if self.tick_due is not None and self.tick_due <= t:
            return
        self.tick_due = t
        self.world.at(t, self.tick_name, self._tick_event, self.generation, t)

    def wake(self) -> None:
        if self.alive:
            self.schedule_tick(self.world.now)

    def _tick_event(self, gen: int, t: float) -> None:
        if gen != self.generation or self.tick_due != t:
            return
        self.tick_due = None
        self.run(self._tick, name=self.tick_name)
        if self.alive and gen == self.generation:
            self.schedule_tick(max(self.world.now, self.busy_until) + TICK)

    def _tick(self) -> None:
        assert self.sync is not None
        self.sync.doTick(0.0)

    def _ctl_tick(self, gen: int) -> None:
        if gen != self.generation:
            return
        self.run(self.ctl.tick, name=self.ctl_name)
        if gen == self.generation:
            self.world.after(CONTROLLER_TICK, self.ctl_name, self._ctl_tick, gen)


class World:
    """A run: nodes, network, disks, clients and faults from one seed."""

    def __init__(
        self,
        seed: int,
        *,
        nodes: int = 3,
        brokers: int = 9,
        replicas: int = 3,
        faults: bool = True,
        membership: bool = True,
        mutation: str | None = None,
        trace_keep: int = 400,
        full_trace: bool = False,
    ) -> None:
        if mutation is not None and mutation not in MUTATIONS:
            raise ValueError(f"unknown mutation {mutation!r}; known: {', '.join(MUTATIONS)}")
        self.seed = seed
        self.mutation = mutation
        self.now = 0.0
        self._heap: list[tuple[float, str, int, Callable[..., object], tuple[Any, ...]]] = []
        self._counters: dict[str, int] = {}
        self.acting: SimNode | None = None
        self.stats: dict[str, int] = dict.fromkeys(
            (
                "messages",
                "drop",
                "crash",
                "power loss",
                "torn write",
                "pause",
                "partition",
                "one-way partition",
                "slow link",
                "slow disk",
                "stalled disk",
                "transfer",
                "quorum remove",
                "quorum add",
                "fresh disk",
                "quorum refused",
                "elections",
                "leader changes",
                "client calls",
                "acked writes",
                "reads",
                "heal",
            ),
            0,
        )
        self.trace_tail: deque[str] = deque(maxlen=trace_keep)
        self.full_trace: list[str] | None = [] if full_trace else None
        self._trace_hash = hashlib.sha256()
        self.initial_config = core.default_config(
            heartbeatTimeoutMillis=3000, scanNotActiveBrokerInterval=1000
        )
        self.disk_slow: dict[str, float] = {}
        self.disk_rng = sub_rng(seed, "disk")
        addrs = [f"127.0.0.1:{20000 + i}" for i in range(nodes)]
        self.nodes = [SimNode(self, i, a, [b for b in addrs if b != a]) for i, a in enumerate(addrs)]
        self.nodes_by_addr = {n.addr: n for n in self.nodes}
        self.net = Network(self)
        # lazy: pysyncobj, the raft fork
        from mqctl.dsim.check import Checker
        from mqctl.dsim.driver import Faults, Workload

        self.checker = Checker(self)
        self.workload = Workload(self, brokers=brokers, replicas=replicas)
        self.faults = Faults(self, membership=membership) if faults else None
        self.quorum_asked_at = -1e9  # when the operator last asked for a membership change

    # --- time ---------------------------------------------------------------------------------

    def clock(self) -> float:
        return self.now

    def now_ms(self) -> int:
        return EPOCH_MS + int(self.now * 1000)

    def at(self, t: float, name: str, fn: Callable[..., object], *args: Any) -> None:
        n = self._counters.get(name, 0) + 1
        self._counters[name] = n
        heapq.heappush(self._heap, (t, name, n, fn, args))

    def after(self, dt: float, name: str, fn: Callable[..., object], *args: Any) -> None:
        self.at(self.now + dt, name, fn, *args)

    def disk_latency(self, node: SimNode) -> float:
        base = 0.0002 + self.disk_rng.random() * 0.0008
        return base + self.disk_slow.get(node.addr, 0.0) * self.disk_rng.random()

    # --- trace --------------------------------------------------------------------------------

    def note(self, text: str) -> None:
        line = f"{self.now:10.4f} {text}"
        self.trace_tail.append(line)
        if self.full_trace is not None:
            self.full_trace.append(line)
        self._trace_hash.update(line.encode())
        self._trace_hash.update(b"\n")

    @property
    def trace_digest(self) -> str:
        return self._trace_hash.hexdigest()

    # --- running ------------------------------------------------------------------------------

    def after_step(self, node: SimNode) -> None:
        self.checker.after_step(node)

    def leader(self) -> SimNode | None:
        """The running leader of the highest term, if any."""
        leaders = [n for n in self.nodes if n.alive and n.sync is not None and n.sync.is_leader()]
        return max(leaders, key=lambda n: n.sync.term(), default=None)  # type: ignore[union-attr]

    def run(self, seconds: float, heal_at: float | None = None) -> None:
        """Run for `seconds` of simulated time: faults until `heal_at` (default: 3/4 of the run),
        then everything healed, and the liveness checks at the end."""
        heal_at = seconds * 0.75 if heal_at is None else heal_at

        elect = election.elect
        if self.mutation == "election-ignores-sync-state-set":  # a planted bug, for this run only
            election.elect = lambda sss, every, old, prefer, valid, live: elect(  # type: ignore[assignment]
                set(sss) | set(live), every, old, prefer, valid, live
            )
        try:
            self._run(seconds, heal_at)
        finally:
            election.elect = elect

    def _run(self, seconds: float, heal_at: float) -> None:
        for node in self.nodes:
            node.start()
        self.workload.start()
        if self.faults is not None:
            self.faults.start(heal_at)
        self.at(heal_at, "heal", self._heal)
        end = float(seconds)
        while self._heap:
            t, _, _, fn, args = self._heap[0]
            if t > end:
                break
            heapq.heappop(self._heap)
            self.now = t
            fn(*args)
        self.now = end
        self.checker.finish()

    def _heal(self) -> None:
        if self.faults is not None:
            self.faults.stop()
        self.net.cut.clear()
        self.net.slow.clear()
        self.net.drop_rate = 0.0
        self.disk_slow.clear()
        for node in self.nodes:
            if not node.alive and node.ctl is None and node.member:
                node.start()
        self.net.reconsider_all()
        self.note("healed")
        self.stats["heal"] += 1
        self.checker.healed_at = self.now
