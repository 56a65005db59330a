"""`<root>/checkpoint` (reference section 7.3): 4096 bytes, big-endian int64 fields, the rest zero."""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from mqctl.camel import camel_fields
from mqctl.store._util import read_bytes, read_parsed, store_error, write_bytes_synced

CHECKPOINT_FILE = "checkpoint"
CHECKPOINT_SIZE = 4096
_FMT = ">qqqqq"
_USED = struct.calcsize(_FMT)  # 40

__all__ = [
    "CHECKPOINT_FILE",
    "CHECKPOINT_SIZE",
    "StoreCheckpoint",
    "encode_checkpoint",
    "parse_checkpoint",
    "read_checkpoint",
    "write_checkpoint",
]


@dataclass(frozen=True)
class StoreCheckpoint:
    physic_msg_timestamp: int = 0
    logics_msg_timestamp: int = 0
    index_msg_timestamp: int = 0
    master_flushed_offset: int = 0
    confirm_phy_offset: int = 0

    def to_dict(self) -> dict[str, int]:
        return camel_fields(self)


_FIELDS = (
    "physicMsgTimestamp",
    "logicsMsgTimestamp",
    "indexMsgTimestamp",
    "masterFlushedOffset",
    "confirmPhyOffset",
)


def short_checkpoint_message(size: int) -> str:
    """What is missing from a checkpoint of ``size`` (< 40) bytes, and what to do about it."""
    cut = [name for i, name in enumerate(_FIELDS) if (i + 1) * 8 > size]
    names = ", ".join(cut[:-1]) + " and " + cut[-1] if len(cut) > 1 else cut[0]
    return (
        f"short checkpoint file: {size} bytes, but its {len(_FIELDS)} fields need {_USED} (RocketMQ "
        f"writes {CHECKPOINT_SIZE}), so {names} {'are' if len(cut) > 1 else 'is'} cut off; "
        "RocketMQ would read the missing bytes as zeros. Move the file out of the store (a broker "
        "starts with a new, zeroed one and recovers from the commitlog itself) or put back a copy "
        "from a backup"
    )


def parse_checkpoint(data: bytes, path: str = CHECKPOINT_FILE) -> StoreCheckpoint:
    if len(data) < _USED:
        raise store_error(path, short_checkpoint_message(len(data)), offset=len(data))
    vals = struct.unpack_from(_FMT, data, 0)
    for i, v in enumerate(vals):
        if v < 0:
            raise store_error(path, f"negative value {v}", offset=i * 8)
    return StoreCheckpoint(*vals)


def encode_checkpoint(cp: StoreCheckpoint) -> bytes:
    return struct.pack(
        _FMT,
        cp.physic_msg_timestamp,
        cp.logics_msg_timestamp,
        cp.index_msg_timestamp,
        cp.master_flushed_offset,
        cp.confirm_phy_offset,
    ).ljust(CHECKPOINT_SIZE, b"\0")


def checkpoint_path(root: str | os.PathLike[str]) -> Path:
    return Path(root) / CHECKPOINT_FILE


def read_checkpoint(root: str | os.PathLike[str]) -> StoreCheckpoint | None:
    return read_parsed(checkpoint_path(root), parse_checkpoint)


def write_checkpoint(root: str | os.PathLike[str], cp: StoreCheckpoint) -> None:
    """Overwrite the fields in place (RocketMQ mmaps the file and writes the longs); the file stays
    4096 bytes and anything RocketMQ keeps past offset 40 is preserved."""
    path = checkpoint_path(root)
    old = read_bytes(path)
    new = encode_checkpoint(cp)
    if old is not None and len(old) >= CHECKPOINT_SIZE:
        new = new[:_USED] + old[_USED:]
    write_bytes_synced(path, new)
