"""The decision history's storage: entries kept as canonical JSON text in chunks."""

from __future__ import annotations

import json
import zlib
from array import array
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, overload

HISTORY_CHUNK = 256  # history entries per buffer (History)


def _canonical(doc: object) -> str:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"))


class History:
    """The retained decision history, oldest first. Each entry is kept as its canonical JSON text
    (what the state hash and the snapshot are made of anyway; reading an entry decodes it), in
    chunks of HISTORY_CHUNK entries: a buffer of the texts, each followed by a comma, and the
    offsets where they end. No Python object per entry: a fleet registering adds and drops
    thousands of entries, and as objects they left the allocator's pages full of holes among the
    state's own small objects. A full chunk is kept zlib-compressed (about 20x: the entries repeat
    their keys and phrases), the chunk being filled as it is. Entries never change."""

    __slots__ = ("_chunks", "_count", "_first", "_opened")

    def __init__(self, entries: Iterable[Mapping[str, Any]] = ()) -> None:
        # (compressed texts of a full chunk, or the growing texts of the last one; their ends)
        self._chunks: list[tuple[bytes | bytearray, array[int]]] = []
        self._first = 0  # entries of the first chunk trimmed away
        self._count = 0
        self._opened: tuple[bytes, bytes] = (b"", b"")  # the last full chunk read: (compressed, texts)
        for entry in entries:
            self.append(entry)

    def append(self, entry: Mapping[str, Any]) -> None:
        if not self._chunks or len(self._chunks[-1][1]) == HISTORY_CHUNK:
            if self._chunks:
                self._chunks[-1] = (zlib.compress(self._chunks[-1][0]), self._chunks[-1][1])
            self._chunks.append((bytearray(), array("q")))
        buf, ends = self._chunks[-1]
        assert isinstance(buf, bytearray)
        buf += _canonical(entry).encode("ascii")  # json.dumps escapes everything else
        buf += b","
        ends.append(len(buf))
        self._count += 1

    def trim(self, keep: int) -> None:
        """Keep the newest `keep` entries."""
        drop = self._count - max(0, keep)
        while drop > 0:
            left = len(self._chunks[0][1]) - self._first
            if drop < left:
                self._first += drop
                self._count -= drop
                return
            self._chunks.pop(0)
            self._first = 0
            self._count -= left
            drop -= left

    def _chunk(self, n: int) -> tuple[bytes | bytearray, array[int]]:
        """Chunk n's texts, decompressed, and their ends."""
        buf, ends = self._chunks[n]
        if isinstance(buf, bytearray):
            return buf, ends
        opened = self._opened
        if opened[0] is not buf:
            opened = self._opened = (buf, zlib.decompress(buf))
        return opened[1], ends

    def _text(self, i: int) -> str:
        at = i + self._first
        buf, ends = self._chunk(at // HISTORY_CHUNK)
        k = at % HISTORY_CHUNK
        return buf[ends[k - 1] if k else 0 : ends[k] - 1].decode("ascii")

    def _texts(self) -> Iterator[str]:
        return (self._text(i) for i in range(self._count))

    def json_parts(self) -> Iterator[str]:
        """The JSON array of the entries, in pieces (a chunk a piece)."""
        yield "["
        last = len(self._chunks) - 1
        for n in range(len(self._chunks)):
            buf, ends = self._chunk(n)
            start = ends[self._first - 1] if n == 0 and self._first else 0
            yield buf[start : len(buf) - (n == last)].decode("ascii")  # no comma after the last
        yield "]"

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, i: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, i: slice) -> list[dict[str, Any]]: ...
    def __getitem__(self, i: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(i, slice):
            return [json.loads(self._text(k)) for k in range(*i.indices(self._count))]
        if not -self._count <= i < self._count:
            raise IndexError("history index out of range")
        return json.loads(self._text(i % self._count))  # type: ignore[no-any-return]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (json.loads(t) for t in self._texts())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, History):
            return list(other._texts()) == list(self._texts())
        if isinstance(other, list):
            return list(self) == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"History({self._count} entries)"


# Stand-ins spliced out of the canonical JSON text (ControllerState.canonical_json): control
# characters, which json escapes, so no name or value of the state can be mistaken for them.


# What `_cause` says, as the few values of a metric label (mqctl_elections_total's cause).
ELECTION_CAUSES: tuple[tuple[str, str], ...] = (
    ("lease expired", "lease_expired"),
    ("bounced master", "bounced_master"),
    ("switchover", "switchover"),
    ("rebalance", "rebalance"),
    ("admin request", "admin"),
    ("controller", "controller"),
    ("broker request", "broker_request"),
)


def election_cause(cause: str) -> str:
    """The kind of a history entry's cause (ELECTION_CAUSES), "other" for none of them."""
    return next((kind for prefix, kind in ELECTION_CAUSES if cause.startswith(prefix)), "other")
