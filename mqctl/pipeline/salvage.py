"""`mqctl recover salvage`: save what truncating the replicas of a plan would drop, as Parquet.

Inputs come from `make_plan` (docs/recovery.md): per broker set a source and, per replica, `truncateTo`.
Candidates are every record at or after a replica's `truncateTo` up to the end of its files (past its
max offset too: beyond a corrupt record, recovery drops those as well); the source itself contributes
what lies beyond its own max offset. A candidate is dropped when the source keeps the same message
(`tasks.message_key`: UNIQ_KEY, else born host + born timestamp + BODYCRC) between the set's smallest
`truncateTo` (or its first record with `full_source`) and its max offset; the rest is deduplicated
across replicas (one row per message: the copy of the replica first in the plan's order) and written.

Two passes over the replicas' ranges, the same on Spark (one job) and in-process (the local engine):
`tasks.candidate_keys` gives 28 bytes per record, the engine groups them by message (GROUP_COLUMNS), and
`write_groups` reads the kept records back and writes each part through pyarrow; both engines write the
same files. Output (docs/pipeline.md): `DIR/messages/clusterName=<c>/brokerName=<b>/part-NNNNN.parquet`
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
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqctl.pipeline.outdir import (
    HIDDEN,
    SUMMARY_FILE,
    PartWriter,
    check_out_dir,
    install_output,
    row_groups,
    tree_digest,
)
from mqctl.pipeline.ranges import DEFAULT_RANGE_SIZE, ByteRange, store_ranges

if TYPE_CHECKING:
    from mqctl.store.walker import Chain

SCHEMA_FILE = "schema.json"
MESSAGES_DIR = "messages"
KIND = "mqctl-salvage"
LAYOUT_VERSION = 2  # 2: parts per (epoch, PART_BYTES window), schema.json lists Arrow types
PART_BYTES = 256 << 20
BROADCAST_KEYS = 1_000_000  # source keys up to this many are broadcast to the join, else shuffled
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
    # file path -> the records the plan's recovery scan found there: pass 1 takes them instead of walking
    # those bytes again (on Spark a broadcast to the executors)
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


def prepare(
    stores: list[str], *, range_size: int = DEFAULT_RANGE_SIZE, full_source: bool = False
) -> SalvageInput:
    """Inspect the stores, make the plan, cut the byte ranges (driver side, no Spark)."""
    # lazy: start-up
    from mqctl.recover.inspect import inspect_store
    from mqctl.recover.plan import make_plan

    paths = list(dict.fromkeys(os.path.abspath(s) for s in stores))
    store_id = {p: i for i, p in enumerate(sorted(paths))}  # the order of their names
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
    for set_id, s in enumerate(plan["brokerSets"]):  # sorted by (clusterName, brokerName)
        c, b = s["clusterName"], s["brokerName"]
        src = by_path[s["source"]] if s["source"] is not None else None
        tts = [r["truncateTo"] for r in s["replicas"] if r["truncateTo"] is not None]
        frm = None if src is None else src.min_offset if full_source else min(tts)
        set_doc: dict[str, Any] = {
            "clusterName": c,
            "brokerName": b,
            "source": s["source"],
            "comparedFrom": frm,
            "comparedTo": None if src is None else src.max_offset,
            "replicas": [],
        }
        inp.sets.append(set_doc)
        # every replica of the plan is listed, also one with nothing to read (an empty commitlog, no
        # commitlog directory, or a set where every store is empty: no source, no truncateTo)
        for rank, row in enumerate(s["replicas"]):
            rep = by_path[row["store"]]
            tt = row["truncateTo"]
            ranges: list[ByteRange] = []
            if tt is not None and rep.file_count:
                meta = {
                    "clusterName": c,
                    "brokerName": b,
                    "store": rep.path,
                    "brokerId": rep.broker_id,
                    "rank": rank,
                    "epochs": [(e.start_offset, e.epoch) for e in rep.epochs],
                    "setId": set_id,
                    "storeId": store_id[rep.path],
                }
                ranges = store_ranges(rep.path, from_offset=tt, range_size=range_size, meta=meta)
                inp.specs.append(("candidate", rep.path, tt, None, meta))
            set_doc["replicas"].append(
                {
                    "store": rep.path,
                    "brokerId": rep.broker_id,
                    "state": rep.state,
                    "truncateTo": tt,
                    "maxOffset": rep.max_offset,
                    "bytesRead": sum(r.limit - r.start for r in ranges if r.head_owned),
                }
            )
        if src is not None and frm is not None and src.max_offset > frm:
            inp.specs.append(
                (
                    "key",
                    src.path,
                    frm,
                    src.max_offset,
                    {"clusterName": c, "brokerName": b, "store": src.path, "setId": set_id},
                )
            )
    inp.cut(range_size)
    return inp


def run_salvage(
    spark: Any,
    inp: SalvageInput,
    out: str | os.PathLike[str] | None,
    *,
    dry_run: bool = False,
    show_progress: bool | None = None,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Run the job on Spark (`spark`, a session) or in this process (`spark` None, the local engine);
    write DIR unless dry_run (or out is None). Returns summary.json's document; both engines write the
    same files."""
    from mqctl.pipeline.engine import progress  # lazy: start-up

    outp = None if out is None else Path(out).absolute()
    writing = outp is not None and not dry_run
    if writing:
        assert outp is not None
        check_out_dir(outp, KIND, overwrite=overwrite)
    job: _Job = _LocalJob(inp) if spark is None else _SparkJob(spark, inp)
    digest = backup = None
    with progress("salvage", inp.nbytes, job.done, enabled=show_progress):
        try:
            tmp = None
            if writing:
                assert outp is not None
                outp.mkdir(exist_ok=True)
                tmp = outp / f"{HIDDEN}tmp-{os.getpid()}"
                if tmp.exists():
                    shutil.rmtree(tmp)
                (tmp / MESSAGES_DIR).mkdir(parents=True)
            results, per_range = job.run(None if tmp is None else tmp / MESSAGES_DIR)
            if tmp is not None:
                _install_parts(tmp / MESSAGES_DIR, results, inp.sets)
                (tmp / SCHEMA_FILE).write_text(json.dumps(_schema_doc(), indent=1, sort_keys=True) + "\n")
                digest = tree_digest(tmp)
        finally:
            job.close()
    counts = _counts(results, per_range, inp.candidates)
    problems = [p for _, (_, probs) in sorted(per_range.items()) for p in probs]
    per_store, per_topic = _per_store_topic(counts)
    doc = _summary(inp, per_store, per_topic, problems, digest)
    if writing:
        assert outp is not None and tmp is not None
        (tmp / SUMMARY_FILE).write_text(json.dumps(doc, indent=2, sort_keys=False) + "\n")
        backup = install_output(tmp, outp, (MESSAGES_DIR, SCHEMA_FILE, SUMMARY_FILE), doc["digest"])
        shutil.rmtree(tmp, ignore_errors=True)
    return {**doc, "out": None if outp is None else str(outp), "dryRun": not writing, "backup": backup}


def _schema_doc() -> dict[str, Any]:
    """schema.json: the columns of the message rows (name, Arrow type, nullable), to read an empty
    result or check a reader against."""
    from mqctl.pipeline.tasks import output_schema  # lazy: numpy

    return {
        "fields": [{"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in output_schema()]
    }


def _part_dir(c: str, b: str) -> str:
    q = urllib.parse.quote
    return f"clusterName={q(c, safe='')}/brokerName={q(b, safe='')}"


def _part_paths(
    keys: list[tuple[int, int, int]], sets: list[dict[str, Any]]
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


# The dedupe's groups, the same in both engines (Spark's JVM groups by these three columns): a message
# not on the source is its (setId, key); the candidates whose key the source keeps are only counted, per
# replica: (-1 - setId, rank, 0). Each group gives min(ord) (the copy to keep) and its size (copies).
GROUP_COLUMNS = ("gSet", "gHi", "gLo")
PARTS_TMP = "_parts"  # inside the messages directory while the job runs: part files by key
# columns whose values are mostly distinct: Parquet's dictionary encoding would be tried and dropped
PLAIN_COLUMNS = (
    "physicalOffset",
    "queueOffset",
    "bornTimestamp",
    "storeTimestamp",
    "bodyCrc",
    "uniqKey",
    "rawProperties",
    "body",
    "messageKey",
)


def _tmp_part(setid: int, epoch: int, bucket: int) -> str:
    return f"{PARTS_TMP}/{setid}_{epoch}_{bucket}.parquet"


def write_groups(
    groups: Any, ranges: list[ByteRange], target: str | None, threads: int = 1
) -> list[dict[str, Any]]:
    """What a writer task does with its share of the dedupe's groups (an Arrow table: GROUP_COLUMNS[:2],
    ord, copies): write the kept messages of each part it holds into `target`/PARTS_TMP (nothing when
    None: a dry run) and return what the summary counts, as small dicts: the parts written, per range
    and topic the messages kept, per replica the candidates the source has. `threads`: parts written at
    once (the local engine: one per core; the walker, Arrow and Parquet's writer release the GIL; a
    Spark task writes its part alone, Spark runs a task per core)."""
    import numpy as np  # lazy: numpy

    # lazy: pyarrow
    import pyarrow as pa
    import pyarrow.compute as pc

    from mqctl.pipeline.tasks import give_back_memory, kept_rows, message_batch, output_schema  # lazy: numpy

    g = groups.column("gSet").to_numpy()
    on = g < 0
    out: list[dict[str, Any]] = [
        {"onSource": [int(-1 - s), int(r)], "n": int(c)}
        for s, r, c in zip(
            g[on].tolist(),
            groups.column("gHi").to_numpy()[on].tolist(),
            groups.column("copies").to_numpy()[on].tolist(),
            strict=True,
        )
    ]
    keep = np.flatnonzero(~on)
    k = kept_rows(
        g[keep],
        groups.column("ord").to_numpy()[keep],
        groups.column("copies").to_numpy()[keep],
        ranges,
        PART_BYTES,
    )
    kb = pc.invert(k.column("crcOk"))
    agg = (
        k.append_column("bad", pc.cast(kb, pa.int64()))
        .group_by(["rangeId", "topic"])
        .aggregate([("size", "count"), ("size", "sum"), ("bodyBytes", "sum"), ("bad", "sum")])
    )
    out += [
        {
            "range": r["rangeId"],
            "topic": r["topic"],
            "messages": r["size_count"],
            "bytes": r["size_sum"],
            "bodyBytes": r["bodyBytes_sum"],
            "crcErrors": r["bad_sum"],
        }
        for r in agg.to_pylist()
    ]
    give_back_memory()  # the sort's temporaries, before the row groups
    n = k.num_rows
    new = np.zeros(n, dtype=bool)
    new[:1] = True
    for x in ("setId", "partEpoch", "partBucket"):
        c = k.column(x).to_numpy()
        new[1:] |= c[1:] != c[:-1]
    at = np.flatnonzero(new).tolist()
    schema = output_schema()
    spans = list(zip(at, [*at[1:], n], strict=True))
    keys = [[int(k.column(x)[i].as_py()) for x in ("setId", "partEpoch", "partBucket")] for i, _ in spans]
    out += [{"part": key, "rows": j - i} for key, (i, j) in zip(keys, spans, strict=True)]
    if target is None:
        return out

    pool = ThreadPoolExecutor(threads) if threads > 1 else None
    try:
        for key, (i, j) in zip(keys, spans, strict=True):
            w = PartWriter(
                Path(target) / _tmp_part(*key),
                schema,
                "size",
                plain=PLAIN_COLUMNS,
                no_statistics=("body", "rawProperties", "properties"),
            )
            try:
                run = k.slice(i, j - i).combine_chunks()
                # a batch per row group: no copy; with threads, the next row groups' rows are made while
                # this one is written (in order: the same file)
                todo = [
                    run.slice(a, z - a).to_batches()[0] for a, z in row_groups(run.column("size").to_numpy())
                ]
                if pool is None:
                    for b in todo:
                        w.write(message_batch(b, ranges))
                        give_back_memory(heap=False)
                else:
                    ahead: deque[Future[Any]] = deque()
                    for b in todo:
                        ahead.append(pool.submit(message_batch, b, ranges))
                        if len(ahead) > threads:
                            w.write(ahead.popleft().result())
                            give_back_memory(heap=False)
                    while ahead:
                        w.write(ahead.popleft().result())
                        give_back_memory(heap=False)
                del todo, run
            finally:
                w.close()
            give_back_memory()
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    return out


def _dedupe_groups(t: Any, src: dict[int, list[Any]]) -> Any:
    """The local engine's GROUP_COLUMNS grouping of the candidate rows `t` (what Spark's JVM does): the
    smallest ord and the count of each group; `src`: the source's keys per set."""
    import numpy as np  # lazy: numpy

    # lazy: pyarrow
    import pyarrow as pa
    import pyarrow.compute as pc

    from mqctl.pipeline.tasks import unpack_ord  # lazy: numpy

    sid, hi, lo, ords = (t.column(x).to_numpy() for x in ("setId", "keyHi", "keyLo", "ord"))
    on_src = np.zeros(sid.size, dtype=bool)
    for set_id, arrs in src.items():
        in_set = np.flatnonzero(sid == set_id)
        on_src[in_set] = pc.is_in(
            _key16(pa, hi[in_set], lo[in_set]), value_set=pa.concat_arrays(arrs)
        ).to_numpy(zero_copy_only=False)
    gs = np.where(on_src, -1 - sid.astype(np.int64), sid)
    gh = np.where(on_src, unpack_ord(ords)[0], hi)
    gl = np.where(on_src, 0, lo)
    order = np.lexsort((ords, gl, gh, gs))
    new = np.zeros(sid.size, dtype=bool)
    new[:1] = True
    for x in (gs, gh, gl):
        xs = x[order]
        new[1:] |= xs[1:] != xs[:-1]
    first = order[new]
    copies = np.diff(np.append(np.flatnonzero(new), sid.size))
    return pa.table(
        {
            "gSet": pa.array(gs[first], pa.int32()),
            "gHi": pa.array(gh[first]),
            "ord": pa.array(ords[first]),
            "copies": pa.array(copies.astype(np.int64)),
        }
    )


class _Job:
    """One engine's way of running the job: `run(root)` -> (result dicts of `write_groups`, {range:
    (records, problems)}); `done()` -> (bytes, messages) read so far."""

    def done(self) -> tuple[int, int]:
        raise NotImplementedError

    def run(self, root: Path | None) -> tuple[list[dict[str, Any]], dict[int, tuple[int, list[Any]]]]:
        raise NotImplementedError

    def close(self) -> None:
        pass


def local_threads() -> int:
    """Ranges and parts the local engine works on at once: one per core this process may run on (at
    most 8: the memory of a part each), MQCTL_LOCAL_THREADS to say otherwise (1: one at a time)."""
    env = os.environ.get("MQCTL_LOCAL_THREADS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover (not Linux)
        cores = os.cpu_count() or 1
    return max(1, min(cores, 8))


def _set_id(br: ByteRange) -> int:
    """The broker set a range's store belongs to (`prepare` put it in the range's meta)."""
    set_id = br.meta["setId"]
    assert isinstance(set_id, int)
    return set_id


def _key16(pa: Any, hi: Any, lo: Any) -> Any:
    """(keyHi, keyLo) as one 16-byte value per row (what `is_in` compares)."""
    import numpy as np  # lazy: numpy

    data = np.column_stack([np.asarray(hi, dtype=np.int64), np.asarray(lo, dtype=np.int64)])
    return pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(16), len(data), [None, pa.py_buffer(data.tobytes())]
    )


class _LocalJob(_Job):
    """In this process, no JVM: the same tasks, the dedupe with numpy, the same writer."""

    def __init__(self, inp: SalvageInput) -> None:
        self.inp = inp
        self.nbytes = self.nmsgs = 0
        self.threads = local_threads()

    def done(self) -> tuple[int, int]:
        return self.nbytes, self.nmsgs

    def run(self, root: Path | None) -> tuple[list[dict[str, Any]], dict[int, tuple[int, list[Any]]]]:

        import pyarrow as pa  # lazy: pyarrow

        from mqctl.pipeline.tasks import candidate_keys, candidate_schema, key_arrow  # lazy: numpy

        src: dict[int, list[Any]] = {}
        chains, self.inp.chains = self.inp.chains, {}  # read once, then let go
        batches, per_range = [], {}
        # a range per core at once, in threads (the walker, Arrow's kernels and Parquet's writer release
        # the GIL); results taken in the ranges' order, so the output is the same as one at a time
        with ThreadPoolExecutor(self.threads) as ex:
            for br, kb in zip(
                self.inp.keys,
                ex.map(lambda br: key_arrow(br, chains.get(br.path)), self.inp.keys),
                strict=True,
            ):
                src.setdefault(_set_id(br), []).append(_key16(pa, kb.column(1), kb.column(2)))
                self.nbytes += br.length
            for i, (br, (cb, probs)) in enumerate(
                zip(
                    self.inp.candidates,
                    ex.map(lambda br: candidate_keys(br, chains.get(br.path)), self.inp.candidates),
                    strict=True,
                )
            ):
                batches.append(cb)
                per_range[i] = (cb.num_rows, probs)
                self.nbytes += br.length
                self.nmsgs += cb.num_rows
        chains.clear()  # let go of them (this job's own dict)
        t = pa.Table.from_batches(batches, schema=candidate_schema()).combine_chunks()
        del batches
        groups = _dedupe_groups(t, src)
        del t
        return write_groups(
            groups, self.inp.candidates, None if root is None else str(root), self.threads
        ), per_range


class _Merge:
    """An accumulator of dicts whose entries are the same whenever they are added again (a task run
    twice adds its range's entry twice): Spark's AccumulatorParam, duck-typed."""

    def zero(self, value: dict[Any, Any]) -> dict[Any, Any]:
        return {}

    def addInPlace(self, a: dict[Any, Any], b: dict[Any, Any]) -> dict[Any, Any]:
        a.update(b)
        return a


def spark_hash_long(v: int) -> int:
    """Spark's hash() of a bigint, as `repartition(n, col)` hashes it (HashPartitioning: pmod of
    Murmur3_x86_32.hashLong with seed 42): the low then the high 32 bits mixed in, then finalised."""
    m = 0xFFFFFFFF

    def mix(h: int, k: int) -> int:
        k = (k * 0xCC9E2D51) & m
        k = ((k << 15) | (k >> 17)) & m
        h ^= (k * 0x1B873593) & m
        h = ((h << 13) | (h >> 19)) & m
        return (h * 5 + 0xE6546B64) & m

    v &= (1 << 64) - 1
    h = mix(mix(42, v & m), v >> 32) ^ 8
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & m
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & m
    h ^= h >> 16
    return h - (1 << 32) if h >> 31 else h


class _SparkJob(_Job):
    """On Spark, one job: mapInArrow tasks walk the ranges and give the candidate rows (28 bytes each),
    the JVM joins them with the source's keys and groups them (a hash aggregate: no sort, nothing
    persisted), then sends each output part's groups to one writer task (a mapInArrow task per part),
    which reads the kept records back and writes the part's file; the driver collects the writers'
    counts and the ranges' problems (an accumulator) and names the files."""

    def __init__(self, spark: Any, inp: SalvageInput) -> None:
        sc = spark.sparkContext
        self.spark, self.inp = spark, inp
        # the records the plan's scan found, for the tasks to take instead of walking them again (a
        # broadcast: each executor gets them once)
        self.chains = sc.broadcast(inp.chains)
        self.acc_bytes, self.acc_msgs = sc.accumulator(0), sc.accumulator(0)
        self.acc_ranges = sc.accumulator({}, _Merge())
        self.frames: list[Any] = []
        # the shuffles move small candidate rows: one partition per core, not Spark's default 200 tasks
        self.shuffle = spark.conf.get("spark.sql.shuffle.partitions")
        spark.conf.set("spark.sql.shuffle.partitions", str(max(2, sc.defaultParallelism)))

    def done(self) -> tuple[int, int]:
        return int(self.acc_bytes.value), int(self.acc_msgs.value)

    def close(self) -> None:
        for f in self.frames:
            f.unpersist()
        self.chains.destroy()
        self.spark.conf.set("spark.sql.shuffle.partitions", self.shuffle)

    def run(self, root: Path | None) -> tuple[list[dict[str, Any]], dict[int, tuple[int, list[Any]]]]:
        # lazy: pyspark
        from pyspark import StorageLevel
        from pyspark.sql import functions as F
        from pyspark.sql import types as T

        from mqctl.pipeline.tasks import KEY_COLUMNS, ORD_OFFSET_BITS  # lazy: numpy

        msgs = self._candidates()
        kschema = T.StructType(
            [T.StructField(n, T.IntegerType() if n == "setId" else T.LongType(), False) for n in KEY_COLUMNS]
        )
        keys = self._keys(kschema).distinct().persist(StorageLevel.MEMORY_AND_DISK)
        self.frames.append(keys)
        right = keys.withColumn("onSource", F.lit(True))
        if keys.count() <= BROADCAST_KEYS:
            right = F.broadcast(right)  # small: sent to every task, no shuffle of the candidates
        on = F.coalesce(F.col("onSource"), F.lit(False))
        joined = msgs.join(right, on=list(KEY_COLUMNS), how="left").select(
            F.when(on, F.lit(-1) - F.col("setId")).otherwise(F.col("setId")).alias("gSet"),
            F.when(on, F.shiftright("ord", ORD_OFFSET_BITS + 1)).otherwise(F.col("keyHi")).alias("gHi"),
            F.when(on, F.lit(0).cast("long")).otherwise(F.col("keyLo")).alias("gLo"),
            "ord",
        )
        # hash-partitioned by the group first, the aggregate runs once, after the shuffle: a partial
        # aggregate before it would group millions of rows that are nearly all distinct (a message has
        # one copy or a few), for nothing
        groups = (
            joined.repartition(*GROUP_COLUMNS)
            .groupBy(*GROUP_COLUMNS)
            .agg(F.min("ord").alias("ord"), F.count(F.lit(1)).alias("copies"))
        )
        # one writer task per output part that can have rows ((set, window) of the candidate ranges; the
        # epoch splits a window further inside its task): partition p is the rows whose `_p` value
        # Spark's hash sends to p, so no two parts share a task by chance
        parts = sorted(
            {
                (_set_id(r), b)
                for r in self.inp.candidates
                for b in range(r.offset // PART_BYTES, (r.offset + r.length - 1) // PART_BYTES + 1)
            }
        )
        n = max(1, len(parts))
        value = self._partition_values(n)
        keymap = F.create_map(
            *[F.lit(x).cast("long") for i, (s, b) in enumerate(parts) for x in ((s << 20) | b, value[i])]
        )
        bucket = F.shiftright(
            F.shiftright("ord", 1).bitwiseAND(F.lit((1 << ORD_OFFSET_BITS) - 1)), PART_BYTES.bit_length() - 1
        )
        pkey = F.shiftleft(F.col("gSet").cast("long"), 20).bitwiseOR(bucket)
        where = F.when(F.col("gSet") >= 0, F.try_element_at(keymap, pkey)) if parts else F.lit(None)
        ranges, target = self.inp.candidates, None if root is None else str(root)

        def write(batches: Iterator[Any]) -> Iterator[Any]:
            import pyarrow as pa  # lazy: pyarrow

            got = [b for b in batches if b.num_rows]
            if got:
                res = write_groups(pa.Table.from_batches(got), ranges, target)
                yield pa.RecordBatch.from_arrays(
                    [pa.array([json.dumps(r) for r in res], pa.string())], names=["r"]
                )

        # `_p` a long, as the values were hashed (an int hashes differently)
        res = (
            groups.withColumn("_p", F.coalesce(where, F.lit(value[0])).cast("long"))
            .repartition(n, "_p")
            .drop("_p")
            .mapInArrow(write, "r string")
            .collect()
        )
        return [json.loads(r["r"]) for r in res], dict(self.acc_ranges.value)

    def _partition_values(self, n: int) -> list[int]:
        """For each partition p < n a value that `repartition(n, col)` (Murmur3 hash mod n) sends to p:
        the smallest, found here (`spark_hash_long`) instead of by a Spark job."""
        found: dict[int, int] = {}
        v = 0
        while len(found) < n:
            found.setdefault(spark_hash_long(v) % n, v)
            v += 1
        return [found[p] for p in range(n)]

    def _ids(self, n: int) -> Any:
        return self.spark.range(0, max(1, n), 1, max(1, n)).filter(f"id < {n}")

    def _groups(self, ranges: list[ByteRange]) -> list[list[int]]:
        from mqctl.pipeline.engine import spark_cores, task_groups  # lazy: start-up

        return task_groups([r.length for r in ranges], spark_cores(self.spark))

    def _candidates(self) -> Any:
        """Candidate rows of every range; its record count and problems go to `acc_ranges`."""
        from pyspark.sql import types as T  # lazy: pyspark

        from mqctl.pipeline.tasks import CANDIDATE_FIELDS, candidate_keys, give_back_memory  # lazy: numpy

        spark_t = {"int64": T.LongType(), "int32": T.IntegerType()}
        schema = T.StructType([T.StructField(n, spark_t[t], False) for n, t in CANDIDATE_FIELDS])
        ranges, acc_b, acc_m, acc_r = self.inp.candidates, self.acc_bytes, self.acc_msgs, self.acc_ranges
        chains, groups = self.chains, self._groups(ranges)

        def parse(batches: Iterator[Any]) -> Iterator[Any]:
            for b in batches:
                for i in (i for g in b.column(0).to_pylist() for i in groups[g]):
                    batch, probs = candidate_keys(ranges[i], chains.value.get(ranges[i].path))
                    give_back_memory()
                    acc_b.add(ranges[i].length)
                    acc_m.add(batch.num_rows)
                    acc_r.add({i: (batch.num_rows, probs)})
                    yield batch

        return self._ids(len(groups)).mapInArrow(parse, schema)

    def _keys(self, schema: Any) -> Any:
        from mqctl.pipeline.tasks import key_arrow  # lazy: numpy

        ranges, acc_b, chains = self.inp.keys, self.acc_bytes, self.chains
        groups = self._groups(ranges)

        def keys(batches: Iterator[Any]) -> Iterator[Any]:
            for b in batches:
                for i in (i for g in b.column(0).to_pylist() for i in groups[g]):
                    acc_b.add(ranges[i].length)
                    yield key_arrow(ranges[i], chains.value.get(ranges[i].path))

        return self._ids(len(groups)).mapInArrow(keys, schema)


def _counts(
    results: list[dict[str, Any]], per_range: dict[int, tuple[int, list[Any]]], ranges: list[ByteRange]
) -> list[dict[str, Any]]:
    """The writers' results and the ranges' record counts as (store, topic) count rows."""
    by_rank = {(r.meta["setId"], r.meta["rank"]): r for r in ranges}
    zero = dict.fromkeys(("records", "onSource", "messages", "bytes", "bodyBytes", "crcErrors"), 0)

    def row(br: ByteRange, topic: str, **counts: int) -> dict[str, Any]:
        return {
            **{k: br.meta[k] for k in ("clusterName", "brokerName", "store")},
            "topic": topic,
            **zero,
            **counts,
        }

    out = [row(ranges[i], "", records=n) for i, (n, _) in per_range.items()]
    for r in results:
        if "onSource" in r:
            out.append(row(by_rank[tuple(r["onSource"])], "", onSource=r["n"]))
        elif "range" in r:
            out.append(
                row(
                    ranges[r["range"]],
                    r["topic"],
                    **{k: r[k] for k in ("messages", "bytes", "bodyBytes", "crcErrors")},
                )
            )
    return out


def _install_parts(root: Path, results: list[dict[str, Any]], sets: list[dict[str, Any]]) -> None:
    """Give the part files the writers left in PARTS_TMP their names (numbered per set)."""
    keys = [(int(r["part"][0]), int(r["part"][1]), int(r["part"][2])) for r in results if "part" in r]
    for key, name in _part_paths(keys, sets).items():
        dst = root / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        os.replace(root / _tmp_part(*key), dst)
    if (root / PARTS_TMP).exists():
        (root / PARTS_TMP).rmdir()


def _per_store_topic(rows: list[dict[str, Any]]) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """The (store, topic) counts summed per store, and per (set, topic) over the salvaged messages."""
    per_store: dict[str, dict[str, Any]] = {}
    per_topic: dict[tuple[str, str, str], dict[str, Any]] = {}
    for r in rows:
        st = per_store.setdefault(
            r["store"],
            {"store": r["store"], "records": 0, "alreadyOnSource": 0, "salvaged": 0, "salvagedBytes": 0},
        )
        st["records"] += int(r["records"] or 0)
        st["alreadyOnSource"] += int(r["onSource"] or 0)
        st["salvaged"] += int(r["messages"] or 0)
        st["salvagedBytes"] += int(r["bytes"] or 0)
        if r["messages"]:
            k = (r["clusterName"], r["brokerName"], r["topic"])
            t = per_topic.setdefault(
                k,
                {
                    "clusterName": k[0],
                    "brokerName": k[1],
                    "topic": k[2],
                    "messages": 0,
                    "bytes": 0,
                    "bodyBytes": 0,
                    "crcErrors": 0,
                },
            )
            for c in ("messages", "bytes", "bodyBytes", "crcErrors"):
                t[c] += int(r[c] or 0)
    return per_store, list(per_topic.values())


def _summary(
    inp: SalvageInput,
    per_store: dict[str, dict[str, Any]],
    per_topic: list[dict[str, Any]],
    problems: list[tuple[Any, ...]],
    digest: str | None,
) -> dict[str, Any]:
    from mqctl.pipeline.tasks import PROBLEM_COLUMNS, skipped_bytes  # lazy: numpy

    probs = sorted(
        (dict(zip(PROBLEM_COLUMNS, p, strict=True)) for p in problems),
        key=lambda d: (d["store"], d["offset"]),
    )
    skipped = skipped_bytes(probs)
    sets = []
    total_m = total_b = 0
    for s in inp.sets:
        topics = sorted(
            (
                dict(r)
                for r in per_topic
                if (r["clusterName"], r["brokerName"]) == (s["clusterName"], s["brokerName"])
            ),
            key=lambda d: d["topic"],
        )
        for t in topics:
            del t["clusterName"], t["brokerName"]
        replicas = []
        for rep in s["replicas"]:
            st = per_store.get(rep["store"], {})
            records = int(st.get("records") or 0)
            on_src = int(st.get("alreadyOnSource") or 0)
            salv = int(st.get("salvaged") or 0)
            replicas.append(
                {
                    **rep,
                    "recordsPastTruncateTo": records,
                    "alreadyOnSource": on_src,
                    "copiesOnOtherReplicas": records - on_src - salv,
                    "salvaged": salv,
                    "salvagedBytes": int(st.get("salvagedBytes") or 0),
                    "skippedBytes": skipped.get(rep["store"], 0),
                }
            )
        m = sum(t["messages"] for t in topics)
        b = sum(t["bytes"] for t in topics)
        total_m += m
        total_b += b
        sets.append({**s, "replicas": replicas, "messages": m, "bytes": b, "topics": topics})
    return {
        "kind": KIND,
        "layoutVersion": LAYOUT_VERSION,
        "layout": {
            "messages": f"{MESSAGES_DIR}/clusterName=<c>/brokerName=<b>/part-NNNNN.parquet",
            "schema": SCHEMA_FILE,
            "partsBy": ["epoch", f"physicalOffset // {PART_BYTES}"],
            "sortedBy": list(SORT_COLUMNS),
        },
        "messages": total_m,
        "bytes": total_b,
        "skippedBytes": sum(skipped.values()),
        "brokerSets": sets,
        "notSalvaged": sorted(inp.not_salvaged, key=lambda d: d["store"]),
        "problems": probs,
        "digest": digest,
    }
