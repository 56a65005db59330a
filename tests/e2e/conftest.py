"""tests/e2e: a real RocketMQ 5.3.3 broker set (../shared/rocketmq-broker) behind a `mqctl serve` group.

When a test fails, its report names the directory that keeps every process's log (mqctl serve nodes,
name server, brokers, drivers); the module's fixture then leaves that directory in place (it is outside
pytest's basetemp, which other pytest runs on the machine rotate away)."""

from __future__ import annotations

from collections.abc import Generator

import pytest


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, object, object]:
    rep = yield
    root = getattr(item.module, "LOG_ROOT", None)
    if getattr(rep, "failed", False):
        item.module.FAILED = True  # type: ignore[attr-defined]
    if getattr(rep, "failed", False) and root:
        logs = "\n".join(str(p) for p in sorted(root.glob("*.err")) + sorted(root.glob("*.out")))
        rep.sections.append(("e2e logs (kept)", f"{root}\n{logs}"))  # type: ignore[attr-defined]
        print(f"\ne2e logs kept in {root}")
    return rep
