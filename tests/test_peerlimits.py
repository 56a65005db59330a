"""Per-peer bookkeeping of the listeners (mqctl.peerlimits) and the gRPC door's request
deserializers that never raise (issue 20). The real-process tests are tests/grpc/test_grpc_fuzz.py,
tests/grpc/test_grpc_limits.py and tests/remoting/test_remoting_limits.py."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqctl import methods
from mqctl.grpc.server import Undecodable, safe_deserializer
from mqctl.peerlimits import CallGuard, PeerLog, PeerSlots, peer_address


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("peer", "address"),
    [
        ("ipv4:127.0.0.1:5555", "127.0.0.1"),
        ("ipv6:[::1]:5555", "::1"),
        ("ipv6:[2001:db8::7]:80", "2001:db8::7"),
        ("127.0.0.1:5555", "127.0.0.1"),
        ("unix:/tmp/sock", "unix:/tmp/sock"),
        ("garbage", "garbage"),
    ],
)
def test_peer_address(peer: str, address: str) -> None:
    assert peer_address(peer) == address


def test_peer_log_one_line_a_minute_per_address(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    plog = PeerLog(logging.getLogger("t.peerlog"), interval=60, clock=clock)
    caplog.set_level(logging.INFO, logger="t.peerlog")
    assert plog.warning("127.0.0.1", "bad request from %s", "127.0.0.1:1")
    for i in range(100):
        assert not plog.warning("127.0.0.1", "bad request from %s", f"127.0.0.1:{i}")
    assert plog.warning("127.0.0.2", "bad request from %s", "127.0.0.2:1")  # another address: its own line
    clock.now += 61
    assert plog.warning("127.0.0.1", "bad request from %s", "127.0.0.1:2")
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "bad request from 127.0.0.1:1",
        "bad request from 127.0.0.2:1",
        "bad request from 127.0.0.1:2 (100 more from 127.0.0.1 not logged)",
    ]


def test_peer_log_budget_and_memory_are_bounded(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    plog = PeerLog(logging.getLogger("t.budget"), interval=60, budget=5, max_peers=10, clock=clock)
    caplog.set_level(logging.INFO, logger="t.budget")
    logged = sum(plog.warning(f"127.0.1.{i}", "x") for i in range(1000))  # many addresses at once
    assert logged == 5 and len(caplog.records) == 5
    assert len(plog._peers) == 10


def test_peer_slots_per_connection_address_and_total() -> None:
    slots = PeerSlots(
        per_connection=2, per_address=3, total=4, what="watch streams", options=("--c", "--a", "--t")
    )
    assert slots.acquire("a:1", "a") is None and slots.acquire("a:1", "a") is None
    refused = slots.acquire("a:1", "a")  # the greedy connection is full ...
    assert refused is not None and refused.limit == "connection"
    assert refused.message.startswith("too many watch streams on this connection: at most 2 (--c)")
    assert slots.acquire("a:2", "a") is None  # ... its address has one more
    refused = slots.acquire("a:3", "a")
    assert refused is not None and refused.limit == "address" and "from a: at most 3 (--a)" in refused.message
    assert slots.acquire("b:1", "b") is None  # another client still gets one
    refused = slots.acquire("c:1", "c")
    assert refused is not None and refused.limit == "total"
    slots.release("a:1", "a")
    assert slots.acquire("c:1", "c") is None
    assert slots.count() == 4 and slots.count(address="a") == 2 and slots.count(connection="a:1") == 1
    for conn, addr in (("a:1", "a"), ("a:2", "a"), ("b:1", "b"), ("c:1", "c")):
        slots.release(conn, addr)
    assert slots.count() == 0 and not slots._by_address and not slots._by_connection


def test_peer_slots_zero_means_no_limit() -> None:
    slots = PeerSlots(per_connection=0, per_address=0, total=3)
    assert all(slots.acquire("x:1", "x") is None for _ in range(3))
    assert slots.acquire("x:1", "x") is not None


def test_call_guard_never_refuses_calls_that_are_not_late() -> None:
    clock = Clock()
    guard = CallGuard(per_connection=2, per_address=4, total=8, clock=clock)
    tokens = [guard.enter("a:1", "a", lambda: None) for _ in range(100)]  # a burst, all on time
    assert all(refused is None for _, refused in tokens)
    for token, _ in tokens:
        guard.leave(token)
    assert guard.waiting() == 0


def test_call_guard_refuses_and_cancels_late_calls() -> None:
    clock = Clock()
    cancelled: list[str] = []
    guard = CallGuard(
        per_connection=2, per_address=3, total=4, stall=1.0, clock=clock, options=("--c", "--a", "--t")
    )

    def enter(conn: str, addr: str) -> str | None:
        _, refused = guard.enter(conn, addr, lambda: cancelled.append(conn))
        return refused

    for conn, addr in [("a:1", "a")] * 5 + [("a:2", "a")] * 2 + [("b:1", "b")] * 3:
        assert enter(conn, addr) is None
    clock.now += 1.5  # all ten are late now
    refused = enter("a:1", "a")
    assert refused is not None and "on this connection: at most 2 (--c)" in refused
    refused = enter("a:3", "a")
    assert refused is not None and "from this address: at most 3 (--a)" in refused
    assert enter("c:1", "c") is None  # the total limit refuses nobody
    cancelled_by_address = guard.sweep()
    # kept, the earliest first: a:1 twice, a:2 once (a's 3), b:1 once (4 in total); the others cancelled
    assert cancelled_by_address == {"a": 4, "b": 2}
    assert sorted(cancelled) == ["a:1", "a:1", "a:1", "a:2", "b:1", "b:1"]
    assert guard.sweep() == {}  # cancelled once
    # on probation, a connection may keep only its maximum of waiting calls, late or not
    clock.now += 0.1
    _, refused = guard.enter("b:1", "b", lambda: None)
    assert refused is None
    _, refused = guard.enter("b:1", "b", lambda: None)
    assert refused is not None
    clock.now += 31  # probation is over
    guard.sweep()


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.sampled_from([r.name for r in methods.METHODS]))
def test_safe_deserializers_never_raise(data: bytes, method: str) -> None:
    request_cls, _ = methods.spec(method).types()
    got = safe_deserializer(request_cls)(data)
    try:
        expected = request_cls.FromString(data)
    except Exception:
        assert isinstance(got, Undecodable)
        assert got.type_name == request_cls.DESCRIPTOR.full_name and got.size == len(data)
        assert got.error.startswith("DecodeError")
    else:
        assert got == expected


def test_safe_deserializer_deep_nesting() -> None:
    request_cls, _ = methods.spec("ApplyBrokerId").types()
    got = safe_deserializer(request_cls)(b"\x0b" * 100_000)
    assert isinstance(got, Undecodable)


def test_peer_log_notes_use_the_budget_and_remember_nothing(caplog: pytest.LogCaptureFixture) -> None:
    """Lines held against no peer (a 1008 delivered) only take from the budget: a fleet's thousands
    of deliveries leave no entry each behind."""
    clock = Clock()
    plog = PeerLog(logging.getLogger("t.note"), interval=1, budget=3, clock=clock)
    caplog.set_level(logging.INFO, logger="t.note")
    logged = sum(plog.note(logging.INFO, "delivered to %s", f"127.0.0.1:{i}") for i in range(1000))
    assert logged == 3 and not plog._peers
    clock.now += 1
    assert plog.note(logging.INFO, "delivered to %s", "127.0.0.1:7")
    last = caplog.records[-1].getMessage()
    assert last == "delivered to 127.0.0.1:7 (997 more such lines not logged)"
