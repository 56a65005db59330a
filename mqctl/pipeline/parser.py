"""Parse ONE byte range of ONE commitlog file into columns. Pure: a buffer in, numpy arrays out.

Why not `mqctl.store.commitlog.parse_range`: a Spark task maps the whole file and owns only [start, end),
so it must (1) begin without copying anything, (2) read past `end` to finish its last record however
large, and (3) agree with its neighbours on who reports damage. Record semantics are the store module's:
the same MAGICCODE / TOTALSIZE / PHYSICALOFFSET / field-layout rules (`decode_record` gives the reasons).

The walk is the only per-record Python loop (TOTALSIZE, MAGICCODE, PHYSICALOFFSET of each record); every
fixed and variable field is then gathered for all records at once with numpy, the layout checked
vectorised, and BODYCRC computed with zlib on memoryview slices.

Ownership, which makes the result independent of where ranges are cut:
* a range that does not start where its region starts (`head_owned`), and whose first bytes are not a
  record head, silently skips to the first record boundary: the bytes before it belong to the record the
  previous range finished;
* damage found by a range's walk is reported by that range, including at the position where the walk
  lands past `end` (the next range cannot see it: it starts inside the previous record);
* zero bytes (TOTALSIZE 0) and the blank end-of-file marker end the data; if records follow them in the
  same file, they are read and the gap is reported (RocketMQ's recovery would stop there).
"""

from __future__ import annotations

import mmap
import struct
import zlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mqctl.store.commitlog import (
    BLANK_MAGIC,
    MAGIC_V1,
    MAGIC_V2,
    MAX_RECORD_SIZE,
    MIN_RECORD_SIZE,
    RecordError,
    decode_record,
    ip_text,
)
from mqctl.store.commitlog import find_boundary as next_boundary  # noqa: F401 (re-exported)

__all__ = ["Problem", "ParsedRange", "parse_byte_range", "next_boundary", "fmt_host", "property_value",
           "message_key"]

Buf = bytes | bytearray | mmap.mmap

_II = struct.Struct(">iI").unpack_from
_Q = struct.Struct(">q").unpack_from
_MASK = 0x7FFFFFFF
_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class Problem:
    """Damage at absolute `offset` (= file start + `position`), `length` bytes up to the next record (or
    the last non-zero byte). kind: "corrupt" (structure, PHYSICALOFFSET, torn), "crc" (BODYCRC differs:
    the record is still read), "gap" (zero bytes or a blank marker with records after them)."""

    offset: int
    position: int
    length: int
    kind: str
    reason: str


@dataclass
class ParsedRange:
    """Columns of the valid records of one range (ordered by position), plus the damage it owns."""

    file_start: int
    position: np.ndarray            # int64, within the file
    size: np.ndarray                # int64 TOTALSIZE
    version: np.ndarray             # int8: 1 or 2
    body_crc: np.ndarray            # int64 (the BODYCRC field)
    crc_ok: np.ndarray              # bool (True when not checked)
    queue_id: np.ndarray            # int64
    flag: np.ndarray
    queue_offset: np.ndarray
    physical_offset: np.ndarray
    sysflag: np.ndarray
    born_timestamp: np.ndarray
    store_timestamp: np.ndarray
    reconsume_times: np.ndarray
    prepared_tx_offset: np.ndarray
    body_length: np.ndarray
    topics: list[str]
    problems: list[Problem] = field(default_factory=list)
    # only when asked for (extract=...)
    bodies: list[bytes] | None = None
    properties: list[bytes] | None = None
    born_hosts: list[str] | None = None
    store_hosts: list[str] | None = None

    def __len__(self) -> int:
        return int(self.position.size)

    @property
    def offset(self) -> np.ndarray:
        return self.position + self.file_start


def fmt_host(ip: bytes, port: int) -> str:
    """`1.2.3.4:10911` or `[::1]:10911`, the way RocketMQ prints socket addresses."""
    if len(ip) == 16:
        return f"[{ip_text(ip)}]:{port}"
    return f"{ip_text(ip)}:{port}"


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


def _head(buf: Buf, n: int, base: int, pos: int) -> int:
    """TOTALSIZE of a plausible record head at pos (magic, size bounds, fits, PHYSICALOFFSET), else 0."""
    if pos + 36 > n:
        return 0
    total, magic = _II(buf, pos)
    if (magic != MAGIC_V1 and magic != MAGIC_V2) or total < MIN_RECORD_SIZE or total > MAX_RECORD_SIZE \
            or pos + total > n:
        return 0
    return total if _Q(buf, pos + 28)[0] == base + pos else 0


def _nonzero_end(u8: np.ndarray, pos: int, stop: int) -> int:
    """Position after the last non-zero byte in [pos, stop), or pos when all are zero (chunked: no
    index array over a huge zero tail)."""
    b = stop
    while b > pos:
        a = max(pos, b - _CHUNK)
        chunk = u8[a:b]
        if chunk.any():
            return a + int(np.flatnonzero(chunk)[-1]) + 1
        b = a
    return pos


class _Walker:
    def __init__(self, buf: Buf, base: int, u8: np.ndarray) -> None:
        self.buf, self.base, self.u8, self.n = buf, base, u8, len(buf)
        self.problems: list[Problem] = []

    def region(self, pos: int) -> int:
        """Bytes at pos are not a record: report what they are (if anything), return the next boundary
        (or the buffer's end)."""
        buf, n, base = self.buf, self.n, self.base
        q = next_boundary(buf, base, pos + 1)
        stop = q if q >= 0 else n
        magic = _II(buf, pos)[1] if pos + 8 <= n else None
        if magic == BLANK_MAGIC:
            if q >= 0:
                self.problems.append(Problem(
                    base + pos, pos, q - pos, "gap",
                    f"records after the end-of-file blank marker, next at {base + q}"))
            return stop
        nz = _nonzero_end(self.u8, pos, stop)
        if nz == pos:
            if q >= 0:
                self.problems.append(Problem(base + pos, pos, q - pos, "gap",
                                             f"{q - pos} zero bytes before the record at {base + q}"))
            return stop
        if pos + 8 > n:
            reason = f"torn record: only {n - pos} bytes remain"
        else:
            try:
                decode_record(buf, pos, base, check_crc=False)
                reason = "not a record boundary"      # pragma: no cover (a decodable record was rejected)
            except RecordError as exc:
                reason = exc.reason
        self.problems.append(Problem(base + pos, pos, (q if q >= 0 else nz) - pos, "corrupt", reason))
        return stop


def _gather(u8: np.ndarray, idx: np.ndarray, dt: str) -> np.ndarray:
    """Big-endian field of dtype `dt` at every index, as int64 (one fancy-index copy per field)."""
    w = np.dtype(dt).itemsize
    return u8[idx[:, None] + np.arange(w)].view(dt)[:, 0].astype(np.int64)


def parse_byte_range(buf: Buf, file_start: int, start: int, end: int, *, limit: int | None = None,
                     head_owned: bool | None = None, check_crc: bool = True,
                     extract: tuple[str, ...] = ()) -> ParsedRange:
    """Records whose first byte lies in buf[start:end), where buf is a WHOLE commitlog file starting at
    absolute offset `file_start` (an mmap: only touched pages are read). `limit` (default: the file's
    end) bounds the region of interest; `head_owned` (default: start == 0) says damage at `start` is
    this range's to report. `extract` adds "bodies", "properties", "hosts" columns."""
    n = len(buf)
    lim = n if limit is None else min(limit, n)
    end = min(end, lim)
    if head_owned is None:
        head_owned = start == 0
    u8 = np.frombuffer(buf, dtype=np.uint8) if n else np.zeros(0, dtype=np.uint8)
    try:
        return _parse(buf, u8, file_start, start, end, lim, head_owned, check_crc, extract)
    finally:
        del u8          # an exported buffer would keep the mmap from closing


def _parse(buf: Buf, u8: np.ndarray, base: int, start: int, end: int, lim: int, head_owned: bool,
           check_crc: bool, extract: tuple[str, ...]) -> ParsedRange:
    n = len(buf)
    w = _Walker(buf, base, u8)
    positions: list[int] = []
    append = positions.append
    pos = start
    if pos < end and not head_owned and not _head(buf, n, base, pos):
        pos = next_boundary(buf, base, pos)
        if pos < 0:
            pos = n
    while pos < end:
        rsize = _head(buf, n, base, pos)
        if rsize:
            append(pos)
            pos += rsize
        else:
            pos = w.region(pos)
    if pos < lim and not _head(buf, n, base, pos):
        w.region(pos)

    P = np.asarray(positions, dtype=np.int64)
    total = _gather(u8, P, ">i4")
    magic = _gather(u8, P + 4, ">u4")
    sysflag = _gather(u8, P + 36, ">i4")
    bh = np.where(sysflag & 0x10, 20, 8)
    sh = np.where(sysflag & 0x20, 20, 8)
    # variable layout: body length, topic length, properties length; each index clamped to the record
    # head (position 0) where an earlier check already failed, so no read leaves the record
    brel = 68 + bh + sh
    ok = brel + 4 <= total
    blen = _gather(u8, P + np.where(ok, brel, 0), ">i4")
    ok &= (blen >= 0) & (brel + 4 + blen <= total)
    trel = np.where(ok, brel + 4 + blen, 0)
    v1 = magic == MAGIC_V1
    ok &= trel + np.where(v1, 1, 2) <= total
    tl1 = u8[P + np.where(ok, trel, 0)].astype(np.int64)
    tl2 = _gather(u8, P + np.where(ok & ~v1, trel, 0), ">u2")
    ok &= ~v1 | (tl1 <= 127)
    tlen = np.where(v1, tl1, tl2)
    tstart = trel + np.where(v1, 1, 2)
    prel = tstart + tlen
    ok &= prel + 2 <= total
    plen = _gather(u8, P + np.where(ok, prel, 0), ">u2")
    ok &= prel + 2 + plen == total
    if not ok.all():
        for p in P[~ok].tolist():
            try:
                decode_record(buf, p, base, check_crc=False)
                reason = "bad field layout"            # pragma: no cover
            except RecordError as exc:
                reason = exc.reason
            w.problems.append(Problem(base + p, p, int(_II(buf, p)[0]), "corrupt", reason))
        keep = ok
        P, total, magic, sysflag, bh, sh, brel, blen, v1, tstart, tlen, prel, plen = (
            a[keep] for a in (P, total, magic, sysflag, bh, sh, brel, blen, v1, tstart, tlen, prel, plen))
    crc = _gather(u8, P + 8, ">i4")
    body_at = (P + brel + 4).tolist()
    blen_l = blen.tolist()
    crc_ok = np.ones(P.size, dtype=bool)
    mv = memoryview(buf)
    try:
        if check_crc:
            crc32 = zlib.crc32
            got = [crc32(mv[a:a + b]) & _MASK for a, b in zip(body_at, blen_l, strict=True)]
            crc_ok = np.asarray(got, dtype=np.int64) == crc if got else crc_ok
            for i in np.flatnonzero(~crc_ok).tolist():
                p = int(P[i])
                w.problems.append(Problem(base + p, p, int(total[i]), "crc",
                                          f"BODYCRC mismatch: field says {int(crc[i])}, body gives {got[i]}"))
        cache: dict[bytes, str] = {}
        topics = []
        for a, b in zip((P + tstart).tolist(), tlen.tolist(), strict=True):
            raw = bytes(mv[a:a + b])
            t = cache.get(raw)
            if t is None:
                t = cache[raw] = raw.decode("utf-8", errors="replace")
            topics.append(t)
        extra: dict[str, Any] = {}
        if "bodies" in extract:
            extra["bodies"] = [bytes(mv[a:a + b]) for a, b in zip(body_at, blen_l, strict=True)]
        if "properties" in extract:
            extra["properties"] = [bytes(mv[a:a + b])
                                   for a, b in zip((P + prel + 2).tolist(), plen.tolist(), strict=True)]
        if "hosts" in extract:
            extra["born_hosts"] = _hosts(mv, u8, P + 48, bh)
            extra["store_hosts"] = _hosts(mv, u8, P + 56 + bh, sh)
    finally:
        mv.release()
    w.problems.sort(key=lambda p: p.position)
    return ParsedRange(
        file_start=base, position=P, size=total, version=np.where(v1, 1, 2).astype(np.int8), body_crc=crc,
        crc_ok=crc_ok, queue_id=_gather(u8, P + 12, ">i4"), flag=_gather(u8, P + 16, ">i4"),
        queue_offset=_gather(u8, P + 20, ">i8"), physical_offset=_gather(u8, P + 28, ">i8"), sysflag=sysflag,
        born_timestamp=_gather(u8, P + 40, ">i8"), store_timestamp=_gather(u8, P + 48 + bh, ">i8"),
        reconsume_times=_gather(u8, P + 56 + bh + sh, ">i4"),
        prepared_tx_offset=_gather(u8, P + 60 + bh + sh, ">i8"), body_length=blen, topics=topics,
        problems=w.problems, **extra)


def _hosts(mv: memoryview, u8: np.ndarray, at: np.ndarray, width: np.ndarray) -> list[str]:
    ports = _gather(u8, at + width - 4, ">i4").tolist()
    return [fmt_host(bytes(mv[a:a + w - 4]), p)
            for a, w, p in zip(at.tolist(), width.tolist(), ports, strict=True)]
