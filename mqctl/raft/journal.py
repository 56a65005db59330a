"""mqctl's Raft journal: pysyncobj's Journal interface on an append-only, checksummed file.

File format (`raft.journal`, little-endian):

    header (48 bytes): b"MQCTLWAL", format version (u32), 24 zero bytes, 0xFFFFFFFF (u32, where
        pysyncobj's FileJournal keeps its last record offset: an older mqctl, which used that
        journal, refuses this file instead of reading it as empty), CRC32 of the 40 bytes before
        it (u32), 4 zero bytes
    records: length of the body (u32), CRC32 of the length and the body (u32),
        body = index (u64), term (u64), the pysyncobj command bytes

Term, vote and a commit index hint live in `raft.journal.meta` (JSON), replaced atomically
(temporary file, fsync, rename, fsync of the directory) before `setCurrentTerm` returns.

Durability (docs/raft-safety.md): `add` writes to the page cache; `sync` fdatasyncs once for
everything added since the last one (group commit); the fork of pysyncobj (mqctl/raft/syncobj.py)
calls it before a follower acknowledges entries. A leader calls `sync_soon` instead: the journal's
sync thread fdatasyncs, and the leader counts its own log only up to `durable_index`.
Truncation is fsynced at once; compaction writes a new file and renames it. The commit index is
stored at most once a second (on the sync thread) and never beyond what is durable here; it is
clamped on load.

On open, a torn or corrupt tail (what a crash leaves of an unfinished write) is cut at the last
good record with one WARNING line; a corrupt record followed by intact ones raises
JournalCorruptError (`mqctl serve` exits 4): the journal is never read past damage silently.

A storage failure (disk full, read-only, I/O error, the file deleted) never raises out of `add`
or `sync`: the journal keeps its entries in memory, `sync` answers False (so nothing is
acknowledged), `error` says why in one line, and every later `sync` (and a probe once a second)
retries until the disk accepts writes again. Only `setCurrentTerm` raises (StorageError): a
term or vote that cannot be stored is not taken.

A journal file removed under the node (its data directory deleted) is written anew, meta file
first, once its directory exists again; a journal that no longer starts at index 1 (compacted)
needs the snapshot it continues, so it waits for one (`needs_snapshot`: the fork then writes a
snapshot, and compacting onto it writes the journal anew), never leaving a journal without the
snapshot before it.
"""

from __future__ import annotations

import bisect
import errno
import json
import logging
import os
import random
import struct
import threading
import time
import zlib
from array import array
from collections.abc import Callable, Iterator
from typing import Any

from pysyncobj.journal import Journal
from pysyncobj.journal import MemoryJournal as _PysyncobjMemoryJournal

from mqctl import malloc
from mqctl.errors import StoreError
from mqctl.raft.storage import File, Storage, StorageError

log = logging.getLogger("mqctl.raft.journal")

MAGIC = b"MQCTLWAL"
FORMAT_VERSION = 1
HEADER_SIZE = 48
META_FORMAT = "mqctl-raft-meta/1"
MAX_RECORD = 256 * 1024 * 1024
_LEN = struct.Struct("<I")
_REC = struct.Struct("<II")  # body length, crc32
_BODY = struct.Struct("<QQ")  # index, term
_PYSYNCOBJ_MAGIC = b"PYSYNCOBJ"
_TORN_MIN_ZEROS = 16  # an all-zero stretch this long in a sector: a write that never landed
_SECTOR = 512

Entry = tuple[bytes, int, int]


SLOW_SYNC = 0.1  # seconds: an fdatasync this long is logged (the election timeout is 0.15-0.35 s)
SLOW_SYNC_LOG_INTERVAL = 10.0
TRIM_AFTER_ENTRIES = 1000  # a compaction that drops this many entries gives free heap back to the OS


class _WaitingForSnapshot(OSError):
    """The removed journal is written anew only after a snapshot (DurableJournal.needs_snapshot)."""


class JournalCorruptError(StoreError):
    """The journal (or its meta file) is damaged where it cannot be a crash's torn tail, or was
    written by a newer format: the node must not start on it (exit 4, docs/codes.md)."""


def header() -> bytes:
    head = MAGIC + _LEN.pack(FORMAT_VERSION) + bytes(24) + _LEN.pack(0xFFFFFFFF)
    return head + _LEN.pack(zlib.crc32(head)) + bytes(4)


def encode_record(idx: int, term: int, command: bytes) -> bytes:
    body = _BODY.pack(idx, term) + command
    length = _LEN.pack(len(body))
    return length + _LEN.pack(zlib.crc32(body, zlib.crc32(length))) + body


def _parse_at(data: bytes | memoryview, off: int) -> tuple[int, int, bytes, int] | None:
    """The intact record at `off` as (index, term, command, end offset), or None."""
    n = len(data)
    if off + 8 > n:
        return None
    length, crc = _REC.unpack_from(data, off)
    if length < _BODY.size or length > MAX_RECORD or off + 8 + length > n:
        return None
    body = data[off + 8 : off + 8 + length]
    if zlib.crc32(body, zlib.crc32(data[off : off + 4])) != crc:
        return None
    idx, term = _BODY.unpack_from(body)
    return idx, term, bytes(body[_BODY.size :]), off + 8 + length


def _next_intact(data: bytes, start: int, prev: Entry | None) -> int | None:
    """The offset of the first intact record after `start` that could follow `prev`, or None."""
    n = len(data)
    for p in range(start + 1, n - 8 - _BODY.size + 1):
        length = _LEN.unpack_from(data, p)[0]
        if length < _BODY.size or length > n - p - 8:
            continue
        idx, term = _BODY.unpack_from(data, p + 8)
        if prev is not None and not (prev[1] < idx <= prev[1] + n and prev[2] <= term):
            continue
        if _parse_at(data, p) is not None:
            return p
    return None


def _looks_torn(data: bytes, start: int, end: int) -> bool:
    """A stretch of zeros (at least 16 bytes, within one 512-byte sector) in [start, end): a sector
    of a write that never reached the disk, as a power loss leaves when the disk wrote a later
    sector of the same unsynced write first (etcd's WAL makes the same call)."""
    pos = start
    while pos < end:
        stop = min(end, (pos // _SECTOR + 1) * _SECTOR)
        chunk = data[pos:stop]
        if len(chunk) >= _TORN_MIN_ZEROS and not chunk.strip(b"\0"):
            return True
        pos = stop
    return False


def _errno_name(exc: OSError) -> str:
    return errno.errorcode.get(exc.errno or 0, str(exc.errno))


def _read_pysyncobj_journal(path: str, data: bytes) -> list[Entry]:
    """Entries of a journal written by pysyncobj's FileJournal (the format before mqctl's)."""
    try:
        last = _LEN.unpack_from(data, 36)[0]
        off, entries = 40, []
        while off < last:
            size = _LEN.unpack_from(data, off)[0]
            if size < 16 or off + 8 + size > len(data):
                raise ValueError(f"record at offset {off} runs past the end")
            idx, term = _BODY.unpack_from(data, off + 4)
            entries.append((bytes(data[off + 20 : off + 4 + size]), idx, term))
            off += size + 8
        return entries
    except (struct.error, ValueError) as exc:
        raise JournalCorruptError(f"{path}: pysyncobj journal is corrupt ({exc}); cannot convert it") from exc


def _check_header(data: bytes, path: str) -> None:
    if len(data) < HEADER_SIZE or data[: len(MAGIC)] != MAGIC:
        raise JournalCorruptError(
            f"{path}: not an mqctl Raft journal (bad header); restore "
            "the data directory from a backup or move it away"
        )
    version = _LEN.unpack_from(data, len(MAGIC))[0]
    if zlib.crc32(data[:40]) != _LEN.unpack_from(data, 40)[0]:
        raise JournalCorruptError(f"{path}: the journal header is corrupt (checksum mismatch)")
    if version != FORMAT_VERSION:
        raise JournalCorruptError(
            f"{path}: journal format {version}, this mqctl reads format "
            f"{FORMAT_VERSION}; run a release that reads it"
        )


def read_entries(path: str) -> tuple[list[tuple[int, int, bytes]], str | None]:
    """Read only: the intact entries of a journal file as (index, term, command), and what follows them
    when something does (a torn tail `mqctl serve` would cut, or damage it would refuse); never writes,
    never converts. JournalCorruptError for a file that is no mqctl journal of this format."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise StoreError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if data.startswith(_PYSYNCOBJ_MAGIC):
        return [(i, t, c) for c, i, t in _read_pysyncobj_journal(path, data)], "pysyncobj's journal format"
    _check_header(data, path)
    out: list[tuple[int, int, bytes]] = []
    off, view = HEADER_SIZE, memoryview(data)
    while off < len(data):
        rec = _parse_at(view, off)
        if rec is None:
            return out, (
                f"{len(data) - off} bytes at offset {off} are no intact record (a torn tail or damage)"
            )
        out.append(rec[:3])
        off = rec[3]
    return out, None


class _Entries:
    """The journal's entries as pysyncobj reads them, `(command, index, term)`, kept as one buffer
    of commands and columns of integers: no Python object per entry. A fleet registering writes
    tens of thousands of entries that live until the next log compaction; as objects (a bytes and
    a tuple each) they were spread among the state's own small objects, and once compacted they
    left the allocator's pages a third empty for good."""

    __slots__ = ("_commands", "_ends", "_indexes", "_terms")

    def __init__(self) -> None:
        self._commands = bytearray()
        self._ends = array("q")  # where each entry's command ends in _commands
        self._indexes = array("q")
        self._terms = array("q")

    def append(self, entry: Entry) -> None:
        command, idx, term = entry
        self._commands += command
        self._ends.append(len(self._commands))
        self._indexes.append(idx)
        self._terms.append(term)

    def __len__(self) -> int:
        return len(self._indexes)

    def index(self, i: int) -> int:
        """The Raft index of entry `i` (negative counts from the end), without its command."""
        return self._indexes[i]

    def term(self, i: int) -> int:
        return self._terms[i]

    def _entry(self, i: int) -> Entry:
        if i < 0:
            i += len(self._indexes)
        start = self._ends[i - 1] if i > 0 else 0
        return bytes(self._commands[start : self._ends[i]]), self._indexes[i], self._terms[i]

    def __getitem__(self, item: int | slice) -> Any:
        if isinstance(item, slice):
            return [self._entry(i) for i in range(*item.indices(len(self._indexes)))]
        if not -len(self._indexes) <= item < len(self._indexes):
            raise IndexError("journal index out of range")
        return self._entry(item)

    def __iter__(self) -> Iterator[Entry]:
        return (self._entry(i) for i in range(len(self._indexes)))

    def same_first(self, other: _Entries, k: int) -> bool:
        """The first `k` entries of both are the same commands, indexes and terms: compared as
        buffers, without an object per entry."""
        if k <= 0:
            return True
        end = self._ends[k - 1]
        return (
            self._indexes[:k] == other._indexes[:k]
            and self._terms[:k] == other._terms[:k]
            and self._ends[:k] == other._ends[:k]
            and self._commands[:end] == other._commands[:end]
        )

    def keep_first(self, k: int) -> None:
        k = max(0, k)
        if k < len(self._indexes):
            del self._commands[self._ends[k - 1] if k > 0 else 0 :]
            del self._ends[k:], self._indexes[k:], self._terms[k:]

    def drop_first(self, k: int) -> None:
        k = min(max(0, k), len(self._indexes))
        if k:
            cut = self._ends[k - 1]
            del self._commands[:cut]
            self._ends = array("q", (end - cut for end in self._ends[k:]))
            del self._indexes[:k], self._terms[:k]


class DurableJournal(Journal):  # type: ignore[misc]
    """pysyncobj's Journal on mqctl's file format, with `sync` (see the module docstring)."""

    def __init__(self, path: str, storage: Storage | None = None) -> None:
        self.path = path
        self.meta_path = path + ".meta"
        self.storage = storage or Storage()
        self.error: str | None = None  # one line while storage fails, else None
        self._entries = _Entries()
        self._offsets = array("q")  # file offset of each entry's record
        self._end = HEADER_SIZE  # where the next record goes
        self._good = HEADER_SIZE  # the file's first _good bytes are right (maybe not synced)
        self._durable = HEADER_SIZE  # ... and its first _durable bytes are on stable storage
        self._trim = False  # the file may hold bytes past _good that must go
        self._term = 0
        self._voted: str | None = None
        self._commit = 1  # pysyncobj's commit index (a hint; stored clamped)
        self._stored_commit = 1
        self._meta_failed = False
        self._removed = False  # the file lost its name: nothing of it is on disk
        self._slow_logged = -SLOW_SYNC_LOG_INTERVAL  # when a slow fdatasync was last logged
        self._file: File
        # `sync_soon`: the fdatasync a leader does not wait for, on a thread of its own
        self._gen = 0  # bumped whenever the file or _durable goes back
        self._syncer: _Syncer | None = None
        self._meta_lock = threading.RLock()
        self._hint_error: OSError | None = None  # the sync thread's failure to store the hint
        self.on_durable: Callable[[], None] | None = None  # called on that thread after each sync
        self._load()

    # --- pysyncobj's Journal interface ------------------------------------------------------

    def add(self, command: bytes, idx: int, term: int) -> None:
        record = encode_record(idx, term, command)
        offset = self._end
        self._entries.append((command, idx, term))
        self._offsets.append(offset)
        self._end += len(record)
        if self.error is None and self._good == offset:
            try:
                self._file.pwrite(record, offset)
                self._good = self._end
            except OSError as exc:
                self._trim = True
                self._fail("writing to", exc)

    def clear(self) -> None:
        self._entries, self._offsets = _Entries(), array("q")
        self._cut(HEADER_SIZE)

    def deleteEntriesFrom(self, entryFrom: int) -> None:
        if entryFrom >= len(self._entries):
            return
        end = self._offsets[entryFrom]
        self._entries.keep_first(entryFrom)
        del self._offsets[entryFrom:]
        self._cut(end)

    def deleteEntriesTo(self, entryTo: int) -> None:
        """Log compaction (the snapshot covers the entries before `entryTo`): a new file with the
        rest, fsynced, renamed over the old one, directory fsynced. If that fails, the old file
        (a superset) stays in use."""
        if entryTo <= 0 and not self._removed:
            return
        self._entries.drop_first(entryTo)
        del self._offsets[: max(entryTo, 0)]
        try:
            if self._removed:  # the snapshot is back: the meta file first, then the journal
                self._write_meta(self._term, self._voted, self._stored_commit)
            self._rewrite()
        except OSError as exc:
            self._fail("compacting", exc)
            return
        if self._removed:
            self._recovered()
        if entryTo >= TRIM_AFTER_ENTRIES:
            # glibc keeps the pages of freed memory: hand them back, so that the node's RSS follows
            # what it holds after thousands of entries went (a fleet registering)
            malloc.trim()

    def __getitem__(self, item: Any) -> Any:
        return self._entries[item]

    def __len__(self) -> int:
        return len(self._entries)

    # The fork asks these on every tick and message (FORK.md, change 27): an entry's index and term
    # without copying its command out of the journal's buffer
    def entry_index(self, i: int) -> int:
        return self._entries.index(i)

    def entry_term(self, i: int) -> int:
        return self._entries.term(i)

    def index_term_columns(self) -> tuple[array[int], array[int]]:
        """Every entry's index and term, as two arrays (copies): what a comparison of two logs
        reads (the simulator's log matching check, mqctl/dsim/check.py) without their commands."""
        return self._entries._indexes[:], self._entries._terms[:]

    def same_first_entries(self, other: DurableJournal, k: int) -> bool:
        """The first `k` entries of this journal and `other` are the same bytes, indexes and terms."""
        return self._entries.same_first(other._entries, k)

    def _destroy(self) -> None:
        self.drain()
        if self.error is None:
            self.sync()
        self._file.close()

    def setRaftCommitIndex(self, raftCommitIndex: int) -> None:
        self._commit = raftCommitIndex

    def getRaftCommitIndex(self) -> int:
        return min(self._commit, self._entries.index(-1)) if len(self._entries) else self._commit

    def setCurrentTerm(self, term: int, votedForNodeId: str | None) -> None:
        """Durable before it returns; raises StorageError (and changes nothing) if it cannot be."""
        with self._meta_lock:  # the sync thread's commit hint never stores an older term or vote
            try:
                self._write_meta(term, votedForNodeId, self._stored_commit)
            except OSError as exc:
                self._meta_failed = True
                self._fail("storing the term and vote in", exc, self.meta_path)
                raise StorageError(exc.errno, f"cannot store term {term}: {exc.strerror or exc}") from exc
            self._term, self._voted = term, votedForNodeId

    def getCurrentTerm(self) -> int:
        return self._term

    def getVotedForNodeId(self) -> str | None:
        return self._voted

    def onOneSecondTimer(self) -> None:
        """Probe a failed storage (and whether the file was removed, also while idle); store the
        commit index hint (never beyond the durable log)."""
        if self.error is None and self._file.deleted():
            self._on_removed()
        failed, self._hint_error = self._hint_error, None
        if failed is not None:  # the sync thread could not store the last hint: said here
            self._fail("storing the commit index in", failed, self.meta_path)
        if self.error is not None and not self.sync():
            return
        hint = min(self._commit, self.durable_index())
        if hint != self._stored_commit:
            # stored on the sync thread: a slow disk never holds this thread (a leader's tick)
            self._sync_thread().request_hint(hint)

    def _store_hint(self, hint: int) -> None:
        """On the sync thread. A failure is left to this node's own thread, which says it (the next
        `onOneSecondTimer`) and writes the meta file again (`_meta_failed`)."""
        with self._meta_lock:
            try:
                self._write_meta(self._term, self._voted, hint)
            except OSError as exc:
                self._meta_failed = True
                self._hint_error = exc

    # --- durability ---------------------------------------------------------------------------

    def sync(self) -> bool:
        """Make every entry durable (one fdatasync for all of them). False, and nothing durable
        that was not before, when storage fails; the next call retries."""
        if self.error is None and self._durable == self._end and not self._trim:
            return True
        try:
            self._flush()
        except OSError as exc:
            return self._sync_failed(exc)
        return True

    def sync_soon(self) -> bool:
        """A leader's group commit without waiting: what was added is fdatasynced on a thread of its
        own (at most one fdatasync at a time; what was added meanwhile goes with the next), and
        `durable_index` moves when it is done. The leader keeps sending heartbeats through a slow
        disk and counts its own vote only up to `durable_index`, as etcd's leader writes its log in
        parallel with sending it. False when storage fails (the leader steps down); recovering
        from a failure is done by the blocking `sync`."""
        if self._syncer is not None and not self._collect(self._syncer):
            return False
        if (
            self.error is not None
            or self._removed
            or self._trim
            or self._meta_failed
            or self._good < self._end
        ):
            return self.sync()
        if self._durable < self._end:
            self._sync_thread().request_sync(self._file, self._end, self._gen)
        return True

    def drain(self) -> None:
        """Wait until the sync thread has done what it was asked (the commit hint included) and
        stop it; the next `sync_soon` or hint starts it again."""
        syncer, self._syncer = self._syncer, None
        if syncer is not None:
            syncer.stop()
            self._collect(syncer)

    def _collect(self, syncer: _Syncer) -> bool:
        """Take the sync thread's last result on this thread: durable up to where it synced,
        unless the file changed since it was asked (`_gen`). False when it failed."""
        done = syncer.take()
        if done is None or done[0] != self._gen:
            return True
        _, end, exc = done
        if exc is not None:
            return self._sync_failed(exc)
        self._durable = max(self._durable, end)
        return True

    def _sync_thread(self) -> _Syncer:
        if self._syncer is None:
            self._syncer = _Syncer(self)
        return self._syncer

    def _sync_failed(self, exc: OSError) -> bool:
        # After a failed fsync the kernel may have dropped the dirty pages: write again everything
        # that is not known to be durable.
        self._good = min(self._good, self._durable)
        self._trim = True
        self._gen += 1
        self._fail("syncing", exc)
        return False

    def durable_index(self) -> int:
        """The index of the last entry known to be on stable storage (0 if none)."""
        k = bisect.bisect_right(self._offsets, self._durable)
        while k > 0:
            end = self._offsets[k] if k < len(self._offsets) else self._end
            if end <= self._durable:
                return self._entries.index(k - 1)
            k -= 1
        return 0

    @property
    def healthy(self) -> bool:
        return self.error is None

    @property
    def needs_snapshot(self) -> bool:
        """The file was removed and the journal was compacted: it can be written anew only after
        a snapshot (the fork forces one; `deleteEntriesTo` then writes the journal)."""
        return self._removed and len(self._entries) > 0 and self._entries.index(0) > 1

    def _on_removed(self) -> None:
        """The journal file has no name any more (its data directory was deleted, most likely):
        nothing of it, nor of the meta file, is on disk now."""
        if not self._removed:
            self._removed = True
            self._meta_failed = True
            self._gen += 1
            self._good = self._durable = HEADER_SIZE
            self._trim = True
            self._fail_removed()

    def _flush(self) -> None:
        if self._removed or self._file.deleted():
            self._on_removed()
            directory = os.path.dirname(self.path) or "."
            if not os.path.isdir(directory):
                raise OSError(errno.ENOENT, "its directory does not exist", directory)
            if self.needs_snapshot:
                raise _WaitingForSnapshot(errno.ENOENT, "waiting for a snapshot", self.path)
            self._write_meta(self._term, self._voted, self._stored_commit)  # term and vote first
            self._rewrite()
        if self._trim:
            self._file.truncate(self._good)
        if self._good < self._end:
            k = bisect.bisect_left(self._offsets, self._good)
            data = b"".join(encode_record(idx, term, cmd) for cmd, idx, term in self._entries[k:])
            self._file.pwrite(data, self._good)
            self._good = self._end
        self._timed_sync(self._file)
        self._trim = False
        self._durable = self._end
        if self._meta_failed:
            self._write_meta(self._term, self._voted, self._stored_commit)
        self._recovered()

    def _timed_sync(self, file: File) -> None:
        started = time.monotonic()
        file.sync()
        took = time.monotonic() - started
        if took >= SLOW_SYNC and started - self._slow_logged >= SLOW_SYNC_LOG_INTERVAL:
            # etcd's "slow fdatasync": a write commits once two of three nodes' fdatasyncs are done
            self._slow_logged = started
            log.warning(
                "raft journal: fdatasync of %s took %.0f ms (a disk this slow slows writes; give "
                "the data directory a disk of its own)",
                self.path,
                took * 1000,
            )

    def _recovered(self) -> None:
        if self._removed:
            log.info("raft journal %s: written anew after it was removed; every entry is durable", self.path)
            self._removed = False
            self.error = None
        if self.error is not None:
            log.info("raft journal %s: storage works again; every entry is durable", self.path)
            self.error = None

    def _cut(self, end: int) -> None:
        """Truncate the log to `end` bytes, fsynced at once."""
        self._gen += 1
        self._end = end
        self._good = min(self._good, end)
        self._durable = min(self._durable, end)
        try:
            self._file.truncate(self._good)
            self._file.sync()
        except OSError as exc:
            self._trim = True
            self._fail("truncating", exc)
            return
        self._trim = False
        self._durable = self._good

    def _rewrite(self) -> None:
        data = bytearray(header())
        offsets = []
        for cmd, idx, term in self._entries:
            offsets.append(len(data))
            data += encode_record(idx, term, cmd)
        tmp = self.path + ".compact"
        f = self.storage.open(tmp, create=True, truncate=True)
        try:
            f.pwrite(bytes(data), 0)
            f.sync()
            self.storage.rename(tmp, self.path)
            self.storage.fsync_dir(os.path.dirname(self.path))
        except OSError:
            f.close()
            self.storage.remove(tmp)
            raise
        old, self._file = self._file, f
        self._gen += 1
        old.close()
        self._offsets = array("q", offsets)
        self._end = self._good = self._durable = len(data)
        self._trim = False

    def _fail(self, what: str, exc: OSError, path: str | None = None) -> None:
        if not self._removed and self._file_removed():
            self._on_removed()  # what failed is a consequence: say the cause
        if self._removed and (
            isinstance(exc, _WaitingForSnapshot) or not os.path.isdir(os.path.dirname(self.path) or ".")
        ):
            self._fail_removed()
            return
        text = (
            f"{what} {path or self.path} failed: {exc.strerror or exc} ({_errno_name(exc)}); "
            "this node acknowledges no Raft entry and takes no term until storage works again"
        )
        if self.error is None:
            log.warning("raft journal: %s (retried every second)", text)
        self.error = text

    def _file_removed(self) -> bool:
        try:
            return self._file.deleted()
        except (OSError, AttributeError):  # not open (yet, or any more)
            return False

    def _fail_removed(self) -> None:
        directory = os.path.dirname(self.path) or "."
        text = (
            f"{self.path} was removed under this node (was {directory} deleted?); this node "
            f"acknowledges no Raft entry and takes no term until {directory} exists again, "
            "then writes its Raft state there anew"
        )
        if self.error != text:
            log.warning("raft journal: %s (retried every second)", text)
            self.error = text

    # --- meta file ----------------------------------------------------------------------------

    def _write_meta(self, term: int, voted: str | None, commit: int) -> None:
        doc = {"format": META_FORMAT, "term": term, "votedFor": voted, "commitIndex": commit}
        with self._meta_lock:
            self.storage.write_atomic(self.meta_path, json.dumps(doc, sort_keys=True).encode("utf-8"))
            self._stored_commit = commit
            self._meta_failed = False

    def _parse_meta(self, raw: bytes | None) -> tuple[int, str | None, int]:
        if raw is None:
            return 0, None, 1
        try:
            doc = json.loads(raw.decode("utf-8"))
            if not isinstance(doc, dict) or doc.get("format") != META_FORMAT:
                raise ValueError(f"format is not {META_FORMAT}")
            voted = doc.get("votedFor")
            return int(doc["term"]), (None if voted is None else str(voted)), int(doc["commitIndex"])
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
            raise JournalCorruptError(
                f"{self.meta_path}: Raft term/vote file is corrupt ({exc}); "
                "restore the data directory from a backup or remove this node "
                "from the group and add it back empty"
            ) from exc

    # --- opening ------------------------------------------------------------------------------

    def _load(self) -> None:
        meta_raw = self.storage.read(self.meta_path)
        data = self.storage.read(self.path)
        if data is not None and data.startswith(_PYSYNCOBJ_MAGIC):
            self._convert(data, meta_raw)
            meta_raw = self.storage.read(self.meta_path)
            data = self.storage.read(self.path)
        term, voted, commit = self._parse_meta(meta_raw)
        if data is None:
            self.storage.write_atomic(self.path, header())
            data = header()
        _check_header(data, self.path)
        end = self._scan(data)
        self._file = self.storage.open(self.path)
        if end < len(data):
            self._file.truncate(end)
            self._file.sync()
        self._end = self._good = self._durable = end
        self._term, self._voted = term, voted
        self._stored_commit = commit
        self._commit = min(commit, self._entries.index(-1)) if len(self._entries) else commit

    def _scan(self, data: bytes) -> int:
        """Read every record; return where the good ones end. Raises on damage in the middle."""
        off = HEADER_SIZE
        view = memoryview(data)
        while off < len(data):
            rec = _parse_at(view, off)
            if rec is None:
                break
            idx, term, cmd, end = rec
            if len(self._entries):
                prev = self._entries[-1]
                if idx != prev[1] + 1 or term < prev[2]:
                    raise JournalCorruptError(
                        f"{self.path}: entry at offset {off} has index {idx} term {term} after index "
                        f"{prev[1]} term {prev[2]}; the journal is corrupt (restore the data directory "
                        "from a backup, or remove this node from the group and add it back empty)"
                    )
            self._entries.append((cmd, idx, term))
            self._offsets.append(off)
            off = end
        if off >= len(data):
            return off
        last = self._entries[-1] if len(self._entries) else None
        following = _next_intact(data, off, last)
        if following is not None and not _looks_torn(data, off, following):
            after = f"after index {last[1]}" if last else "before the first entry"
            raise JournalCorruptError(
                f"{self.path}: corrupt record at offset {off} ({after}) with intact records after it "
                f"(from offset {following}); refusing to skip them. Restore the data directory from a "
                "backup, or remove this node from the group and add it back empty"
            )
        where = f"index {last[1]}" if last else "the header"
        dropped = f"; it held intact records from offset {following}" if following is not None else ""
        log.warning(
            "raft journal %s: cut a torn or corrupt tail of %d bytes at offset %d after %s "
            "(a write a crash interrupted before it was synced%s)",
            self.path,
            len(data) - off,
            off,
            where,
            dropped,
        )
        return off

    def _convert(self, data: bytes, meta_raw: bytes | None) -> None:
        """A journal of pysyncobj's FileJournal (mqctl before the durable journal): rewrite it in
        this format, keeping term, vote and commit index."""
        from pysyncobj import pickle as pysyncobj_pickle

        entries = _read_pysyncobj_journal(self.path, data)
        try:
            self._parse_meta(meta_raw)  # already converted (a crash between the two steps)?
        except JournalCorruptError:
            try:
                old = pysyncobj_pickle.loads(meta_raw) if meta_raw else {}
            except Exception:  # pysyncobj ignored an unreadable meta file too
                old = {}
            self._write_meta(
                int(old.get("currentTerm", 0)), old.get("votedForNodeId"), int(old.get("raftCommitIndex", 1))
            )
        blob = bytearray(header())
        for cmd, idx, term in entries:
            blob += encode_record(idx, term, cmd)
        self.storage.write_atomic(self.path, bytes(blob))
        log.info(
            "raft journal %s: converted pysyncobj's journal (%d entries) to mqctl's format",
            self.path,
            len(entries),
        )


class _Syncer:
    """The journal's sync thread (`DurableJournal.sync_soon`, the commit hint): what a node's own
    thread asks for is done one at a time, the latest ask of each kind; the journal takes a sync's
    result on its own thread, where it checks that the file is still the one asked for (`_gen`)."""

    def __init__(self, journal: DurableJournal) -> None:
        self._journal = journal
        self._cond = threading.Condition()
        self._sync: tuple[File, int, int] | None = None  # (file, end offset, generation)
        self._hint: int | None = None
        self._done: tuple[int, int, OSError | None] | None = None
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="raft-journal-sync", daemon=True)
        self._thread.start()

    def request_sync(self, file: File, end: int, gen: int) -> None:
        with self._cond:
            self._sync = (file, end, gen)
            self._cond.notify()

    def request_hint(self, hint: int) -> None:
        with self._cond:
            self._hint = hint
            self._cond.notify()

    def take(self) -> tuple[int, int, OSError | None] | None:
        """(generation, end offset, error) of the last sync done, once."""
        with self._cond:
            done, self._done = self._done, None
            return done

    def stop(self) -> None:
        """Stop once what was asked is done, and wait for that."""
        with self._cond:
            self._stopped = True
            self._cond.notify()
        self._thread.join()

    def _run(self) -> None:
        journal = self._journal
        while True:
            with self._cond:
                while self._sync is None and self._hint is None and not self._stopped:
                    self._cond.wait()
                if self._sync is None and self._hint is None:
                    return
                sync, hint, self._sync, self._hint = self._sync, self._hint, None, None
            if sync is not None:
                file, end, gen = sync
                error: OSError | None = None
                try:
                    journal._timed_sync(file)
                except OSError as exc:
                    error = exc
                with self._cond:
                    kept = self._done  # a failure not taken yet stays: later syncs do not cover it
                    if kept is None or kept[2] is None or kept[0] != gen:
                        self._done = (gen, end, error)
                if journal.on_durable is not None:
                    try:
                        journal.on_durable()
                    except OSError:  # a wake-up pipe already full wakes the node all the same
                        pass
            if hint is not None:
                journal._store_hint(hint)


class VolatileJournal(_PysyncobjMemoryJournal):  # type: ignore[misc]
    """pysyncobj's in-memory journal (a node without a data directory), with `sync`."""

    error: str | None = None
    healthy = True
    on_durable: Callable[[], None] | None = None

    def sync(self) -> bool:
        return True

    def sync_soon(self) -> bool:
        return True

    def durable_index(self) -> int:
        return int(self[-1][1]) if len(self) else 0

    def entry_index(self, i: int) -> int:
        return int(self[i][1])

    def entry_term(self, i: int) -> int:
        return int(self[i][2])


class JournalFactory:
    """`conf.journalFactory` for the fork: builds the journal and keeps it for the node."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self.journal: DurableJournal | VolatileJournal | None = None

    def __call__(self, path: str | None) -> DurableJournal | VolatileJournal:
        if self.storage.crash_sim or self.storage.fault_inject:
            log.warning(
                "raft journal: test-only mode (MQCTL_CRASH_SIM / MQCTL_FAULT_INJECT): %s; "
                "never use it in production",
                self.storage.describe(),
            )
        self.journal = DurableJournal(path, self.storage) if path else VolatileJournal()
        return self.journal


# --- test helpers ---------------------------------------------------------------------------------


def tear_tail(path: str, rng: random.Random) -> str:
    """Test helper for the crash simulator: after a simulated power loss, append what a torn last
    write leaves: a proper prefix of a plausible next record, or random garbage. Returns which."""
    with open(path, "rb") as fh:
        data = fh.read()
    last_idx, last_term, off = 0, 0, HEADER_SIZE
    while (rec := _parse_at(data, off)) is not None:
        last_idx, last_term, _, off = rec
    if rng.random() < 0.5:
        record = encode_record(last_idx + 1, last_term, rng.randbytes(rng.randint(8, 400)))
        tail, kind = record[: rng.randint(1, len(record) - 1)], "prefix"
    else:
        tail, kind = rng.randbytes(rng.randint(1, 600)), "garbage"
    with open(path, "ab") as fh:
        fh.write(tail)
    return kind
