"""`mqctl analyze commitlog`: per topic and queue of every store, message count, bytes, first and last
store time, queue and physical offset ranges; every damaged record with its file and position.

Same engine as salvage: every byte of every commitlog file, cut into ranges; each task aggregates its
range with numpy (`tasks.analyze_rows`), the driver merges the few partial aggregates. Output with
`--out DIR`: `DIR/queues/part-00000.parquet`, `DIR/problems/part-00000.parquet`, `DIR/summary.json`
(kind mqctl-analyze; the same document `-o json` prints). Reading only: the stores are never written.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mqctl.errors import StoreError
from mqctl.pipeline.outdir import (
    HIDDEN,
    SUMMARY_FILE,
    check_out_dir,
    install_output,
    tree_digest,
    write_parquet,
)
from mqctl.pipeline.ranges import DEFAULT_RANGE_SIZE, ByteRange, store_ranges
from mqctl.pipeline.tasks import PROBLEM_COLUMNS, QUEUE_COLUMNS, analyze_rows, skipped_bytes
from mqctl.store.commitlog import COMMITLOG_DIR, CommitLog

KIND = "mqctl-analyze"

__all__ = ["AnalyzeInput", "prepare_analyze", "run_analyze"]


@dataclass
class AnalyzeInput:
    ranges: list[ByteRange] = field(default_factory=list)
    stores: list[dict[str, Any]] = field(default_factory=list)
    not_analyzed: list[dict[str, Any]] = field(default_factory=list)

    @property
    def nbytes(self) -> int:
        return sum(r.length for r in self.ranges)

    def cut(self, range_size: int) -> None:
        self.ranges = [
            r
            for s in self.stores
            for r in store_ranges(
                s["store"],
                range_size=range_size,
                meta={"clusterName": s["clusterName"], "brokerName": s["brokerName"], "store": s["store"]},
            )
        ]


def prepare_analyze(stores: list[str], *, range_size: int = DEFAULT_RANGE_SIZE) -> AnalyzeInput:
    """Identity and files of each store (no scan: the job reads everything anyway)."""
    from mqctl.store.identity import read_identity  # lazy: start-up

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
        inp.stores.append(
            {
                "store": s,
                "clusterName": c,
                "brokerName": b,
                "brokerId": ident.broker_id if ident else None,
                "files": len(log.files),
                "fileSize": log.file_size,
                "totalBytes": log.total_bytes,
            }
        )
    inp.cut(range_size)
    return inp


def _schemas() -> tuple[Any, Any]:
    import pyarrow as pa  # lazy: pyarrow

    s, i, ln = pa.string(), pa.int32(), pa.int64()
    text = ("clusterName", "brokerName", "store", "topic")
    q = pa.schema([(n, s if n in text else i if n == "queueId" else ln) for n in QUEUE_COLUMNS])
    p = pa.schema([(n, ln if n in ("position", "offset", "length") else s) for n in PROBLEM_COLUMNS])
    return q, p


_QKEY = ("clusterName", "brokerName", "store", "topic", "queueId")


def _keyed(t: tuple[str, tuple[Any, ...]]) -> tuple[tuple[Any, ...], tuple[str, tuple[Any, ...]]]:
    """Merge key: the queue for aggregates, the position for problems (unique)."""
    kind, row = t
    return ((kind, *row[:5]) if kind == "q" else (kind, row[2], row[5])), t


def _merge(a: tuple[str, tuple[Any, ...]], b: tuple[str, tuple[Any, ...]]) -> tuple[str, tuple[Any, ...]]:
    """Combine two partial aggregates of one queue (QUEUE_COLUMNS order)."""
    if a[0] != "q":
        return a
    x, y = a[1], b[1]
    return "q", (
        *x[:5],
        x[5] + y[5],
        x[6] + y[6],
        min(x[7], y[7]),
        max(x[8], y[8]),
        min(x[9], y[9]),
        max(x[10], y[10]),
        min(x[11], y[11]),
        max(x[12], y[12]),
        x[13] + y[13],
    )


def run_analyze(
    spark: Any,
    inp: AnalyzeInput,
    out: str | os.PathLike[str] | None = None,
    *,
    show_progress: bool | None = None,
    overwrite: bool = False,
) -> dict[str, Any]:
    """On Spark (`spark`, a session) or in this process (`spark` None): the same partial aggregates per
    range, merged by queue; the same files."""
    from mqctl.pipeline.engine import progress, spark_cores, task_groups  # lazy: start-up

    outp = None if out is None else Path(out).absolute()
    if outp is not None:
        check_out_dir(outp, KIND, overwrite=overwrite)
    counted = [0, 0]
    if spark is None:

        def done() -> tuple[int, int]:
            return counted[0], counted[1]
    else:
        sc = spark.sparkContext
        acc_b, acc_m = sc.accumulator(0), sc.accumulator(0)

        def done() -> tuple[int, int]:
            return int(acc_b.value), int(acc_m.value)

    with progress("analyze", inp.nbytes, done, enabled=show_progress):
        if spark is None:

            def local() -> Iterator[tuple[str, tuple[Any, ...]]]:
                for br in inp.ranges:
                    for r in analyze_rows(br):
                        counted[1] += r[1][5] if r[0] == "q" else 0
                        yield r
                    counted[0] += br.length

            found: Iterable[tuple[str, tuple[Any, ...]]] = local()
        else:
            ranges = inp.ranges
            groups = task_groups([r.length for r in ranges], spark_cores(spark))

            def rows(group: list[int]) -> Iterator[tuple[str, tuple[Any, ...]]]:
                for i in group:
                    out_ = list(analyze_rows(ranges[i]))
                    acc_b.add(ranges[i].length)
                    acc_m.add(sum(r[1][5] for r in out_ if r[0] == "q"))
                    yield from out_

            # one stage: a task per group of ranges gives a few rows per queue it saw (no shuffle, no
            # second stage of Python workers); the driver merges them
            found = sc.parallelize(groups, max(1, len(groups))).flatMap(rows).collect()
        acc: dict[tuple[Any, ...], tuple[str, tuple[Any, ...]]] = {}
        for k, v in map(_keyed, found):
            acc[k] = _merge(acc[k], v) if k in acc else v
        merged = list(acc.values())
    q_rows = sorted(
        (dict(zip(QUEUE_COLUMNS, r[1], strict=True)) for r in merged if r[0] == "q"),
        key=lambda d: tuple("" if d[k] is None else d[k] for k in _QKEY),
    )
    p_rows = sorted(
        (dict(zip(PROBLEM_COLUMNS, r[1], strict=True)) for r in merged if r[0] == "p"),
        key=lambda d: (d["store"], d["offset"]),
    )
    digest = None
    if outp is not None:
        import pyarrow as pa  # lazy: pyarrow

        outp.mkdir(exist_ok=True)
        tmp = outp / f"{HIDDEN}tmp-{os.getpid()}"
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir()
        qschema, pschema = _schemas()
        for name, data, schema in (("queues", q_rows, qschema), ("problems", p_rows, pschema)):
            batch = pa.RecordBatch.from_pylist(data, schema=schema)
            write_parquet(tmp / name / "part-00000.parquet", schema, [batch])
        digest = tree_digest(tmp)
    doc = _document(inp, q_rows, p_rows, digest)
    if outp is not None:
        (tmp / SUMMARY_FILE).write_text(json.dumps(doc, indent=2) + "\n")
        install_output(tmp, outp, ("queues", "problems", SUMMARY_FILE), digest or "")
        shutil.rmtree(tmp, ignore_errors=True)
    return {**doc, "out": None if outp is None else str(outp)}


def _document(
    inp: AnalyzeInput, queues: list[dict[str, Any]], problems: list[dict[str, Any]], digest: str | None
) -> dict[str, Any]:
    skipped = skipped_bytes(problems)
    stores = []
    for s in inp.stores:
        mine = [q for q in queues if q["store"] == s["store"]]
        stores.append(
            {
                **s,
                "messages": sum(q["messages"] for q in mine),
                "messageBytes": sum(q["bytes"] for q in mine),
                "topics": len({q["topic"] for q in mine}),
                "queues": len(mine),
                "problems": sum(1 for p in problems if p["store"] == s["store"]),
                "skippedBytes": skipped.get(s["store"], 0),
            }
        )
    return {
        "kind": KIND,
        "stores": stores,
        "queues": queues,
        "problems": problems,
        "notAnalyzed": inp.not_analyzed,
        "digest": digest,
    }
