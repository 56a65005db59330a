"""`mqctl recover salvage`: save what truncating the replicas of a plan would drop, as Parquet.

Inputs come from `make_plan` (docs/recovery.md): per broker set a source and, per replica, `truncateTo`.
Candidates are every record at or after a replica's `truncateTo` up to the end of its files (past its
max offset too: beyond a corrupt record, recovery drops those as well); the source itself contributes
what lies beyond its own max offset. A candidate is dropped when the source keeps the same message
(`tasks.message_key`: UNIQ_KEY, else born host + born timestamp + BODYCRC) between the set's smallest
`truncateTo` (or its first record with `full_source`) and its max offset; the rest is deduplicated
across replicas (one row per message: the copy of the replica first in the plan's order) and written.

Two passes over the replicas' ranges (`tasks.candidate_keys`, then `tasks.message_batch` for the kept
records only), the same on Spark and in-process (the local engine): both write the same files, through
pyarrow. Output (docs/pipeline.md): `DIR/messages/clusterName=<c>/brokerName=<b>/part-NNNNN.parquet`
(one part per epoch and PART_BYTES window of physical offsets, rows sorted by topic, queueId, epoch,
physicalOffset, store), `DIR/schema.json`, `DIR/summary.json`. No time in them: a rerun on the same
stores gives byte-identical files. A previous salvage is replaced only with --overwrite, and moved to
`DIR/.mqctl-backup-<UTC time>` first when it differs.
"""

from __future__ import annotations

import json
import os
import shutil
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqctl.pipeline.output import HIDDEN, SUMMARY_FILE, check_out_dir, install_output, tree_digest
from mqctl.pipeline.ranges import DEFAULT_RANGE_SIZE, ByteRange, store_ranges

if TYPE_CHECKING:
    from mqctl.store.walker import Chain

SCHEMA_FILE = "schema.json"
MESSAGES_DIR = "messages"
KIND = "mqctl-salvage"
LAYOUT_VERSION = 2             # 2: parts per (epoch, PART_BYTES window), schema.json lists Arrow types
PART_BYTES = 256 << 20
PROBLEM_COL = "_problem"
BROADCAST_KEYS = 1_000_000      # source keys up to this many are broadcast to the join, else shuffled
# the message columns of a problem row: its range, set and store, else these placeholders (a null
# key matches no message; the row is never written)
_DEFAULTS: dict[str, Any] = {"string": "", "int64": 0, "int32": 0, "bool": False, "keyHi": None,
                             "keyLo": None}
SORT_COLUMNS = ("clusterName", "brokerName", "topic", "queueId", "epoch", "physicalOffset", "store")

__all__ = ["PART_BYTES", "SalvageInput", "prepare", "run_salvage"]


@dataclass
class SalvageInput:
    """The plan turned into byte ranges: `candidates` (replica tails) and `keys` (what sources keep);
    `cut` cuts them again at another range size (the engine sizes ranges to its cores)."""

    plan: dict[str, Any]
    candidates: list[ByteRange] = field(default_factory=list)
    keys: list[ByteRange] = field(default_factory=list)
    sets: list[dict[str, Any]] = field(default_factory=list)
    not_salvaged: list[dict[str, Any]] = field(default_factory=list)
    specs: list[tuple[str, str, int, int | None, dict[str, Any]]] = field(default_factory=list)
    # file path -> the records the plan's recovery scan found there: the local engine's pass 1 takes them
    # instead of walking those bytes again (Spark's executors walk their ranges themselves)
    chains: dict[str, Chain] = field(default_factory=dict)

    @property
    def nbytes(self) -> int:
        """Bytes the job reads."""
        return sum(r.length for r in self.candidates) + sum(r.length for r in self.keys)

    def cut(self, range_size: int) -> None:
        self.candidates, self.keys = [], []
        for kind, path, frm, to, meta in self.specs:
            ranges = store_ranges(path, from_offset=frm, to_offset=to, range_size=range_size, meta=meta)
            (self.candidates if kind == "candidate" else self.keys).extend(ranges)


def prepare(stores: list[str], *, range_size: int = DEFAULT_RANGE_SIZE,
            full_source: bool = False) -> SalvageInput:
    """Inspect the stores, make the plan, cut the byte ranges (driver side, no Spark)."""
    from mqctl.recover.inspect import inspect_store
    from mqctl.recover.plan import make_plan

    paths = list(dict.fromkeys(os.path.abspath(s) for s in stores))
    store_id = {p: i for i, p in enumerate(sorted(paths))}      # the order of their names
    reports = [inspect_store(p, keep_chains=True) for p in paths]
    by_path = {r.path: r for r in reports}
    plan = make_plan(reports)
    inp = SalvageInput(plan)
    for r in reports:
        if r.scan is not None:
            inp.chains.update(r.scan.chains)
            r.scan.chains = {}
    for u in plan["unmatched"]:
        inp.not_salvaged.append({"store": u["store"], "reason": u["reason"]})
    for set_id, s in enumerate(plan["brokerSets"]):      # sorted by (clusterName, brokerName)
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
                        "rank": rank, "epochs": [(e.start_offset, e.epoch) for e in rep.epochs],
                        "setId": set_id, "storeId": store_id[rep.path]}
                ranges = store_ranges(rep.path, from_offset=tt, range_size=range_size, meta=meta)
                inp.specs.append(("candidate", rep.path, tt, None, meta))
            set_doc["replicas"].append({"store": rep.path, "brokerId": rep.broker_id, "state": rep.state,
                                        "truncateTo": tt, "maxOffset": rep.max_offset,
                                        "bytesRead": sum(r.limit - r.start for r in ranges if r.head_owned)})
        if src is not None and frm is not None and src.max_offset > frm:
            inp.specs.append(("key", src.path, frm, src.max_offset,
                              {"clusterName": c, "brokerName": b, "store": src.path, "setId": set_id}))
    inp.cut(range_size)
    return inp


def run_salvage(spark: Any, inp: SalvageInput, out: str | os.PathLike[str] | None, *,
                dry_run: bool = False, show_progress: bool | None = None, overwrite: bool = False
                ) -> dict[str, Any]:
    """Run the job on Spark (`spark`, a session) or in this process (`spark` None, the local engine);
    write DIR unless dry_run (or out is None). Returns summary.json's document; both engines write the
    same files."""
    from mqctl.pipeline.engine import progress

    outp = None if out is None else Path(out).absolute()
    writing = outp is not None and not dry_run
    if writing:
        assert outp is not None
        check_out_dir(outp, KIND, overwrite=overwrite)
    job: _Job = _LocalJob(inp) if spark is None else _SparkJob(spark, inp)
    digest = backup = None
    with progress("salvage", inp.nbytes, job.done, enabled=show_progress):
        try:
            counts, problems = job.dedupe()
            if writing:
                assert outp is not None
                outp.mkdir(exist_ok=True)
                tmp = outp / f"{HIDDEN}tmp-{os.getpid()}"
                if tmp.exists():
                    shutil.rmtree(tmp)
                (tmp / MESSAGES_DIR).mkdir(parents=True)
                job.write(tmp / MESSAGES_DIR)
                (tmp / SCHEMA_FILE).write_text(json.dumps(_schema_doc(), indent=1, sort_keys=True) + "\n")
                digest = tree_digest(tmp)
        finally:
            job.close()
    per_store, per_topic = _per_store_topic(counts)
    doc = _summary(inp, per_store, per_topic, problems, digest)
    if writing:
        assert outp is not None
        (tmp / SUMMARY_FILE).write_text(json.dumps(doc, indent=2, sort_keys=False) + "\n")
        backup = install_output(tmp, outp, (MESSAGES_DIR, SCHEMA_FILE, SUMMARY_FILE), doc["digest"])
        shutil.rmtree(tmp, ignore_errors=True)
    return {**doc, "out": None if outp is None else str(outp), "dryRun": not writing, "backup": backup}


def _schema_doc() -> dict[str, Any]:
    """schema.json: the columns of the message rows (name, Arrow type, nullable), to read an empty
    result or check a reader against."""
    from mqctl.pipeline.tasks import output_schema

    return {"fields": [{"name": f.name, "type": str(f.type), "nullable": f.nullable}
                       for f in output_schema()]}


def _part_dir(c: str, b: str) -> str:
    q = urllib.parse.quote
    return f"clusterName={q(c, safe='')}/brokerName={q(b, safe='')}"


def _part_paths(keys: list[tuple[int, int, int]], sets: list[dict[str, Any]]
                ) -> dict[tuple[int, int, int], str]:
    """part-NNNNN per broker set (setId: its place in `sets`), numbered in (epoch, physical offset
    window) order."""
    out: dict[tuple[int, int, int], str] = {}
    n: dict[int, int] = {}
    for k in sorted(keys):
        i = n.get(k[0], 0)
        n[k[0]] = i + 1
        out[k] = f"{_part_dir(sets[k[0]]['clusterName'], sets[k[0]]['brokerName'])}/part-{i:05d}.parquet"
    return out


def _chunks(sizes: Any, max_bytes: int = 32 << 20) -> Iterator[tuple[int, int]]:
    """[i, j) row spans of at most max_bytes of records (at least one row each)."""
    import numpy as np

    ends = np.cumsum(sizes, dtype=np.int64)
    i, n = 0, len(ends)
    while i < n:
        base = int(ends[i - 1]) if i else 0
        j = max(i + 1, int(np.searchsorted(ends, base + max_bytes, side="right")))
        yield i, j
        i = j


def _write_runs(batches: Iterator[Any], root: Path, paths: dict[tuple[int, int, int], str],
                ranges: list[ByteRange]) -> Iterator[tuple[str, int]]:
    """Write kept candidate rows, sorted by part then SORT_COLUMNS, into their part files (one writer
    open at a time); yields (part path, rows) per part."""
    import numpy as np
    import pyarrow.compute as pc

    from mqctl.pipeline.output import PartWriter
    from mqctl.pipeline.tasks import message_batch, output_schema

    schema = output_schema()
    cur: tuple[Any, ...] | None = None
    w: PartWriter | None = None
    try:
        for b in batches:
            n = b.num_rows
            new = np.zeros(n, dtype=bool)
            new[:1] = True
            for x in _PART_KEY:
                col = b.column(x)
                if n > 1:
                    new[1:] |= pc.not_equal(col.slice(1), col.slice(0, n - 1)).to_numpy(zero_copy_only=False)
            at = np.flatnonzero(new).tolist()
            for i, j in zip(at, [*at[1:], n], strict=True):
                key = tuple(b.column(x)[i].as_py() for x in _PART_KEY)
                if key != cur:
                    if w is not None and cur is not None:
                        w.close()
                        yield paths[cur], w.rows
                    cur = key
                    w = PartWriter(root / paths[cur], schema, "size")
                assert w is not None
                run = b.slice(i, j - i)
                for a, z in _chunks(run.column("size").to_numpy()):
                    w.write(message_batch(run.slice(a, z - a), ranges))
                i = j
        if w is not None and cur is not None:
            w.close()
            rows, w = w.rows, None
            yield paths[cur], rows
    finally:
        if w is not None:
            w.close()


class _Job:
    """One engine's way of running the two passes; `done()` -> (bytes, messages) read so far."""

    def done(self) -> tuple[int, int]:
        raise NotImplementedError

    def dedupe(self) -> tuple[list[dict[str, Any]], list[tuple[Any, ...]]]:
        raise NotImplementedError

    def write(self, root: Path) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


_COUNT_COLS = ("records", "onSource", "messages", "bytes", "bodyBytes", "crcErrors")
_DEDUPE_ONLY = ("keyHi", "keyLo", "rank", "bodyBytes")     # candidate columns pass 2 does not read


def _named(rows: list[dict[str, Any]], ranges: list[ByteRange]) -> list[dict[str, Any]]:
    """Count rows per (rangeId, topic) with the range's set and store names instead of its number."""
    return [{**{k: ranges[r["rangeId"]].meta[k] for k in ("clusterName", "brokerName", "store")},
             "topic": r["topic"], **{k: r[k] for k in _COUNT_COLS}} for r in rows]


def _key16(pa: Any, hi: Any, lo: Any) -> Any:
    """(keyHi, keyLo) as one 16-byte value per row (what `is_in` compares)."""
    import numpy as np

    data = np.column_stack([np.asarray(hi, dtype=np.int64), np.asarray(lo, dtype=np.int64)])
    return pa.FixedSizeBinaryArray.from_buffers(pa.binary(16), len(data),
                                                [None, pa.py_buffer(data.tobytes())])


class _LocalJob(_Job):
    """In this process, no JVM: the same tasks, the dedupe and sort with pyarrow."""

    def __init__(self, inp: SalvageInput) -> None:
        self.inp = inp
        self.nbytes = self.nmsgs = 0
        self.kept: Any = None

    def done(self) -> tuple[int, int]:
        return self.nbytes, self.nmsgs

    def dedupe(self) -> tuple[list[dict[str, Any]], list[tuple[Any, ...]]]:
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        from mqctl.pipeline.tasks import candidate_keys, candidate_schema, key_arrow

        src: dict[int, list[Any]] = {}
        chains, self.inp.chains = self.inp.chains, {}        # read once, then let go
        for br in self.inp.keys:
            kb = key_arrow(br, chains.get(br.path))
            src.setdefault(int(br.meta["setId"]), []).append(_key16(pa, kb.column(1), kb.column(2)))
            self.nbytes += br.length
        batches, problems = [], []
        for i, br in enumerate(self.inp.candidates):
            cb, probs = candidate_keys(br, i, chains.get(br.path))
            batches.append(cb)
            problems += probs
            self.nbytes += br.length
            self.nmsgs += cb.num_rows
        t = pa.Table.from_batches(batches, schema=candidate_schema()).combine_chunks()
        n = t.num_rows
        col = {x: t.column(x).to_numpy() for x in ("setId", "storeId", "rank", "physicalOffset", "keyHi",
                                                    "keyLo")}
        sid, hi, lo = col["setId"], col["keyHi"], col["keyLo"]
        on_src = np.zeros(n, dtype=bool)
        for set_id, arrs in src.items():
            in_set = np.flatnonzero(sid == set_id)
            on_src[in_set] = pc.is_in(_key16(pa, hi[in_set], lo[in_set]), value_set=pa.concat_arrays(arrs)
                                      ).to_numpy(zero_copy_only=False)
        # the dedupe order (set, messageKey, then rank, physicalOffset, store): one lexsort of integers
        order = np.lexsort((col["storeId"], col["physicalOffset"], col["rank"], lo, hi, sid))
        new = np.zeros(n, dtype=bool)
        new[:1] = True
        for x in (sid, hi, lo):
            new[1:] |= x[order][1:] != x[order][:-1]
        gid = np.cumsum(new) - 1
        copies, first = np.empty(n, dtype=np.int64), np.empty(n, dtype=bool)
        copies[order], first[order] = np.bincount(gid)[gid] if n else gid, new
        kept = first & ~on_src
        size = t.column("size").to_numpy().astype(np.int64)
        crc_bad = ~t.column("crcOk").to_numpy(zero_copy_only=False)
        c = t.select(["rangeId", "topic"]).append_column(
            "records", pa.array(np.ones(n, dtype=np.int64))).append_column(
            "onSource", pa.array(on_src.astype(np.int64))).append_column(
            "messages", pa.array(kept.astype(np.int64))).append_column(
            "bytes", pa.array(np.where(kept, size, 0))).append_column(
            "bodyBytes", pa.array(np.where(kept, t.column("bodyBytes").to_numpy(), 0))).append_column(
            "crcErrors", pa.array((kept & crc_bad).astype(np.int64)))
        agg = c.group_by(["rangeId", "topic"]).aggregate([(k, "sum") for k in _COUNT_COLS])
        counts = _named([{"rangeId": r["rangeId"], "topic": r["topic"],
                          **{k: r[f"{k}_sum"] for k in _COUNT_COLS}} for r in agg.to_pylist()],
                        self.inp.candidates)
        k = t.drop_columns(list(_DEDUPE_ONLY)).filter(pa.array(kept)).append_column("copies",
                                                                                  pa.array(copies[kept]))
        k = k.append_column("partEpoch", pc.fill_null(k.column("epoch"), -1)).append_column(
            "partBucket", pa.array(k.column("physicalOffset").to_numpy() // PART_BYTES))
        # _WRITE_ORDER (nulls first) as a lexsort of integer codes; the rows are taken only when they are
        # not in that order already (pass 1 gives them in offset order, often the write order)
        epoch = k.column("epoch")
        sort_keys = [sid[kept], k.column("partEpoch").to_numpy(), k.column("partBucket").to_numpy(),
                     _codes(k.column("topic")), k.column("queueId").to_numpy(),
                     pc.is_valid(epoch).to_numpy(zero_copy_only=False),
                     pc.fill_null(epoch, 0).to_numpy(), k.column("physicalOffset").to_numpy(),
                     col["storeId"][kept]]
        order = np.lexsort(sort_keys[::-1])
        self.kept = k if bool((order == np.arange(order.size)).all()) else k.take(pa.array(order))
        return counts, problems

    def write(self, root: Path) -> None:
        k = self.kept
        keys = k.select(list(_PART_KEY)).group_by(list(_PART_KEY)).aggregate([]).to_pylist()
        parts = _part_paths([tuple(r[x] for x in _PART_KEY) for r in keys], self.inp.sets)
        for _ in _write_runs(iter(k.combine_chunks().to_batches()), root, parts, self.inp.candidates):
            pass


def _codes(col: Any) -> Any:
    """A string column as integer codes (numpy) in the strings' (bytewise) order, as Arrow's sort."""
    import numpy as np
    import pyarrow.compute as pc

    d = pc.dictionary_encode(col).combine_chunks()
    codes = d.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    if not len(d.dictionary):
        return codes
    rank = np.empty(len(d.dictionary), dtype=np.int64)
    rank[pc.sort_indices(d.dictionary).to_numpy()] = np.arange(len(d.dictionary))
    return rank[codes]


_PART_KEY = ("setId", "partEpoch", "partBucket")
# SORT_COLUMNS within a part, the set and store by their ordinals (which follow their names)
_WRITE_ORDER = (*_PART_KEY, "topic", "queueId", "epoch", "physicalOffset", "storeId")


class _SparkJob(_Job):
    """On Spark: the passes are mapInArrow tasks over one id per range; the join with the source's keys,
    the dedupe window, the counts and the sort run in the JVM over the small candidate rows."""

    def __init__(self, spark: Any, inp: SalvageInput) -> None:
        sc = spark.sparkContext
        self.spark, self.inp = spark, inp
        inp.chains.clear()          # the executors walk their ranges themselves
        self.acc_bytes, self.acc_msgs = sc.accumulator(0), sc.accumulator(0)
        self.frames: list[Any] = []
        self.kept: Any = None
        self.parts: list[tuple[int, int, int]] = []
        # the shuffles move small candidate rows: one partition per core, not Spark's default 200 tasks
        self.shuffle = spark.conf.get("spark.sql.shuffle.partitions")
        spark.conf.set("spark.sql.shuffle.partitions", str(max(2, sc.defaultParallelism)))

    def done(self) -> tuple[int, int]:
        return int(self.acc_bytes.value), int(self.acc_msgs.value)

    def close(self) -> None:
        for f in self.frames:
            f.unpersist()
        self.spark.conf.set("spark.sql.shuffle.partitions", self.shuffle)

    def dedupe(self) -> tuple[list[dict[str, Any]], list[tuple[Any, ...]]]:
        from pyspark import StorageLevel
        from pyspark.sql import Window
        from pyspark.sql import functions as F
        from pyspark.sql import types as T

        from mqctl.pipeline.tasks import KEY_COLUMNS

        msgs = self._candidates()
        kschema = T.StructType([T.StructField(n, T.IntegerType() if n == "setId" else T.LongType(), False)
                                for n in KEY_COLUMNS])
        keys = self._keys(kschema).distinct().persist(StorageLevel.MEMORY_AND_DISK)
        self.frames.append(keys)
        group = list(KEY_COLUMNS)
        right = keys.withColumn("onSource", F.lit(True))
        if keys.count() <= BROADCAST_KEYS:
            right = F.broadcast(right)      # small: sent to every task, no shuffle of the candidates
        j = msgs.join(right, on=group, how="left") \
            .withColumn("onSource", F.coalesce("onSource", F.lit(False)))
        w = Window.partitionBy(*group)
        # row_number first: its sort (key, rank, physicalOffset, storeId) also serves the count, one sort
        j = j.withColumn("_n", F.row_number().over(w.orderBy("rank", "physicalOffset", "storeId"))) \
             .withColumn("copies", F.count(F.lit(1)).over(w)) \
             .withColumn("partEpoch", F.coalesce(F.col("epoch"), F.lit(-1).cast("long"))) \
             .withColumn("partBucket", F.floor(F.col("physicalOffset") / F.lit(PART_BYTES)).cast("long")) \
             .persist(StorageLevel.MEMORY_AND_DISK)       # read twice: the counts, then the write
        self.frames.append(j)
        is_msg = F.col(PROBLEM_COL).isNull()
        kept = is_msg & (~F.col("onSource")) & (F.col("_n") == 1)

        def when_kept(c: Any) -> Any:
            return F.sum(F.when(kept, c).otherwise(0).cast("long"))

        # every count of the summary in one small aggregate: per range, topic and part (the parts to
        # write are those with messages), plus one row per problem (its JSON is part of the key)
        rows = j.groupBy("rangeId", "topic", "partEpoch", "partBucket", PROBLEM_COL).agg(
            F.count(F.lit(1)).alias("records"), F.sum(F.col("onSource").cast("long")).alias("onSource"),
            when_kept(F.lit(1)).alias("messages"), when_kept(F.col("size")).alias("bytes"),
            when_kept(F.col("bodyBytes")).alias("bodyBytes"),
            when_kept((~F.col("crcOk")).cast("long")).alias("crcErrors")).collect()
        problems = [tuple(json.loads(r[PROBLEM_COL])) for r in rows if r[PROBLEM_COL] is not None]
        ranges = self.inp.candidates
        counts = _named([r.asDict() for r in rows if r[PROBLEM_COL] is None], ranges)
        self.parts = sorted({(int(ranges[r["rangeId"]].meta["setId"]), r["partEpoch"], r["partBucket"])
                             for r in rows if r[PROBLEM_COL] is None and r["messages"]})
        self.kept = j.filter(kept).drop("onSource", "_n", PROBLEM_COL, *_DEDUPE_ONLY)
        return counts, problems

    def write(self, root: Path) -> None:
        from pyspark.sql import functions as F

        parts = self.parts
        if not parts:
            return
        paths = _part_paths(parts, self.inp.sets)
        target, ranges = str(root), self.inp.candidates

        def write(batches: Iterator[Any]) -> Iterator[Any]:
            import pyarrow as pa

            for path, rows in _write_runs(batches, Path(target), paths, ranges):
                yield pa.RecordBatch.from_arrays([pa.array([path]), pa.array([rows], pa.int64())],
                                                 names=["path", "rows"])

        self.kept.repartition(len(parts), *_PART_KEY) \
            .sortWithinPartitions(*[F.col(c).asc_nulls_first() for c in _WRITE_ORDER]) \
            .mapInArrow(write, "path string, rows long").collect()

    def _ids(self, n: int) -> Any:
        return self.spark.range(0, max(1, n), 1, max(1, n)).filter(f"id < {n}")

    def _candidates(self) -> Any:
        """Candidate rows of every range, plus one row per problem with PROBLEM_COL set (its
        PROBLEM_COLUMNS as JSON), its range, set and store, and placeholders elsewhere."""
        from pyspark.sql import types as T

        from mqctl.pipeline.tasks import CANDIDATE_FIELDS, candidate_keys

        spark_t = {"string": T.StringType(), "int64": T.LongType(), "int32": T.IntegerType(),
                   "bool": T.BooleanType()}
        schema = T.StructType([T.StructField(n, spark_t[t], True) for n, t in CANDIDATE_FIELDS]
                              + [T.StructField(PROBLEM_COL, T.StringType(), True)])
        ranges, acc_b, acc_m = self.inp.candidates, self.acc_bytes, self.acc_msgs

        def parse(batches: Iterator[Any]) -> Iterator[Any]:
            import pyarrow as pa

            for b in batches:
                for i in b.column(0).to_pylist():
                    batch, probs = candidate_keys(ranges[i], i)
                    acc_b.add(ranges[i].length)
                    acc_m.add(batch.num_rows)
                    yield batch.append_column(PROBLEM_COL, pa.nulls(batch.num_rows, pa.string()))
                    if probs:
                        m = ranges[i].meta
                        at = {"rangeId": i, "setId": m["setId"], "storeId": m["storeId"]}
                        cols = [pa.array([at[f.name] if f.name in at else
                                          _DEFAULTS.get(f.name, _DEFAULTS[str(f.type)])] * len(probs), f.type)
                                for f in batch.schema]
                        cols.append(pa.array([json.dumps(p) for p in probs], pa.string()))
                        yield pa.RecordBatch.from_arrays(cols, names=[*batch.schema.names, PROBLEM_COL])

        return self._ids(len(ranges)).mapInArrow(parse, schema)

    def _keys(self, schema: Any) -> Any:
        from mqctl.pipeline.tasks import key_arrow

        ranges, acc_b = self.inp.keys, self.acc_bytes

        def keys(batches: Iterator[Any]) -> Iterator[Any]:
            for b in batches:
                for i in b.column(0).to_pylist():
                    acc_b.add(ranges[i].length)
                    yield key_arrow(ranges[i])

        return self._ids(len(ranges)).mapInArrow(keys, schema)


def _per_store_topic(rows: list[dict[str, Any]]) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """The (store, topic) counts summed per store, and per (set, topic) over the salvaged messages."""
    per_store: dict[str, dict[str, Any]] = {}
    per_topic: dict[tuple[str, str, str], dict[str, Any]] = {}
    for r in rows:
        st = per_store.setdefault(r["store"], {"store": r["store"], "records": 0, "alreadyOnSource": 0,
                                               "salvaged": 0, "salvagedBytes": 0})
        st["records"] += int(r["records"] or 0)
        st["alreadyOnSource"] += int(r["onSource"] or 0)
        st["salvaged"] += int(r["messages"] or 0)
        st["salvagedBytes"] += int(r["bytes"] or 0)
        if r["messages"]:
            k = (r["clusterName"], r["brokerName"], r["topic"])
            t = per_topic.setdefault(k, {"clusterName": k[0], "brokerName": k[1], "topic": k[2],
                                         "messages": 0, "bytes": 0, "bodyBytes": 0, "crcErrors": 0})
            for c in ("messages", "bytes", "bodyBytes", "crcErrors"):
                t[c] += int(r[c] or 0)
    return per_store, list(per_topic.values())


def _summary(inp: SalvageInput, per_store: dict[str, dict[str, Any]], per_topic: list[dict[str, Any]],
             problems: list[tuple[Any, ...]], digest: str | None) -> dict[str, Any]:
    from mqctl.pipeline.tasks import PROBLEM_COLUMNS, skipped_bytes

    probs = sorted((dict(zip(PROBLEM_COLUMNS, p, strict=True)) for p in problems),
                   key=lambda d: (d["store"], d["offset"]))
    skipped = skipped_bytes(probs)
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
                             "salvagedBytes": int(st.get("salvagedBytes") or 0),
                             "skippedBytes": skipped.get(rep["store"], 0)})
        m = sum(t["messages"] for t in topics)
        b = sum(t["bytes"] for t in topics)
        total_m += m
        total_b += b
        sets.append({**s, "replicas": replicas, "messages": m, "bytes": b, "topics": topics})
    return {"kind": KIND, "layoutVersion": LAYOUT_VERSION,
            "layout": {"messages": f"{MESSAGES_DIR}/clusterName=<c>/brokerName=<b>/part-NNNNN.parquet",
                       "schema": SCHEMA_FILE, "partsBy": ["epoch", f"physicalOffset // {PART_BYTES}"],
                       "sortedBy": list(SORT_COLUMNS)},
            "messages": total_m, "bytes": total_b, "skippedBytes": sum(skipped.values()), "brokerSets": sets,
            "notSalvaged": sorted(inp.not_salvaged, key=lambda d: d["store"]), "problems": probs,
            "digest": digest}
