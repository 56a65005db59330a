"""`wait-master`: poll the controller until it reports a broker as the master of its set.

Runbook step 4 ("start the old master and wait until getSyncStateSet shows it as master"). The
controller may be restarting, or may not know the broker set yet (the broker has not registered):
both are waited through, shown in the progress line, until the deadline.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mqctl.errors import ControllerError, UsageError
from mqctl.upgrade.errors import WaitTimeoutError

if TYPE_CHECKING:
    from mqctl.client import ControllerClient

__all__ = ["WaitResult", "wait_master"]


@dataclass(frozen=True)
class WaitResult:
    broker_name: str
    broker_id: int
    master_epoch: int
    master_address: str
    sync_state_set: tuple[int, ...]
    waited: float


def _describe(
    client: ControllerClient, broker_name: str
) -> tuple[int | None, str, int, tuple[int, ...], str]:
    """(master id, master address, master epoch, SyncStateSet, what to show)."""
    try:
        r = client.get_replica_info(broker_name)
    except ControllerError as exc:
        if exc.exit_code == 5:
            return None, "", 0, (), f"{broker_name} not registered yet"
        if exc.exit_code == 6:
            return None, "", 0, (), "controller unreachable"
        return None, "", 0, (), f"controller says {exc}"
    if r.master_broker_id is None:
        return None, "", r.master_epoch, r.sync_state_set, "no master yet"
    return (
        r.master_broker_id,
        r.master_address,
        r.master_epoch,
        r.sync_state_set,
        f"master is brokerId {r.master_broker_id} (epoch {r.master_epoch})",
    )


def wait_master(
    client: ControllerClient,
    broker_name: str,
    broker_id: int,
    timeout: float,
    *,
    progress: Callable[[str], None] | None = None,
    interval: float = 0.5,
    clock: Callable[[], float] = time.monotonic,
) -> WaitResult:
    """Block until the controller reports `broker_id` as master of `broker_name`; WaitTimeoutError (exit
    8) after `timeout` seconds, naming the last thing seen."""
    if timeout <= 0:
        raise UsageError(f"--timeout must be positive, got {timeout}")
    if broker_id < 0:
        raise UsageError(f"--broker-id must be 0 or more, got {broker_id}")
    start = clock()
    deadline = start + timeout
    last = ""
    while True:
        mid, addr, epoch, sss, what = _describe(client, broker_name)
        now = clock()
        if mid == broker_id:
            if progress:
                progress(
                    f"{broker_name}: brokerId {broker_id} is master (epoch {epoch}, {addr}) after "
                    f"{now - start:.1f}s"
                )
            return WaitResult(broker_name, broker_id, epoch, addr, sss, now - start)
        last = what
        if progress:
            progress(
                f"waiting for {broker_name} brokerId {broker_id} to be master: {what} "
                f"[{now - start:.0f}s/{timeout:g}s]"
            )
        if now >= deadline:
            raise WaitTimeoutError(
                f"timed out after {timeout:g}s: {broker_name} brokerId {broker_id} is not "
                f"master ({last}); is the broker started and heartbeating?"
            )
        time.sleep(max(0.0, min(interval, deadline - now)))
