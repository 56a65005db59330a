"""What one task does with one `ByteRange`: map the file, walk the range, emit plain tuples (analyze's
partial aggregates) or Arrow record batches (salvage).

Plain functions of a range (no Spark here): the local engine runs them in-process, Spark's executors
run the same code, and the tests call them directly.
"""

from __future__ import annotations

import itertools
import mmap
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from mqctl import malloc
from mqctl.pipeline.ranges import ByteRange
from mqctl.store import walker
from mqctl.store.commitlog import decode_properties
from mqctl.store.walker import (
    BLOCK_RECORDS,
    Blob,
    Chain,
    ParsedRange,
    Problem,
    parse_blocks,
    parse_byte_range,
    records_at,
    row_bytes,
)

__all__ = [
    "CANDIDATE_FIELDS",
    "KEY_COLUMNS",
    "OUTPUT_FIELDS",
    "PROBLEM_COLUMNS",
    "QUEUE_COLUMNS",
    "analyze_rows",
    "candidate_keys",
    "candidate_schema",
    "give_back_memory",
    "kept_rows",
    "key_arrow",
    "key_hashes",
    "message_batch",
    "message_key",
    "open_file",
    "output_schema",
    "pack_ord",
    "parse_task",
    "parse_task_blocks",
    "problem_row",
    "property_value",
    "skipped_bytes",
    "unpack_ord",
]

KEY_COLUMNS = ("setId", "keyHi", "keyLo")
QUEUE_COLUMNS = (
    "clusterName",
    "brokerName",
    "store",
    "topic",
    "queueId",
    "messages",
    "bytes",
    "firstStoreTimestamp",
    "lastStoreTimestamp",
    "minQueueOffset",
    "maxQueueOffset",
    "minPhysicalOffset",
    "maxPhysicalOffset",
    "crcErrors",
)
PROBLEM_COLUMNS = (
    "clusterName",
    "brokerName",
    "store",
    "file",
    "position",
    "offset",
    "length",
    "kind",
    "reason",
)

T = TypeVar("T")


def property_value(props: bytes, name: bytes) -> str | None:
    """One property from the raw `k\\x01v\\x02` bytes without decoding them all (the dedupe hot path)."""
    key = name + b"\x01"
    i = props.find(key)
    while i > 0 and props[i - 1] != 2:
        i = props.find(key, i + 1)
    if i < 0:
        return None
    j = props.find(b"\x02", i)
    return props[i + len(key) : j if j >= 0 else len(props)].decode("utf-8", errors="replace")


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


def parse_task(
    br: ByteRange, *, check_crc: bool = True, extract: tuple[str, ...] = (), known: Chain | None = None
) -> ParsedRange:
    with open_file(br.path) as buf:
        return _walk(parse_byte_range, buf, br, check_crc, extract, known)


def parse_task_blocks(
    br: ByteRange, *, check_crc: bool = True, extract: tuple[str, ...] = (), known: Chain | None = None
) -> Iterator[ParsedRange]:
    """`parse_task` a block of records at a time (`walker.parse_blocks`): a task's memory follows the
    block, not the range."""
    with open_file(br.path) as buf:
        yield from _walk(parse_blocks, buf, br, check_crc, extract, known)


def _walk(
    walk: Callable[..., T],
    buf: Any,
    br: ByteRange,
    check_crc: bool,
    extract: tuple[str, ...],
    known: Chain | None,
) -> T:
    """One walker (the whole range, or block by block) over ``br``, as a task reads it."""
    return walk(
        buf,
        br.file_start,
        br.start,
        br.end,
        limit=br.limit,
        head_owned=br.head_owned,
        check_crc=check_crc,
        extract=extract,
        known=known,
    )


def give_back_memory(heap: bool = True) -> None:
    """Hand the free heap back to the system after a task's block of work: glibc keeps up to 64 MiB
    of freed memory at its heap's top (its trim threshold grows with the large blocks freed), which a
    Spark Python worker would otherwise hold through the next task. `heap=False`: Arrow's pool only;
    glibc's trim walks the whole heap (done per row group, 2.5 s of CPU in a 2 GiB salvage)."""
    import pyarrow as pa  # lazy: pyarrow

    if heap:
        malloc.trim()
    pa.default_memory_pool().release_unused()


def _m(br: ByteRange, key: str) -> Any:
    return br.meta.get(key)


def skipped_bytes(problems: list[dict[str, Any]]) -> dict[str, int]:
    """Bytes per store that are not records (corrupt, gap): the walk skipped them and went on. A record
    with a bad BODYCRC is still read (crcOk false), so it does not count."""
    out: dict[str, int] = {}
    for p in problems:
        if p["kind"] != "crc":
            out[p["store"]] = out.get(p["store"], 0) + int(p["length"])
    return out


def problem_row(br: ByteRange, p: Problem) -> tuple[Any, ...]:
    return (
        _m(br, "clusterName"),
        _m(br, "brokerName"),
        _m(br, "store"),
        br.path,
        p.position,
        p.offset,
        p.length,
        p.kind,
        p.reason,
    )


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
            yield (
                "q",
                (
                    _m(br, "clusterName"),
                    _m(br, "brokerName"),
                    _m(br, "store"),
                    topic_of[k >> 32],
                    qid,
                    count[i],
                    nbytes[i],
                    first_ts[i],
                    last_ts[i],
                    min_q[i],
                    max_q[i],
                    min_p[i],
                    max_p[i],
                    crc_err[i],
                ),
            )
    for p in pr.problems:
        yield "p", problem_row(br, p)


# --------------------------------------------------------------------------- salvage (Arrow)
# Salvage runs in two passes over the replicas' ranges, the same in both engines: `candidate_keys` walks
# a range (CRC included) and gives one row of four integers per record: its set, the messageKey as 128
# bits (`key_hashes`) and `ord`, which packs the replica's rank in the plan, the record's offset and
# whether its BODYCRC failed, so that the smallest `ord` of a message is the copy to keep (first replica,
# lowest offset) and that copy can be found again from it alone. The engine drops what the source keeps
# and the extra copies; `kept_rows` then reads the kept records of one output part back at their
# positions (no walk) and `message_batch` makes the output rows. No body crosses a shuffle, none reaches
# the driver, and the rows the engines sort and move are 28 bytes.

CANDIDATE_FIELDS = (("setId", "int32"), ("keyHi", "int64"), ("keyLo", "int64"), ("ord", "int64"))
ORD_OFFSET_BITS = 48  # offsets below 256 TiB; the rank above them, the CRC flag below
_OFFSET_MASK = (1 << ORD_OFFSET_BITS) - 1
OUTPUT_FIELDS = (
    ("clusterName", "string", False),
    ("brokerName", "string", False),
    ("store", "string", False),
    ("brokerId", "int64", True),
    ("epoch", "int64", True),
    ("physicalOffset", "int64", False),
    ("size", "int32", False),
    ("version", "int32", False),
    ("topic", "string", False),
    ("queueId", "int32", False),
    ("queueOffset", "int64", False),
    ("flag", "int32", False),
    ("sysFlag", "int32", False),
    ("bornTimestamp", "int64", False),
    ("bornHost", "string", False),
    ("storeTimestamp", "int64", False),
    ("storeHost", "string", False),
    ("reconsumeTimes", "int32", False),
    ("preparedTransactionOffset", "int64", False),
    ("bodyCrc", "int64", False),
    ("crcOk", "bool", False),
    ("uniqKey", "string", True),
    ("keys", "string", True),
    ("tags", "string", True),
    ("properties", "map", False),
    ("rawProperties", "binary", False),
    ("body", "binary", False),
    ("messageKey", "string", False),
    ("copies", "int64", False),
)


def _pa_type(pa: Any, name: str) -> Any:
    if name == "map":
        return pa.map_(pa.string(), pa.string())
    return getattr(pa, {"bool": "bool_"}.get(name, name))()


def candidate_schema() -> Any:
    import pyarrow as pa  # lazy: pyarrow

    return pa.schema([pa.field(n, _pa_type(pa, t)) for n, t in CANDIDATE_FIELDS])


def output_schema() -> Any:
    """The Arrow schema of the salvaged message rows (docs/pipeline.md), as written to Parquet."""
    import pyarrow as pa  # lazy: pyarrow

    return pa.schema([pa.field(n, _pa_type(pa, t), nullable) for n, t, nullable in OUTPUT_FIELDS])


def _epoch_array(br: ByteRange, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The epoch whose [start, next start) holds each offset, from the replica's epoch file, as (values,
    valid mask) for an Arrow column."""
    entries = sorted(_m(br, "epochs") or [])
    if not entries:
        return np.zeros(offsets.size, dtype=np.int64), np.zeros(offsets.size, dtype=bool)
    starts = np.asarray([s for s, _ in entries], dtype=np.int64)
    eps = np.asarray([e for _, e in entries], dtype=np.int64)
    idx = np.searchsorted(starts, offsets, side="right") - 1
    return eps[np.maximum(idx, 0)], idx >= 0


def _hosts_arrow(pa: Any, codes: np.ndarray, names: list[str]) -> Any:
    """Host codes and their names (`ParsedRange.host_names`) as a string array."""
    return pa.DictionaryArray.from_arrays(pa.array(codes, pa.int32()), pa.array(names, pa.string())).cast(
        pa.string()
    )


def _message_keys(pa: Any, pr: ParsedRange) -> Any:
    """`message_key` of every record, with Arrow's string kernels (per record only when the properties
    of the range are not all UTF-8)."""
    import pyarrow.compute as pc  # lazy: pyarrow

    assert pr.properties_blob is not None and pr.born_host_codes is not None
    try:
        text = _binary(pa, pr.properties_blob).cast(pa.string())
    except pa.ArrowInvalid:
        assert pr.properties is not None and pr.born_hosts is not None
        rows = zip(
            pr.properties, pr.born_hosts, pr.born_timestamp.tolist(), pr.body_crc.tolist(), strict=True
        )
        return pa.array(
            [message_key(property_value(raw, b"UNIQ_KEY"), born, ts, crc) for raw, born, ts, crc in rows],
            pa.string(),
        )
    uniq = pc.struct_field(pc.extract_regex(text, "(?:^|\x02)UNIQ_KEY\x01(?P<v>[^\x02]*)"), [0])
    return _key_text(
        pa,
        uniq,
        _hosts_arrow(pa, pr.born_host_codes, pr.host_names),
        pa.array(pr.born_timestamp),
        pa.array(pr.body_crc),
    )


def _key_text(pa: Any, uniq: Any, born_host: Any, born_ts: Any, body_crc: Any) -> Any:
    """`message_key` of every row from its UNIQ_KEY (null or "" when it has none) and born fields."""
    import pyarrow.compute as pc  # lazy: pyarrow

    s = pa.string()
    born = pc.binary_join_element_wise("born:", born_host, "/", born_ts.cast(s), "/", body_crc.cast(s), "")
    has = pc.fill_null(pc.not_equal(uniq, ""), False)
    return pc.if_else(has, pc.binary_join_element_wise("uniq:", uniq, ""), born)


_SEEDS = (0x243F6A8885A308D3, 0x13198A2E03707344)
_ODD = np.uint64(0x9E3779B97F4A7C15)


def _fmix(h: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer (a bijection: every input bit flips about half the output bits)."""
    h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    out: np.ndarray = h ^ (h >> np.uint64(31))
    return out


def key_hashes(keys: Any) -> tuple[np.ndarray, np.ndarray]:
    """Each string of an Arrow string array as 128 bits, two int64 (hi, lo): the length, then the bytes
    8 at a time, mixed into two lanes with different seeds. The dedupe compares these instead of the
    messageKey text; two different keys of a job share them with a probability of about n^2 / 2^129
    (2 million keys: 1 in 10^26)."""

    n = len(keys)
    cw = walker._cw
    if cw is not None and n and str(keys.type) == "string":  # the same arithmetic in C, the GIL released
        hi, lo = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
        data = keys.buffers()[2]
        cw.key_hashes(
            np.frombuffer(keys.buffers()[1], dtype=np.int32)[keys.offset : keys.offset + n + 1],
            b"" if data is None else data,
            hi,
            lo,
        )
        return hi, lo
    offs = np.frombuffer(keys.buffers()[1], dtype=np.int32)[keys.offset : keys.offset + n + 1].astype(
        np.int64
    )
    data = keys.buffers()[2]
    u8 = np.frombuffer(data, dtype=np.uint8) if data is not None and data.size else np.zeros(1, np.uint8)
    hi, lo = np.empty(n, dtype=np.uint64), np.empty(n, dtype=np.uint64)
    step = 1 << 15
    for s in range(0, n, step):
        at, ln = offs[s : s + step + 1][:-1], np.diff(offs[s : s + step + 1])
        width = max(8, -(-int(ln.max()) // 8) * 8)
        cols = np.arange(width)
        rows = np.where(cols < ln[:, None], row_bytes(u8, at, width), 0)
        words = np.ascontiguousarray(rows.astype(np.uint8)).view("<u8")
        h1 = _fmix(ln.astype(np.uint64) ^ np.uint64(_SEEDS[0]))
        h2 = _fmix(ln.astype(np.uint64) ^ np.uint64(_SEEDS[1]))
        for j in range(words.shape[1]):  # a row's words only: not the block's padding
            w, more = words[:, j], ln > 8 * j
            h1 = np.where(more, _fmix(h1 ^ w), h1)
            h2 = np.where(more, _fmix(h2 ^ (w * _ODD)), h2)
        hi[s : s + step], lo[s : s + step] = h1, h2
    return hi.view(np.int64), lo.view(np.int64)


def pack_ord(rank: int, offsets: np.ndarray, crc_ok: np.ndarray) -> np.ndarray:
    """`ord` of candidate records: rank, offset, BODYCRC failed (what orders the copies of a message)."""
    return (
        (np.int64(rank) << np.int64(ORD_OFFSET_BITS + 1))
        | (offsets.astype(np.int64) << np.int64(1))
        | (~crc_ok).astype(np.int64)
    )


def unpack_ord(ords: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rank, offset, crcOk) of each `ord`."""
    o = ords.astype(np.int64)
    return o >> np.int64(ORD_OFFSET_BITS + 1), (o >> np.int64(1)) & np.int64(_OFFSET_MASK), (o & 1) == 0


def candidate_keys(br: ByteRange, known: Chain | None = None) -> tuple[Any, list[tuple[Any, ...]]]:
    """Pass 1 of salvage over one replica range: a CANDIDATE_FIELDS batch (one row per record, no body)
    and the problem rows of the range; `known`: the records of its file an earlier walk found."""
    import pyarrow as pa  # lazy: pyarrow

    his, los, ords, problems = [], [], [], []
    for pr in parse_task_blocks(br, extract=("properties", "hosts"), known=known):
        hi, lo = key_hashes(_message_keys(pa, pr))
        his.append(hi)
        los.append(lo)
        ords.append(pack_ord(int(_m(br, "rank")), pr.offset, pr.crc_ok))
        problems += pr.problems
    hi, lo, ord_ = (np.concatenate(x) for x in (his, los, ords))
    cols = [pa.array(np.full(hi.size, _m(br, "setId"), np.int32)), pa.array(hi), pa.array(lo), pa.array(ord_)]
    problems.sort(key=lambda p: p.position)
    return pa.RecordBatch.from_arrays(cols, schema=candidate_schema()), [problem_row(br, p) for p in problems]


def kept_rows(
    set_ids: np.ndarray, ords: np.ndarray, copies: np.ndarray, ranges: Sequence[ByteRange], part_bytes: int
) -> Any:
    """The messages to write, given as (setId, ord, copies), as the rows `message_batch` reads, sorted
    in write order (set, part, then topic, queueId, epoch, physicalOffset, store), with the columns that
    cut them into parts (partEpoch: the epoch or -1, partBucket: offset // part_bytes) and bodyBytes.
    Each record's topic, queue, size and body length are read back at its position (no walk, no body);
    `ranges`: the job's candidate ranges, which say the file of each (set, rank, offset)."""
    import pyarrow as pa  # lazy: pyarrow

    n = ords.size
    rank, off, crc_ok = unpack_ord(ords)
    rid = np.zeros(n, dtype=np.int64)
    epoch, ep_ok = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=bool)
    by_store: dict[tuple[int, int], list[int]] = {}
    for i, r in enumerate(ranges):
        by_store.setdefault((int(_m(r, "setId")), int(_m(r, "rank"))), []).append(i)
    store_key = (set_ids.astype(np.int64) << np.int64(20)) | rank
    for k in np.unique(store_key).tolist():
        at = np.flatnonzero(store_key == k)
        ids = np.asarray(by_store[(k >> 20, k & 0xFFFFF)], dtype=np.int64)
        starts = np.asarray([ranges[i].offset for i in ids.tolist()], dtype=np.int64)
        rid[at] = ids[np.searchsorted(starts, off[at], side="right") - 1]
        epoch[at], ep_ok[at] = _epoch_array(ranges[int(ids[0])], off[at])
    size, queue, blen = (np.zeros(n, dtype=np.int64) for _ in range(3))
    tcode = np.zeros(n, dtype=np.int64)
    names: dict[str, int] = {}
    path_id: dict[str, int] = {}
    fid = np.asarray([path_id.setdefault(r.path, len(path_id)) for r in ranges], dtype=np.int64)[rid]
    paths = list(path_id)
    for f in np.unique(fid).tolist():
        at = np.flatnonzero(fid == f)
        fs = ranges[int(rid[at[0]])].file_start
        with open_file(paths[f]) as buf:
            for s in range(0, at.size, BLOCK_RECORDS):  # a block at a time: memory follows the block
                b = at[s : s + BLOCK_RECORDS]
                pr = records_at(buf, fs, off[b] - fs)
                remap = np.asarray([names.setdefault(t, len(names)) for t in pr.topic_names], dtype=np.int64)
                tcode[b] = remap[pr.topic_codes] if b.size else 0
                size[b], queue[b], blen[b] = pr.size, pr.queue_id, pr.body_length
                del pr
    by_bytes = sorted(names, key=lambda t: t.encode("utf-8", errors="surrogatepass"))
    trank = np.zeros(len(names), dtype=np.int64)
    trank[[names[t] for t in by_bytes]] = np.arange(len(by_bytes))
    part_epoch = np.where(ep_ok, epoch, -1)
    bucket = off // part_bytes
    store_id = np.asarray([int(_m(r, "storeId")) for r in ranges], dtype=np.int64)[rid]
    order = _lexsort(
        (
            store_id,
            off,
            epoch * ep_ok,
            ep_ok,
            queue,
            trank[tcode] if n else tcode,
            bucket,
            part_epoch,
            set_ids,
        )
    )
    i32 = pa.int32()
    topics = pa.DictionaryArray.from_arrays(
        pa.array(tcode[order].astype(np.int32)), pa.array(list(names), pa.string())
    ).cast(pa.string())
    return pa.table(
        {
            "setId": pa.array(set_ids[order], i32),
            "partEpoch": pa.array(part_epoch[order]),
            "partBucket": pa.array(bucket[order]),
            "rangeId": pa.array(rid[order]),
            "epoch": pa.array(epoch[order], pa.int64(), mask=~ep_ok[order]),
            "physicalOffset": pa.array(off[order]),
            "size": pa.array(size[order], i32),
            "topic": topics,
            "queueId": pa.array(queue[order], i32),
            "crcOk": pa.array(crc_ok[order]),
            "copies": pa.array(copies[order], pa.int64()),
            "bodyBytes": pa.array(blen[order]),
        }
    )


def _lexsort(keys: tuple[np.ndarray, ...]) -> np.ndarray:
    """np.lexsort(keys) (the last key first), the most significant keys packed into one int64 as the
    digits of a mixed-radix number while their ranges allow: one stable sort instead of a sort per key
    (9 keys of 2 million rows: 1.1 s). The same permutation: the packed order is the keys' order, and
    ties keep the rows' order in both."""
    n = keys[0].size
    if n < 2:
        return np.lexsort(keys)
    packed = np.zeros(n, dtype=np.int64)
    room = 1 << 62
    rest = len(keys)
    for k in reversed(keys):
        lo, hi = int(k.min()), int(k.max())
        span = hi - lo + 1
        if span > room:
            break
        packed = packed * span + (k.astype(np.int64) - lo)
        room //= span
        rest -= 1
    if rest == 0:
        out: np.ndarray = np.argsort(packed, kind="stable")
        return out
    return np.lexsort((*keys[:rest], packed))


def key_arrow(br: ByteRange, known: Chain | None = None) -> Any:
    """The message keys the source keeps in one range (KEY_COLUMNS: its set, the key's 128 bits)."""
    import pyarrow as pa  # lazy: pyarrow

    his, los = [], []
    for pr in parse_task_blocks(br, check_crc=False, extract=("properties", "hosts"), known=known):
        h, low = key_hashes(_message_keys(pa, pr))
        his.append(h)
        los.append(low)
    hi, lo = np.concatenate(his), np.concatenate(los)
    return pa.RecordBatch.from_arrays(
        [pa.array(np.full(hi.size, _m(br, "setId"), np.int32)), pa.array(hi), pa.array(lo)],
        names=list(KEY_COLUMNS),
    )


def _binary(pa: Any, blob: Blob) -> Any:
    """A binary Arrow array over a walker's Blob (no per-item Python object)."""
    offs = blob.offsets
    typ = pa.binary() if offs[-1] < 1 << 31 else pa.large_binary()
    if typ == pa.binary():
        offs = offs.astype(np.int32)
    return pa.Array.from_buffers(typ, offs.size - 1, [None, pa.py_buffer(offs), pa.py_buffer(blob.data)])


def _properties(pa: Any, raw: Any) -> dict[str, Any] | None:
    """The properties map and UNIQ_KEY / KEYS / TAGS of every record at once with Arrow's string kernels
    (`decode_properties`' rules: entries split on \\x02, key and value on the first \\x01); None when a
    record is not UTF-8 or repeats a key (then `_properties_py`)."""
    import pyarrow.compute as pc  # lazy: pyarrow

    n = len(raw)
    try:
        text = raw.cast(pa.string())
    except pa.ArrowInvalid:
        return None
    entries = pc.split_pattern(text, "\x02")
    items = pc.list_flatten(entries)
    parent = pc.list_parent_indices(entries).to_numpy()
    keep = pc.not_equal(items, "").to_numpy(zero_copy_only=False)
    items, parent = items.filter(pa.array(keep)), parent[keep]
    # key and value split at the first \x01 (no \x01: the item is the key, its value ""), by a split and
    # two takes: regular expressions doing the same cost 4x more (bench/README.md, issue 32)
    kv = pc.split_pattern(items, "\x01", max_splits=1)
    at = np.frombuffer(kv.buffers()[1], dtype=np.int32)[kv.offset : kv.offset + len(kv) + 1]
    first = at[:-1] - at[0]
    halves = pc.list_flatten(kv)
    keys = halves.take(pa.array(first))
    values = halves.take(pa.array(first + 1, mask=np.diff(at) != 2)).fill_null("")
    # a key repeated within a record: (record, key code) pairs not all distinct
    codes = pc.dictionary_encode(keys).indices.to_numpy().astype(np.int64)
    pairs = np.sort(parent.astype(np.int64) * (int(codes.max()) + 1 if codes.size else 1) + codes)
    if bool((pairs[1:] == pairs[:-1]).any()):
        return None
    offs = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(np.bincount(parent, minlength=n), out=offs[1:])

    def one(name: str) -> Any:
        hit = pc.equal(keys, name).to_numpy(zero_copy_only=False)
        at = np.full(n, -1, dtype=np.int64)
        at[parent[hit]] = np.arange(int(hit.sum()))
        return values.filter(pa.array(hit)).take(pa.array(at, mask=at < 0))

    uniq = one("UNIQ_KEY")
    return {
        "uniqKey": pc.if_else(pc.equal(uniq, ""), pa.scalar(None, pa.string()), uniq),
        "keys": one("KEYS"),
        "tags": one("TAGS"),
        "properties": pa.MapArray.from_arrays(pa.array(offs), keys, values),
    }


def _properties_py(pa: Any, raws: list[bytes]) -> dict[str, Any]:
    """`_properties` one record at a time with `decode_properties` (invalid UTF-8, repeated keys)."""
    s = pa.string()
    props = [decode_properties(r) for r in raws]
    psz = np.zeros(len(props) + 1, dtype=np.int32)
    np.cumsum([len(d) for d in props], out=psz[1:])
    return {
        "uniqKey": pa.array([d.get("UNIQ_KEY") or None for d in props], s),
        "keys": pa.array([d.get("KEYS") for d in props], s),
        "tags": pa.array([d.get("TAGS") for d in props], s),
        "properties": pa.MapArray.from_arrays(
            pa.array(psz),
            pa.array([k for d in props for k in d], s),
            pa.array([v for d in props for v in d.values()], s),
        ),
    }


def message_batch(kept: Any, ranges: Sequence[ByteRange]) -> Any:
    """Pass 2 of salvage: the output rows (OUTPUT_FIELDS) of `kept`, candidate rows plus `copies`, in
    their order, read back from the commitlog files at their positions (one read per run of rows in
    the same file; reordered only when a file's rows are not in one run); `ranges` are the job's
    candidate ranges (what a row's rangeId points at)."""
    # lazy: pyarrow
    import pyarrow as pa
    import pyarrow.compute as pc

    n = kept.num_rows
    rid = kept.column("rangeId").to_numpy()
    files: dict[str, int] = {}
    file_of = np.asarray([files.setdefault(r.path, len(files)) for r in ranges], dtype=np.int64)
    fid = file_of[rid]
    starts = np.asarray([r.file_start for r in ranges], dtype=np.int64)[rid]
    pos = kept.column("physicalOffset").to_numpy() - starts
    bounds = [0, *(np.flatnonzero(fid[1:] != fid[:-1]) + 1).tolist(), n] if n else []
    run_file = fid[bounds[:-1]].tolist()
    take = None
    if len(set(run_file)) == len(run_file):  # every file's rows in one run: read them in order
        runs = [np.arange(a, b) for a, b in itertools.pairwise(bounds)]
    else:
        order = np.argsort(fid, kind="stable")
        runs = np.split(order, np.flatnonzero(np.diff(fid[order])) + 1)
        inv = np.empty(n, dtype=np.int64)
        inv[order] = np.arange(n)
        take = pa.array(inv)
    path_of = list(files)
    parts: list[ParsedRange] = []
    for idx in runs:
        with open_file(path_of[fid[idx[0]]]) as buf:
            parts.append(
                records_at(
                    buf,
                    int(starts[idx[0]]),
                    pos[idx],
                    topics=False,
                    extract=("bodies", "properties", "hosts"),
                )
            )

    def arr(arrays: list[Any], typ: Any) -> Any:
        if not arrays:
            return pa.array([], typ)
        a = arrays[0] if len(arrays) == 1 else pa.concat_arrays(arrays)
        return a if take is None else a.take(take)

    def cat(get: Any, typ: Any) -> Any:
        return arr([pa.array(get(p), typ) for p in parts], typ)

    def blobs(get: Any) -> Any:
        return arr([_binary(pa, get(p)) for p in parts], pa.binary())

    def hosts(get: Any) -> Any:
        return arr([_hosts_arrow(pa, get(p), p.host_names) for p in parts], pa.string())

    def of_range(key: str, typ: Any) -> Any:
        return pa.array([r.meta.get(key) for r in ranges], typ).take(pa.array(rid))

    raw = blobs(lambda p: p.properties_blob)
    fast = _properties(pa, raw)
    props = fast or _properties_py(pa, raw.to_pylist())
    i32, i64, s = pa.int32(), pa.int64(), pa.string()
    col = kept.column
    born_host = hosts(lambda p: p.born_host_codes)
    born_ts = cat(lambda p: p.born_timestamp, i64)
    body_crc = cat(lambda p: p.body_crc, i64)
    if fast is not None:  # UNIQ_KEY is the properties' (its regular expression would find the same)
        message_keys = _key_text(pa, fast["uniqKey"], born_host, born_ts, body_crc)
    else:
        message_keys = arr([_message_keys(pa, p) for p in parts], s)
    cols = {
        "clusterName": of_range("clusterName", s),
        "brokerName": of_range("brokerName", s),
        "store": of_range("store", s),
        "brokerId": of_range("brokerId", i64),
        "epoch": col("epoch"),
        "physicalOffset": col("physicalOffset"),
        "size": col("size"),
        "version": cat(lambda p: p.version.astype(np.int32), i32),
        "topic": col("topic"),
        "queueId": col("queueId"),
        "queueOffset": cat(lambda p: p.queue_offset, i64),
        "flag": cat(lambda p: p.flag.astype(np.int32), i32),
        "sysFlag": cat(lambda p: p.sysflag.astype(np.int32), i32),
        "bornTimestamp": born_ts,
        "bornHost": born_host,
        "storeTimestamp": cat(lambda p: p.store_timestamp, i64),
        "storeHost": hosts(lambda p: p.store_host_codes),
        "reconsumeTimes": cat(lambda p: p.reconsume_times.astype(np.int32), i32),
        "preparedTransactionOffset": cat(lambda p: p.prepared_tx_offset, i64),
        "bodyCrc": body_crc,
        "crcOk": col("crcOk"),
        **props,
        "rawProperties": raw,
        "body": blobs(lambda p: p.body_blob),
        "messageKey": message_keys,
        "copies": pc.cast(col("copies"), i64),
    }
    schema = output_schema()
    return pa.RecordBatch.from_arrays([cols[f.name] for f in schema], schema=schema)
