"""Prometheus metrics of `mqctl serve --metrics-address` (docs/serve.md#metrics), via prometheus-client.

Imported only by `mqctl serve` when the metrics address is set. Two kinds of metric:

* counted as things happen: requests by method and code with their latency (``MeteredNode`` wraps
  the NodeAPI once, so gRPC and remoting are counted alike; a heartbeat costs one counter
  increment and no histogram), and the Raft apply time of each entry;
* read at scrape time (``StateCollector``): the node's Raft status and, from one short read of
  the replicated state and the heartbeat table, each broker set's master, epochs and replicas,
  the health verdicts of mqctl.admin.health, and (feature level 3) the elections and loss the
  replicated history counted. Liveness-derived values (replicas alive,
  heartbeat ages, verdicts) come only from the leader, the one node brokers beat to and the one
  whose view elections use.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.process_collector import ProcessCollector

from mqctl.admin import health
from mqctl.controller.core import HISTORY_LEVEL
from mqctl.controller.node import RAFT_STATES

REQUEST_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
APPLY_BUCKETS = (0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1)


def node_status(node: Any) -> dict[str, Any]:
    """GetMetadata's fields, as this node answers them."""
    meta: dict[str, Any] = node.metadata()
    return meta


class MeteredNode:
    """The NodeAPI with each call counted and timed; everything else passes through."""

    def __init__(self, node: Any, registry: CollectorRegistry) -> None:
        self._node = node
        self.requests = Counter(
            "mqctl_requests",
            "Controller requests by method and response code",
            ["method", "code"],
            registry=registry,
        )
        self.latency = Histogram(
            "mqctl_request_duration_seconds",
            "Time to answer a controller request (Heartbeat excluded)",
            ["method"],
            buckets=REQUEST_BUCKETS,
            registry=registry,
        )
        self._heartbeat_ok = self.requests.labels("Heartbeat", "0")

    def call(self, method: str, request: dict[str, Any], *, timeout: float = 5.0) -> dict[str, Any]:
        if method == "Heartbeat":
            answer: dict[str, Any] = self._node.call(method, request, timeout=timeout)
            if answer.get("code") == 0:
                self._heartbeat_ok.inc()
            else:
                self.requests.labels(method, str(answer.get("code"))).inc()
            return answer
        started = time.perf_counter()
        code = "exception"
        try:
            answer = self._node.call(method, request, timeout=timeout)
            code = str(answer.get("code", 0))
            return answer
        finally:
            self.requests.labels(method, code).inc()
            self.latency.labels(method).observe(time.perf_counter() - started)

    def metadata(self) -> dict[str, Any]:
        started = time.perf_counter()
        try:
            answer: dict[str, Any] = self._node.metadata()
            return answer
        finally:
            self.requests.labels("GetMetadata", "0").inc()
            self.latency.labels("GetMetadata").observe(time.perf_counter() - started)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._node, name)


def _gauge(name: str, doc: str, labels: list[str] | None = None) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=labels)


class StateCollector:
    """Gauges read at scrape time from the node (see the module's docstring)."""

    def __init__(self, node: Any) -> None:
        self._node = node

    def describe(self) -> list[Metric]:
        return []  # computed at scrape time; no checks at registration

    def collect(self) -> Iterator[Metric]:
        meta = node_status(self._node)
        leader = bool(meta.get("is_leader"))
        role = _gauge("mqctl_raft_role", "1 for this node's Raft role", ["role"])
        for name in RAFT_STATES.values():
            role.add_metric([name], 1.0 if meta.get("state") == name else 0.0)
        yield role
        for name, key, doc in (
            ("mqctl_raft_term", "term", "Raft term"),
            ("mqctl_raft_commit_index", "commit_index", "Raft commit index"),
            ("mqctl_raft_applied_index", "last_applied", "last Raft entry applied here"),
        ):
            g = _gauge(name, doc)
            g.add_metric([], float(meta.get(key) or 0))
            yield g
        peers = [p for p in meta.get("peers", ()) if not p.get("is_self")]
        for name, value, doc in (
            ("mqctl_raft_peers", len(peers), "other members of the controller group"),
            (
                "mqctl_raft_peers_connected",
                sum(1 for p in peers if p.get("connected")),
                "other members this node is connected to",
            ),
            (
                "mqctl_raft_has_leader",
                1 if meta.get("controller_leader_id") else 0,
                "1 when this node knows a leader",
            ),
            (
                "mqctl_raft_has_quorum",
                1 if meta.get("has_quorum") else 0,
                "1 when this node reaches a majority of the group",
            ),
        ):
            g = _gauge(name, doc)
            g.add_metric([], float(value))
            yield g
        verdict = health.controller_health(meta)
        g = _gauge(
            "mqctl_controller_health",
            "the controller group's verdict as this node sees it: 0 OK, 1 WARN, 2 CRIT",
        )
        g.add_metric([], float(health.RANK[verdict["verdict"]]))
        yield g
        yield from self._broker_sets(leader)
        yield from self._elections()

    def _elections(self) -> Iterator[Metric]:
        """Counted in the replicated state as each history entry is applied (feature level 3), so every
        node exports the same values and trimming the history never lowers them."""
        view = self._node.history_view(0)
        if view["feature_level"] < HISTORY_LEVEL:
            return
        clusters = view["clusters"]
        elections = CounterMetricFamily(
            "mqctl_elections",
            "master elections of each broker set by cause "
            "(a master cleared for want of a candidate included)",
            labels=["cluster", "broker_name", "cause"],
        )
        for name, counts in sorted(view["elections"].items()):
            for cause, n in sorted(counts.items()):
                elections.add_metric([clusters.get(name, ""), name, cause], float(n))
        loss = CounterMetricFamily(
            "mqctl_election_loss_bytes",
            "bytes the new masters of each broker set's "
            "elections may not have had (old master's maxOffset minus the new one's)",
            labels=["cluster", "broker_name"],
        )
        for name in sorted(view["elections"].keys() | view["loss_total"].keys()):  # 0 is a figure too
            loss.add_metric([clusters.get(name, ""), name], float(view["loss_total"].get(name, 0)))
        yield from (elections, loss)

    def _broker_sets(self, leader: bool) -> Iterator[Metric]:
        data = self._node.sync_state_data()
        table, lease = data["replicas_info_table"], int(data["lease_ms"])
        set_labels = ["cluster", "broker_name"]
        master = _gauge("mqctl_broker_set_master_id", "brokerId of the master (-1: none)", set_labels)
        epoch = _gauge("mqctl_broker_set_master_epoch", "masterEpoch", set_labels)
        sss = _gauge("mqctl_broker_set_sync_state_set_size", "members of the SyncStateSet", set_labels)
        replicas = _gauge("mqctl_broker_set_replicas", "registered replicas", set_labels)
        alive = _gauge("mqctl_broker_set_replicas_alive", "replicas alive (leader only)", set_labels)
        verdicts = _gauge(
            "mqctl_broker_set_health", "verdict: 0 OK, 1 WARN, 2 CRIT (leader only)", set_labels
        )
        age = _gauge(
            "mqctl_broker_heartbeat_age_seconds",
            "seconds since the broker's last heartbeat (leader only)",
            [*set_labels, "broker_id"],
        )
        for name, info in sorted(table.items()):
            labels = [str(info.get("cluster_name") or ""), name]
            rows = [*info.get("in_sync_replicas", ()), *info.get("not_in_sync_replicas", ())]
            mid = info.get("master_broker_id")
            master.add_metric(labels, float(-1 if mid is None else mid))
            epoch.add_metric(labels, float(info.get("master_epoch") or 0))
            sss.add_metric(labels, float(len(info.get("in_sync_replicas", ()))))
            replicas.add_metric(labels, float(len(rows)))
            if not leader:
                continue
            alive.add_metric(labels, float(sum(1 for r in rows if r.get("alive"))))
            verdict = health.broker_set_health(name, info, lease)["verdict"]
            verdicts.add_metric(labels, float(health.RANK[verdict]))
            for r in rows:
                if r.get("heartbeat_age_ms") is not None:
                    age.add_metric([*labels, str(r["broker_id"])], int(r["heartbeat_age_ms"]) / 1000)
        yield from (master, epoch, sss, replicas, alive, verdicts, age)


class Metrics:
    """The registry of one serve process and what feeds it."""

    def __init__(self, node: Any) -> None:

        # no *_created series (process-wide: this process is a serve node)
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)
        self.api = MeteredNode(node, self.registry)
        apply_time = Histogram(
            "mqctl_raft_apply_duration_seconds",
            "Time to apply one Raft entry to the controller state",
            buckets=APPLY_BUCKETS,
            registry=self.registry,
        )
        node.sync.apply_observer = apply_time.observe
        self.registry.register(StateCollector(node))

    def exposition(self) -> tuple[bytes, str]:

        return generate_latest(self.registry), CONTENT_TYPE_LATEST
