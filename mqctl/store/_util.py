"""Helpers shared by the store format modules: masked CRC32, error text, RocketMQ's string2File."""

from __future__ import annotations

import os
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from mqctl.errors import StoreError

__all__ = ["crc32_masked", "read_bytes", "read_parsed", "store_error", "string_to_file", "write_bytes_synced"]

T = TypeVar("T")


def crc32_masked(data: bytes | bytearray | memoryview) -> int:
    """CRC32 & 0x7FFFFFFF, as RocketMQ's UtilAll.crc32 (BODYCRC, epoch file CRC)."""
    return zlib.crc32(data) & 0x7FFFFFFF


def store_error(
    path: str | os.PathLike[str], what: str, *, offset: int | None = None, line: int | None = None
) -> StoreError:
    """A StoreError whose message names the file and the byte offset (and line, for text files)."""
    where = []
    if line is not None:
        where.append(f"line {line}")
    if offset is not None:
        where.append(f"offset {offset}")
    loc = (" " + ", ".join(where)) if where else ""
    return StoreError(f"{os.fspath(path)}{loc}: {what}")


def read_bytes(path: Path) -> bytes | None:
    """The file's bytes, None when it does not exist; any other OS error is a StoreError."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise store_error(path, "is a directory, expected a file") from None
    except OSError as exc:
        raise store_error(path, f"cannot read: {exc.strerror or exc}") from None


def read_parsed(path: Path, parse: Callable[[bytes, str], T]) -> T | None:
    """``parse(its bytes, its path)`` of a store file, None when it does not exist."""
    data = read_bytes(path)
    return None if data is None else parse(data, str(path))


def write_bytes_synced(path: Path, data: bytes) -> None:
    """Write (truncate + write + fsync) one file in place."""
    try:
        with open(path, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:
        raise store_error(path, f"cannot write: {exc.strerror or exc}") from None


def string_to_file(path: Path, data: bytes) -> None:
    """RocketMQ's MixAll.string2File order: new content to `<file>.tmp`, the previous content of the
    file to `<file>.bak`, then the new content into place (mqctl renames the fsynced .tmp over it)."""
    tmp = path.with_name(path.name + ".tmp")
    bak = path.with_name(path.name + ".bak")
    write_bytes_synced(tmp, data)
    prev = read_bytes(path)
    if prev is not None:
        write_bytes_synced(bak, prev)
    try:
        os.replace(tmp, path)
    except OSError as exc:
        raise store_error(path, f"cannot replace: {exc.strerror or exc}") from None
    fsync_dir(path.parent)


def fsync_dir(directory: Path) -> None:
    """Make a rename or a new file in `directory` durable (best effort)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
