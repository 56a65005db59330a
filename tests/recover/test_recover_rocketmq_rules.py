# ruff: noqa: E501
"""The store tools decide as RocketMQ 5.3.3 does (issue 12), on stores built with the writers:

* the end of the log: a last file ending with the blank marker and no next file ends at the marker
  (CommitLog.recoverNormally/recoverAbnormally), so `plan` proposes no marker bytes to drop and
  `truncate --to <max offset>` leaves the marker;
* clean or not: RocketMQ's `abort` file (DefaultMessageStore.load: lastExitOK = !isTempFileExist()), with
  or without mqctl's signature; `mark-clean` removes `abort`.

tests/recover/test_rocketmq_broker_store.py proves both against stores a real RocketMQ broker wrote.
"""

from __future__ import annotations

import struct
from pathlib import Path

from mqctl.recover.inspect import inspect_store
from mqctl.store.build import build_store
from mqctl.store.commitlog import BLANK_MAGIC, CommitLogWriter, file_name

H = [(0, 0), (1, 900)]


def marker_store(root: Path, **kw) -> Path:
    """Records up to 1500 in 1000-byte files, then the blank marker at 1500 that a message which did not
    fit leaves, and no file 2000 (it could not be created, or a slave's copy stopped at the file end)."""
    p = build_store(root, history=H, max_offset=1500, file_size=1000, **kw)
    with CommitLogWriter(p / "commitlog", 1000) as w:
        assert w.offset == 1500
        w.roll()
    (p / "commitlog" / file_name(2000)).unlink()
    assert struct.unpack_from(">iI", (p / "commitlog" / file_name(1000)).read_bytes(), 500) == (
        500,
        BLANK_MAGIC,
    )
    return p


def test_marker_in_the_last_file_no_bytes_to_drop(tmp_path: Path, cli, unchanged) -> None:
    a = marker_store(tmp_path / "a", abort=True)  # dirty, ends with the marker
    b = build_store(tmp_path / "b", history=H, max_offset=1500, file_size=1000, broker_id=2)  # clean
    with unchanged(tmp_path):
        d = cli("recover", "inspect", str(a), "--deep", "-o", "json").json()["stores"][0]
        assert (d["maxOffset"], d["bytesBeyond"], d["problems"]) == (1500, 0, [])
        p = cli("recover", "plan", str(a), str(b), "-o", "json").json()
    (s,) = p["brokerSets"]
    assert (s["source"], s["sourceClean"], s["warnings"]) == (str(b), True, [])
    rows = {r["store"]: r for r in s["replicas"]}
    assert (rows[str(a)]["maxOffset"], rows[str(a)]["truncateTo"], rows[str(a)]["bytesToDrop"]) == (
        1500,
        1500,
        0,
    )
    c = cli("recover", "compare", str(a), str(b), "-o", "json").json()
    assert (c["fresher"], c["consistentPoint"], c["aBytesBeyond"], c["bBytesBeyond"]) == ("equal", 1500, 0, 0)


def test_truncate_to_the_max_offset_keeps_the_marker(tmp_path: Path, cli) -> None:
    a = marker_store(tmp_path / "a")
    before = (a / "commitlog" / file_name(1000)).read_bytes()
    r = cli("recover", "truncate", str(a), "--to", "1500", "--yes", "-o", "json")
    assert r.code == 0, r.err
    assert (r.json()["bytesToDrop"], r.json()["files"], r.json()["backupDir"]) == (0, [], None)
    assert (a / "commitlog" / file_name(1000)).read_bytes() == before
    r = cli("recover", "truncate", str(a), "--to", "2000", "--yes")
    assert (r.code, r.err) == (
        2,
        "mqctl: error: offset 2000 is beyond the last valid record's end 1500; "
        "nearest boundary below: 1500\n",
    )
    r = cli("recover", "truncate", str(a), "--to", "1400", "--dry-run", "-o", "json")
    assert r.code == 0, r.err
    assert r.json()["files"] == [
        {
            "file": str(a / "commitlog" / file_name(1000)),
            "fromPosition": 400,
            "bytes": 108,
            "wholeFile": False,
        }
    ]  # the last record and the marker


def test_no_abort_is_clean_without_a_signature(tmp_path: Path, cli) -> None:
    """A store RocketMQ shut down cleanly: no `abort` (deleted by DefaultMessageStore.shutdown), an empty
    `abort.bak` (MixAll.string2File at start), no mqctl signature."""
    a = build_store(tmp_path / "a", history=H, max_offset=1200)
    (a / "abort.bak").write_text("")
    rep = inspect_store(a)
    assert (rep.state, rep.dirty_reasons, rep.signature) == ("clean", [], None)
    d = build_store(tmp_path / "d", history=H, max_offset=1300, broker_id=2, abort="31337")
    p = cli("recover", "plan", str(a), str(d), "-o", "json").json()["brokerSets"][0]
    assert (p["source"], p["sourceClean"]) == (str(a), True)
    assert p["warnings"] == [
        f"{d} is fresher than the clean source but dirty: 100 bytes beyond 1200 would be dropped"
    ]


def test_mark_clean_removes_abort(tmp_path: Path, cli, unchanged) -> None:
    a = build_store(tmp_path / "a", history=H, max_offset=1200, abort="4242")
    assert inspect_store(a).dirty_reasons == ["abort file present (pid 4242): not shut down cleanly"]
    with unchanged(tmp_path):
        r = cli("recover", "mark-clean", str(a), "--dry-run", "-o", "json")
    assert r.code == 0, r.err
    assert (r.json()["abortRemoved"], r.json()["notes"]) == (
        False,
        [
            "abort file (pid 4242) would be removed: RocketMQ runs its normal recovery on the next start, not the abnormal one"
        ],
    )
    r = cli("recover", "mark-clean", str(a), "--yes")
    assert r.code == 0, r.err
    assert "note: abort file (pid 4242) removed" in r.out
    assert not (a / "abort").exists()
    rep = inspect_store(a)
    assert (rep.state, rep.problems) == ("clean", [])
    assert (
        rep.signature is not None and rep.signature.final is not None and rep.signature.final.abort == "4242"
    )
    # again: nothing to remove, the signature is rewritten
    r = cli("recover", "mark-clean", str(a), "--yes", "-o", "json")
    assert r.code == 0 and r.json()["abortRemoved"] is False and r.json()["notes"] == []


def test_mark_clean_needs_controller_mode_files(tmp_path: Path, cli) -> None:
    """A store outside controller mode has no brokerIdentity and no epoch file: no signature can be
    derived, and mark-clean says how to let RocketMQ recover it normally."""
    a = build_store(tmp_path / "a", history=[], max_offset=1200, broker_id=None, abort=True)
    assert inspect_store(a).state == "dirty"
    r = cli("recover", "mark-clean", str(a), "--yes")
    assert (r.code, r.err) == (
        2,
        f"mqctl: error: {a}: cannot derive an initial signature (no brokerIdentity: "
        f"not a store of controller mode); to have RocketMQ run its normal recovery, "
        f"remove its abort file yourself\n",
    )
    assert (a / "abort").exists()
