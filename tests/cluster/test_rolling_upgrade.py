"""A rolling upgrade from the previous release (mqctl 0.1, the last commit whose leaders logged
commands) and back, under write load: never a fork, never an unreadable entry applied, no
acknowledged write lost.

The previous release is taken from the git history into its own virtual environment: its `mqctl`
package comes from `git archive`, its dependencies (the same pinned versions) from this venv.
"""

from __future__ import annotations

import io
import os
import shutil
import signal
import site
import subprocess
import sys
import tarfile
import time
from functools import partial
from pathlib import Path

import pytest
from harness import Writers, register_set

from mqctl.client import ControllerClient, ControllerError
from mqctl.localgroup import LocalCluster, Node, metadata, wait_until

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
# mqctl 0.1: every node re-decided (method, request, context) commands; the records release follows it.
PREVIOUS_RELEASE = "9d5181db4875aa237f153e4b6d4b104ec28cf189"
CLUSTER = "upgrade-cluster"


@pytest.fixture(scope="module")
def old_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    base = tmp_path_factory.mktemp("previous-release")
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", PREVIOUS_RELEASE, "mqctl"],
        capture_output=True,
        timeout=60,
    )
    if archive.returncode != 0:  # a clone without history cannot run this test: say so loudly
        pytest.fail(
            f"the previous release {PREVIOUS_RELEASE[:12]} is not in this clone's git history: "
            f"{archive.stderr.decode(errors='replace').strip()}"
        )
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(base / "src", filter="data")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    venv_site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # the old package first; this venv's site-packages (without its .pth files, so not this checkout's
    # editable mqctl) for grpcio, pysyncobj and the rest
    ours = [p for p in site.getsitepackages() if p.endswith("site-packages")]
    Path(venv_site, "mqctl-previous-release.pth").write_text("\n".join([str(base / "src"), *ours]) + "\n")
    # nothing in the environment (PYTHONPATH naming this checkout) may shadow that release's package
    launcher = venv / "bin" / "python-previous-release"
    launcher.write_text(f'#!/bin/sh\nunset PYTHONPATH PYTHONHOME\nexec {python} "$@"\n')
    launcher.chmod(0o755)
    python = launcher
    probe = subprocess.run(
        [
            str(python),
            "-P",
            "-c",
            "import mqctl.controller.core as c, mqctl; "
            "print(mqctl.__file__, hasattr(c, 'InconsistentRecord'))",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert probe.returncode == 0 and probe.stdout.split()[1] == "False", probe.stdout + probe.stderr
    assert probe.stdout.startswith(str(base / "src")), probe.stdout
    return str(python)


def _lead(cluster: LocalCluster, node: Node, load: Writers) -> None:
    """Hand the leadership to `node`: the writers pause, since pysyncobj hands it only to a node
    that has every entry of the leader's log."""

    def led() -> bool:
        leader = cluster.leader()
        if leader is node:
            return True
        try:
            with ControllerClient(cluster.addresses, timeout=10) as c:
                c.change_quorum("transfer", node.raft_address)
        except ControllerError:
            pass
        return cluster.leader() is node

    with load.pause():
        wait_until(led, 60, interval=0.5, what=f"{node.name} to lead")
        cluster.wait_for_leader()


def _writes_while(load: Writers, more: int = 5) -> None:
    def sets() -> int:
        with load.ledger.lock:
            return len(load.ledger.elected)

    start = sets()
    wait_until(lambda: sets() >= start + more, 60, what=f"{more} more acknowledged broker sets")


def _same_state(cluster: LocalCluster, load: Writers) -> None:
    """Equal state hashes on every node: compared with the writers paused, since under load the
    nodes are read at different applied indexes."""
    with load.pause():
        cluster.wait_for_same_hash()


def _restart(node: Node, python: str, *, fresh: bool = False) -> None:
    assert node.stop() == 0, node.log_text()[-3000:]
    if fresh:  # a downgraded node starts from an empty data directory and catches up
        shutil.rmtree(node.data_dir)
    node.python = python
    node.start()


def test_rolling_upgrade_and_downgrade_under_load(tmp_path: Path, old_python: str) -> None:
    cluster = LocalCluster(str(tmp_path), size=3)
    old, new1, _new2 = cluster.nodes
    old.python = old_python
    with cluster:
        cluster.start()
        with Writers(cluster.addresses, partial(register_set, cluster_name=CLUSTER)) as load:
            _writes_while(load)
            # a 0.1 leader logs commands, which this release's nodes decide as 0.1 did
            _lead(cluster, old, load)
            assert not metadata(old.grpc_address).get("max_feature_level")  # it is mqctl 0.1 indeed
            _writes_while(load)
            assert cluster.leader() is old
            _same_state(cluster, load)
            # the group cannot leave level 1 while a 0.1 node is a member (the 0.1 leader does not
            # know the action; a newer leader names the 0.1 node)
            with (
                ControllerClient(cluster.addresses, timeout=10) as c,
                pytest.raises(ControllerError, match=f"{old.raft_address} .speaks 1|not 'feature-level'"),
            ):
                c.change_quorum("feature-level", feature_level=2)
            # upgrade the 0.1 node
            _restart(old, sys.executable)
            cluster.wait_for_leader()
            _writes_while(load)
            _same_state(cluster, load)
            # downgrade another node to 0.1 and let it lead (if it led, stopping it elects another)
            _restart(new1, old_python, fresh=True)
            cluster.wait_for_leader()
            _lead(cluster, new1, load)
            _writes_while(load)
            # and upgrade it again
            _restart(new1, sys.executable)
            cluster.wait_for_leader()
            _writes_while(load)
        digest = cluster.wait_for_same_hash()
        assert len(digest) == 64
        ledger = load.ledger
        with ControllerClient(cluster.addresses, timeout=30) as c:
            table = c.get_sync_state_data(ledger.names()).replicas_info_table
        ledger.check(table)
        # the brokers never beat: the controller later clears the master it finds dead
        assert all(table[name].master_broker_id in (1, None) for name, _, _ in ledger.elected)
        assert len(ledger.elected) >= 25 and not ledger.unexpected, ledger.unexpected[:5]
        for node in cluster.nodes:
            log = node.log_text()
            assert "cannot apply a Raft log entry" not in log, (node.name, log[-3000:])
            assert "Traceback" not in log, (node.name, log[-3000:])
            assert metadata(node.grpc_address).get("feature_level") == 1
    assert os.path.isdir(new1.data_dir)


def test_a_node_of_this_release_is_elected_where_only_a_0_1_node_can_vote(
    tmp_path: Path, old_python: str
) -> None:
    """PreVote in a mixed group (mqctl/raft/FORK.md, change 13): a 0.1 node ignores pre-votes, so a
    node of this release counts it as granting once its plain request_vote showed what it is. Here
    the 0.1 node's log is behind and it cannot win; the other survivor must still be elected."""
    cluster = LocalCluster(str(tmp_path), size=3)
    old = cluster.nodes[0]
    old.python = old_python
    with cluster, ControllerClient(cluster.addresses, timeout=10) as client:
        for node in cluster.nodes[1:]:  # the new nodes elect one of them; then the 0.1 node joins
            node.start()
        cluster.wait_for_leader(exclude=old)
        old.start()
        # a 0.1 node that hears from no leader in time asks for votes at a higher term (it has no
        # PreVote), which may move the leadership to the other new node: whichever leads once the
        # group has settled, the test needs a node of this release leading
        leader = wait_until(
            lambda: (lead := cluster.leader()) is not None and lead is not old and lead,
            30,
            what="a node of this release leading with the 0.1 node in the group",
        )
        survivor = next(n for n in cluster.nodes if n is not old and n is not leader)
        assert old.proc is not None
        # stopped for longer than pysyncobj's connectionTimeout (1 s), the 0.1 node is disconnected:
        # the writes never reach it, not even into its socket buffers
        old.proc.send_signal(signal.SIGSTOP)
        try:
            time.sleep(1.5)
            for i in range(5):
                client.apply_broker_id(CLUSTER, f"mixed-{i}", 1, f"127.0.0.1:2000{i};x")
            leader.kill()
        finally:
            old.proc.send_signal(signal.SIGCONT)
        started = time.monotonic()
        elected = wait_until(
            lambda: cluster.leader([old, survivor]),
            30,
            interval=0.05,
            what="a leader among the 0.1 node and the node of this release",
        )
        assert elected is survivor, "the 0.1 node, whose log is behind, cannot have won"
        print(f"elected after {time.monotonic() - started:.2f} s")
        client.apply_broker_id(CLUSTER, "mixed-after", 1, "127.0.0.1:20010;x")
        leader.start()
        cluster.wait_for_same_hash(30)
