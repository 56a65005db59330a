"""What one Spark task does with one `ByteRange`: map the file, parse the range, emit plain tuples (or,
for salvage on Spark, one Arrow record batch: `salvage_arrow`, `key_arrow`).

Plain functions of a range (no Spark here), so the single-process baseline and the tests run exactly
the code the executors run. Row layouts are the `*_COLUMNS` tuples; the jobs attach Spark schemas.
"""

from __future__ import annotations

import mmap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from mqctl.pipeline.ranges import ByteRange
from mqctl.store.commitlog import decode_properties
from mqctl.store.walker import ParsedRange, Problem, parse_byte_range

__all__ = ["MESSAGE_COLUMNS", "KEY_COLUMNS", "QUEUE_COLUMNS", "PROBLEM_COLUMNS", "open_file", "parse_task",
           "salvage_rows", "key_rows", "analyze_rows", "problem_row", "message_key", "property_value"]

# one salvaged message (docs/pipeline.md); `rank` is internal (replica order in the plan) and dropped
MESSAGE_COLUMNS = ("clusterName", "brokerName", "store", "brokerId", "epoch", "physicalOffset", "size",
                   "version", "topic", "queueId", "queueOffset", "flag", "sysFlag", "bornTimestamp",
                   "bornHost", "storeTimestamp", "storeHost", "reconsumeTimes", "preparedTransactionOffset",
                   "bodyCrc", "crcOk", "uniqKey", "keys", "tags", "properties", "rawProperties", "body",
                   "messageKey", "rank")
KEY_COLUMNS = ("clusterName", "brokerName", "messageKey")
QUEUE_COLUMNS = ("clusterName", "brokerName", "store", "topic", "queueId", "messages", "bytes",
                 "firstStoreTimestamp", "lastStoreTimestamp", "minQueueOffset", "maxQueueOffset",
                 "minPhysicalOffset", "maxPhysicalOffset", "crcErrors")
PROBLEM_COLUMNS = ("clusterName", "brokerName", "store", "file", "position", "offset", "length", "kind",
                   "reason")


def property_value(props: bytes, name: bytes) -> str | None:
    """One property from the raw `k\\x01v\\x02` bytes without decoding them all (the dedupe hot path)."""
    key = name + b"\x01"
    i = props.find(key)
    while i > 0 and props[i - 1] != 2:
        i = props.find(key, i + 1)
    if i < 0:
        return None
    j = props.find(b"\x02", i)
    return props[i + len(key):j if j >= 0 else len(props)].decode("utf-8", errors="replace")


def message_key(uniq_key: str | None, born_host: str, born_timestamp: int, body_crc: int) -> str:
    """What makes two records the same message: the producer's UNIQ_KEY when it set one, else its born
    host, born timestamp and the BODYCRC field (a retry of the same send repeats all three)."""
    if uniq_key:
        return f"uniq:{uniq_key}"
    return f"born:{born_host}/{born_timestamp}/{body_crc}"


@contextmanager
def open_file(path: str) -> Iterator[bytes | mmap.mmap]:
    """The whole file, memory-mapped read-only (an empty file is b"")."""
    with open(path, "rb") as fh:
        size = Path(path).stat().st_size
        if size == 0:
            yield b""
            return
        mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            yield mm
        finally:
            mm.close()


def parse_task(br: ByteRange, *, check_crc: bool = True, extract: tuple[str, ...] = ()) -> ParsedRange:
    with open_file(br.path) as buf:
        return parse_byte_range(buf, br.file_start, br.start, br.end, limit=br.limit,
                                head_owned=br.head_owned, check_crc=check_crc, extract=extract)


def _m(br: ByteRange, key: str) -> Any:
    return br.meta.get(key)


def problem_row(br: ByteRange, p: Problem) -> tuple[Any, ...]:
    return (_m(br, "clusterName"), _m(br, "brokerName"), _m(br, "store"), br.path, p.position, p.offset,
            p.length, p.kind, p.reason)


def _epochs(br: ByteRange, offsets: np.ndarray) -> list[int | None]:
    """The epoch whose [start, next start) holds each offset, from the replica's epoch file."""
    entries = sorted(_m(br, "epochs") or [])           # [(startOffset, epoch)]
    if not entries:
        return [None] * int(offsets.size)
    starts = np.asarray([s for s, _ in entries], dtype=np.int64)
    idx = np.searchsorted(starts, offsets, side="right") - 1
    eps = [e for _, e in entries]
    return [eps[i] if i >= 0 else None for i in idx.tolist()]


def salvage_rows(br: ByteRange) -> Iterator[tuple[str, tuple[Any, ...]]]:
    """("m", message row) for every record of the range, ("p", problem row) for its damage. A record
    whose body fails BODYCRC is still a message (crcOk false); structural damage cannot be."""
    pr = parse_task(br, extract=("bodies", "properties", "hosts"))
    assert pr.bodies is not None and pr.properties is not None
    assert pr.born_hosts is not None and pr.store_hosts is not None
    offs = pr.offset
    epochs = _epochs(br, offs)
    head = (_m(br, "clusterName"), _m(br, "brokerName"), _m(br, "store"), _m(br, "brokerId"))
    rank = _m(br, "rank")
    cols = [a.tolist() for a in (offs, pr.size, pr.version, pr.queue_id, pr.queue_offset, pr.flag, pr.sysflag,
                                 pr.born_timestamp, pr.store_timestamp, pr.reconsume_times,
                                 pr.prepared_tx_offset, pr.body_crc, pr.crc_ok)]
    for i, (off, size, ver, qid, qoff, flag, sysflag, born_ts, store_ts, recons, prep, crc, ok) in \
            enumerate(zip(*cols, strict=True)):
        raw = pr.properties[i]
        props = decode_properties(raw)
        uniq = props.get("UNIQ_KEY") or None
        born = pr.born_hosts[i]
        yield "m", (*head, epochs[i], off, size, ver, pr.topics[i], qid, qoff, flag, sysflag, born_ts, born,
                    store_ts, pr.store_hosts[i], recons, prep, crc, ok, uniq, props.get("KEYS"),
                    props.get("TAGS"), props, raw, pr.bodies[i], message_key(uniq, born, born_ts, crc), rank)
    for p in pr.problems:
        yield "p", problem_row(br, p)


def key_rows(br: ByteRange) -> Iterator[tuple[str, str, str]]:
    """The message keys of the records the source keeps (dedupe side): no bodies are copied."""
    pr = parse_task(br, check_crc=False, extract=("properties", "hosts"))
    assert pr.properties is not None and pr.born_hosts is not None
    c, b = _m(br, "clusterName"), _m(br, "brokerName")
    for raw, born, ts, crc in zip(pr.properties, pr.born_hosts, pr.born_timestamp.tolist(),
                                  pr.body_crc.tolist(), strict=True):
        yield c, b, message_key(property_value(raw, b"UNIQ_KEY"), born, ts, crc)


def analyze_rows(br: ByteRange) -> Iterator[tuple[str, tuple[Any, ...]]]:
    """("q", per-(topic, queueId) aggregate of the range) and ("p", problem row): aggregated with numpy
    inside the task, so only a few rows per range reach Spark."""
    pr = parse_task(br)
    if len(pr):
        key = (pr.topic_codes << 32) | (pr.queue_id & 0xFFFFFFFF)
        uniq, inv = np.unique(key, return_inverse=True)
        order = np.argsort(inv, kind="stable")
        starts = np.flatnonzero(np.r_[True, inv[order][1:] != inv[order][:-1]])

        def red(ufunc: Any, a: np.ndarray) -> list[int]:
            return [int(x) for x in ufunc.reduceat(a[order], starts)]

        count = np.bincount(inv).tolist()
        nbytes = red(np.add, pr.size)
        crc_err = red(np.add, (~pr.crc_ok).astype(np.int64))
        first_ts, last_ts = red(np.minimum, pr.store_timestamp), red(np.maximum, pr.store_timestamp)
        min_q, max_q = red(np.minimum, pr.queue_offset), red(np.maximum, pr.queue_offset)
        offs = pr.offset
        min_p, max_p = red(np.minimum, offs), red(np.maximum, offs)
        topic_of = pr.topic_names
        for i, k in enumerate(uniq.tolist()):
            qid = k & 0xFFFFFFFF
            qid = qid - (1 << 32) if qid >= 1 << 31 else qid
            yield "q", (_m(br, "clusterName"), _m(br, "brokerName"), _m(br, "store"), topic_of[k >> 32], qid,
                        count[i], nbytes[i], first_ts[i], last_ts[i], min_q[i], max_q[i], min_p[i], max_p[i],
                        crc_err[i])
    for p in pr.problems:
        yield "p", problem_row(br, p)


# --------------------------------------------------------------------------- Arrow (the Spark path)

def _epoch_array(br: ByteRange, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`_epochs` as (values, valid mask) for an Arrow column."""
    entries = sorted(_m(br, "epochs") or [])
    if not entries:
        return np.zeros(offsets.size, dtype=np.int64), np.zeros(offsets.size, dtype=bool)
    starts = np.asarray([s for s, _ in entries], dtype=np.int64)
    eps = np.asarray([e for _, e in entries], dtype=np.int64)
    idx = np.searchsorted(starts, offsets, side="right") - 1
    return eps[np.maximum(idx, 0)], idx >= 0


def _binary(pa: Any, parts: list[bytes]) -> Any:
    """A binary Arrow array from one joined buffer and offsets (no per-item Python object in Arrow)."""
    lens = np.fromiter((len(p) for p in parts), dtype=np.int64, count=len(parts))
    offs = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum(lens, out=offs[1:])
    if offs[-1] < 1 << 31:
        typ, offs = pa.binary(), offs.astype(np.int32)
    else:                                   # sliced and cast back to binary by `arrow_slices`
        typ = pa.large_binary()
    return pa.Array.from_buffers(typ, len(parts), [None, pa.py_buffer(offs), pa.py_buffer(b"".join(parts))])


def salvage_arrow(br: ByteRange) -> tuple[Any, list[tuple[Any, ...]]]:
    """The rows of `salvage_rows` as ONE pyarrow RecordBatch (MESSAGE_COLUMNS, the types of
    `salvage.message_schema`) plus the problem rows: columns are built from the parser's numpy arrays,
    so the records cross into the JVM as Arrow, not as pickled tuples."""
    import pyarrow as pa

    pr = parse_task(br, extract=("bodies", "properties", "hosts"))
    assert pr.bodies is not None and pr.properties is not None
    assert pr.born_hosts is not None and pr.store_hosts is not None
    n = len(pr)
    offs = pr.offset
    ep, ep_ok = _epoch_array(br, offs)
    uniq: list[str | None] = []
    keys: list[str | None] = []
    tags: list[str | None] = []
    mkeys: list[str] = []
    pk: list[str] = []
    pv: list[str] = []
    psz = np.zeros(n + 1, dtype=np.int32)
    for i, (raw, born, ts, crc) in enumerate(zip(pr.properties, pr.born_hosts, pr.born_timestamp.tolist(),
                                                  pr.body_crc.tolist(), strict=True)):
        props = decode_properties(raw)
        u = props.get("UNIQ_KEY") or None
        uniq.append(u)
        keys.append(props.get("KEYS"))
        tags.append(props.get("TAGS"))
        mkeys.append(message_key(u, born, ts, crc))
        pk += props.keys()
        pv += props.values()
        psz[i + 1] = len(props)
    i32, i64, s = pa.int32(), pa.int64(), pa.string()

    def const(v: Any, t: Any) -> Any:
        return pa.nulls(n, t) if v is None else pa.array(np.full(n, v), t) if t != s else pa.array([v] * n, t)

    bid = _m(br, "brokerId")
    cols = {
        "clusterName": const(_m(br, "clusterName"), s), "brokerName": const(_m(br, "brokerName"), s),
        "store": const(_m(br, "store"), s), "brokerId": const(bid, i64),
        "epoch": pa.array(ep, i64, mask=~ep_ok), "physicalOffset": pa.array(offs, i64),
        "size": pa.array(pr.size.astype(np.int32)), "version": pa.array(pr.version.astype(np.int32)),
        "topic": pa.array(pr.topics, s), "queueId": pa.array(pr.queue_id.astype(np.int32)),
        "queueOffset": pa.array(pr.queue_offset), "flag": pa.array(pr.flag.astype(np.int32)),
        "sysFlag": pa.array(pr.sysflag.astype(np.int32)), "bornTimestamp": pa.array(pr.born_timestamp),
        "bornHost": pa.array(pr.born_hosts, s), "storeTimestamp": pa.array(pr.store_timestamp),
        "storeHost": pa.array(pr.store_hosts, s),
        "reconsumeTimes": pa.array(pr.reconsume_times.astype(np.int32)),
        "preparedTransactionOffset": pa.array(pr.prepared_tx_offset), "bodyCrc": pa.array(pr.body_crc),
        "crcOk": pa.array(pr.crc_ok), "uniqKey": pa.array(uniq, s), "keys": pa.array(keys, s),
        "tags": pa.array(tags, s),
        "properties": pa.MapArray.from_arrays(pa.array(np.cumsum(psz, dtype=np.int32)), pa.array(pk, s),
                                              pa.array(pv, s)),
        "rawProperties": _binary(pa, pr.properties), "body": _binary(pa, pr.bodies),
        "messageKey": pa.array(mkeys, s), "rank": const(_m(br, "rank"), i32),
    }
    assert tuple(cols) == MESSAGE_COLUMNS
    return pa.RecordBatch.from_arrays(list(cols.values()), names=list(cols)), \
        [problem_row(br, p) for p in pr.problems]


def arrow_slices(batch: Any, sizes: np.ndarray, schema: Any, max_bytes: int = 128 << 20) -> Iterator[Any]:
    """`batch` in slices of at most `max_bytes` of records (by TOTALSIZE, at least one row each), cast
    to `schema` (a range larger than 2 GiB builds large_binary columns)."""
    n = batch.num_rows
    ends = np.cumsum(sizes, dtype=np.int64)
    i = 0
    while i < n:
        base = int(ends[i - 1]) if i else 0
        j = max(i + 1, int(np.searchsorted(ends, base + max_bytes, side="right")))
        part = batch.slice(i, j - i)
        yield part if part.schema.equals(schema) else part.cast(schema)
        i = j


def key_arrow(br: ByteRange) -> Any:
    """`key_rows` of one range as a pyarrow RecordBatch (KEY_COLUMNS, strings)."""
    import pyarrow as pa

    keys = [k for _, _, k in key_rows(br)]
    n = len(keys)
    s = pa.string()
    return pa.RecordBatch.from_arrays([pa.array([_m(br, "clusterName")] * n, s),
                                       pa.array([_m(br, "brokerName")] * n, s), pa.array(keys, s)],
                                      names=list(KEY_COLUMNS))
