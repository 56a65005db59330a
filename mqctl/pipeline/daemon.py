"""Spark's Python daemon for the pipeline's jobs (`spark.python.daemon.module`, set by
`engine.EXECUTOR_DEFAULTS`): pyspark's own daemon, with the modules every task needs imported before it
forks its workers, and Arrow's jemalloc pool.

A worker forked from this daemon shares those modules' pages with it instead of importing its own copy
(numpy, pyarrow with Parquet and its compute kernels, pandas, which pyarrow imports on its first array
anyway, pyspark's worker and mqctl's task modules), and spends no CPU importing them. `gc.freeze()` keeps
the workers' garbage collections off the inherited objects, whose pages would otherwise be copied into
each worker as the collector touches them. Arrow's default pool on Linux, mimalloc, kept about 40 MiB
more per writer task than jemalloc at no gain in CPU (bench/README.md); an ARROW_DEFAULT_MEMORY_POOL the
operator gives the executors (`spark.executorEnv.ARROW_DEFAULT_MEMORY_POOL`) wins.
"""

from __future__ import annotations

import gc
import importlib
import os
import sys

PRELOAD = (
    "numpy",
    "pandas",
    "pyarrow",
    "pyarrow.compute",
    "pyarrow.parquet",
    "pyspark.worker",
    "mqctl.pipeline.analyze",
    "mqctl.pipeline.outdir",
    "mqctl.pipeline.salvage",
    "mqctl.pipeline.tasks",
)


def preload() -> None:

    if sys.platform.startswith("linux"):  # pyarrow's Linux wheels have jemalloc; read at its import
        os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "jemalloc")
    for name in PRELOAD:
        importlib.import_module(name)
    gc.collect()
    gc.freeze()


if __name__ == "__main__":
    preload()
    from pyspark.daemon import manager

    manager()
