"""What every rule reads besides the state: the limits, the heartbeat table's rows (`LiveInfo`),
the leader's view of time and liveness (`Context`), and a handler's answer (`Result`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mqctl.controller import election
from mqctl.controller.core.responses import Response
from mqctl.controller.records import (
    DecisionNoted,
    Record,
)
from mqctl.errors import Code

MAX_ID = 2**53
MAX_NAME_LEN = 255
MAX_OPTION_VALUE_LEN = 4096
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
DEFAULT_ELECTION_PRIORITY = election.DEFAULT_ELECTION_PRIORITY
DEFAULT_HEARTBEAT_TIMEOUT_MS = 10000
FIRST_BROKER_CONTROLLER_ID = 1
CONFIG_BLACKLIST = frozenset({"configBlackList", "configStorePath", "rocketmqHome"})
SNAPSHOT_VERSION = 1
HISTORY_LEVEL = DecisionNoted.LEVEL  # the feature level from which decisions are noted and failover pauses
ALL_BROKER_SETS = ""  # a failover pause of every broker set


# --------------------------------------------------------------------------------------------
# Context


@dataclass(frozen=True, slots=True)  # one per broker in the leader's memory: slots keep it small
class LiveInfo:
    """One heartbeat-table row, as the leader saw it."""

    broker_id: int
    broker_address: str = ""
    broker_epoch: int = 0  # brokerEpoch the heartbeat/registration carried (0 = none)
    epoch: int = -1  # last epoch in the broker's epoch file (-1 = none)
    max_offset: int = -1
    confirm_offset: int = -1
    election_priority: int = DEFAULT_ELECTION_PRIORITY  # lower wins
    last_heartbeat_ms: int = 0
    timeout_ms: int = DEFAULT_HEARTBEAT_TIMEOUT_MS

    def is_alive(self, now_ms: int) -> bool:
        return self.last_heartbeat_ms + self.timeout_ms >= now_ms

    def to_dict(self) -> dict[str, Any]:
        return {
            "broker_id": self.broker_id,
            "broker_address": self.broker_address,
            "broker_epoch": self.broker_epoch,
            "epoch": self.epoch,
            "max_offset": self.max_offset,
            "confirm_offset": self.confirm_offset,
            "election_priority": self.election_priority,
            "last_heartbeat_ms": self.last_heartbeat_ms,
            "timeout_ms": self.timeout_ms,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LiveInfo:
        return cls(
            broker_id=int(d["broker_id"]),
            broker_address=str(d.get("broker_address", "")),
            broker_epoch=int(d.get("broker_epoch", 0)),
            epoch=int(d.get("epoch", -1)),
            max_offset=int(d.get("max_offset", -1)),
            confirm_offset=int(d.get("confirm_offset", -1)),
            election_priority=int(d.get("election_priority", DEFAULT_ELECTION_PRIORITY)),
            last_heartbeat_ms=int(d.get("last_heartbeat_ms", 0)),
            timeout_ms=int(d.get("timeout_ms", DEFAULT_HEARTBEAT_TIMEOUT_MS)),
        )


@dataclass(frozen=True)
class Context:
    """The leader's clock and (a copy of) its heartbeat table, stamped on a request."""

    now_ms: int
    live: dict[str, dict[int, LiveInfo]] = field(default_factory=dict)  # rows may be expired
    term: int = 0  # the leader's Raft term, for the history (not in to_dict: 0.1's commands have none)

    def rows(self, broker_name: str) -> dict[int, LiveInfo]:
        return self.live.get(broker_name, {})

    def row(self, broker_name: str, broker_id: int) -> LiveInfo | None:
        return self.live.get(broker_name, {}).get(broker_id)

    def is_alive(self, broker_name: str, broker_id: int) -> bool:
        """A row exists and last + timeout >= now (RocketMQ isBrokerActive)."""
        r = self.row(broker_name, broker_id)
        return r is not None and r.is_alive(self.now_ms)

    def to_dict(self) -> dict[str, Any]:
        return {
            "now_ms": self.now_ms,
            "live": {
                name: {str(bid): row.to_dict() for bid, row in sorted(rows.items())}
                for name, rows in sorted(self.live.items())
            },
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Context:
        live: dict[str, dict[int, LiveInfo]] = {}
        for name, rows in (d.get("live") or {}).items():
            live[str(name)] = {int(bid): LiveInfo.from_dict(row) for bid, row in rows.items()}
        return cls(now_ms=int(d["now_ms"]), live=live)


@dataclass
class Result:
    """A rule's decision: its code and remark, its typed response (``reply``: the class its row
    names; a plugin's rule may answer a plain map) and the records to apply."""

    code: int
    remark: str = ""
    reply: Response | Mapping[str, Any] | None = None
    records: list[Record] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.code = int(self.code)  # plain int, JSON-safe

    @property
    def ok(self) -> bool:
        return self.code == Code.SUCCESS

    @property
    def response(self) -> dict[str, Any]:
        """The reply as the transports carry it (proto field names): the one place it is written."""
        reply = self.reply
        if reply is None:
            return {}
        return reply.to_dict() if isinstance(reply, Response) else dict(reply)

    def answer(self) -> dict[str, Any]:
        """The decision as the transports answer it: the response with its code and remark."""
        answer = self.response
        answer["code"] = int(self.code)
        answer["remark"] = self.remark or ""
        return answer
