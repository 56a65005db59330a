"""The Spark side of the pipeline: dependency checks, the session, the progress bar.

Local mode by default (in-process JVM, loopback only, UI off, small shuffle, quiet log4j2 config; see
toolchain-notes.md section 5); `--master URL` or MQCTL_SPARK_MASTER sends the same jobs to a cluster,
whose executors must see the store paths and have mqctl installed (docs/pipeline.md).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mqctl.errors import EXIT_MISSING_DEPENDENCY, MqctlError

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

__all__ = ["EXIT_MISSING_DEPENDENCY", "MissingDependencyError", "require_spark", "java_executable",
           "spark_session", "spark_conf", "progress", "resolve_master"]


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


def require_spark() -> None:
    """Fail with one line saying exactly what to install, before anything slow starts."""
    missing = []
    for mod in ("pyspark", "numpy", "pyarrow", "pandas"):      # salvage sends Arrow batches (mapInArrow)
        try:
            __import__(mod)
        except ImportError:
            missing.append(mod)
    if missing:
        raise MissingDependencyError(f"this command needs {' and '.join(missing)} (not installed): "
                                     f"{INSTALL_HINT} (or pip install 'pyspark>=4.0' 'numpy>=1.26' "
                                     f"'pyarrow>=18' 'pandas>=2.2,<3')")
    if java_executable() is None:
        where = f"JAVA_HOME={os.environ['JAVA_HOME']} has no bin/java" if os.environ.get("JAVA_HOME") \
            else "no java on PATH"
        raise MissingDependencyError(f"Spark needs Java 17 or newer and {where}: install a JRE (e.g. "
                                     f"apt-get install openjdk-17-jre-headless) and put java on PATH or set "
                                     f"JAVA_HOME")


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
        cores = os.cpu_count() or 2
        conf.update({
            "spark.sql.shuffle.partitions": str(max(2, cores)),
            "spark.default.parallelism": str(max(2, cores)),
            "spark.driver.memory": "1g",
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
        })
    return conf


@contextmanager
def spark_session(master: str | None = None, *, log4j: str | None = None,
                  app_name: str = "mqctl") -> Iterator[Any]:
    """A SparkSession for one command; an already active session (a test's) is reused and not stopped."""
    require_spark()
    from pyspark.sql import SparkSession

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
    builder = SparkSession.builder.master(url).appName(app_name)
    for k, v in spark_conf(url, log4j=log4j).items():
        builder = builder.config(k, v)
    try:
        spark = builder.getOrCreate()
    except Exception as exc:  # the JVM did not start (old Java, no memory, bad master URL)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise MissingDependencyError(f"could not start Spark with master {url!r}: {first} (Spark 4 needs "
                                     f"Java 17 or newer; java: {java_executable()})") from None
    try:
        yield spark
    finally:
        spark.stop()


@contextmanager
def progress(spark: Any, description: str, *, enabled: bool | None = None) -> Iterator[None]:
    """A rich progress bar on stderr over the tasks of every stage Spark runs meanwhile; off when stderr
    is not a terminal. A thread polls the status tracker (py4j calls are thread-safe)."""
    if enabled is None:
        enabled = sys.stderr.isatty()
    if not enabled:
        yield
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    tracker = spark.sparkContext.statusTracker()
    seen: dict[int, tuple[int, int]] = {}
    stop = threading.Event()
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("tasks"),
                   TimeElapsedColumn(), console=Console(stderr=True), transient=True)

    def poll() -> None:
        while not stop.wait(0.2):
            try:
                active = set(tracker.getActiveStageIds())
                for sid in active:
                    info = tracker.getStageInfo(sid)
                    if info is not None:
                        seen[sid] = (info.numTasks, info.numCompletedTasks)
                for sid, (total, _done) in list(seen.items()):
                    if sid not in active:
                        seen[sid] = (total, total)
                bar.update(task, total=max(1, sum(t for t, _ in seen.values())),
                           completed=sum(d for _, d in seen.values()))
            except Exception:  # the context is stopping: the bar just ends
                return

    with bar:
        task = bar.add_task(description, total=None)
        th = threading.Thread(target=poll, name="mqctl-spark-progress", daemon=True)
        th.start()
        try:
            yield
        finally:
            stop.set()
            th.join(timeout=2)
