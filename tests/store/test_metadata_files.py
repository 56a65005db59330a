"""The readers of a broker's config/ files (mqctl/store/metadata.py) against files written by RocketMQ 5.3.3's
own managers (tests/store/RocketmqConfigDriver.java), files in RocketMQ 4.x's format, RocketMQ's .bak
fallback, and what mqctl writes read back by RocketMQ's managers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mqctl.errors import StoreError
from mqctl.store import fastjson
from mqctl.store import metadata as md

SPEC = """\
topic TopicA 8 8 6
topic TopicB 4 4 6 order message.type=FIFO
group G1 retryMaxTimes=3
group G2 consumeEnable=false
offset TopicA G1 0 12
offset TopicA G1 1 34
offset TopicB G2 3 7
lmq %LMQ%x G1 0 5
delay 1 10
delay 3 99
filter TopicA G1 a>1
orderinfo TopicA G1 0 1000 30000 5 6 7
requestmode TopicA G1 POP 2
mapping TopicS 2 broker-a 1
timer 111 222 333 444
persist
topic TopicC 1 1 6
persist
"""


@pytest.fixture(scope="module")
def written(rocketmq_config, tmp_path_factory) -> Path:
    return rocketmq_config.write(tmp_path_factory.mktemp("rmq") / "store", SPEC)


def test_every_file_as_rocketmq_wrote_it(written: Path) -> None:
    cfg = written / "config"
    t = md.read_topics(written)
    assert t.source == md.Source(str(cfg / "topics.json"))
    assert sorted(t.topics) == ["TopicA", "TopicB", "TopicC"]
    assert (t.topics["TopicB"].read_queue_nums, t.topics["TopicB"].order, t.topics["TopicB"].attributes) == (
        4,
        True,
        {"message.type": "FIFO"},
    )
    assert t.data_version is not None and t.data_version.counter == 3 and t.data_version.state_version == 0

    g = md.read_subscription_groups(written)
    assert g.groups["G1"].retry_max_times == 3 and g.groups["G2"].consume_enable is False
    assert g.groups["G1"].extra == {"groupRetryPolicy": {"type": "CUSTOMIZED"}}  # kept, not typed

    # fastjson's unquoted integer keys: {0:12,1:34}
    assert "{0:12,1:34" in (cfg / "consumerOffset.json").read_text()
    with pytest.raises(json.JSONDecodeError):
        json.loads((cfg / "consumerOffset.json").read_text())
    o = md.read_consumer_offsets(written)
    assert o.offsets == {"TopicA@G1": {0: 12, 1: 34}, "TopicB@G2": {3: 7}}
    assert o.extra == {"groupTopicMap": {"G1": ["TopicA"], "G2": ["TopicB"]}}

    assert md.read_lmq_consumer_offsets(written).lmq_offsets == {"%LMQ%x@G1": 5}
    assert md.read_delay_offsets(written).offsets == {1: 10, 3: 99}
    f = md.read_consumer_filter(written).filters
    assert f["TopicA"]["G1"]["expression"] == "a>1" and f["TopicA"]["G1"]["expressionType"] == "SQL92"
    oi = md.read_consumer_order_info(written).table
    assert list(oi) == ["TopicA@G1"] and oi["TopicA@G1"][0]["popTime"] == 1000
    m = md.read_topic_queue_mapping(written)
    assert m.mappings["TopicS"]["bname"] == "broker-a" and m.mappings["TopicS"]["totalQueues"] == 2
    assert md.read_message_request_mode(written).modes["TopicA"]["G1"]["mode"] == "POP"
    tc = md.read_timer_checkpoint(written)
    assert (
        tc.last_read_time_ms,
        tc.last_timer_log_flush_pos,
        tc.last_timer_queue_offset,
        tc.master_timer_queue_offset,
        tc.data_version.state_version,
    ) == (111, 222, 333, 444, 7)


def test_bak_when_the_file_is_missing_empty_or_unreadable(written: Path, tmp_path: Path) -> None:
    import shutil

    store = tmp_path / "s"
    shutil.copytree(written, store)
    cfg = store / "config"
    # RocketMQ's string2File put the previous topics.json (without TopicC) into topics.json.bak
    for damage, why in (
        (lambda p: p.write_text('{\n\t"topicConfigTable":{"x":'), "unreadable"),
        (lambda p: p.write_text(""), "is empty"),
        (lambda p: p.write_text('{"topicConfigTable":{"T":{"perm":"rw"}}}'), "expected an integer"),
        (lambda p: p.unlink(), "is missing"),
    ):
        shutil.copy(written / "config" / "topics.json", cfg / "topics.json")
        damage(cfg / "topics.json")
        t = md.read_topics(store)
        assert t.source.path == str(cfg / "topics.json.bak") and why in (t.source.fallback or "")
        assert sorted(t.topics) == ["TopicA", "TopicB"]
        assert "topics.json.bak (topics.json" in str(t.source)
    # no file and no .bak: empty, as RocketMQ starts with an empty table
    (cfg / "topics.json.bak").unlink()
    t = md.read_topics(store)
    assert t.topics == {} and t.source.path == "" and "missing" in (t.source.fallback or "")
    # an unreadable file without a .bak is an error, not an empty table
    (cfg / "topics.json").write_text("{")
    with pytest.raises(
        StoreError, match=r"topics.json unreadable \(line 1: not JSON.*\), and no topics.json.bak"
    ):
        md.read_topics(store)
    # an unreadable .bak too
    (cfg / "topics.json.bak").write_text("[1,")
    with pytest.raises(StoreError, match=r"topics.json.bak line 1: not JSON"):
        md.read_topics(store)


def test_rocketmq_4x_files(tmp_path: Path) -> None:
    """As RocketMQ 4.9 writes them: no stateVersion, no attributes, no dataVersion in consumerOffset.json;
    a missing field takes RocketMQ's default."""
    cfg = tmp_path / "config"
    cfg.mkdir()
    (cfg / "topics.json").write_text(
        '{\n\t"dataVersion":{\n\t\t"counter":5,\n\t\t"timestamp":1600000000000'
        "\n\t},"
        '\n\t"topicConfigTable":{\n\t\t"T":{\n\t\t\t"order":false,\n\t\t\t"perm":6,'
        '\n\t\t\t"readQueueNums":4,\n\t\t\t"topicFilterType":"SINGLE_TAG",\n\t\t\t'
        '"topicName":"T",\n\t\t\t"topicSysFlag":0,\n\t\t\t"writeQueueNums":4\n\t\t}'
        "\n\t}\n}"
    )
    (cfg / "subscriptionGroup.json").write_text(
        '{"dataVersion":{"counter":1,"timestamp":1},"subscription'
        'GroupTable":{"G":{"brokerId":0,"consumeBroadcastEnable":true,'
        '"consumeEnable":true,"consumeFromMinEnable":true,"groupName":"G",'
        '"retryMaxTimes":16,"retryQueueNums":1,'
        '"whichBrokerWhenConsumeSlowly":1}}}'
    )
    (cfg / "consumerOffset.json").write_text('{\n\t"offsetTable":{\n\t\t"T@G":{0:3,1:4\n\t\t}\n\t}\n}')
    t = md.read_topics(tmp_path)
    assert t.data_version == md.DataVersion(5, 1600000000000, None)
    assert t.topics["T"].attributes == {} and t.topics["T"].read_queue_nums == 4
    assert "stateVersion" not in fastjson.dumps(t.to_json())
    g = md.read_subscription_groups(tmp_path).groups["G"]
    assert g.consume_message_orderly is False and g.consume_timeout_minute == 15 and g.extra == {}
    o = md.read_consumer_offsets(tmp_path)
    assert o.offsets == {"T@G": {0: 3, 1: 4}} and o.data_version is None
    assert "dataVersion" not in o.to_json() and "groupTopicMap" not in o.to_json()
    # the config directory itself may be named
    assert md.read_consumer_offsets(cfg).offsets == o.offsets


def test_fastjson_integer_keys_only_outside_strings() -> None:
    text = '{"a":{0:1, 12 :2},"s":"x,{3:y","t":["{4:",{-5:6}]}'
    assert fastjson.loads(text, "f") == {"a": {"0": 1, "12": 2}, "s": "x,{3:y", "t": ["{4:", {"-5": 6}]}
    with pytest.raises(StoreError, match=r"^f line 1: not JSON"):
        fastjson.loads('{"a":', "f")


def test_what_mqctl_writes_rocketmq_reads_back(rocketmq_config, written: Path, tmp_path: Path) -> None:
    """Unknown fields kept through a write, the previous content in .bak, and RocketMQ's managers decode
    the result (what a broker does at start)."""
    import dataclasses
    import shutil

    store = tmp_path / "s"
    shutil.copytree(written, store)
    t = md.read_topics(store)
    a = t.topics["TopicA"]
    t.topics["TopicA"] = dataclasses.replace(a, read_queue_nums=2, extra={"futureField": {"x": 1}})
    t.topics["TopicN"] = md.TopicConfig("TopicN", 3, 3, 4, attributes={"queue.type": "BatchCQ"})
    before = (store / "config" / "topics.json").read_bytes()
    md.write_topics(
        store, dataclasses.replace(t, data_version=t.data_version.next_version() if t.data_version else None)
    )
    assert (store / "config" / "topics.json.bak").read_bytes() == before
    assert not (store / "config" / "topics.json.tmp").exists()
    again = md.read_topics(store)
    assert again.topics["TopicA"].extra == {"futureField": {"x": 1}}
    assert again.topics["TopicA"].read_queue_nums == 2
    assert again.data_version is not None and again.data_version.counter == 4

    o = md.read_consumer_offsets(store)
    o.offsets["TopicN@G9"] = {0: 5, 2: 77}
    md.write_consumer_offsets(store, o)
    assert md.read_consumer_offsets(store).extra["groupTopicMap"]["G9"] == ["TopicN"]
    d = md.read_delay_offsets(store)
    d.offsets[2] = 8
    md.write_delay_offsets(store, d)
    g = md.read_subscription_groups(store)
    g.groups["G3"] = md.SubscriptionGroupConfig("G3", retry_max_times=5)
    md.write_subscription_groups(store, g)

    lines = rocketmq_config.dump(store)
    assert "topic TopicA 2 8 6 false {}" in lines
    assert "topic TopicN 3 3 4 false {queue.type=BatchCQ}" in lines
    assert "topicsVersion 4" in lines
    assert {"offset TopicN@G9 0 5", "offset TopicN@G9 2 77", "offset TopicA@G1 1 34"} <= set(lines)
    assert {"delay 1 10", "delay 2 8", "delay 3 99"} <= set(lines)
    assert {"group G3 5 true", "group G2 16 false"} <= set(lines)
