"""The agent's storage and epoch rules without a controller: commitlog files read back with mqctl.store,
byte-identical replication by chunks, truncation, crash tails; the RIP-44 truncation point."""

from __future__ import annotations

import os

import pytest

from mqctl.broker.epoch_file_cache import EpochCache, truncation_point
from mqctl.broker.log import CommitLogStore, OffsetsLog
from mqctl.store.commitlog import CommitLog
from mqctl.store.epochfile import EpochEntry, read_epoch_file


def E(*pairs: tuple[int, int]) -> list[EpochEntry]:
    return [EpochEntry(e, s) for e, s in pairs]


@pytest.mark.parametrize(
    ("local", "local_max", "master", "master_max", "point"),
    [
        # slave behind in the master's old epoch: keeps everything (min of the two ends)
        (E((1, 0)), 900, E((1, 0), (2, 1000)), 1200, 900),
        # slave has more of epoch 1 than the new master took over: cut at the master's end of epoch 1
        (E((1, 0)), 1000, E((1, 0), (2, 900)), 1200, 900),
        # same epochs, nothing to cut
        (E((1, 0), (2, 1000)), 1200, E((1, 0), (2, 1000), (3, 1200)), 1300, 1200),
        # the slave led epoch 3 the master never saw: walk back to epoch 1
        (E((1, 0), (3, 1000)), 1100, E((1, 0), (2, 900)), 1000, 900),
        # same epoch number, other start (cannot match): walk back further
        (E((1, 0), (2, 800)), 1000, E((1, 0), (2, 700)), 1200, 700),
        # a new replica: nothing to keep
        ([], 0, E((1, 0)), 500, 0),
        # an epoch that starts at the slave's end holds nothing and is ignored
        (E((1, 0), (4, 600)), 600, E((1, 0), (2, 700)), 900, 600),
        # no common epoch, the master's history starts at 0: none of the slave's data is the master's
        (E((2, 0)), 100, E((1, 0), (3, 50)), 400, 0),
        # no common epoch and the master's history does not reach back: manual repair
        (E((2, 0)), 100, E((3, 500)), 900, -1),
    ],
)
def test_truncation_point(local, local_max, master, master_max, point) -> None:
    assert truncation_point(local, local_max, master, master_max) == point


def test_epoch_cache_rules_and_file(tmp_path) -> None:
    cache = EpochCache(tmp_path)
    assert cache.last_epoch == -1
    assert cache.append(1, 0)
    assert not cache.append(1, 10), "epoch must grow"
    assert not cache.append(2, 0), "startOffset must grow"
    assert cache.append(2, 100) and cache.append(5, 300)
    assert read_epoch_file(tmp_path).entries == E((1, 0), (2, 100), (5, 300))
    assert cache.entry_for(150, 400) == (EpochEntry(2, 100), 300)
    assert cache.entry_for(400, 400)[0] == EpochEntry(5, 300)
    cache.truncate_suffix_by_offset(300)
    assert EpochCache(tmp_path).entries == E((1, 0), (2, 100))
    cache.truncate_suffix_by_offset(0)
    assert cache.entries == []
    # RocketMQ would leave the old entries on disk; a restart must see the empty cache
    assert EpochCache(tmp_path).entries == []
    assert not (tmp_path / "epochFileCheckpoint").exists()


def test_commitlog_store_roll_read_replicate_truncate(tmp_path) -> None:
    size = 4096
    master = CommitLogStore(tmp_path / "m", size)
    bodies = [(f"message-{i}-" + "x" * (i % 50)).encode() for i in range(200)]
    ends = []
    for b in bodies:
        off, end = master.append("TopicTest", b, ("127.0.0.1", 10911))
        ends.append((off, end))
    assert master.max_offset == ends[-1][1] > 3 * size  # rolled over several files
    recs = list(CommitLog(tmp_path / "m" / "commitlog", size).iter_records())
    assert [r.body for r in recs] == bodies
    assert [r.offset for r in recs] == [o for o, _ in ends]
    # a slave copies chunk by chunk: whole records, never across a file end
    slave = CommitLogStore(tmp_path / "s", size)
    while slave.max_offset < master.max_offset:
        data, length = master.read_chunk(slave.max_offset, 700, 1 << 62)
        assert length > 0 and len(data) == length
        assert slave.max_offset // size == (slave.max_offset + length - 1) // size
        slave.write_chunk(slave.max_offset, data, length)
    for name in sorted(os.listdir(tmp_path / "m" / "commitlog")):
        assert (tmp_path / "m" / "commitlog" / name).read_bytes() == (
            tmp_path / "s" / "commitlog" / name
        ).read_bytes(), name
    # truncation at a record boundary, then a reopen recovers exactly there
    keep = next(i for i in range(120, 200) if ends[i][0] % size)  # a cut inside a file
    cut = ends[keep][0]
    slave.truncate(cut)
    slave.close()
    reopened = CommitLogStore(tmp_path / "s", size)
    assert reopened.max_offset == cut
    assert [m.body for m in reopened.messages()] == bodies[:keep]
    # a torn write past the end (a crash mid-append) is dropped on open
    reopened.close()
    path = tmp_path / "s" / "commitlog" / f"{cut - cut % size:020d}"
    with open(path, "r+b") as fh:
        fh.seek(cut % size)
        fh.write(b"\xda\xa3\x20\xa7garbage")
    again = CommitLogStore(tmp_path / "s", size)
    assert again.max_offset == cut
    assert again.read_chunk(cut, 100, 1 << 62) == (b"", 0)
    again.close()
    # a cut exactly at a file start (the previous file ends with its blank marker)
    at_start = next(o for o, _ in ends if o and o % size == 0)
    master.truncate(at_start)
    master.close()
    # RocketMQ's recovery ends the log at the blank marker when the file after it is gone
    assert CommitLogStore(tmp_path / "m", size).max_offset == max(e for _, e in ends if e <= at_start)


def test_offsets_log_persists_max_offset(tmp_path) -> None:
    log = OffsetsLog(tmp_path)
    for _ in range(10):
        log.append("T", b"abc", ("127.0.0.1", 1))
    end = log.max_offset
    assert log.read_chunk(0, 1 << 20, end) == (b"", end)
    log.truncate(end // 2)
    log.close()
    assert OffsetsLog(tmp_path).max_offset == end // 2
