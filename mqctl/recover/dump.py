"""`mqctl recover dump`: a post-mortem listing of a store's commitlog, one record at a time (it streams: a
1 GiB file prints its first lines at once), each with the epoch whose range of the epoch file holds it."""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mqctl.errors import UsageError
from mqctl.store.commitlog import COMMITLOG_DIR, CommitLog, Record
from mqctl.store.epochfile import end_offsets, read_epoch_file

__all__ = ["dump_records"]

LONG_MAX = (1 << 63) - 1


def _walk(store: str, start: int | None) -> Iterator[Record]:
    """The one place the commitlog record walker is used (mqctl.store.commitlog's public API): records
    from `start`, a record boundary (the first record by default), CRC reported rather than raised; a
    corrupt record raises StoreError naming file and offset once the records before it are out."""
    log = CommitLog(Path(store) / COMMITLOG_DIR)
    if start is not None:
        before, after = log.boundaries_around(start, LONG_MAX)
        if before is None:
            raise UsageError(f"--from {start} is outside the commitlog (it starts at {log.min_offset})")
        if before != start:
            near = f"{before}" + (f" and {after}" if after is not None else "")
            raise UsageError(f"--from {start} is not a record boundary; nearest boundaries: {near}")
    return log.iter_records(start, check_crc=False, strict=True)


def dump_records(
    store: str | os.PathLike[str],
    *,
    start: int | None = None,
    to: int | None = None,
    max_bytes: int | None = None,
    body: bool = False,
) -> Iterator[dict[str, Any]]:
    """One dict per record from `start` until `to` (exclusive: records that begin before it) or until
    `max_bytes` of records are out, whichever comes first."""
    store = os.fspath(store)
    epochs = read_epoch_file(store).entries
    starts = [e.start_offset for e in epochs]
    ends = end_offsets(epochs)
    records = _walk(store, start)
    first: int | None = None
    for rec in records:
        if to is not None and rec.offset >= to:
            return
        if first is None:
            first = rec.offset
        if max_bytes is not None and rec.end - first > max_bytes and rec.offset > first:
            return
        i = bisect.bisect_right(starts, rec.offset) - 1
        epoch = epochs[i].epoch if i >= 0 and rec.offset < ends[i] else None
        full = rec.to_dict(with_body=body)
        d = {k: full[k] for k in _FIELDS}
        d.update(crcOk=rec.crc_ok(), epoch=epoch, keys=full["properties"].get("KEYS"))
        if body:
            d["body"] = full["body"]
        yield d


_FIELDS = (
    "offset",
    "size",
    "topic",
    "queueId",
    "queueOffset",
    "storeTimestamp",
    "bornTimestamp",
    "bornHost",
    "storeHost",
    "bodyLength",
)
