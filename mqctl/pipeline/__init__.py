"""The data pipeline: salvage and analysis of commitlogs, on Spark or in this process (docs/pipeline.md).

Layers, each importable on its own:

* `ranges`: pure; cuts the commitlog files of a store into byte ranges (the tasks).
* `tasks`: what one task does with one range, on either engine: the record walker
  (`mqctl.store.walker`) over it, then salvage's candidate rows and message batches (Arrow), the source's
  keys, analyze's per-queue aggregates.
* `engine`: the engine choice (--engine auto), range sizing, the Spark session (quiet local settings or
  `--master`, the executor settings), dependency checks, the progress bar.
* `daemon`: the executors' Python daemon (`spark.python.daemon.module`): the task modules imported once,
  before it forks the workers.
* `output`: DIR's rules and the one Parquet writer both engines use.
* `salvage`, `analyze`: the two jobs.

Nothing here is imported by `mqctl --help`: pyspark, numpy and pyarrow load inside the commands.
"""
