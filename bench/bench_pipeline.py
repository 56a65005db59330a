#!/usr/bin/env python3
# ruff: noqa: E501
"""The pipeline's figures of issue 15 in one run, as ratios on the same bytes (not a test):

    .venv/bin/python bench/bench_pipeline.py [--size 2G | --quick] [--master local[2]] [--profile]
                                             [--executor-only]

It generates a replica store of --size with tests/gen_large_store.py (one epoch) and a source store that
shares only the first record and then leads epoch 2: the plan truncates the replica to that record's end,
so salvage reads (and writes to Parquet) almost the whole replica, and analyze reads all of it.

Rows, each the best of --repeat runs (page cache warm; `cat` and `inspect --deep` run in turn, and the parser
and the Spark rows: the ratios of the goals compare runs of the same minutes): `cat`; the plain single-process Python reader (a
`decode_record` loop with zlib's CRC, the reader before the walker); `recover inspect --deep`
(`inspect_stores(deep=True)`: CRC of every message, a walker process per core); the numpy range parser alone in one process (CRC on);
analyze and salvage on the local engine (one process, no JVM) and on Spark (--master, default local[2]),
Parquet output included. Spark's session start and first job are reported apart. Memory: the driver's
peak RSS (this Python process); in the Spark salvage rows the peak of the JVM's (in local mode the driver
and the executor) and the Python workers' anonymous memory; then the same salvage on a standalone cluster
(a master and one worker with 2 cores on loopback, --executor-memory; in a child process, whose first
Spark session it is), whose executor's memory (its JVM and its Python workers) is what "salvage of a 2 GiB
store fits in 1 GiB of executor memory" counts; --executor-only: only that.
Anonymous memory (Pss_Anon, sampled every 0.05 s, the peak of the sum): the mapped store files are not
counted (their pages are the kernel's page cache, shared by every process that maps them and dropped when
memory is needed); RSS would count them in every worker that read a file.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from gen_large_store import generate, parse_size  # noqa: E402

from mqctl.store.commitlog import (  # noqa: E402
    BLANK_MAGIC,
    COMMITLOG_DIR,
    CommitLog,
    CommitLogWriter,
    Message,
    decode_record,
)
from mqctl.store.epochfile import EpochEntry, write_epoch_file  # noqa: E402
from mqctl.store.identity import BrokerIdentity, write_identity  # noqa: E402

CPU: dict[int, float] = {}
FIRST: dict[int, tuple[float, float]] = {}


class TreeCpu:
    """CPU seconds (user + sys) of this process and of its descendants, living (their own time and that
    of the children they reaped) or reaped by us: Spark's JVM and its Python workers included; with
    `root`, of the living descendants of that process only (not its own). `since` adds each process's
    growth alone: a descendant that exits unreaped by one of ours (Spark's idle Python workers) takes its
    whole time out of a plain sum, which then fell below the start (a negative CPU time for the rows
    measured while one went away); its time since the start is lost instead, at most what it spent."""

    def __init__(self, root: int | None = None) -> None:
        self.root = root
        me, tick = root or os.getpid(), os.sysconf("SC_CLK_TCK")
        procs: dict[int, tuple[int, int]] = {}
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    stat = Path(f"/proc/{d}/stat").read_text()
                except OSError:
                    continue
                f = stat[stat.rindex(")") + 2 :].split()
                procs[int(d)] = (int(f[1]), sum(int(x) for x in f[11:15]))  # ppid; utime stime cutime cstime

        def mine(p: int) -> bool:
            while p > 1:
                p = procs.get(p, (0, 0))[0]
                if p == me:
                    return True
            return False

        self.each = {p: c / tick for p, (_, c) in procs.items() if mine(p)}
        t = os.times()
        self.own = 0.0 if root is not None else t.user + t.system + t.children_user + t.children_system

    def since(self, start: TreeCpu) -> float:
        grown = sum(max(0.0, c - start.each.get(p, 0.0)) for p, c in self.each.items())
        return self.own - start.own + grown


def rounds(fns, repeat: int) -> list[float]:
    """Each of `fns` once per round, `repeat` rounds, and the best wall time of each: this VM's speed
    drifts by a tenth or more over minutes, and rows whose ratio is a goal (cat and inspect --deep, the
    parser and the Spark rows) are measured in the same rounds so that the drift weighs on both. The
    CPU time (user + sys) of the same runs, this process's and its descendants' (`TreeCpu`), the least,
    in CPU[id(fn)]: on a loaded machine the wall time says more about the others than about us. The
    first run's (wall, CPU) in FIRST[id(fn)]."""
    times: dict[int, list[float]] = {id(f): [] for f in fns}
    cpus: dict[int, list[float]] = {id(f): [] for f in fns}
    for _ in range(repeat):
        for fn in fns:
            c0, t0 = TreeCpu(), time.perf_counter()
            fn()
            c1 = TreeCpu()
            times[id(fn)].append(time.perf_counter() - t0)
            cpus[id(fn)].append(c1.since(c0))
    for fn in fns:
        CPU[id(fn)] = min(cpus[id(fn)])
        FIRST[id(fn)] = (times[id(fn)][0], cpus[id(fn)][0])
    return [min(times[id(fn)]) for fn in fns]


def best(fn, repeat: int) -> float:
    return rounds([fn], repeat)[0]


def make_source(replica: Path, source: Path, file_size: int) -> int:
    """A source that holds the replica's first record (epoch 1) and leads epoch 2 after it."""
    with open(replica / COMMITLOG_DIR / f"{0:020d}", "rb") as fh:
        head = fh.read(1 << 16)
    first = decode_record(head, 0, 0)
    source.mkdir(parents=True)
    write_identity(source, BrokerIdentity("bench-cluster", "bench-broker", 2))
    (source / COMMITLOG_DIR).mkdir(parents=True)
    with open(source / COMMITLOG_DIR / f"{0:020d}", "wb") as fh:
        fh.write(head[: first.size])
        fh.truncate(file_size)
    with CommitLogWriter(source / COMMITLOG_DIR, file_size) as w:
        for i in range(100):
            w.append(Message("BenchTopic", b"new master %d" % i, {"UNIQ_KEY": f"src-{i}"}))
    write_epoch_file(source, [EpochEntry(1, 0), EpochEntry(2, first.size)])
    return first.size


def rocketmq_walk(
    files: list[str], file_size: int, passes: int, tmp: Path
) -> tuple[float, float, int] | None:
    """RocketMQ's recovery walk (bench/RocketmqWalk.java: CommitLog.checkMessageAndReturnSize with
    checkCRCOnRecover over each mapped file, RocketMQ's classes from ../shared/rocketmq-broker/lib), one
    JVM, a warm-up pass for the JIT and then `passes`: the best pass's (wall, CPU of the JVM) and its
    record count; None without java or RocketMQ's jars."""
    sys.path.insert(0, str(ROOT / "tests"))
    from rocketmq_fixtures import LIB, broker_classpath

    if shutil.which("javac") is None or not (LIB / "classpath.txt").is_file():
        return None
    out = tmp / "rocketmq-walk"
    out.mkdir(exist_ok=True)
    subprocess.run(
        [
            "javac",
            "-nowarn",
            "-cp",
            os.pathsep.join(broker_classpath()),
            "-d",
            str(out),
            str(ROOT / "bench" / "RocketmqWalk.java"),
        ],
        check=True,
    )
    r = subprocess.run(
        [
            "java",
            "-Xms1g",
            "-Xmx1g",
            "-cp",
            os.pathsep.join([str(out), *broker_classpath()]),
            "RocketmqWalk",
            str(1 + passes),
            str(file_size),
            *files,
        ],
        check=True,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    runs = []
    for line in r.stdout.splitlines():
        if line.startswith("pass "):
            f = line.split()
            if int(f[1]) > 0:
                runs.append((float(f[7]), float(f[9]), int(f[3])))
    return min(runs)


def walker_alone(store: Path, name: str) -> int:
    """The record walker alone on one core, as the recovery scan walks (CRC of every body): each file's
    `scan_buffer`, with walker `name`."""
    import mmap

    from mqctl.store import walker
    from mqctl.store.commitlog import scan_buffer

    before = walker.IMPL
    walker.select(name)
    n = 0
    try:
        for lf in CommitLog(store / COMMITLOG_DIR).files:
            with open(lf.path, "rb") as fh:
                mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
                try:
                    n += scan_buffer(mm, lf.start, check_crc=True).records
                finally:
                    mm.close()
    finally:
        walker.select(before)
    return n


def plain_reader(store: Path) -> int:
    """The baseline: one Python loop over every file, decode_record with zlib's CRC per record."""
    n = 0
    for lf in CommitLog(store / COMMITLOG_DIR).files:
        data = lf.path.read_bytes()
        pos = 0
        while pos + 8 <= len(data):
            if int.from_bytes(data[pos + 4 : pos + 8], "big") == BLANK_MAGIC or not any(data[pos : pos + 8]):
                break
            rec = decode_record(data, pos, lf.start, check_crc=False)
            if (zlib.crc32(rec.body) & 0x7FFFFFFF) != rec.body_crc:
                raise SystemExit(f"CRC error at {rec.offset}")
            n += 1
            pos += rec.size
    return n


def _status(pid: int) -> dict[str, str]:
    try:
        return dict(
            line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line
        )
    except OSError:
        return {}


def _kib(text: str) -> int:
    return int(text.split()[0]) << 10


def anon_memory(pid: int) -> int:
    """The process's anonymous memory, its proportional share (Pss_Anon: a page a forked Python worker
    still shares with the daemon it came from counts half in each): what it holds whatever the kernel
    does with the page cache. Not the mapped store files (RSS counts their pages, which the kernel
    drops when it needs them, and the same pages in every process that maps them)."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss_Anon:"):
                return _kib(line.split(":", 1)[1])
    except OSError:
        pass
    return _kib(_status(pid).get("RssAnon", "0 kB"))


class MemSampler:
    """Every 0.05 s, the anonymous memory (`anon_memory`) of the JVMs and of the Python processes among
    the descendants of `root` (default: this process), summed per kind: the peak of each sum, and of
    their total (the peak of the sum, not the sum of the peaks); `reset()` starts a new peak. `sampling`
    (a context manager) turns it on: reading a JVM's smaps every 0.05 s costs this process CPU (and the
    GIL), which the rows measured in this process must not pay."""

    def __init__(self, root: int | None = None, *, on: bool = True) -> None:
        self.root = root or os.getpid()
        self.jvm = self.python = self.total = 0
        self._stop = threading.Event()
        self._on = threading.Event()
        if on:
            self._on.set()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def reset(self) -> None:
        self.jvm = self.python = self.total = 0

    @contextmanager
    def sampling(self) -> Iterator[None]:
        self._on.set()
        try:
            yield
        finally:
            self._on.clear()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            if not self._on.is_set():
                continue
            parent: dict[int, int] = {}
            names: dict[int, str] = {}
            for d in os.listdir("/proc"):
                if d.isdigit():
                    st = _status(int(d))
                    if st:
                        parent[int(d)] = int(st.get("PPid", "0"))
                        names[int(d)] = st.get("Name", "").strip()

            def mine(p: int, parent: dict[int, int] = parent) -> bool:
                while p > 1:
                    p = parent.get(p, 0)
                    if p == self.root:
                        return True
                return False

            jvm = py = 0
            for pid, name in names.items():
                if mine(pid):
                    if name == "java":
                        jvm += anon_memory(pid)
                    elif name.startswith("python"):
                        py += anon_memory(pid)
            self.jvm, self.python = max(self.jvm, jvm), max(self.python, py)
            self.total = max(self.total, jvm + py)

    def stop(self) -> None:
        self._stop.set()
        self._t.join(timeout=2)


def driver_peak_rss() -> int:
    return _kib(_status(os.getpid()).get("VmHWM", "0 kB"))


def executor_memory(replica: Path, source: Path, records: int, executor_memory: str, tmp: Path) -> dict:
    """The Spark salvage on a standalone cluster (a master and one worker with 2 cores on loopback, an
    executor with spark.executor.memory as given), in a child process: pyspark starts the driver's JVM once
    per process and keeps it for later sessions, with the configuration of its start, so the executor's
    memory setting (given as an operator would, PYSPARK_SUBMIT_ARGS' --conf) needs a process whose first
    session this is. Returns the executor's memory (its JVM and Python workers, `MemSampler` of the
    worker's descendants), their CPU seconds and the run's wall time."""
    env = {
        **os.environ,
        "PYSPARK_SUBMIT_ARGS": f"--conf spark.executor.memory={executor_memory} pyspark-shell",
    }
    arg = json.dumps({"replica": str(replica), "source": str(source), "records": records, "tmp": str(tmp)})
    r = subprocess.run(
        [sys.executable, __file__, "--executor-run", arg],
        env=env,
        check=True,
        text=True,
        stdout=subprocess.PIPE,
    )
    return json.loads(r.stdout.splitlines()[-1])


def executor_run(arg: str) -> None:
    """`executor_memory`'s child: prints its result as one line of JSON."""
    from harness import spark_standalone

    from mqctl.pipeline.engine import range_size_for, spark_cores, spark_session
    from mqctl.pipeline.salvage import prepare, run_salvage

    a = json.loads(arg)
    tmp = Path(a["tmp"])
    (tmp / "standalone").mkdir()
    with (
        spark_standalone(tmp / "standalone") as (url, worker),
        spark_session(url, app_name="mqctl bench executor") as spark,
    ):
        warm(spark)
        inp = prepare([a["replica"], a["source"]])
        inp.cut(range_size_for(inp.nbytes, spark_cores(spark)))
        mem = MemSampler(worker)
        c0, t0 = TreeCpu(worker), time.perf_counter()
        doc = run_salvage(spark, inp, tmp / "salvage-executor", show_progress=False, overwrite=True)
        t, cpu = time.perf_counter() - t0, TreeCpu(worker).since(c0)
        mem.stop()
        assert doc["messages"] == a["records"] - 1, doc["messages"]
    print(json.dumps({"jvm": mem.jvm, "python": mem.python, "total": mem.total, "s": t, "cpu": cpu}))


def warm(spark) -> None:
    """The executors' Python workers started (as the jobs start them: an Arrow UDF, one daemon)."""
    n = int(spark.sparkContext.defaultParallelism)
    spark.range(n, numPartitions=n).mapInArrow(lambda it: it, "id long").collect()


def executor_walkers(spark) -> list[str]:
    """The record walker each of the executors' Python workers uses (the salvage and analyze tasks run
    the same walker.py there): what the Spark rows measured."""
    import pyarrow as pa

    def which(it):
        from mqctl.store import walker

        for b in it:
            yield pa.RecordBatch.from_arrays([pa.array([walker.describe()] * b.num_rows)], names=["w"])

    n = int(spark.sparkContext.defaultParallelism)
    return sorted({r["w"] for r in spark.range(n, numPartitions=n).mapInArrow(which, "w string").collect()})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="2G")
    ap.add_argument("--quick", action="store_true", help="256 MiB instead of --size")
    ap.add_argument("--file-size", default="256M")
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--master", default=os.environ.get("MQCTL_SPARK_MASTER", "local[2]"))
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument(
        "--profile",
        action="store_true",
        help="also print cProfile's top functions (CPU time) of the parser and of the local engine's salvage",
    )
    ap.add_argument(
        "--executor-memory",
        default="512m",
        help="spark.executor.memory of the standalone cluster's executor whose memory is measured "
        "during a salvage ('none': no cluster)",
    )
    ap.add_argument(
        "--executor-only",
        action="store_true",
        help="only the executor's memory on the standalone cluster, --repeat times (quick turns)",
    )
    ap.add_argument(
        "--walk-only",
        action="store_true",
        help="only RocketMQ's walk, cat, inspect --deep and the walkers alone (issue 32's first rows)",
    )
    ap.add_argument("--keep", action="store_true", help="keep the generated stores and output")
    ap.add_argument("--executor-run", help=argparse.SUPPRESS)  # executor_memory's child
    a = ap.parse_args()
    if a.executor_run:
        executor_run(a.executor_run)
        return
    size = parse_size("256M" if a.quick else a.size)

    from mqctl.pipeline.analyze import prepare_analyze, run_analyze
    from mqctl.pipeline.engine import range_size_for, spark_cores, spark_session
    from mqctl.pipeline.ranges import DEFAULT_RANGE_SIZE, store_ranges
    from mqctl.pipeline.salvage import local_threads, prepare, run_salvage
    from mqctl.pipeline.tasks import parse_task
    from mqctl.recover.inspect import inspect_stores

    tmp = Path(tempfile.mkdtemp(prefix="mqctl-bench-pipeline-"))
    replica, source = tmp / "replica", tmp / "source"
    fs = parse_size(a.file_size)
    print(f"generating {size >> 20} MiB in {replica} ...", file=sys.stderr)
    gen = generate(replica, size, fs, a.record_size, 1 << 62, quiet=True)
    cut = make_source(replica, source, fs)
    files = [str(f.path) for f in CommitLog(replica / COMMITLOG_DIR).files]
    data = gen["maxOffset"]
    mib = data / (1 << 20)
    subprocess.run(["cat", *files], stdout=subprocess.DEVNULL, check=True)  # warm the page cache
    if a.executor_only:
        for _ in range(a.repeat):
            x = executor_memory(replica, source, gen["records"], a.executor_memory, tmp)
            print(
                f"executor (spark.executor.memory {a.executor_memory}): JVM {x['jvm'] >> 20} MiB, Python workers "
                f"{x['python'] >> 20} MiB, both {x['total'] >> 20} MiB at the peak of their sum; {x['s']:.1f} s, "
                f"{x['cpu']:.1f} s of CPU; load average {os.getloadavg()[0]:.1f}"
            )
            shutil.rmtree(tmp / "standalone")
        shutil.rmtree(tmp, ignore_errors=True)
        return
    mem = MemSampler(on=False)

    from mqctl.store import walker

    rows: list[tuple[str, float, str, float | None]] = []
    rmq = rocketmq_walk(files, fs, a.repeat, tmp)
    if rmq is not None:
        assert rmq[2] == gen["records"], rmq
        rows.append(
            (
                "RocketMQ's recovery walk, 1 core",
                rmq[0],
                "checkMessageAndReturnSize, CRC on, after a JIT warm-up pass",
                rmq[1],
            )
        )
    mqctl_bin = str(Path(sys.executable).with_name("mqctl"))

    def cat() -> None:
        subprocess.run(["cat", *files], stdout=subprocess.DEVNULL, check=True)

    def deep_cmd() -> None:  # the whole command, its start-up included
        subprocess.run(
            [mqctl_bin, "recover", "inspect", "--deep", str(replica), "-o", "json"],
            stdout=subprocess.DEVNULL,
            check=True,
        )

    def deep() -> None:
        inspect_stores([str(replica)], deep=True)  # what `recover inspect --deep` runs

    def walk_c() -> None:
        assert walker_alone(replica, "c") == gen["records"]

    def walk_numpy() -> None:
        assert walker_alone(replica, "numpy") == gen["records"]

    compiled = walker.IMPL == "c"
    timed = rounds([cat, deep_cmd, deep, *([walk_c] if compiled else []), walk_numpy], a.repeat)
    t_cat, t_deep_cmd, t_deep, t_walk_numpy = timed[0], timed[1], timed[2], timed[-1]
    t_walk_c = timed[3] if compiled else None
    rows.append(("cat (all files)", t_cat, "incl. the zero tail of the last file", CPU[id(cat)]))
    rows.append(
        (
            "recover inspect --deep, the command",
            t_deep_cmd,
            f"`mqctl recover inspect --deep`, start-up included, walker {walker.IMPL}",
            CPU[id(deep_cmd)],
        )
    )
    if t_walk_c is not None:
        rows.append(
            (
                "the compiled walker alone, 1 core",
                t_walk_c,
                "scan_buffer per file, CRC of every body",
                CPU[id(walk_c)],
            )
        )
    rows.append(
        (
            "the numpy walker alone, 1 core",
            t_walk_numpy,
            "scan_buffer per file, CRC of every body",
            CPU[id(walk_numpy)],
        )
    )
    if a.walk_only:
        load = os.getloadavg()
        print(
            f"replica: {gen['records']} records of ~{a.record_size} B, {mib:.0f} MiB in {len(files)} files of "
            f"{fs >> 20} MiB; load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} at the end; record walker: "
            f"{walker.describe()}"
        )
        print(
            f"{'what':38} {'s':>8} {'MiB/s':>9} {'x rmq':>6} {'x cat':>7} {'cpu s':>7} {'cpu x rmq':>9}  note"
        )
        for name, t, note, cpu in rows:
            x_rmq = f"{rmq[0] / t:6.2f}" if rmq else f"{'-':>6}"
            c = f"{rmq[1] / cpu:9.2f}" if cpu and rmq else f"{'-':>9}"
            print(f"{name:38} {t:8.3f} {mib / t:9.1f} {x_rmq} {t_cat / t:7.3f} {cpu or 0:7.3f} {c}  {note}")
        if rmq is not None:
            walk = t_walk_c if t_walk_c is not None else t_walk_numpy
            print(
                f"goals of issue 32: inspect --deep the command {rmq[0] / t_deep_cmd:.2f}x RocketMQ's walk (>= 1.0), its "
                f"CPU {CPU[id(deep_cmd)] / rmq[1]:.2f}x (<= 1.5); the walker alone {rmq[0] / walk:.2f}x (>= 1.0)"
            )
        if not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        return

    def plain() -> None:
        plain_reader(replica)

    t_plain = best(plain, 1)
    rows.append(("plain Python reader, 1 process", t_plain, "decode_record loop, zlib CRC", CPU[id(plain)]))
    rows.append(
        (
            "recover inspect --deep, in process",
            t_deep,
            f"inspect_stores: the walker, CRC of every message, {os.cpu_count()} processes",
            CPU[id(deep)],
        )
    )

    def parser() -> None:
        n = sum(len(parse_task(br)) for br in store_ranges(replica, range_size=DEFAULT_RANGE_SIZE))
        assert n == gen["records"], (n, gen["records"])

    parser_row = len(rows)  # measured with the Spark rows, in the same rounds

    def run_local_analyze() -> None:
        doc = run_analyze(
            None, prepare_analyze([str(replica)]), tmp / "analyze-local", show_progress=False, overwrite=True
        )
        assert sum(q["messages"] for q in doc["queues"]) == gen["records"]

    t_la = best(run_local_analyze, a.repeat)
    rows.append(
        ("analyze, local engine", t_la, "1 process, no JVM, Parquet included", CPU[id(run_local_analyze)])
    )

    def run_local_salvage() -> None:
        doc = run_salvage(
            None,
            prepare([str(replica), str(source)]),
            tmp / "salvage-local",
            show_progress=False,
            overwrite=True,
        )
        assert doc["messages"] == gen["records"] - 1, doc["messages"]

    t_ls = best(run_local_salvage, 1)
    rows.append(
        ("salvage, local engine", t_ls, "1 process, no JVM, Parquet included", CPU[id(run_local_salvage)])
    )
    if a.profile:
        import cProfile
        import pstats

        for what, fn in (("numpy range parser", parser), ("salvage, local engine", run_local_salvage)):
            pr = cProfile.Profile(time.process_time)  # CPU time: the load of others stays out
            pr.runcall(fn)
            print(f"--- profile: {what}")
            pstats.Stats(pr).sort_stats("tottime").print_stats(12)

    t0 = time.perf_counter()
    with spark_session(a.master, app_name="mqctl bench") as spark:
        t_start = time.perf_counter() - t0
        cores = spark_cores(spark)
        t0 = time.perf_counter()
        warm(spark)
        t_warm = time.perf_counter() - t0
        exec_walkers = executor_walkers(spark)
        ainp = prepare_analyze([str(replica)])
        ainp.cut(range_size_for(ainp.nbytes, cores))

        def spark_analyze() -> None:
            doc = run_analyze(spark, ainp, tmp / "analyze-spark", show_progress=False, overwrite=True)
            assert sum(q["messages"] for q in doc["queues"]) == gen["records"]

        sinp = prepare([str(replica), str(source)])
        sinp.cut(range_size_for(sinp.nbytes, cores))

        def spark_salvage() -> None:
            with mem.sampling():
                doc = run_salvage(spark, sinp, tmp / "salvage-spark", show_progress=False, overwrite=True)
            assert doc["messages"] == gen["records"] - 1, doc["messages"]

        mem.reset()
        t_parse, t_sa, t_ss = rounds([parser, spark_analyze, spark_salvage], a.repeat)
        local_mem = (mem.jvm, mem.python, mem.total)
        rows.insert(
            parser_row,
            (
                f"range parser ({walker.IMPL} walker), 1 process",
                t_parse,
                "parse_task over 64 MiB ranges, CRC on (in the Spark rows' rounds)",
                CPU[id(parser)],
            ),
        )
        rows.append((f"analyze, Spark ({len(ainp.ranges)} ranges)", t_sa, a.master, CPU[id(spark_analyze)]))
        parquet = sum(p.stat().st_size for p in (tmp / "salvage-spark" / "messages").rglob("*.parquet"))
        rows.append(
            (
                f"salvage, Spark ({len(sinp.candidates)} ranges)",
                t_ss,
                f"{a.master}, writes {parquet / (1 << 20):.0f} MiB of Parquet",
                CPU[id(spark_salvage)],
            )
        )
    mem.stop()
    if a.executor_memory != "none":
        xmem = executor_memory(replica, source, gen["records"], a.executor_memory, tmp)
    from mqctl.pipeline.outdir import tree_digest

    same = tree_digest(tmp / "salvage-spark") == tree_digest(tmp / "salvage-local")
    if a.executor_memory != "none":
        same = same and tree_digest(tmp / "salvage-executor") == tree_digest(tmp / "salvage-local")

    load = os.getloadavg()
    print(
        f"replica: {gen['records']} records of ~{a.record_size} B, {mib:.0f} MiB of data in {len(files)} "
        f"files of {fs >> 20} MiB; salvage reads from offset {cut}; cores: {os.cpu_count()}; load average "
        f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f} at the end"
    )
    print(
        f"Spark start-up (not in the rows below): session {t_start:.2f} s, first job (Python workers) "
        f"{t_warm:.2f} s"
    )
    print(
        f"record walker: {walker.describe()}; in Spark's Python workers: {', '.join(exec_walkers)}; local "
        f"engine threads: {local_threads()}"
    )
    print(
        f"{'what':38} {'s':>8} {'MiB/s':>9} {'x rmq':>6} {'x plain':>8} {'x parser':>9} {'x cat':>7} {'cpu s':>7} "
        f"{'cpu x parser':>12} {'cpu x rmq':>9}  note"
    )
    cpu_parse = CPU[id(parser)]
    for name, t, note, cpu in rows:
        c = f"{cpu:7.3f} {cpu_parse / cpu:12.2f}" if cpu else f"{'-':>7} {'-':>12}"
        c += f" {rmq[1] / cpu:9.2f}" if cpu and rmq else f" {'-':>9}"
        x_rmq = f"{rmq[0] / t:6.2f}" if rmq else f"{'-':>6}"
        print(
            f"{name:38} {t:8.3f} {mib / t:9.1f} {x_rmq} {t_plain / t:8.2f} {t_parse / t:9.2f} {t_cat / t:7.3f} {c}  {note}"
        )
    print(
        "MiB/s = record data / time; x rmq, x plain, x parser, x cat = speed relative to RocketMQ's walk and those rows "
        "(>1 = faster); cpu s = CPU time of this process and its descendants (cat, the mqctl command, Spark's JVM and "
        "Python workers; RocketMQ's walk: its JVM's), cpu x parser, cpu x rmq = the parser's, RocketMQ's CPU time / the row's"
    )
    print(
        f"goals of issue 15: salvage Spark {t_plain / t_ss:.2f}x plain (>= 1.5), {t_parse / t_ss:.2f}x parser (>= 0.7); "
        f"analyze Spark {t_parse / t_sa:.2f}x parser (>= 1.5); inspect --deep {t_cat / t_deep:.3f}x cat (>= 0.5)"
    )
    if rmq is not None:
        gib = data / (1 << 30)
        walk = t_walk_c if t_walk_c is not None else t_walk_numpy
        print(
            f"goals of issue 32 (x RocketMQ's walk, {gib:.2f} GiB): inspect --deep the command {rmq[0] / t_deep_cmd:.2f}x "
            f"(>= 1.0 on >= 4 GiB), its CPU per GiB {CPU[id(deep_cmd)] / rmq[1]:.2f}x RocketMQ's (<= 1.5); the walker "
            f"alone {rmq[0] / walk:.2f}x (>= 1.0); analyze local {rmq[0] / t_la:.2f}x (>= 0.4); salvage local "
            f"{rmq[0] / t_ls:.2f}x (>= 0.1); salvage Spark {rmq[0] / t_ss:.2f}x (>= 0.15)"
        )
    for name, fn in (("analyze", spark_analyze), ("salvage", spark_salvage)):
        t, c = FIRST[id(fn)]
        print(
            f"Spark {name}'s first run in the session (its JVM code not yet compiled, as one CLI command's): "
            f"{t:.3f} s, {c:.2f} s of CPU"
        )
    print(f"salvage output of the two engines identical: {same}")
    print(
        f"peak memory: driver (this Python process, VmHWM) {driver_peak_rss() >> 20} MiB; in the Spark salvage rows "
        f"(anonymous memory, Pss_Anon, peak of the sum): JVM ({a.master}: driver and executor, spark.driver.memory 1g) "
        f"{local_mem[0] >> 20} MiB, Python workers {local_mem[1] >> 20} MiB, both {local_mem[2] >> 20} MiB"
    )
    if a.executor_memory != "none":
        print(
            f"executor memory, salvage on a standalone cluster (1 worker, 2 cores, spark.executor.memory "
            f"{a.executor_memory}; {xmem['s']:.1f} s, {xmem['cpu']:.1f} s of CPU): the executor's JVM {xmem['jvm'] >> 20} "
            f"MiB, its Python workers {xmem['python'] >> 20} MiB, both {xmem['total'] >> 20} MiB at the peak of their sum "
            f"(goal: 1024 MiB); "
            f"anonymous memory (Pss_Anon), the mapped store files not counted"
        )
    if a.keep:
        print(f"kept {tmp}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
