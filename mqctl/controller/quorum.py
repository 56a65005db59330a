"""The rules of `mqctl quorum add|remove|transfer`, pure: `mqctl serve` (node.py) and the
deterministic simulator (mqctl/dsim) refuse the same changes with the same answers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from mqctl.address import parse_address
from mqctl.controller.core import Refusal, Response, Result
from mqctl.controller.core.responses import pick
from mqctl.errors import Code, UsageError

ACTIONS = ("add", "remove", "transfer")


@dataclass(frozen=True)
class ChangeQuorumResult(Response):
    """The group after a change. Sent as proto3 sends it: a field at its zero value is absent."""

    leader_id: str = ""
    leader_address: str = ""
    members: tuple[str, ...] = ()
    feature_level: int = 0
    remark: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in super().to_dict().items() if v}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Self:
        return pick(cls, d, members=tuple(str(m) for m in d.get("members", ())))


def request_refusal(action: str, target: str) -> dict[str, Any] | None:
    """The answer refusing a malformed change, on any node; None: ask the leader."""
    if action not in ACTIONS:
        return {
            "code": int(Code.CONTROLLER_INVALID_REQUEST),
            "remark": "Invalid request: action must "
            f"be add, remove, transfer or feature-level, not {action!r}",
        }
    if target:
        try:
            parse_address(target, "Raft address")
        except UsageError as exc:
            return {"code": int(Code.CONTROLLER_INVALID_REQUEST), "remark": f"Invalid request: {exc}"}
    elif action != "transfer":
        return {
            "code": int(Code.CONTROLLER_INVALID_REQUEST),
            "remark": "Invalid request: raft_address is required",
        }
    return None


def membership_refusal(
    action: str, target: str, me: str, members: list[str], active: list[str]
) -> dict[str, Any] | None:
    """The answer refusing (or, for a transfer to the leader itself, already granting) a change
    asked of the leader `me`, whose other members are `members`, of which it hears from `active`;
    None: ask the Raft layer (which refuses a second change while one is uncommitted,
    mqctl/raft/FORK.md)."""
    if action == "add" and (target == me or target in members):
        return {"code": int(Code.CONTROLLER_INVALID_REQUEST), "remark": f"{target} is already a member"}
    if action in ("remove", "transfer") and target and target != me and target not in members:
        return {
            "code": int(Code.CONTROLLER_INVALID_REQUEST),
            "remark": f"{target} is not a member (members: {', '.join(sorted([me, *members]))})",
        }
    if action == "remove" and target == me:
        return {
            "code": int(Code.CONTROLLER_INVALID_REQUEST),
            "remark": f"{target} is the leader: transfer the leadership first",
        }
    if action in ("add", "remove"):
        lost = _quorum_lost(action, target, me, members, active)
        if lost:
            return {"code": int(Code.CONTROLLER_INVALID_REQUEST), "remark": lost}
    if action == "transfer" and target == me:
        already = ChangeQuorumResult(me, members=tuple(sorted([me, *members])))
        return Result(Code.SUCCESS, f"{me} already leads", already).answer()
    return None


def _quorum_lost(action: str, target: str, me: str, members: list[str], active: list[str]) -> str:
    """Why the change would leave the group without a quorum of live members ("": it would not), as
    etcd's strict reconfiguration check refuses: a removal must leave a quorum of the rest live, and
    an addition (the new node counted as not yet live) must keep one; adding a second node to a
    group of one is allowed, since nothing else can grow it. Without this check, removing a live
    follower while another node is down stalls the group until that node returns."""
    after = [m for m in [me, *members] if m != target] + ([target] if action == "add" else [])
    live = [m for m in after if m == me or m in active]
    need = len(after) // 2 + 1
    if len(live) >= need or (action == "add" and len(after) == 2):
        return ""
    silent = ", ".join(sorted(m for m in after if m not in live and m != target))
    return (
        f"{action} {target} would leave {len(after)} members of which {len(live)} answer the leader, "
        f"fewer than the {need} a quorum needs: bring {silent} back (or remove it) first"
    )


@dataclass(slots=True)
class ChangeQuorumRequest:
    """ChangeQuorum, read once: a malformed change is refused here, on any node (request_refusal);
    "feature-level" raises the group's feature level instead of changing the membership."""

    METHOD: ClassVar[str] = "ChangeQuorum"
    action: str = ""
    raft_address: str = ""
    feature_level: int = 0

    @classmethod
    def read(cls, req: Mapping[str, Any]) -> ChangeQuorumRequest:
        out = cls(str(req.get("action", "")), str(req.get("raft_address", "") or ""))
        if out.action == "feature-level":
            out.feature_level = int(req.get("feature_level") or 0)
            return out
        refused = request_refusal(out.action, out.raft_address)
        if refused is not None:
            raise Refusal(refused["code"], refused["remark"])
        return out
