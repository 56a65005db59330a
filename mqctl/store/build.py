"""Build RocketMQ-shaped store directories with the writers (tests, demos, the large-store generator).

Record bodies are derived from (epoch, offset) so two stores built with the same history hold the
same bytes up to where their histories part, as replicas would.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from mqctl.store.abort import write_abort
from mqctl.store.checkpoint import StoreCheckpoint, write_checkpoint
from mqctl.store.commitlog import COMMITLOG_DIR, CommitLog, CommitLogWriter, Message, encode_record
from mqctl.store.epochfile import EpochEntry, write_epoch_file
from mqctl.store.identity import BrokerIdentity, write_identity
from mqctl.store.signature import Signature, derive_initial, make_final, write_signature

BASE_TIME = 1_700_000_000_000
TOPIC = "T"
_OVERHEAD = len(encode_record(Message(TOPIC, b""), 0))  # 92 with topic "T"

__all__ = ["BASE_TIME", "build_store", "fill_to", "message_for"]


def message_for(epoch: int, offset: int, size: int) -> Message:
    """A deterministic message of exactly `size` encoded bytes for `offset` in `epoch`."""
    blen = size - _OVERHEAD
    if blen < 0:
        raise ValueError(f"record size {size} below the minimum {_OVERHEAD}")
    seed = f"e{epoch}@{offset};".encode()
    body = (seed * (blen // len(seed) + 1))[:blen]
    return Message(
        TOPIC,
        body,
        b"",
        queue_offset=offset,
        born_timestamp=BASE_TIME + offset,
        store_timestamp=BASE_TIME + offset,
        store_host=("127.0.0.1", 10911),
    )


def fill_to(writer: CommitLogWriter, epoch: int, target: int, *, record_size: int = 100) -> int:
    """Append records until the writer's offset is exactly `target` (records of about `record_size`);
    returns the number of records. Rolls over files like RocketMQ."""
    n = 0
    fs = writer.file_size
    while writer.offset < target:
        file_end = writer.offset - writer.offset % fs + fs
        left = file_end - writer.offset
        remaining = target - writer.offset
        if target < file_end:
            if target > file_end - 8:
                raise ValueError(f"offset {target} lies in the last 8 bytes of a file: no record ends there")
            rest = remaining - record_size
            size = record_size if rest == 0 or rest >= _OVERHEAD else remaining
        elif left - 8 >= record_size + _OVERHEAD:
            size = record_size
        elif left - 8 >= _OVERHEAD:
            size = left - 8
        else:
            writer.roll()
            continue
        if size < _OVERHEAD:
            raise ValueError(f"cannot fill {remaining} bytes with records of at least {_OVERHEAD}")
        writer.append(message_for(epoch, writer.offset, size))
        n += 1
        if writer.offset == file_end - 8 and target >= file_end:
            writer.roll()
    if writer.offset != target:
        raise ValueError(f"overshot {target}: at {writer.offset}")
    return n


def build_store(
    root: str | os.PathLike[str],
    *,
    history: Sequence[tuple[int, int]],
    max_offset: int,
    cluster: str = "cluster-a",
    broker: str = "broker-set-a",
    broker_id: int | None = 1,
    file_size: int = 1 << 20,
    record_size: int = 100,
    clean: bool = False,
    abort: bool | str = False,
    confirm_offset: int | None = None,
) -> Path:
    """A store at `root`: brokerIdentity, epochFileCheckpoint (history = [(epoch, startOffset)]),
    commitlog records up to exactly `max_offset` with a boundary at every epoch start, checkpoint
    (confirmPhyOffset = confirm_offset or max_offset), `abort` when asked, and with clean=True a
    final signature as an orderly shutdown would leave."""
    rootp = Path(root)
    rootp.mkdir(parents=True, exist_ok=True)
    if broker_id is not None:
        write_identity(rootp, BrokerIdentity(cluster, broker, broker_id))
    entries = [EpochEntry(e, s) for e, s in history]
    if entries:
        write_epoch_file(rootp, entries)
    with CommitLogWriter(rootp / COMMITLOG_DIR, file_size) as w:
        bounds = [s for _, s in history[1:]] + ([max_offset] if history else [])
        for (epoch, _start), end in zip(history, bounds, strict=True):
            fill_to(w, epoch, min(end, max_offset), record_size=record_size)
        if not history and max_offset:
            fill_to(w, 0, max_offset, record_size=record_size)

    last_ts = CommitLog(rootp / COMMITLOG_DIR, file_size).scan().last_store_timestamp if max_offset else 0
    write_checkpoint(
        rootp,
        StoreCheckpoint(
            last_ts, last_ts, last_ts, 0, max_offset if confirm_offset is None else confirm_offset
        ),
    )
    if abort:
        write_abort(rootp, abort if isinstance(abort, str) else 12345)
    if clean and entries:
        ini = derive_initial(cluster, broker, entries[0].epoch, entries[0].start_offset)
        fin = make_final(ini.id, entries[-1].epoch, entries[-1].start_offset, max_offset, BASE_TIME)
        write_signature(rootp, Signature(ini, fin))
    return rootp
