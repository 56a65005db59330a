"""What runs on and against the simulated group: each node's controller (the decisions of
mqctl/controller/node.py, asynchronous instead of on threads), the brokers and admins that call
it, and the faults.

The controller here is node.py's logic without its threads: a write is decided once, on the
leader, against its view (the applied state plus its appended records), appended with the
leader's term (FORK.md, change 11) and answered when applied; a fresh read passes a barrier;
the leader's ticker triggers elections when masters' heartbeats expire, one entry for all the
broker sets due. Heartbeats stay in each node's memory (HeartbeatTable).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pysyncobj.config import FAIL_REASON

from mqctl import methods
from mqctl.controller import core, quorum, records
from mqctl.controller.leader_work import once_a_second
from mqctl.controller.liveness import HeartbeatTable
from mqctl.dsim.world import CONNECTION_TIMEOUT, sub_rng
from mqctl.errors import Code

if TYPE_CHECKING:
    from mqctl.controller.raftlog import ControllerSyncObj
    from mqctl.dsim.world import SimNode, World

Reply = Callable[[dict[str, Any]], None]
META_GROUP_ID = "groupId"


class Controller:
    """One node's controller (mqctl/controller/node.py's decisions)."""

    def __init__(self, node: SimNode) -> None:
        self.node = node
        self.world = node.world
        self.sync: ControllerSyncObj | None = None
        self.heartbeats = HeartbeatTable()
        self.view: core.ControllerState | None = None
        self.view_term = -1
        self.barrier_term = -1  # the term of a barrier in flight for the view
        self.caught_up_term = -1
        self.published = False
        self.publishing = False
        self.leader_since: int | None = None
        self.leader_term = -1
        self.pending: set[str] = set()
        self.last_trigger: dict[str, int] = {}
        self.last_scan = 0
        self.last_ctx: core.Context | None = None  # the Context of the last decision (the checker's)

    def attach(self, sync: ControllerSyncObj) -> None:
        self.sync = sync

    # --- the applied stream ---------------------------------------------------------------------

    def on_apply(self, state: core.ControllerState, applied: list[records.Record]) -> None:
        node = self.node
        assert node.sync is not None
        entry = node._entry or ""
        index = node.sync.applied_index
        node.applied.append((index, entry))
        self.world.checker.on_apply(node, index, entry, state, applied)
        self.pending |= {name for r in applied if isinstance(name := getattr(r, "broker_name", None), str)}

    # --- calls --------------------------------------------------------------------------------

    def call(self, method: str, request: dict[str, Any], reply: Reply) -> None:
        sync = self.sync
        assert sync is not None
        now = self.world.now_ms()
        on_leader = method in methods.WRITE_METHODS or method in methods.FRESH_READ_METHODS
        if on_leader and not sync.is_leader():
            reply(self.not_leader())
            return
        try:  # as ControllerNode.call: decoded once, here
            typed = core.decode(method, request)
        except core.Refusal as refusal:
            reply(core.refused(refusal).answer())
            return
        if isinstance(typed, quorum.ChangeQuorumRequest):
            self.change_quorum(typed, reply)
            return
        if isinstance(typed, core.Heartbeat):
            result = core.handle(sync.state, typed, core.Context(now_ms=now, live={}))
            if result.code == 0:
                self.heartbeats.on_heartbeat(typed, now)
            reply({"code": int(result.code)})
            return
        if method in methods.LOCAL_READ_METHODS:
            reply(self.answer(typed))
            return
        if method in methods.FRESH_READ_METHODS:
            term = sync.term()

            def read(_res: Any, err: Any) -> None:
                if (
                    err != FAIL_REASON.SUCCESS
                    or self.sync is None
                    or not sync.is_leader()
                    or sync.term() != term
                ):
                    reply({"code": int(Code.UNAVAILABLE), "remark": "read barrier not committed"})
                    return
                answer = self.answer(typed)
                answer["_applied_index"] = sync.applied_index
                answer["_ctx"] = self.context(self.names_of(typed))
                reply(answer)

            sync.read_barrier(read)  # shared with the reads around it, as node.py's
            return
        names = self.names_of(typed)

        def decide(state: core.ControllerState) -> core.Result:
            ctx = self.context(names)
            self.last_ctx = ctx
            return core.handle(state, typed, ctx)

        def replied(answer: dict[str, Any]) -> None:
            if isinstance(typed, core.RegisterBrokerRequest) and answer.get("code") == 0:
                self.heartbeats.on_registration(
                    typed, int(answer.get("broker_epoch", 0)), self.world.now_ms()
                )
            reply(answer)

        self.decide_and_commit(decide, replied, (method, request))

    def names_of(self, request: core.Request) -> list[str]:
        return core.broker_names_of(self.sync.state, request)  # type: ignore[union-attr]

    def context(self, names: list[str]) -> core.Context:
        live = {name: self.heartbeats.with_last(name) for name in names if name}
        return core.Context(now_ms=self.world.now_ms(), live=live, term=self.sync.term())  # type: ignore[union-attr]

    def answer(self, request: core.Request) -> dict[str, Any]:
        state = self.sync.state  # type: ignore[union-attr]
        return core.handle(state, request, self.context(self.names_of(request))).answer()

    def not_leader(self) -> dict[str, Any]:
        return {"code": int(Code.CONTROLLER_NOT_LEADER), "leader": self.sync.leader_id() or ""}  # type: ignore[union-attr]

    # --- one decision at a time, against the leader's view ----------------------------------------

    def decide_and_commit(
        self,
        decide: Callable[[core.ControllerState], core.Result],
        reply: Reply,
        what: tuple[str, dict[str, Any]] | None,
    ) -> None:
        sync = self.sync
        assert sync is not None
        if sync.halted:
            reply({"code": int(Code.SYSTEM_ERROR), "remark": sync.halted})
            return
        if not sync.is_leader():
            reply(self.not_leader())
            return
        term = sync.term()
        if self.view is None or self.view_term != term:
            self.view = None
            self.need_view(term)
            reply(
                {
                    "code": int(Code.UNAVAILABLE),
                    "remark": "the new leader has not applied the earlier entries",
                }
            )
            return
        view = self.view
        self.last_ctx = None
        result = decide(view)
        answer = result.answer()
        if not result.records:
            reply(answer)
            return
        try:
            for record in result.records:
                view.apply(record)
        except core.InconsistentRecord as exc:
            self.view = None
            reply({"code": int(Code.SYSTEM_ERROR), "remark": f"internal error: {exc}"})
            return
        entry = records.encode_entry(result.records)
        decision = self.world.checker.decided(self.node, term, entry, what, answer)

        def committed(_res: Any, error: Any) -> None:
            if error != FAIL_REASON.SUCCESS:
                self.view = None
                reply({"code": int(Code.UNAVAILABLE), "remark": f"not committed ({error})"})
                return
            assert self.node.sync is not None
            decision["index"] = self.node.sync.applied_index
            reply(answer | {"_index": self.node.sync.applied_index})

        leader_term = None if self.world.mutation == "skip-leader-term-check" else term
        sync.propose(entry, callback=committed, leader_term=leader_term)
        if self.world.faults is not None:
            self.world.faults.on_propose(self.node)

    def need_view(self, term: int) -> None:
        """A barrier of this term; once applied, the view is the applied state."""
        self.barrier(term, view=True)

    # --- the leader's ticker (node.py's _tick_loop, leader_work.py's LeaderWork) --------------------

    def tick(self) -> None:
        sync = self.sync
        if sync is None or not sync.is_ready():
            return
        term = sync.term()
        if self.caught_up_term != term:
            if sync.leader_id() is not None:
                self.catch_up(term)
            return
        if not self.published and not self.publishing:
            self.publish()
        if not sync.is_leader():
            self.leader_since = None
            return
        now = self.world.now_ms()
        if self.leader_since is None or self.leader_term != term:
            self.leader_since = now
            self.leader_term = term
            self.last_scan = 0
        self.leader_work(now)

    def catch_up(self, term: int) -> None:
        """A barrier of this term: once applied, everything committed before it is applied here."""
        self.barrier(term, view=False)

    def barrier(self, term: int, *, view: bool) -> None:
        """One barrier of ``term`` at a time (node_raft.py's catch-up barrier and the leader's view);
        with ``view``, it also makes the applied state the leader's view."""
        if self.barrier_term == term:
            return
        self.barrier_term = term
        sync = self.sync
        assert sync is not None

        def done(_res: Any, err: Any) -> None:
            self.barrier_term = -1
            if err != FAIL_REASON.SUCCESS or self.sync is not sync or sync.term() != term:
                return
            if view:
                if not sync.is_leader():
                    return
                self.view = sync.state.decision_view()
                self.view_term = term
            self.caught_up_term = term

        sync.barrier(callback=done)

    def publish(self) -> None:
        sync = self.sync
        assert sync is not None
        key = "node/" + self.node.addr
        mine = {"grpc": self.node.addr, "maxFeatureLevel": records.MAX_FEATURE_LEVEL}
        if sync.state.meta.get(key) == mine:
            self.published = True
            return
        self.publishing = True

        def done(_res: Any, err: Any) -> None:
            self.publishing = False
            self.published = err == FAIL_REASON.SUCCESS

        sync.propose(records.encode_entry([records.MetaSet(key, mine)]), callback=done)

    def leader_work(self, now: int) -> None:
        sync = self.sync
        assert sync is not None
        state = sync.state
        if not state.meta.get(META_GROUP_ID):
            if self.view is None or self.view_term != sync.term():
                self.need_view(sync.term())
                return

            def group(st: core.ControllerState) -> core.Result:
                if st.meta.get(META_GROUP_ID):
                    return core.Result(Code.SUCCESS, "", {}, [])
                return core.Result(
                    Code.SUCCESS,
                    "",
                    {},
                    [
                        records.MetaSet(META_GROUP_ID, f"group-{self.world.seed}"),
                        records.FeatureLevelSet(records.MAX_FEATURE_LEVEL),
                    ],
                )

            self.decide_and_commit(group, lambda _a: None, None)
            return
        timeout_ms = int(state.config.get("heartbeatTimeoutMillis", 3000))
        scan_ms = int(state.config.get("scanNotActiveBrokerInterval", 1000))
        if self.leader_since is None or now - self.leader_since < timeout_ms:
            return
        names = self.pending | self.heartbeats.take_changed(now)
        self.pending = set()
        if now - self.last_scan >= scan_ms:
            self.heartbeats.expired(now)
            self.last_scan = now
            names = set(state.broker_sets)
        if names:
            self.elect_where_needed(sorted(names), now)

    def elect_where_needed(self, names: list[str], now: int) -> None:
        sync = self.sync
        assert sync is not None
        ctx = core.Context(now_ms=now, live={name: self.heartbeats.snapshot(name) for name in names})
        due = core.elections_due(sync.state, names, ctx)
        if not due:
            return
        self.pending.update(name for _, name in due)
        due = once_a_second(due, self.last_trigger, now)
        if not due:
            return

        def decide(state: core.ControllerState) -> core.Result:
            return core.elect_each(state, due, lambda name: self.context([name]))[0]

        self.world.stats["elections"] += 1
        self.decide_and_commit(decide, lambda _a: None, ("_elect", {"due": due}))

    # --- quorum -------------------------------------------------------------------------------

    def change_quorum(self, request: quorum.ChangeQuorumRequest, reply: Reply) -> None:
        """node.py's _change_quorum: its rules (mqctl/controller/quorum.py), then the Raft layer's."""
        sync = self.sync
        assert sync is not None
        action, target = request.action, request.raft_address
        if not sync.is_leader():
            reply(self.not_leader())
            return
        me = self.node.addr
        refused = quorum.membership_refusal(action, target, me, sync.members(), sync.active_members())
        if refused is not None:
            reply(refused)
            return

        def done(_res: Any, err: Any) -> None:
            reply(
                {
                    "code": 0 if err == FAIL_REASON.SUCCESS else int(Code.SYSTEM_ERROR),
                    "remark": f"{action} {target}: {err}",
                }
            )

        sync.change_membership(action, target or None, done)


class Client:
    """Calls a controller node the way mqctl's clients do: to the leader it believes in, again at
    the leader named in a refusal or another node, until an answer or its deadline. The network
    between clients and nodes is not faulted (the Raft network is)."""

    def __init__(self, world: World, name: str) -> None:
        self.world = world
        self.name = name
        self.rng = sub_rng(world.seed, f"client {name}")
        self.leader = world.nodes[0].addr

    def call(
        self,
        method: str,
        request: dict[str, Any],
        done: Callable[[dict[str, Any]], None] | None = None,
        *,
        to: str | None = None,
        deadline: float = 10.0,
    ) -> None:
        w = self.world
        op = w.checker.invoke(self.name, method, request)
        end = w.now + deadline
        w.stats["client calls"] += 1

        def attempt(target: str) -> None:
            node = w.nodes_by_addr[target]
            if not node.alive or node.ctl is None or w.now >= end:
                retry(None)
                return
            gen = node.generation

            def on_node() -> None:
                if node.ctl is None or node.generation != gen:
                    return

                def reply(answer: dict[str, Any]) -> None:
                    w.after(0.0005 + self.rng.random() * 0.001, f"client {self.name}", answered, answer)

                node.ctl.call(method, request, reply)

            node.run(on_node, name=f"client {self.name}>{target}")

        def answered(answer: dict[str, Any]) -> None:
            code = answer.get("code")
            if code in (int(Code.CONTROLLER_NOT_LEADER), int(Code.UNAVAILABLE)) and w.now < end:
                retry(answer.get("leader") or None)
                return
            w.checker.answered(op, answer)
            if done is not None:
                done(answer)

        def retry(hint: str | None) -> None:
            if w.now >= end:
                w.checker.answered(op, None)
                if done is not None:
                    done({"code": -1, "remark": "timed out"})
                return
            if hint and hint in w.nodes_by_addr:
                self.leader = hint
            else:
                self.leader = w.nodes[self.rng.randrange(len(w.nodes))].addr
            w.after(0.03 + self.rng.random() * 0.05, f"client {self.name}", attempt, self.leader)

        target = to or self.leader
        w.after(0.0005 + self.rng.random() * 0.001, f"client {self.name}", attempt, target)


class Broker:
    """A broker of a broker set: gets an id, registers, heartbeats every controller node each
    second, learns its role, as master widens its SyncStateSet, sometimes goes silent (its lease
    ends: the leader elects) and comes back (registers again)."""

    def __init__(self, world: World, cluster: str, name: str, seq: int) -> None:
        self.world = world
        self.cluster, self.name, self.seq = cluster, name, seq
        self.addr = f"127.0.0.1:{30000 + hash_name(name) * 10 + seq}"
        self.client = Client(world, f"{name}#{seq}")
        self.rng = sub_rng(world.seed, f"broker {name}#{seq}")
        self.broker_id: int | None = None
        self.broker_epoch = 0
        self.epoch = 0  # the last masterEpoch this broker holds data of
        self.max_offset = 0
        self.silent_until = 0.0
        self.busy = False
        self.role: dict[str, Any] = {}

    def start(self) -> None:
        self.world.after(self.rng.random() * 2, f"broker {self.client.name}", self.step)

    def step(self) -> None:
        w = self.world
        w.after(1.0, f"broker {self.client.name}", self.step)
        if w.now < self.silent_until or self.busy:
            return
        if self.broker_id is None or self.broker_epoch == 0:
            self.register()
            return
        if self.rng.random() < w.workload.silence_rate:
            self.silent_until = w.now + 2 + self.rng.random() * 8
            self.broker_epoch = 0  # registers again when it comes back
            w.workload.stats["broker silent"] += 1
            return
        if self.role.get("master_broker_id") == self.broker_id:
            self.max_offset += self.rng.randrange(1, 1000)
        for node in w.nodes:
            if node.alive:
                self.heartbeat(node.addr)
        self.busy = True
        self.client.call("GetReplicaInfo", {"broker_name": self.name}, self.learned)

    def heartbeat(self, target: str) -> None:
        w = self.world
        node = w.nodes_by_addr[target]
        request = {
            "cluster_name": self.cluster,
            "broker_name": self.name,
            "broker_id": self.broker_id,
            "broker_addr": self.addr,
            "epoch": self.epoch,
            "max_offset": self.max_offset,
            "confirm_offset": self.max_offset,
            "heartbeat_timeout_mills": 3000,
            "broker_epoch": self.broker_epoch,
        }

        w.after(0.0005, f"hb {self.client.name}", self._beat, node, request)

    def _beat(self, node: SimNode, request: dict[str, Any]) -> None:
        # a heartbeat touches no Raft state: it skips the per-step checks (node.run) unless the node
        # is paused, when it waits like anything else
        if not node.alive or node.ctl is None:
            return
        if self.world.now < node.busy_until:
            node.run(
                lambda: node.ctl.call("Heartbeat", request, _ignore) if node.ctl is not None else None,
                name=f"hb {self.client.name}",
            )
            return
        node.ctl.call("Heartbeat", request, _ignore)

    def register(self) -> None:
        self.busy = True

        def registered(answer: dict[str, Any]) -> None:
            self.busy = False
            if answer.get("code") == 0:
                self.broker_epoch = int(answer.get("broker_epoch", 0))
                if answer.get("master_broker_id") == self.broker_id:
                    self.epoch = int(answer.get("master_epoch", self.epoch))

        def applied(answer: dict[str, Any], nid: int) -> None:
            if answer.get("code") != 0:
                self.busy = False
                return
            self.broker_id = nid
            self.client.call(
                "RegisterBroker",
                {
                    "cluster_name": self.cluster,
                    "broker_name": self.name,
                    "broker_id": nid,
                    "broker_address": self.addr,
                    "epoch": self.epoch,
                    "max_offset": self.max_offset,
                    "confirm_offset": self.max_offset,
                    "heartbeat_timeout_mills": 3000,
                },
                registered,
            )

        def next_id(answer: dict[str, Any]) -> None:
            if answer.get("code") != 0:
                self.busy = False
                return
            nid = int(answer["next_broker_id"])
            self.client.call(
                "ApplyBrokerId",
                {
                    "cluster_name": self.cluster,
                    "broker_name": self.name,
                    "applied_broker_id": nid,
                    "register_check_code": f"{self.addr};{self.seq}",
                },
                lambda a: applied(a, nid),
            )

        if self.broker_id is not None:
            applied({"code": 0}, self.broker_id)
            return
        self.client.call("GetNextBrokerId", {"cluster_name": self.cluster, "broker_name": self.name}, next_id)

    def learned(self, answer: dict[str, Any]) -> None:
        self.busy = False
        if answer.get("code") != 0:
            return
        self.role = answer
        master = answer.get("master_broker_id")
        w = self.world
        if master == self.broker_id:
            self.epoch = int(answer.get("master_epoch", self.epoch))
            sss = answer.get("sync_state_set") or {}
            current = set(sss.get("sync_state_set") or [])
            # the replicas in sync: registered, beating, and not lagging behind (a slave lags now and
            # then: the master shrinks its SyncStateSet, as RocketMQ's haMaxTimeSlaveNotCatchup does)
            wanted = {
                b.broker_id
                for b in w.workload.sets[self.name]
                if b.broker_id is not None
                and b.broker_epoch
                and w.now >= b.silent_until
                and self.rng.random() >= 0.25
            }
            wanted.add(self.broker_id)  # type: ignore[arg-type]  # the master: registered
            if wanted != current and self.rng.random() < (0.2 if len(wanted) > len(current) else 0.7):
                self.client.call(
                    "AlterSyncStateSet",
                    {
                        "cluster_name": self.cluster,
                        "broker_name": self.name,
                        "master_broker_id": self.broker_id,
                        "master_epoch": self.epoch,
                        "sync_state_set_epoch": int(sss.get("sync_state_set_epoch", 0)),
                        "new_sync_state_set": sorted(wanted),
                        "broker_epoch": self.broker_epoch,
                    },
                )
        elif master is None and self.rng.random() < 0.3:
            self.client.call(
                "ElectMaster",
                {
                    "cluster_name": self.cluster,
                    "broker_name": self.name,
                    "broker_id": self.broker_id,
                    "broker_epoch": self.broker_epoch,
                },
            )
        elif master is not None:
            self.epoch = max(self.epoch, int(answer.get("master_epoch", 0)) - 0)


def _ignore(_answer: dict[str, Any]) -> None:
    pass


def hash_name(name: str) -> int:
    return sum(name.encode()) % 1000


class Workload:
    """Brokers, and an admin that switches over, pauses failover, updates config, reads and
    changes the quorum."""

    def __init__(self, world: World, *, brokers: int, replicas: int) -> None:
        self.world = world
        self.rng = sub_rng(world.seed, "admin")
        self.admin = Client(world, "admin")
        self.sets: dict[str, list[Broker]] = {}
        self.silence_rate = 0.03
        self.stats: dict[str, int] = {"broker silent": 0, "admin": 0}
        n_sets = brokers // replicas
        for s in range(n_sets):
            name = f"broker-{s}"
            self.sets[name] = [Broker(world, "DefaultCluster", name, r) for r in range(replicas)]

    def start(self) -> None:
        for brokers in self.sets.values():
            for b in brokers:
                b.start()
        self.world.after(3.0, "admin", self.admin_step)

    def admin_step(self) -> None:
        w = self.world
        w.after(0.5 + self.rng.random() * 2.5, "admin", self.admin_step)
        if not self.sets:
            return
        name = self.rng.choice(sorted(self.sets))
        kind = self.rng.random()
        self.stats["admin"] += 1
        if kind < 0.25:
            ids = [b.broker_id for b in self.sets[name] if b.broker_id is not None]
            req: dict[str, Any] = {"broker_name": name}
            if ids and self.rng.random() < 0.5:
                req["broker_id"] = self.rng.choice(ids)
            self.admin.call("Switchover", req)
        elif kind < 0.35:
            self.admin.call(
                "PauseFailover", {"broker_name": name, "paused": self.rng.random() < 0.5, "reason": "sim"}
            )
        elif kind < 0.45:
            self.admin.call(
                "UpdateConfig", {"config": {"notifyBrokerRoleChanged": self.rng.choice(["true", "false"])}}
            )
        elif kind < 0.75:
            self.admin.call("GetSyncStateData", {"broker_names": [name]})
        elif kind < 0.85:
            ids = [b.broker_id for b in self.sets[name] if b.broker_id is not None]
            if ids:
                self.admin.call(
                    "ElectMaster",
                    {
                        "cluster_name": "DefaultCluster",
                        "broker_name": name,
                        "broker_id": self.rng.choice(ids),
                        "designate_elect": True,
                    },
                )
        elif kind < 0.95:
            self.admin.call("GetReplicaInfo", {"broker_name": name})
        elif w.faults is not None and w.faults.active:
            w.stats["transfer"] += 1
            self.admin.call("ChangeQuorum", {"action": "transfer"})


class Faults:
    """Faults at random times until the heal: crashes and power losses (torn writes among them),
    pauses, partitions (symmetric and one-way), message drops (connection resets), slow links,
    slow and stalled disks. At most a minority of nodes is down at once, so that the liveness
    check after the heal means something; a whole-group power loss now and then all the same."""

    def __init__(self, world: World, *, membership: bool = True) -> None:
        self.world = world
        self.rng = sub_rng(world.seed, "faults")
        self.active = False
        self.heal_at = 0.0
        self.operator = Operator(world) if membership else None

    def start(self, heal_at: float) -> None:
        self.active = True
        self.heal_at = heal_at
        self.world.after(1.0 + self.rng.random() * 2, "faults", self.step)
        if self.operator is not None:
            self.operator.start()

    def stop(self) -> None:
        self.active = False

    def step(self) -> None:
        w = self.world
        if not self.active:
            return
        w.after(0.2 + self.rng.random() * 1.5, "faults", self.step)
        r = self.rng.random()
        nodes = w.nodes
        addrs = [n.addr for n in nodes]
        # a minority of the members (the nodes the operator runs) at most is down at once
        members = [n for n in nodes if n.member]
        down = [n for n in members if not n.alive]
        minority = (len(members) - 1) // 2
        pick = self.rng.choice(nodes)
        if r < 0.14:
            if pick.alive and len(down) < minority:
                power = self.rng.random() < 0.5
                pick.crash(power_loss=power, torn=power and self.rng.random() < 0.5)
                w.after(0.2 + self.rng.random() * 3, "faults", self.restart, pick)
        elif r < 0.16:
            if not down and self.rng.random() < 0.5:  # the whole group loses power
                w.note("power loss of every node")
                for n in members:
                    n.crash(power_loss=True, torn=self.rng.random() < 0.3)
                for n in members:
                    w.after(0.5 + self.rng.random() * 2, "faults", self.restart, n)
        elif r < 0.26:
            if pick.alive:
                pick.pause(self.rng.choice([0.05, 0.2, 0.5, 1.5, 3.0]) * self.rng.random() + 0.01)
        elif r < 0.40:
            a = pick.addr
            others = [x for x in addrs if x != a]
            group = (
                {a} | set(self.rng.sample(others, self.rng.randrange(0, minority))) if minority > 0 else {a}
            )
            w.stats["partition"] += 1
            w.note(f"partition {sorted(group)} | rest")
            for x in group:
                for y in addrs:
                    if y not in group:
                        w.net.cut.add((x, y))
                        w.net.cut.add((y, x))
                        w.net.doom(w.net.pair(x, y))
            w.after(0.3 + self.rng.random() * 4, "faults", self.unpartition, group)
        elif r < 0.50:
            a, b = self.rng.sample(addrs, 2)
            w.stats["one-way partition"] += 1
            w.note(f"one-way partition {a} -x-> {b}")
            w.net.cut.add((a, b))
            w.net.doom(w.net.pair(a, b))
            w.after(0.3 + self.rng.random() * 4, "faults", self.uncut, a, b)
        elif r < 0.62:
            w.net.drop_rate = self.rng.choice([0.001, 0.01, 0.05])
            w.note(f"drop rate {w.net.drop_rate}")
            w.after(0.5 + self.rng.random() * 3, "faults", self.no_drops)
        elif r < 0.74:
            a, b = self.rng.sample(addrs, 2)
            w.stats["slow link"] += 1
            w.net.slow[(a, b)] = self.rng.choice([0.02, 0.1, 0.4])
            w.note(f"slow link {a}>{b} {w.net.slow[(a, b)]}")
            w.after(0.5 + self.rng.random() * 3, "faults", w.net.slow.pop, (a, b), None)
        elif r < 0.80:  # every disk slow at once (shared storage, a busy host)
            w.stats["slow disk"] += 1
            slow = self.rng.choice([0.05, 0.1, 0.3])
            for n in nodes:
                w.disk_slow[n.addr] = slow
            w.note(f"slow disks everywhere {slow}")
            w.after(0.5 + self.rng.random() * 2, "faults", w.disk_slow.clear)
        elif r < 0.88:
            stalled = self.rng.random() < 0.2
            w.stats["stalled disk" if stalled else "slow disk"] += 1
            w.disk_slow[pick.addr] = 2.0 if stalled else self.rng.choice([0.02, 0.1, 0.3])
            w.note(f"{'stalled' if stalled else 'slow'} disk {pick.addr}")
            w.after(0.5 + self.rng.random() * 3, "faults", w.disk_slow.pop, pick.addr, None)
        else:
            if pick.alive and pick.ctl is not None and pick.sync is not None and pick.sync.is_leader():
                w.stats["transfer"] += 1
                w.note(f"transfer from {pick.addr}")
                pick.run(
                    lambda: (
                        pick.ctl.change_quorum(quorum.ChangeQuorumRequest("transfer"), lambda _a: None)
                        if pick.ctl is not None
                        else None
                    ),
                    name="faults",
                )

    # --- faults aimed at the moments where a bug would show (FoundationDB's "buggify") ----------------

    def on_ack(self) -> None:
        """A write was just acknowledged: now and then every node loses power before the followers'
        and the leader's next fsyncs."""
        w = self.world
        if not self.active or any(not n.alive for n in w.nodes if n.member):
            return
        # likelier while a disk is slow: that is when unsynced entries stay unsynced for long
        if self.rng.random() >= (0.3 if w.disk_slow else 0.003):
            return
        w.after(self.rng.random() * 0.003, "faults", self.group_power_loss)

    def group_power_loss(self) -> None:
        w = self.world
        members = [n for n in w.nodes if n.member]
        if any(not n.alive for n in members):
            return
        w.note("power loss of every node")
        for n in members:
            n.crash(power_loss=True, torn=self.rng.random() < 0.3)
        for n in members:
            w.after(0.3 + self.rng.random() * 1.5, "faults", self.restart, n)

    def on_election(self, node: SimNode) -> None:
        """A node started an election: now and then a voter loses power and comes back at once."""
        w = self.world
        if not self.active or self.rng.random() >= 0.3:
            return
        voter = w.nodes_by_addr[self.rng.choice(sorted(node.partners))]

        def kill() -> None:
            if voter.alive:
                voter.crash(power_loss=True, torn=False)
                w.after(0.01 + self.rng.random() * 0.1, "faults", self.restart, voter)

        w.after(self.rng.random() * 0.05, "faults", kill)

    def on_propose(self, node: SimNode) -> None:
        """A leader just appended a decision: now and then it is paused long enough to be replaced."""
        if self.active and self.rng.random() < 0.02:
            node.pause(0.3 + self.rng.random() * 1.2)

    def restart(self, node: SimNode) -> None:
        if not node.alive and node.member:  # not one the operator has stopped meanwhile
            node.start()
            self.world.note(f"restart {node.addr}")

    def unpartition(self, group: set[str]) -> None:
        w = self.world
        for x in group:
            for y in w.nodes_by_addr:
                if y not in group:
                    w.net.cut.discard((x, y))
                    w.net.cut.discard((y, x))
        w.note(f"partition {sorted(group)} healed")
        w.net.reconsider_all()

    def uncut(self, a: str, b: str) -> None:
        self.world.net.cut.discard((a, b))
        self.world.net.reconsider_all()

    def no_drops(self) -> None:
        self.world.net.drop_rate = 0.0


class Operator:
    """An operator changing the membership while the faults go on, as docs/operations.md says:
    `quorum remove` a member (the leader too, now and then: the rules refuse it), stop it once the
    group's configuration no longer has it; start a node (on its old disk or an empty one) naming
    the members, then `quorum add` it. Each change goes through ChangeQuorum on the leader (the
    rules of mqctl/controller/quorum.py, then the fork's change_membership). Now and then a second
    admin asks for another change at the same moment: the group must refuse one of the two."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.rng = sub_rng(world.seed, "operator")
        self.client = Client(world, "operator")
        self.other = Client(world, "operator2")
        self.busy = 0
        self.smallest = (len(world.nodes) + 1) // 2  # 2 of 3, 3 of 5

    def start(self) -> None:
        self.world.after(4.0 + self.rng.random() * 6, "operator", self.step)

    def step(self) -> None:
        w = self.world
        faults = w.faults
        active = faults is not None and faults.active
        w.after(3.0 + self.rng.random() * 6 if active else 2.0, "operator", self.step)
        leader = w.leader()
        if leader is None or self.busy or leader.sync is None:
            return
        if leader.membership_entries(leader.sync.raftCommitIndex):
            return  # a change is not committed yet: the configuration is not known
        config = leader.config()
        for n in w.nodes:  # tidy up: stop the removed, run the members (also after the heal)
            if n.addr not in config and n.alive:
                n.stop()
            elif n.addr in config and not n.member:
                n.member = True
                if not n.alive:
                    n.start()
                    w.note(f"start {n.addr} (a member again)")
        if not active:
            return
        outside = [n for n in w.nodes if n.addr not in config and not n.alive]
        r = self.rng.random()
        first = ""
        if outside and (len(config) <= self.smallest or r < 0.6):
            first = self.rng.choice(outside).addr
            self.add(w.nodes_by_addr[first], config, leader.addr)
        elif len(config) > self.smallest:
            first = self.rng.choice(sorted(config))
            self.remove(first, leader.addr)
        if self.rng.random() < 0.2:  # a second admin at the same moment, another change
            spare = [n for n in outside if n.addr != first]
            if spare and self.rng.random() < 0.5:
                self.add(self.rng.choice(spare), config, leader.addr, client=self.other)
            elif len(config) > 1:
                self.remove(self.rng.choice(sorted(config - {first})), leader.addr, client=self.other)

    def asked(self, action: str, target: str, leader: str, client: Client) -> None:
        w = self.world
        w.quorum_asked_at = w.now
        self.busy += 1
        w.note(f"quorum {action} {target} asked by {client.name}")

        pending = [True]

        def answered(answer: dict[str, Any]) -> None:
            if not pending[0]:
                return
            pending[0] = False
            self.busy -= 1
            if answer.get("code") == 0:
                w.stats[f"quorum {action}"] += 1
            elif answer.get("code") != -1:
                w.stats["quorum refused"] += 1
            w.note(f"quorum {action} {target}: code {answer.get('code')} {answer.get('remark', '')}")

        client.call("ChangeQuorum", {"action": action, "raft_address": target}, answered, to=leader)
        # the leader asked may die or step down with the change pending: its answer never comes (an
        # RPC deadline); the operator then reads the outcome from the configuration
        w.after(12.0, "operator", answered, {"code": -1, "remark": "no answer: the outcome is unknown"})

    def remove(self, target: str, leader: str, *, client: Client | None = None) -> None:
        self.asked("remove", target, leader, client or self.client)

    def add(self, node: SimNode, config: set[str], leader: str, *, client: Client | None = None) -> None:
        """Start the node naming the members (its old disk, or an empty one), then add it."""
        if not node.alive and node.member is False:
            if self.rng.random() < 0.5:
                node.wipe()
            node.partners = sorted(config - {node.addr})
            node.member = True
            node.start()
            self.world.note(f"start {node.addr} to join {sorted(config)}")
        self.asked("add", node.addr, leader, client or self.client)


__all__ = [
    "CONNECTION_TIMEOUT",
    "Broker",
    "Client",
    "Controller",
    "Faults",
    "Operator",
    "Workload",
    "random",
]
