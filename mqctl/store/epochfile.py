"""`epochFileCheckpoint` and its `.bak` (reference section 7.2) plus RocketMQ's EpochFileCache rules.

Layout (UTF-8, `\\n` line ends)::

    N                       number of entries
    CRC                     crc32(entry block) & 0x7FFFFFFF; 0 means "do not check"
    <epoch>-<startOffset>   one per entry, each ending in \\n

Reading follows RocketMQ: a line that does not split into exactly two parts on `-` is skipped, the
count must match, the CRC (over every line after the CRC line as read, skipped ones included) must match
unless it is 0; when the main file fails (or yields no entries)
the `.bak` is read instead. Writing follows RocketMQ too: an empty list writes nothing; otherwise the
previous content goes to `.bak`, then the file is replaced.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mqctl.errors import StoreError
from mqctl.store._util import crc32_masked, read_bytes, store_error, string_to_file

EPOCH_FILE = "epochFileCheckpoint"
LONG_MAX = (1 << 63) - 1

__all__ = [
    "EPOCH_FILE",
    "LONG_MAX",
    "EpochCacheView",
    "EpochEntry",
    "EpochFileRead",
    "encode_epoch_file",
    "end_offsets",
    "epoch_path",
    "find_consistent_point",
    "find_entry_by_offset",
    "parse_epoch_file",
    "read_epoch_file",
    "truncate_suffix_by_offset",
    "validate_entries",
    "write_epoch_file",
]


@dataclass(frozen=True, order=True)
class EpochEntry:
    epoch: int
    start_offset: int

    def line(self) -> str:
        return f"{self.epoch}-{self.start_offset}"


@dataclass
class EpochCacheView:
    """A broker's epoch cache as GetBrokerEpochCache answers it (RocketMQ's GET_BROKER_EPOCH_CACHE,
    1007, the same over remoting): the broker, its epoch entries and its commitlog's max offset; where it
    was read (``broker_addr``, or ``store`` and the epoch file ``source``), what was wrong with it
    (``problems``) or why it could not be read at all (``error``). One type for the broker agents, the
    store's epoch service and the admin commands."""

    cluster_name: str = ""
    broker_name: str = ""
    broker_id: int | None = None
    entries: list[EpochEntry] = field(default_factory=list)
    max_offset: int | None = None
    broker_addr: str = ""
    store: str | None = None
    source: str | None = None
    problems: list[str] = field(default_factory=list)
    error: str | None = None

    def ends(self) -> list[int]:
        """Each entry's endOffset; the last one's is the max offset (mqadmin getBrokerEpoch,
        the broker's setLastEpochEntryEndOffset), Long.MAX_VALUE when unknown."""
        return end_offsets(self.entries, LONG_MAX if self.max_offset is None else self.max_offset)

    def answer(self) -> dict[str, Any]:
        """The answer's fields (snake_case, as mqctl.v1.Broker's GetBrokerEpochCacheResponse and the
        1007 body of mqctl.remoting.headers): code 1 SYSTEM_ERROR with ``error``, else 0 with the
        problems as the remark."""
        if self.error is not None:
            return {"code": 1, "remark": self.error}
        return {
            "code": 0,
            "remark": "; ".join(self.problems),
            "cluster_name": self.cluster_name,
            "broker_name": self.broker_name,
            "broker_id": -1 if self.broker_id is None else self.broker_id,
            "epoch_list": [
                {"epoch": e.epoch, "start_offset": e.start_offset, "end_offset": end}
                for e, end in zip(self.entries, self.ends(), strict=True)
            ],
            "max_offset": -1 if self.max_offset is None else self.max_offset,
        }

    @classmethod
    def from_answer(cls, d: dict[str, Any], address: str) -> EpochCacheView:
        """An answer (``answer()``'s keys, from gRPC or a 1007 body) from the broker at ``address``;
        a non-zero code becomes ``error``."""
        if int(d.get("code", 0)) != 0:
            return cls(broker_addr=address, error=f"{address}: code {d.get('code')}: {d.get('remark', '')}")
        bid, max_offset = int(d.get("broker_id", -1)), int(d.get("max_offset", -1))
        return cls(
            cluster_name=str(d.get("cluster_name", "")),
            broker_name=str(d.get("broker_name", "")),
            broker_id=bid if bid >= 0 else None,
            entries=[
                EpochEntry(int(e.get("epoch", 0)), int(e.get("start_offset", 0)))
                for e in d.get("epoch_list", [])
            ],
            max_offset=max_offset if max_offset >= 0 else None,
            broker_addr=address,
        )


@dataclass
class EpochFileRead:
    """What `read_epoch_file` found: the entries, which file they came from, and what was wrong."""

    entries: list[EpochEntry]
    source: str | None  # path read, None when neither file exists
    problems: list[str] = field(default_factory=list)


def entry_block(entries: Sequence[EpochEntry]) -> bytes:
    return "".join(e.line() + "\n" for e in entries).encode("utf-8")


def encode_epoch_file(entries: Sequence[EpochEntry]) -> bytes:
    block = entry_block(entries)
    return f"{len(entries)}\n{crc32_masked(block)}\n".encode() + block


def parse_epoch_file(data: bytes, path: str = EPOCH_FILE) -> list[EpochEntry]:
    """Parse one epoch file's bytes; StoreError naming the line and byte offset on any defect."""
    lines = data.split(b"\n")
    ends_with_nl = data.endswith(b"\n")
    if ends_with_nl:
        lines = lines[:-1]
    offsets = []
    off = 0
    for ln in lines:
        offsets.append(off)
        off += len(ln) + 1
    if not lines or (len(lines) == 1 and not lines[0]):
        raise store_error(path, "empty file, expected a count line", offset=0, line=1)

    def text(i: int) -> str:
        try:
            return lines[i].decode("utf-8").rstrip("\r")
        except UnicodeDecodeError as exc:
            raise store_error(path, "not UTF-8 text", offset=offsets[i] + exc.start, line=i + 1) from None

    count_txt = text(0)
    try:
        count = int(count_txt.strip(), 10)
        if count < 0:
            raise ValueError
    except ValueError:
        raise store_error(
            path, f"bad count line {count_txt[:40]!r}, expected a decimal entry count", offset=0, line=1
        ) from None
    if len(lines) < 2:
        raise store_error(path, "missing CRC line", offset=len(data), line=2)
    crc_txt = text(1)
    try:
        crc = int(crc_txt.strip(), 10)
    except ValueError:
        raise store_error(
            path, f"bad CRC line {crc_txt[:40]!r}, expected a decimal CRC", offset=offsets[1], line=2
        ) from None
    entries: list[EpochEntry] = []
    read: list[str] = []  # every line after the CRC line: RocketMQ's CRC covers them all
    for i in range(2, len(lines)):
        t = text(i)
        read.append(t)
        parts = t.split("-")
        while parts and not parts[-1]:
            parts.pop()  # Java's String.split drops trailing empty strings
        if len(parts) != 2:
            continue  # RocketMQ's fromLine skips such lines (the count check below catches them)
        try:
            e = EpochEntry(int(parts[0], 10), int(parts[1], 10))
        except ValueError:
            raise store_error(
                path, f"bad entry {t[:60]!r}, expected <epoch>-<startOffset>", offset=offsets[i], line=i + 1
            ) from None
        entries.append(e)
    if len(entries) != count:
        raise store_error(path, f"count line says {count} entries, found {len(entries)}", offset=0, line=1)
    if crc != 0:
        # CheckpointFile.read: CRC of each line read (skipped ones too) plus the line separator
        actual = crc32_masked("".join(t + "\n" for t in read).encode("utf-8"))
        if actual != crc:
            raise store_error(
                path, f"CRC mismatch: file says {crc}, entries give {actual}", offset=offsets[1], line=2
            )
    return entries


def epoch_path(root: str | os.PathLike[str]) -> Path:
    return Path(root) / EPOCH_FILE


def read_epoch_file(
    root: str | os.PathLike[str],
    *,
    path: str | os.PathLike[str] | None = None,
) -> EpochFileRead:
    """Read `<root>/epochFileCheckpoint` with RocketMQ's `.bak` fallback. Never writes.

    StoreError only when the main file fails and the `.bak` fails (or is absent) too."""
    main = Path(path) if path is not None else epoch_path(root)
    bak = main.with_name(main.name + ".bak")
    problems: list[str] = []
    main_err: StoreError | None = None
    data = read_bytes(main)
    if data is not None:
        try:
            entries = parse_epoch_file(data, str(main))
            if entries:
                return EpochFileRead(entries, str(main), problems)
            problems.append(f"{main}: no entries")
        except StoreError as exc:
            main_err = exc
            problems.append(str(exc))
    bdata = read_bytes(bak)
    if bdata is None:
        if main_err is not None:
            raise StoreError(f"{main_err} (and no {bak.name} to fall back to)")
        return EpochFileRead([], str(main) if data is not None else None, problems)
    try:
        entries = parse_epoch_file(bdata, str(bak))
    except StoreError as exc:
        if main_err is not None:
            raise StoreError(f"{main_err}; fallback {exc}") from None
        problems.append(str(exc))
        return EpochFileRead([], str(main) if data is not None else None, problems)
    if data is not None or main_err is not None:
        problems.append(f"using {bak.name}")
    else:
        problems.append(f"{main}: missing, using {bak.name}")
    return EpochFileRead(entries, str(bak), problems)


def write_epoch_file(
    root: str | os.PathLike[str], entries: Sequence[EpochEntry], *, path: str | os.PathLike[str] | None = None
) -> bool:
    """RocketMQ's CheckpointFile.write: an empty list writes nothing (returns False); otherwise the
    previous content goes to `.bak`, then the file. Entries must ascend strictly in epoch and offset."""
    validate_entries(entries, strict=True)
    if not entries:
        return False
    string_to_file(Path(path) if path is not None else epoch_path(root), encode_epoch_file(entries))
    return True


def validate_entries(entries: Sequence[EpochEntry], *, strict: bool = False) -> list[str]:
    """Problems with the order of entries (RocketMQ's appendEntry rule: epoch and startOffset ascend)."""
    problems = []
    for prev, cur in itertools.pairwise(entries):
        if cur.epoch <= prev.epoch or cur.start_offset < prev.start_offset:
            problems.append(
                f"entry {cur.line()} does not follow {prev.line()} (epochs and offsets must ascend)"
            )
    for e in entries:
        if e.epoch < 0 or e.start_offset < 0:
            problems.append(f"entry {e.line()} is negative")
    if strict and problems:
        raise ValueError("; ".join(problems))
    return problems


def end_offsets(entries: Sequence[EpochEntry], last_end: int = LONG_MAX) -> list[int]:
    """Each entry's endOffset: the next entry's start; the last one `last_end` (RocketMQ: Long.MAX_VALUE,
    or the store's max offset after setLastEpochEntryEndOffset, applied only if >= its start)."""
    ends = [e.start_offset for e in entries[1:]]
    if entries:
        last = entries[-1]
        ends.append(last_end if last_end >= last.start_offset else LONG_MAX)
    return ends


def find_consistent_point(
    local: Sequence[EpochEntry], local_max: int, other: Sequence[EpochEntry], other_max: int
) -> int:
    """EpochFileCache.findConsistentPoint with both last ends set to the stores' max offsets: walk the
    local epochs newest first; at the first epoch the other has with the same startOffset return
    min(localEnd, otherEnd). -1 when none matches."""
    lend = end_offsets(local, local_max)
    oend = end_offsets(other, other_max)
    by_epoch = {e.epoch: (e, oend[i]) for i, e in enumerate(other)}
    for i in range(len(local) - 1, -1, -1):
        e = local[i]
        hit = by_epoch.get(e.epoch)
        if hit is not None and hit[0].start_offset == e.start_offset:
            return min(lend[i], hit[1])
    return -1


def truncate_suffix_by_offset(entries: Sequence[EpochEntry], offset: int) -> list[EpochEntry]:
    """EpochFileCache.truncateSuffixByOffset: drop entries with startOffset >= offset."""
    return [e for e in entries if e.start_offset < offset]


def find_entry_by_offset(
    entries: Sequence[EpochEntry], offset: int, last_end: int = LONG_MAX
) -> EpochEntry | None:
    """The entry with start <= offset < end (EpochFileCache.findEpochEntryByOffset)."""
    for e, end in zip(entries, end_offsets(entries, last_end), strict=True):
        if e.start_offset <= offset < end:
            return e
    return None
