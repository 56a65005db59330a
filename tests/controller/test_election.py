"""The election policy: total order, no tie drop, no offset overflow, RocketMQ tryElect rules."""

from __future__ import annotations

from mqctl.controller.core import LiveInfo
from mqctl.controller.election import elect, election_key, freshest, order_candidates, try_elect


def row(bid: int, epoch: int = 1, off: int = 0, prio: int = 2**31 - 1) -> LiveInfo:
    return LiveInfo(bid, "", 0, epoch, off, -1, prio, 0, 10_000)


def always(_: int) -> bool:
    return True


def test_order_epoch_then_offset_then_priority_then_id() -> None:
    live = {1: row(1, 1, 100), 2: row(2, 2, 0), 3: row(3, 2, 50), 4: row(4, 2, 50, 1), 5: row(5, 2, 50, 1)}
    assert order_candidates([1, 2, 3, 4, 5], live) == [4, 5, 3, 2, 1]


def test_ties_are_not_dropped() -> None:
    live = {b: row(b, 1, 10, 5) for b in (7, 3, 9)}
    assert order_candidates([9, 7, 3], live) == [3, 7, 9]
    assert freshest([9, 7, 3], live) == 3


def test_offset_gap_beyond_int32_does_not_overflow() -> None:
    # RocketMQ's (int)(o2 - o1) with a gap of 2**32 gives 0 (tie) and 2**31 gives a wrong sign
    for gap in (2**31, 2**32, 2**40 + 1):
        live = {1: row(1, 1, 0), 2: row(2, 1, gap)}
        assert freshest([1, 2], live) == 2
        assert freshest([2, 1], live) == 2


def test_missing_row_sorts_last() -> None:
    assert election_key(5, None) == (1, 1, 2**31 - 1, 5)
    assert freshest([1, 2], {2: row(2, -1, -1)}) == 1  # equal to "no row": lower id
    assert freshest([1, 2], {2: row(2, 0, 0)}) == 2
    assert freshest([], {}) is None


def test_try_elect_rules() -> None:
    live = {1: row(1, 1, 10), 2: row(2, 1, 20), 3: row(3, 1, 30)}
    alive = {1, 2, 3}.__contains__
    assert try_elect([1, 2, 3], alive, live, old_master=1, prefer_id=None) == 1  # old master kept
    assert try_elect([1, 2, 3], alive, live, old_master=1, prefer_id=1) == 1
    assert try_elect([1, 2, 3], alive, live, old_master=1, prefer_id=2) == 2
    assert try_elect([1, 2, 3], {1, 3}.__contains__, live, old_master=1, prefer_id=2) is None  # no fallback
    assert try_elect([1, 2, 3], {2, 3}.__contains__, live, old_master=1, prefer_id=None) == 3
    assert try_elect([1, 2, 3], lambda b: False, live, old_master=None, prefer_id=None) is None
    assert try_elect([], always, live, None, None) is None


def test_elect_sync_state_set_first_then_unclean() -> None:
    live = {1: row(1, 1, 10), 2: row(2, 1, 20), 3: row(3, 1, 30)}
    alive = {2, 3}.__contains__
    assert elect([1], None, 1, None, alive, live) is None
    assert elect([1], [1, 2, 3], 1, None, alive, live) == 3
    assert elect([1, 2], [1, 2, 3], 1, None, alive, live) == 2  # the SyncStateSet wins over fresher 3
    assert elect([1], [1, 2, 3], 1, 2, alive, live) == 2  # preferred broker outside the set (unclean)
