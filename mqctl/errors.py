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
    NOT_CAUGHT_UP = 2105
    FEATURE_LEVEL_TOO_LOW = 2106


def code_name(code: int) -> str:
    try:
        return Code(code).name
    except ValueError:
        return f"CODE_{code}"


class MqctlError(Exception):
    """Base of every error mqctl reports to a user as one line (never a traceback)."""

    exit_code = 1


# Exit codes of `mqctl` (docs/codes.md): the same for every command.
EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_REFUSED = 3
EXIT_STORE = 4
EXIT_NOT_FOUND = 5
EXIT_UNREACHABLE = 6
EXIT_UNHEALTHY = 7
EXIT_TIMEOUT = 8  # a wait (e.g. `upgrade wait-master --timeout`) ran out
EXIT_MISSING_DEPENDENCY = 9  # an optional component is missing (pyspark, numpy, java) or Spark failed
EXIT_DEGRADED = 10  # `quorum status`: a node is down or reports a problem, but quorum holds

_UNREACHABLE_CODES = frozenset({2104, 2007})  # UNAVAILABLE, CONTROLLER_NOT_LEADER
_NOT_FOUND_CODES = frozenset({2008, 2010})  # BROKER_METADATA_NOT_EXIST, NEED_TO_BE_REGISTERED


class ControllerError(MqctlError):
    """A controller answered with a non-SUCCESS code, or could not be reached.

    `.code` is the RocketMQ-style number, `.remark` the controller's text, `.response` the
    decoded answer when there was one (2011 MASTER_STILL_EXIST carries the current master).
    `.exit_code`: 6 when no controller (or no leader) could be reached, 5 for an unknown
    broker set, 3 for every other refusal.
    """

    exit_code = EXIT_REFUSED

    def __init__(
        self, code: int, remark: str = "", response: object | None = None, leader_address: str = ""
    ) -> None:
        self.code = int(code)
        self.remark = remark or ""
        self.response = response
        self.leader_address = leader_address
        if self.code in _UNREACHABLE_CODES:
            self.exit_code = EXIT_UNREACHABLE
        elif self.code in _NOT_FOUND_CODES:
            self.exit_code = EXIT_NOT_FOUND
        super().__init__(f"{code_name(self.code)} ({self.code}): {self.remark}")


class StoreError(MqctlError):
    """A store file is missing, corrupt or not what the command expects; names file and offset."""

    exit_code = EXIT_STORE


class UsageError(MqctlError):
    """Wrong flags or a refused operation; the message says why and how to fix it."""

    exit_code = EXIT_USAGE


class NotFoundError(MqctlError):
    """What the command names does not exist (a broker set, a cluster, a broker id)."""

    exit_code = EXIT_NOT_FOUND


class UnreachableError(MqctlError):
    """No controller or broker service answered (or the controller group has no leader)."""

    exit_code = EXIT_UNREACHABLE


class RefusedError(MqctlError):
    """The operation was refused (by the controller, or by mqctl's own guard before asking it)."""

    exit_code = EXIT_REFUSED


class UnhealthyError(MqctlError):
    """A health-style check found a problem (no quorum, diverging state hashes, a node down)."""

    exit_code = EXIT_UNHEALTHY


class DegradedError(MqctlError):
    """The controller group works (its leader has a quorum, the states agree) with a node down or
    reporting a problem: one more failure away from no quorum."""

    exit_code = EXIT_DEGRADED
