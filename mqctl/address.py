"""HOST:PORT, read in one place: controller addresses, Raft peers, listen addresses, brokers."""

from __future__ import annotations

import ipaddress

from mqctl.errors import UsageError

__all__ = ["is_loopback", "parse_address"]


def parse_address(value: str, what: str = "address", *, any_port: bool = False) -> tuple[str, int]:
    """``HOST:PORT`` or ``[V6]:PORT`` -> (host without brackets, port). The port is 1 to 65535, or 0
    too with ``any_port`` (a listen address: any free port). UsageError naming ``what`` otherwise."""
    host, sep, port = value.rpartition(":")
    low = 0 if any_port else 1
    if not sep or not host or not port.isdigit() or not low <= int(port) <= 65535:
        raise UsageError(f"bad {what} {value!r}: expected HOST:PORT with a port from {low} to 65535")
    return host.strip("[]"), int(port)


def is_loopback(host: str) -> bool:
    """``localhost`` or a loopback IP address (brackets allowed)."""
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
