"""The agent keeps seed 002's store signatures: clean after an orderly stop, dirty after a crash or
while running, as `mqctl recover inspect` sees it."""

from __future__ import annotations

import pytest
from broker_fixtures import start_agent
from test_failover import one_master

from mqctl.localgroup import wait_until
from mqctl.recover.inspect import inspect_store
from mqctl.store.signature import read_signature

pytestmark = pytest.mark.slow


def test_orderly_stop_is_clean_crash_is_dirty(controller, tmp_path) -> None:
    agents = [start_agent(tmp_path / f"b{i}", controller.addresses, "sig") for i in range(2)]
    try:
        master = wait_until(lambda: one_master(agents), 30, what="a master and a slave")
        for i in range(10):
            assert master.put(f"s{i}".encode() * 20).ok
        slave = next(a for a in agents if a is not master)
        wait_until(lambda: slave.max_offset == master.max_offset, 20, what="the slave to catch up")
        assert inspect_store(master.root).state == "dirty"  # running: abort present
        slave.crash()
        master.stop()
        clean = inspect_store(master.root)
        assert clean.state == "clean", clean.dirty_reasons
        sig = read_signature(master.root)
        assert sig is not None and sig.final is not None and sig.final.max_offset == clean.max_offset
        dirty = inspect_store(slave.root)
        assert dirty.state == "dirty" and any("abort" in r for r in dirty.dirty_reasons)
        initial = sig.initial
        # a restart makes the store dirty again until the next orderly stop; the initial signature stays
        again = start_agent(master.root, controller.addresses, "sig")
        try:
            wait_until(lambda: read_signature(again.root).final is None, 10, what="final signature dropped")
            assert read_signature(again.root).initial == initial
        finally:
            again.stop()
        assert inspect_store(again.root).state == "clean"
    finally:
        for a in agents:
            a.stop()
