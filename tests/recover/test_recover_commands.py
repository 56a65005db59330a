"""inspect / compare / plan / mark-clean / truncate through the CLI: states, numbers, refusals, no writes."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from mqctl.recover.inspect import inspect_store
from mqctl.store.build import build_store
from mqctl.store.checkpoint import short_checkpoint_message
from mqctl.store.commitlog import file_name

MQCTL = str(Path(sys.executable).with_name("mqctl"))
H = [(0, 0), (1, 900)]


def test_inspect_numbers(tmp_path: Path, cli, unchanged) -> None:
    a = build_store(
        tmp_path / "a",
        history=[(0, 0), (1, 900), (2, 1200)],
        max_offset=1500,
        file_size=1000,
        clean=True,
        confirm_offset=1400,
    )
    with unchanged(tmp_path):
        r = cli("recover", "inspect", str(a), "--deep", "-o", "json")
    assert r.code == 0, r.err
    (d,) = r.json()["stores"]
    assert {
        k: d[k]
        for k in (
            "state",
            "clusterName",
            "brokerName",
            "brokerId",
            "lastEpoch",
            "minOffset",
            "maxOffset",
            "confirmOffset",
            "checkpointMatches",
            "fileSize",
            "fileCount",
            "totalBytes",
            "deep",
            "recordsScanned",
            "bytesScanned",
            "abort",
            "locked",
            "dirtyReasons",
            "problems",
        )
    } == {
        "state": "clean",
        "clusterName": "cluster-a",
        "brokerName": "broker-set-a",
        "brokerId": 1,
        "lastEpoch": 2,
        "minOffset": 0,
        "maxOffset": 1500,
        "confirmOffset": 1400,
        "checkpointMatches": True,
        "fileSize": 1000,
        "fileCount": 2,
        "totalBytes": 2000,
        "deep": True,
        "recordsScanned": 15,
        "bytesScanned": 1500,
        "abort": None,
        "locked": False,
        "dirtyReasons": [],
        "problems": [],
    }
    assert d["epochs"] == [
        {"epoch": 0, "startOffset": 0, "endOffset": 900},
        {"epoch": 1, "startOffset": 900, "endOffset": 1200},
        {"epoch": 2, "startOffset": 1200, "endOffset": 1500},
    ]
    t = cli("recover", "inspect", str(a))
    assert t.code == 0 and "clean" in t.out and "1500" in t.out


def test_states(tmp_path: Path, cli) -> None:
    clean = build_store(tmp_path / "clean", history=H, max_offset=1200, clean=True)
    dirty = build_store(tmp_path / "dirty", history=H, max_offset=1200, abort="777")
    nosig = build_store(tmp_path / "nosig", history=H, max_offset=1200)
    empty = build_store(tmp_path / "empty", history=[], max_offset=0)
    (tmp_path / "bare").mkdir()
    r = cli(
        "recover",
        "inspect",
        str(clean),
        str(dirty),
        str(nosig),
        str(empty),
        str(tmp_path / "bare"),
        "-o",
        "json",
    )
    assert r.code == 5, r.err  # the bare directory holds no store (the others are reported all the same)
    got = {Path(d["store"]).name: (d["state"], d["dirtyReasons"]) for d in r.json()["stores"]}
    assert got == {
        "clean": ("clean", []),
        "dirty": ("dirty", ["abort file present (pid 777): not shut down cleanly"]),
        # no abort file: RocketMQ shut it down cleanly (DefaultMessageStore.shutdown deletes `abort`), with
        # or without mqctl's signature
        "nosig": ("clean", []),
        "empty": ("empty", []),
        "bare": ("no store", []),
    }


def test_a_missing_store_is_an_error_row_and_exit_4(tmp_path: Path, cli) -> None:
    clean = build_store(tmp_path / "clean", history=H, max_offset=1200, clean=True)
    missing = tmp_path / "missing"
    r = cli("recover", "inspect", str(missing))
    assert r.code == 4 and r.out == ""  # the error line, no table of dashes
    assert r.err == f"mqctl: error: {missing}: does not exist (no store directory here)\n"
    r = cli("recover", "inspect", str(clean), str(missing))
    assert r.code == 4 and "clean" in r.out and str(missing) not in r.out
    r = cli("recover", "inspect", str(clean), str(missing), "-o", "json")
    assert r.code == 4
    doc = r.json()
    assert [d["state"] for d in doc["stores"]] == ["clean", "error"]
    assert doc["stores"][1] == {
        "store": str(missing),
        "state": "error",
        "exitCode": 4,
        "error": f"{missing}: does not exist (no store directory here)",
    }
    assert doc["error"] == {
        "code": "STORE",
        "exitCode": 4,
        "message": "1 of 2 stores could not be inspected: "
        f"{missing}: does not exist (no store directory here)",
    }


def test_a_directory_without_a_store_says_where_the_stores_are_and_exits_5(tmp_path: Path, cli) -> None:
    for i in range(3):
        build_store(tmp_path / "set" / f"r{i}", history=H, max_offset=1200, clean=True, broker_id=i + 1)
    (tmp_path / "empty").mkdir()
    for output in ("table", "json"):
        r = cli("recover", "inspect", str(tmp_path / "set"), "-o", output)
        assert r.code == 5, r.err
        assert r.err == (
            f"mqctl: error: {tmp_path / 'set'}: no store here (none of RocketMQ's store files); "
            f"stores beneath it: r0, r1, r2 (inspect {tmp_path / 'set' / '*'} or name them)\n"
        )
        if output == "table":
            assert r.out == ""
    r = cli("recover", "inspect", str(tmp_path / "empty"))
    assert r.code == 5 and r.out == ""
    assert r.err.endswith("no store here (none of RocketMQ's store files); none beneath it either\n")
    assert r.err.count("\n") == 1


def test_one_corrupt_store_does_not_abort_inspect_compare_or_plan(tmp_path: Path, cli) -> None:
    a = build_store(tmp_path / "a", history=H, max_offset=1200, clean=True)
    b = build_store(tmp_path / "b", history=H, max_offset=1100, broker_id=2)
    bad = build_store(tmp_path / "bad", history=H, max_offset=1100, broker_id=3)
    (bad / "checkpoint").write_bytes(b"short")
    why = f"{bad / 'checkpoint'} offset 5: {short_checkpoint_message(5)}"
    # inspect: a row per store, the corrupt one an error row; exit 4 (the worst)
    for output in ("json", "table"):
        r = cli("recover", "inspect", str(a), str(bad), str(b), "-o", output)
        assert r.code == 4 and r.err == f"mqctl: error: 1 of 3 stores could not be inspected: {why}\n"
    r = cli("recover", "inspect", str(a), str(bad), str(b), "-o", "json")
    assert [(Path(d["store"]).name, d["state"]) for d in r.json()["stores"]] == [
        ("a", "clean"),
        ("bad", "error"),
        ("b", "clean"),
    ]
    t = cli("recover", "inspect", str(a), str(bad), str(b))
    assert "ERROR" in t.out and f"{bad}: error: {why}" in t.out.replace("\n", "")
    # compare: both rows, the comparison is not made
    r = cli("recover", "compare", str(a), str(bad), "-o", "json")
    doc = r.json()
    assert r.code == 4 and doc["sameBrokerSet"] is None and doc["fresher"] is None
    assert [s["state"] for s in doc["stores"]] == ["clean", "error"] and doc["error"]["exitCode"] == 4
    t = cli("recover", "compare", str(a), str(bad))
    assert t.code == 4 and "ERROR" in t.out and "same broker set" not in t.out
    # plan: the readable stores are planned, the corrupt one is unmatched with its error
    r = cli("recover", "plan", str(a), str(bad), str(b), "-o", "json")
    plan = r.json()
    assert r.code == 4
    assert [x["store"] for x in plan["brokerSets"][0]["replicas"]] == [str(a), str(b)]
    assert plan["unmatched"] == [{"store": str(bad), "state": "error", "reason": why}]
    t = cli("recover", "plan", str(a), str(bad), str(b))
    assert t.code == 4 and "unmatched" in t.out and "source" in t.out


def test_compare_says_equal_in_table_and_json(tmp_path: Path, cli) -> None:
    a = build_store(tmp_path / "a", history=H, max_offset=1200)
    b = build_store(tmp_path / "b", history=H, max_offset=1200, broker_id=2)
    assert cli("recover", "compare", str(a), str(b), "-o", "json").json()["fresher"] == "equal"
    assert "fresher: equal" in cli("recover", "compare", str(a), str(b)).out


def test_final_signature_that_no_longer_matches(tmp_path: Path, cli) -> None:
    """Without `abort` the store is clean whatever an older final signature says (a broker ran on it after
    mark-clean and shut down cleanly; RocketMQ does not update mqctl's file): the mismatch is a problem.
    An `abort` acknowledged by a signature (mqctl 0.1's mark-clean left the file) counts only while the
    signature matches."""
    from mqctl.store.abort import write_abort
    from mqctl.store.build import fill_to
    from mqctl.store.commitlog import CommitLogWriter
    from mqctl.store.signature import Signature, read_signature, write_signature

    a = build_store(tmp_path / "a", history=H, max_offset=1200, clean=True)
    with CommitLogWriter(a / "commitlog", 1 << 20) as w:
        fill_to(w, 1, 1300)
    d = cli("recover", "inspect", str(a), "-o", "json").json()["stores"][0]
    assert (d["state"], d["dirtyReasons"]) == ("clean", [])
    assert d["problems"] == [
        "final signature says max offset 1200, the store holds 1300: the store changed "
        "after the final signature was written (RocketMQ does not update it)"
    ]
    sig = read_signature(a)
    assert sig is not None and sig.final is not None
    write_signature(a, Signature(sig.initial, replace(sig.final, abort="99")))
    write_abort(a, 99)
    d = cli("recover", "inspect", str(a), "-o", "json").json()["stores"][0]
    assert (d["state"], d["dirtyReasons"]) == (
        "dirty",
        ["final signature says max offset 1200, the store holds 1300"],
    )
    write_abort(a, 100)
    d = cli("recover", "inspect", str(a), "-o", "json").json()["stores"][0]
    assert (d["state"], d["dirtyReasons"]) == (
        "dirty",
        ["abort file present (pid 100): not shut down cleanly"],
    )


def test_compare_split_brain_and_conflicts(tmp_path: Path, cli) -> None:
    a = build_store(tmp_path / "a", history=[(0, 0), (1, 900)], max_offset=1200)
    b = build_store(tmp_path / "b", history=[(0, 0), (1, 1000)], max_offset=1100, broker_id=2)
    d = cli("recover", "compare", str(a), str(b), "-o", "json").json()
    assert (d["sameBrokerSet"], d["consistentPoint"], d["aBytesBeyond"], d["bBytesBeyond"], d["fresher"]) == (
        True,
        900,
        300,
        200,
        str(a),
    )
    assert d["splitBrain"] == [
        {"epoch": 1, "aStartOffset": 900, "aBytes": 300, "bStartOffset": 1000, "bBytes": 100}
    ]
    assert d["warnings"][0].startswith("SPLIT BRAIN: both stores hold records under epoch 1")
    t = cli("recover", "compare", str(a), str(b))
    assert "WARNING: SPLIT BRAIN" in t.out
    p = cli("recover", "plan", str(a), str(b), "-o", "json").json()
    assert any(w.startswith("SPLIT BRAIN") for w in p["brokerSets"][0]["warnings"])

    c = build_store(tmp_path / "c", history=[(3, 0)], max_offset=500)
    d = cli("recover", "compare", str(a), str(c), "-o", "json").json()
    assert d["sameBrokerSet"] is False and d["consistentPoint"] == -1
    assert d["reasons"] == ["epoch histories conflict: no epoch with the same start offset in both"]
    other = build_store(tmp_path / "o", history=H, max_offset=1200, broker="broker-b")
    d = cli("recover", "compare", str(a), str(other), "-o", "json").json()
    assert d["reasons"] == ["different broker sets: cluster-a/broker-set-a and cluster-a/broker-b"]


def test_plan_prefers_clean_and_lists_unmatched(tmp_path: Path, cli) -> None:
    c1 = build_store(tmp_path / "c1", history=H, max_offset=1100, clean=True)
    d1 = build_store(tmp_path / "d1", history=H, max_offset=1300, broker_id=2, abort=True)
    e1 = build_store(tmp_path / "e1", history=[], max_offset=0, broker_id=3)
    x = build_store(tmp_path / "x", history=[(5, 0)], max_offset=300, broker_id=4, abort=True)
    other = build_store(tmp_path / "o", history=H, max_offset=1000, broker="broker-b", abort=True)
    (tmp_path / "none").mkdir()
    stores = [str(p) for p in (c1, d1, e1, x, other, tmp_path / "none")]
    db = tmp_path / "inv.db"
    r = cli("recover", "plan", *stores, "--db", str(db), "-o", "json")
    assert r.code == 0, r.err
    plan = r.json()
    a, b = plan["brokerSets"]
    assert (a["brokerName"], a["source"], a["sourceClean"]) == ("broker-b", str(other), False)
    assert (b["brokerName"], b["source"], b["sourceClean"]) == ("broker-set-a", str(c1), True)
    assert b["replicas"] == [
        {
            "store": str(c1),
            "brokerId": 1,
            "state": "clean",
            "lastEpoch": 1,
            "maxOffset": 1100,
            "truncateTo": 1100,
            "bytesToDrop": 0,
        },
        {
            "store": str(d1),
            "brokerId": 2,
            "state": "dirty",
            "lastEpoch": 1,
            "maxOffset": 1300,
            "truncateTo": 1100,
            "bytesToDrop": 200,
        },
        {
            "store": str(e1),
            "brokerId": 3,
            "state": "empty",
            "lastEpoch": -1,
            "maxOffset": 0,
            "truncateTo": 0,
            "bytesToDrop": 0,
        },
    ]
    assert b["warnings"] == [
        f"{d1} is fresher than the clean source but dirty: 200 bytes beyond 1100 would be dropped"
    ]
    assert plan["unmatched"] == [
        {"store": str(tmp_path / "none"), "state": "no store", "reason": "no store"},
        {
            "store": str(x),
            "state": "dirty",
            "reason": f"conflicts with source {c1}: epoch histories conflict: no "
            f"epoch with the same start offset in both",
        },
    ]
    con = sqlite3.connect(db)
    assert con.execute("select count(*) from stores").fetchone() == (6,)
    assert con.execute("select maxOffset, state from stores where store = ?", (str(d1),)).fetchone() == (
        1300,
        "dirty",
    )
    assert con.execute(
        "select epoch, startOffset, endOffset from epochs where store = ? order by epoch", (str(d1),)
    ).fetchall() == [(0, 0, 900), (1, 900, 1300)]
    assert con.execute(
        "select role, restartOrder, truncateTo, bytesToDrop from plan where store = ?", (str(d1),)
    ).fetchone() == ("replica", 1, 1100, 200)
    t = cli("recover", "plan", *stores)
    assert t.code == 0 and "source" in t.out and "unmatched" in t.out


def test_mark_clean(tmp_path: Path, cli, unchanged) -> None:
    a = build_store(tmp_path / "a", history=H, max_offset=1200, abort="4242")
    with unchanged(tmp_path):
        r = cli("recover", "mark-clean", str(a), "--dry-run", "-o", "json")
        assert r.code == 0, r.err
        assert r.json()["dryRun"] is True and r.json()["finalSignature"]["maxOffset"] == 1200
        n = cli("recover", "mark-clean", str(a), input="n\n")
        assert n.code == 2
        assert n.err == "mqctl: error: not confirmed; nothing was changed (use --yes to skip the question)\n"
    r = cli("recover", "mark-clean", str(a), "--yes", "-o", "json")
    assert r.code == 0, r.err
    fin = r.json()["finalSignature"]
    assert (fin["lastEpoch"], fin["lastEpochStartOffset"], fin["maxOffset"], fin["abort"], fin["manual"]) == (
        1,
        900,
        1200,
        "4242",
        True,
    )
    assert r.json()["abortRemoved"] is True
    assert r.json()["notes"] == [
        "abort file (pid 4242) removed: RocketMQ runs its normal recovery on the next "
        "start, not the abnormal one"
    ]
    assert not (a / "abort").exists()  # RocketMQ runs its abnormal recovery while it exists
    assert (a / "mqctl-signature.json").exists()
    assert inspect_store(a).state == "clean"
    e = build_store(tmp_path / "e", history=[], max_offset=0)
    r = cli("recover", "mark-clean", str(e), "--yes")
    assert (r.code, r.err) == (2, f"mqctl: error: {e}: the store is empty; there is nothing to mark clean\n")


HOLDER = (
    "import fcntl,os,sys,time\nfd=os.open(sys.argv[1],os.O_RDWR|os.O_CREAT)\nfcntl.lockf(fd,fcntl.LOCK_EX)\n"
    "print('locked',flush=True)\ntime.sleep(60)\n"
)


def test_truncate_refusals(tmp_path: Path, cli, unchanged) -> None:
    a = build_store(tmp_path / "a", history=H, max_offset=1200)
    (a / "lock").touch()
    with unchanged(tmp_path):
        r = cli("recover", "truncate", str(a), "--to", "950", "--yes")
        assert (r.code, r.err) == (
            2,
            "mqctl: error: offset 950 is not a record boundary; nearest boundaries: 900 and 1000\n",
        )
        r = cli("recover", "truncate", str(a), "--to", "1300", "--yes")
        assert (r.code, r.err) == (
            2,
            "mqctl: error: offset 1300 is beyond the last valid record's end 1200; "
            "nearest boundary below: 1200\n",
        )
        r = cli("recover", "truncate", str(a), "--to", "900", "--dry-run", "-o", "json")
        assert r.code == 0
        d = r.json()
        assert (
            d["bytesToDrop"],
            d["recordsToDrop"],
            d["epochsBefore"],
            d["epochsAfter"],
            d["backupDir"],
        ) == (300, 3, ["0-0", "1-900"], ["0-0"], None)
        assert (d["confirmOffsetBefore"], d["confirmOffsetAfter"]) == (1200, 900)
        r = cli("recover", "truncate", str(a), "--to", "900", input="n\n")
        assert r.code == 2
        proc = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(a / "lock")], stdout=subprocess.PIPE, text=True
        )
        try:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
            r = cli("recover", "truncate", str(a), "--to", "900", "--yes")
            assert (r.code, r.err) == (
                2,
                f"mqctl: error: {a}/lock: held by another process (is the broker running?); stop it first\n",
            )
            r = cli("recover", "mark-clean", str(a), "--yes")
            assert r.code == 2 and "held by another process" in r.err
        finally:
            proc.kill()
            proc.wait()


def test_truncate_backup_and_restore(tmp_path: Path, cli) -> None:
    a = build_store(tmp_path / "a", history=[(0, 0), (1, 900), (2, 1500)], max_offset=2500, file_size=1000)
    before = {p.name: p.read_bytes() for p in (a / "commitlog").iterdir()}
    epoch_before = (a / "epochFileCheckpoint").read_bytes()
    bk = tmp_path / "bk"
    r = cli("recover", "truncate", str(a), "--to", "900", "--yes", "--backup-dir", str(bk))
    assert r.code == 0, r.err
    assert r.out.splitlines() == [
        f"{a}: dropped 1600 bytes (16 records) from 900 to 2500",
        "epochs: 0-0, 1-900, 2-1500 -> 0-0",
        "confirmPhyOffset: 2500 -> 900",
        f"backup: {bk}",
    ]
    assert sorted(p.name for p in (a / "commitlog").iterdir()) == [file_name(0)]
    assert (a / "commitlog" / file_name(0)).read_bytes()[900:] == bytes(100)
    assert (a / "epochFileCheckpoint").read_bytes() == b"1\n" + str(
        __import__("zlib").crc32(b"0-0\n") & 0x7FFFFFFF
    ).encode() + b"\n0-0\n"
    assert (a / "epochFileCheckpoint.bak").read_bytes() == epoch_before
    assert sorted(p.name for p in bk.iterdir()) == [
        "checkpoint",
        "commitlog",
        "epochFileCheckpoint",
        "manifest.json",
    ]
    assert (bk / "epochFileCheckpoint").read_bytes() == epoch_before
    assert (bk / "commitlog" / f"{file_name(0)}.from-900").read_bytes() == before[file_name(0)][900:1000]
    assert (bk / "commitlog" / file_name(1000)).read_bytes() == before[file_name(1000)]
    assert (bk / "commitlog" / file_name(2000)).read_bytes() == before[file_name(2000)]
    assert inspect_store(a, deep=True).max_offset == 900
    r = cli("recover", "truncate", str(a), "--to", "900", "--yes")
    assert (r.code, r.out.strip()) == (0, f"{a}: nothing to truncate at 900 (max offset 900)")


def test_truncate_to_zero_removes_epoch_file(tmp_path: Path, cli) -> None:
    a = build_store(tmp_path / "a", history=[(0, 0)], max_offset=500)
    r = cli(
        "recover",
        "truncate",
        str(a),
        "--to",
        "0",
        "--yes",
        "--backup-dir",
        str(tmp_path / "bk"),
        "-o",
        "json",
    )
    assert r.code == 0, r.err
    assert r.json()["epochsAfter"] == []
    assert not (a / "epochFileCheckpoint").exists()
    assert (tmp_path / "bk" / "epochFileCheckpoint").exists()
    assert inspect_store(a).state == "empty"


def test_store_errors_exit_4_one_line(tmp_path: Path, cli, unchanged) -> None:
    a = build_store(tmp_path / "a", history=H, max_offset=1200)
    (a / "epochFileCheckpoint").write_bytes(b"x\n0\n")
    with unchanged(tmp_path):
        r = cli("recover", "inspect", str(a))
    assert (r.code, r.err) == (
        4,
        f"mqctl: error: {a / 'epochFileCheckpoint'} line 1, offset 0: bad count line "
        f"'x', expected a decimal entry count (and no epochFileCheckpoint.bak to fall "
        f"back to)\n",
    )
    b = tmp_path / "b"
    (b / "commitlog").mkdir(parents=True)
    (b / "brokerIdentity").write_text("c#b#1")
    with unchanged(tmp_path):
        r = cli("recover", "truncate", str(b), "--to", "0", "--yes")
    assert (r.code, r.err) == (4, f"mqctl: error: {b / 'commitlog'}: empty directory: no commitlog files\n")
    r = cli("recover", "inspect", str(a), "-o", "xml")
    assert r.code == 2 and "'xml' is not one of 'table', 'json', 'yaml'" in r.err


def test_real_entry_point(tmp_path: Path) -> None:
    a = build_store(tmp_path / "a", history=H, max_offset=1200)
    (a / "brokerIdentity").write_bytes(b"only#two")
    p = subprocess.run([MQCTL, "recover", "inspect", str(a)], capture_output=True, text=True)
    assert p.returncode == 4
    assert (
        p.stderr == f"mqctl: error: {a / 'brokerIdentity'} line 1, offset 0: expected 3 '#'-separated "
        f"fields, found 2: 'only#two'\n"
    )
    assert "Traceback" not in p.stderr
