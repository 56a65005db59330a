"""clear-epochs, clear-controller-data and restore on real temporary directories: dry runs change
nothing, clear + restore gives back identical bytes, running brokers and controllers make every
destructive command refuse, confirmation is never guessed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from harness import run_cli, tree_hash
from upgrade_fixtures import LockHolder, file_bytes

from mqctl.store.build import build_store
from mqctl.store.epochfile import EPOCH_FILE, EpochEntry, write_epoch_file


def two_stores(tmp_path: Path) -> tuple[Path, Path]:
    a = build_store(tmp_path / "a", history=[(1, 0), (2, 3000)], max_offset=6000, broker_id=None)
    b = build_store(tmp_path / "b", history=[(1, 0), (2, 3000)], max_offset=6000, broker_id=None)
    # a second write leaves epochFileCheckpoint.bak, as RocketMQ's string2File does
    write_epoch_file(a, [EpochEntry(1, 0), EpochEntry(2, 3000), EpochEntry(3, 6000)])
    return a, b


def backup_of(out: str) -> Path:
    line = next(ln for ln in out.splitlines() if ln.startswith("backup: "))
    return Path(line[len("backup: ") :])


def test_clear_epochs_dry_run_changes_nothing(tmp_path: Path) -> None:
    a, b = two_stores(tmp_path)
    before = tree_hash(tmp_path)
    r = run_cli("upgrade", "clear-epochs", "--store", str(a), "--store", str(b), "--dry-run")
    assert r.code == 0, r.err
    assert "would remove 2 file(s)" in r.out and "epochFileCheckpoint.bak" in r.out
    assert "dry run: nothing was changed" in r.out
    assert tree_hash(tmp_path) == before


def test_clear_epochs_then_restore_gives_identical_bytes(tmp_path: Path) -> None:
    a, b = two_stores(tmp_path)
    stores = tmp_path / "stores"
    stores.mkdir()
    a, b = a.rename(stores / "a"), b.rename(stores / "b")
    originals = _files_hash(stores)
    content = {s: file_bytes(s) for s in (a, b)}
    r = run_cli(
        "upgrade",
        "clear-epochs",
        "--store",
        str(a),
        "--store",
        str(b),
        "--yes",
        "--backup-dir",
        str(tmp_path / "bk"),
    )
    assert r.code == 0, r.err
    assert backup_of(r.out) == tmp_path / "bk"
    for s in (a, b):
        assert not (s / EPOCH_FILE).exists() and not (s / (EPOCH_FILE + ".bak")).exists()
        assert (s / "commitlog").is_dir() and (s / "checkpoint").is_file()  # nothing else touched
    manifest = json.loads((tmp_path / "bk" / "manifest.json").read_text())
    assert {(e["path"], len(e["sha256"])) for e in manifest["entries"]} == {
        (EPOCH_FILE, 64),
        (EPOCH_FILE + ".bak", 64),
    }
    assert len(manifest["entries"]) == 3
    # twice is harmless: nothing to clear, no second backup
    r2 = run_cli("upgrade", "clear-epochs", "--store", str(a), "--store", str(b), "--yes")
    assert r2.code == 0 and r2.out.count("nothing to clear") == 2
    assert not list(tmp_path.glob("*.upgrade-epochs-backup-*")) and not list(stores.glob("*backup*"))
    # restore: dry run first changes nothing
    cleared = tree_hash(stores)
    r3 = run_cli("upgrade", "restore", str(tmp_path / "bk"), "--dry-run")
    assert r3.code == 0 and r3.out.count("would restore") == 3
    assert tree_hash(stores) == cleared
    r4 = run_cli("upgrade", "restore", str(tmp_path / "bk"), "--yes")
    assert r4.code == 0, r4.err
    assert {s: file_bytes(s) for s in (a, b)} == content
    assert _files_hash(stores) == originals  # bytes, modes and mtimes of every file
    # restoring again is harmless
    r5 = run_cli("upgrade", "restore", str(tmp_path / "bk"), "--yes")
    assert r5.code == 0 and "nothing to restore" in r5.out


def _files_hash(root: Path) -> str:
    """Files only (content, mode, mtime): what restore promises to put back exactly."""
    import hashlib

    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            st = p.stat()
            h.update(f"{p.relative_to(root)}|{st.st_mode:o}|{st.st_mtime_ns}|".encode() + p.read_bytes())
    return h.hexdigest()


def test_restore_is_exact_for_files(tmp_path: Path) -> None:
    a, b = two_stores(tmp_path)
    before = {s: _files_hash(s) for s in (a, b)}
    r = run_cli("upgrade", "clear-epochs", "--store", str(a), "--store", str(b), "-y")
    bk = backup_of(r.out)
    assert bk.parent == tmp_path and bk.name.startswith("a.upgrade-epochs-backup-")
    assert all(_files_hash(s) != before[s] for s in (a, b))
    assert run_cli("upgrade", "restore", str(bk), "-y").code == 0
    assert {s: _files_hash(s) for s in (a, b)} == before  # bytes, modes and mtimes


def test_running_broker_makes_every_destructive_command_refuse(tmp_path: Path) -> None:
    a, b = two_stores(tmp_path)
    r = run_cli(
        "upgrade",
        "clear-epochs",
        "--store",
        str(a),
        "--store",
        str(b),
        "-y",
        "--backup-dir",
        str(tmp_path / "bk"),
    )
    assert r.code == 0
    with LockHolder(b) as holder:
        before = tree_hash(tmp_path)
        for args in (
            ["clear-epochs", "--store", str(a), "--store", str(b), "-y"],
            ["clear-epochs", "--store", str(b), "--dry-run"],
            ["restore", str(tmp_path / "bk"), "-y"],
            ["restore", str(tmp_path / "bk"), "--dry-run"],
        ):
            r = run_cli("upgrade", *args)
            assert r.code == 2, (args, r.out, r.err)
            assert f"{b}: the broker is running" in r.err and "stop it first" in r.err
            assert f"process {holder.proc.pid}" in r.err
            assert "nothing was changed" in r.err
        assert tree_hash(tmp_path) == before
    assert run_cli("upgrade", "restore", str(tmp_path / "bk"), "-y").code == 0


def test_no_tty_without_yes_refuses(tmp_path: Path) -> None:
    a, _ = two_stores(tmp_path)
    before = tree_hash(tmp_path)
    r = run_cli("upgrade", "clear-epochs", "--store", str(a), input="y\n")
    assert r.code == 2 and "stdin is not a terminal" in r.err and "--yes" in r.err
    assert tree_hash(tmp_path) == before


def _pty_run(args: list[str], answer: bytes) -> tuple[int, str]:
    """The real `mqctl` with a terminal on stdin, answering the question."""
    import pty
    import select

    mqctl = str(Path(sys.executable).with_name("mqctl"))
    master, slave = pty.openpty()
    proc = subprocess.Popen([mqctl, *args], stdin=slave, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    out = b""
    answered = False
    while True:
        ready, _, _ = select.select([master], [], [], 30)
        if not ready:
            proc.kill()
            break
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
        if not answered and b"[y/N]" in out:
            os.write(master, answer)
            answered = True
    os.close(master)
    return proc.wait(30), out.decode(errors="replace")


@pytest.mark.parametrize("answer,code", [(b"n\n", 2), (b"y\n", 0)])
def test_terminal_confirmation(tmp_path: Path, answer: bytes, code: int) -> None:
    a, _ = two_stores(tmp_path)
    before = tree_hash(tmp_path)
    rc, out = _pty_run(["upgrade", "clear-epochs", "--store", str(a)], answer)
    assert rc == code, out
    assert "Remove 2 epoch file(s) from 1 store(s)" in out
    if code:
        assert "not confirmed" in out and tree_hash(tmp_path) == before
    else:
        assert not (a / EPOCH_FILE).exists() and "backup: " in out


def test_refusals_of_bad_input(tmp_path: Path) -> None:
    a, _ = two_stores(tmp_path)
    (tmp_path / "empty").mkdir()
    r = run_cli("upgrade", "clear-epochs", "--store", str(tmp_path / "empty"), "-y")
    assert r.code == 2 and "not a RocketMQ store directory" in r.err
    r = run_cli("upgrade", "clear-epochs", "--store", str(tmp_path / "nope"), "-y")
    assert r.code == 2 and "no such directory" in r.err
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    r = run_cli("upgrade", "clear-epochs", "--store", str(a), "-y", "--backup-dir", str(tmp_path / "full"))
    assert r.code == 2 and "not empty" in r.err
    assert (a / EPOCH_FILE).exists()
    r = run_cli("upgrade", "restore", str(tmp_path / "empty"), "-y")
    assert r.code == 2 and "no manifest" in r.err


def test_restore_refuses_conflicts_and_damaged_backups(tmp_path: Path) -> None:
    a, _ = two_stores(tmp_path)
    r = run_cli("upgrade", "clear-epochs", "--store", str(a), "-y", "--backup-dir", str(tmp_path / "bk"))
    assert r.code == 0
    # the broker wrote a new epoch file since: restore must not overwrite it
    write_epoch_file(a, [EpochEntry(1, 6000)])
    (a / (EPOCH_FILE + ".bak")).unlink(missing_ok=True)
    before = tree_hash(a)
    r = run_cli("upgrade", "restore", str(tmp_path / "bk"), "-y")
    assert r.code == 2 and "CONFLICT" in r.out and "move them away" in r.err
    assert tree_hash(a) == before
    (a / EPOCH_FILE).unlink()
    backup_file = next((tmp_path / "bk" / "data").rglob(EPOCH_FILE))
    backup_file.write_bytes(backup_file.read_bytes() + b"x")
    r = run_cli("upgrade", "restore", str(tmp_path / "bk"), "-y")
    assert r.code == 4 and "sha256 differs" in r.err
    assert not (a / EPOCH_FILE).exists()


# --- controller data directories ----------------------------------------------------------------


def dledger_dir(root: Path, ids: tuple[str, ...] = ("n0",)) -> Path:
    """A RocketMQ DLedger controller's controllerStorePath as DLedger lays it out."""
    for i in ids:
        node = root / f"dledger-{i}"
        (node / "data").mkdir(parents=True)
        (node / "index").mkdir()
        (node / "data" / "00000000000000000000").write_bytes(os.urandom(4096))
        (node / "index" / "00000000000000000000").write_bytes(os.urandom(1024))
        (node / "currterm").write_text("currTerm=3\nvoteLeader=n1\n")
        (node / "checkpoint").write_text("committedIndex=41\n")
    return root


@pytest.mark.parametrize("name", ["DLedgerController", "DledgerController"])
def test_clear_rocketmq_controller_data_and_restore(tmp_path: Path, name: str) -> None:
    d = dledger_dir(tmp_path / name, ("n0", "n1"))
    original = file_bytes(d)
    before = tree_hash(tmp_path)
    r = run_cli("upgrade", "clear-controller-data", str(d), "--dry-run")
    assert r.code == 0, r.err
    assert "RocketMQ DLedger controller data of node(s) n0, n1" in r.out and "rocketmq-dledger" in r.out
    assert tree_hash(tmp_path) == before
    r = run_cli("upgrade", "clear-controller-data", str(d), "--yes")
    assert r.code == 0, r.err
    assert d.is_dir() and not any(d.iterdir())
    bk = backup_of(r.out)
    assert bk.name.startswith(f"{name}.upgrade-controller-data-backup-")
    r = run_cli("upgrade", "clear-controller-data", str(d), "--yes")
    assert r.code == 0 and "nothing to clear" in r.out
    r = run_cli("upgrade", "restore", str(bk), "--yes")
    assert r.code == 0, r.err
    assert file_bytes(d) == original
    assert (d / "dledger-n0" / "data").is_dir()


def test_clear_one_dledger_node_dir(tmp_path: Path) -> None:
    node = dledger_dir(tmp_path / "DledgerController") / "dledger-n0"
    r = run_cli("upgrade", "clear-controller-data", str(node), "--yes", "--backup-dir", str(tmp_path / "bk"))
    assert r.code == 0, r.err
    assert node.is_dir() and not any(node.iterdir())


def test_clear_controller_data_refuses_what_it_does_not_recognise(tmp_path: Path) -> None:
    d = dledger_dir(tmp_path / "DledgerController")
    (d / "notes.txt").write_text("keep me")
    other = tmp_path / "home"
    other.mkdir()
    (other / ".bashrc").write_text("x")
    before = tree_hash(tmp_path)
    r = run_cli("upgrade", "clear-controller-data", str(d), "--yes")
    assert r.code == 2 and "notes.txt" in r.err
    r = run_cli("upgrade", "clear-controller-data", str(other), "--yes")
    assert r.code == 2 and "not a controller data directory" in r.err
    r = run_cli("upgrade", "clear-controller-data", str(tmp_path / "missing"), "--yes")
    assert r.code == 2 and "DledgerController" in r.err
    assert tree_hash(tmp_path) == before


MAPPER = """
import mmap, sys
f = open(sys.argv[1], "r+b")
m = mmap.mmap(f.fileno(), 0)
f.close()
print("mapped", flush=True)
sys.stdin.read()
"""


def test_running_rocketmq_controller_is_detected_by_its_mapped_files(tmp_path: Path) -> None:
    """DLedger takes no lock; a live process mapping its data file is what shows it runs."""
    d = dledger_dir(tmp_path / "DledgerController")
    data_file = d / "dledger-n0" / "data" / "00000000000000000000"
    proc = subprocess.Popen(
        [sys.executable, "-c", MAPPER, str(data_file)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "mapped"
        before = tree_hash(tmp_path)
        r = run_cli("upgrade", "clear-controller-data", str(d), "--yes")
        assert r.code == 2 and "a controller is running on it" in r.err and f"process {proc.pid}" in r.err
        assert tree_hash(tmp_path) == before
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(10)
    assert run_cli("upgrade", "clear-controller-data", str(d), "--yes").code == 0


@pytest.mark.slow
def test_mqctl_controller_data_dir_refused_while_serving(tmp_path: Path) -> None:
    from mqctl.localgroup import LocalCluster

    cluster = LocalCluster(str(tmp_path / "ctl"), size=1)
    data = Path(cluster.nodes[0].data_dir)
    with cluster:
        cluster.start()
        r = run_cli("upgrade", "clear-controller-data", str(data), "--yes")
        assert r.code == 2 and "a controller is running on it" in r.err and "LOCK" in r.err
        r = run_cli("upgrade", "clear-controller-data", str(data), "--dry-run")
        assert r.code == 2
    cluster.stop()
    names = sorted(p.name for p in data.iterdir())
    assert "node.json" in names and "LOCK" in names
    original = file_bytes(data)
    before = tree_hash(tmp_path)
    r = run_cli("upgrade", "clear-controller-data", str(data), "--dry-run")
    assert r.code == 0 and "mqctl-controller" in r.out and tree_hash(tmp_path) == before
    r = run_cli("upgrade", "clear-controller-data", str(data), "--yes")
    assert r.code == 0, r.err
    assert sorted(p.name for p in data.iterdir()) == ["LOCK"]
    r = run_cli("upgrade", "restore", str(backup_of(r.out)), "--yes")
    assert r.code == 0, r.err
    assert file_bytes(data) == original


def test_clear_and_restore_print_one_document_with_o_json(tmp_path: Path) -> None:
    """-o json|yaml on the destructive commands too (issue 16): the plan, what was done, the backup."""
    a, b = two_stores(tmp_path)
    before = tree_hash(tmp_path)
    r = run_cli("upgrade", "clear-epochs", "--store", str(a), "--store", str(b), "--dry-run", "-o", "json")
    doc = r.json()
    assert r.code == 0 and tree_hash(tmp_path) == before
    assert (doc["version"], doc["what"], doc["dryRun"], doc["backupDir"]) == (1, "epochs", True, None)
    assert {i["path"] for root in doc["roots"] for i in root["items"]} == {EPOCH_FILE, EPOCH_FILE + ".bak"}
    r = run_cli(
        "upgrade",
        "clear-epochs",
        "--store",
        str(a),
        "--store",
        str(b),
        "-y",
        "-o",
        "json",
        "--backup-dir",
        str(tmp_path / "bk"),
    )
    doc = r.json()
    assert r.code == 0 and doc["dryRun"] is False and doc["backupDir"] == str(tmp_path / "bk")
    assert doc["undo"] == f"mqctl upgrade restore {tmp_path / 'bk'}"
    r = run_cli("upgrade", "restore", str(tmp_path / "bk"), "--dry-run", "-o", "yaml")
    assert r.code == 0 and "\ndryRun: true\nrestored: 0\n" in r.out
    r = run_cli("upgrade", "restore", str(tmp_path / "bk"), "-y", "-o", "json")
    doc = r.json()
    assert r.code == 0 and doc["restored"] == 3 and {x["action"] for x in doc["actions"]} == {"restore"}
    (tmp_path / "ctl").mkdir()
    r = run_cli("upgrade", "clear-controller-data", str(tmp_path / "ctl"), "--dry-run", "-o", "json")
    doc = r.json()
    assert r.code == 0 and (doc["what"], doc["nothingToDo"], doc["dledgerNodeIds"]) == (
        "controller-data",
        True,
        [],
    )
