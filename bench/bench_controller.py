"""Controller benchmark: real `mqctl serve` clusters on loopback, figures (not assertions).

    .venv/bin/python bench/bench_controller.py [--quick] [--nodes 1,3] [--clients 4]

For each cluster size it starts a LocalCluster (one process per node, in a temporary directory)
and prints:

* a baseline: the GetMetadata round trip through ControllerClient (no Raft, answered locally);
* the disk's fdatasync latency: every write below is durable (fdatasync'd on a majority) before
  it is acknowledged (docs/raft-safety.md), so this is part of each write's latency;
* ApplyBrokerId and AlterSyncStateSet write latency (p50/p99) and throughput, one client and
  N concurrent clients (one ControllerClient and one thread each);
* heartbeat throughput from a few threads;
* the time from a master broker's last heartbeat to every replica's role watch seeing the new
  master (the lease is part of it; the overhead beyond the lease is shown);
* for 3+ nodes, the time from SIGKILL of the controller leader to a new leader serving a write.

Ratios are against the baseline measured in the same process, so they travel between machines
better than the absolute figures. Every loop is bounded (a count and a deadline).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from mqctl.client import ControllerClient, RoleChange
from mqctl.errors import ControllerError
from mqctl.localgroup import LocalCluster, metadata

CLUSTER = "bench-cluster"
LEASE_MS = 1000  # the brokers' heartbeat_timeout_mills and the servers' --heartbeat-timeout
BEAT_PERIOD = LEASE_MS / 1000 / 5  # a broker beats five times per lease
STEADY_LEASE_MS = 5000  # lease of the brokers that only need to stay alive during a phase
PHASE_LIMIT = 120.0  # seconds; a bound on each measured loop (quick mode ends far sooner)
RAFT_ELECTION_TIMEOUT = "150-350 ms"  # raftMinTimeout/raftMaxTimeout of mqctl/controller/raftlog.py


@dataclass
class Profile:
    get_metadata: int
    writes_seq: int
    writes_per_client: int
    heartbeat_seconds: float
    failovers: int
    leader_kills: int


QUICK = Profile(
    get_metadata=200, writes_seq=200, writes_per_client=60, heartbeat_seconds=1.5, failovers=1, leader_kills=1
)
FULL = Profile(
    get_metadata=500,
    writes_seq=500,
    writes_per_client=200,
    heartbeat_seconds=5.0,
    failovers=3,
    leader_kills=3,
)


# ------------------------------------------------------------------------------------------------
# Figures


@dataclass
class Sample:
    """Latencies (seconds) of one measured operation, and the wall time they took together."""

    latencies: list[float] = field(default_factory=list)
    wall: float = 0.0
    errors: int = 0

    def pct(self, p: float) -> float:
        """Nearest-rank percentile, in milliseconds."""
        if not self.latencies:
            return float("nan")
        ordered = sorted(self.latencies)
        rank = max(1, min(len(ordered), round(p / 100 * len(ordered) + 0.5)))
        return ordered[rank - 1] * 1000

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.wall if self.wall > 0 else float("nan")


def timed(op: Callable[[int], object], count: int, deadline: float) -> Sample:
    """Run op(0..count-1) in this thread, timing each call; stop early at `deadline`."""
    sample = Sample()
    start = time.perf_counter()
    for i in range(count):
        if time.monotonic() > deadline:
            break
        t = time.perf_counter()
        try:
            op(i)
        except ControllerError:
            sample.errors += 1
            continue
        sample.latencies.append(time.perf_counter() - t)
    sample.wall = time.perf_counter() - start
    return sample


def concurrent(ops: list[Callable[[int], object]], count: int, deadline: float) -> Sample:
    """Each op in its own thread, `count` calls each, started together; wall = first start to last end."""
    samples = [Sample() for _ in ops]
    barrier = threading.Barrier(len(ops) + 1)

    def run(k: int) -> None:
        barrier.wait()
        samples[k] = timed(ops[k], count, deadline)

    threads = [threading.Thread(target=run, args=(k,), daemon=True) for k in range(len(ops))]
    for t in threads:
        t.start()
    barrier.wait()
    start = time.perf_counter()
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()) + 5)
    total = Sample(wall=time.perf_counter() - start)
    for s in samples:
        total.latencies += s.latencies
        total.errors += s.errors
    return total


# ------------------------------------------------------------------------------------------------
# Brokers


class Beater:
    """Heartbeats for some brokers every `period` seconds, as live brokers would.

    It remembers when each broker's last heartbeat was sent, so a silenced broker's lease can be
    measured from its real last heartbeat.
    """

    def __init__(self, client: ControllerClient, period: float) -> None:
        self.client = client
        self.period = period
        self._brokers: dict[tuple[str, int], dict[str, object]] = {}
        self._last_sent: dict[tuple[str, int], float] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def beat(self, name: str, broker_id: int, address: str, **fields: object) -> None:
        with self._lock:
            self._brokers[(name, broker_id)] = dict(address=address, **fields)
        self._send(name, broker_id)

    def silence(self, name: str, broker_id: int) -> float | None:
        """Stop beating for a broker; returns the monotonic time its last heartbeat was sent."""
        with self._lock:
            self._brokers.pop((name, broker_id), None)
            return self._last_sent.get((name, broker_id))

    def silence_set(self, name: str) -> None:
        with self._lock:
            for key in [k for k in self._brokers if k[0] == name]:
                del self._brokers[key]

    def _send(self, name: str, broker_id: int) -> None:
        with self._lock:  # no beat starts after silence() returns
            fields = dict(self._brokers.get((name, broker_id)) or {})
            if not fields:
                return
            self._last_sent[(name, broker_id)] = time.monotonic()
        address = str(fields.pop("address"))
        try:
            self.client.heartbeat(CLUSTER, address, name, broker_id, **fields)  # type: ignore[arg-type]
        except ControllerError:
            pass  # a controller failover in progress; the next beat retries

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            with self._lock:
                keys = list(self._brokers)
            for name, broker_id in keys:
                self._send(name, broker_id)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


def register(client: ControllerClient, name: str, address: str, lease_ms: int, **kw: object) -> int:
    """A broker's registration sequence: next id, apply, register. Returns the id."""
    nid = client.get_next_broker_id(CLUSTER, name).next_broker_id
    client.apply_broker_id(CLUSTER, name, nid, f"{address};1700000000000")
    client.register_broker(CLUSTER, name, nid, address, heartbeat_timeout_mills=lease_ms, **kw)  # type: ignore[arg-type]
    return nid


def broker_set(
    client: ControllerClient,
    beater: Beater,
    name: str,
    port: int,
    count: int,
    lease_ms: int,
    offsets: tuple[int, ...] | None = None,
) -> list[str]:
    """Register `count` live brokers in `name`, beating; elect broker 1. Returns their addresses."""
    addresses = [f"127.0.0.1:{port + i}" for i in range(count)]
    for i, address in enumerate(addresses):
        offset = offsets[i] if offsets else 100
        nid = register(client, name, address, lease_ms, epoch=1, max_offset=offset)
        beater.beat(name, nid, address, epoch=1, max_offset=offset, heartbeat_timeout_mills=lease_ms)
    elected = client.elect_master(CLUSTER, name, 1)
    if elected.master_broker_id != 1:
        raise RuntimeError(f"{name}: expected broker 1 elected, got {elected.master_broker_id}")
    return addresses


def heartbeat_op(client: ControllerClient, address: str) -> Callable[[int], object]:
    """One heartbeat of broker 1 of bench-alter-seq (registered and alive)."""
    return lambda _i: client.heartbeat(
        CLUSTER,
        address,
        "bench-alter-seq",
        1,
        epoch=1,
        max_offset=100,
        heartbeat_timeout_mills=STEADY_LEASE_MS,
    )


class Toggler:
    """AlterSyncStateSet on one broker set, master 1: {1} -> {1,2} -> {1} ..., with the right epochs."""

    def __init__(self, client: ControllerClient, name: str) -> None:
        self.client = client
        self.name = name
        info = client.get_replica_info(name)
        self.master_epoch = info.master_epoch
        self.members = tuple(info.sync_state_set)
        self.epoch = int(info.sync_state_set_epoch or 0)

    def __call__(self, _i: int) -> None:
        new = (1, 2) if self.members == (1,) else (1,)
        result = self.client.alter_sync_state_set(self.name, 1, self.master_epoch, new, self.epoch)
        self.members, self.epoch = new, result.new_sync_state_set_epoch


# ------------------------------------------------------------------------------------------------
# Report


class Table:
    """One cluster size: setup lines, a latency table, timing lines, ratio lines."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.setup: list[str] = []
        self.rows: list[tuple[str, ...]] = []
        self.timings: list[str] = []
        self.notes: list[str] = []
        self.results: dict[str, Sample] = {}

    def sample(self, label: str, s: Sample, base_ms: float | None, what: str = "ops/s") -> None:
        ratio = f"{s.pct(50) / base_ms:.1f}x" if base_ms else "-"
        err = f"  ({s.errors} errors)" if s.errors else ""
        self.rows.append(
            (
                label,
                f"{s.pct(50):.2f}",
                f"{s.pct(99):.2f}",
                f"{s.rate:.0f} {what}",
                str(len(s.latencies)),
                ratio + err,
            )
        )

    def failed(self, label: str, exc: BaseException) -> None:
        self.rows.append((label, "failed", "", "", "", f"{type(exc).__name__}: {exc}"[:100]))

    def timing(self, label: str, ms: float, note: str) -> None:
        self.timings.append(f"{label}: {ms:.0f} ms ({note})")

    def timing_failed(self, label: str, exc: BaseException) -> None:
        self.timings.append(f"{label}: failed, {type(exc).__name__}: {exc}"[:160])

    def print(self) -> None:
        head = ("measure", "p50 ms", "p99 ms", "throughput", "n", "p50/GetMetadata")
        widths = [max(len(r[i]) for r in [head, *self.rows]) for i in range(len(head))]
        print(f"\n== {self.title} ==")
        for line in self.setup:
            print(line)
        print()
        for k, row in enumerate([head, *self.rows]):
            cells = [row[0].ljust(widths[0])]
            cells += [c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)]
            print("  ".join(cells).rstrip())
            if k == 0:
                print("-" * (sum(widths) + 2 * (len(widths) - 1)))
        print()
        for line in self.timings + self.notes:
            print(line)
        sys.stdout.flush()


# ------------------------------------------------------------------------------------------------
# One cluster size


def bench_size(size: int, base_dir: str, prof: Profile, clients: int, port0: int) -> Table:
    table = Table(f"{size} node{'s' if size > 1 else ''}")

    def deadline() -> float:
        return time.monotonic() + PHASE_LIMIT

    # LocalCluster passes --heartbeat-timeout 1500 first; a repeated option's last value wins.
    cluster_dir = os.path.join(base_dir, f"n{size}")
    os.makedirs(cluster_dir)
    cluster = LocalCluster(cluster_dir, size=size, extra_args=["--heartbeat-timeout", str(LEASE_MS)])
    with cluster:
        t = time.monotonic()
        leader = cluster.start().wait_for_leader()
        table.setup.append(f"cluster up with a leader in {(time.monotonic() - t) * 1000:.0f} ms")
        addr = cluster.addresses
        with ControllerClient(addr, timeout=30) as client:
            lease = client.get_config().config.get("heartbeatTimeoutMillis")
            table.setup.append(
                f"server heartbeatTimeoutMillis = {lease} ms, broker heartbeat_timeout_mills "
                f"= {LEASE_MS} ms, heartbeat period {BEAT_PERIOD * 1000:.0f} ms"
            )
            client.get_metadata(address=leader.grpc_address)  # warm the channel
            base = timed(
                lambda _i: client.get_metadata(address=leader.grpc_address), prof.get_metadata, deadline()
            )
            base_ms = base.pct(50)
            table.sample("GetMetadata round trip (baseline)", base, None)

            # ApplyBrokerId: each call creates a new broker set (id 1), a full Raft write: a durable
            # log entry. (Re-applying the same id with the same check code, a broker's retry path,
            # is answered by the leader without a log entry.) Call -1 warms the channel.
            def apply_op(c: ControllerClient, name: str) -> Callable[[int], object]:
                return lambda i: c.apply_broker_id(CLUSTER, f"{name}-{i}", 1, "127.0.0.1:30000;1700000000000")

            results = table.results
            try:
                op = apply_op(client, "bench-apply-seq")
                op(-1)
                results["apply1"] = s = timed(op, prof.writes_seq, deadline())
                table.sample("ApplyBrokerId, 1 client", s, base_ms)
            except Exception as exc:
                table.failed("ApplyBrokerId, 1 client", exc)
            extra = [ControllerClient(addr, timeout=30) for _ in range(clients)]
            try:
                ops = [apply_op(c, f"bench-apply-{k}") for k, c in enumerate(extra)]
                for o in ops:
                    o(-1)
                results["applyN"] = s = concurrent(ops, prof.writes_per_client, deadline())
                table.sample(f"ApplyBrokerId, {clients} clients", s, base_ms)
            except Exception as exc:
                table.failed(f"ApplyBrokerId, {clients} clients", exc)

            beater = Beater(client, BEAT_PERIOD)
            try:
                try:
                    broker_set(client, beater, "bench-alter-seq", port0, 2, STEADY_LEASE_MS)
                    s = timed(Toggler(client, "bench-alter-seq"), prof.writes_seq, deadline())
                    results["alter1"] = s
                    table.sample("AlterSyncStateSet, 1 client", s, base_ms)
                except Exception as exc:
                    table.failed("AlterSyncStateSet, 1 client", exc)
                try:
                    for k in range(clients):
                        broker_set(
                            client, beater, f"bench-alter-{k}", port0 + 10 * (k + 1), 2, STEADY_LEASE_MS
                        )
                    togglers = [Toggler(c, f"bench-alter-{k}") for k, c in enumerate(extra)]
                    results["alterN"] = s = concurrent(list(togglers), prof.writes_per_client, deadline())
                    table.sample(f"AlterSyncStateSet, {clients} clients", s, base_ms)
                except Exception as exc:
                    table.failed(f"AlterSyncStateSet, {clients} clients", exc)

                # Heartbeats: each thread beats for one registered broker as fast as it can.
                try:
                    hb_threads = min(4, clients)
                    hb_end = time.monotonic() + prof.heartbeat_seconds
                    hb_ops = [heartbeat_op(c, f"127.0.0.1:{port0}") for c in extra[:hb_threads]]
                    s = concurrent(hb_ops, 10**6, hb_end)
                    table.sample(f"Heartbeat, {hb_threads} threads", s, base_ms, what="beats/s")
                except Exception as exc:
                    table.failed("Heartbeat", exc)
                for k in range(clients):
                    beater.silence_set(f"bench-alter-{k}")
                beater.silence_set("bench-alter-seq")

                for k in range(prof.failovers):
                    label = f"master failover #{k + 1}, last heartbeat -> both replicas see the new master"
                    try:
                        total, first, new = master_failover(
                            client, beater, addr, f"bench-failover-{k}", port0 + 500 + 10 * k
                        )
                        table.timing(
                            label,
                            total,
                            f"= lease {LEASE_MS} ms + {total - LEASE_MS:.0f} ms; "
                            f"first replica at {first:.0f} ms; new master is broker {new}",
                        )
                    except Exception as exc:
                        table.timing_failed(label, exc)
            finally:
                beater.stop()
                for c in extra:
                    c.close()

            if size >= 3:
                for k in range(prof.leader_kills):
                    label = f"leader SIGKILL #{k + 1} -> new leader serves a write"
                    try:
                        seen, served = leader_kill(cluster, addr)
                        table.timing(
                            label,
                            served,
                            f"a node reports is_leader at {seen:.0f} ms; "
                            f"Raft election timeout {RAFT_ELECTION_TIMEOUT}",
                        )
                        if k + 1 < prof.leader_kills:
                            for node in cluster.nodes:
                                if not node.alive():
                                    node.start()
                            cluster.wait_for_same_hash(30)
                    except Exception as exc:
                        table.timing_failed(label, exc)
        if "apply1" in results:
            table.notes.append(
                f"ApplyBrokerId p50 = {results['apply1'].pct(50):.2f} ms "
                f"({results['apply1'].pct(50) / base_ms:.1f}x a GetMetadata round trip)"
            )
        if "alter1" in results:
            table.notes.append(
                f"AlterSyncStateSet p50 = {results['alter1'].pct(50):.2f} ms "
                f"({results['alter1'].pct(50) / base_ms:.1f}x a GetMetadata round trip)"
            )
        if "apply1" in results and "applyN" in results:
            table.notes.append(
                f"ApplyBrokerId throughput with {clients} clients = "
                f"{results['applyN'].rate / results['apply1'].rate:.1f}x one client"
            )
    return table


def master_failover(
    client: ControllerClient, beater: Beater, addresses: str, name: str, port: int
) -> tuple[float, float, int | None]:
    """Brokers 1..3, master 1, SyncStateSet {1,2,3}; brokers 2 and 3 watch; broker 1 goes silent.

    Returns (ms until every watcher saw a new master, ms until the first did, the new master id),
    measured from the moment the master's last heartbeat was sent.
    """
    broker_set(client, beater, name, port, 3, LEASE_MS, offsets=(300, 100, 200))
    info = client.get_replica_info(name)
    client.alter_sync_state_set(name, 1, info.master_epoch, [1, 2, 3], int(info.sync_state_set_epoch or 0))
    ready = threading.Barrier(3)
    seen: dict[int, tuple[float, RoleChange]] = {}
    watchers = [ControllerClient(addresses, timeout=30) for _ in range(2)]
    watches = [c.watch_role_changes(CLUSTER, name) for c in watchers]

    def watch(k: int) -> None:
        first = True
        try:
            for change in watches[k]:
                if first:  # the current role comes first
                    first = False
                    ready.wait(15)
                if change.master_broker_id not in (None, 1):
                    seen[k] = (time.monotonic(), change)
                    return
        except (ControllerError, threading.BrokenBarrierError):
            pass

    threads = [threading.Thread(target=watch, args=(k,), daemon=True) for k in range(2)]
    try:
        for t in threads:
            t.start()
        ready.wait(15)
        time.sleep(2 * BEAT_PERIOD)  # steady state: a few more beats for everyone
        last = beater.silence(name, 1)
        if last is None:
            raise RuntimeError("the master never sent a heartbeat")
        for t in threads:
            t.join(LEASE_MS / 1000 + 15)
        if len(seen) < 2:
            raise TimeoutError(f"only {len(seen)} of 2 watchers saw a new master")
        times = sorted(at for at, _ in seen.values())
        return (times[-1] - last) * 1000, (times[0] - last) * 1000, seen[0][1].master_broker_id
    finally:
        beater.silence_set(name)
        for w in watches:
            w.close()
        for c in watchers:
            c.close()


def leader_kill(cluster: LocalCluster, addresses: str) -> tuple[float, float]:
    """SIGKILL the leader; returns (ms until another node reports is_leader, ms until a write succeeds)."""
    leader = cluster.wait_for_leader()
    others = [n for n in cluster.nodes if n is not leader and n.alive()]
    with ControllerClient(addresses, timeout=30) as client:

        def write() -> None:
            client.apply_broker_id(CLUSTER, "bench-kill", 1, "127.0.0.1:31000;1700000000000")

        write()  # the client knows the leader, as a client in steady state does
        found: list[float] = []
        stop = threading.Event()

        def poll() -> None:
            while not stop.is_set():
                for node in others:
                    try:
                        if metadata(node.grpc_address, timeout=0.5).get("is_leader"):
                            found.append(time.monotonic())
                            return
                    except Exception:
                        pass
                time.sleep(0.005)

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()  # polls the other nodes only: none of them is the leader yet
        t0 = time.monotonic()
        leader.kill()
        end = t0 + 30
        served = None
        while time.monotonic() < end:
            try:
                write()
                served = time.monotonic()
                break
            except ControllerError:
                continue  # outcome unknown or no leader yet: the write is idempotent, send it again
        poller.join(10)  # the poll may lag the write by a poll interval; let it finish
        stop.set()
        if served is None:
            raise TimeoutError("no write served within 30 s of the kill")
        if not found:
            raise TimeoutError("no other node reported is_leader within 10 s of the write")
        seen = found[0]
        return (seen - t0) * 1000, (served - t0) * 1000


# ------------------------------------------------------------------------------------------------


def print_summary(tables: list[Table], clients: int) -> None:
    """p50 and throughput of the writes side by side, one column per cluster size."""
    rows = [
        ("apply1", "ApplyBrokerId, 1 client"),
        ("applyN", f"ApplyBrokerId, {clients} clients"),
        ("alter1", "AlterSyncStateSet, 1 client"),
        ("alterN", f"AlterSyncStateSet, {clients} clients"),
    ]
    head = ["p50 ms / ops/s"] + [t.title for t in tables]
    lines = [head]
    for key, label in rows:
        cells = [label]
        for t in tables:
            s = t.results.get(key)
            cells.append(f"{s.pct(50):.2f} / {s.rate:.0f}" if s else "-")
        lines.append(cells)
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    print("\n== summary ==")
    for line in lines:
        print(
            "  ".join(
                [line[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(line[1:], widths[1:], strict=True)]
            )
        )


def fdatasync_ms(directory: str, count: int = 200) -> float:
    """p50 of append + fdatasync of a journal-sized record in `directory` (the disk's share of a write)."""
    path = os.path.join(directory, "fsync-probe")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    sample = Sample()
    try:
        for _ in range(count):
            t = time.perf_counter()
            os.write(fd, b"x" * 300)
            os.fdatasync(fd)
            sample.latencies.append(time.perf_counter() - t)
    finally:
        os.close(fd)
        os.unlink(path)
    return sample.pct(50)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small counts, one repeat (under ~60 s)")
    parser.add_argument("--nodes", default="1,3", help="cluster sizes, comma-separated [default: 1,3]")
    parser.add_argument("--clients", type=int, default=4, help="concurrent clients [default: 4]")
    parser.add_argument("--keep", action="store_true", help="keep the data directories and node logs")
    args = parser.parse_args(argv)
    try:
        sizes = [int(x) for x in args.nodes.split(",") if x.strip()]
    except ValueError:
        parser.error(f"--nodes: expected sizes like 1,3, got {args.nodes!r}")
    if not sizes or any(n < 1 or n > 7 for n in sizes) or args.clients < 1 or args.clients > 64:
        parser.error("--nodes takes sizes 1..7 and --clients 1..64")
    prof = QUICK if args.quick else FULL

    import grpc
    import pysyncobj  # noqa: F401

    print(
        f"mqctl controller benchmark, {datetime.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}"
        f" ({'quick' if args.quick else 'full'})"
    )
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}, grpcio {grpc.__version__}"
    )
    print(
        f"all processes on this machine, loopback only; {args.clients} concurrent clients = "
        f"{args.clients} ControllerClient instances in threads of this process",
        flush=True,
    )
    base_dir = tempfile.mkdtemp(prefix="mqctl-bench-")
    print(
        f"durability on: a write is acknowledged once its Raft entry is fdatasync'd on a majority "
        f"(group commit); fdatasync of a small append here: {fdatasync_ms(base_dir):.2f} ms p50",
        flush=True,
    )
    start = time.monotonic()
    tables: list[Table] = []
    try:
        for k, size in enumerate(sizes):
            tables.append(bench_size(size, base_dir, prof, args.clients, 20000 + 1000 * k))
            tables[-1].print()
        if len(tables) > 1:
            print_summary(tables, args.clients)
    finally:
        if args.keep:
            print(f"\ndata directories and node logs kept in {base_dir}")
        else:
            shutil.rmtree(base_dir, ignore_errors=True)
    print(f"\ntotal {time.monotonic() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
