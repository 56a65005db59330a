"""brokerIdentity, epochFileCheckpoint, checkpoint, abort and lock: round trips and corrupt input."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqctl.errors import StoreError, UsageError
from mqctl.store import abort, checkpoint, epochfile, identity
from mqctl.store.epochfile import EpochEntry

# ------------------------------------------------------------------ brokerIdentity


def test_identity_round_trip_bytes(tmp_path: Path) -> None:
    ident = identity.BrokerIdentity("DefaultCluster", "broker-a", 1)
    identity.write_identity(tmp_path, ident)
    assert (tmp_path / "brokerIdentity").read_bytes() == b"DefaultCluster#broker-a#1"
    assert identity.read_identity(tmp_path) == ident
    assert not (tmp_path / "brokerIdentity.bak").exists()


def test_temp_identity_round_trip(tmp_path: Path) -> None:
    t = identity.TempBrokerIdentity("c", "b", 2, "127.0.0.1:30911;1690000000000")
    identity.write_temp_identity(tmp_path, t)
    assert (tmp_path / "brokerIdentity-temp").read_bytes() == b"c#b#2#127.0.0.1:30911;1690000000000"
    assert identity.read_temp_identity(tmp_path) == t


def test_identity_absent(tmp_path: Path) -> None:
    assert identity.read_identity(tmp_path) is None


@pytest.mark.parametrize(
    "content,msg",
    [
        (b"c#b", "line 1, offset 0: expected 3 '#'-separated fields, found 2: 'c#b'"),
        (b"c#b#x", "line 1, offset 4: brokerId 'x' is not an integer"),
        (b"#b#1", "line 1, offset 0: empty clusterName"),
        (b"c##1", "line 1, offset 2: empty brokerName"),
        (b"\xff\xfe#b#1", "offset 0: not UTF-8 text (invalid start byte)"),
    ],
)
def test_identity_corrupt(tmp_path: Path, unchanged, content: bytes, msg: str) -> None:
    (tmp_path / "brokerIdentity").write_bytes(content)
    with unchanged(tmp_path), pytest.raises(StoreError) as ei:
        identity.read_identity(tmp_path)
    assert str(ei.value) == f"{tmp_path / 'brokerIdentity'} {msg}"


@settings(deadline=None)
@given(
    st.text(alphabet=st.characters(blacklist_characters="#\n\r", blacklist_categories=("Cs",)), min_size=1),
    st.text(alphabet=st.characters(blacklist_characters="#\n\r", blacklist_categories=("Cs",)), min_size=1),
    st.integers(min_value=0, max_value=2**63 - 1),
)
def test_identity_property(cluster: str, broker: str, bid: int) -> None:
    ident = identity.BrokerIdentity(cluster, broker, bid)
    assert identity.parse_identity(identity.encode_identity(ident)) == ident


# ------------------------------------------------------------------ epochFileCheckpoint


def test_epoch_file_source_example(tmp_path: Path) -> None:
    entries = [EpochEntry(7, 7000), EpochEntry(8, 8000)]
    assert epochfile.encode_epoch_file(entries) == b"2\n773307083\n7-7000\n8-8000\n"
    assert epochfile.write_epoch_file(tmp_path, entries)
    assert (tmp_path / "epochFileCheckpoint").read_bytes() == b"2\n773307083\n7-7000\n8-8000\n"
    assert epochfile.read_epoch_file(tmp_path).entries == entries


def test_epoch_file_row27_bak_fallback(tmp_path: Path) -> None:
    entries = [EpochEntry(7, 7000), EpochEntry(8, 8000)]
    epochfile.write_epoch_file(tmp_path, entries)
    epochfile.write_epoch_file(tmp_path, entries)
    assert (tmp_path / "epochFileCheckpoint.bak").read_bytes() == b"2\n773307083\n7-7000\n8-8000\n"
    (tmp_path / "epochFileCheckpoint").unlink()
    got = epochfile.read_epoch_file(tmp_path)
    assert got.entries == entries
    assert got.source == str(tmp_path / "epochFileCheckpoint.bak")


def test_epoch_file_write_order_previous_content_to_bak(tmp_path: Path) -> None:
    epochfile.write_epoch_file(tmp_path, [EpochEntry(1, 0)])
    first = (tmp_path / "epochFileCheckpoint").read_bytes()
    assert not (tmp_path / "epochFileCheckpoint.bak").exists()
    epochfile.write_epoch_file(tmp_path, [EpochEntry(1, 0), EpochEntry(2, 100)])
    assert (tmp_path / "epochFileCheckpoint.bak").read_bytes() == first
    assert not (tmp_path / "epochFileCheckpoint.tmp").exists()


def test_epoch_file_empty_list_writes_nothing(tmp_path: Path) -> None:
    assert epochfile.write_epoch_file(tmp_path, []) is False
    assert list(tmp_path.iterdir()) == []


def test_epoch_cache_row26() -> None:
    entries = [EpochEntry(1, 100), EpochEntry(2, 300), EpochEntry(3, 500)]
    ends = epochfile.end_offsets(entries)
    assert (entries[1], ends[1]) == (EpochEntry(2, 300), 500)
    assert epochfile.truncate_suffix_by_offset(entries, 150) == [EpochEntry(1, 100)]
    assert epochfile.find_entry_by_offset(entries, 350) == EpochEntry(2, 300)
    other = [EpochEntry(1, 100), EpochEntry(2, 300), EpochEntry(3, 450)]
    LM = epochfile.LONG_MAX
    assert epochfile.find_consistent_point(entries, LM, other, LM) == 450
    assert (
        epochfile.find_consistent_point(
            [EpochEntry(1, 100), EpochEntry(2, 300), EpochEntry(3, 500)],
            700,
            [EpochEntry(1, 100), EpochEntry(2, 300), EpochEntry(3, 500)],
            600,
        )
        == 600
    )
    assert epochfile.find_consistent_point(entries, LM, [EpochEntry(1, 200), EpochEntry(2, 500)], LM) == -1


@pytest.mark.parametrize(
    "content,msg",
    [
        (b"x\n0\n1-0\n", "line 1, offset 0: bad count line 'x', expected a decimal entry count"),
        (b"3\n0\n1-0\n2-5\n", "line 1, offset 0: count line says 3 entries, found 2"),
        (
            b"2\n12345\n7-7000\n8-8000\n",
            "line 2, offset 2: CRC mismatch: file says 12345, entries give 773307083",
        ),
        (b"1\nabc\n1-0\n", "line 2, offset 2: bad CRC line 'abc', expected a decimal CRC"),
        (b"1\n0\n1-zz\n", "line 3, offset 4: bad entry '1-zz', expected <epoch>-<startOffset>"),
        (b"", "line 1, offset 0: empty file, expected a count line"),
        # a torn last line still parses as 2 entries: the CRC catches it
        (
            b"2\n773307083\n7-7000\n8-80",
            "line 2, offset 2: CRC mismatch: file says 773307083, entries give 681949327",
        ),
    ],
)
def test_epoch_file_corrupt_no_bak(tmp_path: Path, unchanged, content: bytes, msg: str) -> None:
    (tmp_path / "epochFileCheckpoint").write_bytes(content)
    with unchanged(tmp_path), pytest.raises(StoreError) as ei:
        epochfile.read_epoch_file(tmp_path)
    p = tmp_path / "epochFileCheckpoint"
    assert str(ei.value) == f"{p} {msg} (and no epochFileCheckpoint.bak to fall back to)"


def test_epoch_file_corrupt_main_uses_bak(tmp_path: Path, unchanged) -> None:
    (tmp_path / "epochFileCheckpoint").write_bytes(b"2\n1\n7-7000\n8-8000\n")
    (tmp_path / "epochFileCheckpoint.bak").write_bytes(b"2\n773307083\n7-7000\n8-8000\n")
    with unchanged(tmp_path):
        got = epochfile.read_epoch_file(tmp_path)
    assert got.entries == [EpochEntry(7, 7000), EpochEntry(8, 8000)]
    assert got.problems == [
        f"{tmp_path / 'epochFileCheckpoint'} line 2, offset 2: CRC mismatch: file says 1, "
        f"entries give 773307083",
        "using epochFileCheckpoint.bak",
    ]


def test_epoch_file_both_corrupt(tmp_path: Path, unchanged) -> None:
    (tmp_path / "epochFileCheckpoint").write_bytes(b"garbage")
    (tmp_path / "epochFileCheckpoint.bak").write_bytes(b"\x00\x01")
    with unchanged(tmp_path), pytest.raises(StoreError) as ei:
        epochfile.read_epoch_file(tmp_path)
    assert str(ei.value) == (
        f"{tmp_path / 'epochFileCheckpoint'} line 1, offset 0: bad count line 'garbage', expected a decimal "
        f"entry count; fallback {tmp_path / 'epochFileCheckpoint.bak'} line 1, offset 0: bad count line "
        f"'\\x00\\x01', expected a decimal entry count"
    )


def test_epoch_file_zero_crc_means_unchecked() -> None:
    assert epochfile.parse_epoch_file(b"1\n0\n3-30\n") == [EpochEntry(3, 30)]


def test_epoch_file_skips_lines_without_two_parts() -> None:
    # RocketMQ's fromLine skips them; the count line then decides
    assert epochfile.parse_epoch_file(b"1\n0\n3-30\nnonsense\n") == [EpochEntry(3, 30)]


def test_epoch_file_crc_covers_every_line_read() -> None:
    """CheckpointFile.read appends EVERY line after the CRC line (plus a line separator) to the CRC input,
    also the ones fromLine skips: an extra line makes RocketMQ reject the file (and read the .bak)."""
    import zlib

    for extra in (b"xyz\n", b"\n"):
        with pytest.raises(StoreError, match="line 2, offset 2: CRC mismatch: file says 773307083"):
            epochfile.parse_epoch_file(b"2\n773307083\n7-7000\n8-8000\n" + extra, "f")
    block = b"3-30\nnonsense\n"
    crc = zlib.crc32(block) & 0x7FFFFFFF
    assert epochfile.parse_epoch_file(b"1\n%d\n" % crc + block) == [EpochEntry(3, 30)]
    # a last line without its newline is read with one (readLine + lineSeparator)
    assert epochfile.parse_epoch_file(b"2\n773307083\n7-7000\n8-8000") == [
        EpochEntry(7, 7000),
        EpochEntry(8, 8000),
    ]


def test_epoch_file_line_split_like_java() -> None:
    # Java's String.split drops trailing empty strings: "7-7000-" has two parts for fromLine
    assert epochfile.parse_epoch_file(b"1\n0\n7-7000-\n") == [EpochEntry(7, 7000)]


entries_st = st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 2**40)), max_size=20).map(
    lambda xs: [
        EpochEntry(i, s) for i, s in zip(sorted({e for e, _ in xs}), sorted(s for _, s in xs), strict=False)
    ]
)


@settings(deadline=None)
@given(entries_st)
def test_epoch_file_property_round_trip(entries: list[EpochEntry]) -> None:
    assert epochfile.parse_epoch_file(epochfile.encode_epoch_file(entries)) == entries


@settings(deadline=None)
@given(entries_st, st.integers(0, 2**40))
def test_truncate_suffix_property(entries: list[EpochEntry], off: int) -> None:
    kept = epochfile.truncate_suffix_by_offset(entries, off)
    assert all(e.start_offset < off for e in kept)
    assert kept == entries[: len(kept)]


@settings(max_examples=50, deadline=None)
@given(st.binary(max_size=64))
def test_epoch_file_garbage_never_crashes(data: bytes) -> None:
    try:
        epochfile.parse_epoch_file(data, "f")
    except StoreError as exc:
        assert str(exc).startswith("f ")


# ------------------------------------------------------------------ checkpoint


def test_checkpoint_round_trip(tmp_path: Path) -> None:
    cp = checkpoint.StoreCheckpoint(1700000000000, 1700000000001, 1700000000002, 4096, 8192)
    checkpoint.write_checkpoint(tmp_path, cp)
    data = (tmp_path / "checkpoint").read_bytes()
    assert len(data) == 4096 and data[40:] == bytes(4056)
    assert data[32:40] == (8192).to_bytes(8, "big")
    assert checkpoint.read_checkpoint(tmp_path) == cp


def test_checkpoint_truncated(tmp_path: Path, unchanged) -> None:
    (tmp_path / "checkpoint").write_bytes(bytes(20))
    with unchanged(tmp_path), pytest.raises(StoreError) as ei:
        checkpoint.read_checkpoint(tmp_path)
    msg = str(ei.value)
    # what is short: the file, its size, the fields cut off; and what to do
    assert msg.startswith(
        f"{tmp_path / 'checkpoint'} offset 20: short checkpoint file: 20 bytes, but "
        "its 5 fields need 40 (RocketMQ writes 4096), so indexMsgTimestamp, "
        "masterFlushedOffset and confirmPhyOffset are cut off;"
    )
    assert "Move the file out of the store" in msg and "put back a copy from a backup" in msg
    assert "so confirmPhyOffset is cut off;" in checkpoint.short_checkpoint_message(39)
    (tmp_path / "checkpoint").write_bytes(bytes(40))  # the fields complete: read
    assert checkpoint.read_checkpoint(tmp_path) == checkpoint.StoreCheckpoint()


@settings(deadline=None)
@given(st.lists(st.integers(0, 2**63 - 1), min_size=5, max_size=5))
def test_checkpoint_property(vals: list[int]) -> None:
    cp = checkpoint.StoreCheckpoint(*vals)
    assert checkpoint.parse_checkpoint(checkpoint.encode_checkpoint(cp)) == cp


# ------------------------------------------------------------------ abort and lock


def test_abort_round_trip(tmp_path: Path) -> None:
    assert abort.read_abort(tmp_path) is None
    abort.write_abort(tmp_path, 4242)
    assert (tmp_path / "abort").read_bytes() == b"4242"
    assert abort.read_abort(tmp_path) == "4242"
    abort.remove_abort(tmp_path)
    assert abort.read_abort(tmp_path) is None


HOLDER = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.lockf(fd, fcntl.LOCK_EX)
print("locked", flush=True)
time.sleep(60)
"""


def hold_lock_in_process(root: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(root / "lock")], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    return proc


def test_lock_detects_other_process(tmp_path: Path) -> None:
    assert abort.is_locked(tmp_path) is False  # no lock file
    (tmp_path / "lock").touch()
    assert abort.is_locked(tmp_path) is False
    proc = hold_lock_in_process(tmp_path)
    try:
        assert abort.is_locked(tmp_path) is True
        with pytest.raises(UsageError, match="held by another process"):
            with abort.hold_lock(tmp_path):
                pass
    finally:
        proc.kill()
        proc.wait()
    deadline = time.time() + 5
    while abort.is_locked(tmp_path) and time.time() < deadline:
        time.sleep(0.05)
    with abort.hold_lock(tmp_path) as held:
        assert held is True
