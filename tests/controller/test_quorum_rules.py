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


def test_the_leader_refuses_what_the_membership_forbids() -> None:
    assert "already a member" in refused(quorum.membership_refusal("add", OTHERS[0], ME, OTHERS))
    assert "already a member" in refused(quorum.membership_refusal("add", ME, ME, OTHERS))
    assert "is not a member" in refused(quorum.membership_refusal("remove", "127.0.0.1:9848", ME, OTHERS))
    assert "transfer the leadership first" in refused(quorum.membership_refusal("remove", ME, ME, OTHERS))
    done = quorum.membership_refusal("transfer", ME, ME, OTHERS)
    assert done is not None and done["code"] == 0 and done["members"] == sorted([ME, *OTHERS])
    assert quorum.membership_refusal("remove", OTHERS[1], ME, OTHERS) is None
    assert quorum.membership_refusal("add", "127.0.0.1:9848", ME, OTHERS) is None
    assert quorum.membership_refusal("transfer", OTHERS[0], ME, OTHERS) is None
