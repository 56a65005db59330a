"""Response codes and the one exception type that carries them.

RocketMQ's codes are kept by number and name so that operators and scripts that know
`mqadmin` read the same thing. mqctl's own extensions live at 2100 and above, above
RocketMQ's controller range (2000-2016), and are documented in docs/codes.md.
"""

from __future__ import annotations

from enum import IntEnum


class Code(IntEnum):
    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    NO_PERMISSION = 16

    CONTROLLER_FENCED_MASTER_EPOCH = 2000
    CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH = 2001
    CONTROLLER_INVALID_MASTER = 2002
    CONTROLLER_INVALID_REPLICAS = 2003
    CONTROLLER_MASTER_NOT_AVAILABLE = 2004
    CONTROLLER_INVALID_REQUEST = 2005
    CONTROLLER_BROKER_NOT_ALIVE = 2006
    CONTROLLER_NOT_LEADER = 2007
    CONTROLLER_BROKER_METADATA_NOT_EXIST = 2008
    CONTROLLER_INVALID_CLEAN_BROKER_METADATA = 2009
    CONTROLLER_BROKER_NEED_TO_BE_REGISTERED = 2010
    CONTROLLER_MASTER_STILL_EXIST = 2011
    CONTROLLER_ELECT_MASTER_FAILED = 2012
    CONTROLLER_ALTER_SYNC_STATE_SET_FAILED = 2013
    CONTROLLER_BROKER_ID_INVALID = 2014

    # mqctl extensions (docs/codes.md)
    STALE_BROKER_EPOCH = 2100
    INCONSISTENT_BROKER_OPTIONS = 2101
    WAITING_FOR_REPLICAS = 2102
    UNAUTHENTICATED = 2103
    UNAVAILABLE = 2104


def code_name(code: int) -> str:
    try:
        return Code(code).name
    except ValueError:
        return f"CODE_{code}"


class MqctlError(Exception):
    """Base of every error mqctl reports to a user as one line (never a traceback)."""

    exit_code = 1


class ControllerError(MqctlError):
    """A controller answered with a non-SUCCESS code, or could not be reached.

    `.code` is the RocketMQ-style number, `.remark` the controller's text, `.response` the
    decoded answer when there was one (2011 MASTER_STILL_EXIST carries the current master).
    """

    exit_code = 3

    def __init__(self, code: int, remark: str = "", response: object | None = None,
                 leader_address: str = "") -> None:
        self.code = int(code)
        self.remark = remark or ""
        self.response = response
        self.leader_address = leader_address
        super().__init__(f"{code_name(self.code)} ({self.code}): {self.remark}")


class StoreError(MqctlError):
    """A store file is missing, corrupt or not what the command expects; names file and offset."""

    exit_code = 4


class UsageError(MqctlError):
    """Wrong flags or a refused operation; the message says why and how to fix it."""

    exit_code = 2
