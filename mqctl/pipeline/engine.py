"""Where the pipeline runs: the engine choice (`choose_engine`: in this process unless Spark, its
start-up included, is estimated to be done sooner), range sizing, dependency checks, the Spark session,
the progress bar.

Spark's local mode by default (in-process JVM, loopback only, UI off, small shuffle, quiet log4j2 config; see
toolchain-notes.md section 5); `--master URL` or MQCTL_SPARK_MASTER sends the same jobs to a cluster,
whose executors must see the store paths and have mqctl installed (docs/pipeline.md).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mqctl.errors import EXIT_MISSING_DEPENDENCY, MqctlError
from mqctl.ticker import ticking

MASTER_ENV = "MQCTL_SPARK_MASTER"
DEFAULT_MASTER = "local[*]"
INSTALL_HINT = "pip install 'mqctl[spark]'"

LOG4J2_PROPERTIES = """\
# mqctl: Spark quiet (warnings and errors on stderr only)
rootLogger.level = warn
rootLogger.appenderRef.stdout.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
logger.nativeloader.name = org.apache.hadoop.util.NativeCodeLoader
logger.nativeloader.level = error
logger.sparkutils.name = org.apache.spark.util.Utils
logger.sparkutils.level = error
"""

__all__ = [
    "ENGINES",
    "EXECUTOR_DEFAULTS",
    "EXIT_MISSING_DEPENDENCY",
    "JAVA_OPTIONS",
    "LOCAL_RATES",
    "MissingDependencyError",
    "choose_engine",
    "executor_defaults",
    "java_executable",
    "local_cores",
    "progress",
    "range_size_for",
    "require_local",
    "require_spark",
    "resolve_master",
    "spark_conf",
    "spark_cores",
    "spark_session",
    "task_groups",
]


class MissingDependencyError(MqctlError):
    """PySpark, numpy, pyarrow, pandas or Java is missing (or Spark could not start): exit 9, with how to
    install it."""

    exit_code = EXIT_MISSING_DEPENDENCY


def java_executable() -> str | None:
    """`$JAVA_HOME/bin/java` if set, else `java` from PATH (what pyspark's launcher uses)."""
    home = os.environ.get("JAVA_HOME")
    if home:
        cand = Path(home) / "bin" / "java"
        return str(cand) if cand.exists() else None
    return shutil.which("java")


def _missing(mods: tuple[str, ...]) -> list[str]:
    out = []
    for mod in mods:
        try:
            __import__(mod)
        except ImportError:
            out.append(mod)
    return out


def require_local() -> None:
    """The local engine needs numpy (the walker) and pyarrow (Parquet): one line saying what to install."""
    missing = _missing(("numpy", "pyarrow"))
    if missing:
        raise MissingDependencyError(
            f"this command needs {' and '.join(missing)} (not installed): "
            f"{INSTALL_HINT} (or pip install 'numpy>=1.26' 'pyarrow>=18')"
        )


def require_spark() -> None:
    """Fail with one line saying exactly what to install, before anything slow starts."""
    missing = _missing(("pyspark", "numpy", "pyarrow", "pandas"))  # Arrow batches (mapInArrow)
    if missing:
        raise MissingDependencyError(
            f"this command needs {' and '.join(missing)} (not installed): "
            f"{INSTALL_HINT} (or pip install 'pyspark>=4.0' 'numpy>=1.26' "
            f"'pyarrow>=18' 'pandas>=2.2,<3')"
        )
    if java_executable() is None:
        where = (
            f"JAVA_HOME={os.environ['JAVA_HOME']} has no bin/java"
            if os.environ.get("JAVA_HOME")
            else "no java on PATH"
        )
        raise MissingDependencyError(
            f"Spark needs Java 17 or newer and {where}: install a JRE (e.g. "
            f"apt-get install openjdk-17-jre-headless) and put java on PATH or set "
            f"JAVA_HOME"
        )


def resolve_master(master: str | None) -> str:
    return master or os.environ.get(MASTER_ENV) or DEFAULT_MASTER


def _log4j_file() -> str:
    """The quiet log4j2 config, written once per content into the temp dir (works from a wheel too)."""
    digest = hashlib.sha256(LOG4J2_PROPERTIES.encode()).hexdigest()[:12]
    path = Path(tempfile.gettempdir()) / f"mqctl-spark-log4j2-{digest}.properties"
    if not path.exists():
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(LOG4J2_PROPERTIES)
        os.replace(tmp, path)
    return str(path)


def spark_conf(master: str, *, log4j: str | None = None) -> dict[str, str]:
    """The builder settings. Local: loopback, no UI, small shuffle, 512m driver (toolchain-notes §5)."""
    conf = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.extraJavaOptions": f"-Dlog4j.configurationFile={log4j or _log4j_file()}",
        "spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.debug.maxToStringFields": "200",
    }
    if master.startswith("local"):
        cores = local_cores(master)  # local[2] on a bigger host: 2, not the host's cores
        conf.update(
            {
                "spark.sql.shuffle.partitions": str(max(2, cores)),
                "spark.default.parallelism": str(max(2, cores)),
                "spark.driver.memory": "1g",
                "spark.driver.host": "127.0.0.1",
                "spark.driver.bindAddress": "127.0.0.1",
            }
        )
    return conf


# What keeps an executor within 1 GiB per 2 cores and a 512m heap during a salvage (measured:
# bench/README.md; docs/pipeline.md says them). Each is left out when the operator set it (spark-defaults.conf
# or PYSPARK_SUBMIT_ARGS' --conf), and the JVM options also when the operator set
# spark.executor.extraJavaOptions (their GC choice would conflict with ours).
JAVA_OPTIONS = "spark.executor.defaultJavaOptions"
EXECUTOR_DEFAULTS = {
    # the Python workers forked from a daemon that imported numpy, pyarrow, pandas and mqctl's task
    # modules: their pages shared, not one copy per worker (mqctl/pipeline/daemon.py)
    "spark.python.daemon.module": "mqctl.pipeline.daemon",
    # the parallel collector (G1's own structures were 60 MiB of a 512m heap's JVM; the parallel one's
    # are a few, and it uses the executor's cores) and a heap that grows from 64m as needed, not from 1/64
    # of the host's memory (the executor's heap holds little: the candidates' 28-byte rows, their aggregate)
    JAVA_OPTIONS: "-XX:+UseParallelGC -Xms64m",
}


def executor_defaults(operator: set[str]) -> dict[str, str]:
    """EXECUTOR_DEFAULTS without what the operator set (`operator`: the keys of their configuration)."""
    out = {k: v for k, v in EXECUTOR_DEFAULTS.items() if k not in operator}
    if "spark.executor.extraJavaOptions" in operator:
        out.pop(JAVA_OPTIONS, None)
    return out


def _operator_keys(builder_conf: dict[str, str]) -> set[str]:
    """The keys of the operator's Spark configuration: the JVM is started as the builder would start it
    (with `builder_conf`, then PYSPARK_SUBMIT_ARGS, then spark-defaults.conf), its configuration read
    back. The builder's settings win over those, so the executor defaults are added only after."""
    from pyspark import SparkConf, SparkContext  # lazy: pyspark

    launch = SparkConf()
    for k, v in builder_conf.items():
        launch.set(k, v)
    SparkContext._ensure_initialized(conf=launch)
    return {k for k, _ in SparkConf().getAll()} - set(builder_conf)


@contextmanager
def spark_session(
    master: str | None = None, *, log4j: str | None = None, app_name: str = "mqctl"
) -> Iterator[Any]:
    """A SparkSession for one command; an already active session (a test's) is reused and not stopped."""
    require_spark()
    from pyspark.sql import SparkSession  # lazy: pyspark

    active = SparkSession.getActiveSession()
    if active is not None:
        yield active
        return
    url = resolve_master(master)
    if url.startswith("local"):
        # the trap: unset, the workers run `python3` from PATH instead of this interpreter
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    else:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    conf = {"spark.master": url, "spark.app.name": app_name, **spark_conf(url, log4j=log4j)}
    try:
        conf.update(executor_defaults(_operator_keys(conf)))
        builder = SparkSession.builder
        for k, v in conf.items():
            builder = builder.config(k, v)
        spark = builder.getOrCreate()
    except Exception as exc:  # the JVM did not start (old Java, no memory, bad master URL)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise MissingDependencyError(
            f"could not start Spark with master {url!r}: {first} (Spark 4 needs "
            f"Java 17 or newer; java: {java_executable()})"
        ) from None
    try:
        yield spark
    finally:
        spark.stop()


ENGINES = ("auto", "local", "spark")
# --engine auto compares estimates made from the rates measured on a 2-core VM (bench/README.md,
# bench_pipeline.py): the local engine's bytes per second in one process with each record walker (the
# compiled one: analyze 2.5x and salvage 1.4x the numpy walker's CPU, paired runs of issue 32), what each
# Spark core adds of that rate (analyze on local[2]: 1.5x the local engine, salvage about the same), and a
# local session's start-up with its first job (4-15 s).
LOCAL_RATES = {
    "c": {"analyze commitlog": 2000 << 20, "recover salvage": 210 << 20},
    "numpy": {"analyze commitlog": 800 << 20, "recover salvage": 150 << 20},
}
SPARK_CORE_SHARE = 0.75
SPARK_START_SECONDS = 7.0
RANGES_PER_CORE = 3
MIN_RANGE, MAX_RANGE = 4 << 20, 512 << 20
TASKS_PER_CORE = 2
MAX_TASK_BYTES = 1 << 30


def local_cores(master: str) -> int:
    """The cores of a local master URL: local, local[N], local[N,F], local[*]."""
    inside = master[master.find("[") + 1 : master.find("]")] if "[" in master else "1"
    first = inside.split(",")[0].strip()
    return int(first) if first.isdigit() and int(first) > 0 else os.cpu_count() or 1


def choose_engine(
    engine: str, master: str | None, nbytes: int, command: str = "recover salvage", walker: str | None = None
) -> tuple[str, str]:
    """(engine, why): auto picks Spark for a cluster URL, and on this machine when the job's estimated
    time on Spark, start-up included, is below one process's (`LOCAL_RATES` of `walker`, default the one in
    use: with the compiled walker on 2 cores, salvage above about 4.3 GiB and analyze above about 41 GiB,
    on 8 cores above about 1.7 and 16 GiB; with the numpy walker on 2 cores above about 3 and 16 GiB), else
    the local engine."""
    if engine != "auto":
        return engine, f"--engine {engine}"
    url = master or os.environ.get(MASTER_ENV)
    if url and not url.startswith("local"):
        return "spark", f"--master {url}"
    cores = local_cores(url or DEFAULT_MASTER)
    if walker is None:
        from mqctl.store import walker as walker_mod  # lazy: numpy

        walker = walker_mod.IMPL
    local_s = nbytes / LOCAL_RATES[walker][command]
    spark_s = SPARK_START_SECONDS + local_s / max(1.0, cores * SPARK_CORE_SHARE)
    est = (
        f"{nbytes / (1 << 30):.2f} GiB to read: about {local_s:.0f} s in this process, "
        f"{spark_s:.0f} s on Spark with {cores} cores and its start-up"
    )
    if spark_s < local_s:
        return "spark", f"{est}; --engine local to stay in this process"
    return "local", f"{est}; --engine spark to use Spark"


def range_size_for(nbytes: int, cores: int) -> int:
    """About RANGES_PER_CORE ranges per core (whole MiB, within MIN_RANGE..MAX_RANGE): enough tasks to
    even out the cores, few enough that a task's start-up stays small next to its work."""
    per = -(-nbytes // max(1, cores * RANGES_PER_CORE))
    return max(MIN_RANGE, min(MAX_RANGE, -(-per // (1 << 20)) << 20))


def task_groups(lengths: list[int], cores: int) -> list[list[int]]:
    """The ranges (by index, in order) each Spark task reads: TASKS_PER_CORE tasks per core of
    consecutive ranges and about equal bytes, more when a task would read over MAX_TASK_BYTES. A task
    costs Spark about 30 ms of wall time and 20 ms of CPU (bench/README.md) and a range cannot span
    files: a store of 256 MiB files read a range per task spent a fifth of its time between tasks.
    On a big store the tasks stay small enough for the progress bar to move."""
    total = sum(lengths)
    if not total:
        return [list(range(len(lengths)))] if lengths else []
    k = min(len(lengths), max(cores * TASKS_PER_CORE, -(-total // MAX_TASK_BYTES)))
    groups: dict[int, list[int]] = {}
    before = 0
    for i, n in enumerate(lengths):  # a range goes where its middle byte falls
        groups.setdefault(min(k - 1, k * (2 * before + n) // (2 * total)), []).append(i)
        before += n
    return list(groups.values())


def spark_cores(spark: Any) -> int:
    return int(spark.sparkContext.defaultParallelism)


@contextmanager
def progress(
    description: str, total_bytes: int, done: Callable[[], tuple[int, int]], *, enabled: bool | None = None
) -> Iterator[None]:
    """A progress bar on stderr (bytes read, messages, ETA) while the job runs, fed by `done()` ->
    (bytes, messages) (Spark: accumulators the tasks add to as they finish; local: the loop's counters);
    off when stderr is not a terminal or enabled is False (--quiet)."""
    if enabled is None:
        enabled = sys.stderr.isatty()
    if not enabled or total_bytes <= 0:
        yield
        return
    # lazy: rich
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(binary_units=True),
        TextColumn("{task.fields[messages]} messages"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
    )

    def poll() -> bool:
        try:
            nbytes, msgs = done()
            bar.update(task, completed=min(nbytes, total_bytes), messages=msgs)
        except Exception:  # the context is stopping: the bar just ends
            return False
        return True

    with bar:
        task = bar.add_task(description, total=total_bytes, messages=0)
        with ticking(0.2, poll, "mqctl-progress"):
            yield
