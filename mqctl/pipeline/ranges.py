"""Byte ranges of commitlog files: the unit of work of a Spark task. Pure (no Spark, no numpy).

A range owns the records whose FIRST byte lies in [start, end) of one file. It may start in the middle
of a record: the parser then resynchronises on the next record boundary, and the record that straddles
`start` belongs to the previous range (which reads past its `end` to finish it). `limit` is where the
region of interest ends in this file, so the walk reports damage it lands on only inside the region.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from mqctl.store.commitlog import COMMITLOG_DIR, CommitLog

DEFAULT_RANGE_SIZE = 64 << 20

__all__ = ["DEFAULT_RANGE_SIZE", "ByteRange", "file_ranges", "store_ranges"]


@dataclass(frozen=True)
class ByteRange:
    """One task's slice: positions are relative to the file, offsets absolute."""

    path: str
    file_start: int  # absolute offset of the file's first byte
    start: int  # first owned position in the file
    end: int  # end of ownership (exclusive)
    limit: int  # end of the region of interest in this file (>= end)
    head_owned: bool  # `start` is where the region begins: damage right there is reported
    meta: dict[str, object] = field(default_factory=dict, compare=False)

    @property
    def offset(self) -> int:
        return self.file_start + self.start

    @property
    def length(self) -> int:
        return self.end - self.start


def file_ranges(
    path: str,
    file_start: int,
    file_len: int,
    *,
    start: int = 0,
    stop: int | None = None,
    range_size: int = DEFAULT_RANGE_SIZE,
    meta: dict[str, object] | None = None,
) -> list[ByteRange]:
    """Cut positions [start, stop) of one file into ranges of at most `range_size` bytes."""
    if range_size <= 0:
        raise ValueError("range_size must be positive")
    stop = file_len if stop is None else min(stop, file_len)
    out = []
    pos = start
    while pos < stop:
        end = min(pos + range_size, stop)
        out.append(ByteRange(path, file_start, pos, end, stop, pos == start, dict(meta or {})))
        pos = end
    return out


def store_ranges(
    store: str | os.PathLike[str],
    *,
    from_offset: int | None = None,
    to_offset: int | None = None,
    range_size: int = DEFAULT_RANGE_SIZE,
    meta: dict[str, object] | None = None,
) -> list[ByteRange]:
    """Ranges covering absolute offsets [from_offset, to_offset) of a store's commitlog (defaults: the
    first byte of the first file, the last byte of the last file). A file's start is always a region
    start: every file begins with a record (or the blank marker) in RocketMQ's layout."""
    log = CommitLog(Path(store) / COMMITLOG_DIR)
    lo = log.min_offset if from_offset is None else from_offset
    out: list[ByteRange] = []
    for lf in log.files:
        f_end = lf.start + lf.size
        hi = f_end if to_offset is None else min(f_end, to_offset)
        if hi <= lo or f_end <= lo:
            continue
        s = max(lo, lf.start) - lf.start
        out += file_ranges(
            str(lf.path), lf.start, lf.size, start=s, stop=hi - lf.start, range_size=range_size, meta=meta
        )
    return out
