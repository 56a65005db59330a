"""THE commitlog record walker: every reader of commitlog records in mqctl walks them here.

`parse_byte_range(buf, file_start, start, end)` walks the records whose first byte lies in
buf[start:end), where buf is a whole commitlog file (an mmap: only touched pages are read) starting at
absolute offset `file_start`, and returns their fields as numpy columns (`ParsedRange`) plus the damage
it met (`Problem`: file position, absolute offset, length, kind, reason). Users:

* `CommitLog.scan` / `scan_buffer` (`recover inspect`, `--deep`), `iter_records`, `boundaries_around`
  (mqctl.store.commitlog) walk with `stop_at_damage=True`: RocketMQ's recovery stops at the first bad
  record, so they do too;
* the pipeline's tasks (`mqctl recover salvage`, `mqctl analyze commitlog`) walk byte ranges of a file
  that resynchronise on a record boundary and report damage and go on;
* the broker agent's replication (`mqctl.broker.log`) cuts chunks on record boundaries.

A new reader of records uses one of these and writes no loop of its own: `CommitLog.iter_records` for
decoded `Record`s one by one across a store's files (a dump, a replay), `parse_byte_range` for the
columns of many records at once (stop_at_damage=True for RocketMQ's view of where valid data ends,
False to see past damage), `records_at` to read back records found earlier.

Record semantics are the store module's (`mqctl.store.commitlog.decode_record` gives the reasons): the
same MAGICCODE / TOTALSIZE / PHYSICALOFFSET / field-layout rules. No Python statement runs per record:
the chain of records (MAGICCODE, TOTALSIZE) is found with numpy window by window (`_chain`),
PHYSICALOFFSET, the field layout and every field are checked and gathered for all records at once from
a copy of their first bytes (`_heads`), and BODYCRC is computed on memoryview slices through map() (zlib-ng's
crc32 when the `zlib-ng` package is there, zlib's otherwise): the loop over records runs in C.

Two walkers give the same answers (tests/store/test_walker_differential.py, tests/fuzz): the compiled one
(`mqctl/store/_cwalker.c`, issue 32; built by pip when it can) does the chain and each record's layout,
BODYCRC, fields and topic code in C with the GIL released, and this module does the rest for both; without
it, or with MQCTL_WALKER=numpy, numpy does the per-record work as described above (`select`, `describe`).

Ownership, which makes the pipeline's result independent of where ranges are cut:
* a range that does not start where its region starts (`head_owned`), and whose first bytes are not a
  record head, silently skips to the first record boundary: the bytes before it belong to the record the
  previous range finished;
* damage found by a range's walk is reported by that range, including at the position where the walk
  lands past `end` (the next range cannot see it: it starts inside the previous record);
* zero bytes (TOTALSIZE 0) and the blank end-of-file marker end the data; if records follow them in the
  same file, they are read and the gap is reported (RocketMQ's recovery would stop there).
"""

from __future__ import annotations

import dataclasses
import importlib
import itertools
import mmap
import os
import struct
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypedDict, Unpack

import numpy as np

from mqctl.store.commitlog import (
    BLANK_MAGIC,
    MAGIC_V1,
    MAGIC_V2,
    MAX_RECORD_SIZE,
    MIN_RECORD_SIZE,
    RecordError,
    decode_record,
    find_boundary,
    ip_text,
)

__all__ = [
    "BLOCK_RECORDS",
    "WALKERS",
    "Blob",
    "Chain",
    "ParsedRange",
    "Problem",
    "crc32",
    "describe",
    "find_boundary",
    "fmt_host",
    "parse_blocks",
    "parse_byte_range",
    "records_at",
    "row_bytes",
    "select",
]

Buf = bytes | bytearray | memoryview | mmap.mmap


def _crc32_impl() -> Callable[[Any], int]:
    try:
        from zlib_ng import zlib_ng  # lazy: optional zlib_ng
    except ImportError:
        return zlib.crc32
    fast: Callable[[Any], int] = zlib_ng.crc32  # typed here whether or not zlib-ng ships its types
    return fast


crc32 = _crc32_impl()
"""CRC-32 (java.util.zip.CRC32's): zlib-ng's when installed. Bodies are small, so the cost per call
counts more than the speed on big buffers: zlib-ng's call on a 1 KiB body takes about 70 ns, ISA-L's
about 190 (its own cost per call), zlib's about 390 (no vector instructions)."""

WALKERS = ("c", "numpy")
ENV = "MQCTL_WALKER"
_cw: Any = None  # the compiled walker (mqctl/store/_cwalker.c) when it walks, else None
IMPL = "numpy"
NOTE = ""  # why the walker in use is not the one asked for, if it is not


def select(name: str | None = None) -> str:
    """Choose the walker: "c" (the compiled one, mqctl/store/_cwalker.c), "numpy", or None/"auto": the
    environment's MQCTL_WALKER, else the compiled one when it was built (pip builds it when it can; it is
    optional). Both give the same answers (tests/store/test_walker_differential.py); the numpy walker is
    the fallback and the oracle. Returns the walker now in use; "c" without the extension raises
    ImportError."""
    global _cw, IMPL, NOTE
    want = name or os.environ.get(ENV, "") or "auto"
    if want not in ("auto", *WALKERS):
        raise ValueError(f"{ENV}={want!r}: expected one of auto, c, numpy")
    mod: Any = None
    NOTE = ""
    if want != "numpy":
        try:
            mod = importlib.import_module("mqctl.store._cwalker")
        except ImportError as exc:
            if want == "c":
                raise ImportError(f"the compiled record walker is not installed ({exc})") from None
            NOTE = "the compiled walker is not built"
    _cw, IMPL = mod, ("c" if mod is not None else "numpy")
    return IMPL


def describe() -> str:
    """The walker in use and its CRC-32, as `mqctl --version` prints it."""
    if _cw is not None:
        return f"c (CRC-32: {_cw.CRC})"
    fast = "zlib-ng" if crc32 is not zlib.crc32 else "zlib"
    return f"numpy (CRC-32: {fast}{'; ' + NOTE if NOTE else ''})"


try:
    select()
except (ImportError, ValueError) as _exc:  # a wrong MQCTL_WALKER: the numpy walker, and why
    select("numpy")
    NOTE = str(_exc)

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


@dataclass(frozen=True, slots=True)
class Blob:
    """Byte strings of many records in one buffer: item i is data[offsets[i]:offsets[i + 1]] (what an
    Arrow binary array is made of)."""

    offsets: np.ndarray  # int64, len(items) + 1
    data: bytes

    def items(self) -> list[bytes]:
        d = self.data
        return [d[a:b] for a, b in itertools.pairwise(self.offsets.tolist())]


@dataclass(frozen=True, slots=True)
class Chain:
    """The records an earlier walk of a whole file found valid from position 0 up to `end` (structure,
    PHYSICALOFFSET, layout, and BODYCRC when `crc_checked`): a later walk of the same unchanged file
    takes them as they are instead of chaining and checking them again (salvage reuses the plan's
    recovery scan so that it walks the store once)."""

    positions: np.ndarray  # int64, ascending, all < end
    end: int
    crc_checked: bool


BLOCK_RECORDS = 1 << 14  # fields are gathered this many records at a time: the per-record temporaries
# (each record's head, field columns) stay in the CPU's cache, not 30 MB
_SHORT = 512  # items up to this long are gathered as rows, longer ones joined from slices


def _blob(u8: np.ndarray, mv: memoryview, at: np.ndarray, length: np.ndarray) -> Blob:
    """The items buf[at:at + length] in one buffer: short items (properties) as fixed-width rows cut by a
    mask, in blocks (the join of memoryview slices costs a few hundred ns an item), long ones (bodies)
    joined from slices (then the copy itself is the cost)."""
    offs = np.zeros(at.size + 1, dtype=np.int64)
    np.cumsum(length, out=offs[1:])
    width = int(length.max()) if at.size else 0
    if width == 0:
        return Blob(offs, b"")
    if width > _SHORT:
        return Blob(offs, b"".join(map(mv.__getitem__, map(slice, at.tolist(), (at + length).tolist()))))
    parts = []
    step = max(1, (16 << 20) // max(width, 1))
    cols = np.arange(width)
    for s in range(0, at.size, step):
        ln = length[s : s + step]
        parts.append(row_bytes(u8, at[s : s + step], width)[cols < ln[:, None]])
    return Blob(offs, np.concatenate(parts).tobytes() if parts else b"")


def _blob_c(u8: np.ndarray, at: np.ndarray, length: np.ndarray) -> Blob:
    """`_blob` by the compiled walker: one copy of each item, the GIL released."""
    offs = np.zeros(at.size + 1, dtype=np.int64)
    np.cumsum(length, out=offs[1:])
    return Blob(
        offs,
        _cw.gather(
            u8, np.ascontiguousarray(at, dtype=np.int64), np.ascontiguousarray(length, dtype=np.int64)
        ),
    )


@dataclass
class ParsedRange:
    """Columns of the valid records of one range (ordered by position), plus the damage it owns."""

    file_start: int
    position: np.ndarray  # int64, within the file
    size: np.ndarray  # int64 TOTALSIZE
    version: np.ndarray  # int8: 1 or 2
    body_crc: np.ndarray  # int64 (the BODYCRC field)
    crc_ok: np.ndarray  # bool (True when not checked)
    queue_id: np.ndarray  # int64
    flag: np.ndarray
    queue_offset: np.ndarray
    physical_offset: np.ndarray
    sysflag: np.ndarray
    born_timestamp: np.ndarray
    store_timestamp: np.ndarray
    reconsume_times: np.ndarray
    prepared_tx_offset: np.ndarray
    body_length: np.ndarray
    topic_codes: np.ndarray  # int64 index into topic_names, per record
    topic_names: list[str]  # the distinct topics of the range
    problems: list[Problem] = field(default_factory=list)
    # only when asked for (extract=...): bodies and properties as one joined buffer with offsets (no
    # object per record), hosts as codes into the distinct `host_names`
    body_blob: Blob | None = None
    properties_blob: Blob | None = None
    born_host_codes: np.ndarray | None = None
    store_host_codes: np.ndarray | None = None
    host_names: list[str] = field(default_factory=list)
    walk_end: int = 0  # where the walk stopped: after the last record, or at the damage

    def __len__(self) -> int:
        return int(self.position.size)

    @property
    def bodies(self) -> list[bytes] | None:
        return None if self.body_blob is None else self.body_blob.items()

    @property
    def properties(self) -> list[bytes] | None:
        return None if self.properties_blob is None else self.properties_blob.items()

    @property
    def born_hosts(self) -> list[str] | None:
        codes, names = self.born_host_codes, self.host_names
        return None if codes is None else [names[c] for c in codes.tolist()]

    @property
    def store_hosts(self) -> list[str] | None:
        codes, names = self.store_host_codes, self.host_names
        return None if codes is None else [names[c] for c in codes.tolist()]

    @property
    def offset(self) -> np.ndarray:
        return self.position + self.file_start

    @property
    def topics(self) -> list[str]:
        names = self.topic_names
        return [names[c] for c in self.topic_codes.tolist()]


def fmt_host(ip: bytes, port: int) -> str:
    """`1.2.3.4:10911` or `[::1]:10911`, the way RocketMQ prints socket addresses."""
    if len(ip) == 16:
        return f"[{ip_text(ip)}]:{port}"
    return f"{ip_text(ip)}:{port}"


def _head(buf: Buf, n: int, base: int, pos: int) -> int:
    """TOTALSIZE of a plausible record head at pos (magic, size bounds, fits, PHYSICALOFFSET), else 0."""
    if pos + 36 > n:
        return 0
    total, magic = _II(buf, pos)
    if (
        (magic != MAGIC_V1 and magic != MAGIC_V2)
        or total < MIN_RECORD_SIZE
        or total > MAX_RECORD_SIZE
        or pos + total > n
    ):
        return 0
    return total if _Q(buf, pos + 28)[0] == base + pos else 0


def _nz(a: np.ndarray) -> np.ndarray:
    """np.flatnonzero of a 1-d array without its Python-level wrappers (a walk of a few records makes
    dozens of numpy calls: their fixed cost is the numpy walker's time on small buffers)."""
    nz: np.ndarray = a.nonzero()[0]
    return nz


def _unique(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """np.unique(a, return_inverse=True) of a 1-d array, its own steps without its Python-level ones."""
    perm = a.argsort()
    aux = a[perm]
    mask = np.empty(aux.size, dtype=bool)
    mask[:1] = True
    mask[1:] = aux[1:] != aux[:-1]
    inv = np.empty(aux.size, dtype=np.intp)
    inv[perm] = np.cumsum(mask) - 1
    return aux[mask], inv


_WIN_MIN, _WIN_MAX = 64 << 10, 8 << 20
_M0, _M1, _M2 = MAGIC_V1 >> 24, (MAGIC_V1 >> 16) & 0xFF, (MAGIC_V1 >> 8) & 0xFF
assert MAGIC_V1 >> 8 == MAGIC_V2 >> 8  # the two MAGICCODEs differ in their last byte only


def _chain(u8: np.ndarray, n: int, pos: int, end: int) -> tuple[np.ndarray, int]:
    """The positions of the records chained from pos while pos < end, by MAGICCODE and TOTALSIZE only
    (PHYSICALOFFSET is checked afterwards for all at once), and where the chain stopped: a record at p
    is followed by one at p + TOTALSIZE. Window by window with numpy: every position of the window
    whose 4 bytes after it are a MAGICCODE is a candidate, the chain is the run of candidates where
    each one's TOTALSIZE leads to the next; a candidate the chain skips (magic bytes inside a body)
    ends the run and the walk goes on where the last record really ends, in a small window again."""
    v1, v2 = MAGIC_V1 & 0xFF, MAGIC_V2 & 0xFF
    lo, hi = MIN_RECORD_SIZE, MAX_RECORD_SIZE
    stop = min(end, n - 35)
    parts: list[np.ndarray] = []
    win = _WIN_MIN
    while pos < stop:
        w1 = min(stop, pos + win)
        q = pos + _nz(u8[pos + 4 : w1 + 4] == _M0)  # p < stop <= n - 35: p + 7 < n
        q = q[(u8[q + 5] == _M1) & (u8[q + 6] == _M2) & ((u8[q + 7] == v1) | (u8[q + 7] == v2))]
        if not q.size or q[0] != pos:
            break  # no record at pos
        total = _gather(u8, q, ">i4")
        nxt = q + total
        fits = (total >= lo) & (total <= hi) & (nxt <= n)
        link = np.empty(q.size, dtype=bool)
        link[:-1] = nxt[:-1] == q[1:]
        link[-1] = nxt[-1] >= w1
        bad = _nz(~(fits & link))
        if not bad.size:
            parts.append(q)
            pos, win = int(nxt[-1]), min(2 * win, _WIN_MAX)
            continue
        k = int(bad[0])
        if not fits[k]:
            parts.append(q[:k])
            pos = int(q[k])
            break
        parts.append(q[: k + 1])
        pos, win = int(nxt[k]), _WIN_MIN
    return (np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)), pos


def _nonzero_end(u8: np.ndarray, pos: int, stop: int) -> int:
    """Position after the last non-zero byte in [pos, stop), or pos when all are zero (chunked: no
    index array over a huge zero tail)."""
    if _cw is not None:
        return int(_cw.nonzero_end(u8, pos, stop))
    b = stop
    while b > pos:
        a = max(pos, b - _CHUNK)
        chunk = u8[a:b]
        if chunk.any():
            return a + int(_nz(chunk)[-1]) + 1
        b = a
    return pos


class _Walker:
    def __init__(self, buf: Buf, base: int, u8: np.ndarray) -> None:
        self.buf, self.base, self.u8, self.n = buf, base, u8, len(buf)
        self.problems: list[Problem] = []

    def resync(self, pos: int) -> int:
        """The first record boundary at or after pos (find_boundary), or the buffer's end when none
        follows: where every walk goes on after bytes that are not a record (the head of a range it does
        not own, damage). Window by window: a window of zero bytes (a preallocated file's tail) is passed
        over with numpy instead of searched for a MAGICCODE."""
        n, u8 = self.n, self.u8
        if _cw is not None and pos < n:  # the same windows, the zero ones skipped at memory speed
            nz = int(_cw.nonzero(u8, pos, n))
            if nz >= n:
                return n
            pos += max(0, (nz - 8 - pos) // _CHUNK) * _CHUNK
        while pos < n:
            stop = min(n, pos + _CHUNK)
            if u8[pos : min(n, stop + 8)].any():
                q = find_boundary(self.buf, self.base, pos, stop=stop)
                if q >= 0:
                    return q
            pos = stop
        return n

    def region(self, pos: int) -> int:
        """Bytes at pos are not a record: report what they are (if anything), return the next boundary
        (or the buffer's end)."""
        buf, n, base = self.buf, self.n, self.base
        stop = self.resync(pos + 1)
        q = stop if stop < n else -1  # a record needs 36 bytes: none starts at the buffer's end
        magic = _II(buf, pos)[1] if pos + 8 <= n else None
        if magic == BLANK_MAGIC:
            return self._gap(pos, q, stop, f"records after the end-of-file blank marker, next at {base + q}")
        nz = _nonzero_end(self.u8, pos, stop)
        if nz == pos:
            return self._gap(pos, q, stop, f"{q - pos} zero bytes before the record at {base + q}")
        if pos + 8 > n:
            reason = f"torn record: only {n - pos} bytes remain"
        else:
            try:
                decode_record(buf, pos, base, check_crc=False)
                reason = "not a record boundary"  # pragma: no cover (a decodable record was rejected)
            except RecordError as exc:
                reason = exc.reason
        self.problems.append(Problem(base + pos, pos, (q if q >= 0 else nz) - pos, "corrupt", reason))
        return stop

    def _gap(self, pos: int, q: int, stop: int, what: str) -> int:
        """Bytes RocketMQ may leave before a record (at q; -1: none follows, nothing to report)."""
        if q >= 0:
            self.problems.append(Problem(self.base + pos, pos, q - pos, "gap", what))
        return stop


def _gather(u8: np.ndarray, idx: np.ndarray, dt: str) -> np.ndarray:
    """Big-endian field of dtype `dt` at every index, as int64: one fancy index of a view of the buffer
    as overlapping (unaligned) values of `dt`, one per byte position."""
    w = _WIDTH[dt]
    if u8.size < w or not u8.flags.c_contiguous:
        return u8[idx[:, None] + np.arange(w)].view(dt)[:, 0].astype(np.int64)
    vals: np.ndarray = np.ndarray((u8.size - w + 1,), dt, u8, 0, (1,))[idx]
    return vals.astype(np.int64)


_WIDTH = {">u2": 2, ">i4": 4, ">u4": 4, ">i8": 8, ">u8": 8}


HEAD = 112  # a record's bytes up to its body length field, with IPv6 hosts: every fixed field


def _windows(u8: np.ndarray, width: int) -> np.ndarray:
    """Every `width` bytes of u8 from each position, as the rows of a view (sliding_window_view's,
    made in C: numpy's Python-level helper costs more than the copy of a few rows)."""
    if not u8.flags.c_contiguous:
        return np.lib.stride_tricks.sliding_window_view(u8, width)
    return np.ndarray((u8.size - width + 1, width), np.uint8, u8, 0, (1, 1))


def row_bytes(u8: np.ndarray, at: np.ndarray, width: int) -> np.ndarray:
    """`width` bytes from each position of `at` as the rows of one array (zeros past the buffer's end):
    a copy of each row (numpy's row gather over a sliding window view), not a fancy index per byte."""
    n = u8.size
    whole = n - width >= at
    if n >= width and bool(whole.all()):  # the rows' one copy, no second one into `out`
        rows: np.ndarray = _windows(u8, width)[at]
        return rows
    out = np.zeros((at.size, width), dtype=np.uint8)
    if n >= width:
        out[whole] = _windows(u8, width)[at[whole]]
    for i in _nz(~whole).tolist():
        row = u8[int(at[i]) : int(at[i]) + width]
        out[i, : row.size] = row
    return out


def _heads(u8: np.ndarray, P: np.ndarray) -> np.ndarray:
    """The first HEAD bytes of the records at P (`row_bytes`): one copy that touches each record once,
    instead of a gather over all records per field."""
    return row_bytes(u8, P, HEAD)


_HEAD_FIXED = np.dtype(
    {
        "names": [
            "total",
            "magic",
            "body_crc",
            "queue_id",
            "flag",
            "queue_offset",
            "physical_offset",
            "sysflag",
            "born_timestamp",
        ],
        "formats": [">i4", ">u4", ">i4", ">i4", ">i4", ">i8", ">i8", ">i4", ">i8"],
        "offsets": [0, 4, 8, 12, 16, 20, 28, 36, 40],
        "itemsize": HEAD,
    }
)
"""A record head's fields at fixed places, as a row of `_heads` viewed (one view, not a copy per field)."""


def _head_var(bh: int, sh: int) -> np.dtype:
    return np.dtype(
        {
            "names": ["store_timestamp", "reconsume_times", "prepared_tx_offset", "body_length"],
            "formats": [">i8", ">i4", ">i8", ">i4"],
            "offsets": [48 + bh, 56 + bh + sh, 60 + bh + sh, 68 + bh + sh],
            "itemsize": HEAD,
        }
    )


_HEAD_VAR = [_head_var(20 if lay & 1 else 8, 20 if lay & 2 else 8) for lay in range(4)]
"""The fields after the hosts, per layout (SYSFLAG bits 4 and 5: IPv6 born host, IPv6 store host)."""
_BREL = np.asarray([68 + (20 if lay & 1 else 8) + (20 if lay & 2 else 8) for lay in range(4)], dtype=np.int64)
"""Where the body length field is, per layout."""


def _rows(V: np.ndarray, t: np.dtype) -> np.ndarray:
    """The fields of the structured rows V as the rows of one int64 array (`t`: V's fields as int64),
    each row contiguous: one cast for all fields instead of one per field."""
    return V.astype(t).view(np.int64).reshape(V.size, -1).T.copy()


_FIXED64 = np.dtype([(f, np.int64) for f in _HEAD_FIXED.names or ()])
_VAR64 = np.dtype([(f, np.int64) for f in _HEAD_VAR[0].names or ()])


def _var_fields(H: np.ndarray, lay: np.ndarray) -> np.ndarray:
    """STORETIMESTAMP, RECONSUMETIMES, PREPAREDTRANSACTIONOFFSET and BODY length of the heads H, whose
    layouts (`_HEAD_VAR`'s index) are `lay`, as the rows of an int64 array: one view when all have the
    same layout."""
    present = _nz(np.bincount(lay, minlength=4)).tolist()
    if len(present) <= 1:
        return _rows(H.view(_HEAD_VAR[present[0] if present else 0])[:, 0], _VAR64)
    out = np.empty((4, lay.size), dtype=np.int64)
    for layout in present:
        m = lay == layout
        out[:, m] = _rows(H[m].view(_HEAD_VAR[layout])[:, 0], _VAR64)
    return out


class WalkOptions(TypedDict, total=False):
    """The keywords of parse_byte_range and parse_blocks (what each means: parse_byte_range)."""

    limit: int | None
    head_owned: bool | None
    check_crc: bool
    fields: bool
    extract: tuple[str, ...]
    stop_at_damage: bool
    known: Chain | None


def parse_byte_range(
    buf: Buf, file_start: int, start: int, end: int, **options: Unpack[WalkOptions]
) -> ParsedRange:
    """Walk the records whose first byte lies in buf[start:end), where buf is a WHOLE commitlog file
    starting at absolute offset `file_start`. `limit` (default: the file's end) bounds the region of
    interest; `head_owned` (default: start == 0) says damage at `start` is this range's to report.
    `fields=False` gathers only position, size, body length and BODYCRC (a scan); `extract` adds
    "bodies", "properties", "hosts". `stop_at_damage`: the walk ends at the first bytes that are not a
    record (`walk_end`; RocketMQ's recovery rule) instead of resynchronising, and reports nothing about
    them; records whose layout or BODYCRC is bad are still reported (the caller stops at the first).
    `known`: what an earlier walk of this file found (`Chain`), taken instead of walking it again."""
    blocks = list(
        _blocks(buf, file_start, start, end, None if options.get("extract") else BLOCK_RECORDS, **options)
    )
    return blocks[0] if len(blocks) == 1 else _joined(blocks)


def parse_blocks(
    buf: Buf,
    file_start: int,
    start: int,
    end: int,
    *,
    block: int | None = None,
    **options: Unpack[WalkOptions],
) -> Iterator[ParsedRange]:
    """`parse_byte_range` with the fields gathered `block` (default BLOCK_RECORDS) records at a time:
    one walk, then a ParsedRange per block of its records (the first also carries the walk's problems,
    each block the layout and BODYCRC problems of its records), so that a task's memory follows the
    block, not the range (a 256 MiB range of 1 KiB records: about 150 MB of per-record temporaries at
    once, with the properties and message keys of pass 1)."""
    yield from _blocks(buf, file_start, start, end, block or BLOCK_RECORDS, **options)


def _blocks(
    buf: Buf,
    file_start: int,
    start: int,
    end: int,
    block: int | None,
    *,
    limit: int | None = None,
    head_owned: bool | None = None,
    check_crc: bool = True,
    fields: bool = True,
    extract: tuple[str, ...] = (),
    stop_at_damage: bool = False,
    known: Chain | None = None,
) -> Iterator[ParsedRange]:
    """One walk, then the records' fields `block` records at a time (None: all at once)."""
    n = len(buf)
    lim = n if limit is None else min(limit, n)
    end = min(end, lim)
    if head_owned is None:
        head_owned = start == 0
    u8 = np.frombuffer(buf, dtype=np.uint8) if n else np.zeros(0, dtype=np.uint8)
    try:
        w = _Walker(buf, file_start, u8)
        P, walk_end, taken = _walk(buf, u8, w, start, end, lim, head_owned, stop_at_damage, known)
        crc_known = taken if known is not None and known.crc_checked else 0
        step = block or max(P.size, 1)
        for s in range(0, max(P.size, 1), step):
            pr = _columns(
                buf,
                u8,
                w,
                P[s : s + step],
                walk_end,
                check_crc,
                fields,
                extract,
                min(max(crc_known - s, 0), step),
            )
            w.problems = []  # each block's own; the walk's go with the first
            yield pr
    finally:
        del u8  # an exported buffer would keep the mmap from closing


def _walk(
    buf: Buf,
    u8: np.ndarray,
    w: _Walker,
    start: int,
    end: int,
    lim: int,
    head_owned: bool,
    stop_at_damage: bool,
    known: Chain | None,
) -> tuple[np.ndarray, int, int]:
    n, base = len(buf), w.base
    pos = start
    parts: list[np.ndarray] = []
    taken = 0
    if known is not None and pos < min(end, known.end):
        K = known.positions
        i = int(K.searchsorted(pos))
        # a resynchronising walk lands on the next record of the chain; a walk whose region starts here
        # takes the chain only if a record starts right here (else it reports the bytes, below)
        if not head_owned or (i < K.size and K[i] == pos):
            j = int(K.searchsorted(end))
            parts.append(K[i:j])
            taken = j - i
            pos = int(K[j]) if j < K.size else known.end
    if pos < end and not parts and not head_owned and not _head(buf, n, base, pos):
        pos = w.resync(pos)  # the bytes before belong to the record the previous range finished
    while pos < end:
        if _cw is not None:
            raw, stopped = _cw.chain(buf, base, pos, end)
            p = np.frombuffer(raw, dtype=np.int64)
        else:
            p, stopped = _chain(u8, n, pos, end)
        if p.size:
            bad = _nz(_gather(u8, p + 28, ">i8") != p + base) if _cw is None else p[:0]
            if bad.size:  # a PHYSICALOFFSET that is not the record's position
                stopped = int(p[bad[0]])
                p = p[: bad[0]]
            parts.append(p)
        pos = stopped
        if pos < end:
            if stop_at_damage:
                break
            pos = w.region(pos)
    if not stop_at_damage and pos < lim and not _head(buf, n, base, pos):
        w.region(pos)
    return (np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)), pos, taken


def records_at(
    buf: Buf, file_start: int, positions: np.ndarray, *, extract: tuple[str, ...] = (), topics: bool = True
) -> ParsedRange:
    """The fields of the records at known `positions` of a whole file (found by an earlier walk), in that
    order, without walking: how salvage reads back the messages it keeps (`topics=False`: without their
    topics, known already). BODYCRC is not checked again; a position that is no longer a record raises
    RecordError."""
    n = len(buf)
    u8 = np.frombuffer(buf, dtype=np.uint8) if n else np.zeros(0, dtype=np.uint8)
    try:
        P = np.asarray(positions, dtype=np.int64)
        if P.size and (P.min() < 0 or int(P.max()) + 36 > n):
            raise RecordError(file_start + int(P.max()), "position outside the file")
        bad = _nz(_gather(u8, P + 28, ">i8") != P + file_start)
        if bad.size:
            raise RecordError(file_start + int(P[bad[0]]), "not a record any more (the file changed?)")
        w = _Walker(buf, file_start, u8)
        pr = _columns(buf, u8, w, P, n, False, True, extract, 0, topics)
        if pr.problems or len(pr) != P.size:
            p = w.problems[0]
            raise RecordError(p.offset, p.reason)
        return pr
    finally:
        del u8


_COLUMNS = (
    "position",
    "size",
    "version",
    "body_crc",
    "crc_ok",
    "queue_id",
    "flag",
    "queue_offset",
    "physical_offset",
    "sysflag",
    "born_timestamp",
    "store_timestamp",
    "reconsume_times",
    "prepared_tx_offset",
    "body_length",
)


def _joined(blocks: list[ParsedRange]) -> ParsedRange:
    """The ParsedRange of consecutive blocks of one walk (without extracted items): columns joined,
    topic codes into the names of all, problems in position order."""
    names: dict[str, int] = {}
    codes = []
    for b in blocks:
        remap = np.asarray([names.setdefault(t, len(names)) for t in b.topic_names], dtype=np.int64)
        codes.append(remap[b.topic_codes] if b.topic_codes.size else b.topic_codes)
    problems = sorted((p for b in blocks for p in b.problems), key=lambda p: p.position)
    cols: dict[str, Any] = {c: np.concatenate([getattr(b, c) for b in blocks]) for c in _COLUMNS}
    return dataclasses.replace(
        blocks[0], topic_codes=np.concatenate(codes), topic_names=list(names), problems=problems, **cols
    )


def _corrupt(buf: Buf, w: _Walker, bad: np.ndarray) -> None:
    """The records at `bad` failed the layout checks: the reason of each, as decode_record gives it."""
    for p in bad.tolist():
        try:
            decode_record(buf, p, w.base, check_crc=False)
            reason = "bad field layout"  # pragma: no cover
        except RecordError as exc:
            reason = exc.reason
        w.problems.append(Problem(w.base + p, p, int(_II(buf, p)[0]), "corrupt", reason))


def _crc_mismatches(
    w: _Walker, P: np.ndarray, size: np.ndarray, crc: np.ndarray, got: np.ndarray, crc_ok: np.ndarray
) -> None:
    for i in _nz(~crc_ok).tolist():
        p = int(P[i])
        w.problems.append(
            Problem(
                w.base + p,
                p,
                int(size[i]),
                "crc",
                f"BODYCRC mismatch: field says {int(crc[i])}, body gives {int(got[i])}",
            )
        )


def _host_columns(u8: np.ndarray, P: np.ndarray, sysflag: np.ndarray) -> dict[str, Any]:
    """extract "hosts": born and store host codes into one list of host names (an IPv6 address when the
    sysflag says so)."""
    bh = np.where(sysflag & 0x10, 20, 8)
    sh = np.where(sysflag & 0x20, 20, 8)
    hosts: dict[bytes, int] = {}
    born = _hosts(u8, P + 48, bh, hosts)
    store = _hosts(u8, P + 56 + bh, sh, hosts)
    return {
        "born_host_codes": born,
        "store_host_codes": store,
        "host_names": [
            fmt_host(k[1 : k[0] - 3], int.from_bytes(k[k[0] - 3 : k[0] + 1], "big", signed=True))
            for k in hosts
        ],
    }


def _columns(
    buf: Buf,
    u8: np.ndarray,
    w: _Walker,
    P: np.ndarray,
    walk_end: int,
    check_crc: bool,
    fields: bool,
    extract: tuple[str, ...],
    crc_known: int,
    topics: bool = True,
) -> ParsedRange:
    """Check the layout of the records at P and gather their fields (all records at once); BODYCRC is
    not computed again for the first `crc_known` (taken from a `Chain` that found it right)."""
    if _cw is not None:
        return _columns_c(buf, u8, w, P, walk_end, check_crc, fields, extract, crc_known, topics)
    base = w.base
    if not P.size:  # the ~80 numpy calls below, each on empty arrays, give this
        return _empty(base, w, P, walk_end, extract)
    H = _heads(u8, P)
    X = _rows(H.view(_HEAD_FIXED)[:, 0], _FIXED64)  # the rows of _HEAD_FIXED's fields
    total, magic, sysflag = X[0], X[1], X[7]
    lay = (sysflag >> 4) & 3
    Y = _var_fields(H, lay)
    blen = Y[3]
    # variable layout: body length, topic length, properties length; each index clamped to the record
    # head (position 0) where an earlier check already failed, so no read leaves the record
    brel = _BREL[lay]
    # the record inside the buffer: a walk found it so, but records_at's positions may be stale (found by
    # the fuzz harness: reads past the buffer raised IndexError instead of RecordError)
    ok = (brel + 4 <= total) & (total <= u8.size - P)
    ok &= (blen >= 0) & (brel + 4 + blen <= total)
    trel = np.where(ok, brel + 4 + blen, 0)
    v1 = magic == MAGIC_V1
    tstart = trel + np.where(v1, 1, 2)
    ok &= tstart <= total
    tl1 = u8[P + np.where(ok, trel, 0)].astype(np.int64)
    tl2 = _gather(u8, P + np.where(ok & ~v1, trel, 0), ">u2")
    ok &= ~v1 | (tl1 <= 127)
    tlen = np.where(v1, tl1, tl2)
    prel = tstart + tlen
    ok &= prel + 2 <= total
    plen = _gather(u8, P + np.where(ok, prel, 0), ">u2")
    ok &= prel + 2 + plen == total
    if not ok.all():
        _corrupt(buf, w, P[~ok])
        keep = ok
        P, H, brel, v1, tstart, tlen, prel, plen = (
            a[keep] for a in (P, H, brel, v1, tstart, tlen, prel, plen)
        )
        X, Y = X[:, keep], Y[:, keep]
        total, sysflag, blen = X[0], X[7], Y[3]
    crc = X[2]
    body_at = P + brel + 4
    crc_ok = np.ones(P.size, dtype=bool)
    mv = memoryview(buf)
    try:
        k = crc_known
        if check_crc and P.size > k:
            got = crc.copy()
            # map() of builtins: the per-record loop runs in C (slice, memoryview slice, CRC call)
            bodies = map(mv.__getitem__, map(slice, body_at[k:].tolist(), (body_at + blen)[k:].tolist()))
            got[k:] = np.fromiter(map(crc32, bodies), dtype=np.int64, count=P.size - k) & _MASK
            crc_ok = got == crc
            _crc_mismatches(w, P, total, crc, got, crc_ok)
        codes, names = _topics(u8, mv, P + tstart, tlen) if fields and topics else (np.zeros(0, np.int64), [])
        extra: dict[str, Any] = {}
        if "bodies" in extract:
            extra["body_blob"] = _blob(u8, mv, body_at, blen)
        if "properties" in extract:
            extra["properties_blob"] = _blob(u8, mv, P + prel + 2, plen)
        if "hosts" in extract:
            extra.update(_host_columns(u8, P, sysflag))
    finally:
        mv.release()
    w.problems.sort(key=lambda p: p.position)
    empty = np.zeros(0, dtype=np.int64)

    return ParsedRange(
        file_start=base,
        position=P,
        size=total,
        version=np.where(v1, 1, 2).astype(np.int8),
        body_crc=crc,
        crc_ok=crc_ok,
        queue_id=X[3] if fields else empty,
        flag=X[4] if fields else empty,
        queue_offset=X[5] if fields else empty,
        physical_offset=X[6] if fields else empty,
        sysflag=sysflag,
        born_timestamp=X[8] if fields else empty,
        store_timestamp=Y[0] if fields else empty,
        reconsume_times=Y[1] if fields else empty,
        prepared_tx_offset=Y[2] if fields else empty,
        body_length=blen,
        topic_codes=codes,
        topic_names=names,
        problems=w.problems,
        walk_end=walk_end,
        **extra,
    )


def _empty(base: int, w: _Walker, P: np.ndarray, walk_end: int, extract: tuple[str, ...]) -> ParsedRange:
    """`_columns` of no records: its columns' dtypes, its empty items."""
    e = np.zeros(0, dtype=np.int64)
    extra: dict[str, Any] = {}
    for name, key in (("bodies", "body_blob"), ("properties", "properties_blob")):
        if name in extract:
            extra[key] = Blob(np.zeros(1, dtype=np.int64), b"")
    if "hosts" in extract:
        extra.update(
            born_host_codes=np.zeros(0, dtype=np.int32), store_host_codes=np.zeros(0, dtype=np.int32)
        )
    w.problems.sort(key=lambda p: p.position)
    cols: dict[str, Any] = {c: e.copy() for c in _COLUMNS[1:]}
    cols.update(version=np.zeros(0, dtype=np.int8), crc_ok=np.ones(0, dtype=bool))
    return ParsedRange(
        file_start=base,
        position=P,
        topic_codes=e,
        topic_names=[],
        problems=w.problems,
        walk_end=walk_end,
        **cols,
        **extra,
    )


(
    _C_TOTAL,
    _C_VERSION,
    _C_BODY_CRC,
    _C_CRC_OK,
    _C_CRC_GOT,
    _C_QUEUE_ID,
    _C_FLAG,
    _C_QUEUE_OFFSET,
    _C_PHYS,
    _C_SYSFLAG,
    _C_BORN_TS,
    _C_STORE_TS,
    _C_RECONSUME,
    _C_PREPARED,
    _C_BODY_LEN,
    _C_OK,
    _C_TSTART,
    _C_TLEN,
    _C_PREL,
    _C_PLEN,
    _C_BREL,
    _C_TOPIC,
    _NCOL,
) = range(23)  # the rows of _cwalker.columns' `out`


def _columns_c(
    buf: Buf,
    u8: np.ndarray,
    w: _Walker,
    P: np.ndarray,
    walk_end: int,
    check_crc: bool,
    fields: bool,
    extract: tuple[str, ...],
    crc_known: int,
    topics: bool,
) -> ParsedRange:
    """`_columns` with the compiled walker: its layout checks, BODYCRC, fields and topic codes in one
    pass over the records (the GIL released); the reasons of the damage it finds and the extracted items
    are made here, as for the numpy walker."""
    base = w.base
    P = np.ascontiguousarray(P, dtype=np.int64)
    out = np.empty((_NCOL, P.size), dtype=np.int64)
    raw_names = _cw.columns(buf, base, P, check_crc, crc_known, fields, topics, out)
    ok = out[_C_OK] != 0
    if not ok.all():
        _corrupt(buf, w, P[~ok])
        P, out = P[ok], out[:, ok]
    crc = out[_C_BODY_CRC]
    crc_ok = out[_C_CRC_OK] != 0
    if check_crc:
        _crc_mismatches(w, P, out[_C_TOTAL], crc, out[_C_CRC_GOT], crc_ok)
    blen, sysflag = out[_C_BODY_LEN], out[_C_SYSFLAG]
    if fields and topics:
        codes, names = _topic_order(out[_C_TOPIC], raw_names, out[_C_TLEN])
    else:
        codes, names = np.zeros(0, np.int64), []
    extra: dict[str, Any] = {}
    if extract:
        mv = memoryview(buf)
        try:
            if "bodies" in extract:
                extra["body_blob"] = _blob_c(u8, P + out[_C_BREL] + 4, blen)
            if "properties" in extract:
                extra["properties_blob"] = _blob_c(u8, P + out[_C_PREL] + 2, out[_C_PLEN])
        finally:
            mv.release()
        if "hosts" in extract:
            extra.update(_host_columns(u8, P, sysflag))
    w.problems.sort(key=lambda p: p.position)
    empty = np.zeros(0, dtype=np.int64)

    def col(row: int) -> np.ndarray:
        return out[row] if fields else empty

    return ParsedRange(
        file_start=base,
        position=P,
        size=out[_C_TOTAL],
        version=out[_C_VERSION].astype(np.int8),
        body_crc=crc,
        crc_ok=crc_ok,
        queue_id=col(_C_QUEUE_ID),
        flag=col(_C_FLAG),
        queue_offset=col(_C_QUEUE_OFFSET),
        physical_offset=col(_C_PHYS),
        sysflag=sysflag,
        born_timestamp=col(_C_BORN_TS),
        store_timestamp=col(_C_STORE_TS),
        reconsume_times=col(_C_RECONSUME),
        prepared_tx_offset=col(_C_PREPARED),
        body_length=blen,
        topic_codes=codes,
        topic_names=names,
        problems=w.problems,
        walk_end=walk_end,
        **extra,
    )


def _topic_order(codes: np.ndarray, raw: list[bytes], tlen: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """The compiled walker's topic codes (into `raw`, which may hold topics no record here has)
    renumbered in the numpy walker's order (`_topics`: the topics of these records by length, then bytes,
    per block of about 8 MiB of topic rows; first appearance when a topic is longer than 256 bytes), so
    that both walkers give the same codes and names."""
    if not codes.size:
        return np.zeros(0, dtype=np.int64), []
    m = len(raw)
    width = int(tlen.max())
    present = _nz(np.bincount(codes, minlength=m))
    if width > 256:  # first appearance
        first = np.full(m, codes.size, dtype=np.int64)
        np.minimum.at(first, codes, np.arange(codes.size))
        order = present[np.argsort(first[present], kind="stable")]
    elif codes.size <= max(1, (8 << 20) // (width + 2)) or present.size == 1:
        order = np.asarray(sorted(present.tolist(), key=lambda c: (len(raw[c]), raw[c])), dtype=np.int64)
    else:
        step = max(1, (8 << 20) // (width + 2))
        key_rank = np.empty(m, dtype=np.int64)
        key_rank[
            np.asarray(sorted(present.tolist(), key=lambda c: (len(raw[c]), raw[c])), dtype=np.int64)
        ] = np.arange(present.size)
        seen = np.zeros(m, dtype=bool)
        chunks = []
        for s in range(0, codes.size, step):
            fresh = _nz((np.bincount(codes[s : s + step], minlength=m) > 0) & ~seen)
            fresh = fresh[np.argsort(key_rank[fresh])]
            seen[fresh] = True
            chunks.append(fresh)
        order = np.concatenate(chunks)
    rank = np.full(m, -1, dtype=np.int64)
    rank[order] = np.arange(order.size)
    return rank[codes], [raw[c].decode("utf-8", errors="replace") for c in order.tolist()]


def _topics(u8: np.ndarray, mv: memoryview, at: np.ndarray, tlen: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Each record's topic as a code into the distinct names: the topic bytes of many records compared at
    once as fixed-width rows (np.unique, in blocks of about 8 MiB), decoded once per distinct topic."""
    names: dict[bytes, int] = {}
    if not at.size:
        return np.zeros(0, dtype=np.int64), []
    width = int(tlen.max())
    if width > 256:  # v2 topics this long are rare: one dict lookup per record
        codes = np.fromiter(
            (
                names.setdefault(bytes(mv[a : a + b]), len(names))
                for a, b in zip(at.tolist(), tlen.tolist(), strict=True)
            ),
            dtype=np.int64,
            count=at.size,
        )
        return codes, [k.decode("utf-8", errors="replace") for k in names]
    cols = np.arange(max(width, 1))
    codes = np.empty(at.size, dtype=np.int64)
    step = max(1, (8 << 20) // (width + 2))
    for s in range(0, at.size, step):
        a, ln = at[s : s + step], tlen[s : s + step]
        rows = np.where(cols < ln[:, None], row_bytes(u8, a, cols.size), 0).astype(np.uint8)
        # the length too: a topic ending in NUL bytes differs from a shorter one
        key = np.ascontiguousarray(
            np.concatenate([ln.astype(">u2").view(np.uint8).reshape(-1, 2), rows], axis=1)
        )
        uniq, inv = _unique(key.view(f"V{key.shape[1]}").ravel())
        local = np.fromiter(
            (
                names.setdefault(bytes(u)[2 : 2 + int.from_bytes(bytes(u)[:2], "big")], len(names))
                for u in uniq
            ),
            dtype=np.int64,
            count=uniq.size,
        )
        codes[s : s + step] = local[inv.ravel()]
    return codes, [k.decode("utf-8", errors="replace") for k in names]


def _hosts(u8: np.ndarray, at: np.ndarray, width: np.ndarray, names: dict[bytes, int]) -> np.ndarray:
    """Each record's `ip:port` at `at` (records that lie inside the buffer) as a code into `names` (the
    distinct raw addresses, added to as met; a few hosts send most messages): the addresses compared as
    fixed-width rows in blocks of about 8 MiB."""
    codes = np.empty(at.size, dtype=np.int32)
    if at.size and bool((width == 8).all()):  # IPv4 only: each address and port is one 8-byte integer
        uniq, inv = _unique(_gather(u8, at, ">u8"))
        pad = bytes(12)
        local = np.fromiter(
            (
                names.setdefault(b"\x08" + (v & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "big") + pad, len(names))
                for v in uniq.tolist()
            ),
            dtype=np.int32,
            count=uniq.size,
        )
        codes[:] = local[inv.ravel()]
        return codes
    cols = np.arange(20)
    step = 1 << 18
    for s in range(0, at.size, step):
        a, w = at[s : s + step], width[s : s + step]
        rows = np.where(cols < w[:, None], u8[np.minimum(a[:, None] + cols, u8.size - 1)], 0).astype(np.uint8)
        key = np.ascontiguousarray(np.concatenate([w.astype(np.uint8)[:, None], rows], axis=1))
        uniq, inv = _unique(key.view("V21").ravel())
        local = np.fromiter(
            (names.setdefault(bytes(u), len(names)) for u in uniq), dtype=np.int32, count=uniq.size
        )
        codes[s : s + step] = local[inv.ravel()]
    return codes
