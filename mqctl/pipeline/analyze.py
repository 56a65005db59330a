"""`mqctl analyze commitlog`: per topic and queue of every store, message count, bytes, first and last
store time, queue and physical offset ranges; every damaged record with its file and position.

Same engine as salvage: every byte of every commitlog file, cut into ranges; each task aggregates its
range with numpy (`tasks.analyze_rows`), Spark merges the partial aggregates. Output with `--out DIR`:
`DIR/queues/part-00000.parquet`, `DIR/problems/part-00000.parquet`, `DIR/summary.json` (kind
mqctl-analyze; the same document `-o json` prints). Reading only: the stores are never written.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mqctl.pipeline.output import (
    SUMMARY_FILE,
    check_out_dir,
    install_output,
    normalise_spark_output,
    tree_digest,
)
from mqctl.pipeline.ranges import DEFAULT_RANGE_SIZE, ByteRange, store_ranges
from mqctl.pipeline.tasks import PROBLEM_COLUMNS, QUEUE_COLUMNS

KIND = "mqctl-analyze"

__all__ = ["AnalyzeInput", "prepare_analyze", "run_analyze"]


@dataclass
class AnalyzeInput:
    ranges: list[ByteRange] = field(default_factory=list)
    stores: list[dict[str, Any]] = field(default_factory=list)
    not_analyzed: list[dict[str, Any]] = field(default_factory=list)


def prepare_analyze(stores: list[str], *, range_size: int = DEFAULT_RANGE_SIZE) -> AnalyzeInput:
    """Identity and files of each store (no scan: the job reads everything anyway)."""
    from mqctl.errors import StoreError
    from mqctl.store.commitlog import COMMITLOG_DIR, CommitLog
    from mqctl.store.identity import read_identity

    inp = AnalyzeInput()
    for s in dict.fromkeys(os.path.abspath(p) for p in stores):
        root = Path(s)
        if not (root / COMMITLOG_DIR).is_dir():
            inp.not_analyzed.append({"store": s, "reason": f"no {COMMITLOG_DIR} directory"})
            continue
        try:
            log = CommitLog(root / COMMITLOG_DIR)
        except StoreError as exc:
            inp.not_analyzed.append({"store": s, "reason": str(exc)})
            continue
        ident = read_identity(root)
        c, b = (ident.cluster_name, ident.broker_name) if ident else (None, None)
        inp.stores.append({"store": s, "clusterName": c, "brokerName": b,
                           "brokerId": ident.broker_id if ident else None, "files": len(log.files),
                           "fileSize": log.file_size, "totalBytes": log.total_bytes})
        inp.ranges += store_ranges(s, range_size=range_size,
                                   meta={"clusterName": c, "brokerName": b, "store": s})
    return inp


def _schemas() -> tuple[Any, Any]:
    from pyspark.sql import types as T

    s, i, ln = T.StringType(), T.IntegerType(), T.LongType()
    q = T.StructType([T.StructField(n, t, True) for n, t in (
        ("clusterName", s), ("brokerName", s), ("store", s), ("topic", s), ("queueId", i), ("messages", ln),
        ("bytes", ln), ("firstStoreTimestamp", ln), ("lastStoreTimestamp", ln), ("minQueueOffset", ln),
        ("maxQueueOffset", ln), ("minPhysicalOffset", ln), ("maxPhysicalOffset", ln), ("crcErrors", ln))])
    p = T.StructType([T.StructField(n, t, True) for n, t in (
        ("clusterName", s), ("brokerName", s), ("store", s), ("file", s), ("position", ln), ("offset", ln),
        ("length", ln), ("kind", s), ("reason", s))])
    return q, p


_QKEY = ("clusterName", "brokerName", "store", "topic", "queueId")


def _keyed(t: tuple[str, tuple[Any, ...]]) -> tuple[tuple[Any, ...], tuple[str, tuple[Any, ...]]]:
    """Shuffle key: the queue for aggregates, the position for problems (unique)."""
    kind, row = t
    return ((kind, *row[:5]) if kind == "q" else (kind, row[2], row[5])), t


def _merge(a: tuple[str, tuple[Any, ...]], b: tuple[str, tuple[Any, ...]]) -> tuple[str, tuple[Any, ...]]:
    """Combine two partial aggregates of one queue (QUEUE_COLUMNS order)."""
    if a[0] != "q":
        return a
    x, y = a[1], b[1]
    return "q", (*x[:5], x[5] + y[5], x[6] + y[6], min(x[7], y[7]), max(x[8], y[8]), min(x[9], y[9]),
                 max(x[10], y[10]), min(x[11], y[11]), max(x[12], y[12]), x[13] + y[13])


def run_analyze(spark: Any, inp: AnalyzeInput, out: str | os.PathLike[str] | None = None, *,
                show_progress: bool | None = None) -> dict[str, Any]:
    from mqctl.pipeline.engine import progress
    from mqctl.pipeline.tasks import analyze_rows

    outp = None if out is None else Path(out).absolute()
    if outp is not None:
        check_out_dir(outp, KIND)
    qschema, pschema = _schemas()
    sc = spark.sparkContext
    with progress(spark, "analyze", enabled=show_progress):
        # one job: partial aggregates per range, merged by key in one shuffle; problems pass through
        nparts = max(1, min(len(inp.ranges), sc.defaultParallelism))
        merged = sc.parallelize(inp.ranges or [], max(1, len(inp.ranges))).flatMap(analyze_rows) \
            .map(_keyed).reduceByKey(_merge, numPartitions=nparts).values().collect()
        q_rows = sorted((dict(zip(QUEUE_COLUMNS, r[1], strict=True)) for r in merged if r[0] == "q"),
                        key=lambda d: tuple("" if d[k] is None else d[k] for k in _QKEY))
        p_rows = sorted((dict(zip(PROBLEM_COLUMNS, r[1], strict=True)) for r in merged if r[0] == "p"),
                        key=lambda d: (d["store"], d["offset"]))
        digest = None
        if outp is not None:
            outp.mkdir(parents=True, exist_ok=True)
            tmp = outp / f".mqctl-tmp-{os.getpid()}"
            if tmp.exists():
                shutil.rmtree(tmp)
            tmp.mkdir()
            for name, rows, schema, cols in (("queues", q_rows, qschema, QUEUE_COLUMNS),
                                             ("problems", p_rows, pschema, PROBLEM_COLUMNS)):
                data = [tuple(r[c] for c in cols) for r in rows]
                df = spark.createDataFrame(data, schema, verifySchema=False)
                df.coalesce(1).write.mode("overwrite").parquet(str(tmp / name))
                normalise_spark_output(tmp / name)
            digest = tree_digest(tmp)
    doc = _document(inp, q_rows, p_rows, digest)
    if outp is not None:
        (tmp / SUMMARY_FILE).write_text(json.dumps(doc, indent=2) + "\n")
        install_output(tmp, outp, ("queues", "problems", SUMMARY_FILE), digest or "")
        shutil.rmtree(tmp, ignore_errors=True)
    return {**doc, "out": None if outp is None else str(outp)}


def _document(inp: AnalyzeInput, queues: list[dict[str, Any]], problems: list[dict[str, Any]],
              digest: str | None) -> dict[str, Any]:
    stores = []
    for s in inp.stores:
        mine = [q for q in queues if q["store"] == s["store"]]
        stores.append({**s, "messages": sum(q["messages"] for q in mine),
                       "messageBytes": sum(q["bytes"] for q in mine),
                       "topics": len({q["topic"] for q in mine}), "queues": len(mine),
                       "problems": sum(1 for p in problems if p["store"] == s["store"])})
    return {"kind": KIND, "stores": stores, "queues": queues, "problems": problems,
            "notAnalyzed": inp.not_analyzed, "digest": digest}
