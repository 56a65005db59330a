"""systemd's readiness protocol (sd_notify(3)) without libsystemd: one datagram of ``KEY=VALUE`` lines
to the unix socket named by $NOTIFY_SOCKET. A unit of Type=notify is started once ``READY=1`` arrives,
so `systemctl start` and the next unit of a rolling restart wait until the node has joined its group,
and ``STATUS=`` is what `systemctl status` shows. Without $NOTIFY_SOCKET every call does nothing."""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping

log = logging.getLogger("mqctl.serve")


class Notifier:
    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        path = (os.environ if environ is None else environ).get("NOTIFY_SOCKET", "")
        # "@name" is a socket in the abstract namespace (systemd's own notation)
        self.address = "\0" + path[1:] if path.startswith("@") else path
        self._sock: socket.socket | None = None
        self._failed = False
        self._status = ""

    @property
    def enabled(self) -> bool:
        return bool(self.address) and self.address.startswith(("/", "\0"))

    def notify(self, **fields: str) -> bool:
        """Send ``KEY=VALUE`` lines (keys as systemd spells them: READY, STATUS, STOPPING); True when
        the datagram was sent. A supervisor that went away costs one log line, never the node."""
        if not self.enabled or not fields:
            return False
        message = "".join(f"{key}={value}\n" for key, value in fields.items()).encode()
        try:
            if self._sock is None:
                self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
            self._sock.sendto(message, self.address)
        except OSError as exc:
            if not self._failed:
                self._failed = True
                log.warning("sd_notify to %s failed: %s", os.environ.get("NOTIFY_SOCKET"), exc)
            return False
        return True

    def watchdog_interval(self, environ: Mapping[str, str] | None = None) -> float:
        """Seconds between WATCHDOG=1 pings (half of the unit's WatchdogSec=, as sd_watchdog_enabled(3)
        advises), or 0 when systemd watches no watchdog of this process."""
        env = os.environ if environ is None else environ
        usec, pid = env.get("WATCHDOG_USEC", ""), env.get("WATCHDOG_PID", "")
        if not self.enabled or not usec.isdigit() or int(usec) == 0:
            return 0.0
        if pid and pid != str(os.getpid()):
            return 0.0
        return int(usec) / 2e6

    def status(self, text: str, **fields: str) -> None:
        """STATUS= once per change (the main loop calls it every 0.2 s)."""
        if text != self._status or fields:
            self._status = text
            self.notify(**fields, STATUS=text)

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
