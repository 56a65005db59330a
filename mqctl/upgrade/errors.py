"""The one exit code the upgrade commands add (docs/codes.md): 8, a wait that timed out."""

from __future__ import annotations

from mqctl.errors import EXIT_TIMEOUT, MqctlError

__all__ = ["EXIT_TIMEOUT", "WaitTimeoutError"]


class WaitTimeoutError(MqctlError):
    """`wait-master --timeout` ran out before the controller reported the broker as master."""

    exit_code = EXIT_TIMEOUT
