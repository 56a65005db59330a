"""The broker's epoch cache: RocketMQ's EpochFileCache over ``epochFileCheckpoint`` (mqctl.store.epochfile).

Rules kept from RocketMQ (reference 7.2): an entry is appended only if both its epoch and its
startOffset are greater than the last entry's; every change is written at once.

Deliberate differences (docs/broker.md):
* RocketMQ's CheckpointFile.write returns without writing when the list is empty, so a truncation to
  zero entries leaves the old entries on disk and a restart reads them back. Here an emptied cache
  deletes the file and its ``.bak`` so that a restart sees what memory saw.
* An epoch that holds no data (its start equals the log's end) is dropped before a new one is
  appended at the same offset (see ``BrokerAgent._change_to_master``); RocketMQ refuses the append
  instead and goes on writing the new epoch's messages under the old epoch's entry.
"""

from __future__ import annotations

import os
from pathlib import Path

from mqctl.store.epochfile import (
    LONG_MAX,
    EpochEntry,
    end_offsets,
    epoch_path,
    find_consistent_point,
    read_epoch_file,
    truncate_suffix_by_offset,
    write_epoch_file,
)

__all__ = ["EpochCache", "truncation_point"]


class EpochCache:
    def __init__(self, store_dir: str | os.PathLike[str], *, persist: bool = True) -> None:
        self.root = Path(store_dir)
        self.persist = persist
        self.entries: list[EpochEntry] = read_epoch_file(self.root).entries if persist else []

    def _save(self) -> None:
        if not self.persist:
            return
        if self.entries:
            write_epoch_file(self.root, self.entries)
        else:
            path = epoch_path(self.root)
            path.unlink(missing_ok=True)
            path.with_name(path.name + ".bak").unlink(missing_ok=True)

    @property
    def last_epoch(self) -> int:
        """-1 when empty (what a heartbeat carries for an empty epoch file)."""
        return self.entries[-1].epoch if self.entries else -1

    @property
    def last_entry(self) -> EpochEntry | None:
        return self.entries[-1] if self.entries else None

    def append(self, epoch: int, start_offset: int) -> bool:
        last = self.last_entry
        if last is not None and (epoch <= last.epoch or start_offset <= last.start_offset):
            return False
        self.entries.append(EpochEntry(epoch, start_offset))
        self._save()
        return True

    def truncate_suffix_by_offset(self, offset: int) -> None:
        """Drop entries that start at or after ``offset`` (nothing of them survives a log cut there)."""
        kept = truncate_suffix_by_offset(self.entries, offset)
        if kept != self.entries:
            self.entries = kept
            self._save()

    def entry_for(self, offset: int, max_offset: int) -> tuple[EpochEntry, int] | None:
        """(entry, its end) for the epoch ``offset`` belongs to; the last entry's end is unbounded.
        An offset at the very end belongs to the last epoch."""
        ends = end_offsets(self.entries, LONG_MAX)
        for e, end in zip(self.entries, ends, strict=True):
            if e.start_offset <= offset < end:
                return e, end
        if self.entries and offset == max_offset:
            return self.entries[-1], LONG_MAX
        return None


def truncation_point(
    local: list[EpochEntry], local_max: int, master: list[EpochEntry], master_max: int
) -> int:
    """Where a slave cuts its log before replicating (RIP-44, AutoSwitchHAClient.doTruncate): 0 for a
    slave without epochs (a new replica: everything it has came from nowhere), else
    findConsistentPoint: walk local epochs newest first to the first one the master has with the
    same startOffset and cut at the smaller endOffset. -1 when there is no consistent point.

    Two additions, both only ever cut more than RocketMQ would (the master stays authoritative, so a
    deeper cut costs a re-fetch, never data): epochs that start at or after the slave's end hold
    nothing and are ignored; with no common epoch but a master history that starts at offset 0,
    none of the slave's data can be in the master's log, so the cut is at 0."""
    trimmed = truncate_suffix_by_offset(local, local_max)
    if not trimmed:
        return 0
    point = find_consistent_point(trimmed, local_max, master, master_max)
    if point < 0 and master and master[0].start_offset == 0:
        return 0
    return point
