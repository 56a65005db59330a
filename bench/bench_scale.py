"""Fleet scale: one controller leader and many RocketMQ brokers over remoting. Figures, not assertions.

    .venv/bin/python bench/bench_scale.py [--quick] [--sets 100,1000,3334] [--window 60] [--procs 2]

A three-node `mqctl serve` group on 127.0.0.1 (all three on this machine) and load generators:
`python -m mqctl.sim.fleet` processes that act as RocketMQ brokers over remoting, one asyncio loop
each with pre-encoded JSON frames, many brokers per connection: they apply each broker's id (1013),
register it (1003), then send BROKER_HEARTBEAT (904) for every broker once a second, spread evenly
over the second, and time every answer. The brokers beat the leader only (a RocketMQ broker beats every
controller node; each node keeps its own table, so in production the followers take the same load
on their own machines).

Printed, in one run:
1. Registration: ApplyBrokerId + RegisterBroker for every broker, the time and writes per second
   (then, as a RocketMQ broker does, replica 1 of each set asks for an election, 1002).
2. Capacity and flat cost: the broker sets are added in steps (100, 1,000, 3,334 sets of three
   replicas by default); at each step, over a window: heartbeats answered, round trip
   p50/p99/max, the leader's CPU in microseconds per heartbeat (its idle CPU subtracted), the
   workers' CPU, leader changes (polled every 100 ms) and elections during the window (a broker
   wrongly declared dead would cause one).
3. Memory: the leader's RSS per registered broker beyond the RSS before registration.
4. Failover at scale: with the whole load running, 20 masters stop beating one after the other;
   from each one's last heartbeat to the new master in the applied state (WatchRoleChanges on the
   leader), beyond the lease: p50/p99. Then a mass failure: 100 masters at once. Then a kill -9 of
   the controller leader with the fleet beating: the brokers follow the new leader, which must elect
   no broker set (it waits one lease before it declares anybody dead).
5. Capacity over gRPC: 3,000 brokers beating once a second on HeartbeatStream streams (grpc.aio
   generators, pre-encoded; the beats due on a stream at once share a message).
6. Controller leader kill -9 under write load (25 kills): to a new leader, to the next served write.
7. Controller leader paused (SIGSTOP): a long-lived client's next write served after.
8. Write throughput with 64 concurrent clients, latency against a GetMetadata round trip.

The baseline for ratios is a GetMetadata round trip over remoting in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import math
import os
import platform
import struct
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

from mqctl.sim.fleet import proc_cpu_seconds

# tests/harness.py (Gate, register_broker): test support the benchmarks borrow
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))

CLUSTER = "ScaleCluster"
LEASE_MS = 10_000


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(p / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def proc_rss_mib(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


# ------------------------------------------------------------------------------------------------
# Main


class Worker:
    def __init__(self, addresses: list[str], first: int, count: int) -> None:
        self.first, self.count = first, count
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mqctl.sim.fleet",
                ",".join(addresses),
                str(first),
                str(count),
                CLUSTER,
                str(LEASE_MS),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        assert self.proc.stdout is not None
        self.registered = json.loads(self.proc.stdout.readline())

    def ask(self, line: str) -> dict[str, Any] | None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        if line.startswith("report"):
            return json.loads(self.proc.stdout.readline())  # type: ignore[no-any-return]
        return None

    def report(self) -> dict[str, Any]:
        out = self.ask("report")
        assert out is not None
        return out

    def stop(self) -> None:
        try:
            self.ask("quit")
        except (BrokenPipeError, OSError):
            pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def remoting_call(address: str, code: int, ext: dict[str, str] | None = None) -> float:
    import socket

    from mqctl.sim.fleet import frame

    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), 10) as s:
        data = frame(code, 1, ext or {})
        started = time.perf_counter()
        s.sendall(data)
        (total,) = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))
        s.recv(total, socket.MSG_WAITALL)
        return (time.perf_counter() - started) * 1000


def leader_state(cluster: Any) -> tuple[Any, dict[str, Any]]:
    from mqctl.localgroup import metadata

    leader = cluster.wait_for_leader()
    return leader, metadata(leader.grpc_address)


def masters(addresses: str) -> dict[str, tuple[int | None, int]]:
    from mqctl.client import ControllerClient

    with ControllerClient(addresses, timeout=30) as c:
        table = c.get_sync_state_data([]).replicas_info_table
    return {name: (info.master_broker_id, info.master_epoch) for name, info in table.items()}


class Leadership:
    """Counts the controller leader changes (distinct (term, leader) seen), polled every 100 ms."""

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self.seen: set[tuple[int, str]] = set()
        self.stop = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        from mqctl.localgroup import metadata

        while not self.stop.wait(0.1):
            for node in self.cluster.nodes:
                if not node.alive():
                    continue
                try:
                    m = metadata(node.grpc_address, timeout=1)
                except Exception:
                    continue
                if m.get("is_leader"):
                    self.seen.add((int(m.get("term", 0)), node.name))

    def changes(self) -> int:
        return max(0, len(self.seen) - 1)


def capacity(args: argparse.Namespace, cluster: Any, leader: Any, window: float) -> list[Worker]:
    """Remoting brokers added in steps; per step the heartbeat figures over a window."""
    assert leader.proc is not None
    # every node's process: leadership may move (it should not), and then the figures are read
    # off the node that leads when a window starts (CPU) or ends (memory), not the first leader
    pids = {node.name: node.proc.pid for node in cluster.nodes if node.proc is not None}
    everyone = [n.remoting_address for n in cluster.nodes]
    rtts = [remoting_call(leader.remoting_address, 1005) for _ in range(200)]
    base_ms = pct(rtts, 50)
    rss0s = {name: proc_rss_mib(p) for name, p in pids.items()}
    rss0 = rss0s[leader.name]
    idle0 = proc_cpu_seconds(pids[leader.name])
    time.sleep(5)
    idle = (proc_cpu_seconds(pids[leader.name]) - idle0) / 5  # the leader's own work with no broker
    print(
        f"baseline: GetMetadata over remoting p50 {base_ms:.2f} ms; leader RSS {rss0:.1f} MiB and CPU "
        f"{100 * idle:.1f}% with no broker (subtracted from its CPU per heartbeat)"
    )
    print("\n1-3. capacity over remoting (904, brokers beat the leader once a second)")
    print(
        "sets brokers | register s  writes/s | beats/s answered/s  p50 ms  p99 ms  max ms  (p99/base) |"
        " leader us/hb  leader CPU  gen CPU | lost err | leader changes elections"
    )
    workers: list[Worker] = []
    brokers = 0
    per_hb: dict[int, float] = {}
    watch = Leadership(cluster)
    for sets in [int(s) for s in args.sets.split(",")]:
        target = sets * 3
        if target <= brokers:
            continue
        reg_started = time.monotonic()
        chunk = ((target - brokers + args.procs - 1) // args.procs + 2) // 3 * 3  # whole broker sets
        new: list[Worker] = []
        lock = threading.Lock()

        def spawn(first: int, count: int, new: list[Worker] = new, lock: threading.Lock = lock) -> None:
            w = Worker(everyone, first, count)
            with lock:
                new.append(w)

        threads = [
            threading.Thread(target=spawn, args=(first, min(chunk, target - first)))
            for first in range(brokers, target, chunk)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        reg_s = time.monotonic() - reg_started
        added = target - brokers
        workers.extend(new)
        brokers = target
        # every new broker beating, and its set's master elected (the brokers ask, 1002)
        wait_masters = time.monotonic() + 60
        while (
            time.monotonic() < wait_masters
            and sum(1 for mid, _ in masters(cluster.addresses).values() if mid is not None) < sets
        ):
            time.sleep(1)
        time.sleep(2)
        leader = cluster.wait_for_leader()
        pid = pids[leader.name]
        changes0 = watch.changes()
        before = masters(cluster.addresses)
        cpu0 = proc_cpu_seconds(pid)
        first = [w.report() for w in workers]
        gen0 = sum(r["cpu"] for r in first)
        t0 = time.time()
        time.sleep(window)
        t1 = time.time()
        cpu1 = proc_cpu_seconds(pid)
        reports = [w.report() for w in workers]
        gen1 = sum(r["cpu"] for r in reports)
        lat: list[float] = []
        per_sec: dict[int, list[float]] = {}
        for r in reports:
            for sec, values in r["latencies"].items():
                if t0 + 1 <= int(sec) < t1 - 1:
                    lat.extend(values)
                    per_sec.setdefault(int(sec), []).extend(values)
        seconds = max(1.0, int(t1 - 1) - int(t0 + 1))
        lost = sum(r["lost"] for r in reports) - sum(r["lost"] for r in first)  # within the window
        errors = sum(r["errors"] for r in reports) - sum(r["errors"] for r in first)
        after = masters(cluster.addresses)
        # a set whose first master came during the window is not counted: only re-elections are
        elections = sum(1 for name in after if before.get(name, (None, 0))[1] not in (0, after[name][1]))
        us = (cpu1 - cpu0 - idle * (t1 - t0)) / max(1.0, len(lat) * (t1 - t0) / seconds) * 1e6
        per_hb[sets] = us
        p99 = pct(lat, 99)
        print(
            f"{sets:5d} {target:6d} | {reg_s:9.1f} {2 * added / reg_s:9.0f} | {brokers:7d} "
            f"{len(lat) / seconds:10.0f} "
            f"{pct(lat, 50):7.2f} {p99:7.2f} {max(lat or [0]):7.1f}  ({p99 / base_ms:6.1f}x) | "
            f"{us:12.1f} {100 * (cpu1 - cpu0) / (t1 - t0):9.0f}% {100 * (gen1 - gen0) / (t1 - t0):6.0f}% | "
            f"{lost:4d} {errors:3d} | {watch.changes():14d} {elections:9d}"
            + (
                "  (the leader changed during the window: its CPU is not the leader's alone)"
                if watch.changes() != changes0
                else ""
            ),
            flush=True,
        )
        if os.environ.get("BENCH_SCALE_SECONDS"):  # per-second p99/max, to find stalls
            print(
                "   per second p99/max ms: "
                + " ".join(f"{pct(v, 99):.0f}/{max(v):.0f}" for _, v in sorted(per_sec.items()))
            )
    last = cluster.wait_for_leader()

    def per_broker() -> tuple[float, float]:
        rss = proc_rss_mib(pids[last.name])
        return rss, (rss - rss0s[last.name]) * 1024 * 1024 / max(1, brokers)

    rss1, held = per_broker()
    # the registrations' Raft entries stay in memory until the next log compaction (5,000 entries
    # and 60 s since the last one): the steady state is after it
    from mqctl.localgroup import metadata

    compacted = time.monotonic() + 90

    def log_length() -> int:
        return int(metadata(last.grpc_address).get("log_length", 0))

    log0 = log_length()
    while time.monotonic() < compacted and log_length() >= log0 > 100:
        time.sleep(1)
    rss2, steady = per_broker()
    print(
        f"\nmemory: leader ({last.name}) RSS {rss1:.1f} MiB with {brokers} brokers: {held:.0f} bytes per "
        f"broker beyond its empty process; after the first log compaction {rss2:.1f} MiB, {steady:.0f} "
        "bytes per broker; every node: "
        + ", ".join(f"{name} {proc_rss_mib(p):.1f} MiB" for name, p in pids.items())
    )
    if per_hb:
        small, large = per_hb[min(per_hb)], per_hb[max(per_hb)]
        print(
            f"flat cost: leader CPU per heartbeat at {max(per_hb)} sets / at {min(per_hb)} sets = "
            f"{large / small:.2f}"
        )
    print(f"controller leader changes while registering and beating: {watch.changes()}")
    watch.stop.set()
    return workers


def failover(cluster: Any, workers: list[Worker], singles: int, mass: int) -> None:
    """Masters stop beating; time from each one's last heartbeat to its set's new master applied."""
    from mqctl.client import ControllerClient

    leader = cluster.wait_for_leader()
    table = masters(cluster.addresses)
    by_set = sorted(name for name, (mid, _) in table.items() if mid is not None)
    done: dict[str, float] = {}
    cond = threading.Condition()

    def watch() -> None:
        with ControllerClient(leader.grpc_address, timeout=3600) as c:
            for change in c.watch_role_changes(CLUSTER, ""):
                old = table.get(change.broker_name)
                # a new master, not the master cleared (no SyncStateSet member left to elect)
                if (
                    old is not None
                    and change.master_epoch > old[1]
                    and change.master_broker_id not in (None, old[0])
                ):
                    with cond:
                        done.setdefault(change.broker_name, time.time())
                        cond.notify_all()

    threading.Thread(target=watch, daemon=True).start()
    time.sleep(1)

    def owner(index: int) -> Worker:
        return next(w for w in workers if w.first <= index < w.first + w.count)

    def silence(names: list[str]) -> tuple[dict[str, float], dict[str, float]]:
        """Beyond the lease: each set's new master in the watch, and its last replica's 1008."""
        indexes = {}
        for name in names:
            mid = table[name][0]
            assert mid is not None
            indexes[name] = int(name.split("-")[1]) * 3 + mid - 1
        t0 = time.time()
        for idx in indexes.values():
            owner(idx).ask(f"silence {idx}")
        with cond:
            cond.wait_for(lambda: all(n in done for n in names), timeout=LEASE_MS / 1000 * 3 + 30)
        time.sleep(1)  # the pushes of the last election
        last: dict[str, float] = {}
        pushed: dict[str, float] = {}
        for w in workers:
            r = w.report()
            last.update(r["last_sent"])
            pushed.update(r["pushed"])
        replaced = {
            name: (done[name] - last[str(idx)]) * 1000 - LEASE_MS
            for name, idx in indexes.items()
            if name in done and str(idx) in last
        }
        notified = {}
        for name, idx in indexes.items():
            mates = [str(idx - idx % 3 + k) for k in range(3) if idx - idx % 3 + k != idx]
            times = [pushed.get(m, 0.0) for m in mates]
            if str(idx) in last and min(times) > t0:
                notified[name] = (max(times) - last[str(idx)]) * 1000 - LEASE_MS
        return replaced, notified

    singles_over: list[float] = []
    singles_told: list[float] = []
    for name in by_set[:singles]:
        replaced, notified = silence([name])
        singles_over.extend(replaced.values())
        singles_told.extend(notified.values())
    print(
        f"\n4. failover at scale, the load running ({singles} masters one at a time, lease {LEASE_MS} ms): "
        f"from the last heartbeat, beyond the lease p50 {pct(singles_over, 50):.0f} ms "
        f"p99 {pct(singles_over, 99):.0f} ms ({len(singles_over)}/{singles} replaced); both replicas' "
        f"1008 p50 {pct(singles_told, 50):.0f} ms p99 {pct(singles_told, 99):.0f} ms "
        f"({len(singles_told)}/{singles} sets told)"
    )
    group = by_set[singles : singles + mass]
    over, told = silence(group)
    print(
        f"   mass failure ({len(group)} masters at once): beyond the lease p50 "
        f"{pct(list(over.values()), 50):.0f} ms max {max(over.values() or [float('nan')]):.0f} ms "
        f"({len(over)}/{len(group)} replaced); both replicas' 1008 max "
        f"{max(told.values() or [float('nan')]):.0f} ms ({len(told)}/{len(group)} sets told)"
    )


def controller_kill_under_load(cluster: Any) -> None:
    """kill -9 of the controller leader with the fleet beating: the brokers follow the new leader,
    which waits one lease before it declares anybody dead; no broker set may get a new master."""
    leader = cluster.wait_for_leader()
    before = masters(leader.grpc_address)
    t0 = time.monotonic()
    leader.kill()
    new = cluster.wait_for_leader(exclude=leader)
    elected = time.monotonic() - t0
    time.sleep(LEASE_MS / 1000 + 5)  # the new leader's grace period, then its first scans
    after = masters(new.grpc_address)
    elections = sum(1 for name in after if before.get(name, (None, 0))[1] != after[name][1])
    print(
        f"\n   controller leader kill -9 with the fleet beating: new leader after {elected:.2f} s, "
        f"broker elections in the next lease + 5 s: {elections} (expected 0)"
    )
    leader.start()


def grpc_capacity(cluster: Any, brokers: int, window: float, configs: list[int]) -> None:
    """Brokers beating over gRPC (grpc.aio worker processes, pre-encoded), one window per entry of
    ``configs``: N > 0 HeartbeatStream streams, 0 unary Heartbeat calls (the baseline)."""
    leader = cluster.wait_for_leader()
    assert leader.proc is not None
    pid = leader.proc.pid
    procs = 2
    per = brokers // procs
    print(f"\n5. capacity over gRPC: {brokers} brokers beating once a second, {procs} generator processes")
    baseline = None
    for asked in configs:
        # the streams split between the generators, at least one each (0: unary calls)
        split = [max(1, asked // procs + (i < asked % procs)) if asked else 0 for i in range(procs)]
        streams = sum(split)
        gens = [
            subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--grpc-worker",
                    leader.grpc_address,
                    str(i * per),
                    str(per),
                    str(window),
                    str(split[i]),
                ],
                stdout=subprocess.PIPE,
                text=True,
            )
            for i in range(procs)
        ]
        time.sleep(3)
        cpu0 = proc_cpu_seconds(pid)
        outs = [json.loads(g.communicate(timeout=window + 120)[0].strip().splitlines()[-1]) for g in gens]
        cpu1 = proc_cpu_seconds(pid)
        lat = [x for o in outs for x in o["latencies"]]
        seconds = max(o["seconds"] for o in outs)
        sent = sum(o["sent"] for o in outs)
        us = 1e6 * (cpu1 - cpu0) / max(1, len(lat))
        if streams:
            messages = sum(o["messages"] for o in outs)
            how = f"{streams} HeartbeatStream streams, {len(lat) / max(1, messages):.1f} beats a message"
        else:
            how = "unary Heartbeat calls (the baseline), a connection per 100 brokers"
            baseline = us
        print(
            f"   {how}: sent {sent / seconds:.0f}/s, answered {len(lat)} of {sent}, "
            f"p50 {pct(lat, 50):.2f} ms p99 {pct(lat, 99):.2f} ms max {max(lat, default=math.nan):.1f} ms, "
            f"errors {sum(o['errors'] for o in outs)}, leader CPU {100 * (cpu1 - cpu0) / seconds:.0f}% "
            f"({us:.0f} us a beat{f', {us / baseline:.2f}x unary' if baseline and streams else ''}), "
            f"generators' CPU {sum(o['cpu'] for o in outs) / seconds * 100:.0f}%, their 10 ms ticks late "
            f"p50 {pct([x for o in outs for x in o['late']], 50):.2f} ms "
            f"p99 {pct([x for o in outs for x in o['late']], 99):.2f} ms (the machine's load)"
        )


async def grpc_worker_main(address: str, first: int, count: int, window: float, streams: int) -> None:
    """``count`` brokers on ``streams`` HeartbeatStream streams, one channel (HTTP/2 connection) each;
    every 10 ms, the beats due on a stream go in one message, with those that came due while its last
    write was going (HeartbeatStreamRequest is the beats' encodings, each behind its field tag and
    length, so the message is their concatenation). ``streams`` 0: a unary Heartbeat call per beat,
    a channel per 100 brokers."""
    import grpc

    from mqctl.v1 import controller_pb2 as pb

    def field(data: bytes) -> bytes:
        n, out = len(data), bytearray(b"\x0a")
        while n >= 0x80:
            out.append(n & 0x7F | 0x80)
            n >>= 7
        out.append(n)
        return bytes(out) + data

    beats = [
        pb.HeartbeatRequest(
            cluster_name=CLUSTER,
            broker_name=f"grpc-{(first + i) // 3:05d}",
            broker_id=(first + i) % 3 + 1,
            broker_addr=f"127.0.0.1:{30000 + i % 30000}",
            epoch=1,
            max_offset=1000,
            heartbeat_timeout_mills=LEASE_MS,
        ).SerializeToString()
        for i in range(count)
    ]
    channels = [
        grpc.aio.insecure_channel(address, options=[("grpc.use_local_subchannel_pool", 1)])
        for _ in range(streams or max(1, count // 100))
    ]
    latencies: list[float] = []
    errors = sent_beats = messages = 0
    decode = pb.HeartbeatStreamResponse.FromString
    calls = [ch.stream_stream("/mqctl.v1.Controller/HeartbeatStream")() for ch in channels] if streams else []
    unary = [ch.unary_unary("/mqctl.v1.Controller/Heartbeat") for ch in channels]  # bytes in, bytes out
    sent: list[list[tuple[float, int]]] = [[] for _ in calls]  # per stream: (sent at, beats), in order
    tasks: set[asyncio.Task[None]] = set()

    async def read(k: int) -> None:
        nonlocal errors
        try:
            async for raw in calls[k]:
                at, n = sent[k].pop(0)
                ms = (time.monotonic() - at) * 1000
                ok = sum(1 for a in decode(raw).answers if a.code == 0)
                latencies.extend([ms] * ok)
                errors += n - ok
        except grpc.RpcError:
            errors += sum(n for _, n in sent[k])

    async def beat(k: int) -> None:
        nonlocal errors
        at = time.monotonic()
        try:
            await unary[k % len(unary)](beats[k], timeout=10)
            latencies.append((time.monotonic() - at) * 1000)
        except grpc.RpcError:
            errors += 1

    async def write(k: int) -> None:
        # one write at a time on a stream (grpc.aio); the beats that came due meanwhile go together
        while True:
            frames = [await queues[k].get()]
            while not queues[k].empty():
                frames.append(queues[k].get_nowait())
            if frames[-1] is None:
                frames.pop()
                if frames:
                    await send(k, frames)
                return
            await send(k, frames)

    async def send(k: int, frames: list[bytes]) -> None:
        nonlocal messages
        sent[k].append((time.monotonic(), len(frames)))
        messages += 1
        try:
            await calls[k].write(b"".join(frames))
        except grpc.RpcError:
            pass  # its reader counts the beats not answered

    queues: list[asyncio.Queue[bytes | None]] = [asyncio.Queue() for _ in calls]
    readers = [asyncio.create_task(read(k)) for k in range(len(calls))]
    writers = [asyncio.create_task(write(k)) for k in range(len(calls))]
    framed = [field(b) for b in beats] if streams else []
    cpu0 = proc_cpu_seconds(os.getpid())
    started = time.monotonic()
    tick = 0.01
    late: list[float] = []  # ms each tick woke up late: what the machine's load alone adds
    while (elapsed := time.monotonic() - started) < window:
        # as many beats as are due by now (a late tick catches up): count a second, evenly spread
        for _ in range(int(elapsed * count) - sent_beats):
            i = sent_beats % count
            sent_beats += 1
            if streams:
                queues[i % streams].put_nowait(framed[i])
            else:
                task = asyncio.create_task(beat(i))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
        wake = started + elapsed - elapsed % tick + tick
        await asyncio.sleep(wake - time.monotonic())
        late.append((time.monotonic() - wake) * 1000)
    seconds = time.monotonic() - started
    for q in queues:
        q.put_nowait(None)
    await asyncio.gather(*writers)
    for call in calls:
        await call.done_writing()
    await asyncio.gather(*readers, *tasks)
    print(
        json.dumps(
            {
                "latencies": latencies,
                "errors": errors,
                "seconds": seconds,
                "sent": sent_beats,
                "messages": messages,
                "cpu": proc_cpu_seconds(os.getpid()) - cpu0,
                "late": late,
            }
        ),
        flush=True,
    )
    for ch in channels:
        await ch.close()


def leader_kills(cluster: Any, kills: int) -> None:
    """A client writing as fast as it can (ApplyBrokerId, RegisterBroker, ElectMaster, AlterSyncStateSet);
    the leader killed with SIGKILL: from the kill to a new leader, and to the client's next served write."""
    from harness import Gate

    from mqctl.client import ControllerClient
    from mqctl.errors import ControllerError
    from mqctl.localgroup import metadata

    elected_ms: list[float] = []
    served_ms: list[float] = []
    with ControllerClient(cluster.addresses, timeout=30) as client:
        stop = threading.Event()
        gate = Gate()  # the state hashes are compared with no write under way
        last_ok = [0.0]
        n = [0]

        def write_loop() -> None:
            while not stop.is_set():
                gate.pass_through()
                n[0] += 1
                name = f"kill-{n[0]}"
                address = f"127.0.0.1:{40000 + n[0] % 20000}"
                try:
                    client.apply_broker_id(CLUSTER, name, 1, f"{address};1")
                    last_ok[0] = time.monotonic()
                    epoch = client.register_broker(CLUSTER, name, 1, address).broker_epoch
                    last_ok[0] = time.monotonic()
                    elected = client.elect_master(CLUSTER, name, 1, broker_epoch=epoch)
                    last_ok[0] = time.monotonic()
                    client.alter_sync_state_set(
                        name,
                        1,
                        elected.master_epoch or 0,
                        [1],
                        elected.sync_state_set_epoch or 0,
                        broker_epoch=epoch,
                    )
                    last_ok[0] = time.monotonic()
                except ControllerError:
                    pass
                except Exception as exc:  # a bug in the bench: say it, do not hide it
                    print(f"writer: {exc!r}", file=sys.stderr)

        writer = threading.Thread(target=write_loop, daemon=True)
        writer.start()
        try:
            for _ in range(kills):
                leader = cluster.wait_for_leader()
                others = [node for node in cluster.nodes if node is not leader]
                time.sleep(0.5)
                t0 = time.monotonic()
                leader.kill()
                elected = None
                served = None
                while time.monotonic() - t0 < 30 and (elected is None or served is None):
                    if elected is None:
                        for node in others:
                            try:
                                if metadata(node.grpc_address, timeout=0.2).get("is_leader"):
                                    elected = time.monotonic()
                            except Exception:
                                pass
                    if served is None and last_ok[0] > t0:
                        served = last_ok[0]
                    time.sleep(0.005)
                if elected is not None:
                    elected_ms.append((elected - t0) * 1000)
                if served is not None:
                    served_ms.append((served - t0) * 1000)
                leader.start()
                with gate.held():
                    cluster.wait_for_same_hash(120)
        finally:
            stop.set()
            writer.join(30)
    print(
        f"\n6. controller leader kill -9 under write load ({kills} kills): a new leader after p50 "
        f"{pct(elected_ms, 50):.0f} ms p99 {pct(elected_ms, 99):.0f} ms; writes served again after p50 "
        f"{pct(served_ms, 50):.0f} ms p99 {pct(served_ms, 99):.0f} ms ({len(served_ms)}/{kills}); "
        f"the client's part (served - elected) p50 "
        f"{pct([s - e for s, e in zip(served_ms, elected_ms, strict=False)], 50):.0f} ms"
    )


def paused_leader(cluster: Any, pauses: int) -> None:
    """SIGSTOP of the leader: a long-lived client's writes served again after ..., then SIGCONT."""
    import signal

    from mqctl.client import ControllerClient
    from mqctl.errors import ControllerError

    again: list[float] = []
    with ControllerClient(cluster.addresses, timeout=30) as client:
        for k in range(pauses):
            leader = cluster.wait_for_leader()
            # the client knows the leader
            client.apply_broker_id(CLUSTER, f"pause-{k}", 1, "127.0.0.1:45000;1")
            t0 = time.monotonic()
            leader.proc.send_signal(signal.SIGSTOP)
            try:
                while time.monotonic() - t0 < 30:
                    try:
                        client.apply_broker_id(CLUSTER, f"pause-{k}-after", 1, "127.0.0.1:45001;1")
                        again.append((time.monotonic() - t0) * 1000)
                        break
                    except ControllerError:
                        continue
            finally:
                leader.proc.send_signal(signal.SIGCONT)
            cluster.wait_for_same_hash(120)
    print(
        f"\n7. controller leader paused (SIGSTOP, {pauses} times): a long-lived client's write served "
        "after "
        f"p50 {pct(again, 50):.0f} ms p99 {pct(again, 99):.0f} ms"
    )


def write_throughput(cluster: Any, clients: int, seconds: float) -> None:
    """`clients` threads with a client each, writing as fast as they can; a GetMetadata baseline."""
    from mqctl.client import ControllerClient

    leader = cluster.wait_for_leader()
    with ControllerClient(leader.grpc_address, timeout=30) as c:
        base: list[float] = []
        for _ in range(200):
            t = time.perf_counter()
            c.get_metadata(leader.grpc_address)
            base.append((time.perf_counter() - t) * 1000)
    lat: list[float] = []
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def run(k: int) -> None:
        mine: list[float] = []
        with ControllerClient(cluster.addresses, timeout=30) as client:
            i = 0
            while time.monotonic() < stop:
                i += 1
                t = time.perf_counter()
                client.apply_broker_id(CLUSTER, f"tp-{k}-{i}", 1, "127.0.0.1:46000;1")
                mine.append((time.perf_counter() - t) * 1000)
        with lock:
            lat.extend(mine)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    b = pct(base, 50)
    print(
        f"\n8. write throughput, {clients} concurrent clients (ApplyBrokerId): {len(lat) / seconds:.0f} "
        f"writes/s, p50 {pct(lat, 50):.1f} ms ({pct(lat, 50) / b:.1f}x) p99 {pct(lat, 99):.1f} ms "
        f"({pct(lat, 99) / b:.1f}x) "
        f"against a GetMetadata round trip of {b:.2f} ms"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--grpc-worker", nargs=5, help=argparse.SUPPRESS)
    ap.add_argument(
        "--quick",
        action="store_true",
        help="10 s windows, fewer failures (5 single ones: each waits a lease), kills and "
        "pauses: under 5 minutes",
    )
    ap.add_argument("--sets", default="100,1000,3334")
    ap.add_argument("--window", type=float, default=60.0)
    ap.add_argument("--procs", type=int, default=2, help="generator processes per step")
    ap.add_argument("--grpc-brokers", type=int, default=3000)
    ap.add_argument(
        "--grpc-streams",
        default="0,30,4",
        help="one window per entry: 0 unary Heartbeat calls (the baseline, first for the "
        "ratios), N HeartbeatStream streams carry the gRPC brokers' beats (30: one beat a "
        "message)",
    )
    ap.add_argument(
        "--only", default="", help="comma-separated sections: capacity,failover,grpc,kills,pause,writes"
    )
    args = ap.parse_args()
    if args.grpc_worker:
        try:
            import uvloop

            uvloop.install()
        except ImportError:
            pass
        g = args.grpc_worker
        asyncio.run(grpc_worker_main(g[0], int(g[1]), int(g[2]), float(g[3]), int(g[4])))
        return

    from mqctl.localgroup import LocalCluster

    everything = {"capacity", "failover", "grpc", "kills", "pause", "writes"}
    only = set(args.only.split(",")) if args.only else everything
    window = 10.0 if args.quick else args.window
    print(
        f"# bench_scale {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, {platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}, load average "
        f"{os.getloadavg()[0]:.1f} at the start"
    )
    started = time.monotonic()
    base = tempfile.mkdtemp(prefix="mqctl-scale-")
    cluster = LocalCluster(
        os.path.join(base, "remoting"),
        size=3,
        remoting=True,
        extra_args=["--heartbeat-timeout", str(LEASE_MS), "--scan-interval", "5000"],
    )
    with cluster:
        cluster.start()
        leader, _ = leader_state(cluster)
        workers: list[Worker] = []
        try:
            if "capacity" in only:
                workers = capacity(args, cluster, leader, window)
            if "failover" in only and workers:
                failover(cluster, workers, 5 if args.quick else 20, 30 if args.quick else 100)
                controller_kill_under_load(cluster)
        finally:
            for w in workers:
                w.stop()
    cluster = LocalCluster(
        os.path.join(base, "grpc"),
        size=3,
        extra_args=["--heartbeat-timeout", str(LEASE_MS), "--scan-interval", "5000"],
    )
    with cluster:
        cluster.start()
        if "grpc" in only:
            grpc_capacity(cluster, args.grpc_brokers, window, [int(x) for x in args.grpc_streams.split(",")])
        if "kills" in only:
            leader_kills(cluster, 5 if args.quick else 25)
        if "pause" in only:
            paused_leader(cluster, 3 if args.quick else 10)
        if "writes" in only:
            write_throughput(cluster, 64, 5 if args.quick else 15)
    print(
        f"\n(run took {time.monotonic() - started:.0f} s; load average {os.getloadavg()[0]:.1f} at the end)"
    )


if __name__ == "__main__":
    main()
