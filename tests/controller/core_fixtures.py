"""What the pure core's tests share: a decision's records as the log holds them, heartbeat rows,
and a call that decides and applies through the wire as a follower does."""

from __future__ import annotations

from typing import Any

from mqctl.controller.core import Context, ControllerState, LiveInfo, Result, decide
from mqctl.controller.records import decode, encode

C, S = "cluster-a", "broker-set-a"
ADDR = {1: "127.0.0.1:9000", 2: "127.0.0.1:9001", 3: "127.0.0.1:9002"}
NOW = 1_000_000


def wire(r: Result) -> list[dict[str, Any]]:
    """The records of a decision as the log holds them (without the version field)."""
    return [{k: v for k, v in encode(x).items() if k != "v"} for x in r.records]


def ctx(
    alive: tuple[int, ...] = (),
    dead: tuple[int, ...] = (),
    info: dict[int, tuple[int, int, int]] | None = None,
    name: str = S,
) -> Context:
    """alive/dead heartbeat rows; info: id -> (epoch, max_offset, priority)."""
    rows: dict[int, LiveInfo] = {}
    info = info or {}
    for bid in (*alive, *dead):
        epoch, off, prio = info.get(bid, (-1, -1, 2**31 - 1))
        last = NOW if bid in alive else NOW - 20_000
        rows[bid] = LiveInfo(bid, ADDR.get(bid, ""), 0, epoch, off, -1, prio, last, 10_000)
    return Context(NOW, {name: rows})


ALL = ctx(alive=(1, 2, 3))


def call(state: ControllerState, method: str, req: dict[str, Any], c: Context | None = None) -> Result:
    """Decide (which must not change the state), then apply the records read back from the wire."""
    before = state.state_hash()
    r = decide(state, method, req, c or Context(NOW))
    assert state.state_hash() == before, "a decision must not change the state"
    for e in wire(r):
        state.apply(decode(e))
    return r
