#!/usr/bin/env python3
# ruff: noqa: E501
"""`mqctl recover compare --metadata` on large config/ files, as a ratio to json.loads of the same bytes in
the same run (not a test).

    .venv/bin/python bench/bench_metadata.py [--topics 300000] [--groups 20000] [--offsets 600000] [--repeat 3]

Two replicas of one broker set are generated in a temporary directory in the layout and dialect RocketMQ's
managers write (tab-indented fastjson, consumerOffset.json with unquoted integer queue ids). The second
lacks 1% of the topics, groups and offsets and is behind on another 1% of the offsets. Printed: the file
sizes; the baseline (json.loads of both replicas' topics.json, subscriptionGroup.json and a strict-JSON
copy of consumerOffset.json: the floor any Python reader pays); the typed readers (mqctl.store.metadata)
and the comparison, each as a ratio to the baseline; then the whole command in a subprocess, with its
wall and CPU time and peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mqctl.recover.metadata import compare, load_store

TOPIC = (
    '\t\t"{n}":{{\n\t\t\t"attributes":{{}},\n\t\t\t"order":false,\n\t\t\t"perm":6,\n\t\t\t"readQueueNums":8,'
    '\n\t\t\t"topicFilterType":"SINGLE_TAG",\n\t\t\t"topicName":"{n}",\n\t\t\t"topicSysFlag":0,'
    '\n\t\t\t"writeQueueNums":8\n\t\t}}'
)
GROUP = (
    '\t\t"{n}":{{\n\t\t\t"attributes":{{}},\n\t\t\t"brokerId":0,\n\t\t\t"consumeBroadcastEnable":true,'
    '\n\t\t\t"consumeEnable":true,\n\t\t\t"consumeFromMinEnable":true,\n\t\t\t"consumeMessageOrderly":false,'
    '\n\t\t\t"consumeTimeoutMinute":15,\n\t\t\t"groupName":"{n}",\n\t\t\t"groupRetryPolicy":{{'
    '\n\t\t\t\t"type":"CUSTOMIZED"\n\t\t\t}},\n\t\t\t"groupSysFlag":0,\n\t\t\t"notifyConsumerIdsChangedEnable":true,'
    '\n\t\t\t"retryMaxTimes":16,\n\t\t\t"retryQueueNums":1,\n\t\t\t"whichBrokerWhenConsumeSlowly":1\n\t\t}}'
)
DV = '\t"dataVersion":{\n\t\t"counter":7,\n\t\t"stateVersion":0,\n\t\t"timestamp":1795736034243\n\t},\n'
QUEUES = 4


def generate(store: Path, topics: int, groups: int, offsets: int, lacking: bool) -> None:
    cfg = store / "config"
    cfg.mkdir(parents=True)
    keep = (lambda i: i % 100 != 7) if lacking else (lambda i: True)
    (cfg / "topics.json").write_text(
        "{\n"
        + DV
        + '\t"topicConfigTable":{\n'
        + ",\n".join(TOPIC.format(n=f"Topic{i}") for i in range(topics) if keep(i))
        + "\n\t}\n}"
    )
    (cfg / "subscriptionGroup.json").write_text(
        "{\n"
        + DV
        + '\t"forbiddenTable":{},\n\t"subscriptionGroupTable":{\n'
        + ",\n".join(GROUP.format(n=f"G{i}") for i in range(groups) if keep(i))
        + "\n\t}\n}"
    )
    rows = []
    for k in range(offsets // QUEUES):
        if not keep(k):
            continue
        qs = ",".join(f"{q}:{k * 10 + q - (3 if lacking and k % 100 == 8 else 0)}" for q in range(QUEUES))
        rows.append(f'\t\t"Topic{k % topics}@G{k % groups}":{{{qs}\n\t\t}}')
    (cfg / "consumerOffset.json").write_text(
        "{\n" + DV + '\t"offsetTable":{\n' + ",\n".join(rows) + "\n\t}\n}"
    )


def best(fn, repeat: int) -> tuple[float, float]:
    """(wall, CPU) seconds of the fastest of `repeat` runs: on a loaded machine the CPU time is the figure."""
    runs = []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        runs.append((time.perf_counter() - t0, time.process_time() - c0))
    return min(runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topics", type=int, default=300_000)
    ap.add_argument("--groups", type=int, default=20_000)
    ap.add_argument("--offsets", type=int, default=600_000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        s0, s1 = Path(tmp, "a"), Path(tmp, "b")
        generate(s0, a.topics, a.groups, a.offsets, False)
        generate(s1, a.topics, a.groups, a.offsets, True)
        size = sum(p.stat().st_size for s in (s0, s1) for p in (s / "config").iterdir())
        print(
            f"{a.topics} topics, {a.groups} groups, {a.offsets} offsets per replica; "
            f"{size / 2**20:.1f} MiB of config files in all"
        )
        texts = []
        for s in (s0, s1):
            for name in ("topics.json", "subscriptionGroup.json"):
                texts.append((s / "config" / name).read_text())
            texts.append(_strict((s / "config" / "consumerOffset.json").read_text()))

        base = best(lambda: [json.loads(t) for t in texts], a.repeat)
        read = best(lambda: [load_store(str(s0)), load_store(str(s1))], a.repeat)
        reps = [load_store(str(s0)), load_store(str(s1))]
        cmp = best(lambda: compare(reps), a.repeat)
        doc = compare(reps)
        print(f"baseline json.loads of the same documents: {base[0]:.2f} s wall, {base[1]:.2f} s CPU")
        for what, (w, c) in (("typed readers (both replicas)", read), ("comparison", cmp)):
            print(f"{what + ':':42} {w:.2f} s wall, {c:.2f} s CPU = {c / base[1]:.1f}x baseline CPU")
        print(
            f"  differences: {len(doc['topics'])} topics, {len(doc['subscriptionGroups'])} groups, "
            f"{len(doc['consumerOffsets'])} offsets"
        )
        mqctl = str(Path(sys.executable).with_name("mqctl"))
        t0 = time.perf_counter()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        p = subprocess.run(
            [mqctl, "recover", "compare", "--metadata", str(s0), str(s1), "-o", "json"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        wall = time.perf_counter() - t0
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = ru.ru_utime + ru.ru_stime - before.ru_utime - before.ru_stime
        print(
            f"mqctl recover compare --metadata -o json: {wall:.2f} s wall, {cpu:.2f} s CPU "
            f"({cpu / base[1]:.1f}x baseline CPU), peak RSS {ru.ru_maxrss / 1024:.0f} MiB, exit {p.returncode}"
        )
        print(f"load average during the run: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


def _strict(text: str) -> str:
    from mqctl.store.fastjson import loads

    return json.dumps(loads(text, "consumerOffset.json"))


if __name__ == "__main__":
    main()
