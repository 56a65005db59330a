"""Getting a persistent broker id (seed 000, RocketMQ's ReplicasManager.register; reference 7.1).

The state comes from the files, never from memory, so a crash anywhere resumes correctly:

* ``brokerIdentity`` loads: the id is ours (CREATE_METADATA_FILE_DONE). A ``brokerIdentity-temp``
  left next to it (a crash after the identity file was written) is removed.
* only ``brokerIdentity-temp`` loads: ApplyBrokerId again with the same id and check code (the
  controller answers SUCCESS for an equal check code, so an apply whose answer was lost succeeds).
* neither: GetNextBrokerId, write the temp file (id + ``<address>;<millis>``), then apply.
* ApplyBrokerId refused (2014, the id belongs to another check code): delete the temp file and start
  over with a fresh id. An answer that never came (2104, outcome unknown) keeps the temp file and
  retries the same apply: deleting it, as RocketMQ does on any failure, could leave an id applied on
  the controller that no broker owns.
* a file whose clusterName or brokerName differs from the configuration: IdentityMismatch, and
  nothing is written or deleted.

A crash at any step (mqctl.sim.inject kills agents at the steps of this design) leaves files that the
rules above resume from.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mqctl.errors import Code, ControllerError, MqctlError, StoreError
from mqctl.store.identity import (
    BrokerIdentity,
    TempBrokerIdentity,
    identity_path,
    read_identity,
    read_temp_identity,
    temp_identity_path,
    write_identity,
    write_temp_identity,
)

log = logging.getLogger("mqctl.broker")

__all__ = ["AgentStopped", "IdentityMismatch", "Registrar", "check_identity_files"]


class AgentStopped(Exception):
    """The agent stopped (or was killed) under a call: the thread ends on the spot, without cleanup."""


class IdentityMismatch(MqctlError):
    """The store's identity files belong to another cluster or broker set."""

    exit_code = 3


@dataclass(frozen=True)
class _Files:
    identity: BrokerIdentity | None
    temp: TempBrokerIdentity | None
    temp_problem: str | None


def _read_files(root: Path) -> _Files:
    """Read both files. A temp file that does not parse is a torn write from before its apply was ever
    sent (the temp is fsynced before ApplyBrokerId): it is reported and treated as absent. A broken
    brokerIdentity with a valid temp file is the same kind of torn write; without a temp it is fatal."""
    temp: TempBrokerIdentity | None = None
    problem = None
    try:
        temp = read_temp_identity(root)
    except StoreError as exc:
        problem = str(exc)
    try:
        ident = read_identity(root)
    except StoreError as exc:
        if temp is None:
            raise StoreError(
                f"{exc}; no {temp_identity_path(root).name} to recover from: fix or remove "
                f"the file (the broker id is lost), then restart"
            ) from None
        log.warning("%s; recovering from %s", exc, temp_identity_path(root).name)
        ident = None
    return _Files(ident, temp, problem)


def check_identity_files(root: str | Path, cluster_name: str, broker_name: str) -> _Files:
    """Read the identity files and refuse (IdentityMismatch) when one names another cluster or broker."""
    root = Path(root)
    files = _read_files(root)
    for what, obj, path in (
        ("brokerIdentity", files.identity, identity_path(root)),
        ("brokerIdentity-temp", files.temp, temp_identity_path(root)),
    ):
        if obj is None:
            continue
        if (obj.cluster_name, obj.broker_name) != (cluster_name, broker_name):
            raise IdentityMismatch(
                f"{path}: {what} belongs to cluster {obj.cluster_name!r} broker {obj.broker_name!r}, "
                f"but this broker is configured as cluster {cluster_name!r} broker {broker_name!r}; "
                f"refusing to start (nothing was changed): point the broker at its own store directory "
                f"or fix its clusterName/brokerName"
            )
    return files


class Registrar:
    """Runs the id state machine against a controller. ``call(fn, *args)`` makes each controller call
    (the agent's wrapper: isolation, timeouts); ``alive()`` is false once the agent died."""

    def __init__(
        self,
        root: str | Path,
        cluster_name: str,
        broker_name: str,
        address: str,
        *,
        call: Callable[..., Any],
        client: Any,
        alive: Callable[[], bool] = lambda: True,
        stop: threading.Event | None = None,
        retry_fast: int = 5,
        retry_slow: float = 5.0,
    ) -> None:
        self.root = Path(root)
        self.cluster_name = cluster_name
        self.broker_name = broker_name
        self.address = address
        self._call = call
        self._client = client
        self._alive = alive
        self._stop = stop or threading.Event()
        self._retry_fast = retry_fast
        self._retry_slow = retry_slow
        self.attempts = 0
        self.last_error = ""

    def _point(self, name: str) -> None:
        """Between two steps: a stopped agent goes no further."""
        if not self._alive():
            raise AgentStopped(f"agent stopped before {name}")

    def _pause(self) -> None:
        """RocketMQ: 5 quick retries with a random sleep below 1 s, then every 5 s."""
        self.attempts += 1
        delay = random.uniform(0.05, 1.0) if self.attempts <= self._retry_fast else self._retry_slow
        if self._stop.wait(delay):
            raise AgentStopped("agent stopped while registering")

    def obtain_id(self) -> int:
        """Loop until ``brokerIdentity`` holds our id; returns it."""
        while True:
            if self._stop.is_set() or not self._alive():
                raise AgentStopped("agent stopped while registering")
            files = check_identity_files(self.root, self.cluster_name, self.broker_name)
            if files.identity is not None:
                if files.temp is not None or files.temp_problem is not None:
                    temp_identity_path(self.root).unlink(missing_ok=True)  # left by a crash
                return files.identity.broker_id
            temp = files.temp
            if files.temp_problem is not None:
                log.warning("%s: ignored (torn write before any apply); starting over", files.temp_problem)
                self._point("before_temp_file")
                temp_identity_path(self.root).unlink(missing_ok=True)
            try:
                if temp is None:
                    nxt = self._call(self._client.get_next_broker_id, self.cluster_name, self.broker_name)
                    self._point("before_temp_file")
                    code = f"{self.address};{int(time.time() * 1000)}"
                    temp = TempBrokerIdentity(
                        self.cluster_name, self.broker_name, int(nxt.next_broker_id), code
                    )
                    write_temp_identity(self.root, temp)
                    self._point("after_temp_file")
                self._call(
                    self._client.apply_broker_id,
                    self.cluster_name,
                    self.broker_name,
                    temp.broker_id,
                    temp.register_check_code,
                )
            except ControllerError as exc:
                self.last_error = str(exc)
                if exc.code == Code.CONTROLLER_BROKER_ID_INVALID and temp is not None:
                    log.info(
                        "%s/%s: broker id %d refused (%s); starting over",
                        self.cluster_name,
                        self.broker_name,
                        temp.broker_id,
                        exc.remark,
                    )
                    self._point("after_apply_refused")
                    temp_identity_path(self.root).unlink(missing_ok=True)
                    continue
                log.info("%s/%s: registration step failed: %s", self.cluster_name, self.broker_name, exc)
                self._pause()
                continue
            self._point("after_apply_accepted")
            write_identity(self.root, BrokerIdentity(self.cluster_name, self.broker_name, temp.broker_id))
            self._point("after_identity_file")
            temp_identity_path(self.root).unlink(missing_ok=True)
            return temp.broker_id
