"""`mqctl metadata diff` and the online `mqctl metadata sync` against a real RocketMQ 5.3.3 broker set in
controller mode (../shared/rocketmq-broker: a name server, two brokers of broker-a, behind one `mqctl serve
--remoting-port` node), in a private network namespace with only loopback (issue 21).

The scenario of the issue: the old master had a topic, a subscription group and a consumer offset that
its slave never copied (written into the dead master's store here, as a create that reached the master
just before it was killed -9 would leave them), the slave is elected master without them, and
`metadata sync --from OLD_STORE --to NEW_MASTER` puts them back through RocketMQ's admin requests; the
broker persists them (its own topics.json and subscriptionGroup.json), and the old master, restarted,
copies them as a slave: the two live replicas then agree (`metadata diff` exit 0). `mqctl history` shows
the election with, beside it, each replica's metadata: the dead old master unreachable, then both
answering and lacking nothing.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from rocketmq_fixtures import (
    MQCTL,
    Namespace,
    broker_args,
    broker_classpath,
    broker_conf,
    namesrv_args,
    require_rocketmq,
    rocketmq_env,
)

from mqctl import localgroup
from mqctl.store import metadata as md

pytestmark = pytest.mark.slow

NAMESRV = "127.0.0.1:9876"
GRPC, RAFT, REMOTING = "127.0.0.1:9870", "127.0.0.1:9880", 9890
BROKERS = {"b0": 10911, "b1": 10921}
LOG_ROOT: Path | None = None
FAILED = False


class Set:
    def __init__(self, ns: Namespace, cp: list[str]) -> None:
        self.ns, self.cp = ns, cp

    def store(self, b: str) -> Path:
        return self.ns.root / b / "store"

    def start_broker(self, b: str) -> None:
        conf = self.ns.root / f"{b}.conf"
        conf.write_text(
            broker_conf(
                controllers=[f"127.0.0.1:{REMOTING}"],
                namesrv=NAMESRV,
                port=BROKERS[b],
                ha_port=BROKERS[b] + 1,
                store=self.store(b),
                extra={"controllerHeartBeatTimeoutMills": 3000, "mappedFileSizeCommitLog": 4194304},
            )
        )
        self.ns.start(b, *broker_args(self.ns, b, conf, self.cp), env=rocketmq_env(self.ns))

    def mqctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.ns.run(MQCTL, *args, timeout=60)

    def sync_state(self) -> dict:
        p = self.mqctl("getSyncStateSet", "-b", "broker-a", "-a", GRPC, "-o", "json")
        return json.loads(p.stdout)["brokers"][0] if p.returncode == 0 else {}

    def master(self) -> str | None:
        addr = self.sync_state().get("masterAddress")
        return next((b for b, port in BROKERS.items() if addr == f"127.0.0.1:{port}"), None)


def wait_for(what: str, fn, timeout: float, interval: float = 0.5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = fn()
        if v:
            return v
        time.sleep(interval)
    raise AssertionError(f"not within {timeout} s: {what}; logs in {LOG_ROOT}")


@pytest.fixture(scope="module")
def broker_set() -> Iterator[Set]:
    global LOG_ROOT
    require_rocketmq()
    root = Path(tempfile.mkdtemp(prefix="mqctl-e2e-metadata-"))
    LOG_ROOT = root
    ns = Namespace(root)
    s = Set(ns, broker_classpath())
    try:
        for p in ns.log_paths("controller"):
            p.touch()
            localgroup.watch_log(str(p))
        ns.start(
            "controller",
            MQCTL,
            "serve",
            "--listen",
            GRPC,
            "--raft",
            RAFT,
            "--remoting-port",
            str(REMOTING),
            "--data-dir",
            str(root / "controller"),
            "--heartbeat-timeout",
            "3000",
            "--scan-interval",
            "1000",
        )
        ns.start("namesrv", *namesrv_args(ns, 9876, s.cp), env=rocketmq_env(ns))
        ns.wait_log("controller", r"RocketMQ remoting listening", 60)
        ns.wait_log("namesrv", r"The Name Server boot success", 60)
        for b in BROKERS:
            s.start_broker(b)
        for b in BROKERS:
            ns.wait_log(b, r"boot success", 120)
        yield s
    finally:
        for p in ns.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in ns.procs.values():
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                pass
        ns.close()
        if FAILED:
            print(f"\ne2e logs kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


def diff(broker_set: Set) -> dict:
    """`metadata diff` of broker-a: its one set's document; exit 7 exactly when something differs."""
    p = broker_set.mqctl("metadata", "diff", "-b", "broker-a", "-n", NAMESRV, "-o", "json")
    doc = json.loads(p.stdout)
    assert p.returncode == (7 if doc["differs"] else 0), p.stdout + p.stderr
    (s,) = doc["brokerSets"]
    return s


def same_tables(broker_set: Set) -> dict | None:
    """The set's document once both replicas hold the same topics and groups (the broker's own consumer
    offsets, e.g. its POP revive service's, move between two slave copies: they may differ briefly)."""
    s = diff(broker_set)
    return s if len(s["replicas"]) == 2 and not s["topics"] and not s["subscriptionGroups"] else None


def test_diff_of_live_replicas(broker_set: Set) -> None:
    """Both replicas asked through GET_ALL_*: once the slave has copied its master, the same topics and
    groups."""
    wait_for("a master", broker_set.master, 90)
    s = wait_for("the slave's copy of the metadata", lambda: same_tables(broker_set), 120, interval=2)
    assert s["brokerSet"] == "broker-a"
    assert {r["replica"] for r in s["replicas"]} == {f"127.0.0.1:{port}" for port in BROKERS.values()}
    assert all(r["topics"] > 0 and r["files"]["topics.json"]["request"] == 21 for r in s["replicas"])
    p = broker_set.mqctl("metadata", "diff", "-b", "broker-x", "-n", NAMESRV)
    assert p.returncode == 5 and "the name server lists no live broker of broker-x" in p.stderr
    # the same replicas from the controller (its alive ones) instead of the name server
    p = broker_set.mqctl("metadata", "diff", "-b", "broker-a", "-a", GRPC, "-o", "json")
    doc = json.loads(p.stdout)
    assert p.returncode in (0, 7) and {r["replica"] for r in doc["brokerSets"][0]["replicas"]} == {
        f"127.0.0.1:{port}" for port in BROKERS.values()
    }, p.stdout + p.stderr

    # `health --doctor` asks the same live replicas with the same comparer: nothing lacking (issue 14)
    def doctor_quiet() -> dict | None:
        p = broker_set.mqctl("health", "--doctor", "-a", GRPC, "-b", "broker-a", "-o", "json")
        doc = json.loads(p.stdout)
        drift = doc.get("metadata", {}).get("broker-a")
        lacking = [f for f in doc.get("findings", []) if "lacks" in f["finding"]]
        return doc if drift and "error" not in drift and not lacking else None

    doc = wait_for("the doctor's metadata check of the live replicas", doctor_quiet, 60, interval=2)
    assert {r["replica"] for r in doc["metadata"]["broker-a"]["replicas"]} == {
        f"127.0.0.1:{port}" for port in BROKERS.values()
    }


def test_check_config_online(broker_set: Set) -> None:
    """The live values of both brokers (GET_BROKER_CONFIG, brokerVersionDesc) and of the controller
    (GetControllerConfig): nothing to flag in this set; a broker.conf file beside them is compared with
    them, so a file that disagrees with the running replicas is caught."""
    p = broker_set.mqctl("check", "config", "--online", "-n", NAMESRV, "-a", GRPC, "-o", "json")
    doc = json.loads(p.stdout)
    assert sorted((f["file"], f["kind"]) for f in doc["files"]) == [
        ("broker 127.0.0.1:10911", "broker"),
        ("broker 127.0.0.1:10921", "broker"),
        (f"controller {GRPC}", "controller"),
    ], doc
    assert (p.returncode, doc["verdict"]) == (0, "OK"), [f["message"] for f in doc["findings"]]
    bad = broker_set.ns.root / "b0-bad.conf"
    bad.write_text(
        (broker_set.ns.root / "b0.conf")
        .read_text()
        .replace("allAckInSyncStateSet = true", "allAckInSyncStateSet = false")
    )
    p = broker_set.mqctl("check", "config", str(bad), "--online", "-n", NAMESRV, "-a", GRPC, "-o", "json")
    doc = json.loads(p.stdout)
    assert p.returncode == 2 and doc["verdict"] == "CRIT"
    assert {(f["rule"], f["files"][0]) for f in doc["findings"]} >= {("all-ack", str(bad))}
    assert any(
        f["rule"] == "set-consistency"
        and f["keys"] == ["allAckInSyncStateSet"]
        and "broker 127.0.0.1:10911" in f["files"]
        for f in doc["findings"]
    ), doc["findings"]


def history(broker_set: Set) -> dict:
    p = broker_set.mqctl("history", "-b", "broker-a", "-a", GRPC, "-o", "json")
    assert p.returncode == 0, p.stdout + p.stderr
    return json.loads(p.stdout)


def test_sync_puts_back_what_the_new_master_lacks(broker_set: Set) -> None:
    # the decision history is written from feature level 3 on (a new group starts at 1)
    assert broker_set.mqctl("quorum", "feature-level", "3", "-a", GRPC).returncode == 0
    # the slave in the SyncStateSet (the master's checkSyncStateSet, every 5 s), so that it can be elected
    wait_for("a SyncStateSet of 2", lambda: len(broker_set.sync_state().get("inSyncReplicas", [])) == 2, 60)
    old = broker_set.master()
    assert old is not None
    new = next(b for b in BROKERS if b != old)
    assert broker_set.ns.stop(old, signal.SIGKILL, 30) == -signal.SIGKILL
    wait_for(f"{new} elected master", lambda: broker_set.master() == new, 90)
    # history: the election, the new master answering alone, the dead old master unreachable (exit 0)
    doc = history(broker_set)
    rows = {r["address"]: r for r in doc["metadata"]["broker-a"]["replicas"]}
    old_addr, new_addr = (f"127.0.0.1:{BROKERS[b]}" for b in (old, new))
    elected = [e["election"]["newMasterBrokerId"] for e in doc["entries"] if e.get("election")]
    assert elected[-1] == rows[new_addr]["brokerId"] != rows[old_addr]["brokerId"], elected
    assert (rows[new_addr]["role"], rows[new_addr]["status"], rows[new_addr]["lacks"]) == (
        "master",
        "answered",
        None,
    ), rows
    assert rows[old_addr]["status"] == "unreachable" and rows[old_addr]["error"].startswith(
        f"broker {old_addr}: "
    ), rows
    # what the dead master had and its slave never copied
    store = broker_set.store(old)
    t = md.read_topics(store)
    t.topics["Refunds"] = md.TopicConfig("Refunds", 4, 4, 6, attributes={"message.type": "NORMAL"})
    md.write_topics(store, t)
    g = md.read_subscription_groups(store)
    g.groups["refund-service"] = md.SubscriptionGroupConfig("refund-service", retry_max_times=3)
    md.write_subscription_groups(store, g)
    o = md.read_consumer_offsets(store)
    o.offsets["Refunds@refund-service"] = {0: 0, 1: 0}
    md.write_consumer_offsets(store, o)

    target = f"127.0.0.1:{BROKERS[new]}"
    p = broker_set.mqctl("metadata", "sync", "--from", str(store), "--to", target, "--dry-run")
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[:4] == [
        "would add topic Refunds",
        "would add group refund-service",
        "would set offset Refunds@refund-service queue 0: - -> 0",
        "would set offset Refunds@refund-service queue 1: - -> 0",
    ], p.stdout
    p = broker_set.mqctl("metadata", "sync", "--from", str(store), "--to", target, "--what", "delay", "--yes")
    assert p.returncode == 2 and "no broker request sets a delay offset" in p.stderr
    p = broker_set.mqctl("metadata", "sync", "--from", str(store), "--to", target, "--yes", "-o", "json")
    assert p.returncode == 0, p.stdout + p.stderr
    done = json.loads(p.stdout)["done"]
    assert done[:2] == ["added topic Refunds", "added group refund-service"]
    # the broker has them (asked again: nothing left to copy) and persisted them itself
    p = broker_set.mqctl("metadata", "sync", "--from", str(store), "--to", target, "--dry-run")
    assert p.returncode == 0 and f"{target}: nothing to copy from {store}" in p.stdout, p.stdout
    persisted = md.read_topics(broker_set.store(new)).topics["Refunds"]
    assert (persisted.read_queue_nums, persisted.write_queue_nums, persisted.attributes) == (
        4,
        4,
        {"message.type": "NORMAL"},
    )
    assert md.read_subscription_groups(broker_set.store(new)).groups["refund-service"].retry_max_times == 3
    # a topic the broker refuses (an attribute RocketMQ does not know): exit 3, the broker's answer named
    bogus = broker_set.ns.root / "bogus-store"
    shutil.copytree(store / "config", bogus / "config")
    t = md.read_topics(bogus)
    t.topics["Bogus"] = md.TopicConfig("Bogus", 1, 1, 6, attributes={"no.such.attribute": "x"})
    md.write_topics(bogus, t)
    p = broker_set.mqctl("metadata", "sync", "--from", str(bogus), "--to", target, "--yes")
    assert p.returncode == 3 and f"broker {target} refused topic Bogus (request 17)" in p.stderr, p.stderr
    # the old master comes back as a slave and copies them: the live replicas agree
    broker_set.start_broker(old)
    broker_set.ns.wait_log(old, r"boot success", 120)

    s = wait_for("the old master's copy as a slave", lambda: same_tables(broker_set), 120, interval=2)
    assert not [e for e in s["consumerOffsets"] if e["topic"] == "Refunds"], s["consumerOffsets"]
    assert re.search(r"Refunds", (broker_set.store(old) / "config" / "topics.json").read_text())

    # history asks both again: neither lacks anything the other has (the broker's own consumer offsets
    # may be missing on one replica for a moment, as for same_tables)
    def none_lacking() -> dict | None:
        meta = history(broker_set)["metadata"]["broker-a"]
        return meta if [r["lacks"] for r in meta["replicas"]] == [{}, {}] else None

    meta = wait_for("history: both replicas answer, neither lacks anything", none_lacking, 120, interval=2)
    assert {r["address"]: (r["role"], r["status"]) for r in meta["replicas"]} == {
        old_addr: ("slave", "answered"),
        new_addr: ("master", "answered"),
    }
