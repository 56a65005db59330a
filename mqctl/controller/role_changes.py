"""What a broker set's role is, as the node tells it after each applied election: the RoleChange that
the watch streams carry, and the remoting door turns into NOTIFY_BROKER_ROLE_CHANGED (1008) pushes
to the brokers (mqctl/remoting/server.py sends them).

Apart from the node because every node makes the same change from the same applied records, with
the config that was in force when the election was applied (notifyBrokerRoleChanged): that is the
node's whole part in the 1008 push, and a subscriber hears the current role first without ever
reading an older one after a newer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mqctl.controller import core, records
from mqctl.controller.node_raft import NodeRaft
from mqctl.controller.watches import RoleWatch, RoleWatches
from mqctl.errors import Code


class RoleChanges:
    """Role changes of this node's applied state, told to its watches."""

    def __init__(self, raft: NodeRaft, watches: RoleWatches, clock: Callable[[], int]) -> None:
        self._raft = raft
        self._watches = watches
        self._clock = clock

    def subscribe(self, cluster_name: str, broker_name: str) -> RoleWatch:
        # Under the state lock no entry is applied between reading the current role and
        # subscribing, so the current role can never arrive after a newer change.
        with self._raft.sync.state_lock:
            watch = self._watches.add(cluster_name, broker_name)
            current = self.role_of(broker_name) if broker_name else None
            if current is not None and current.get("master_broker_id") is not None:
                watch.push(current)
        return watch

    def on_apply(self, state: core.ControllerState, applied: list[records.Record]) -> None:
        """After an entry is applied (on the Raft thread): the new masters it elected."""
        if not self._watches:
            return
        touched = sorted({r.broker_name for r in applied if isinstance(r, records.MasterElected)})
        for name in touched:
            change = self.role_of(name)
            if change is None:
                continue
            # the config in force when the election was applied decides whether brokers are told (1008)
            change["notify_broker_role_changed"] = state.cfg_bool("notifyBrokerRoleChanged")
            self._watches.push(change)

    def role_of(self, broker_name: str) -> dict[str, Any] | None:
        ctx = core.Context(now_ms=self._clock(), live={})
        sync = self._raft.sync
        with sync.state_lock:
            result = core.handle(sync.state, core.GetReplicaInfoRequest(broker_name), ctx)
            if result.code != 0:
                return None
            cluster = sync.state.cluster_of(broker_name) or ""
        info = result.reply
        assert isinstance(info, core.ReplicaInfoResult)
        return core.Result(Code.SUCCESS, "", core.RoleChange.of(cluster, broker_name, info)).answer()
