"""The rules of `mqctl quorum add|remove|transfer` (mqctl/controller/quorum.py): what `mqctl serve`
and the deterministic simulator both refuse before asking the Raft layer."""

from __future__ import annotations

from typing import Any

from mqctl.controller import quorum
from mqctl.errors import Code

ME = "127.0.0.1:9878"
OTHERS = ["127.0.0.1:9868", "127.0.0.1:9858"]
INVALID = int(Code.CONTROLLER_INVALID_REQUEST)


def refused(answer: dict[str, Any] | None) -> str:
    """The remark of a refusal (code CONTROLLER_INVALID_REQUEST)."""
    assert answer is not None and answer["code"] == INVALID, answer
    return str(answer["remark"])


def test_malformed_requests_are_refused_on_any_node() -> None:
    assert "action must be add, remove" in refused(quorum.request_refusal("grow", "127.0.0.1:1"))
    assert "raft_address is required" in refused(quorum.request_refusal("add", ""))
    assert "raft_address is required" in refused(quorum.request_refusal("remove", ""))
    assert "Invalid request" in refused(quorum.request_refusal("add", "not an address"))
    assert quorum.request_refusal("transfer", "") is None  # to whichever follower is caught up
    assert quorum.request_refusal("add", "127.0.0.1:9848") is None


def rule(action: str, target: str, members: list[str] = OTHERS, active: list[str] = OTHERS) -> Any:
    """The leader ME's answer, every other member live unless said."""
    return quorum.membership_refusal(action, target, ME, members, active)


def test_the_leader_refuses_what_the_membership_forbids() -> None:
    assert "already a member" in refused(rule("add", OTHERS[0]))
    assert "already a member" in refused(rule("add", ME))
    assert "is not a member" in refused(rule("remove", "127.0.0.1:9848"))
    assert "transfer the leadership first" in refused(rule("remove", ME))
    done = rule("transfer", ME)
    assert done is not None and done["code"] == 0 and done["members"] == sorted([ME, *OTHERS])
    assert rule("remove", OTHERS[1]) is None
    assert rule("add", "127.0.0.1:9848") is None
    assert rule("transfer", OTHERS[0]) is None


def test_a_change_that_would_leave_no_quorum_of_live_members_is_refused() -> None:
    """etcd's strict reconfiguration check: with OTHERS[1] silent, removing the other live member or
    adding a fourth node would leave a group whose majority cannot answer; removing the silent one,
    or any change with all members live, goes ahead."""
    b, c = OTHERS
    new = "127.0.0.1:9848"
    remark = refused(rule("remove", b, active=[b]))
    assert remark == (
        f"remove {b} would leave 2 members of which 1 answer the leader, fewer than the 2 a quorum "
        f"needs: bring {c} back (or remove it) first"
    ), remark
    assert "fewer than the 3 a quorum needs" in refused(rule("add", new, active=[b]))
    assert rule("remove", c, active=[b]) is None
    assert rule("add", new) is None
    assert rule("remove", b) is None
    # a group of one grows to two; a group of two with its other node silent cannot grow to three
    assert rule("add", new, [], []) is None
    assert f"bring {b} back" in refused(rule("add", new, [b], []))
    assert rule("remove", b, [b], []) is None  # down to the leader alone
    # a transfer does not change the membership: not counted
    assert rule("transfer", b, active=[]) is None
