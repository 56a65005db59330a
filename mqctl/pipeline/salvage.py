"""`mqctl recover salvage`: save what truncating the replicas of a plan would drop, as Parquet.

Inputs come from `make_plan` (docs/recovery.md): per broker set a source and, per replica, `truncateTo`.
Candidates are every record at or after a replica's `truncateTo` up to the end of its files (past its
max offset too: beyond a corrupt record, recovery drops those as well); the source itself contributes
what lies beyond its own max offset. A candidate is dropped when the source keeps the same message
(`parser.message_key`: UNIQ_KEY, else born host + born timestamp + BODYCRC) between the set's smallest
`truncateTo` (or its first record with `full_source`) and its max offset; the rest is deduplicated
across replicas (one row per message: the copy of the replica first in the plan's order) and written.

Output (docs/pipeline.md): `DIR/messages/clusterName=<c>/brokerName=<b>/part-00000.parquet` (rows
sorted by topic, queueId, epoch, physicalOffset), `DIR/schema.json`, `DIR/summary.json`. No time in
them: a rerun on the same stores gives byte-identical files. A previous salvage with another digest is
moved to `DIR.salvage-backup-<UTC time>` first, never overwritten.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
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

SCHEMA_FILE = "schema.json"
MESSAGES_DIR = "messages"
KIND = "mqctl-salvage"
LAYOUT_VERSION = 1
PROBLEM_COL = "_problem"
BROADCAST_KEYS = 1_000_000      # source keys up to this many are broadcast to the join, else shuffled
# the message columns of a problem row: its set and store (so it lands in its set's partition), else
# these non-null placeholders (messageKey "" matches no message; the row is never written)
_DEFAULTS: dict[str, Any] = {"string": "", "int64": 0, "int32": 0, "bool": False, "binary": b"",
                             "map<string, string>": []}
_PROBLEM_AT = {"clusterName": 0, "brokerName": 1, "store": 2}     # in PROBLEM_COLUMNS
SORT_COLUMNS = ("clusterName", "brokerName", "topic", "queueId", "epoch", "physicalOffset", "store")

__all__ = ["SalvageInput", "prepare", "run_salvage", "message_schema"]


@dataclass
class SalvageInput:
    """The plan turned into byte ranges: `candidates` (replica tails) and `keys` (what sources keep)."""

    plan: dict[str, Any]
    candidates: list[ByteRange] = field(default_factory=list)
    keys: list[ByteRange] = field(default_factory=list)
    sets: list[dict[str, Any]] = field(default_factory=list)
    not_salvaged: list[dict[str, Any]] = field(default_factory=list)


def prepare(stores: list[str], *, range_size: int = DEFAULT_RANGE_SIZE,
            full_source: bool = False) -> SalvageInput:
    """Inspect the stores, make the plan, cut the byte ranges (driver side, no Spark)."""
    from mqctl.recover.inspect import inspect_store
    from mqctl.recover.plan import make_plan

    paths = list(dict.fromkeys(os.path.abspath(s) for s in stores))
    reports = [inspect_store(p) for p in paths]
    by_path = {r.path: r for r in reports}
    plan = make_plan(reports)
    inp = SalvageInput(plan)
    for u in plan["unmatched"]:
        inp.not_salvaged.append({"store": u["store"], "reason": u["reason"]})
    for s in plan["brokerSets"]:
        c, b = s["clusterName"], s["brokerName"]
        src = by_path[s["source"]] if s["source"] is not None else None
        tts = [r["truncateTo"] for r in s["replicas"] if r["truncateTo"] is not None]
        frm = None if src is None else src.min_offset if full_source else min(tts)
        set_doc: dict[str, Any] = {"clusterName": c, "brokerName": b, "source": s["source"],
                                   "comparedFrom": frm, "comparedTo": None if src is None else src.max_offset,
                                   "replicas": []}
        inp.sets.append(set_doc)
        # every replica of the plan is listed, also one with nothing to read (an empty commitlog, no
        # commitlog directory, or a set where every store is empty: no source, no truncateTo)
        for rank, row in enumerate(s["replicas"]):
            rep = by_path[row["store"]]
            tt = row["truncateTo"]
            ranges: list[ByteRange] = []
            if tt is not None and rep.file_count:
                meta = {"clusterName": c, "brokerName": b, "store": rep.path, "brokerId": rep.broker_id,
                        "rank": rank, "epochs": [(e.start_offset, e.epoch) for e in rep.epochs]}
                ranges = store_ranges(rep.path, from_offset=tt, range_size=range_size, meta=meta)
                inp.candidates += ranges
            set_doc["replicas"].append({"store": rep.path, "brokerId": rep.broker_id, "state": rep.state,
                                        "truncateTo": tt, "maxOffset": rep.max_offset,
                                        "bytesRead": sum(r.limit - r.start for r in ranges if r.head_owned)})
        if src is not None and frm is not None and src.max_offset > frm:
            inp.keys += store_ranges(src.path, from_offset=frm, to_offset=src.max_offset,
                                     range_size=range_size,
                                     meta={"clusterName": c, "brokerName": b, "store": src.path})
    return inp


def message_schema() -> Any:
    from pyspark.sql import types as T

    s, i, ln = T.StringType(), T.IntegerType(), T.LongType()
    cols = [("clusterName", s, False), ("brokerName", s, False), ("store", s, False), ("brokerId", ln, True),
            ("epoch", ln, True), ("physicalOffset", ln, False), ("size", i, False), ("version", i, False),
            ("topic", s, False), ("queueId", i, False), ("queueOffset", ln, False), ("flag", i, False),
            ("sysFlag", i, False), ("bornTimestamp", ln, False), ("bornHost", s, False),
            ("storeTimestamp", ln, False), ("storeHost", s, False), ("reconsumeTimes", i, False),
            ("preparedTransactionOffset", ln, False), ("bodyCrc", ln, False),
            ("crcOk", T.BooleanType(), False),
            ("uniqKey", s, True), ("keys", s, True), ("tags", s, True),
            ("properties", T.MapType(s, s, True), False), ("rawProperties", T.BinaryType(), False),
            ("body", T.BinaryType(), False), ("messageKey", s, False), ("rank", i, False)]
    return T.StructType([T.StructField(n, t, nullable) for n, t, nullable in cols])


def run_salvage(spark: Any, inp: SalvageInput, out: str | os.PathLike[str] | None, *,
                dry_run: bool = False, show_progress: bool | None = None) -> dict[str, Any]:
    """Run the job; write DIR unless dry_run (or out is None). Returns summary.json's document."""
    from pyspark import StorageLevel
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from mqctl.pipeline.engine import progress
    from mqctl.pipeline.tasks import KEY_COLUMNS

    outp = None if out is None else Path(out).absolute()
    writing = outp is not None and not dry_run
    if writing:
        assert outp is not None
        check_out_dir(outp, KIND)
    schema = message_schema()
    with progress(spark, "salvage", enabled=show_progress):
        msgs = _parsed(spark, inp.candidates, schema)
        kschema = T.StructType([T.StructField(n, T.StringType(), False) for n in KEY_COLUMNS])
        keys = _key_frame(spark, inp.keys, kschema).distinct().persist(StorageLevel.MEMORY_AND_DISK)
        j = None
        try:
            group = ["clusterName", "brokerName", "messageKey"]
            right = keys.withColumn("onSource", F.lit(True))
            if keys.count() <= BROADCAST_KEYS:
                right = F.broadcast(right)      # small: sent to every task, no shuffle of the messages
            # one shuffle by broker set serves the window (a finer clustering) and the write (one file
            # per set); with a broadcast join it is the only shuffle of the message rows. Problem rows
            # ride along (messageKey "" matches nothing) and are counted apart below.
            j = msgs.join(right, on=group, how="left").repartition("clusterName", "brokerName")
            j = j.withColumn("onSource", F.coalesce("onSource", F.lit(False)))
            w = Window.partitionBy(*group)
            j = j.withColumn("copies", F.count(F.lit(1)).over(w)) \
                 .withColumn("_n", F.row_number().over(w.orderBy("rank", "physicalOffset", "store")))
            if writing:
                j = j.persist(StorageLevel.MEMORY_AND_DISK)      # read twice: counts, then the write
            is_msg = F.col(PROBLEM_COL).isNull()
            kept = is_msg & (~F.col("onSource")) & (F.col("_n") == 1)

            def when_kept(c: Any) -> Any:
                return F.sum(F.when(kept, c).otherwise(0).cast("long"))

            # every count of the summary in one small aggregate: per store and topic, plus one row per
            # problem (its JSON is part of the key)
            counts = j.groupBy("clusterName", "brokerName", "store", "topic", PROBLEM_COL).agg(
                F.count(F.lit(1)).alias("records"), F.sum(F.col("onSource").cast("long")).alias("onSource"),
                when_kept(F.lit(1)).alias("messages"), when_kept(F.col("size")).alias("bytes"),
                when_kept(F.length("body")).alias("bodyBytes"),
                when_kept((~F.col("crcOk")).cast("long")).alias("crcErrors")).collect()
            problems = [tuple(json.loads(r[PROBLEM_COL])) for r in counts if r[PROBLEM_COL] is not None]
            per_store, per_topic = _per_store_topic([r.asDict() for r in counts if r[PROBLEM_COL] is None])
            final = j.filter(kept).drop("onSource", "_n", "rank", PROBLEM_COL)
            digest = None
            backup = None
            if writing:
                assert outp is not None
                outp.mkdir(parents=True, exist_ok=True)
                tmp = outp / f".mqctl-tmp-{os.getpid()}"
                if tmp.exists():
                    shutil.rmtree(tmp)
                tmp.mkdir()
                final.sortWithinPartitions(*SORT_COLUMNS) \
                    .write.mode("overwrite").partitionBy("clusterName", "brokerName") \
                    .parquet(str(tmp / MESSAGES_DIR))
                (tmp / MESSAGES_DIR).mkdir(exist_ok=True)          # no rows: an empty directory
                normalise_spark_output(tmp / MESSAGES_DIR)
                (tmp / SCHEMA_FILE).write_text(json.dumps(json.loads(final.schema.json()), indent=1,
                                                          sort_keys=True) + "\n")
                digest = tree_digest(tmp)
        finally:
            keys.unpersist()
            if j is not None:
                j.unpersist()
    doc = _summary(inp, per_store, per_topic, problems, digest)
    if writing:
        assert outp is not None
        (tmp / SUMMARY_FILE).write_text(json.dumps(doc, indent=2, sort_keys=False) + "\n")
        backup = install_output(tmp, outp, (MESSAGES_DIR, SCHEMA_FILE, SUMMARY_FILE), doc["digest"])
        shutil.rmtree(tmp, ignore_errors=True)
    return {**doc, "out": None if outp is None else str(outp), "dryRun": not writing, "backup": backup}


def _parsed(spark: Any, ranges: list[ByteRange], schema: Any) -> Any:
    """Message rows of every range (mapInArrow over one id per range: the rows enter the JVM as Arrow
    batches), plus one row per problem with PROBLEM_COL set (its PROBLEM_COLUMNS as JSON) and defaults
    in the message columns."""
    from pyspark.sql import types as T

    from mqctl.pipeline.tasks import arrow_slices, salvage_arrow

    out = T.StructType([*schema.fields, T.StructField(PROBLEM_COL, T.StringType(), True)])

    def parse(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        for b in batches:
            for i in b.column(0).to_pylist():
                batch, probs = salvage_arrow(ranges[i])
                target = pa.schema([pa.field(f.name, pa.binary() if f.type == pa.large_binary() else f.type)
                                    for f in batch.schema] + [pa.field(PROBLEM_COL, pa.string())])
                batch = batch.append_column(PROBLEM_COL, pa.nulls(batch.num_rows, pa.string()))
                yield from arrow_slices(batch, batch.column("size").to_numpy(), target)
                if probs:
                    cols = [pa.array([p[_PROBLEM_AT[f.name]] or "" if f.name in _PROBLEM_AT
                                      else _DEFAULTS[str(f.type)] for p in probs], f.type)
                            for f in target if f.name != PROBLEM_COL]
                    cols.append(pa.array([json.dumps(p) for p in probs], pa.string()))
                    yield pa.RecordBatch.from_arrays(cols, schema=target)

    return spark.range(0, max(1, len(ranges)), 1, max(1, len(ranges))) \
        .filter(f"id < {len(ranges)}").mapInArrow(parse, out)


def _key_frame(spark: Any, ranges: list[ByteRange], schema: Any) -> Any:
    from mqctl.pipeline.tasks import key_arrow

    def keys(batches: Iterator[Any]) -> Iterator[Any]:
        for b in batches:
            for i in b.column(0).to_pylist():
                yield key_arrow(ranges[i])

    return spark.range(0, max(1, len(ranges)), 1, max(1, len(ranges))) \
        .filter(f"id < {len(ranges)}").mapInArrow(keys, schema)


def _per_store_topic(rows: list[dict[str, Any]]) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """The (store, topic) counts summed per store, and per (set, topic) over the salvaged messages."""
    per_store: dict[str, dict[str, Any]] = {}
    per_topic: dict[tuple[str, str, str], dict[str, Any]] = {}
    for r in rows:
        st = per_store.setdefault(r["store"], {"store": r["store"], "records": 0, "alreadyOnSource": 0,
                                               "salvaged": 0, "salvagedBytes": 0})
        st["records"] += r["records"]
        st["alreadyOnSource"] += r["onSource"]
        st["salvaged"] += r["messages"]
        st["salvagedBytes"] += r["bytes"]
        if r["messages"]:
            k = (r["clusterName"], r["brokerName"], r["topic"])
            t = per_topic.setdefault(k, {"clusterName": k[0], "brokerName": k[1], "topic": k[2],
                                         "messages": 0, "bytes": 0, "bodyBytes": 0, "crcErrors": 0})
            for c in ("messages", "bytes", "bodyBytes", "crcErrors"):
                t[c] += r[c]
    return per_store, list(per_topic.values())


def _summary(inp: SalvageInput, per_store: dict[str, dict[str, Any]], per_topic: list[dict[str, Any]],
             problems: list[tuple[Any, ...]], digest: str | None) -> dict[str, Any]:
    from mqctl.pipeline.tasks import PROBLEM_COLUMNS

    sets = []
    total_m = total_b = 0
    for s in inp.sets:
        topics = sorted((dict(r) for r in per_topic
                         if (r["clusterName"], r["brokerName"]) == (s["clusterName"], s["brokerName"])),
                        key=lambda d: d["topic"])
        for t in topics:
            del t["clusterName"], t["brokerName"]
        replicas = []
        for rep in s["replicas"]:
            st = per_store.get(rep["store"], {})
            records = int(st.get("records") or 0)
            on_src = int(st.get("alreadyOnSource") or 0)
            salv = int(st.get("salvaged") or 0)
            replicas.append({**rep, "recordsPastTruncateTo": records, "alreadyOnSource": on_src,
                             "copiesOnOtherReplicas": records - on_src - salv, "salvaged": salv,
                             "salvagedBytes": int(st.get("salvagedBytes") or 0)})
        m = sum(t["messages"] for t in topics)
        b = sum(t["bytes"] for t in topics)
        total_m += m
        total_b += b
        sets.append({**s, "replicas": replicas, "messages": m, "bytes": b, "topics": topics})
    probs = sorted((dict(zip(PROBLEM_COLUMNS, p, strict=True)) for p in problems),
                   key=lambda d: (d["store"], d["offset"]))
    return {"kind": KIND, "layoutVersion": LAYOUT_VERSION,
            "layout": {"messages": f"{MESSAGES_DIR}/clusterName=<c>/brokerName=<b>/part-NNNNN.parquet",
                       "schema": SCHEMA_FILE, "sortedBy": list(SORT_COLUMNS)},
            "messages": total_m, "bytes": total_b, "brokerSets": sets,
            "notSalvaged": sorted(inp.not_salvaged, key=lambda d: d["store"]), "problems": probs,
            "digest": digest}
