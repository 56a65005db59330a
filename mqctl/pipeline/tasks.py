"""What one Spark task does with one `ByteRange`: map the file, parse the range, emit plain tuples.

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

from mqctl.pipeline.parser import ParsedRange, Problem, message_key, parse_byte_range, property_value
from mqctl.pipeline.ranges import ByteRange
from mqctl.store.commitlog import decode_properties

__all__ = ["MESSAGE_COLUMNS", "KEY_COLUMNS", "QUEUE_COLUMNS", "PROBLEM_COLUMNS", "open_file", "parse_task",
           "salvage_rows", "key_rows", "analyze_rows", "problem_row"]

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
        names: dict[str, int] = {}
        codes = np.fromiter((names.setdefault(t, len(names)) for t in pr.topics), dtype=np.int64,
                            count=len(pr))
        key = (codes << 32) | (pr.queue_id & 0xFFFFFFFF)
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
        topic_of = {v: k for k, v in names.items()}
        for i, k in enumerate(uniq.tolist()):
            qid = k & 0xFFFFFFFF
            qid = qid - (1 << 32) if qid >= 1 << 31 else qid
            yield "q", (_m(br, "clusterName"), _m(br, "brokerName"), _m(br, "store"), topic_of[k >> 32], qid,
                        count[i], nbytes[i], first_ts[i], last_ts[i], min_q[i], max_q[i], min_p[i], max_p[i],
                        crc_err[i])
    for p in pr.problems:
        yield "p", problem_row(br, p)
