"""The commitlog (reference section 10): v1/v2 records, IPv4/IPv6 hosts, blank end-of-file marker,
20-digit file names, any file size.

Layers, fastest first:

* `decode_record(buf, pos)`: pure; one record, or RecordError with the reason.
* `scan_buffer(buf, base_offset, start)`: pure; walks records from a known boundary with the one record
  walker (`mqctl.store.walker`), checks each one's structure, PHYSICALOFFSET field and (optionally)
  BODYCRC, and says why it stopped. `find_boundary`: the resynchronisation the walker uses.
* `CommitLog(dir)`: the files of a store, `scan()` for the max offset (the end of the last valid
  record, as RocketMQ's recovery finds it), `iter_records()`, `boundaries_around()`. Never writes.
* `CommitLogWriter(dir, file_size)`: appends records and rolls over with the blank marker exactly as
  RocketMQ does (`msgLen + 8 > remaining`).
"""

from __future__ import annotations

import ipaddress
import mmap
import os
import re
import struct
import zlib
from collections.abc import Iterator, Mapping
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqctl.errors import StoreError
from mqctl.store._util import store_error

if TYPE_CHECKING:
    from mqctl.store.walker import Chain

MAGIC_V1 = 0xDAA320A7
MAGIC_V2 = 0xDAA320AB
BLANK_MAGIC = 0xCBD43194
BORNHOST_V6_FLAG = 0x10
STOREHOST_V6_FLAG = 0x20
DEFAULT_FILE_SIZE = 1073741824
MIN_RECORD_SIZE = 91  # v1, IPv4 hosts, empty body, topic and properties
MAX_RECORD_SIZE = 1 << 30  # sanity bound for TOTALSIZE
PIECE_BYTES = 64 << 20  # a worker's share of a parallel scan (`scan_chains`)
COMMITLOG_DIR = "commitlog"
_MASK = 0x7FFFFFFF
_NAME_RE = re.compile(r"^[0-9]{20}$")
_ITER_CHUNK = 4 << 20  # iter_records walks this much ahead of what it yields

_I = struct.Struct(">i").unpack_from
_II = struct.Struct(">iI").unpack_from
_Q = struct.Struct(">q").unpack_from
_H = struct.Struct(">H").unpack_from
_HEAD = struct.Struct(">iIiiiqqiq")  # TOTALSIZE .. BORNTIMESTAMP (48 bytes)
_MAGIC_V1_B = struct.pack(">I", MAGIC_V1)
_MAGIC_V2_B = struct.pack(">I", MAGIC_V2)
_crc32 = zlib.crc32

Buffer = bytes | bytearray | memoryview | mmap.mmap

__all__ = [
    "BLANK_MAGIC",
    "COMMITLOG_DIR",
    "DEFAULT_FILE_SIZE",
    "MAGIC_V1",
    "MAGIC_V2",
    "BufferScan",
    "CommitLog",
    "CommitLogWriter",
    "LogFile",
    "Message",
    "Record",
    "RecordError",
    "ScanResult",
    "decode_properties",
    "decode_record",
    "encode_properties",
    "encode_record",
    "file_name",
    "find_boundary",
    "scan_buffer",
    "scan_chains",
]


def file_name(offset: int) -> str:
    """UtilAll.offset2FileName: 20-digit zero-padded decimal."""
    return f"{offset:020d}"


# --------------------------------------------------------------------------- encoding


@dataclass(frozen=True)
class Message:
    """What a producer and the broker put into one record (the writer fills PHYSICALOFFSET and CRC)."""

    topic: str
    body: bytes = b""
    properties: Mapping[str, str] | bytes = b""
    queue_id: int = 0
    flag: int = 0
    queue_offset: int = 0
    sysflag: int = 0
    born_timestamp: int = 0
    born_host: tuple[str, int] = ("127.0.0.1", 0)
    store_timestamp: int = 0
    store_host: tuple[str, int] = ("127.0.0.1", 10911)
    reconsume_times: int = 0
    prepared_tx_offset: int = 0
    version: int | None = None  # 1 or 2; None: v2 when the topic is longer than 127 bytes


def encode_properties(props: Mapping[str, str]) -> bytes:
    """MessageDecoder.messageProperties2String: `key\\x01value\\x02` per entry."""
    return "".join(f"{k}\x01{v}\x02" for k, v in props.items()).encode("utf-8")


def decode_properties(data: bytes) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in data.decode("utf-8", errors="replace").split("\x02"):
        if not item:
            continue
        k, _, v = item.partition("\x01")
        out[k] = v
    return out


def _host_bytes(host: tuple[str, int]) -> tuple[bytes, bool]:
    ip = ipaddress.ip_address(host[0])
    return ip.packed + struct.pack(">i", host[1]), ip.version == 6


def encode_record(msg: Message, physical_offset: int) -> bytes:
    """One record's bytes at `physical_offset`: BODYCRC = crc32(body) & 0x7FFFFFFF, hosts IPv4 or IPv6
    (the SYSFLAG bits 0x10 / 0x20 follow the addresses), v1 or v2 by topic length."""
    topic = msg.topic.encode("utf-8")
    props = msg.properties if isinstance(msg.properties, bytes) else encode_properties(msg.properties)
    version = msg.version or (2 if len(topic) > 127 else 1)
    if version == 1 and len(topic) > 127:
        raise ValueError(f"topic of {len(topic)} bytes needs a v2 record")
    if len(topic) > 0xFFFF or len(props) > 0xFFFF:
        raise ValueError("topic or properties longer than 65535 bytes")
    born, born6 = _host_bytes(msg.born_host)
    store, store6 = _host_bytes(msg.store_host)
    sysflag = msg.sysflag & ~(BORNHOST_V6_FLAG | STOREHOST_V6_FLAG)
    sysflag |= (BORNHOST_V6_FLAG if born6 else 0) | (STOREHOST_V6_FLAG if store6 else 0)
    topic_len = struct.pack(">b", len(topic)) if version == 1 else struct.pack(">h", len(topic))
    tail = b"".join(
        (
            struct.pack(">q", msg.store_timestamp),
            store,
            struct.pack(">iqi", msg.reconsume_times, msg.prepared_tx_offset, len(msg.body)),
            msg.body,
            topic_len,
            topic,
            struct.pack(">h", len(props)),
            props,
        )
    )
    total = 48 + len(born) + len(tail)
    head = _HEAD.pack(
        total,
        MAGIC_V1 if version == 1 else MAGIC_V2,
        _crc32(msg.body) & _MASK,
        msg.queue_id,
        msg.flag,
        msg.queue_offset,
        physical_offset,
        sysflag,
        msg.born_timestamp,
    )
    return head + born + tail


# --------------------------------------------------------------------------- decoding


class RecordError(Exception):
    """A defect at absolute commitlog `offset` (pure layer; CommitLog turns it into a StoreError)."""

    def __init__(self, offset: int, reason: str) -> None:
        super().__init__(f"offset {offset}: {reason}")
        self.offset = offset
        self.reason = reason


@dataclass(slots=True)
class Record:
    offset: int  # absolute position (where the record was found)
    size: int
    version: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    physical_offset: int
    sysflag: int
    born_timestamp: int
    born_host: tuple[str, int]
    store_timestamp: int
    store_host: tuple[str, int]
    reconsume_times: int
    prepared_tx_offset: int
    body: bytes
    topic: str
    properties: bytes

    @property
    def end(self) -> int:
        return self.offset + self.size

    def crc_ok(self) -> bool:
        return (_crc32(self.body) & _MASK) == self.body_crc

    def properties_dict(self) -> dict[str, str]:
        return decode_properties(self.properties)

    def to_dict(self, *, with_body: bool = False) -> dict[str, Any]:
        d: dict[str, Any] = {
            "offset": self.offset,
            "size": self.size,
            "version": self.version,
            "bodyCrc": self.body_crc,
            "queueId": self.queue_id,
            "flag": self.flag,
            "queueOffset": self.queue_offset,
            "physicalOffset": self.physical_offset,
            "sysFlag": self.sysflag,
            "bornTimestamp": self.born_timestamp,
            "bornHost": _fmt_host(self.born_host),
            "storeTimestamp": self.store_timestamp,
            "storeHost": _fmt_host(self.store_host),
            "reconsumeTimes": self.reconsume_times,
            "preparedTransactionOffset": self.prepared_tx_offset,
            "bodyLength": len(self.body),
            "topic": self.topic,
            "properties": self.properties_dict(),
        }
        if with_body:
            d["body"] = self.body.decode("utf-8", errors="replace")
        return d


def _fmt_host(h: tuple[str, int]) -> str:
    return f"[{h[0]}]:{h[1]}" if ":" in h[0] else f"{h[0]}:{h[1]}"


def ip_text(packed: bytes) -> str:
    """4 or 16 packed bytes as text. Not socket.inet_ntop: importing pysyncobj replaces it with a
    Windows-only version on every OS (pysyncobj/win_inet_pton.py), which then raises."""
    if len(packed) == 4:
        return str(ipaddress.IPv4Address(packed))
    return str(ipaddress.IPv6Address(packed))


def _host(buf: Buffer, pos: int, v6: bool) -> tuple[str, int]:
    if v6:
        return ip_text(bytes(buf[pos : pos + 16])), _I(buf, pos + 16)[0]
    return ip_text(bytes(buf[pos : pos + 4])), _I(buf, pos + 4)[0]


def _layout(buf: Buffer, pos: int, total: int, magic: int, base: int) -> tuple[int, int, int, int]:
    """Check a record's structure; returns (body_pos, body_len, topic_pos, props_pos). RecordError."""
    end = pos + total
    sysflag = _I(buf, pos + 36)[0]
    bpos = (
        pos
        + 48
        + (20 if sysflag & BORNHOST_V6_FLAG else 8)
        + 8
        + (20 if sysflag & STOREHOST_V6_FLAG else 8)
        + 12
    )
    if bpos + 4 > end:
        raise RecordError(base + pos, f"TOTALSIZE {total} too small for the record's header")
    blen = _I(buf, bpos)[0]
    if blen < 0 or bpos + 4 + blen > end:
        raise RecordError(base + pos, f"body length {blen} does not fit in TOTALSIZE {total}")
    tpos = bpos + 4 + blen
    if magic == MAGIC_V1:
        if tpos + 1 > end:
            raise RecordError(base + pos, f"TOTALSIZE {total} ends before the topic length")
        tlen = buf[tpos]
        if tlen > 127:
            raise RecordError(base + pos, f"negative v1 topic length {tlen - 256}")
        ppos = tpos + 1 + tlen
    else:
        if tpos + 2 > end:
            raise RecordError(base + pos, f"TOTALSIZE {total} ends before the topic length")
        ppos = tpos + 2 + _H(buf, tpos)[0]
    if ppos + 2 > end:
        raise RecordError(base + pos, f"TOTALSIZE {total} ends before the properties length")
    plen = _H(buf, ppos)[0]
    if ppos + 2 + plen != end:
        raise RecordError(
            base + pos, f"fields add up to {ppos + 2 + plen - pos} bytes, TOTALSIZE says {total}"
        )
    return bpos, blen, tpos, ppos


def _check_head(buf: Buffer, pos: int, n: int, base: int) -> tuple[int, int]:
    """(total, magic) of a message record at pos, or RecordError (blank / zero are not handled here)."""
    total, magic = _II(buf, pos)
    if magic != MAGIC_V1 and magic != MAGIC_V2:
        raise RecordError(base + pos, f"bad MAGICCODE 0x{magic:08X}")
    if total < MIN_RECORD_SIZE or total > MAX_RECORD_SIZE:
        raise RecordError(base + pos, f"bad TOTALSIZE {total}")
    if pos + total > n:
        raise RecordError(base + pos, f"torn record: TOTALSIZE {total} but only {n - pos} bytes remain")
    phys = _Q(buf, pos + 28)[0]
    if phys != base + pos:
        raise RecordError(base + pos, f"PHYSICALOFFSET field says {phys}, record is at {base + pos}")
    return total, magic


def decode_record(buf: Buffer, pos: int, base_offset: int = 0, *, check_crc: bool = True) -> Record:
    """Decode the record at buf[pos:] (absolute offset base_offset + pos). Pure; RecordError."""
    n = len(buf)
    if pos + 8 > n:
        raise RecordError(base_offset + pos, f"torn record: only {n - pos} bytes remain")
    total, magic = _check_head(buf, pos, n, base_offset)
    bpos, blen, tpos, ppos = _layout(buf, pos, total, magic, base_offset)
    (_, _, crc, queue_id, flag, qoff, phys, sysflag, born_ts) = _HEAD.unpack_from(buf, pos)
    body = bytes(buf[bpos + 4 : bpos + 4 + blen])
    if check_crc and (_crc32(body) & _MASK) != crc:
        raise RecordError(
            base_offset + pos, f"BODYCRC mismatch: field says {crc}, body gives {_crc32(body) & _MASK}"
        )
    hpos = pos + 48
    born6 = bool(sysflag & BORNHOST_V6_FLAG)
    born = _host(buf, hpos, born6)
    hpos += 20 if born6 else 8
    store_ts = _Q(buf, hpos)[0]
    hpos += 8
    store6 = bool(sysflag & STOREHOST_V6_FLAG)
    store = _host(buf, hpos, store6)
    hpos += 20 if store6 else 8
    reconsume = _I(buf, hpos)[0]
    prepared = _Q(buf, hpos + 4)[0]
    topic = bytes(buf[tpos + 1 : ppos]) if magic == MAGIC_V1 else bytes(buf[tpos + 2 : ppos])
    props = bytes(buf[ppos + 2 : pos + total])
    return Record(
        base_offset + pos,
        total,
        1 if magic == MAGIC_V1 else 2,
        crc,
        queue_id,
        flag,
        qoff,
        phys,
        sysflag,
        born_ts,
        born,
        store_ts,
        store,
        reconsume,
        prepared,
        body,
        topic.decode("utf-8", errors="replace"),
        props,
    )


@dataclass
class BufferScan:
    """Where `scan_buffer` stopped: `end` is the buffer position after the last valid record."""

    end: int
    records: int
    stop: str  # "blank" | "zero" | "eof" | "corrupt"
    error: RecordError | None = None
    last_record: int = -1  # buffer position of the last valid record, -1 if none
    chain: Chain | None = None  # the valid records (with keep_chain, from position 0)


def scan_buffer(
    buf: Buffer,
    base_offset: int,
    start: int = 0,
    *,
    check_crc: bool = True,
    keep_chain: bool = False,
    known: Chain | None = None,
) -> BufferScan:
    """Walk records from buf[start] (a record boundary) until the blank marker, TOTALSIZE 0, the end of
    the buffer or the first invalid record: structure and PHYSICALOFFSET always, BODYCRC when check_crc.
    Pure; never raises for bad data, the reason is in the result. keep_chain (start 0): the valid
    records' positions, for a later walk of the same file to reuse; known (start 0): such a chain,
    found earlier (`scan_chains`): the walk goes on from its end."""
    import numpy as np  # lazy: numpy

    from mqctl.store.walker import Chain, parse_byte_range  # lazy: numpy

    head = None
    if known is not None and start == 0 and (known.crc_checked or not check_crc):
        head, start = known.positions, known.end
    pr = parse_byte_range(
        buf,
        base_offset,
        start,
        len(buf),
        head_owned=True,
        check_crc=check_crc,
        fields=False,
        stop_at_damage=True,
    )
    pos = pr.position if head is None else np.concatenate([head, pr.position])
    count = pos.size
    err: RecordError | None
    if pr.problems:  # a record whose layout or BODYCRC is bad: the valid data ends before it
        bad = pr.problems[0]
        count = int(pos.searchsorted(bad.position))
        end, stop, err = bad.position, "corrupt", RecordError(bad.offset, bad.reason)
    else:
        end = pr.walk_end
        stop, err = _stop_reason(buf, base_offset, end)
    last = int(pos[count - 1]) if count else -1
    chain = Chain(pos[:count], end, check_crc) if keep_chain and (start == 0 or head is not None) else None
    return BufferScan(end, count, stop, err, last, chain)


def _scan_piece(job: tuple[str, int, int, int, bool]) -> tuple[Any, int, int]:
    """A worker's share of `scan_chains`: the valid records whose first byte lies in [start, end) of one
    file (resynchronised on the first record boundary unless start is 0), where the walk stopped, and
    the position of the first record with a bad layout or BODYCRC (-1: none)."""
    from mqctl.store.walker import parse_byte_range  # lazy: numpy

    path, file_start, start, end, check_crc = job
    with open(path, "rb") as fh:
        mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        pr = parse_byte_range(
            mm,
            file_start,
            start,
            end,
            head_owned=start == 0,
            check_crc=check_crc,
            fields=False,
            stop_at_damage=True,
        )
        return pr.position, pr.walk_end, pr.problems[0].position if pr.problems else -1
    finally:
        mm.close()


def scan_chains(
    files: list[LogFile], *, check_crc: bool = True, workers: int = 2, piece: int = PIECE_BYTES
) -> dict[str, Chain]:
    """The valid records of each file from its start, found by `workers` processes walking pieces of
    `piece` bytes at once (`scan_buffer(known=...)` then goes on where they stop, so the result is the
    sequential walk's): a piece's records count only if the first of them is where the previous piece's
    walk ended; the chain of a file stops at its first damage or mismatch."""
    import multiprocessing  # lazy: start-up

    import numpy as np  # lazy: numpy

    from mqctl.store.walker import Chain  # lazy: numpy

    jobs = [
        (str(lf.path), lf.start, s, min(s + piece, lf.size), check_crc)
        for lf in files
        for s in range(0, lf.size, piece)
    ]
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as ex:
        results = list(ex.map(_scan_piece, jobs))
    nxt: dict[str, int] = {}  # per file: where its next record must start
    stopped: set[str] = set()
    parts: dict[str, list[Any]] = {}
    for (path, _, s, e, _), (pos, walk_end, bad) in zip(jobs, results, strict=True):
        at = nxt.setdefault(path, 0)
        found = parts.setdefault(path, [])
        if path in stopped or at >= e:  # the chain ended, or this piece lies inside a record
            continue
        if s > 0 and (not pos.size or int(pos[0]) != at):
            stopped.add(path)  # the pieces disagree: the sequential walk goes on at `at`
            continue
        found.append(pos if bad < 0 else pos[pos < bad])
        nxt[path] = walk_end if bad < 0 else bad
        if bad >= 0 or walk_end < e:  # damage, zero bytes, the blank marker
            stopped.add(path)
    return {
        path: Chain(np.concatenate(ps) if ps else np.zeros(0, dtype=np.int64), nxt[path], check_crc)
        for path, ps in parts.items()
    }


def _stop_reason(buf: Buffer, base_offset: int, pos: int) -> tuple[str, RecordError | None]:
    """Why a walk that stopped at pos (not a record) stopped: "blank", "zero", "eof" or "corrupt"."""
    n = len(buf)
    if pos + 8 <= n:
        total, magic = _II(buf, pos)
        if magic == BLANK_MAGIC:
            return "blank", None
        if total == 0 and magic == 0:
            return "zero", None
        try:
            decode_record(buf, pos, base_offset, check_crc=False)
        except RecordError as exc:
            return "corrupt", exc
        return "corrupt", RecordError(base_offset + pos, "not a record boundary")  # pragma: no cover
    if pos < n:
        if any(bytes(buf[pos:n])):
            return "corrupt", RecordError(base_offset + pos, f"torn record: only {n - pos} bytes remain")
        return "zero", None
    return "eof", None


def find_boundary(
    buf: Buffer, base_offset: int, start: int, *, check_crc: bool = False, stop: int | None = None
) -> int:
    """First position >= start where a whole valid record begins (MAGICCODE, TOTALSIZE inside buf,
    PHYSICALOFFSET equal to the position, fields that add up; BODYCRC too with check_crc), -1 if none
    (before `stop` when given).
    The MAGICCODEs are found with the buffer's C `find`; the record walker (mqctl.store.walker)
    resynchronises with it."""
    finder = bytes(buf) if isinstance(buf, memoryview) else buf
    n = len(buf)
    q = start + 4
    e = n if stop is None else min(n, stop + 8)  # only records that start before `stop`
    i1 = finder.find(_MAGIC_V1_B, q, e)
    i2 = finder.find(_MAGIC_V2_B, q, e)
    while i1 >= 0 or i2 >= 0:
        if i2 < 0 or 0 <= i1 < i2:
            i = i1
            i1 = finder.find(_MAGIC_V1_B, i1 + 1, e)
        else:
            i = i2
            i2 = finder.find(_MAGIC_V2_B, i2 + 1, e)
        p = i - 4
        if p + 36 > n:
            continue
        total = _I(buf, p)[0]
        if (
            total < MIN_RECORD_SIZE
            or total > MAX_RECORD_SIZE
            or p + total > n
            or _Q(buf, p + 28)[0] != base_offset + p
        ):
            continue  # cheap checks first: most MAGICCODE hits inside bodies end here
        try:
            decode_record(buf, p, base_offset, check_crc=check_crc)
            return p
        except RecordError:
            pass
    return -1


# --------------------------------------------------------------------------- files


@dataclass(frozen=True)
class LogFile:
    start: int
    path: Path
    size: int


@dataclass
class ScanResult:
    min_offset: int
    max_offset: int  # end of the last valid record (RocketMQ's recovered max phy offset)
    scanned_from: int
    bytes_scanned: int
    records: int
    stop: str  # "blank-eof" (the last file ends with the blank marker), "zero", "eof",
    # "corrupt"
    problems: list[str] = field(default_factory=list)
    last_record_offset: int = -1
    last_store_timestamp: int = 0
    bytes_beyond: int = 0  # bytes in later files that recovery would drop (files after the end)
    chains: dict[str, Chain] = field(default_factory=dict)  # file path -> its valid records (keep_chains)


def _open_map(lf: LogFile) -> mmap.mmap | None:
    if lf.size == 0:
        return None
    try:
        with open(lf.path, "rb") as fh:
            return mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as exc:
        raise store_error(lf.path, f"cannot read: {exc.strerror or exc}") from None


class CommitLog:
    """The commitlog files of a store. Reading only; every defect names the file and offset."""

    def __init__(self, directory: str | os.PathLike[str], file_size: int | None = None) -> None:
        self.directory = Path(directory)
        self.problems: list[str] = []
        if not self.directory.exists():
            raise store_error(self.directory, "no such directory")
        if not self.directory.is_dir():
            raise store_error(self.directory, "not a directory")
        files: list[LogFile] = []
        for entry in sorted(os.scandir(self.directory), key=lambda e: e.name):
            if not _NAME_RE.match(entry.name):
                self.problems.append(f"{entry.path}: ignored, not a 20-digit commitlog file name")
                continue
            if not entry.is_file():
                raise store_error(entry.path, "not a regular file")
            files.append(LogFile(int(entry.name), Path(entry.path), entry.stat().st_size))
        if files and files[-1].size == 0:
            # RocketMQ deletes an empty last file when it loads the commitlog (MappedFileQueue.doLoad:
            # `file.length() == 0 && i == files.size() - 1`): it is not part of the log
            empty = files.pop()
            if not files:
                raise store_error(
                    self.directory,
                    f"no commitlog files: only {empty.path.name}, an empty "
                    f"file (0 bytes) that RocketMQ deletes when it loads them",
                )
            self.problems.append(
                f"{empty.path}: empty file (0 bytes) at the end of the commitlog; RocketMQ "
                f"deletes it when it loads the commitlog"
            )
        if not files:
            raise store_error(self.directory, "empty directory: no commitlog files")
        fs = file_size if file_size is not None else files[0].size
        if fs <= 0:
            raise store_error(files[0].path, "empty file (0 bytes)", offset=0)
        self.file_size = fs
        for i, lf in enumerate(files):
            if lf.start % fs != 0 and i == 0:
                self.problems.append(f"{lf.path}: start offset is not a multiple of the file size {fs}")
            if i and lf.start != files[i - 1].start + fs:
                raise store_error(
                    lf.path,
                    f"expected the file after {files[i - 1].path.name} to start at "
                    f"{files[i - 1].start + fs} (file size {fs})",
                    offset=0,
                )
            if lf.size != fs:
                if i < len(files) - 1 or lf.size > fs:
                    raise store_error(
                        lf.path,
                        f"file is {lf.size} bytes, expected {fs} (truncated or wrong file size)",
                        offset=lf.size,
                    )
                self.problems.append(
                    f"{lf.path}: last file is {lf.size} bytes, shorter than the file size {fs}"
                )
        self.files = files

    @property
    def min_offset(self) -> int:
        return self.files[0].start

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)

    def file_for(self, offset: int) -> int:
        """Index of the file holding `offset` (the last file for its end), -1 if outside."""
        if offset < self.min_offset:
            return -1
        i = (offset - self.min_offset) // self.file_size
        if i >= len(self.files):
            return len(self.files) - 1 if offset == self.files[-1].start + self.files[-1].size else -1
        return i

    def scan(
        self,
        *,
        deep: bool = False,
        from_file: int | None = None,
        check_crc: bool = True,
        keep_chains: bool = False,
        workers: int = 1,
    ) -> ScanResult:
        """Find the max offset like RocketMQ's recovery: from the third-last file (or `from_file`; all
        files with deep=True), every record's structure, PHYSICALOFFSET and BODYCRC, stopping at the
        first invalid one. Later files after the end are counted in `bytes_beyond`. keep_chains: each
        scanned file's valid records in `chains`, so that a later walk need not find them again.
        workers > 1: the files are walked by that many processes first (`scan_chains`), same result."""
        nfiles = len(self.files)
        start_i = 0 if deep else (max(0, nfiles - 3) if from_file is None else from_file)
        res = ScanResult(
            self.min_offset,
            self.files[start_i].start,
            self.files[start_i].start,
            0,
            0,
            "eof",
            list(self.problems),
        )
        i = start_i
        known = {}
        if workers > 1 and sum(f.size for f in self.files[i:]) > PIECE_BYTES:  # else one piece
            known = scan_chains(self.files[i:], check_crc=check_crc, workers=workers, piece=PIECE_BYTES)
        while i < nfiles:
            lf = self.files[i]
            mm = _open_map(lf)
            if mm is None:
                res.max_offset = lf.start
                res.stop = "zero"
                break
            try:
                bs = scan_buffer(
                    mm,
                    lf.start,
                    0,
                    check_crc=check_crc,
                    keep_chain=keep_chains,
                    known=known.get(str(lf.path)),
                )
                if bs.chain is not None:
                    res.chains[str(lf.path)] = bs.chain
                res.bytes_scanned += bs.end
                res.records += bs.records
                if bs.last_record >= 0:
                    res.last_record_offset = lf.start + bs.last_record
                    res.last_store_timestamp = _store_ts(mm, bs.last_record)
                res.max_offset = lf.start + bs.end
                if bs.stop == "blank":
                    remaining = _I(mm, bs.end)[0]
                    if remaining != lf.size - bs.end:
                        res.problems.append(
                            f"{lf.path} offset {lf.start + bs.end}: blank marker says "
                            f"{remaining} bytes remain, the file has {lf.size - bs.end}"
                        )
                    res.bytes_scanned += 8
                    if i + 1 < nfiles:
                        i += 1
                        continue
                    # no next file: RocketMQ's recovery (CommitLog.recoverNormally/recoverAbnormally)
                    # gets size 0 for the marker (checkMessageAndReturnSize), finds no file to switch
                    # to and keeps processOffset at the marker: the end of the last message
                    res.stop = "blank-eof"
                    break
                if bs.stop == "eof":
                    if i + 1 < nfiles and lf.size == self.file_size:
                        i += 1
                        continue
                    break
                res.stop = bs.stop
                if bs.error is not None:
                    res.problems.append(
                        f"{lf.path} offset {bs.error.offset}: {bs.error.reason}; the valid data ends there"
                    )
                break
            finally:
                mm.close()
        later = [f for f in self.files[i + 1 :] if _has_data(f)]
        if later:
            res.bytes_beyond = sum(f.size for f in later)
            res.problems.append(
                f"{len(later)} file(s) after offset {res.max_offset} hold data that recovery "
                f"would drop, first {later[0].path}"
            )
        return res

    def iter_records(
        self, start: int | None = None, *, check_crc: bool = True, strict: bool = True
    ) -> Iterator[Record]:
        """Records from `start` (a record boundary; default the first), walked a few MiB at a time. With
        strict, a corrupt record raises StoreError naming the file and offset; otherwise iteration just
        ends there."""
        from mqctl.store.walker import parse_byte_range  # lazy: numpy

        pos_abs = self.min_offset if start is None else start
        i = self.file_for(pos_abs)
        if i < 0:
            raise StoreError(
                f"{self.directory}: offset {pos_abs} is outside the commitlog "
                f"[{self.min_offset}, {self.files[-1].start + self.files[-1].size})"
            )
        while i < len(self.files):
            lf = self.files[i]
            mm = _open_map(lf)
            if mm is None:
                return
            try:
                pos = pos_abs - lf.start
                while True:
                    chunk_end = min(pos + _ITER_CHUNK, lf.size)
                    pr = parse_byte_range(
                        mm,
                        lf.start,
                        pos,
                        chunk_end,
                        head_owned=True,
                        check_crc=check_crc,
                        fields=False,
                        stop_at_damage=True,
                    )
                    bad = pr.problems[0] if pr.problems else None
                    for p in pr.position.tolist():
                        if bad is not None and p >= bad.position:
                            break
                        yield decode_record(mm, p, lf.start, check_crc=False)
                    if bad is not None:
                        if strict:
                            raise store_error(lf.path, bad.reason, offset=bad.offset)
                        return
                    pos = pr.walk_end
                    if pos < chunk_end or pos >= lf.size:
                        break
                stop, err = _stop_reason(mm, lf.start, pos)
                if stop == "zero" and pos + 8 <= lf.size:
                    return
                if stop == "corrupt":
                    assert err is not None
                    if strict:
                        raise store_error(lf.path, err.reason, offset=err.offset)
                    return
                if stop != "blank" and (i + 1 >= len(self.files) or lf.size != self.file_size):
                    return
            finally:
                mm.close()
            i += 1
            pos_abs = self.files[i].start if i < len(self.files) else 0

    def boundaries_around(self, offset: int, max_offset: int) -> tuple[int | None, int | None]:
        """(b0, b1): the record boundaries at or before and after `offset` up to `max_offset`;
        b0 == offset when offset is a boundary. Scans only the file that holds `offset`."""
        i = self.file_for(offset)
        if i < 0:
            return None, None
        lf = self.files[i]
        before: int | None = lf.start
        after: int | None = None
        if offset > max_offset:
            return max_offset, None
        mm = _open_map(lf)
        if mm is None:
            return lf.start, None
        from mqctl.store.walker import parse_byte_range  # lazy: numpy

        try:
            pr = parse_byte_range(
                mm,
                lf.start,
                0,
                min(offset - lf.start + 1, lf.size),
                head_owned=True,
                check_crc=False,
                fields=False,
                stop_at_damage=True,
            )
        finally:
            mm.close()
        heads = pr.position.tolist()
        if pr.problems:
            heads = heads[: int(pr.position.searchsorted(pr.problems[0].position))]
            walk_end = pr.problems[0].position
        else:
            walk_end = pr.walk_end
        for pos in [*heads, walk_end]:
            if pos + 8 > lf.size:
                break
            abs_pos = lf.start + pos
            if abs_pos == offset:
                return offset, offset
            if abs_pos > offset:
                after = abs_pos
                break
            before = abs_pos
            if abs_pos >= max_offset:
                break
            if pos == walk_end:  # not a record: the rest of the file is not data
                after = lf.start + lf.size if i + 1 < len(self.files) else None
                break
        if after is not None and after > max_offset:
            after = None
        return before, after


def _store_ts(buf: Buffer, pos: int) -> int:
    sysflag = _I(buf, pos + 36)[0]
    return int(_Q(buf, pos + 48 + (20 if sysflag & BORNHOST_V6_FLAG else 8))[0])


def _has_data(lf: LogFile) -> bool:
    if lf.size < 8:
        return False
    try:
        with open(lf.path, "rb") as fh:
            return any(fh.read(8))
    except OSError:
        return False


# --------------------------------------------------------------------------- writing


class CommitLogWriter:
    """The one commitlog writer (store builders, the broker agents): appends records like RocketMQ's
    CommitLog: files named by start offset, preallocated to `file_size` (sparse), and when
    `msgLen + 8 > remaining` an 8-byte blank marker (int32 remaining, int32 BLANK_MAGIC) ends the file
    and the record goes to the next one. Resumes after the last valid record of an existing directory.
    Up to `buffer_bytes` are kept in memory before they are written (0: written at once)."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        file_size: int = DEFAULT_FILE_SIZE,
        *,
        start_offset: int = 0,
        buffer_bytes: int = 4 << 20,
    ) -> None:
        if file_size < MIN_RECORD_SIZE + 8:
            raise ValueError(f"file size {file_size} is too small")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.file_size = file_size
        self._buffer_bytes = buffer_bytes
        self._buf = bytearray()
        self._fds: dict[int, int] = {}
        if any(_NAME_RE.match(p.name) for p in self.directory.iterdir()):
            log = CommitLog(self.directory, file_size)
            self.offset = log.scan().max_offset
        else:
            if start_offset % file_size:
                raise ValueError("start_offset must be a multiple of the file size")
            self.offset = start_offset
        self._buf_at = self.offset  # where the buffered bytes go
        self.file_fd(self._file_start(self.offset))

    def _file_start(self, offset: int) -> int:
        return offset - offset % self.file_size

    def file_fd(self, start: int) -> int:
        """The descriptor of the file that starts at `start`, created and preallocated if missing."""
        fd = self._fds.get(start)
        if fd is None:
            path = self.directory / file_name(start)
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
                if os.fstat(fd).st_size < self.file_size:
                    os.ftruncate(fd, self.file_size)
            except OSError as exc:
                raise StoreError(f"{path}: cannot open: {exc.strerror or exc}") from None
            self._fds[start] = fd
        return fd

    def _flush(self) -> None:
        if self._buf:
            start = self._file_start(self._buf_at)
            os.pwrite(self.file_fd(start), self._buf, self._buf_at - start)
            self._buf_at += len(self._buf)
            self._buf = bytearray()

    def _buffer(self, data: bytes) -> None:
        self._buf += data
        self.offset += len(data)
        if len(self._buf) >= self._buffer_bytes:
            self._flush()

    def append(self, msg: Message) -> int:
        """Append one message; returns its physical offset."""
        size = len(encode_record(msg, 0))
        return self.append_encoded(lambda off: encode_record(msg, off), size)

    def append_encoded(self, encode: Any, size: int) -> int:
        """Append a record of `size` bytes whose bytes `encode(physical_offset)` returns."""
        if size + 8 > self.file_size:
            raise ValueError(f"record of {size} bytes does not fit in a file of {self.file_size} bytes")
        if size + 8 > self.file_size - (self.offset - self._file_start(self.offset)):
            self.roll()
        off = self.offset
        data = encode(off)
        if len(data) != size:
            raise ValueError("encoded record size differs from the announced size")
        self._buffer(data)
        return off

    def write(self, data: bytes) -> None:
        """Append bytes that are already records at these offsets (a replica copying its master,
        blank markers included); they must not cross a file end."""
        start = self._file_start(self.offset)
        if self.offset + len(data) > start + self.file_size:
            raise StoreError(
                f"{self.directory}: {len(data)} bytes at {self.offset} cross a file end (file sizes differ?)"
            )
        if self._buf and self._file_start(self._buf_at) != start:
            self._flush()
        self._buffer(data)

    def roll(self) -> None:
        """End the current file with the blank marker and continue in the next one."""
        start = self._file_start(self.offset)
        self._buffer(struct.pack(">iI", self.file_size - (self.offset - start), BLANK_MAGIC))
        self._flush()
        os.close(self._fds.pop(start))  # a file is reopened when read or truncated
        self.offset = self._buf_at = start + self.file_size
        self.file_fd(self.offset)

    def truncate(self, offset: int) -> None:
        """Drop everything from `offset` on (a record boundary): zero the rest of its file (sparse),
        delete the later files; the next record goes there."""
        self._flush()
        start = self._file_start(offset)
        for p in sorted(self.directory.iterdir()):
            if not _NAME_RE.match(p.name):
                continue
            fstart = int(p.name)
            if fstart > start or (fstart == start and offset == start and start > 0):
                fd = self._fds.pop(fstart, None)
                if fd is not None:
                    os.close(fd)
                p.unlink()
            elif fstart == start:
                fd = self.file_fd(start)
                os.ftruncate(fd, offset - start)  # cut, then re-extend with zeros
                os.ftruncate(fd, self.file_size)
        self.offset = self._buf_at = offset

    def flush(self) -> None:
        """Write what is buffered."""
        self._flush()

    def sync(self) -> None:
        """Write what is buffered and fsync the files."""
        self._flush()
        for fd in self._fds.values():
            os.fsync(fd)

    def close(self) -> None:
        self._flush()
        fds, self._fds = self._fds, {}
        for fd in fds.values():
            os.close(fd)

    def __enter__(self) -> CommitLogWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
