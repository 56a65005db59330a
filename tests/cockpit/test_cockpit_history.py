"""The replicated history (feature level 3) on `mqctl serve --metrics-address`: mqctl_elections_total by
broker set and cause and mqctl_election_loss_bytes_total on every node, counted as entries are applied (so
the same on a follower, after a restart, and never lowered when the history is trimmed), and the recent
entries on the status page, escaped; below level 3 the page says why there is no history."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.parse
from pathlib import Path

import pytest
from cockpit_fixtures import cockpit_cluster, get, samples
from harness import TEST_CLUSTER, Beater, register_broker

from mqctl.client import ControllerClient
from mqctl.localgroup import wait_until

pytestmark = pytest.mark.slow

NAME = "<b>set</b>&1"


def run_mqctl(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MQCTL_")} | {"COLUMNS": "400"}
    return subprocess.run(
        [str(Path(sys.executable).with_name("mqctl")), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def _elections(text: str) -> dict[tuple[str, str], float]:
    return {
        (dict(labels)["broker_name"], dict(labels)["cause"]): v
        for (name, labels), v in samples(text).items()
        if name == "mqctl_elections_total"
    }


def test_elections_by_cause_and_the_history_on_the_page(tmp_path: Path) -> None:
    cluster, http = cockpit_cluster(tmp_path, 3, ["--initial-feature-level", "1"])
    client = ControllerClient(cluster.addresses, timeout=30)
    beater = Beater(client)
    try:
        url = f"http://{http[cluster.nodes[0].name]}"
        _, _, page = get(f"{url}/")
        assert 'id="history-off"' in page and "this group is at 1" in page
        assert "mqctl quorum feature-level 3" in page
        assert "mqctl_elections_total" not in get(f"{url}/metrics")[2]  # no history, no counter
        cluster.raise_feature_level(client, 3)
        wait_until(lambda: 'id="history-empty"' in get(f"{url}/")[2], 20, what="the page at level 3")

        # two replicas, 1 master with 6000 bytes, 2 outside the SyncStateSet with 3500; unclean election on
        ids = []
        for off in (6000, 3500):
            bid, _ = register_broker(
                client,
                NAME,
                f"127.0.0.1:{21000 + off}",
                epoch=1,
                max_offset=off,
                heartbeat_timeout_mills=beater.lease_ms,
            )
            beater.beat(NAME, bid, f"127.0.0.1:{21000 + off}", epoch=1, max_offset=off, confirm_offset=off)
            ids.append(bid)
        assert client.elect_master(TEST_CLUSTER, NAME, ids[0]).master_broker_id == ids[0]
        client.update_config({"enableElectUncleanMaster": "true"})
        beater.silence(NAME, ids[0])
        wait_until(
            lambda: client.get_replica_info(NAME).master_broker_id == ids[1],
            30,
            what="broker 2 elected on the lease's end",
        )

        want = {(NAME, "broker_request"): 1.0, (NAME, "lease_expired"): 1.0}
        for node in cluster.nodes:  # the replicated counts: every node, the followers included
            wait_until(
                lambda n=node: _elections(get(f"http://{http[n.name]}/metrics")[2]) == want,
                20,
                what=f"{node.name}'s mqctl_elections_total",
            )
            loss = samples(get(f"http://{http[node.name]}/metrics")[2])
            assert (
                loss[("mqctl_election_loss_bytes_total", (("broker_name", NAME), ("cluster", TEST_CLUSTER)))]
                == 2500.0
            )

        _, _, page = get(f"{url}/")
        history = page.split('<table id="history">', 1)[1].split("</table>", 1)[0]
        rows = history.split("<tr>")[2:]
        assert "lease expired for broker 1" in rows[0] and "<td>2500</td>" in rows[0], rows[0]
        assert "&lt;b&gt;set&lt;/b&gt;&amp;1" in history and "<b>set</b>" not in page
        assert "bytes elections may have lost: &lt;b&gt;set&lt;/b&gt;&amp;1 2500" in page
        # issue 31's pointers: the page, `mqctl history` and `health --doctor` name the guard's salvage
        # (its directory name: the new master's maxOffset is where the histories part) and the replay
        name = f"{TEST_CLUSTER}_{urllib.parse.quote(NAME, safe='')}_{ids[0]}_3500-6000"
        assert f"mqctl recover guard STORE_OF_BROKER_{ids[0]} --out DIR" in rows[0], rows[0]
        assert f"mqctl recover replay DIR/{name} -n NAMESRV" in rows[0], rows[0]
        hist = json.loads(run_mqctl("history", "-a", cluster.addresses, "-o", "json").stdout)
        (guard,) = [e["election"]["guard"] for e in hist["entries"] if (e.get("election") or {}).get("guard")]
        assert guard["salvageName"] == name
        assert guard["replay"] == f"mqctl recover replay DIR/{name} -n NAMESRV"
        table = run_mqctl("history", "-a", cluster.addresses).stdout
        assert f"DIR/{name}" in table.replace("\n", ""), table
        p = run_mqctl("health", "--doctor", "-a", cluster.addresses, "-o", "json")
        fixes = [f["fix"] for f in json.loads(p.stdout)["findings"] if f["brokerName"] == NAME]
        assert any(f"mqctl recover replay DIR/{name}" in f for f in fixes), (fixes, p.stderr)

        # the counters stay when the history is trimmed to one entry, and across a restart
        client.update_config({"historyMaxEntries": "1"})
        node = cluster.nodes[0]
        node.stop()
        node.start()
        wait_until(lambda: get(f"{url}/health")[0] == 200, 60, what="node0 back")
        wait_until(
            lambda: _elections(get(f"{url}/metrics")[2]) == want, 30, what="the counts after a restart"
        )
        assert get(f"{url}/")[2].split('<table id="history">', 1)[1].count("<tr>") == 2  # header + 1 entry
    finally:
        beater.stop()
        client.close()
        cluster.stop()
