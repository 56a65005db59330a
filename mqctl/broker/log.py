"""The agent's log: a real RocketMQ commitlog (mqctl.store.commitlog records and file layout) or an
offsets-only log for scale runs.

Both keep one invariant the replication relies on: ``max_offset`` is always a record boundary (or,
after a rolled file, the next file's start), so a slave's max offset is a valid place to resume,
and a truncation point from the epoch algorithm (always some broker's max offset at an epoch
change) is a boundary too. Not thread-safe: the agent serialises calls under its own lock.
"""

from __future__ import annotations

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
    Message,
    encode_record,
    file_name,
)

__all__ = ["BrokerLog", "CommitLogStore", "OffsetsLog", "StoredMessage", "open_log", "OFFSETS_FILE"]

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
    """``<store>/commitlog``: 20-digit files of ``file_size`` bytes, RocketMQ records written with
    mqctl.store's encoder, blank marker when ``size + 8 > remaining`` (CommitLog.doAppend). On open
    the max offset is recovered the way RocketMQ does (mqctl.store's scan) and anything after it,
    a torn write of a crash, is zeroed."""

    def __init__(self, store_dir: str | os.PathLike[str], file_size: int) -> None:
        self.directory = Path(store_dir) / COMMITLOG_DIR
        self.directory.mkdir(parents=True, exist_ok=True)
        self.file_size = file_size
        self._fds: dict[int, int] = {}
        self._max = 0
        if any(p.name.isdigit() and len(p.name) == 20 for p in self.directory.iterdir()):
            scan = CommitLog(self.directory, file_size).scan()
            self._max = scan.max_offset
            self._zero_after(self._max)

    # -- files ------------------------------------------------------------------------------

    def _fd(self, start: int) -> int:
        fd = self._fds.get(start)
        if fd is None:
            path = self.directory / file_name(start)
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
                if os.fstat(fd).st_size < self.file_size:
                    os.ftruncate(fd, self.file_size)  # preallocated (sparse), as RocketMQ maps it
            except OSError as exc:
                raise StoreError(f"{path}: cannot open: {exc.strerror or exc}") from None
            self._fds[start] = fd
        return fd

    def _file_start(self, offset: int) -> int:
        return offset - offset % self.file_size

    def _zero_after(self, offset: int) -> None:
        """Drop everything from ``offset``: zero the rest of its file, delete later files."""
        start = self._file_start(offset)
        for p in sorted(self.directory.iterdir()):
            if not (p.name.isdigit() and len(p.name) == 20):
                continue
            fstart = int(p.name)
            if fstart > start or (fstart == start and offset == start and start > 0):
                fd = self._fds.pop(fstart, None)
                if fd is not None:
                    os.close(fd)
                p.unlink()
            elif fstart == start:
                fd = self._fd(start)
                pos = offset - start
                os.ftruncate(fd, pos)          # cut, then re-extend with zeros (sparse)
                os.ftruncate(fd, self.file_size)

    # -- BrokerLog ----------------------------------------------------------------------------

    @property
    def max_offset(self) -> int:
        return self._max

    def append(self, topic: str, body: bytes, store_host: tuple[str, int]) -> tuple[int, int]:
        now = int(time.time() * 1000)
        msg = Message(topic=topic, body=body, born_timestamp=now, store_timestamp=now, store_host=store_host)
        size = len(encode_record(msg, 0))
        if size + 8 > self.file_size:
            raise StoreError(f"message of {size} bytes does not fit a commitlog file of {self.file_size}")
        start = self._file_start(self._max)
        remaining = self.file_size - (self._max - start)
        if size + 8 > remaining:
            os.pwrite(self._fd(start), _II.pack(remaining, BLANK_MAGIC), self._max - start)
            self._max = start + self.file_size
            start = self._max
        offset = self._max
        os.pwrite(self._fd(start), encode_record(msg, offset), offset - start)
        self._max = offset + size
        return offset, self._max

    def read_chunk(self, offset: int, max_bytes: int, limit: int) -> tuple[bytes, int]:
        start = self._file_start(offset)
        end = min(limit, self._max, start + self.file_size)
        if end <= offset:
            return b"", 0
        fd = self._fd(start)
        data = os.pread(fd, end - offset, offset - start)
        pos = 0
        n = len(data)
        while pos + 8 <= n:
            total, magic = _II.unpack_from(data, pos)
            if magic == BLANK_MAGIC:
                # the rest of the file belongs to the blank marker
                tail = start + self.file_size
                if tail <= end:
                    pos = n
                break
            if magic not in (MAGIC_V1, MAGIC_V2) or total <= 0:
                raise StoreError(f"{self.directory / file_name(start)} offset {offset + pos}: "
                                 f"not a record boundary")
            if pos + total > n or (pos > 0 and pos + total > max_bytes):
                break
            pos += total
        return data[:pos], pos

    def write_chunk(self, offset: int, data: bytes, length: int) -> None:
        if offset != self._max:
            raise StoreError(f"{self.directory}: replicated data starts at {offset}, log ends at {self._max}")
        if length != len(data):
            raise StoreError(f"{self.directory}: a commitlog replica needs the bytes (got {len(data)} "
                             f"of {length}); is the master offsets-only?")
        if not data:
            return
        start = self._file_start(offset)
        if offset + length > start + self.file_size:
            raise StoreError(f"{self.directory}: a batch crosses a file end (file sizes differ?)")
        os.pwrite(self._fd(start), data, offset - start)
        self._max = offset + length

    def truncate(self, offset: int) -> None:
        if offset >= self._max:
            return
        self._zero_after(offset)
        self._max = offset

    def flush(self) -> None:
        for fd in self._fds.values():
            os.fsync(fd)

    def close(self) -> None:
        fds, self._fds = self._fds, {}
        for fd in fds.values():
            os.close(fd)

    def messages(self, start: int = 0) -> Iterator[StoredMessage]:
        if self._max == 0:
            return
        log = CommitLog(self.directory, self.file_size)
        for rec in log.iter_records(max(start, log.min_offset)):
            if rec.offset >= self._max:
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
