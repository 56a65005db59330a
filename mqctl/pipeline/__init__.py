"""The data pipeline: salvage and analysis of commitlogs on Spark (docs/pipeline.md).

Layers, each importable on its own:

* `ranges`: pure; cuts the commitlog files of a store into byte ranges (the Spark partitions).
* `parser`: pure, numpy; parses ONE byte range into columns, resynchronising on a record boundary
  (the PHYSICALOFFSET field). Plain functions: tests and the single-process baseline call them directly.
* `tasks`: what one Spark task does with one range (message rows, dedupe keys, per-queue aggregates).
* `engine`: the Spark session (quiet local settings or `--master`), dependency checks, progress bar.
* `salvage`, `analyze`: the two jobs.

Nothing here is imported by `mqctl --help`: pyspark and numpy load inside the commands.
"""
