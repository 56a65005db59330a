"""The settings mqctl gives the executors to keep a salvage within 1 GiB per 2 cores
(engine.EXECUTOR_DEFAULTS): what the workers of a real Spark session run with, and that the operator's own
configuration wins."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from pipeline_fixtures import spark_missing

from mqctl.pipeline.engine import EXECUTOR_DEFAULTS, JAVA_OPTIONS, executor_defaults


def test_the_operators_keys_win() -> None:
    assert executor_defaults(set()) == EXECUTOR_DEFAULTS
    java = EXECUTOR_DEFAULTS[JAVA_OPTIONS]
    assert executor_defaults({"spark.python.daemon.module"}) == {JAVA_OPTIONS: java}
    # their java options may choose another collector, which would conflict with ours
    for key in (JAVA_OPTIONS, "spark.executor.extraJavaOptions"):
        assert executor_defaults({key}) == {"spark.python.daemon.module": "mqctl.pipeline.daemon"}


@pytest.mark.spark
def test_workers_fork_from_mqctls_daemon_with_jemalloc(spark) -> None:
    conf = spark.sparkContext.getConf()
    for k, v in EXECUTOR_DEFAULTS.items():
        assert conf.get(k) == v

    def worker_state(batches):  # in a Python worker of the session (a closure: pickled by value)
        import gc

        import pyarrow as pa

        main = sys.modules["__main__"].__spec__
        for _ in batches:
            yield pa.RecordBatch.from_pylist(
                [
                    {
                        "daemon": main.name if main else "",
                        "frozen": gc.get_freeze_count(),
                        "pool": pa.default_memory_pool().backend_name,
                    }
                ]
            )

    rows = (
        spark.range(2, numPartitions=2)
        .mapInArrow(worker_state, "daemon string, frozen long, pool string")
        .collect()
    )
    assert {r["daemon"] for r in rows} == {"mqctl.pipeline.daemon"}
    assert all(r["frozen"] > 10000 for r in rows)  # numpy, pyarrow, pandas, mqctl: left to be shared
    if sys.platform.startswith("linux"):
        assert {r["pool"] for r in rows} == {"jemalloc"}


CHILD = """
import json
from mqctl.pipeline.engine import spark_session
with spark_session("local[1]", app_name="mqctl-tests-conf") as s:
    c = s.sparkContext.getConf()
    print(json.dumps({k: c.get(k) for k in ("spark.python.daemon.module", "spark.executor.defaultJavaOptions",
                                            "spark.executor.extraJavaOptions")}))
"""


@pytest.mark.spark
@pytest.mark.timeout(300)
def test_an_operators_conf_is_not_overridden(tmp_path) -> None:
    why = spark_missing()
    if why:
        pytest.skip(why)
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    (conf_dir / "spark-defaults.conf").write_text("spark.python.daemon.module pyspark.daemon\n")
    env = {
        **os.environ,
        "SPARK_CONF_DIR": str(conf_dir),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_SUBMIT_ARGS": "--conf spark.executor.extraJavaOptions=-XX:+UseG1GC pyspark-shell",
    }
    p = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, timeout=240)
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout.splitlines()[-1])
    assert got["spark.python.daemon.module"] == "pyspark.daemon"
    assert got["spark.executor.defaultJavaOptions"] is None
    assert got["spark.executor.extraJavaOptions"].endswith(" -XX:+UseG1GC")  # after Spark's own options
