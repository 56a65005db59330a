"""`mqctl recover compare --metadata` and `mqctl metadata sync` (offline) on config/ files written by RocketMQ
5.3.3's own managers (tests/store/RocketmqConfigDriver.java), and what sync writes read back by them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mqctl.store.identity import BrokerIdentity, write_identity

# (persisted twice: RocketMQ's string2File leaves a .bak from the second on)
# the old master: what the new master (a slave that copied its master some time ago) lacks
OLD_MASTER = """\
topic TopicA 8 8 6
topic TopicB 4 4 6 order message.type=FIFO
topic TopicNew 2 2 6
group G1 retryMaxTimes=3
group GNew
offset TopicA G1 0 120
offset TopicA G1 1 340
offset TopicB GNew 3 7
delay 1 10
delay 3 99
persist
persist
"""
NEW_MASTER = """\
topic TopicA 8 8 6
topic TopicB 4 4 6
group G1 retryMaxTimes=3
offset TopicA G1 0 100
offset TopicA G1 1 400
delay 1 10
persist
persist
"""


def replica(driver, root: Path, spec: str, broker_id: int, broker: str = "broker-a") -> Path:
    store = driver.write(root, spec)
    write_identity(store, BrokerIdentity("DefaultCluster", broker, broker_id))
    return store


@pytest.fixture
def pair(rocketmq_config, tmp_path: Path) -> tuple[Path, Path]:
    return (
        replica(rocketmq_config, tmp_path / "old", OLD_MASTER, 1),
        replica(rocketmq_config, tmp_path / "new", NEW_MASTER, 2),
    )


def test_compare_metadata_says_what_each_replica_lacks(pair, cli, unchanged, tmp_path: Path) -> None:
    old, new = map(str, pair)
    with unchanged(tmp_path):
        r = cli("recover", "compare", "--metadata", old, new, "-o", "json")
    assert r.code == 7
    doc = r.json()
    assert doc["differs"] is True and doc["error"]["exitCode"] == 7
    (s,) = doc["brokerSets"]
    assert s["brokerSet"] == "DefaultCluster/broker-a"
    assert [(e["topic"], e["missingFrom"], sorted(e["differs"])) for e in s["topics"]] == [
        ("TopicB", [], ["attributes", "order"]),
        ("TopicNew", [new], []),
    ]
    assert s["topics"][0]["differs"]["attributes"] == {old: {"message.type": "FIFO"}, new: {}}
    assert [(e["group"], e["missingFrom"]) for e in s["subscriptionGroups"]] == [("GNew", [new])]
    assert [
        (e["topic"], e["group"], e["queueId"], e["offsets"], e["behind"], e["missingFrom"])
        for e in s["consumerOffsets"]
    ] == [
        ("TopicA", "G1", 0, {old: 120, new: 100}, {new: 20}, []),
        ("TopicA", "G1", 1, {old: 340, new: 400}, {old: 60}, []),
        ("TopicB", "GNew", 3, {old: 7, new: None}, {}, [new]),
    ]
    assert [(e["level"], e["offsets"]) for e in s["delayOffsets"]] == [(3, {old: 99, new: None})]
    rows = {r["replica"]: r for r in s["replicas"]}
    n = rows[new]
    assert (
        n["topicsMissing"],
        n["groupsMissing"],
        n["offsetsMissing"],
        n["messagesBehind"],
        n["delayBehind"],
        n["brokerId"],
    ) == (1, 1, 1, 20, 1, 2)
    assert rows[old]["messagesBehind"] == 60 and rows[old]["topicsMissing"] == 0
    assert rows[new]["files"]["consumerOffset.json"] == {
        "file": f"{new}/config/consumerOffset.json",
        "fallback": None,
    }

    r = cli("recover", "compare", "--metadata", old, new)
    assert r.code == 7 and r.err == "mqctl: error: the replicas' metadata differ in DefaultCluster/broker-a\n"
    assert "topic TopicNew: missing from " + new in r.out
    assert (
        f'topic TopicB: attributes {old}={{"message.type":"FIFO"}} / {new}={{}}; order {old}=true / '
        f"{new}=false" in r.out
    )
    assert f"offset TopicA@G1 queue 0: {old}=120 / {new}=100 ({new} 20 behind)" in r.out
    assert f"delay level 3: {old}=99 / {new}=-" in r.out
    r = cli("recover", "compare", "--metadata", old, new, "-o", "yaml")
    assert r.code == 7 and "brokerSet: DefaultCluster/broker-a" in r.out


def test_compare_metadata_alike_sets_and_fallback(rocketmq_config, cli, tmp_path: Path) -> None:
    a0 = replica(rocketmq_config, tmp_path / "a0", NEW_MASTER, 1)
    a1 = replica(rocketmq_config, tmp_path / "a1", NEW_MASTER, 2)
    b0 = replica(rocketmq_config, tmp_path / "b0", OLD_MASTER, 1, "broker-b")
    b1 = replica(rocketmq_config, tmp_path / "b1", OLD_MASTER, 2, "broker-b")
    r = cli("recover", "compare", "--metadata", str(a0), str(b0), str(a1), str(b1), "-o", "json")
    assert r.code == 0, r.err
    doc = r.json()
    sets = [(s["brokerSet"], [x["replica"] for x in s["replicas"]], s["differs"]) for s in doc["brokerSets"]]
    assert sets == [
        ("DefaultCluster/broker-a", [str(a0), str(a1)], False),
        ("DefaultCluster/broker-b", [str(b0), str(b1)], False),
    ]
    # a torn topics.json: RocketMQ (and mqctl) read topics.json.bak, and the table says so
    (a1 / "config" / "topics.json").write_text('{"topicConfigTable":{')
    r = cli("recover", "compare", "--metadata", str(a0), str(a1))
    assert r.code == 0, r.err
    assert (
        f"{a1}: topics.json: read {a1}/config/topics.json.bak (topics.json unreadable (line 1: not "
        "JSON" in r.out
    )
    assert "the replicas hold the same topics, groups, consumer and delay offsets" in r.out


def test_compare_usage(pair, cli) -> None:
    old, new = map(str, pair)
    r = cli("recover", "compare", old, new, old)
    assert (r.code, r.err) == (
        2,
        "mqctl: error: recover compare takes two stores, got 3 (--metadata compares more)\n",
    )
    r = cli("recover", "compare", "--metadata", old)
    assert (r.code, r.err) == (2, "mqctl: error: recover compare --metadata takes two or more stores\n")
    (Path(new) / "config" / "consumerOffset.json").write_text("{")
    (Path(new) / "config" / "consumerOffset.json.bak").write_text("[")
    r = cli("recover", "compare", "--metadata", old, new)
    assert r.code == 4 and "consumerOffset.json unreadable" in r.err and "consumerOffset.json.bak" in r.err


def test_sync_puts_back_what_the_new_master_lacks(
    pair, rocketmq_config, cli, unchanged, tmp_path: Path
) -> None:
    old, new = pair
    before = {p.name: p.read_bytes() for p in (new / "config").iterdir()}
    with unchanged(tmp_path):
        r = cli("metadata", "sync", "--from", str(old), "--to", str(new), "--dry-run")
    assert r.code == 0, r.err
    assert r.out.splitlines() == [
        "would add topic TopicNew",
        "would add group GNew",
        "would set offset TopicA@G1 queue 0: 100 -> 120",
        "would set offset TopicB@GNew queue 3: - -> 7",
        "kept topic TopicB: the target has it with other settings (left as it is)",
        "kept offset TopicA@G1 queue 1: the target is further (--allow-rewind moves it back)",
    ]
    with unchanged(old):
        r = cli(
            "metadata",
            "sync",
            "--from",
            str(old),
            "--to",
            str(new),
            "--what",
            "topics,groups,offsets,delay",
            "--backup-dir",
            str(tmp_path / "bk"),
            "--yes",
            "-o",
            "json",
        )
    assert r.code == 0, r.err
    doc = r.json()
    assert (doc["topicsAdded"], doc["groupsAdded"], doc["dryRun"]) == (["TopicNew"], ["GNew"], False)
    assert doc["delayOffsetsSet"] == [{"level": 3, "from": None, "to": 99}]
    assert sorted(Path(f).name for f in doc["filesWritten"]) == [
        "consumerOffset.json",
        "delayOffset.json",
        "subscriptionGroup.json",
        "topics.json",
    ]
    # the backup holds the files replaced; RocketMQ's .bak the previous content
    for name in ("topics.json", "consumerOffset.json", "subscriptionGroup.json", "delayOffset.json"):
        assert (tmp_path / "bk" / "config" / name).read_bytes() == before[name]
        assert (new / "config" / (name + ".bak")).read_bytes() == before[name]
    lines = rocketmq_config.dump(new)  # what the broker will load at its start
    assert {
        "topic TopicNew 2 2 6 false {}",
        "topic TopicB 4 4 6 false {}",
        "group GNew 16 true",
        "offset TopicA@G1 0 120",
        "offset TopicA@G1 1 400",
        "offset TopicB@GNew 3 7",
        "delay 3 99",
        "topicsVersion 3",
    } <= set(lines)
    # what is left: the differing topic, and the offset the new master is ahead on
    r = cli("recover", "compare", "--metadata", str(old), str(new), "-o", "json")
    s = r.json()["brokerSets"][0]
    assert [e["topic"] for e in s["topics"]] == ["TopicB"] and s["subscriptionGroups"] == []
    assert [(e["queueId"], e["behind"]) for e in s["consumerOffsets"]] == [(1, {str(old): 60})]
    # --allow-rewind moves it back; a second run has nothing left to copy
    r = cli("metadata", "sync", "--from", str(old), "--to", str(new), "--allow-rewind", "--yes")
    assert r.code == 0 and "set offset TopicA@G1 queue 1: 400 -> 340" in r.out
    r = cli("metadata", "sync", "--from", str(old), "--to", str(new), "--allow-rewind", "--yes")
    assert r.code == 0 and f"{new}: nothing to copy from {old}" in r.out


HOLDER = (
    "import fcntl,os,sys,time\nfd=os.open(sys.argv[1],os.O_RDWR|os.O_CREAT)\n"
    "fcntl.lockf(fd,fcntl.LOCK_EX)\nprint('locked',flush=True)\ntime.sleep(60)\n"
)


def test_sync_refusals(pair, rocketmq_config, cli, unchanged, tmp_path: Path) -> None:
    old, new = pair
    other = replica(rocketmq_config, tmp_path / "other", NEW_MASTER, 1, "broker-b")
    with unchanged(tmp_path):
        r = cli("metadata", "sync", "--from", str(old), "--to", str(other), "--yes")
        assert (r.code, r.err) == (
            2,
            f"mqctl: error: {old} is a replica of DefaultCluster/broker-a and "
            f"{other} of DefaultCluster/broker-b: metadata is copied within one "
            "broker set\n",
        )
        r = cli("metadata", "sync", "--from", str(old), "--to", str(new), "--what", "topics,acl", "--yes")
        assert (r.code, r.err) == (
            2,
            "mqctl: error: --what 'topics,acl': expected a comma-separated list of "
            "topics, groups, offsets, delay\n",
        )
        r = cli("metadata", "sync", "--from", str(old), "--to", str(old), "--yes")
        assert (r.code, r.err) == (2, "mqctl: error: --from and --to name the same store\n")
        r = cli("metadata", "sync", "--from", str(old), "--to", str(new), input="n\n")
        assert r.code == 2 and "not confirmed" in r.err
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(new / "lock")], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        with unchanged(new / "config"):
            r = cli("metadata", "sync", "--from", str(old), "--to", str(new), "--yes")
        assert r.code == 2 and r.err.startswith(
            f"mqctl: error: {new}/lock: held by another process (is the broker running?); stop it first"
        )
    finally:
        proc.kill()
        proc.wait(10)


def test_sync_into_a_4x_offset_file(pair, cli) -> None:
    """A consumerOffset.json of RocketMQ 4.x (no dataVersion, fastjson's integer keys) stays without one."""
    old, new = pair
    (new / "config" / "consumerOffset.json").write_text(
        '{\n\t"offsetTable":{\n\t\t"TopicA@G1":{0:1,1:2\n\t\t}\n\t}\n}'
    )
    r = cli("metadata", "sync", "--from", str(old), "--to", str(new), "--what", "offsets", "--yes")
    assert r.code == 0, r.err
    from mqctl.store.metadata import read_consumer_offsets

    o = read_consumer_offsets(new)
    assert o.data_version is None and o.offsets == {"TopicA@G1": {0: 120, 1: 340}, "TopicB@GNew": {3: 7}}
