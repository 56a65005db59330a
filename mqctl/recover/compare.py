"""Compare two stores: same broker set?, which is fresher, where their histories part, split brain."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mqctl.camel import camel_fields
from mqctl.recover.inspect import EMPTY, NO_STORE, StoreReport
from mqctl.store.epochfile import end_offsets, find_consistent_point

__all__ = ["EQUAL", "Comparison", "compare_reports", "freshness"]

EQUAL = "equal"  # Comparison.fresher when both stores are as fresh (same last epoch and max offset)


def freshness(r: StoreReport) -> tuple[int, int]:
    """The key a store is ranked by: (last epoch, max offset)."""
    return (r.last_epoch, r.max_offset)


@dataclass
class Comparison:
    a: str
    b: str
    same_broker_set: bool
    reasons: list[str] = field(default_factory=list)  # why not the same set
    fresher: str | None = None  # path of the fresher store, "equal", or None
    # when not compared (no store)
    consistent_point: int = -1
    a_bytes_beyond: int = 0
    b_bytes_beyond: int = 0
    split_brain: list[dict[str, int]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return camel_fields(self)


def _held_ends(r: StoreReport) -> list[int]:
    """Each epoch's end as far as the store holds bytes (never past its max offset)."""
    return [min(end, r.max_offset) for end in end_offsets(r.epochs, r.max_offset)]


def compare_reports(a: StoreReport, b: StoreReport) -> Comparison:
    c = Comparison(a.path, b.path, False)
    for r in (a, b):
        if r.state == NO_STORE:
            c.reasons.append(f"{r.path}: no store")
    if c.reasons:
        return c
    if a.cluster_name is None or b.cluster_name is None:
        for r in (a, b):
            if r.cluster_name is None:
                c.reasons.append(f"{r.path}: no brokerIdentity and no initial signature: broker set unknown")
    elif (a.cluster_name, a.broker_name) != (b.cluster_name, b.broker_name):
        c.reasons.append(
            f"different broker sets: {a.cluster_name}/{a.broker_name} and {b.cluster_name}/{b.broker_name}"
        )
    sa, sb = a.signature, b.signature
    if sa and sb and sa.initial and sb.initial and sa.initial.id != sb.initial.id:
        c.reasons.append(f"initial signatures differ: {sa.initial.id[:12]} and {sb.initial.id[:12]}")
    fa, fb = freshness(a), freshness(b)
    c.fresher = EQUAL if fa == fb else (a.path if fa > fb else b.path)
    if a.state == EMPTY or b.state == EMPTY:
        # an empty store joins any set: everything the other holds is beyond the start
        c.consistent_point = a.min_offset if a.state == EMPTY else b.min_offset
        c.a_bytes_beyond = max(0, a.max_offset - c.consistent_point)
        c.b_bytes_beyond = max(0, b.max_offset - c.consistent_point)
        c.same_broker_set = not c.reasons
        return c
    if not a.epochs or not b.epochs:
        for r in (a, b):
            if not r.epochs:
                c.reasons.append(f"{r.path}: holds messages but no epoch history")
        return c
    cp = find_consistent_point(a.epochs, a.max_offset, b.epochs, b.max_offset)
    if cp < 0:
        c.consistent_point = cp
        c.reasons.append("epoch histories conflict: no epoch with the same start offset in both")
        return c
    # RocketMQ keeps Long.MAX_VALUE as the end of a last epoch that starts past the store's max offset
    # (its tail was lost); no store holds bytes past its own end, so the histories agree at most that far
    cp = min(cp, a.max_offset, b.max_offset)
    c.consistent_point = cp
    c.a_bytes_beyond = a.max_offset - cp
    c.b_bytes_beyond = b.max_offset - cp
    a_ends = dict(zip((e.epoch for e in a.epochs), _held_ends(a), strict=True))
    b_ends = dict(zip((e.epoch for e in b.epochs), _held_ends(b), strict=True))
    b_by = {e.epoch: e for e in b.epochs}
    for e in a.epochs:
        o = b_by.get(e.epoch)
        if o is None or o.start_offset == e.start_offset:
            continue
        a_bytes = max(0, a_ends[e.epoch] - e.start_offset)
        b_bytes = max(0, b_ends[e.epoch] - o.start_offset)
        if a_bytes > 0 and b_bytes > 0:
            c.split_brain.append(
                {
                    "epoch": e.epoch,
                    "aStartOffset": e.start_offset,
                    "aBytes": a_bytes,
                    "bStartOffset": o.start_offset,
                    "bBytes": b_bytes,
                }
            )
            c.warnings.append(
                f"SPLIT BRAIN: both stores hold records under epoch {e.epoch} past the "
                f"consistent point {cp} ({a.path} from {e.start_offset}, {a_bytes} bytes; "
                f"{b.path} from {o.start_offset}, {b_bytes} bytes): two masters in one epoch"
            )
    c.same_broker_set = not c.reasons
    return c
