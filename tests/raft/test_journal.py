"""mqctl's durable Raft journal (mqctl/raft/journal.py) and its file layer, in-process."""

from __future__ import annotations

import json
import logging
import os
import random
import shutil

import pytest

from mqctl.errors import EXIT_STORE
from mqctl.localgroup import wait_until
from mqctl.raft import journal as jmod
from mqctl.raft.journal import HEADER_SIZE, DurableJournal, JournalCorruptError, encode_record, tear_tail
from mqctl.raft.storage import FAULT_FILE, Storage, StorageError

SIM = Storage(crash_sim=True)


def cmd(i: int, size: int = 20) -> bytes:
    return bytes([0]) + (f"entry-{i}-".encode() * size)[:size]


def fill(j: DurableJournal, first: int, last: int, term: int = 1, size: int = 20) -> None:
    for i in range(first, last + 1):
        j.add(cmd(i, size), i, term)


def power_loss(j: DurableJournal) -> None:
    """What SIGKILL in crash-simulation mode does: the process is gone, nothing is flushed."""
    j._file.close()


def entries(j: DurableJournal) -> list[tuple[bytes, int, int]]:
    return [j[i] for i in range(len(j))]


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The journal's warnings but the slow-fdatasync one, which the machine's load decides."""
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "mqctl.raft.journal"
        and r.levelno >= logging.WARNING
        and not (r.getMessage().startswith("raft journal: fdatasync of") and " took " in r.getMessage())
    ]


@pytest.fixture
def path(tmp_path) -> str:
    return str(tmp_path / "raft.journal")


def test_round_trip(path) -> None:
    j = DurableJournal(path)
    fill(j, 1, 50)
    j.setCurrentTerm(7, "127.0.0.1:1")
    j.setRaftCommitIndex(50)
    assert j.sync()
    j.onOneSecondTimer()
    before = entries(j)
    j._destroy()
    k = DurableJournal(path)
    assert entries(k) == before
    assert (k.getCurrentTerm(), k.getVotedForNodeId(), k.getRaftCommitIndex()) == (7, "127.0.0.1:1", 50)
    assert k[-1] == (cmd(50), 50, 1) and k[0][1] == 1 and len(k[5:10]) == 5
    with open(path, "rb") as fh:
        assert fh.read(8) == b"MQCTLWAL"


def test_crash_sim_loses_exactly_what_was_not_synced(path) -> None:
    j = DurableJournal(path, SIM)
    fill(j, 1, 10)
    assert j.sync()
    fill(j, 11, 20)  # written (page cache), not synced
    power_loss(j)
    k = DurableJournal(path, SIM)
    assert [e[1] for e in entries(k)] == list(range(1, 11))
    assert k.durable_index() == 10


def test_group_commit_one_fdatasync_for_many_entries(path, monkeypatch) -> None:
    calls = []
    real = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", lambda fd: (calls.append(fd), real(fd)))
    j = DurableJournal(path)
    calls.clear()
    fill(j, 1, 100)
    assert calls == []
    assert j.sync() and len(calls) == 1
    assert j.sync() and len(calls) == 1  # nothing new: no fsync at all


@pytest.mark.parametrize("seed", range(6))
def test_torn_tail_is_cut_with_one_warning(path, caplog, seed) -> None:
    j = DurableJournal(path, SIM)
    fill(j, 1, 30)
    assert j.sync()
    power_loss(j)
    size = os.path.getsize(path)
    kind = tear_tail(path, random.Random(seed))
    assert os.path.getsize(path) > size
    caplog.set_level(logging.INFO)
    k = DurableJournal(path, SIM)
    assert [e[1] for e in entries(k)] == list(range(1, 31))
    found = warnings(caplog)
    assert len(found) == 1, (kind, found)
    assert "cut a torn or corrupt tail" in found[0] and "after index 30" in found[0]
    assert os.path.getsize(path) == size  # cut durably, even in crash simulation
    fill(k, 31, 32)
    assert k.sync()
    power_loss(k)
    caplog.clear()
    m = DurableJournal(path)
    assert m[-1][1] == 32 and warnings(caplog) == []


def test_corrupt_record_in_the_middle_is_refused(path) -> None:
    j = DurableJournal(path)
    fill(j, 1, 10)
    assert j.sync()
    off = j._offsets[4]
    j._destroy()
    with open(path, "r+b") as fh:
        fh.seek(off + 20)
        byte = fh.read(1)
        fh.seek(off + 20)
        fh.write(bytes([byte[0] ^ 0xFF]))
    with open(path, "rb") as fh:
        damaged = fh.read()
    with pytest.raises(JournalCorruptError, match=f"corrupt record at offset {off} .*intact records after"):
        DurableJournal(path)
    assert JournalCorruptError.exit_code == EXIT_STORE
    with open(path, "rb") as fh:
        assert fh.read() == damaged  # never "repaired" by cutting valid entries


def test_index_gap_is_refused(path) -> None:
    j = DurableJournal(path)
    fill(j, 1, 3)
    assert j.sync()
    j._destroy()
    with open(path, "ab") as fh:
        fh.write(encode_record(9, 1, cmd(9)))
    with pytest.raises(JournalCorruptError, match="has index 9 term 1 after index 3"):
        DurableJournal(path)


def test_zeroed_sector_of_an_unsynced_write_counts_as_torn(path, caplog) -> None:
    """Power loss can persist a later sector of an unsynced write and not an earlier one: a record
    with a zero-filled sector followed by an intact record is a torn tail, not corruption."""
    j = DurableJournal(path)
    fill(j, 1, 3, size=1500)
    assert j.sync()
    off = j._offsets[1]
    j._destroy()
    with open(path, "r+b") as fh:
        start = (off // 512 + 1) * 512
        fh.seek(start)
        fh.write(bytes(512))
    k = DurableJournal(path)
    assert [e[1] for e in entries(k)] == [1]
    assert len(warnings(caplog)) == 1 and "intact records from offset" in warnings(caplog)[0]


def test_truncation_is_durable_at_once(path) -> None:
    j = DurableJournal(path, SIM)
    fill(j, 1, 20)
    assert j.sync()
    j.deleteEntriesFrom(12)  # pysyncobj: entries from position 12 (index 13) on
    fill(j, 13, 14, term=2)  # the new leader's entries, not synced
    power_loss(j)
    k = DurableJournal(path, SIM)
    assert [(e[1], e[2]) for e in entries(k)] == [(i, 1) for i in range(1, 13)]


def test_compaction_and_its_crash_safety(path) -> None:
    j = DurableJournal(path, SIM)
    fill(j, 1, 100)
    assert j.sync()
    fill(j, 101, 105)  # not synced yet: the compaction makes them durable too
    j.deleteEntriesTo(98)
    assert [e[1] for e in entries(j)] == list(range(99, 106))
    assert not os.path.exists(path + ".compact")
    power_loss(j)
    k = DurableJournal(path, SIM)
    assert [e[1] for e in entries(k)] == list(range(99, 106))
    fill(k, 106, 110)
    assert k.sync()
    power_loss(k)
    assert DurableJournal(path, SIM)[-1][1] == 110


def test_failed_compaction_keeps_the_old_file_in_use(path, tmp_path) -> None:
    storage = Storage(crash_sim=True, fault_inject=True)
    j = DurableJournal(path, storage)
    fill(j, 1, 50)
    assert j.sync()
    (tmp_path / FAULT_FILE).write_text("ENOSPC")
    j.deleteEntriesTo(40)
    assert j.error and "compacting" in j.error
    assert not os.path.exists(path + ".compact")
    (tmp_path / FAULT_FILE).unlink()
    fill(j, 51, 55)
    assert j.sync() and j.error is None
    power_loss(j)
    k = DurableJournal(path, storage)  # a superset: pysyncobj drops the head again on load
    assert [e[1] for e in entries(k)] == list(range(1, 56))


def test_term_and_vote_are_durable_before_set_current_term_returns(path, tmp_path) -> None:
    storage = Storage(crash_sim=True, fault_inject=True)
    j = DurableJournal(path, storage)
    j.setCurrentTerm(5, "127.0.0.1:2")
    with open(path + ".meta") as fh:
        assert json.load(fh)["term"] == 5  # on disk, not in a crash-sim buffer
    (tmp_path / FAULT_FILE).write_text("EROFS")
    with pytest.raises(StorageError):
        j.setCurrentTerm(6, "127.0.0.1:3")
    assert (j.getCurrentTerm(), j.getVotedForNodeId()) == (5, "127.0.0.1:2")  # not taken
    assert "EROFS" in (j.error or "")
    power_loss(j)
    (tmp_path / FAULT_FILE).unlink()
    k = DurableJournal(path, storage)
    assert (k.getCurrentTerm(), k.getVotedForNodeId()) == (5, "127.0.0.1:2")


def test_commit_index_never_stored_beyond_the_durable_log_and_clamped_on_load(path) -> None:
    j = DurableJournal(path, SIM)
    fill(j, 1, 10)
    assert j.sync()
    fill(j, 11, 20)
    j.setRaftCommitIndex(18)  # known committed (on other nodes), not durable here
    j.onOneSecondTimer()
    j.drain()  # the hint is stored on the journal's sync thread
    with open(path + ".meta") as fh:
        assert json.load(fh)["commitIndex"] == 10
    power_loss(j)
    with open(path + ".meta", "w") as fh:  # a meta file from before: commit index past the log
        json.dump({"format": jmod.META_FORMAT, "term": 1, "votedFor": None, "commitIndex": 500}, fh)
    k = DurableJournal(path, SIM)
    assert k.getRaftCommitIndex() == 10


def test_disk_full_stops_acknowledging_and_recovers_without_loss(path, tmp_path, caplog) -> None:
    storage = Storage(fault_inject=True)
    j = DurableJournal(path, storage)
    fill(j, 1, 5)
    assert j.sync()
    (tmp_path / FAULT_FILE).write_text("")  # empty: ENOSPC
    fill(j, 6, 10)  # never raises
    assert not j.sync() and not j.sync()
    assert j.error is not None and "ENOSPC" in j.error and not j.healthy
    j.onOneSecondTimer()  # the probe fails quietly
    assert len(warnings(caplog)) == 1
    assert j.durable_index() == 5
    j.deleteEntriesFrom(8)  # truncation while failing: done later
    (tmp_path / FAULT_FILE).unlink()
    caplog.set_level(logging.INFO)
    j.onOneSecondTimer()  # the probe: storage works again
    assert j.error is None and j.durable_index() == 8
    assert any("storage works again" in r.getMessage() for r in caplog.records)
    j._destroy()
    assert [e[1] for e in entries(DurableJournal(path))] == list(range(1, 9))


def test_deleted_journal_file_is_written_anew(path) -> None:
    j = DurableJournal(path)
    fill(j, 1, 5)
    assert j.sync()
    os.unlink(path)
    fill(j, 6, 7)
    assert j.sync()
    j._destroy()
    assert [e[1] for e in entries(DurableJournal(path))] == list(range(1, 8))


def test_bad_header_and_newer_format_are_refused(path) -> None:
    with open(path, "wb") as fh:
        fh.write(b"something else entirely" * 4)
    with pytest.raises(JournalCorruptError, match="not an mqctl Raft journal"):
        DurableJournal(path)
    head = bytearray(jmod.header())
    head[8] = 2
    with open(path, "wb") as fh:
        fh.write(bytes(head[:40]) + jmod._LEN.pack(jmod.zlib.crc32(bytes(head[:40]))) + bytes(4))
    with pytest.raises(JournalCorruptError, match="journal format 2"):
        DurableJournal(path)
    assert len(jmod.header()) == HEADER_SIZE


def test_corrupt_meta_is_refused(path) -> None:
    DurableJournal(path)._destroy()
    with open(path + ".meta", "w") as fh:
        fh.write("{broken")
    with pytest.raises(JournalCorruptError, match=r"raft.journal.meta: Raft term/vote file is corrupt"):
        DurableJournal(path)


def test_pysyncobj_journal_is_converted_and_old_releases_refuse_the_new_one(path) -> None:
    from pysyncobj.journal import FileJournal

    old = FileJournal(path)
    for i in range(1, 8):
        old.add(cmd(i), i, 2)
    old.setCurrentTerm(4, "127.0.0.1:9")
    old.setRaftCommitIndex(6)
    old.onOneSecondTimer()
    old._destroy()
    j = DurableJournal(path)
    assert [e[1] for e in entries(j)] == list(range(1, 8)) and j[3] == (cmd(4), 4, 2)
    assert (j.getCurrentTerm(), j.getVotedForNodeId(), j.getRaftCommitIndex()) == (4, "127.0.0.1:9", 6)
    j._destroy()
    with open(path, "rb") as fh:
        assert fh.read(8) == b"MQCTLWAL"
    with pytest.raises(Exception):  # noqa: B017 - pysyncobj's reader fails with struct.error
        FileJournal(path)


def test_removed_data_directory_is_written_anew_once_it_exists_again(tmp_path, caplog) -> None:
    data = tmp_path / "data"
    data.mkdir()
    path = str(data / "raft.journal")
    j = DurableJournal(path, SIM)
    fill(j, 1, 10)
    j.setCurrentTerm(3, "127.0.0.1:1")
    assert j.sync()
    shutil.rmtree(data)
    j.onOneSecondTimer()  # noticed while idle, by the probe
    assert j.error and "was removed under this node" in j.error and str(data) in j.error
    fill(j, 11, 12)  # never raises
    assert not j.sync() and not j.needs_snapshot
    j.onOneSecondTimer()
    assert len(warnings(caplog)) == 1  # one line, not one per retry
    data.mkdir()
    caplog.set_level(logging.INFO)
    assert j.sync() and j.error is None  # meta file first, then the journal
    assert any("written anew" in r.getMessage() for r in caplog.records)
    power_loss(j)
    k = DurableJournal(path, SIM)
    assert [e[1] for e in entries(k)] == list(range(1, 13))
    assert (k.getCurrentTerm(), k.getVotedForNodeId()) == (3, "127.0.0.1:1")


def test_removed_compacted_journal_waits_for_a_snapshot(tmp_path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    path = str(data / "raft.journal")
    j = DurableJournal(path, SIM)
    fill(j, 1, 50)
    j.setCurrentTerm(2, None)
    assert j.sync()
    j.deleteEntriesTo(40)  # compacted: the journal continues a snapshot
    shutil.rmtree(data)
    fill(j, 51, 52)
    assert not j.sync() and j.needs_snapshot
    data.mkdir()
    assert not j.sync() and j.needs_snapshot  # never a journal without its snapshot
    assert not os.path.exists(path) and "was removed" in (j.error or "")
    j.deleteEntriesTo(5)  # the fork wrote a snapshot and compacts onto it
    assert j.error is None and not j.needs_snapshot
    power_loss(j)
    k = DurableJournal(path, SIM)
    assert [e[1] for e in entries(k)] == list(range(46, 53)) and k.getCurrentTerm() == 2


def test_sync_soon_makes_entries_durable_on_its_own_thread(path) -> None:
    """A leader's group commit without waiting (FORK.md change 19): durable_index moves once the
    sync thread is done, and what it reported durable survives a power loss."""
    woken = []
    j = DurableJournal(path, SIM)
    j.on_durable = lambda: woken.append(1)
    fill(j, 1, 30)
    assert j.durable_index() == 0
    assert j.sync_soon()
    j.drain()  # the thread's fdatasync is done
    assert j.durable_index() == 30 and woken
    fill(j, 31, 40)  # added, never synced
    power_loss(j)
    k = DurableJournal(path, SIM)
    assert [e[1] for e in entries(k)] == list(range(1, 31))


def sync_done(j: DurableJournal) -> None:
    """Wait until the sync thread has finished the sync asked for (its result not taken yet)."""
    wait_until(lambda: j._syncer is not None and j._syncer._done is not None, 10, what="the sync thread")


def test_a_failed_sync_on_the_sync_thread_is_reported_and_counts_nothing(path, tmp_path) -> None:
    storage = Storage(crash_sim=True, fault_inject=True)
    j = DurableJournal(path, storage)
    fill(j, 1, 5)
    assert j.sync()
    fill(j, 6, 9)
    (tmp_path / FAULT_FILE).write_text("EIO")
    assert j.sync_soon()  # asked; the thread fails
    sync_done(j)
    assert not j.sync_soon() and "EIO" in (j.error or "")
    assert j.durable_index() == 5
    (tmp_path / FAULT_FILE).unlink()
    assert j.sync_soon()  # the blocking sync recovers: written again
    assert j.durable_index() == 9 and j.error is None


def test_a_sync_finished_before_the_log_was_cut_counts_nothing_after(path, tmp_path) -> None:
    """The thread's result names the file as it was (its generation): entries written anew at the
    same offsets after a cut are not durable because of it."""
    j = DurableJournal(path, Storage(crash_sim=True, fault_inject=True))
    fill(j, 1, 5)
    assert j.sync()
    fill(j, 6, 9)
    assert j.sync_soon()
    sync_done(j)  # through index 9 of term 1, not taken yet
    j.deleteEntriesFrom(6)  # a new leader's log: 7..9 cut (fsynced at once) ...
    fill(j, 7, 9, term=2)  # ... and written again, same sizes, same offsets
    (tmp_path / FAULT_FILE).write_text("SLOW 2000")
    assert j.sync_soon()  # takes the old result: another generation
    assert j.durable_index() == 6
    (tmp_path / FAULT_FILE).unlink()
    j.drain()
    assert j.durable_index() == 9 and [e[2] for e in entries(j)][-3:] == [2, 2, 2]


def test_entries_kept_in_one_buffer_read_as_a_list_would() -> None:
    """The journal keeps its entries as a buffer and integer columns (no object per entry): what
    pysyncobj reads (items, slices, iteration) after appends and cuts at either end is what a list
    of (command, index, term) tuples gives."""
    rng = random.Random(7)
    kept, want = jmod._Entries(), []
    for i in range(1, 400):
        entry = (rng.randbytes(rng.randrange(0, 60)), i, i // 10)
        kept.append(entry)
        want.append(entry)
        if rng.random() < 0.05:
            k = rng.randrange(len(want) + 1)
            kept.keep_first(k)
            del want[k:]
        if rng.random() < 0.05:
            k = rng.randrange(len(want) + 1)
            kept.drop_first(k)
            del want[:k]
        assert len(kept) == len(want) and list(kept) == want and kept[2:7] == want[2:7]
        if want:
            assert kept[-1] == want[-1] and kept.index(0) == want[0][1] and kept.index(-1) == want[-1][1]
    with pytest.raises(IndexError):
        kept[len(want)]
