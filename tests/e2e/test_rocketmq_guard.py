"""Issue 31 with RocketMQ 5.3.3's own brokers (../shared/rocketmq-broker, unchanged) behind a `mqctl serve`
group: a broker set of three and a name server; the master acknowledges messages no slave has (both
slaves stopped, allAckInSyncStateSet=false, the SyncStateSet shrunk to the master), is killed, and a
lagging slave is elected uncleanly. The old master restarts behind `mqctl recover guard`, which saves
the tail before RocketMQ's AutoSwitchHAClient truncates it (`Truncate slave log to N`); RocketMQ's own
consumer then misses the acknowledged messages (the loss the guard exists for), `mqctl recover replay`
publishes them, a replay killed half way and resumed sends none twice, and the consumer reads every
acknowledged message, by UNIQ_KEY. Bad input: a salvage of another broker set, a cut Parquet file, a
missing topic, a broker that refuses.

Everything runs in a private network namespace with only loopback (tests/rocketmq_fixtures.py)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from rocketmq_fixtures import MQCTL
from test_rocketmq_broker_set import (
    BROKER_SET,
    BROKERS,
    CONTROLLERS,
    GRPC,
    NAMESRV,
    BrokerSet,
    one_set,
    records,
    running_broker_set,
    wait_for,
)

pytestmark = pytest.mark.slow

LOG_ROOT: Path | None = None
FAILED = False
TOPIC = "E2eTopic"  # RocketMQDriver's loop sends to it
LEASE_MS = 10000


def oks(path: Path) -> list[list[str]]:
    text = path.read_text() if path.exists() else ""
    return [ln.split() for ln in text.splitlines() if ln.startswith("ok ")]


@pytest.fixture(scope="module")
def bset() -> Iterator[BrokerSet]:
    # the master acknowledges what it alone holds once the stopped slaves are out of the SyncStateSet
    # (test_rocketmq_broker_set.py's test_unclean_election_refused_then_enabled tells why these keys)
    conf: dict[str, object] = {
        "allAckInSyncStateSet": "false",
        "haMaxTimeSlaveNotCatchup": 2000,
        "checkSyncStateSetPeriod": 1000,
        "haHousekeepingInterval": 3000,
        "haSendHeartbeatInterval": 1000,
        "controllerHeartBeatTimeoutMills": LEASE_MS,
    }
    with running_broker_set(
        sys.modules[__name__], "mqctl-e2e-guard-", conf=conf, feature_level=3, stop=signal.SIGKILL
    ) as bs:
        for b in BROKERS:
            text = wait_for(
                f"{b}'s brokerIdentity",
                lambda b=b: (
                    (bs.store(b) / "brokerIdentity").exists() and (bs.store(b) / "brokerIdentity").read_text()
                ),
                60,
            )
            bs.ids[b] = int(text.strip().rsplit("#", 1)[1])
        yield bs


def read_topic(bs: BrokerSet) -> list[tuple[str, int, str]]:
    """RocketMQ's own consumer (DefaultMQPullConsumer): (KEYS, commitlog offset, UNIQ_KEY) of every
    message of every queue of the topic."""
    lines = bs.driver("read", NAMESRV, TOPIC)
    return [(ln.split()[1], int(ln.split()[2]), ln.split()[3]) for ln in lines if ln.startswith("msg ")]


def unclean_failover(bs: BrokerSet) -> tuple[str, str, dict[str, tuple[int, str]]]:
    """The master takes writes alone and is killed; a lagging slave is elected uncleanly. -> (old, new,
    acked: KEYS -> (offset, UNIQ_KEY))."""
    ns = bs.ns
    wait_for(
        "a SyncStateSet of 3", lambda: len(one_set(bs.sync_state())["inSyncReplicas"]) == 3, 90, interval=1
    )
    # the topic first, on every replica (a slave copies the master's topics every few seconds: an
    # elected slave without it would hold the messages and refuse every pull and send of the topic)
    warm = {
        ln.split()[1]: (int(ln.split()[2]), ln.split()[5])
        for ln in bs.driver("send", NAMESRV, TOPIC, "warm", "10")
        if ln.startswith("ok ")
    }
    assert len(warm) == 10

    def everywhere() -> bool:
        files = [bs.store(b) / "config" / "topics.json" for b in BROKERS]
        return all(f.exists() and TOPIC in f.read_text(errors="replace") for f in files)

    wait_for(f"{TOPIC} in every replica's topics.json", everywhere, 60, interval=1)
    old, _ = bs.master()
    slaves = [b for b in BROKERS if b != old]
    stop = bs.start_loop("loop-guard", "guard")
    out = bs.root / "loop-guard.out"
    wait_for("acknowledged sends", lambda: len(oks(out)) >= 10, 60, interval=0.1)
    for b in slaves:
        bs.pause(b)
    wait_for(
        "a SyncStateSet of the master alone",
        lambda: [r["brokerId"] for r in one_set(bs.sync_state())["inSyncReplicas"]] == [bs.ids[old]],
        40,
        interval=0.2,
    )
    shrunk = len(oks(out))
    wait_for("sends acknowledged by the master alone", lambda: len(oks(out)) >= shrunk + 40, 60, interval=0.1)
    stop.touch()
    assert ns.procs["loop-guard"].wait(60) == 0
    ns.procs.pop("loop-guard")
    from mqctl.sim.rocketmq import log_end

    end = log_end(bs.store(old))
    wait_for(
        "the master's final maxOffset at the controller",
        lambda: (
            [
                r["maxOffset"]
                for r in one_set(bs.sync_state())["inSyncReplicas"]
                if r["brokerId"] == bs.ids[old]
            ]
            == [end]
        ),
        30,
        interval=0.3,
    )
    assert ns.stop(old, signal.SIGKILL, 30) == -signal.SIGKILL
    acked = {**warm, **{o[1]: (int(o[2]), o[5]) for o in oks(out)}}
    for b in slaves:
        ns.procs[b].send_signal(signal.SIGCONT)
    wait_for(
        "the slaves alive and no master",
        lambda: not one_set(bs.sync_state()).get("masterAddress"),
        LEASE_MS / 1000 + 30,
        interval=0.5,
    )
    p = bs.mqctl("updateControllerConfig", "-k", "enableElectUncleanMaster", "-v", "true", "-a", GRPC)
    assert p.returncode == 0, p.stdout + p.stderr
    try:
        new, _ = wait_for(
            "an unclean election", lambda: (lambda r: r if r[0] in slaves else None)(bs.master()), 30
        )
    finally:
        p = bs.mqctl("updateControllerConfig", "-k", "enableElectUncleanMaster", "-v", "false", "-a", GRPC)
        assert p.returncode == 0, p.stdout + p.stderr
    bs.wait_broker_log(new, r"Begin to change to master, brokerName:broker-a", 60)
    return old, new, acked


def salvaged_uniq_keys(salvage: Path) -> set[str]:
    import pyarrow.dataset as ds

    t = ds.dataset(salvage / "messages", format="parquet", partitioning="hive").to_table(columns=["uniqKey"])
    return set(t.column("uniqKey").to_pylist())


def synthetic_salvage(root: Path, out: Path, *, broker: str, topic: str, n: int) -> Path:
    """A salvage (the guard's writer) of n new messages of `topic` for broker set `broker`."""
    from mqctl.pipeline.guard import _salvage_tail
    from mqctl.store.commitlog import COMMITLOG_DIR, CommitLogWriter, Message
    from mqctl.store.epochfile import EpochEntry, write_epoch_file
    from mqctl.store.identity import BrokerIdentity, write_identity

    root.mkdir()
    write_identity(root, BrokerIdentity("DefaultCluster", broker, 1))
    write_epoch_file(root, [EpochEntry(1, 0)])
    with CommitLogWriter(root / COMMITLOG_DIR, 1 << 20) as w:
        for i in range(n):
            key = f"{root.name}-{i}"
            w.append(
                Message(
                    topic,
                    f"body of {key}".encode(),
                    {"KEYS": key, "TAGS": "tag", "UNIQ_KEY": os.urandom(16).hex().upper()},
                    born_timestamp=1_700_000_000_000 + i,
                )
            )
    out.mkdir(exist_ok=True)
    path, _ = _salvage_tail(root, 0, out, root.name, {"bytesToLose": 0})
    return path


def replay(bs: BrokerSet, *args: str, timeout: float = 120) -> tuple[int, dict, str]:
    p = bs.mqctl("recover", "replay", *args, "-o", "json", timeout=timeout)
    doc = json.loads(p.stdout) if p.stdout.strip() else {}
    return p.returncode, doc, p.stderr


def test_guard_salvage_and_replay_leave_no_acknowledged_message_behind(bset: BrokerSet) -> None:
    bs, ns = bset, bset.ns
    old, new, acked = unclean_failover(bs)
    on_new = {k for k, _ in records(bs.store(new))}
    lost = {k: v for k, v in acked.items() if k not in on_new}
    assert len(lost) >= 20, f"the unclean election should have lost acknowledged messages ({len(lost)})"
    print(f"{old} -> {new}: {len(lost)} acknowledged messages only on the old master")

    # the old master restarts behind the guard: the tail is saved first
    salvage_root = bs.root / "salvage"
    salvage_root.mkdir()
    before = {p.name: p.stat().st_mtime_ns for p in (bs.store(old) / "commitlog").iterdir()}
    p = bs.mqctl(
        "recover",
        "guard",
        str(bs.store(old)),
        "-a",
        GRPC,
        "--out",
        str(salvage_root),
        "-n",
        NAMESRV,
        "-o",
        "json",
    )
    assert p.returncode == 10, p.stdout + p.stderr
    g = json.loads(p.stdout)
    assert g["outcome"] == "saved" and g["master"]["brokerId"] == bs.ids[new], g
    assert {p.name: p.stat().st_mtime_ns for p in (bs.store(old) / "commitlog").iterdir()} == before
    salvage = Path(g["salvage"])
    saved = salvaged_uniq_keys(salvage)
    assert {u for _, u in lost.values()} <= saved, "the guard did not save every lost message"
    # again, over RocketMQ's own protocol to the controllers (mqctl serve --remoting-port), as a broker
    # asks them: the same decision, and the salvage found by its digest
    remoting = ";".join(f"127.0.0.1:{c['remoting']}" for c in CONTROLLERS)
    p = bs.mqctl(
        "recover",
        "guard",
        str(bs.store(old)),
        "-a",
        remoting,
        "--protocol",
        "remoting",
        "--out",
        str(salvage_root),
        "-o",
        "json",
    )
    assert p.returncode == 10, p.stdout + p.stderr
    again = json.loads(p.stdout)
    assert again["outcome"] == "already-saved" and again["consistentPoint"] == g["consistentPoint"], again
    assert again["salvage"] == g["salvage"] and len(list(salvage_root.iterdir())) == 1

    # the pointers: mqctl history and health --doctor name this salvage and the replay command
    hist = bs.mqctl_json("history", "-b", BROKER_SET, "-a", GRPC)
    guards = [e["election"]["guard"] for e in hist["entries"] if (e.get("election") or {}).get("guard")]
    assert guards and guards[-1]["salvageName"] == salvage.name, (guards, salvage.name)
    p = bs.mqctl("health", "--doctor", "-b", BROKER_SET, "-a", GRPC, "-o", "json")
    fixes = [f["fix"] for f in json.loads(p.stdout)["findings"]]
    assert any(f"mqctl recover replay DIR/{salvage.name}" in f for f in fixes), (fixes, p.stderr)

    # the broker starts and RocketMQ truncates exactly where the guard said
    at = bs.start_broker(old)
    m = bs.wait_broker_log(old, r"Truncate slave log to (\d+) success", 120, after=at)
    assert int(m.group(1)) == g["consistentPoint"], (m.group(0), g["consistentPoint"])
    # without the guard this is the end of it: RocketMQ's consumer misses every lost message
    read = read_topic(bs)
    read_uniq = {u for _, _, u in read}
    assert not {u for _, u in lost.values()} & read_uniq, "the lost messages should not be readable yet"
    # replay, killed half way (kill -9), then resumed: none sent twice
    dry = replay(bs, str(salvage), "-n", NAMESRV, "--dry-run")
    assert dry[0] == 0 and dry[1]["wouldSend"] == len(saved) and dry[1]["sent"] == 0, dry
    assert not (salvage / ".mqctl-replay").exists()
    half = ns.start("replay-half", MQCTL, "recover", "replay", str(salvage), "-n", NAMESRV, "--rate", "8")
    ck = salvage / ".mqctl-replay" / "checkpoint.log"
    wait_for(
        "a few messages replayed",
        lambda: ck.exists() and ck.read_text().count("\tsent\t") >= 5,
        60,
        interval=0.1,
    )
    half.send_signal(signal.SIGKILL)
    half.wait(10)
    ns.procs.pop("replay-half")
    code, doc, err = replay(bs, str(salvage), "-n", NAMESRV)
    assert code == 0, (doc, err)
    assert doc["failed"] == 0 and doc["doneEarlier"] + doc["sent"] + doc["alreadyPresent"] == len(saved), doc
    assert doc["doneEarlier"] >= 5, doc
    read = read_topic(bs)
    counts = Counter(u for _, _, u in read)
    missing = [k for k, (_, u) in acked.items() if counts[u] == 0]
    assert not missing, f"{len(missing)} acknowledged messages not read back: {missing[:10]}"
    twice = [u for u in saved if counts[u] > 1]
    assert not twice, f"sent twice: {twice[:10]}"
    # what each replayed message kept: topic, queue, body, flag, KEYS, TAGS, UNIQ_KEY, the born timestamp
    # (also in a property, with the born host)
    import pyarrow.dataset as ds

    from mqctl.store.commitlog import CommitLog

    rows = ds.dataset(salvage / "messages", format="parquet", partitioning="hive").to_table().to_pylist()
    stored = {}
    for r in CommitLog(bs.store(new) / "commitlog").iter_records(strict=False):
        props = r.properties_dict()
        if "MQCTL_ORIGIN_BORN_TIMESTAMP" in props:
            stored[props.get("UNIQ_KEY")] = (r, props)
    assert len(stored) == len(rows) == len(saved)
    for row in rows:
        rec, props = stored[row["uniqKey"]]
        assert (rec.topic, rec.queue_id, rec.body, rec.flag, rec.born_timestamp) == (
            row["topic"],
            row["queueId"],
            row["body"],
            row["flag"],
            row["bornTimestamp"],
        ), row["uniqKey"]
        assert (props.get("KEYS"), props.get("TAGS")) == (row["keys"], row["tags"]), props
        assert props["MQCTL_ORIGIN_BORN_TIMESTAMP"] == str(row["bornTimestamp"])
        assert props["MQCTL_ORIGIN_BORN_HOST"] == row["bornHost"]
    # a second replay sends nothing
    code, doc, err = replay(bs, str(salvage), "-n", NAMESRV)
    assert code == 0 and doc["sent"] == 0 and doc["doneEarlier"] == len(saved), (doc, err)
    # a fresh checkpoint (a copy of the salvage): every message found in the cluster by UNIQ_KEY
    copy = bs.root / "salvage-copy"
    shutil.copytree(salvage, copy, ignore=shutil.ignore_patterns(".mqctl-replay"))
    code, doc, err = replay(bs, str(copy), "-n", NAMESRV)
    assert code == 0 and doc["sent"] == 0 and doc["alreadyPresent"] == len(saved), (doc, err)
    assert Counter(u for _, _, u in read_topic(bs)) == counts
    assert g["replay"] == f"mqctl recover replay {salvage} -n '{NAMESRV}'"

    # bad input: one line, a documented exit code, nothing sent
    # a cut Parquet file
    cut = bs.root / "salvage-cut"
    shutil.copytree(salvage, cut, ignore=shutil.ignore_patterns(".mqctl-replay"))
    part = next((cut / "messages").rglob("*.parquet"))
    part.write_bytes(part.read_bytes()[: part.stat().st_size // 2])
    code, doc, err = replay(bs, str(cut), "-n", NAMESRV)
    assert code == 4 and "cut or corrupt" in err and err.count("\n") == 1, (code, err)
    # a salvage of another broker set
    other = synthetic_salvage(bs.root / "store-z", bs.root / "salv-z", broker="broker-z", topic=TOPIC, n=3)
    code, doc, err = replay(bs, str(other), "-n", NAMESRV)
    assert code == 2 and "broker-z" in err and err.count("\n") == 1, (code, err)
    # a topic that does not exist: the report gives the command that creates it
    nt = synthetic_salvage(
        bs.root / "store-nt", bs.root / "salv-nt", broker=BROKER_SET, topic="NoSuchTopic", n=3
    )
    code, doc, err = replay(bs, str(nt), "-n", NAMESRV)
    assert code == 3 and doc["failed"] == 3 and doc["sent"] == 0, (doc, err)
    (mt,) = doc["missingTopics"]
    assert mt["topic"] == "NoSuchTopic" and "mqadmin updateTopic" in mt["create"], mt
    # a broker that refuses: a slave (SERVICE_NOT_AVAILABLE)
    slave = next(b for b in BROKERS if b not in (new,))
    rf = synthetic_salvage(bs.root / "store-rf", bs.root / "salv-rf", broker=BROKER_SET, topic=TOPIC, n=3)
    code, doc, err = replay(bs, str(rf), "--broker-addr", bs.address(slave))
    assert code == 3 and doc["failed"] == 3 and doc["sent"] == 0, (doc, err)
    assert all("refused" in f["reason"] for f in doc["failures"]), doc["failures"]
    assert Counter(u for _, _, u in read_topic(bs)) == counts
