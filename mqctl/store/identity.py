"""`brokerIdentity` and `brokerIdentity-temp` (reference section 7.1).

One line of UTF-8, no trailing newline, fields joined by `#`:
`clusterName#brokerName#brokerId` and `clusterName#brokerName#brokerId#registerCheckCode`.
RocketMQ writes them by deleting the file and then writing it (no `.bak`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from mqctl.store._util import read_parsed, store_error, write_bytes_synced

IDENTITY_FILE = "brokerIdentity"
TEMP_SUFFIX = "-temp"

__all__ = [
    "IDENTITY_FILE",
    "BrokerIdentity",
    "TempBrokerIdentity",
    "encode_identity",
    "encode_temp_identity",
    "parse_identity",
    "parse_temp_identity",
    "read_identity",
    "read_temp_identity",
    "write_identity",
    "write_temp_identity",
]


@dataclass(frozen=True)
class BrokerIdentity:
    cluster_name: str
    broker_name: str
    broker_id: int


@dataclass(frozen=True)
class TempBrokerIdentity:
    cluster_name: str
    broker_name: str
    broker_id: int
    register_check_code: str


def _fields(data: bytes, path: str, n: int) -> list[str]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise store_error(path, f"not UTF-8 text ({exc.reason})", offset=exc.start) from None
    nl = text.find("\n")
    if nl >= 0 and text[nl:].strip():
        raise store_error(path, "more than one line", offset=len(text[:nl].encode()), line=2)
    text = text.rstrip("\r\n")
    parts = text.split("#")
    if len(parts) != n:
        raise store_error(
            path, f"expected {n} '#'-separated fields, found {len(parts)}: {text[:80]!r}", offset=0, line=1
        )
    names = ("clusterName", "brokerName")
    for i, name in enumerate(names):
        if not parts[i]:
            off = len("#".join(parts[:i]).encode()) + (1 if i else 0)
            raise store_error(path, f"empty {name}", offset=off, line=1)
    id_off = len("#".join(parts[:2]).encode()) + 1
    try:
        int(parts[2])
    except ValueError:
        raise store_error(path, f"brokerId {parts[2]!r} is not an integer", offset=id_off, line=1) from None
    return parts


def parse_identity(data: bytes, path: str = IDENTITY_FILE) -> BrokerIdentity:
    p = _fields(data, path, 3)
    return BrokerIdentity(p[0], p[1], int(p[2]))


def parse_temp_identity(data: bytes, path: str = IDENTITY_FILE + TEMP_SUFFIX) -> TempBrokerIdentity:
    p = _fields(data, path, 4)
    if not p[3]:
        raise store_error(path, "empty registerCheckCode", offset=len("#".join(p[:3]).encode()) + 1, line=1)
    return TempBrokerIdentity(p[0], p[1], int(p[2]), p[3])


def encode_identity(ident: BrokerIdentity) -> bytes:
    return f"{ident.cluster_name}#{ident.broker_name}#{ident.broker_id}".encode()


def encode_temp_identity(ident: TempBrokerIdentity) -> bytes:
    return (
        f"{ident.cluster_name}#{ident.broker_name}#{ident.broker_id}#{ident.register_check_code}"
    ).encode()


def identity_path(root: str | os.PathLike[str]) -> Path:
    return Path(root) / IDENTITY_FILE


def temp_identity_path(root: str | os.PathLike[str]) -> Path:
    return Path(root) / (IDENTITY_FILE + TEMP_SUFFIX)


def read_identity(root: str | os.PathLike[str]) -> BrokerIdentity | None:
    """`<root>/brokerIdentity`, None when absent."""
    return read_parsed(identity_path(root), parse_identity)


def read_temp_identity(root: str | os.PathLike[str]) -> TempBrokerIdentity | None:
    return read_parsed(temp_identity_path(root), parse_temp_identity)


def _check_names(ident: BrokerIdentity | TempBrokerIdentity) -> None:
    for v in (ident.cluster_name, ident.broker_name):
        if not v or "#" in v or "\n" in v:
            raise ValueError(f"invalid name {v!r}: must be non-empty without '#' or newline")


def write_identity(root: str | os.PathLike[str], ident: BrokerIdentity) -> None:
    """RocketMQ's order: delete the file, then write it."""
    _check_names(ident)
    path = identity_path(root)
    path.unlink(missing_ok=True)
    write_bytes_synced(path, encode_identity(ident))


def write_temp_identity(root: str | os.PathLike[str], ident: TempBrokerIdentity) -> None:
    _check_names(ident)
    if not ident.register_check_code or "#" in ident.register_check_code:
        raise ValueError("registerCheckCode must be non-empty without '#'")
    path = temp_identity_path(root)
    path.unlink(missing_ok=True)
    write_bytes_synced(path, encode_temp_identity(ident))
