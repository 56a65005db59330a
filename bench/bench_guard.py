"""Issue 31's figures: `mqctl recover replay` against RocketMQ's own Java producer on the same broker, and
`mqctl recover guard` on a 10 GiB commitlog with nothing to lose.

    .venv/bin/python bench/bench_guard.py [--messages N] [--size BYTES] [--repeat R] [--guard-only]

Replay: in a private network namespace with only loopback (tests/rocketmq_fixtures.py), RocketMQ 5.3.3's
name server and one broker (a plain master; ../shared/rocketmq-broker). Rounds in turn: RocketMQ's
DefaultMQProducer (mqctl/sim/RocketMQDriver.java `send`: synchronous sends, one after another, as a
producer acknowledges) sends N messages of SIZE bytes; then `mqctl recover replay` publishes a salvage of
N messages of the same size (fresh UNIQ_KEYs, so every one is looked up and sent). Rates from the first
to the last acknowledgement (Java: its own timestamps; replay: the command's wall clock, start-up and
salvage checks included, and the time after its start-up); CPU and peak RSS of each process.

Guard: 10 commitlog files of 1 GiB, sparse except the records around the consistent point (the guard
reads the epoch file, the file list and the one record at the point: a dense 10 GiB store would be read
the same way; the bench does not write 10 GiB on a shared VM), a one-node `mqctl serve` naming a master
whose epoch cache (a real mqctl.v1.Broker service over a store) says where the histories part. Timed: the
`mqctl recover guard` command (process start-up included) and the decision in this process.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

MQCTL = str(Path(sys.executable).with_name("mqctl"))
GIB = 1 << 30


def children_usage() -> tuple[float, int]:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime, ru.ru_maxrss


def bench_guard(root: Path, repeat: int) -> None:
    from harness import Beater, register_broker

    from mqctl.client import ControllerClient
    from mqctl.localgroup import LocalCluster, wait_until
    from mqctl.store.build import build_store
    from mqctl.store.commitlog import COMMITLOG_DIR, Message, encode_record, file_name
    from mqctl.store.epochfile import EpochEntry, write_epoch_file
    from mqctl.store.identity import BrokerIdentity, write_identity

    store = root / "store10g"
    cl = store / COMMITLOG_DIR
    cl.mkdir(parents=True)
    for i in range(10):
        with open(cl / file_name(i * GIB), "wb") as fh:
            fh.truncate(GIB)
    # 1000 records of 1 KiB in the last file, epoch 2 from their start: the master has them all
    start = 9 * GIB + (512 << 20)
    pos = start
    with open(cl / file_name(9 * GIB), "r+b") as fh:
        for i in range(1000):
            rec = encode_record(Message("T", os.urandom(900), {"UNIQ_KEY": f"K{i:08d}"}), pos)
            fh.seek(pos - 9 * GIB)
            fh.write(rec)
            pos += len(rec)
    end = pos
    write_identity(store, BrokerIdentity("c", "broker-a", 1))
    write_epoch_file(store, [EpochEntry(1, 0), EpochEntry(2, start)])
    master = build_store(
        root / "master",
        history=[(1, 0), (2, 1000), (3, 2000)],
        max_offset=2500,
        cluster="c",
        broker="broker-a",
        broker_id=2,
        record_size=500,
    )
    # the master's epoch cache says: epoch 2 from `start` to `end`, epoch 3 after (a served store cannot
    # hold 9 GiB either: its answer is what counts, so a servicer that answers those entries)
    from mqctl.broker.epoch_service import BrokerEpochServicer
    from mqctl.store.epochfile import EpochCacheView
    from mqctl.v1 import broker_pb2 as pb

    class Servicer(BrokerEpochServicer):
        def GetBrokerEpochCache(self, request, context):
            view = EpochCacheView(
                "c", "broker-a", 2, [EpochEntry(1, 0), EpochEntry(2, start), EpochEntry(3, end)], end + 5000
            )
            return pb.GetBrokerEpochCacheResponse(**view.answer())

    from mqctl.broker.peers import serve_broker_service

    server, port = serve_broker_service(Servicer(master), "127.0.0.1:0", 2, "bench")
    addr = f"127.0.0.1:{port}"
    cluster = LocalCluster(str(root / "ctl"), size=1)
    cluster.start()
    client = ControllerClient(cluster.addresses)
    beater = Beater(client)
    try:
        register_broker(client, "broker-a", "127.0.0.1:1", "c")
        register_broker(client, "broker-a", addr, "c")
        beater.beat("broker-a", 2, addr, epoch=3, max_offset=end + 5000, confirm_offset=end + 5000)
        wait_until(lambda: client.elect_master("c", "broker-a", 2).master_broker_id == 2, 20, what="master")
        size = sum(p.stat().st_size for p in cl.iterdir())
        used = sum(p.stat().st_blocks * 512 for p in cl.iterdir())
        print(
            f"guard: store of {size / GIB:.1f} GiB in {len(list(cl.iterdir()))} files ({used / 1e6:.1f} MB "
            f"allocated: sparse), consistent point {end}"
        )
        times, cpus = [], []
        doc = {}
        for _ in range(repeat):
            c0, _ = children_usage()
            t0 = time.perf_counter()
            p = subprocess.run(
                [MQCTL, "recover", "guard", str(store), "-a", cluster.addresses, "-o", "json"],
                capture_output=True,
                text=True,
                timeout=60,
            )
            times.append(time.perf_counter() - t0)
            cpus.append(children_usage()[0] - c0)
            assert p.returncode == 0, p.stdout + p.stderr
            doc = json.loads(p.stdout)
        assert doc["outcome"] == "nothing-to-lose" and doc["consistentPoint"] == end, doc
        from mqctl.cli.admin_cmd import Conn
        from mqctl.cli.recover_guard_cmd import _ask_master
        from mqctl.pipeline.guard import guard

        conn = Conn(cluster.addresses, None, None, None, None, 5.0)
        inproc = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            res = guard(store, out=None, ask_master=_ask_master(conn))
            inproc.append(time.perf_counter() - t0)
        assert res.outcome == "nothing-to-lose"
        print(
            f"guard, the command (python start-up, gRPC import, controller and master asked): best "
            f"{min(times):.3f} s, median {sorted(times)[len(times) // 2]:.3f} s, CPU {min(cpus):.3f} s; "
            f"commitlog bytes read {doc['decisionReadBytes']}"
        )
        print(
            f"guard, the decision in this process (controller, master, store): best "
            f"{min(inproc) * 1000:.1f} ms, median {sorted(inproc)[len(inproc) // 2] * 1000:.1f} ms"
        )
    finally:
        beater.stop()
        client.close()
        server.stop(None)
        cluster.stop()


def bench_replay(root: Path, n: int, size: int, repeat: int) -> None:
    from rocketmq_fixtures import (
        CLIENT_JOPTS,
        DRIVER,
        LIB,
        Namespace,
        broker_args,
        broker_classpath,
        compile_java,
        namesrv_args,
        rocketmq_env,
        why_not,
    )

    from mqctl.pipeline.guard import _salvage_tail
    from mqctl.sim.rocketmq import broker_conf
    from mqctl.store.commitlog import COMMITLOG_DIR, CommitLogWriter, Message
    from mqctl.store.epochfile import EpochEntry, write_epoch_file
    from mqctl.store.identity import BrokerIdentity, write_identity

    why = why_not()
    if why:
        print(f"replay: skipped: {why}")
        return
    # the driver's message: "body of KEY" with tag and key; the bench's bodies are SIZE bytes instead
    src = DRIVER.read_text().replace(
        '("body of " + key).getBytes()', f'("body of " + key + "{"x" * max(0, size - 20)}").getBytes()'
    )
    drv = root / "RocketMQDriver.java"
    drv.write_text(src)
    classes = compile_java(root / "classes", drv)
    ns = Namespace(root)
    cp = broker_classpath()
    try:
        ns.start("namesrv", *namesrv_args(ns, 9876, cp), env=rocketmq_env(ns))
        ns.wait_log("namesrv", r"The Name Server boot success", 60)
        conf = root / "broker.conf"
        text = broker_conf(
            controllers=["127.0.0.1:1"],
            namesrv="127.0.0.1:9876",
            port=10911,
            ha_port=10912,
            store=root / "b0" / "store",
        )
        for a, b in (
            ("enableControllerMode = true", "enableControllerMode = false"),
            ("brokerId = -1", "brokerId = 0"),
            ("brokerRole = SLAVE", "brokerRole = ASYNC_MASTER"),
        ):
            text = text.replace(a, b)
        conf.write_text(text)
        ns.start("b0", *broker_args(ns, "b0", conf, cp), env=rocketmq_env(ns))
        ns.wait_log("b0", r"boot success", 120)
        java = [
            "java",
            *CLIENT_JOPTS,
            f"-Drocketmq.client.logRoot={root / 'client-logs'}",
            "-cp",
            f"{classes}:{LIB / '*'}",
            "RocketMQDriver",
        ]
        ns.run(*java, "send", "127.0.0.1:9876", "BenchTopic", "warm", "200", timeout=120)  # topic, JIT
        rows = []
        for rnd in range(repeat):
            c0, _ = children_usage()
            jrss_file = root / f"java-rss-{rnd}"
            p = ns.run(
                "/usr/bin/time",
                "-o",
                str(jrss_file),
                "-f",
                "%M",
                *java,
                "send",
                "127.0.0.1:9876",
                "BenchTopic",
                f"j{rnd}",
                str(n),
                timeout=600,
            )
            jcpu = children_usage()[0] - c0
            ms = [int(ln.split()[3]) for ln in p.stdout.splitlines() if ln.startswith("ok ")]
            assert len(ms) == n, p.stdout[-2000:] + p.stderr[-2000:]
            jrate = (n - 1) / max(1e-3, (ms[-1] - ms[0]) / 1000)
            # a salvage of N messages of the same size, fresh UNIQ_KEYs
            st = root / f"salv-src-{rnd}"
            st.mkdir()
            write_identity(st, BrokerIdentity("DefaultCluster", "broker-a", 1))
            write_epoch_file(st, [EpochEntry(1, 0)])
            with CommitLogWriter(st / COMMITLOG_DIR, 256 << 20) as w:
                for i in range(n):
                    key = f"r{rnd}-{i}"
                    w.append(
                        Message(
                            "BenchTopic",
                            f"body of {key}{'x' * max(0, size - 20)}".encode(),
                            {"KEYS": key, "TAGS": "tag", "UNIQ_KEY": os.urandom(16).hex().upper()},
                            queue_id=i % 4,
                            born_timestamp=int(time.time() * 1000),
                        )
                    )
            (root / "salvages").mkdir(exist_ok=True)
            salv, _ = _salvage_tail(st, 0, root / "salvages", f"s{rnd}", {"bytesToLose": 0})
            c0, _ = children_usage()
            t0 = time.perf_counter()
            rss_file = root / f"replay-rss-{rnd}"
            p = ns.run(
                "/usr/bin/time",
                "-o",
                str(rss_file),
                "-f",
                "%M",
                MQCTL,
                "recover",
                "replay",
                str(salv),
                "-n",
                "127.0.0.1:9876",
                "-o",
                "json",
                timeout=600,
            )
            rss = int(rss_file.read_text().split()[-1]) // 1024
            wall = time.perf_counter() - t0
            rcpu = children_usage()[0] - c0
            assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
            doc = json.loads(p.stdout)
            assert doc["sent"] == n, doc
            rrate = n / wall
            rows.append((jrate, rrate, jcpu, rcpu))
            jss = int(jrss_file.read_text().split()[-1]) // 1024
            print(
                f"round {rnd + 1}: Java producer {jrate:,.0f} msg/s (CPU {jcpu:.1f} s, its JVM included, "
                f"peak RSS {jss} MiB); mqctl replay {rrate:,.0f} msg/s over its whole run, "
                f"{rrate / jrate:.2f}x (CPU {rcpu:.1f} s, peak RSS {rss} MiB)"
            )
        best = max(rows, key=lambda r: r[1] / r[0])
        med = sorted(r[1] / r[0] for r in rows)[len(rows) // 2]
        print(
            f"replay / Java producer: median {med:.2f}x, best round {best[1] / best[0]:.2f}x "
            f"({n} messages of {size} bytes)"
        )
    finally:
        for name in list(ns.procs):
            ns.procs[name].send_signal(signal.SIGKILL)
        ns.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=20000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--guard-only", action="store_true")
    args = ap.parse_args()
    print(
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.node()}, {os.cpu_count()} cores, "
        f"load {os.getloadavg()[0]:.2f}"
    )
    root = Path(tempfile.mkdtemp(prefix="bench-guard-"))
    try:
        bench_guard(root / "g", max(5, args.repeat))
        if not args.guard_only:
            (root / "r").mkdir()
            bench_replay(root / "r", args.messages, args.size, args.repeat)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
