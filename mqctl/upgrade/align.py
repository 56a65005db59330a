"""Are the stores of one broker set aligned? Same max offset and identical bytes at the tail.

Changing which broker is master across the upgrade truncates whatever the others hold beyond the
new master (reference section 11: "the commitlogs must be aligned first"). For every pair of stores
the identical prefix is found from the tail backwards (chunk by chunk, a bounded number of bytes);
from it follows, for each store as a candidate master, how many bytes every other store would lose.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mqctl.recover.inspect import StoreReport
from mqctl.store.commitlog import COMMITLOG_DIR, CommitLog

CHUNK = 64 << 10
SCAN_LIMIT = 64 << 20

__all__ = ["CHUNK", "SCAN_LIMIT", "SetAlignment", "align", "common_prefix", "read_range"]


def read_range(log: CommitLog, start: int, end: int) -> bytes:
    """Bytes [start, end) of a commitlog across its files (zeros where a file is short)."""
    out = bytearray()
    pos = start
    while pos < end:
        i = log.file_for(pos)
        if i < 0:
            break
        lf = log.files[i]
        upto = min(end, lf.start + log.file_size)
        with open(lf.path, "rb") as fh:
            fh.seek(pos - lf.start)
            data = fh.read(upto - pos)
        out += data + bytes(upto - pos - len(data))
        pos = upto
    return bytes(out)


def _log(rep: StoreReport) -> CommitLog | None:
    if rep.max_offset <= rep.min_offset:
        return None
    return CommitLog(Path(rep.path) / COMMITLOG_DIR)


def common_prefix(
    a: StoreReport, b: StoreReport, *, chunk: int = CHUNK, limit: int = SCAN_LIMIT
) -> tuple[int, bool]:
    """(end of the identical prefix, exact): the first offset from which a and b differ, looking back
    from the shorter max offset. `exact` is False when the difference reaches further back than
    `limit` bytes (the prefix end is then an upper bound)."""
    m = min(a.max_offset, b.max_offset)
    lo = max(a.min_offset, b.min_offset)
    la, lb = _log(a), _log(b)
    if la is None or lb is None or m <= lo:
        return m, True
    diff_at: int | None = None
    pos, scanned = m, 0
    while pos > lo:
        if scanned >= limit:
            return diff_at if diff_at is not None else m, False
        s = max(lo, pos - chunk)
        x, y = read_range(la, s, pos), read_range(lb, s, pos)
        if x == y:
            break
        first = next(i for i in range(len(x)) if x[i] != y[i])
        diff_at = s + first
        scanned += pos - s
        pos = s
    return (m if diff_at is None else diff_at), True


@dataclass
class SetAlignment:
    cluster_name: str | None
    broker_name: str | None
    stores: list[str]
    max_offsets: dict[str, int]
    prefixes: dict[tuple[str, str], int] = field(default_factory=dict)
    inexact: bool = False
    losses: dict[str, dict[str, int]] = field(default_factory=dict)  # candidate -> store -> bytes lost
    notes: list[str] = field(default_factory=list)

    @property
    def aligned(self) -> bool:
        return all(not v for per in self.losses.values() for v in per.values())

    @property
    def best(self) -> str:
        """The candidate master whose start loses the fewest bytes elsewhere (first given on ties)."""
        return min(self.stores, key=lambda s: (sum(self.losses[s].values()), self.stores.index(s)))

    def summary(self) -> str:
        name = f"{self.cluster_name}/{self.broker_name}" if self.broker_name else "stores given"
        offsets = ", ".join(f"{s} {self.max_offsets[s]}" for s in self.stores)
        if len(self.stores) < 2:
            return f"{name}: one store only ({offsets}); nothing to compare"
        if self.aligned:
            return (
                f"{name}: aligned: max offset {self.max_offsets[self.stores[0]]} on every store, "
                f"tail identical"
            )
        return f"{name}: NOT aligned: max offsets {offsets}"

    def details(self) -> list[str]:
        """One line per store that differs from a candidate, and what each candidate costs."""
        out: list[str] = []
        if self.aligned or len(self.stores) < 2:
            return out
        for i, a in enumerate(self.stores):
            for b in self.stores[i + 1 :]:
                p = self.prefixes[(a, b)]
                ma, mb = self.max_offsets[a], self.max_offsets[b]
                if p == ma == mb:
                    continue
                what = f"{a} and {b}: identical up to offset {p}"
                if p < min(ma, mb):
                    what += f", then their bytes differ ({min(ma, mb) - p} bytes of the common range)"
                if ma != mb:
                    far, near = (a, b) if ma > mb else (b, a)
                    what += f"; {far} is {abs(ma - mb)} bytes ahead of {near}"
                out.append(what)
        for c in self.stores:
            lost = {s: n for s, n in self.losses[c].items() if n}
            if lost:
                parts = ", ".join(
                    f"{s} loses {n} bytes (offsets {self.max_offsets[s] - n}-{self.max_offsets[s]})"
                    for s, n in lost.items()
                )
                out.append(f"if {c} starts as master: {parts}")
            else:
                out.append(f"if {c} starts as master: no store loses data (the others catch up from it)")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "clusterName": self.cluster_name,
            "brokerName": self.broker_name,
            "aligned": self.aligned,
            "stores": [{"store": s, "maxOffset": self.max_offsets[s]} for s in self.stores],
            "identicalUpTo": [{"a": a, "b": b, "offset": p} for (a, b), p in self.prefixes.items()],
            "exact": not self.inexact,
            "lossIfMaster": {c: dict(v) for c, v in self.losses.items()},
            "leastLoss": self.best if self.stores else None,
            "summary": self.summary(),
            "details": self.details(),
            "notes": list(self.notes),
        }


def align(
    reports: list[StoreReport], cluster_name: str | None = None, broker_name: str | None = None
) -> SetAlignment:
    """Compare every pair of `reports` (the stores of one broker set). Pure reading."""
    paths = [r.path for r in reports]
    res = SetAlignment(cluster_name, broker_name, paths, {r.path: r.max_offset for r in reports})
    for i, a in enumerate(reports):
        for b in reports[i + 1 :]:
            p, exact = common_prefix(a, b)
            res.prefixes[(a.path, b.path)] = p
            res.prefixes[(b.path, a.path)] = p
            if not exact:
                res.inexact = True
    if res.inexact:
        res.notes.append(
            f"stores differ for more than the {SCAN_LIMIT} bytes checked: the prefix ends are "
            f"upper bounds and the losses lower bounds"
        )
    for c in reports:
        res.losses[c.path] = {
            o.path: max(0, o.max_offset - res.prefixes[(c.path, o.path)]) for o in reports if o is not c
        }
    for r in reports:
        if r.max_offset <= r.min_offset:
            res.notes.append(f"{os.fspath(r.path)}: no messages")
    # keep the mirrored keys out of the JSON pairs
    res.prefixes = {k: v for k, v in res.prefixes.items() if paths.index(k[0]) < paths.index(k[1])}
    return res
