"""Disk full, read-only and deleted data directories on REAL file systems, under real `mqctl serve`.

tests/raft/test_disk_full.py injects the failures (MQCTL_FAULT_INJECT); here the kernel makes
them: a data directory on a small tmpfs that a filler file fills up (ENOSPC), on an ext4 image that
turns read-only under the node the way ext4 does after an I/O error (errors=remount-ro, EROFS),
and one `rm -rf`'d while the node runs. The nodes run the crash simulator (MQCTL_CRASH_SIM), so
SIGKILL is a power loss: every write acknowledged is checked after one, never only in memory.

What is checked (docs/raft-safety.md, Durability): the node stops acknowledging writes, says why
in one log line and in GetMetadata's `problem`, keeps answering local reads (GetMetadata,
GetConfig), logs no traceback, and once the space, the file system or the directory is back, goes
on without losing a write acknowledged before, during or after.

Mounting needs root (CAP_SYS_ADMIN); without it, or without loop devices and mkfs.ext4 for the
read-only case, the tests skip and say why.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator

import pytest
from harness import TEST_CLUSTER as CLUSTER

from mqctl.client import ControllerClient
from mqctl.errors import ControllerError
from mqctl.localgroup import LocalCluster, Node, metadata, wait_until

pytestmark = pytest.mark.slow

ENV = {"MQCTL_CRASH_SIM": "1"}
COMPACT = {"MQCTL_COMPACTION_INTERVAL": "1"}  # snapshot every second, not every 60 s
FAILING = "acknowledges no Raft entry"


# --- file systems ---------------------------------------------------------------------------------


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def _umount(mnt: str) -> None:
    for _ in range(50):
        if _run("umount", mnt).returncode == 0 or not os.path.ismount(mnt):
            return
        time.sleep(0.1)  # a node that was just killed may still hold a file for a moment
    _run("umount", "-l", mnt)


@contextlib.contextmanager
def tmpfs(mnt: str, size: str = "8m") -> Iterator[str]:
    """A tmpfs of `size` at `mnt`, unmounted at the end; skips when mounting is not permitted."""
    if os.geteuid() != 0:
        pytest.skip(
            f"mounting a small tmpfs needs root (CAP_SYS_ADMIN); this test runs as uid {os.geteuid()}"
        )
    os.makedirs(mnt, exist_ok=True)
    done = _run("mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", mnt)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mnt
    finally:
        _umount(mnt)


@contextlib.contextmanager
def ext4(image: str, mnt: str) -> Iterator[str]:
    """A 32 MiB ext4 image mounted (loop) at `mnt` with errors=remount-ro; skips without the means."""
    if os.geteuid() != 0:
        pytest.skip(f"mounting an ext4 image needs root; this test runs as uid {os.geteuid()}")
    if not (shutil.which("mkfs.ext4") and shutil.which("e2fsck") and os.path.exists("/dev/loop-control")):
        pytest.skip("needs mkfs.ext4, e2fsck and loop devices (/dev/loop-control)")
    with open(image, "wb") as fh:
        fh.truncate(32 << 20)
    made = _run("mkfs.ext4", "-q", "-F", image)
    if made.returncode != 0:
        pytest.skip(f"mkfs.ext4 failed: {made.stderr.strip()}")
    os.makedirs(mnt, exist_ok=True)
    done = _run("mount", "-o", "loop,errors=remount-ro", image, mnt)
    if done.returncode != 0:
        pytest.skip(f"cannot mount an ext4 image on a loop device here: {done.stderr.strip()}")
    try:
        yield mnt
    finally:
        _umount(mnt)


def ext4_error(mnt: str) -> None:
    """What ext4 does on an I/O error with errors=remount-ro: the file system turns read-only under
    its running writers (every later write EROFS). `mount -o remount,ro` is no substitute: the
    kernel refuses it (EBUSY) while a file is open for writing, as the journal always is."""
    dev = os.path.basename(os.path.realpath(_run("findmnt", "-no", "SOURCE", mnt).stdout.strip()))
    trigger = f"/sys/fs/ext4/{dev}/trigger_fs_error"
    if not os.path.exists(trigger):
        pytest.skip(f"this kernel has no {trigger}")
    with open(trigger, "w") as fh:
        fh.write("mqctl test: read-only data directory")
    with pytest.raises(OSError) as probe:  # findmnt says "emergency_ro" on newer kernels, "ro" before
        open(os.path.join(mnt, "probe"), "w").close()
    assert probe.value.errno == errno.EROFS


@contextlib.contextmanager
def paused(node: Node) -> Iterator[None]:
    """SIGSTOP the node and wait until every thread of it has stopped (a thread in a system call
    stops when the call returns), SIGCONT at the end."""
    assert node.proc is not None
    pid = node.proc.pid
    os.kill(pid, signal.SIGSTOP)

    def stopped() -> bool:
        for task in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{task}/stat") as fh:
                    state = fh.read().rsplit(")", 1)[1].split()[0]
            except FileNotFoundError:  # a thread that has just ended
                continue
            if state not in ("T", "t"):
                return False
        return True

    try:
        wait_until(stopped, 30, what=f"{node.name} (pid {pid}) to stop")
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def fill(mnt: str) -> str:
    """Fill the file system at `mnt` to the last byte with a filler file; return its path."""
    path = os.path.join(mnt, "filler")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        for size in (1 << 20, 1 << 16, 4096, 512, 1):
            block = bytes(size)
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, block)
    finally:
        os.close(fd)
    return path


# --- nodes and load -------------------------------------------------------------------------------


def cluster_on(base: str, data_dirs: list[str | None]) -> LocalCluster:
    """A LocalCluster whose node i keeps its data in data_dirs[i] (None: the default, under base)."""
    cluster = LocalCluster(base, size=len(data_dirs))
    for node, data_dir in zip(cluster.nodes, data_dirs, strict=True):
        if data_dir is not None:
            node.args[node.args.index("--data-dir") + 1] = node.data_dir = data_dir
    return cluster


def start(node: Node, extra: dict[str, str] | None = None) -> None:
    node.start(env={**ENV, **(extra or {})})


class Load:
    """Writers that apply new broker ids until stopped, recording every acknowledged name (with
    when) and every write whose outcome is unknown."""

    def __init__(self, addresses: str, prefix: str, writers: int = 2) -> None:
        self.addresses = addresses
        self.prefix = prefix
        self.acked: list[tuple[float, str]] = []
        self.failed: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(w,), daemon=True) for w in range(writers)]
        for t in self._threads:
            t.start()

    def _run(self, w: int) -> None:
        with ControllerClient(self.addresses, timeout=2) as client:
            i = 0
            while not self._stop.is_set():
                name = f"{self.prefix}-{w}-{i}"
                i += 1
                try:
                    client.apply_broker_id(CLUSTER, name, 1, f"{name}:10911;1")
                except ControllerError:
                    with self._lock:
                        self.failed.append(name)
                    time.sleep(0.05)
                    continue
                with self._lock:
                    self.acked.append((time.monotonic(), name))
                time.sleep(0.01)

    def names(self) -> list[str]:
        with self._lock:
            return [name for _, name in self.acked]

    def acked_since(self, t: float) -> list[str]:
        with self._lock:
            return [name for when, name in self.acked if when >= t]

    def wait_for(self, count: int, timeout: float = 30) -> None:
        start_len = len(self.names())
        wait_until(
            lambda: len(self.names()) >= start_len + count, timeout, what=f"{count} more acknowledged writes"
        )

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(15)


def stops_acknowledging(load: Load, quiet: float = 2.0) -> None:
    """No write is acknowledged for `quiet` seconds (after an answer already on its way)."""
    time.sleep(0.5)
    since = time.monotonic()
    time.sleep(quiet)
    assert load.acked_since(since) == [], "a write was acknowledged while the storage failed"


def missing(node: Node, names: list[str]) -> list[str]:
    with ControllerClient(node.grpc_address, timeout=30) as client:
        table = client.get_sync_state_data([]).replicas_info_table
    return [n for n in names if n not in table]


def reports(node: Node, text: str, timeout: float = 20) -> str:
    """Wait until the node's GetMetadata `problem` contains `text`; return it."""
    problem: str = wait_until(
        lambda: text in (p := metadata(node.grpc_address).get("problem", "")) and p,
        timeout,
        what=f"{node.name} to report {text!r} in GetMetadata's problem",
    )
    return problem


def answers_local_reads(node: Node) -> None:
    meta = metadata(node.grpc_address)
    assert meta["code"] == 0 and meta["state_hash"] and not meta["is_leader"]
    with ControllerClient(node.grpc_address, timeout=5) as client:
        assert client.get_config(node.grpc_address).config["raftAddress"] == node.raft_address


def lines(node: Node, text: str) -> list[str]:
    return [line for line in node.log_text().splitlines() if text in line]


def failures_logged_once(text: str) -> int:
    """How many storage failures a node's log reports, checking that each is one line: within one
    process, a second failure line comes only after the node said storage works again."""
    failures = 0
    failing = False
    for line in text.splitlines():
        if line.startswith("mqctl controller: data directory"):  # a new process
            failing = False
        elif FAILING in line:
            assert not failing, f"a failure logged twice without recovering in between: {line}\n{text}"
            failing = True
            failures += 1
        elif "storage works again" in line or "written anew after it was removed" in line:
            failing = False
    return failures


def power_loss_and_restart(cluster: LocalCluster, nodes: list[Node]) -> None:
    for node in nodes:
        node.kill()  # crash simulation: whatever was not fsynced is gone
    for node in nodes:
        start(node)


# --- disk full ------------------------------------------------------------------------------------


def test_single_node_on_a_full_tmpfs_stops_acknowledging_and_recovers_without_loss(tmp_path) -> None:
    with tmpfs(str(tmp_path / "fs")) as mnt:
        cluster = cluster_on(str(tmp_path), [os.path.join(mnt, "data")])
        node = cluster.nodes[0]
        with cluster:
            start(node)
            cluster.wait_for_leader()
            load = Load(node.grpc_address, "w")
            try:
                load.wait_for(20)
                filler = fill(mnt)
                problem = reports(node, "No space left on device (ENOSPC)")
                assert FAILING in problem
                stops_acknowledging(load)
                answers_local_reads(node)
                assert len(lines(node, FAILING)) == 1, node.log_text()[-3000:]

                os.unlink(filler)  # space is back: no restart needed
                wait_until(
                    lambda: metadata(node.grpc_address).get("problem") == "", 30, what="the problem to clear"
                )
                load.wait_for(20)
                assert lines(node, "storage works again")

                filler = fill(mnt)  # full again, then a power loss while full
                reports(node, "ENOSPC")
                stops_acknowledging(load, quiet=1.0)
                node.kill()
                start(node)  # starts on the full disk, says why, waits
                reports(node, "ENOSPC", timeout=30)
                answers_local_reads(node)
                os.unlink(filler)
                cluster.wait_for_leader()
                load.wait_for(20)
            finally:
                load.stop()
            assert missing(node, load.names()) == []
            power_loss_and_restart(cluster, [node])  # what it acknowledged is on the disk
            cluster.wait_for_leader()
            assert missing(node, load.names()) == []
            text = node.log_text()
    assert "Traceback" not in text
    # one line per failure, not one per retry: two in the first process, one after the restart
    assert text.count(FAILING) == 3, text[-4000:]
    assert len(load.failed) < len(load.names())


def test_group_with_one_then_two_nodes_on_full_tmpfs(tmp_path) -> None:
    """node0 and node1 have their data on small file systems of their own, node2 on the big disk.
    One full (the leader's, if it is on one): the group goes on; that node loses power and starts
    again on its full disk while the others compact their logs (every second here), so the leader
    sends it a snapshot it cannot store (one line, no traceback). Two full: no majority can write,
    nothing is acknowledged. Space back on one, then the other: the group goes on, the nodes catch
    up, nothing acknowledged lost, also after a power loss of the whole group."""
    with tmpfs(str(tmp_path / "fs0")) as mnt0, tmpfs(str(tmp_path / "fs1")) as mnt1:
        cluster = cluster_on(str(tmp_path), [os.path.join(mnt0, "data"), os.path.join(mnt1, "data"), None])
        n0, n1, n2 = cluster.nodes
        with cluster:
            for node in cluster.nodes:
                start(node, COMPACT)
            leader = cluster.wait_for_leader()
            (a, mnt_a), (b, mnt_b) = ((n1, mnt1), (n0, mnt0)) if leader is n1 else ((n0, mnt0), (n1, mnt1))
            load = Load(cluster.addresses, "g", writers=3)
            try:
                load.wait_for(20)
                filler_a = fill(mnt_a)  # one node full: the other two go on
                reports(a, "ENOSPC")
                load.wait_for(30)
                assert cluster.wait_for_leader() is not a
                answers_local_reads(a)
                a.kill()  # a power loss; the others compact meanwhile
                load.wait_for(30)
                time.sleep(2)
                start(a, COMPACT)  # on its full disk: it cannot store a snapshot
                reports(a, "ENOSPC", timeout=30)
                answers_local_reads(a)

                filler_b = fill(mnt_b)  # two full: no majority can store anything
                reports(b, "ENOSPC")
                stops_acknowledging(load, quiet=3.0)
                for node in (a, b):
                    answers_local_reads(node)
                assert metadata(n2.grpc_address)["problem"] == ""

                os.unlink(filler_b)  # a majority again
                load.wait_for(20)
                os.unlink(filler_a)
                wait_until(
                    lambda: metadata(a.grpc_address).get("problem") == "",
                    30,
                    what=f"{a.name} to clear its problem",
                )
                load.wait_for(10)
            finally:
                load.stop()
            cluster.wait_for_same_hash()
            leader = cluster.wait_for_leader()
            assert missing(leader, load.names()) == []
            power_loss_and_restart(cluster, cluster.nodes)
            leader = cluster.wait_for_leader()
            cluster.wait_for_same_hash()
            assert missing(leader, load.names()) == []
            texts = {node.name: node.log_text() for node in cluster.nodes}
    # one line per failure, not one per retry: `a` failed in two processes (the second may say first
    # that it cannot store the leader's snapshot), `b` in one; a failure may end and begin again
    # while the disk is full (a compaction that fails removes its temporary file, and the journal
    # writes into the space it leaves before the disk is full again), each time with one line
    assert failures_logged_once(texts[a.name]) >= 1 and failures_logged_once(texts[b.name]) >= 1, texts
    assert texts[a.name].count("raft snapshot: receiving") <= 1
    assert FAILING not in texts["node2"]
    assert not any("Traceback" in text for text in texts.values())


def test_snapshot_that_does_not_fit_is_logged_once_and_the_journal_goes_on(tmp_path) -> None:
    """Space for the journal's next entries but not for a snapshot: the snapshot fails with one
    line (not one per attempt), writes are still acknowledged, and the snapshot is written once
    there is space again."""
    with tmpfs(str(tmp_path / "fs")) as mnt:
        cluster = cluster_on(str(tmp_path), [os.path.join(mnt, "data")])
        node = cluster.nodes[0]
        snapshot = os.path.join(mnt, "data", "raft.snapshot.json")
        with cluster:
            start(node, COMPACT)
            cluster.wait_for_leader()
            names = [f"s-{i}" for i in range(300)]
            with ControllerClient(node.grpc_address, timeout=10) as client:
                for name in names[:250]:
                    client.apply_broker_id(CLUSTER, name, 1, f"{name}:10911;1")
                wait_until(
                    lambda: os.path.exists(snapshot) and os.path.getsize(snapshot) > 40000,
                    30,
                    what="a snapshot of the 250 broker sets",
                )
                filler = fill(mnt)
                # 128 KiB free: room for the journal and the term and vote file (a 24 KiB margin was
                # used up under load), none for a snapshot (SNAPSHOT_RESERVE, raftlog.py, keeps
                # 256 KiB beyond its size)
                os.truncate(filler, os.path.getsize(filler) - 128 * 1024)
                for name in names[250:]:  # the journal still fits, the snapshot not
                    client.apply_broker_id(CLUSTER, name, 1, f"{name}:10911;1")
                    time.sleep(0.05)
                wait_until(
                    lambda: lines(node, "raft snapshot: writing"),
                    30,
                    what="the snapshot failure to be logged",
                )
                time.sleep(5)  # two more attempts, every 2 s
                failed = lines(node, "raft snapshot: writing")
                assert len(failed) == 1 and "No space left on device (ENOSPC)" in failed[0], failed
                assert metadata(node.grpc_address)["problem"] == ""  # writes are acknowledged
                client.apply_broker_id(CLUSTER, "after-failure", 1, "after-failure:10911;1")
                os.unlink(filler)
                wait_until(lambda: lines(node, "written again"), 30, what="the snapshot to be written")
            assert missing(node, names + ["after-failure"]) == []
            power_loss_and_restart(cluster, [node])
            cluster.wait_for_leader()
            assert missing(node, names + ["after-failure"]) == []
            text = node.log_text()
    assert "Traceback" not in text and FAILING not in text, text[-3000:]
    assert not os.path.exists(snapshot + ".tmp")


# --- read-only ------------------------------------------------------------------------------------


def test_data_directory_turning_read_only_stops_acknowledging_and_the_node_restarts_clean(tmp_path) -> None:
    """ext4 turns read-only under the node (as after an I/O error). The node stops acknowledging,
    says EROFS; such a file system stays read-only until it is unmounted and checked, so the
    operator stops the node (it exits cleanly), runs fsck, mounts it and starts the node: every
    write acknowledged before is there.

    The error is raised while the node is paused (SIGSTOP, every thread stopped), so that no
    fdatasync of its is in flight: ext4 turns read-only in two steps, aborting its jbd2 journal
    first and setting the file system read-only after that, and an fdatasync that runs between the
    two returns 0 for a transaction that was never committed. e2fsck cannot replay it and the
    last record, acknowledged after that fdatasync, is gone (issue 36: `r-1-11`, acknowledged
    13-21 ms after the error began; its bytes were in the file's data block, its size update in
    no committed transaction). tests/raft/ext4_fsync_window.py shows the kernel doing it with no
    mqctl involved (a plain pwrite+fdatasync loop lost its last confirmed write in 5 of 40 rounds
    on Linux 6.18); docs/raft-safety.md says what that means for an operator. With the node
    paused, every write it acknowledged was fsynced before the error began and the kernel keeps
    it, so any loss here is mqctl's; every fdatasync after the pause fails (EROFS)."""
    image, mnt = str(tmp_path / "ext4.img"), str(tmp_path / "ext4")
    with ext4(image, mnt):
        cluster = cluster_on(str(tmp_path), [os.path.join(mnt, "data")])
        node = cluster.nodes[0]
        with cluster:
            start(node)
            cluster.wait_for_leader()
            load = Load(node.grpc_address, "r")
            try:
                load.wait_for(20)
                with paused(node):
                    ext4_error(mnt)
                problem = reports(node, "Read-only file system (EROFS)")
                assert FAILING in problem
                stops_acknowledging(load)
                answers_local_reads(node)
            finally:
                load.stop()
            assert node.stop() == 0  # SIGTERM: a clean exit, no traceback
    text = node.log_text()
    assert text.count(FAILING) == 1 and "Traceback" not in text, text[-3000:]

    fsck = _run("e2fsck", "-fy", image)
    assert fsck.returncode in (0, 1), fsck.stdout + fsck.stderr  # 1: errors corrected
    with _mounted_again(image, mnt):
        with cluster:
            start(node)
            cluster.wait_for_leader()
            assert missing(node, load.names()) == []
            with ControllerClient(node.grpc_address, timeout=10) as client:
                client.apply_broker_id(CLUSTER, "after-fsck", 1, "after-fsck:10911;1")


@contextlib.contextmanager
def _mounted_again(image: str, mnt: str) -> Iterator[str]:
    done = _run("mount", "-o", "loop,errors=remount-ro", image, mnt)
    assert done.returncode == 0, done.stderr
    try:
        yield mnt
    finally:
        _umount(mnt)


def test_read_only_data_directory_at_start_is_refused_in_one_line(tmp_path) -> None:
    with tmpfs(str(tmp_path / "fs")) as mnt:
        cluster = cluster_on(str(tmp_path), [os.path.join(mnt, "data")])
        node = cluster.nodes[0]
        os.makedirs(node.data_dir)
        assert _run("mount", "-o", "remount,ro", mnt).returncode == 0
        with cluster:
            start(node)
            wait_until(lambda: not node.alive(), 30, what="the node to refuse the read-only directory")
            assert node.proc is not None and node.proc.returncode == 2
        text = node.log_text()
    errors = [line for line in text.splitlines() if line.startswith("mqctl: error:")]
    assert len(errors) == 1 and "read-only file system" in errors[0], text
    assert "Traceback" not in text


# --- deleted --------------------------------------------------------------------------------------


def test_data_directory_deleted_under_a_running_node(tmp_path) -> None:
    """`rm -rf` of the data directory after a snapshot (so the journal no longer starts at index
    1). The node stops acknowledging and says so; once the directory exists again it writes its
    term and vote, a snapshot and the journal there anew, and a power loss right after that loses
    nothing acknowledged."""
    with tmpfs(str(tmp_path / "fs")) as mnt:
        data = os.path.join(mnt, "data")
        cluster = cluster_on(str(tmp_path), [data])
        node = cluster.nodes[0]
        snapshot = os.path.join(data, "raft.snapshot.json")
        with cluster:
            start(node, COMPACT)
            cluster.wait_for_leader()
            load = Load(node.grpc_address, "d")
            try:
                load.wait_for(20)
                wait_until(lambda: os.path.exists(snapshot), 30, what="a snapshot (log compaction)")
                load.wait_for(10)
                shutil.rmtree(data)
                problem = reports(node, "was removed under this node")
                assert FAILING in problem and data in problem
                stops_acknowledging(load)
                answers_local_reads(node)
                assert len(lines(node, FAILING)) == 1, node.log_text()[-3000:]

                os.mkdir(data)  # the operator makes the directory again
                wait_until(
                    lambda: lines(node, "written anew after it was removed"),
                    30,
                    what="the journal to be written anew",
                )
                assert os.path.exists(snapshot)  # written before the journal
                node.kill()  # a power loss at once: all of it is durable
                start(node, COMPACT)
                cluster.wait_for_leader()
                load.wait_for(10)
            finally:
                load.stop()
            assert missing(node, load.names()) == []
            text = node.log_text()
    assert "Traceback" not in text
    assert text.count(FAILING) == 1, text[-4000:]
