"""The checkers of a simulated run (docs/raft-safety.md, "The deterministic simulator").

During the run, after every step of a node: at most one leader per term; a new leader holds
every entry applied anywhere (leader completeness); every node applies the same entry at each
index; masterEpoch and syncStateSetEpoch never go back, one master per broker set and
masterEpoch, a master is elected from the SyncStateSet, brokerEpochs never go back; a node
starts an election only having heard from a majority recently (PreVote); a leader that has heard
from no majority for a while steps down (CheckQuorum).

At the end: log matching between every two journals; every acknowledged write is in the log at
the index it was answered with; replaying the log through the pure core (the sequential model)
gives each acknowledged write the answer and records it got, each fresh read the answer it got
at the index it was read at, and each node's state hash at its applied index; the real-time
order of acknowledged writes and reads agrees with the log order (linearizability with the log
as witness); once the faults are healed a leader is elected and calls are answered.
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING, Any

from mqctl.controller import core, records
from mqctl.dsim.world import Violation

if TYPE_CHECKING:
    from mqctl.dsim.world import SimNode, World

PREVOTE_HEARD = 0.6  # seconds: a node starting an election heard a majority this recently
QUORUM_SILENCE = 1.5  # seconds: a leader hearing no majority this long should have stepped down
LIVENESS_AFTER = 6.0  # seconds after the heal by which calls must succeed again


class Checker:
    def __init__(self, world: World) -> None:
        self.world = world
        self.leaders: dict[int, str] = {}
        self.committed: dict[int, str] = {}  # index -> entry applied there
        self.committed_raw: dict[int, tuple[int, bytes]] = {}  # index -> (term, command)
        # index -> the highest leader term seen when it was first applied: it was committed in that
        # term or an earlier one, so every leader of a later term must hold it
        self.committed_by: dict[int, int] = {}
        self.seen_term: dict[str, int] = {}
        self.seen_vote: dict[str, tuple[int, str | None]] = {}
        self.configs: dict[str, tuple[frozenset[str], float]] = {}  # node -> (its configuration, since)
        self.was_leader: dict[str, int] = {}
        self.leader_since: dict[str, float] = {}
        self.per_node: dict[tuple[str, int], dict[str, Any]] = {}
        self.masters: dict[tuple[str, int], int | None] = {}
        self.decisions: list[dict[str, Any]] = []
        self.ops: list[dict[str, Any]] = []
        self.healed_at: float | None = None
        self.violations: list[str] = []
        self.change_looked: dict[str, tuple[int, int, int, int]] = {}  # one_change_at_a_time's last look

    def forget(self, addr: str) -> None:
        """A node's disk was replaced by an empty one: its term and vote start again from nothing."""
        self.seen_term.pop(addr, None)
        self.seen_vote.pop(addr, None)
        self.was_leader.pop(addr, None)

    def fail(self, text: str) -> None:
        self.world.note(f"VIOLATION {text}")
        raise Violation(text)

    # --- client history -------------------------------------------------------------------------

    def invoke(self, client: str, method: str, request: dict[str, Any]) -> dict[str, Any]:
        op = {
            "client": client,
            "method": method,
            "request": request,
            "t0": self.world.now,
            "t1": None,
            "answer": None,
        }
        self.ops.append(op)
        return op

    def answered(self, op: dict[str, Any], answer: dict[str, Any] | None) -> None:
        op["t1"] = self.world.now
        op["answer"] = answer
        code = None if answer is None else answer.get("code")
        self.world.note(
            f"answer {op['client']} {op['method']} code {code}"
            + (f" index {answer['_index']}" if answer and "_index" in answer else "")
        )
        if answer is not None and code == 0:
            if "_index" in answer:
                self.world.stats["acked writes"] += 1
                if self.world.faults is not None:
                    self.world.faults.on_ack()
            elif "_applied_index" in answer:
                self.world.stats["reads"] += 1

    def decided(
        self, node: SimNode, term: int, entry: str, what: Any, answer: dict[str, Any]
    ) -> dict[str, Any]:
        d = {
            "node": node.addr,
            "term": term,
            "entry": entry,
            "what": what,
            "answer": answer,
            "ctx": node.ctl.last_ctx if node.ctl is not None else None,
            "index": None,
        }
        self.decisions.append(d)
        return d

    # --- after each step --------------------------------------------------------------------------

    def on_apply(
        self,
        node: SimNode,
        index: int,
        entry: str,
        state: core.ControllerState,
        applied: list[records.Record],
    ) -> None:
        w = self.world
        known = self.committed.get(index)
        if known is None:
            self.committed[index] = entry
        elif known != entry:
            self.fail(f"index {index}: {node.addr} applied {entry[:120]!r}, another node {known[:120]!r}")
        journal = node.journal
        first = journal[0][1]
        if index - first < len(journal):
            command, _, term = journal[index - first]
            raw = self.committed_raw.get(index)
            if raw is None:
                self.committed_raw[index] = (term, command)
                self.committed_by[index] = max(self.leaders, default=0)
            elif raw != (term, command):
                self.fail(f"index {index}: {node.addr} applied a different Raft entry than another node")
        w.note(f"apply {node.addr} {index} {len(entry)}b")
        mine = self.per_node.setdefault((node.addr, node.generation), {})
        for r in applied:
            name = getattr(r, "broker_name", None)
            if not isinstance(name, str) or not name:
                continue
            bs = state.broker_set(name)
            if bs is None:
                continue
            before = mine.get(name)
            elected = r.new_master_broker_id if isinstance(r, records.MasterElected) else None
            if elected is not None and before is not None:
                unclean = state.cfg_bool("enableElectUncleanMaster")
                if before["master_epoch"] > 0 and not unclean and elected not in before["sss"]:
                    self.fail(
                        f"{node.addr}: {name} elected master {elected} outside its "
                        f"SyncStateSet {sorted(before['sss'])} (masterEpoch {bs.master_epoch})"
                    )
            if before is not None:
                if bs.master_epoch < before["master_epoch"]:
                    self.fail(
                        f"{node.addr}: {name} masterEpoch went back {before['master_epoch']} -> "
                        f"{bs.master_epoch}"
                    )
                if bs.sync_state_set_epoch < before["sss_epoch"]:
                    self.fail(f"{node.addr}: {name} syncStateSetEpoch went back")
                for bid, info in bs.brokers.items():
                    if info.broker_epoch < before["epochs"].get(bid, 0):
                        self.fail(f"{node.addr}: {name} broker {bid} brokerEpoch went back")
            key = (name, bs.master_epoch)
            if (
                key in self.masters
                and self.masters[key] != bs.master_broker_id
                and bs.master_epoch > 0
                and isinstance(r, records.MasterElected)
            ):
                self.fail(
                    f"{name} masterEpoch {bs.master_epoch}: master {self.masters[key]} and "
                    f"{bs.master_broker_id}"
                )
            if isinstance(r, records.MasterElected):
                self.masters.setdefault(key, bs.master_broker_id)
            mine[name] = {
                "master_epoch": bs.master_epoch,
                "sss_epoch": bs.sync_state_set_epoch,
                "sss": set(bs.sync_state_set),
                "epochs": {b: i.broker_epoch for b, i in bs.brokers.items()},
            }
        if mine.get("_broker_epoch", 0) > state.broker_epoch:
            self.fail(f"{node.addr}: the brokerEpoch counter went back")
        mine["_broker_epoch"] = state.broker_epoch

    def after_step(self, node: SimNode) -> None:
        # runs after every step of every node (most of them ticks that change nothing): what is
        # stored is stored only when it changed, the configuration is read once
        sync = node.sync
        if sync is None or not node.alive:
            return
        w = self.world
        term = sync.raftCurrentTerm
        addr = node.addr
        old = self.seen_term.get(addr, 0)
        if term < old:  # currentTerm is Raft's persistent state: a restart never takes it back
            self.fail(f"{addr} is at term {term} after a restart, it was at term {old} (term not durable)")
        voted = node.journal.getVotedForNodeId()
        before = self.seen_vote.get(addr)
        if before is None or before[0] != term or before[1] != voted:
            if before is not None and before[0] == term and before[1] is not None:
                self.fail(
                    f"{addr} voted for {before[1]} in term {term}, after a restart for {voted} "
                    "(vote not durable)"
                )
            self.seen_vote[addr] = (term, voted)
        leads = sync.is_leader()
        if term > old:
            self.seen_term[addr] = term
            if voted == addr and (not leads or self.was_leader.get(addr) != term):
                self.election_started(node, term)
        if leads:
            config, config_since = self.config_since(node)
            if self.was_leader.get(addr) != term:
                self.was_leader[addr] = term
                self.leader_since[addr] = w.now
                other = self.leaders.get(term)
                if other is not None and other != addr:
                    self.fail(f"two leaders in term {term}: {other} and {addr}")
                self.leaders[term] = addr
                w.stats["leader changes"] += 1
                w.note(f"leader {addr} term {term}")
                self.check_completeness(node, term)
            elif (
                w.now - self.leader_since.get(addr, w.now) > QUORUM_SILENCE
                and w.now - node.resumed_at > QUORUM_SILENCE
                and w.now - config_since > QUORUM_SILENCE
            ):
                # the majority of the members this leader counts now (membership changes included),
                # for as long as it has counted them
                heard = sum(
                    1
                    for p in config
                    if p == addr or w.net.heard.get((addr, p), -1e9) >= w.now - QUORUM_SILENCE
                )
                if heard <= len(config) // 2:
                    self.fail(
                        f"{addr} still leads term {term} having heard from no majority of "
                        f"{sorted(config)} for {QUORUM_SILENCE} s (CheckQuorum)"
                    )
            if w.now - w.quorum_asked_at < 30.0:
                self.one_change_at_a_time(node, term)

    def config_since(self, node: SimNode) -> tuple[frozenset[str], float]:
        """The configuration `node` counts majorities of now (node.config()), and since when."""
        assert node.sync is not None
        config = frozenset([node.addr, *(n.id for n in node.sync.otherNodes)])
        known = self.configs.get(node.addr)
        if known is None or known[0] != config:
            known = self.configs[node.addr] = (config, self.world.now)
        return known

    def one_change_at_a_time(self, node: SimNode, term: int) -> None:
        """A leader appends a membership change only once its previous one is committed (Raft's
        single-server changes): so the majorities of the configuration in use and of the committed
        one always overlap. Two uncommitted changes of its own term break that."""
        assert node.sync is not None
        # a leader only appends in its term: with the same length and commit index since the last
        # look, its uncommitted entries are the ones looked at then
        key = (node.generation, term, len(node.journal), node.sync.raftCommitIndex)
        if self.change_looked.get(node.addr) == key:
            return
        self.change_looked[node.addr] = key
        mine = [e for e in node.membership_entries(node.sync.raftCommitIndex) if e[1] == term]
        if len(mine) > 1:
            self.fail(
                f"leader {node.addr} of term {term} has {len(mine)} uncommitted membership changes "
                f"(indexes {[i for i, _ in mine]}): one at a time"
            )

    def election_started(self, node: SimNode, term: int) -> None:
        w = self.world
        w.note(f"election {node.addr} term {term}")
        if w.faults is not None:
            w.faults.on_election(node)
        config = node.config()
        heard = sum(
            1
            for p in config
            if p == node.addr or w.net.heard.get((node.addr, p), -1e9) >= w.now - PREVOTE_HEARD
        )
        # a leadership transfer skips PreVote (a timeout_now; it may wait for a connection: a transfer
        # asked of a node connected to nobody fires once it is, docs/raft-safety.md)
        transfer = w.now - w.net.transfer_asked.get(node.addr, -1e9) < 3.0
        if heard <= len(config) // 2 and w.now - node.started_at > PREVOTE_HEARD and not transfer:
            self.fail(
                f"{node.addr} started an election for term {term} having heard from no majority "
                f"for {PREVOTE_HEARD} s (PreVote)"
            )

    def check_completeness(self, node: SimNode, term: int) -> None:
        journal = node.journal
        first = journal[0][1]
        for index, raw in self.committed_raw.items():
            if self.committed_by[index] >= term:
                continue  # committed in this term or a later one: Raft promises it to later leaders
            k = index - first
            if k < 0 or k >= len(journal) or (journal[k][2], journal[k][0]) != raw:
                self.fail(
                    f"leader {node.addr} of term {term} lacks committed entry {index} (leader completeness)"
                )

    # --- at the end --------------------------------------------------------------------------------

    def log_matching(self) -> None:
        alive = [n for n in self.world.nodes if n.alive and n.sync is not None]
        for i, a in enumerate(alive):
            for b in alive[i + 1 :]:
                ja, jb = a.journal, b.journal
                n = min(len(ja), len(jb))
                (ia, ta), (ib, tb) = ja.index_term_columns(), jb.index_term_columns()
                last_same = -1
                for k in range(n - 1, -1, -1):  # the last position where index and term agree
                    if ia[k] == ib[k] and ta[k] == tb[k]:
                        last_same = k
                        break
                if ja.same_first_entries(jb, last_same + 1):  # as buffers: no entry decoded or copied
                    continue
                for k in range(last_same + 1):  # they differ: find where, for the message
                    if ja[k] != jb[k]:
                        self.fail(
                            f"log matching: {a.addr} and {b.addr} differ at index {ja[k][1]} below a "
                            f"common entry of index {ja[last_same][1]} term {ja[last_same][2]}"
                        )

    def finish(self) -> None:
        w = self.world
        self.log_matching()
        acked = [
            op
            for op in self.ops
            if op["answer"] and op["answer"].get("code") == 0 and "_index" in op["answer"]
        ]
        reads = [
            op
            for op in self.ops
            if op["answer"] and op["answer"].get("code") == 0 and "_applied_index" in op["answer"]
        ]
        for op in acked:
            idx = op["answer"]["_index"]
            if idx not in self.committed:
                self.fail(f"acknowledged {op['method']} at index {idx} is not in the log")
        by_entry: dict[int, list[dict[str, Any]]] = {}
        for d in self.decisions:
            if d["index"] is not None:
                by_entry.setdefault(d["index"], []).append(d)
        reads_at: dict[int, list[dict[str, Any]]] = {}
        for op in reads:
            reads_at.setdefault(op["answer"]["_applied_index"], []).append(op)
        nodes_at: dict[int, list[SimNode]] = {}
        for n in w.nodes:
            if n.alive and n.sync is not None:
                nodes_at.setdefault(n.sync.applied_index, []).append(n)
        state = core.ControllerState(config=dict(w.initial_config))
        indexes = sorted(self.committed)
        last = 0
        for index in indexes + [10**18]:
            for r in sorted(k for k in reads_at if last <= k < index):
                for op in reads_at[r]:
                    self.check_read(state, op)
            for r in sorted(k for k in nodes_at if last <= k < index):
                for n in nodes_at[r]:
                    if n.sync.state.state_hash() != state.state_hash():  # type: ignore[union-attr]
                        self.fail(f"{n.addr}'s state at index {r} differs from the log's")
            if index == 10**18:
                break
            entry = self.committed[index]
            for d in by_entry.get(index, []):
                self.check_decision(state, d, entry)
            for rec in records.decode_entry(__import__("json").loads(entry)):
                state.apply(rec)
            last = index
        self.real_time(acked, reads)
        self.liveness()

    def check_decision(self, state: core.ControllerState, d: dict[str, Any], entry: str) -> None:
        if d["entry"] != entry:
            self.fail(f"index {d['index']}: answered for {d['entry'][:100]!r}, the log has {entry[:100]!r}")
        what = d["what"]
        if what is None or what[0].startswith("_") or d["ctx"] is None:
            return
        method, request = what
        result = core.decide(state, method, request, d["ctx"])
        if records.encode_entry(result.records) != entry:
            self.fail(
                f"index {d['index']}: {method} decided against a state that is not the log's "
                f"before it (the sequential model decides "
                f"{records.encode_entry(result.records)[:160]!r})"
            )
        answer = {k: v for k, v in d["answer"].items() if not k.startswith("_")}
        model = result.answer()
        if model != answer:
            self.fail(
                f"index {d['index']}: {method} answered {answer} where the sequential model answers {model}"
            )

    def check_read(self, state: core.ControllerState, op: dict[str, Any]) -> None:
        ans = op["answer"]
        ctx = ans["_ctx"]
        model = core.decide(state, op["method"], op["request"], ctx).answer()
        got = {k: v for k, v in ans.items() if not k.startswith("_")}
        if model != got:
            self.fail(
                f"read {op['method']} at index {ans['_applied_index']} answered {got}, the log's state "
                f"{model}"
            )

    def real_time(self, acked: list[dict[str, Any]], reads: list[dict[str, Any]]) -> None:
        ordered = sorted(acked, key=lambda op: op["answer"]["_index"])
        min_t1 = float("inf")
        for op in reversed(ordered):
            if min_t1 < op["t0"]:
                self.fail(
                    f"{op['method']} at index {op['answer']['_index']} was invoked after a write "
                    "with a "
                    "higher index was acknowledged (real-time order)"
                )
            min_t1 = min(min_t1, op["t1"])
        done = sorted((op["t1"], op["answer"]["_index"]) for op in acked)
        times = [t for t, _ in done]
        best = []
        m = 0
        for _, idx in done:
            m = max(m, idx)
            best.append(m)
        for op in reads:
            k = bisect.bisect_left(times, op["t0"])
            if k and best[k - 1] > op["answer"]["_applied_index"]:
                self.fail(
                    f"read {op['method']} at index {op['answer']['_applied_index']} misses a write "
                    f"acknowledged before it was invoked (index {best[k - 1]})"
                )

    def liveness(self) -> None:
        w = self.world
        if self.healed_at is None:
            return
        leaders = [n for n in w.nodes if n.alive and n.member and n.sync is not None and n.sync.is_leader()]
        if not leaders:
            self.fail(f"no leader {w.now - self.healed_at:.1f} s after the faults healed")
        for op in self.ops:
            if op["t0"] < self.healed_at + LIVENESS_AFTER or op["t0"] > w.now - 11:
                continue
            code = None if op["answer"] is None else op["answer"].get("code")
            if code in (None, -1):
                after = op["t0"] - self.healed_at
                self.fail(f"{op['client']} {op['method']} invoked {after:.1f} s after the heal got no answer")
