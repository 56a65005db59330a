"""The agent's log: a real RocketMQ commitlog (mqctl.store.commitlog records and file layout) or an
offsets-only log for scale runs.

Both keep one invariant the replication relies on: ``max_offset`` is always a record boundary (or,
after a rolled file, the next file's start), so a slave's max offset is a valid place to resume,
and a truncation point from the epoch algorithm (always some broker's max offset at an epoch
change) is a boundary too. Not thread-safe: the agent serialises calls under its own lock.
"""

from __future__ import annotations

import bisect
import os
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from mqctl.errors import StoreError
from mqctl.store.commitlog import (
    BLANK_MAGIC,
    COMMITLOG_DIR,
    MAGIC_V1,
    MAGIC_V2,
    CommitLog,
    CommitLogWriter,
    Message,
    file_name,
)

__all__ = ["OFFSETS_FILE", "BrokerLog", "CommitLogStore", "OffsetsLog", "StoredMessage", "open_log"]

OFFSETS_FILE = "offsetsLog"
_II = struct.Struct(">iI")


@dataclass(frozen=True)
class StoredMessage:
    offset: int
    size: int
    topic: str
    body: bytes


class BrokerLog(Protocol):
    """What the agent needs from its log."""

    @property
    def max_offset(self) -> int: ...

    def append(self, topic: str, body: bytes, store_host: tuple[str, int]) -> tuple[int, int]:
        """Append one message at the end; -> (offset, end)."""
        ...

    def read_chunk(self, offset: int, max_bytes: int, limit: int) -> tuple[bytes, int]:
        """Whole records from ``offset`` (a boundary) up to ``limit``, never past a file end:
        -> (data, length). data is b"" for an offsets-only log."""
        ...

    def write_chunk(self, offset: int, data: bytes, length: int) -> None:
        """A slave appends what its master sent; ``offset`` must be the current max offset."""
        ...

    def truncate(self, offset: int) -> None: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...

    def messages(self, start: int = 0) -> Iterator[StoredMessage]: ...


class CommitLogStore:
    """``<store>/commitlog`` written by mqctl.store's CommitLogWriter (RocketMQ's files, records and
    blank markers, written at once). On open the max offset is recovered the way RocketMQ does
    (mqctl.store's scan) and anything after it, a torn write of a crash, is zeroed."""

    def __init__(self, store_dir: str | os.PathLike[str], file_size: int) -> None:
        self.directory = Path(store_dir) / COMMITLOG_DIR
        self.file_size = file_size
        self._writer = CommitLogWriter(self.directory, file_size, buffer_bytes=0)
        self._writer.truncate(self._writer.offset)

    def _file_start(self, offset: int) -> int:
        return offset - offset % self.file_size

    # -- BrokerLog ----------------------------------------------------------------------------

    @property
    def max_offset(self) -> int:
        return self._writer.offset

    def append(self, topic: str, body: bytes, store_host: tuple[str, int]) -> tuple[int, int]:
        now = int(time.time() * 1000)
        msg = Message(topic=topic, body=body, born_timestamp=now, store_timestamp=now, store_host=store_host)
        try:
            offset = self._writer.append(msg)
        except ValueError as exc:
            raise StoreError(f"{self.directory}: {exc}") from None
        return offset, self._writer.offset

    def read_chunk(self, offset: int, max_bytes: int, limit: int) -> tuple[bytes, int]:
        start = self._file_start(offset)
        end = min(limit, self.max_offset, start + self.file_size)
        if end <= offset:
            return b"", 0
        fd = self._writer.file_fd(start)
        data = os.pread(fd, end - offset, offset - start)
        from mqctl.store.walker import parse_byte_range  # lazy: numpy

        pr = parse_byte_range(
            data, offset, 0, len(data), head_owned=True, check_crc=False, fields=False, stop_at_damage=True
        )
        if pr.problems:
            raise StoreError(
                f"{self.directory / file_name(start)} offset {pr.problems[0].offset}: {pr.problems[0].reason}"
            )
        ends = (pr.position + pr.size).tolist()
        # whole records up to max_bytes (at least one)
        k = max(1, bisect.bisect_right(ends, max_bytes)) if ends else 0
        if k < len(ends):
            return data[: ends[k - 1]], ends[k - 1]
        pos, n = pr.walk_end, len(data)
        if pos + 8 <= n:
            total, magic = _II.unpack_from(data, pos)
            if magic == BLANK_MAGIC:
                # the rest of the file belongs to the blank marker
                if start + self.file_size <= end:
                    pos = n
            elif magic not in (MAGIC_V1, MAGIC_V2) or total <= 0:
                raise StoreError(
                    f"{self.directory / file_name(start)} offset {offset + pos}: not a record boundary"
                )
        return data[:pos], pos

    def write_chunk(self, offset: int, data: bytes, length: int) -> None:
        if offset != self.max_offset:
            raise StoreError(
                f"{self.directory}: replicated data starts at {offset}, log ends at {self.max_offset}"
            )
        if length != len(data):
            raise StoreError(
                f"{self.directory}: a commitlog replica needs the bytes (got {len(data)} "
                f"of {length}); is the master offsets-only?"
            )
        self._writer.write(data)

    def truncate(self, offset: int) -> None:
        if offset < self.max_offset:
            self._writer.truncate(offset)

    def flush(self) -> None:
        self._writer.sync()

    def close(self) -> None:
        self._writer.close()

    def messages(self, start: int = 0) -> Iterator[StoredMessage]:
        if self.max_offset == 0:
            return
        log = CommitLog(self.directory, self.file_size)
        for rec in log.iter_records(max(start, log.min_offset)):
            if rec.offset >= self.max_offset:
                return
            yield StoredMessage(rec.offset, rec.size, rec.topic, rec.body)


class OffsetsLog:
    """Offsets only: each message advances the max offset by a nominal record size and nothing else
    is kept. ``<store>/offsetsLog`` holds the max offset (8 bytes big-endian), rewritten on every
    change without fsync, like an async-flushed log."""

    def __init__(self, store_dir: str | os.PathLike[str], record_overhead: int = 100) -> None:
        self.path = Path(store_dir) / OFFSETS_FILE
        self.overhead = record_overhead
        self._max = 0
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            data = b""
        if len(data) >= 8:
            self._max = struct.unpack(">q", data[:8])[0]
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        self._save()

    def _save(self) -> None:
        os.pwrite(self._fd, struct.pack(">q", self._max), 0)

    @property
    def max_offset(self) -> int:
        return self._max

    def append(self, topic: str, body: bytes, store_host: tuple[str, int]) -> tuple[int, int]:
        offset = self._max
        self._max += self.overhead + len(topic) + len(body)
        self._save()
        return offset, self._max

    def read_chunk(self, offset: int, max_bytes: int, limit: int) -> tuple[bytes, int]:
        end = min(limit, self._max, offset + max(1, max_bytes))
        return b"", max(0, end - offset)

    def write_chunk(self, offset: int, data: bytes, length: int) -> None:
        if offset != self._max:
            raise StoreError(f"{self.path}: replicated data starts at {offset}, log ends at {self._max}")
        self._max = offset + length
        self._save()

    def truncate(self, offset: int) -> None:
        if offset < self._max:
            self._max = offset
            self._save()

    def flush(self) -> None:
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def messages(self, start: int = 0) -> Iterator[StoredMessage]:
        return iter(())


def open_log(store_dir: str | os.PathLike[str], storage: str, file_size: int) -> BrokerLog:
    if storage == "offsets":
        return OffsetsLog(store_dir)
    return CommitLogStore(store_dir, file_size)
