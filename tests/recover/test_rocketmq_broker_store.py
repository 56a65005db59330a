"""`mqctl recover` on stores written by a real RocketMQ 5.3.3 broker (issue 12), the judge of both rules:

* the end of the log: RocketMQ writes the blank marker at the end of a file when a message does not fit
  (CommitLog.doAppend: `msgLen + END_FILE_MIN_BLANK_LENGTH > maxBlank`), so with 16 KiB commitlog files
  several files end with one. mqctl's max offset equals the broker's own (getMaxPhyOffset through its
  runtime info, the end of the last message the producer stored, the consume queues). Without the file
  after a marker (the state that a failed file creation after the marker or a slave's copy that stopped
  at the file end leaves), RocketMQ's recovery puts the max offset at the marker, normal recovery and
  abnormal recovery alike ("load over, and the max phy offset = N" in the broker's log), and so does
  mqctl, whose plan then drops nothing;
* clean or not: a SIGTERM'd broker deletes `abort` (clean without an mqctl signature), a kill -9'd one
  leaves it (dirty); `mqctl recover mark-clean` removes it and RocketMQ then says "last shutdown normally".

The broker runs in controller mode behind `mqctl serve --remoting-port` (so that it writes brokerIdentity
and the epoch file, and plan can place the store), with a name server, everything inside a private network
namespace (`unshare --net`, loopback only: RocketMQ's HA listener binds the wildcard address). The producer
is RocketmqStoreDriver.java beside this file, compiled here against ../shared/rocketmq-broker/lib.
"""

from __future__ import annotations

import signal
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from rocketmq_fixtures import (
    LIB,
    MQCTL,
    Namespace,
    broker_args,
    broker_classpath,
    broker_conf,
    compile_java,
    namesrv_args,
    require_rocketmq,
    rocketmq_env,
)

from mqctl.store.commitlog import BLANK_MAGIC, COMMITLOG_DIR, CommitLog

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
FILE_SIZE = 16384  # mappedFileSizeCommitLog: markers after a few messages
MESSAGES = 40  # 600..3099 bytes of body each: about 86 KB, 6 files
# ports inside the private network namespace, where nothing else listens: all free
NAMESRV, BROKER, HA, CTL_GRPC, CTL_RAFT, CTL_REMOTING = 9876, 10911, 10912, 9878, 9880, 9868


@pytest.fixture(scope="module")
def rocketmq(tmp_path_factory) -> Iterator[tuple[Namespace, list[str], Path]]:
    """The namespace with `mqctl serve --remoting-port` and a RocketMQ name server running, the broker's
    class path, and the compiled driver's directory."""
    require_rocketmq()
    root = tmp_path_factory.mktemp("rocketmq")
    cp = broker_classpath()
    classes = compile_java(root / "classes", HERE / "RocketmqStoreDriver.java")
    ns = Namespace(root)
    try:
        ns.start(
            "controller",
            MQCTL,
            "serve",
            "--listen",
            f"127.0.0.1:{CTL_GRPC}",
            "--raft",
            f"127.0.0.1:{CTL_RAFT}",
            "--remoting-port",
            str(CTL_REMOTING),
            "--data-dir",
            str(root / "controller"),
        )
        ns.start("namesrv", *namesrv_args(ns, NAMESRV, cp), env=rocketmq_env(ns))
        ns.wait_log("controller", r"RocketMQ remoting listening", 60)
        ns.wait_log("namesrv", r"The Name Server boot success", 60)
        yield ns, cp, classes
    finally:
        ns.close()


def start_broker(ns: Namespace, cp: list[str], name: str, store: Path) -> subprocess.Popen[bytes]:
    """A broker of broker set broker-a in controller mode (rocketmq_fixtures.broker_conf) on `store`, with
    small commitlog files."""
    conf = ns.root / f"{name}.conf"
    conf.write_text(
        broker_conf(
            controllers=[f"127.0.0.1:{CTL_REMOTING}"],
            namesrv=f"127.0.0.1:{NAMESRV}",
            port=BROKER,
            ha_port=HA,
            store=store,
            extra={"mappedFileSizeCommitLog": FILE_SIZE},
        )
    )
    return ns.start(name, *broker_args(ns, name, conf, cp), env=rocketmq_env(ns))


def recovered(ns: Namespace, name: str) -> tuple[str, int]:
    """How RocketMQ found the store when it loaded it: normally/abnormally and its recovered max offset."""
    how = ns.wait_log(name, r"last shutdown (normally|abnormally)", 90).group(1)
    return how, int(ns.wait_log(name, r"load over, and the max phy offset = (\d+)", 90).group(1))


def markers(store: Path) -> list[int]:
    """Absolute offsets of the blank markers, walking each commitlog file by TOTALSIZE."""
    out = []
    for f in sorted((store / COMMITLOG_DIR).iterdir()):
        data, pos = f.read_bytes(), 0
        while pos + 8 <= len(data):
            total, magic = struct.unpack_from(">iI", data, pos)
            if magic == BLANK_MAGIC:
                assert total == len(data) - pos, f"{f} marker at {pos} says {total} bytes remain"
                out.append(int(f.name) + pos)
                break
            if total <= 0:
                break
            pos += total
    return out


def consume_queue_end(store: Path) -> int:
    """The end of the last message the consume queues index (20-byte entries: offset, size, tags code)."""
    end = 0
    for f in (store / "consumequeue").rglob("*"):
        if f.is_file():
            data = f.read_bytes()
            for pos in range(0, len(data) - 19, 20):
                off, size, _ = struct.unpack_from(">qiq", data, pos)
                if off == 0 and size == 0:
                    break
                end = max(end, off + size)
    return end


def inspect(cli, store: Path) -> dict:
    r = cli("recover", "inspect", str(store), "--deep", "-o", "json")
    assert r.code == 0, r.err
    return r.json()["stores"][0]


def plan_rows(cli, store: Path) -> tuple[bool, list[tuple[int, int, int]]]:
    """`recover plan` of the one store: whether its source is clean, (maxOffset, truncateTo, bytesToDrop)."""
    plan = cli("recover", "plan", str(store), "-o", "json").json()
    (s,) = plan["brokerSets"]
    assert (s["source"], plan["unmatched"]) == (str(store), [])
    assert s["warnings"] == (
        []
        if s["sourceClean"]
        else [
            f"no clean store: {store} is the freshest; confirm it and run `mqctl recover mark-clean {store}` "
            f"before restarting"
        ]
    )
    return s["sourceClean"], [(r["maxOffset"], r["truncateTo"], r["bytesToDrop"]) for r in s["replicas"]]


def test_stores_written_by_rocketmq(rocketmq, tmp_path: Path, cli) -> None:
    ns, cp, classes = rocketmq
    store = tmp_path / "store"

    # 1. a broker stores the producer's messages across several files, then a clean shutdown (SIGTERM)
    start_broker(ns, cp, "b1", store)
    ns.wait_log("b1", r"Begin to change to master", 90)
    ns.wait_log("b1", r"boot success", 90)
    p = subprocess.run(
        ns.cmd(
            "java",
            f"-Drocketmq.client.logRoot={ns.root / 'client-logs'}",
            "-Dorg.apache.rocketmq.logging.org.slf4j.simpleLogger.defaultLogLevel=error",
            "-cp",
            f"{classes}:{LIB / '*'}",
            "RocketmqStoreDriver",
            "send",
            f"127.0.0.1:{NAMESRV}",
            f"127.0.0.1:{BROKER}",
            "StoreTopic",
            str(MESSAGES),
        ),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.split("\n")
    sent = [int(ln.split()[2]) for ln in lines if ln.startswith("sent ")]
    broker_max = int(next(ln.split()[1] for ln in lines if ln.startswith("commitLogMaxOffset ")))
    assert len(sent) == MESSAGES and sent == sorted(sent)
    assert ns.stop("b1", signal.SIGTERM, 90) == 143
    assert not (store / "abort").exists(), "a clean shutdown deletes abort"

    marks = markers(store)
    assert len(marks) >= 3, f"expected several files ending with RocketMQ's blank marker: {marks}"
    log = CommitLog(store / COMMITLOG_DIR)
    assert [r.offset for r in log.iter_records()] == sent  # mqctl reads every record RocketMQ wrote
    last = sent[-1]
    assert log.files[-1].start <= last, "the clean shutdown deleted the preallocated file after the last one"
    d = inspect(cli, store)
    assert (d["state"], d["dirtyReasons"], d["finalSignature"]) == ("clean", [], None)
    assert (d["clusterName"], d["brokerName"], d["brokerId"]) == ("DefaultCluster", "broker-a", 1)
    assert d["maxOffset"] == broker_max == consume_queue_end(store) > last
    assert (d["bytesBeyond"], d["problems"], d["checkpointMatches"]) == (0, [], True)
    assert plan_rows(cli, store) == (True, [(broker_max, broker_max, 0)])

    # 2. without the file after the last marker, the log ends at the marker: RocketMQ's recovery
    #    (normal: no abort file) agrees, and plan drops nothing
    marker = marks[-1]
    cut = [f for f in log.files if f.start > marker]
    assert cut and cut[0].start == marker - marker % FILE_SIZE + FILE_SIZE
    for f in cut:
        f.path.unlink()
    d = inspect(cli, store)
    assert (d["state"], d["maxOffset"], d["bytesBeyond"]) == ("clean", marker, 0)
    assert plan_rows(cli, store) == (True, [(marker, marker, 0)])
    start_broker(ns, cp, "b2", store)
    assert recovered(ns, "b2") == ("normally", marker)
    ns.wait_log("b2", r"boot success", 90)
    pid2 = ns.procs["b2"].pid
    assert ns.stop("b2", signal.SIGKILL, 30) == -signal.SIGKILL

    # 3. a kill -9 leaves abort: dirty; the abnormal recovery agrees on the marker too
    assert (store / "abort").read_text() == str(pid2)
    d = inspect(cli, store)
    assert (d["state"], d["dirtyReasons"], d["maxOffset"]) == (
        "dirty",
        [f"abort file present (pid {pid2}): not shut down cleanly"],
        marker,
    )
    assert plan_rows(cli, store) == (False, [(marker, marker, 0)])
    start_broker(ns, cp, "b3", store)
    assert recovered(ns, "b3") == ("abnormally", marker)
    ns.wait_log("b3", r"boot success", 90)
    pid3 = ns.procs["b3"].pid
    assert ns.stop("b3", signal.SIGKILL, 30) == -signal.SIGKILL
    assert inspect(cli, store)["dirtyReasons"] == [f"abort file present (pid {pid3}): not shut down cleanly"]

    # 4. mark-clean removes abort: clean for mqctl, and RocketMQ's next start is a normal one
    r = cli("recover", "mark-clean", str(store), "--yes", "-o", "json")
    assert r.code == 0, r.err
    assert (r.json()["abortRemoved"], r.json()["finalSignature"]["maxOffset"]) == (True, marker)
    assert not (store / "abort").exists()
    d = inspect(cli, store)
    assert (d["state"], d["maxOffset"]) == ("clean", marker)
    start_broker(ns, cp, "b4", store)
    assert recovered(ns, "b4") == ("normally", marker)
    ns.wait_log("b4", r"boot success", 90)
    assert ns.stop("b4", signal.SIGKILL, 30) == -signal.SIGKILL
    assert markers(store) == marks, "RocketMQ left the marker where it was"
    assert "Traceback" not in ns.log("controller")
