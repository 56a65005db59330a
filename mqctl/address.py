"""HOST:PORT, read in one place: controller addresses, Raft peers, listen addresses, brokers."""

from __future__ import annotations

import ipaddress
import socket
import time

from mqctl.errors import UsageError

__all__ = ["RAFT_BANNER", "is_loopback", "is_raft_port", "parse_address", "raft_port_error"]

# What a Raft port says, and only to a connection whose first bytes are not a node of its group's
# (an HTTP/2 preface, a remoting frame, a frame the cluster secret does not decrypt), just before it
# closes that connection: a client pointed at it can then say so at once (docs/serve.md).
RAFT_BANNER = b"mqctl-raft: the Raft port of an mqctl controller node, not its gRPC or remoting port\n"
_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_probed: dict[str, bool] = {}


def parse_address(value: str, what: str = "address", *, any_port: bool = False) -> tuple[str, int]:
    """``HOST:PORT`` or ``[V6]:PORT`` -> (host without brackets, port). The port is 1 to 65535, or 0
    too with ``any_port`` (a listen address: any free port). UsageError naming ``what`` otherwise."""
    host, sep, port = value.rpartition(":")
    low = 0 if any_port else 1
    if not sep or not host or not port.isdigit() or not low <= int(port) <= 65535:
        raise UsageError(f"bad {what} {value!r}: expected HOST:PORT with a port from {low} to 65535")
    return host.strip("[]"), int(port)


def is_raft_port(address: str, timeout: float = 0.3) -> bool:
    """Whether ``address`` answers an HTTP/2 preface with mqctl's Raft banner; asked once per address
    in a process (a client that failed to reach it over gRPC or remoting asks why)."""
    if address in _probed:
        return _probed[address]

    answer = b""
    try:
        host, port = parse_address(address)
        deadline = time.monotonic() + timeout
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(_HTTP2_PREFACE)
            while len(answer) < len(RAFT_BANNER) and time.monotonic() < deadline:
                sock.settimeout(max(0.01, deadline - time.monotonic()))
                chunk = sock.recv(len(RAFT_BANNER) - len(answer))
                if not chunk:
                    break
                answer += chunk
    except (OSError, UsageError):
        pass
    _probed[address] = answer.startswith(RAFT_BANNER[:10]) and RAFT_BANNER.startswith(answer)
    return _probed[address]


def raft_port_error(address: str) -> UsageError:
    return UsageError(
        f"{address} is a Raft port, not the controller's gRPC or remoting port: point -a at "
        "the node's --listen (gRPC) or --remoting-port address"
    )


def is_loopback(host: str) -> bool:
    """``localhost`` or a loopback IP address (brackets allowed)."""
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
