#!/usr/bin/env python3
# ruff: noqa: E501
"""Salvage and analyze throughput of the Spark pipeline, as ratios to `cat` and to a plain single-process
Python reader of the same bytes in the same run; Spark's start-up cost reported apart (not a test).

    .venv/bin/python bench/bench_pipeline.py [--size 2G] [--file-size 256M] [--range-size 64M] [--master local[*]]

It generates a replica store of --size with tests/gen_large_store.py (one epoch) and a source store that
shares only the first record and then leads epoch 2: the plan truncates the replica to that record's end,
so salvage reads (and writes to Parquet) almost the whole replica, and analyze reads all of it.
Rows: `cat` (page cache warm), the store module's sequential reader (`CommitLog.iter_records` with CRC,
1 process), the pipeline's per-range parser without Spark (1 process), then Spark analyze and salvage,
each the best of --repeat runs on one session.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from gen_large_store import generate, parse_size  # noqa: E402

from mqctl.store.commitlog import COMMITLOG_DIR, CommitLog, CommitLogWriter, Message  # noqa: E402
from mqctl.store.epochfile import EpochEntry, write_epoch_file  # noqa: E402
from mqctl.store.identity import BrokerIdentity, write_identity  # noqa: E402


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def make_source(replica: Path, source: Path, file_size: int) -> int:
    """A source that holds the replica's first record (epoch 1) and leads epoch 2 after it."""
    first = next(CommitLog(replica / COMMITLOG_DIR).iter_records())
    source.mkdir(parents=True)
    write_identity(source, BrokerIdentity("bench-cluster", "bench-broker", 2))
    (source / COMMITLOG_DIR).mkdir(parents=True)
    with open(replica / COMMITLOG_DIR / f"{0:020d}", "rb") as fh:
        head = fh.read(first.size)
    with open(source / COMMITLOG_DIR / f"{0:020d}", "wb") as fh:
        fh.write(head)
        fh.truncate(file_size)
    with CommitLogWriter(source / COMMITLOG_DIR, file_size) as w:
        for i in range(100):
            w.append(Message("BenchTopic", b"new master %d" % i, {"UNIQ_KEY": f"src-{i}"}))
    write_epoch_file(source, [EpochEntry(1, 0), EpochEntry(2, first.size)])
    return first.size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="1G")
    ap.add_argument("--file-size", default="256M")
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--range-size", default="64M")
    ap.add_argument("--master", default=os.environ.get("MQCTL_SPARK_MASTER", "local[*]"))
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--keep", action="store_true", help="keep the generated stores and output")
    a = ap.parse_args()

    from mqctl.pipeline.analyze import prepare_analyze, run_analyze
    from mqctl.pipeline.engine import spark_session
    from mqctl.pipeline.ranges import store_ranges
    from mqctl.pipeline.salvage import prepare, run_salvage
    from mqctl.pipeline.tasks import parse_task

    tmp = Path(tempfile.mkdtemp(prefix="mqctl-bench-pipeline-"))
    replica, source, out = tmp / "replica", tmp / "source", tmp / "out"
    fs, rs = parse_size(a.file_size), parse_size(a.range_size)
    print(f"generating {a.size} in {replica} ...", file=sys.stderr)
    gen = generate(replica, parse_size(a.size), fs, a.record_size, 1 << 62, quiet=True)
    cut = make_source(replica, source, fs)
    log = CommitLog(replica / COMMITLOG_DIR)
    files = [str(f.path) for f in log.files]
    data = gen["maxOffset"]
    mib = data / (1 << 20)
    subprocess.run(["cat", *files], stdout=subprocess.DEVNULL, check=True)   # warm the page cache

    rows: list[tuple[str, float, str]] = []
    t_cat = best(lambda: subprocess.run(["cat", *files], stdout=subprocess.DEVNULL, check=True), a.repeat)
    rows.append(("cat (all files)", t_cat, "files incl. preallocated tail"))

    def plain() -> None:
        n = 0
        for r in CommitLog(replica / COMMITLOG_DIR).iter_records(check_crc=True, strict=False):
            n += len(r.topic) + len(r.properties)
        assert n

    t_plain = best(plain, 1)
    rows.append(("plain Python reader, 1 process", t_plain, "CommitLog.iter_records, CRC on"))

    def parser() -> None:
        n = 0
        for br in store_ranges(replica, range_size=rs):
            n += len(parse_task(br))
        assert n == gen["records"], (n, gen["records"])

    t_parse = best(parser, a.repeat)
    rows.append(("pipeline parser, 1 process", t_parse, "per-range numpy parser, no Spark"))

    t0 = time.perf_counter()
    with spark_session(a.master, app_name="mqctl bench") as spark:
        t_start = time.perf_counter() - t0
        sc = spark.sparkContext
        t0 = time.perf_counter()
        sc.parallelize(range(sc.defaultParallelism), sc.defaultParallelism).map(lambda x: x).count()
        t_warm = time.perf_counter() - t0
        ainp = prepare_analyze([str(replica)], range_size=rs)
        doc: dict = {}

        def analyze() -> None:
            doc.update(run_analyze(spark, ainp, None, show_progress=False))

        t_an = best(analyze, a.repeat)
        assert sum(q["messages"] for q in doc["queues"]) == gen["records"]
        rows.append((f"Spark analyze ({len(ainp.ranges)} ranges)", t_an, f"{a.master}"))
        sinp = prepare([str(replica), str(source)], range_size=rs)
        sdoc: dict = {}

        def salvage() -> None:
            sdoc.update(run_salvage(spark, sinp, out, show_progress=False))

        t_sv = best(salvage, a.repeat)
        assert sdoc["messages"] == gen["records"] - 1, sdoc["messages"]
        parquet = sum(p.stat().st_size for p in (out / "messages").rglob("*.parquet"))
        rows.append((f"Spark salvage ({len(sinp.candidates)} ranges)", t_sv,
                     f"writes {parquet / (1 << 20):.0f} MiB of Parquet"))

    print(f"replica: {gen['records']} records of ~{a.record_size} B, {mib:.0f} MiB of data in {len(files)} "
          f"files of {fs >> 20} MiB; salvage reads from offset {cut}; cores: {os.cpu_count()}")
    print(f"Spark start-up (not in the rows below): session {t_start:.2f} s, first job (Python workers) "
          f"{t_warm:.2f} s")
    print(f"{'what':38} {'s':>8} {'MiB/s':>9} {'x plain':>8} {'x cat':>7}  note")
    for name, t, note in rows:
        print(f"{name:38} {t:8.3f} {mib / t:9.1f} {t_plain / t:8.2f} {t_cat / t:7.3f}  {note}")
    print("MiB/s = record data (up to the max offset) / time; x plain, x cat = speed relative to those rows "
          "(>1 = faster)")
    if a.keep:
        print(f"kept {tmp}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
