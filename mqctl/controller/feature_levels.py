"""The group's feature level as the node decides it (Kafka's metadata.version): which level each member
speaks, the level a new group starts at, a raise once every member speaks a higher one
(--auto-feature-level) and the raise an operator asks for (`mqctl quorum feature-level N`).

Apart from the node and the leader's tick because both raise the level, by the same rules, read from
replicated records only (the levels the members published, the bootstrap entry), so that whichever
node leads decides the same.
"""

from __future__ import annotations

import time
from typing import Any

from mqctl.controller import core, quorum, records
from mqctl.controller.node_raft import META_BOOTSTRAP, META_NODE_PREFIX, NodeRaft
from mqctl.errors import Code


class FeatureLevels:
    """``auto``: raise the level on its own once every member speaks a higher one (etcd's cluster version)."""

    def __init__(self, raft: NodeRaft, *, auto: bool) -> None:
        self._raft = raft
        self.auto = auto
        self._checked = 0.0

    def _published(self, raft_address: str) -> int | None:
        """The newest level a member published (None: not yet); an mqctl 0.1 node publishes its
        address without a level, and speaks level 1. Read from the applied state: a node publishes
        through the log from any node (ControllerNode._publish_self), not through the leader's view."""
        mine = self._raft.meta(META_NODE_PREFIX + raft_address)
        if not isinstance(mine, dict):
            return None
        level = mine.get("maxFeatureLevel", 1)
        return level if isinstance(level, int) and not isinstance(level, bool) else 1

    def speaks(self, raft_address: str) -> int:
        """As the node published it; mqctl 0.1 nodes publish none and speak level 1."""
        if raft_address == self._raft.raft_address:
            return records.MAX_FEATURE_LEVEL
        level = self._published(raft_address)
        return 1 if level is None else level

    def due(self, st: core.ControllerState) -> list[records.Record]:
        """The records of the level that is due: the new group's starting level once every initial
        member has said what it speaks, and with ``auto`` a raise once every member speaks a higher
        level."""
        current = sorted([self._raft.raft_address, *self._raft.members()])
        boot = st.meta.get(META_BOOTSTRAP)
        if isinstance(boot, dict):
            initial = [m for m in boot.get("members") or [] if m in current]
            levels = {m: self._published(m) for m in initial}
            if any(v is None for v in levels.values()):
                return []
            cap = boot.get("maxLevel", records.MAX_FEATURE_LEVEL)
            level = min([cap, *(v for v in levels.values() if v is not None)])
            out: list[records.Record] = [records.MetaSet(META_BOOTSTRAP, None)]
            if level > st.feature_level and level in records.FEATURE_LEVELS:
                out.insert(0, records.FeatureLevelSet(level))
            return out
        if not self.auto:
            return []
        levels = {m: self._published(m) for m in current}
        if any(v is None for v in levels.values()):
            return []
        level = min(v for v in levels.values() if v is not None)
        if level > st.feature_level and level in records.FEATURE_LEVELS:
            return [records.FeatureLevelSet(level)]
        return []

    def raise_if_due(self) -> None:
        """On the leader's tick, at most twice a second."""
        now = time.monotonic()
        if now - self._checked < 0.5:
            return
        self._checked = now
        self._raft.commit_records(self.due)

    def raise_to(self, level: int, timeout: float) -> dict[str, Any]:
        """`mqctl quorum feature-level N`: once every member speaks N, the group writes N's records."""
        raft = self._raft
        members = sorted([raft.raft_address, *raft.members()])

        def decide(state: core.ControllerState) -> core.Result:
            if level not in records.FEATURE_LEVELS:
                return core.Result(
                    Code.CONTROLLER_INVALID_REQUEST,
                    f"Invalid request: feature level {level} is not one of {sorted(records.FEATURE_LEVELS)}",
                )
            if level < state.feature_level:
                return core.Result(
                    Code.CONTROLLER_INVALID_REQUEST,
                    f"Invalid request: the group is at feature level {state.feature_level}; "
                    "a feature level is never lowered",
                )
            behind = [
                f"{m} (speaks {self.speaks(m)}, or has not said yet)"
                for m in members
                if self.speaks(m) < level
            ]
            if behind:
                return core.Result(
                    Code.CONTROLLER_INVALID_REQUEST,
                    f"not every member speaks feature level {level}: {', '.join(behind)}; upgrade them first",
                )
            if level == state.feature_level:
                return core.Result(Code.SUCCESS, f"the group is already at feature level {level}")
            return core.Result(
                Code.SUCCESS,
                f"the group is at feature level {level} now",
                {},
                [records.FeatureLevelSet(level)],
            )

        answer = raft.decide_and_commit(decide, timeout)
        with raft.sync.state_lock:
            level_now = raft.sync.state.feature_level
        group = quorum.ChangeQuorumResult(
            raft.leader_raft_address(), raft.leader_grpc_address(), tuple(members), level_now
        )
        answer.update(group.to_dict())
        return answer
