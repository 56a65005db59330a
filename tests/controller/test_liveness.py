"""The heartbeat table: RocketMQ update rule, mqctl address/brokerEpoch rules, expiry."""

from __future__ import annotations

from mqctl.controller import core
from mqctl.controller.liveness import HeartbeatTable
from mqctl.errors import Code

S = "broker-set-a"


def hb(bid: int = 1, **kw: object) -> core.Heartbeat:
    return beat({"cluster_name": "c", "broker_name": S, "broker_addr": "a:1", "broker_id": bid, **kw})


def beat(request: dict[str, object]) -> core.Heartbeat:
    """A Heartbeat request as the core decodes it (once) for the table."""
    decoded = core.decode("Heartbeat", request)
    assert isinstance(decoded, core.Heartbeat)
    assert core.handle(core.ControllerState(), decoded, core.Context(now_ms=0, live={})).ok
    return decoded


def test_defaults_and_new_row() -> None:
    t = HeartbeatTable()
    assert t.on_heartbeat(hb(), 100)
    info = t.get(S, 1)
    assert info is not None
    assert (info.epoch, info.max_offset, info.confirm_offset) == (-1, -1, -1)
    assert info.timeout_ms == 10_000 and info.election_priority == 2**31 - 1
    assert info.last_heartbeat_ms == 100 and info.broker_address == "a:1" and info.broker_epoch == 0
    for bad in ({"broker_name": S}, {"broker_id": 1}):  # refused by the core: nothing for the table
        result = core.decide(core.ControllerState(), "Heartbeat", bad, core.Context(now_ms=0, live={}))
        assert result.code == Code.CONTROLLER_INVALID_REQUEST and not result.records, result


def test_update_rule() -> None:
    t = HeartbeatTable()
    t.on_heartbeat(
        hb(epoch=2, max_offset=100, confirm_offset=90, election_priority=3, heartbeat_timeout_mills=5000), 0
    )
    # older epoch: offsets kept, time/timeout/priority always updated, address updated (mqctl)
    assert t.on_heartbeat(hb(epoch=1, max_offset=999, confirm_offset=999, broker_addr="b:2"), 50)
    info = t.get(S, 1)
    assert info is not None and (info.epoch, info.max_offset, info.confirm_offset) == (2, 100, 90)
    assert info.last_heartbeat_ms == 50 and info.timeout_ms == 10_000
    assert info.election_priority == 2**31 - 1 and info.broker_address == "b:2"
    # equal epoch, smaller offset: kept
    assert t.on_heartbeat(hb(epoch=2, max_offset=50), 60)
    info = t.get(S, 1)
    assert info is not None and info.max_offset == 100
    # equal epoch, larger offset: taken
    assert t.on_heartbeat(hb(epoch=2, max_offset=150, confirm_offset=140), 70)
    info = t.get(S, 1)
    assert info is not None and (info.max_offset, info.confirm_offset) == (150, 140)
    # newer epoch with a smaller offset: taken
    assert t.on_heartbeat(hb(epoch=3, max_offset=10), 80)
    info = t.get(S, 1)
    assert info is not None and (info.epoch, info.max_offset) == (3, 10)


def test_registration_alone_makes_nobody_alive() -> None:
    """RocketMQ: only a heartbeat (904) makes a broker alive, never a registration."""
    t = HeartbeatTable()
    assert not t.on_register("c", S, 1, "a:1", 5, epoch=3, max_offset=300, now_ms=0)
    assert t.get(S, 1) is None and not t.is_alive(S, 1, 0) and len(t) == 0


def test_broker_epoch_resets_or_ignores() -> None:
    t = HeartbeatTable()
    t.on_heartbeat(hb(), 0)
    t.on_register("c", S, 1, "a:1", 5, epoch=3, max_offset=300, now_ms=0)
    assert not t.on_heartbeat(hb(broker_epoch=4, epoch=9, max_offset=9), 10)  # older incarnation
    assert t.on_heartbeat(hb(epoch=1, max_offset=1), 10)  # no broker_epoch: RocketMQ broker, normal rule
    info = t.get(S, 1)
    assert info is not None and (info.epoch, info.max_offset, info.last_heartbeat_ms) == (3, 300, 10)
    assert t.on_heartbeat(hb(broker_epoch=6, epoch=1, max_offset=1), 20)  # new incarnation: reset
    info = t.get(S, 1)
    assert info is not None and (info.epoch, info.max_offset, info.broker_epoch) == (1, 1, 6)


def test_register_keeps_what_it_does_not_report_and_snapshot() -> None:
    """A registration without epoch, maxOffset, confirmOffset, priority or timeout (what a RocketMQ
    broker's 1003 carries) leaves them as the last heartbeat left them, as RocketMQ's
    DefaultBrokerHeartbeatManager does (issue 35: a reset made a broker that registered again between
    two heartbeats lose the election it should win); what it reports replaces them."""
    t = HeartbeatTable(default_timeout_ms=3000)
    t.on_heartbeat(
        hb(1, epoch=5, max_offset=500, confirm_offset=450, election_priority=4, heartbeat_timeout_mills=2500),
        0,
    )
    t.on_heartbeat(hb(2), 0)
    t.on_heartbeat(beat({"broker_name": "other", "broker_id": 1}), 0)
    t.on_register("c", S, 1, "z:9", 7, now_ms=10)  # keeps the row's last heartbeat (0)
    snap = t.snapshot(S)
    assert snap[1].last_heartbeat_ms == 0
    assert sorted(snap) == [1, 2]
    assert snap[1].broker_epoch == 7 and snap[1].broker_address == "z:9"
    assert (snap[1].epoch, snap[1].max_offset, snap[1].confirm_offset) == (5, 500, 450)
    assert (snap[1].election_priority, snap[1].timeout_ms) == (4, 2500)
    ctx = t.context(20, [S])
    assert list(ctx.live) == [S] and ctx.is_alive(S, 1)
    assert sorted(t.context(20).live) == [S, "other"]
    # what a registration reports (an mqctl broker's store after a restart) is the new incarnation's
    t.on_register(
        "c",
        S,
        1,
        "z:9",
        8,
        epoch=4,
        max_offset=300,
        confirm_offset=200,
        election_priority=9,
        timeout_ms=4000,
        now_ms=30,
    )
    info = t.get(S, 1)
    assert info is not None and info.broker_epoch == 8 and info.last_heartbeat_ms == 0
    assert (info.epoch, info.max_offset, info.confirm_offset) == (4, 300, 200)
    assert (info.election_priority, info.timeout_ms) == (9, 4000)


def test_the_first_beat_after_a_registration_is_taken_as_it_is() -> None:
    """The row kept through a registration holds the last incarnation's figures; the next heartbeat
    (without brokerEpoch, as a RocketMQ broker's) tells what the broker holds now, even less than
    before (a store that lost its tail). Later beats follow RocketMQ's update rule again."""
    t = HeartbeatTable()
    t.on_heartbeat(hb(1, epoch=5, max_offset=500, confirm_offset=450), 0)
    t.on_register("c", S, 1, "a:1", 7, now_ms=10)
    assert t.on_heartbeat(hb(1, epoch=4, max_offset=300, confirm_offset=250), 20)
    info = t.get(S, 1)
    assert info is not None and (info.epoch, info.max_offset, info.confirm_offset) == (4, 300, 250)
    assert t.on_heartbeat(hb(1, epoch=4, max_offset=200), 30)  # the update rule again: kept
    info = t.get(S, 1)
    assert info is not None and (info.epoch, info.max_offset) == (4, 300)
    # an older incarnation's beat is still ignored, and does not use up the registration's beat
    t.on_register("c", S, 1, "a:1", 9, now_ms=40)
    assert not t.on_heartbeat(hb(1, broker_epoch=8, epoch=1, max_offset=1), 50)
    assert t.on_heartbeat(hb(1, broker_epoch=9, epoch=3, max_offset=100), 60)
    info = t.get(S, 1)
    assert info is not None and (info.epoch, info.max_offset, info.broker_epoch) == (3, 100, 9)


def test_expiry_by_deadline() -> None:
    t = HeartbeatTable()
    t.on_heartbeat(hb(1, heartbeat_timeout_mills=1000), 0)
    t.on_heartbeat(hb(2, heartbeat_timeout_mills=5000), 0)
    t.on_heartbeat(beat({"broker_name": "other", "broker_id": 1, "heartbeat_timeout_mills": 1000}), 0)
    assert t.take_changed(0) == {S, "other"}  # new rows
    assert t.is_alive(S, 1, 1000) and not t.is_alive(S, 1, 1001)
    assert t.take_changed(1000) == set() and t.expired(1000) == []  # last + timeout >= now: alive
    t.on_heartbeat(beat({"broker_name": "other", "broker_id": 1, "heartbeat_timeout_mills": 1000}), 900)
    assert t.take_changed(1001) == {S}  # broker 1 of S is past its deadline; "other" beat again
    assert t.expired(1001) == [("c", S, 1)]
    assert len(t) == 2 and sorted(t.snapshot(S)) == [2]
    assert t.take_changed(1901) == {"other"} and t.take_changed(1902) == set()


def test_a_dead_row_that_beats_again_is_not_removed() -> None:
    t = HeartbeatTable()
    t.on_heartbeat(hb(1, heartbeat_timeout_mills=1000), 0)
    t.take_changed(0)
    assert t.take_changed(2000) == {S}  # dead
    t.on_heartbeat(hb(1, heartbeat_timeout_mills=1000), 2500)
    assert t.take_changed(2500) == {S}  # back to life
    assert t.expired(2600) == [] and t.is_alive(S, 1, 2600)
    assert t.take_changed(3501) == {S} and t.expired(3501) == [("c", S, 1)] and len(t) == 0


def test_heartbeats_do_not_grow_the_deadline_wheel() -> None:
    t = HeartbeatTable()
    for now in range(0, 100_000, 100):
        t.on_heartbeat(hb(1), now)
        t.on_heartbeat(hb(2, heartbeat_timeout_mills=3000), now)
        t.take_changed(now)
    assert sorted(s for slots in t._wheel.values() for s in slots) == [0, 1]
    assert len(t._buckets) == len(t._wheel) <= 2


def test_removed_rows_free_their_slot_for_the_next_broker() -> None:
    t = HeartbeatTable()
    t.on_heartbeat(hb(1, max_offset=7, heartbeat_timeout_mills=1000), 0)
    assert t.expired(1001) == [("c", S, 1)]
    t.on_heartbeat(beat({"broker_name": "other", "broker_id": 3, "cluster_name": "d"}), 2000)
    assert len(t._name) == 1 and t.expired(12_001) == [("d", "other", 3)]
    assert t.get("other", 3) is None and t.with_last("other")[3].last_heartbeat_ms == 2000
    assert t.with_last(S)[1].max_offset == 7


def test_an_expired_row_is_kept_as_the_last_known_until_the_broker_beats_again() -> None:
    t = HeartbeatTable()
    t.on_heartbeat(hb(1, max_offset=900, heartbeat_timeout_mills=1000), 0)
    t.on_heartbeat(hb(2, max_offset=800, heartbeat_timeout_mills=5000), 0)
    assert t.expired(1001) == [("c", S, 1)]
    assert sorted(t.snapshot(S)) == [2]
    last = t.with_last(S)
    assert last[1].max_offset == 900 and not last[1].is_alive(1001) and last[2].max_offset == 800
    t.on_heartbeat(hb(1, max_offset=50, heartbeat_timeout_mills=1000), 2000)
    assert t.with_last(S)[1].max_offset == 50 and t.with_last(S)[1].is_alive(2000)
    assert t._last[S] == {}  # forgotten once it has a row again
    assert t.expired(9000) == [("c", S, 1), ("c", S, 2)] and len(t) == 0
    assert {b: r.max_offset for b, r in t.with_last(S).items()} == {1: 50, 2: 800}


def test_rows_of_any_broker_id_read_back_as_a_plain_table_would() -> None:
    """A set's rows are packed for ids 0..PACKED_IDS-1 and kept apart for the others (large,
    negative): beats, expiries and reads at random agree with a dict of (name, id) -> last beat."""
    import random

    from mqctl.controller.liveness import PACKED_IDS

    rng = random.Random(7)
    t, model = HeartbeatTable(), {}
    ids = [-3, -1, 0, 1, 2, 3, PACKED_IDS - 1, PACKED_IDS, 63, 64, 2**40]
    for now in range(0, 4000, 10):
        for _ in range(3):
            name, bid = rng.choice(["a", "b", "c"]), rng.choice(ids)
            # built directly: the table packs any id, also those the core refuses (negative ones)
            t.on_heartbeat(
                core.Heartbeat(
                    "", name, f"127.0.0.1:{abs(bid) % 60000}", bid, None, None, None, None, 200, None
                ),
                now,
            )
            model[(name, bid)] = now
        gone = t.expired(now)
        want = sorted((n, b) for (n, b), last in model.items() if last + 200 < now)
        assert sorted((n, b) for _, n, b in gone) == want
        for key in want:
            del model[key]
        for name in ("a", "b", "c"):
            assert list(t.snapshot(name)) == sorted(b for n, b in model if n == name)
            for bid in ids:
                row = t.get(name, bid)
                assert (row.last_heartbeat_ms if row else None) == model.get((name, bid))
        assert len(t) == len(model)
