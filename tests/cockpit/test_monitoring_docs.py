"""docs/monitoring: every metric the Grafana dashboard and the Prometheus alert rules use exists on
a real `mqctl serve --metrics-address`, and both files have the shape their tools load."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from cockpit_fixtures import broker_set, cockpit_cluster, get
from harness import Beater

from mqctl.client import ControllerClient

pytestmark = pytest.mark.slow

DOCS = Path(__file__).resolve().parents[2] / "docs" / "monitoring"
METRIC = re.compile(r"\b((?:mqctl|process)_[a-z0-9_]+)\b")


def _dashboard_exprs() -> list[str]:
    doc = json.loads((DOCS / "mqctl-dashboard.json").read_text())
    assert doc["uid"] and doc["title"] and doc["panels"]
    exprs = []
    for panel in doc["panels"]:
        assert panel["type"] in ("row", "stat", "timeseries", "table"), panel["title"]
        for target in panel.get("targets", []):
            exprs.append(target["expr"])
    exprs += [v["query"] for v in doc["templating"]["list"]]
    return exprs


def _alert_exprs() -> list[str]:
    doc = yaml.safe_load((DOCS / "mqctl-alerts.yml").read_text())
    exprs = []
    for group in doc["groups"]:
        for rule in group["rules"]:
            assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}, rule
            assert rule["labels"]["severity"] in ("warning", "critical") and rule["annotations"]["summary"]
            exprs.append(rule["expr"])
    return exprs


def test_every_metric_in_the_dashboard_and_the_alerts_exists(tmp_path: Path) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    exprs = _dashboard_exprs() + _alert_exprs()
    used = {m for e in exprs for m in METRIC.findall(e)}
    assert len(used) >= 15, used
    cluster, http = cockpit_cluster(tmp_path, 1)
    client = ControllerClient(cluster.addresses)
    beater = Beater(client)
    try:
        cluster.raise_feature_level(client, 3)  # the history's counters
        broker_set(client, beater, "broker-a", alive=2)  # every labelled family has a series now
        client.get_sync_state_data()
        _, _, text = get(f"http://{http['node0']}/metrics")
    finally:
        beater.stop()
        client.close()
        cluster.stop()
    exposed = {s.name for f in text_string_to_metric_families(text) for s in f.samples}
    assert used - exposed == set(), f"used in docs/monitoring but not exposed: {sorted(used - exposed)}"
