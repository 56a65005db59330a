"""Broker-side benchmark over mqctl.broker agents and a real controller: figures, not assertions.

    .venv/bin/python bench/bench_sim.py [--quick] [--nodes 1] [--procs 2] [--replicas 3] [--keep]

1. Capacity: how many broker sets one controller leader holds at a 1 s heartbeat interval before the
   heartbeat latency p99 passes 50 ms. Offsets-only agents with in-process peers, many per process,
   spread over ``--procs`` worker processes (this script with ``--worker``). Each worker shares one
   ControllerClient and one WatchRoleChanges stream between its agents, and times every heartbeat
   they send. The sets are added in steps; after each step every worker measures for a window, and
   the script prints p50/p99 of all heartbeats, the controller's and the workers' CPU. It also prints
   a probe: a lone client in this process beating 20 times a second. The probe shows what the
   controller alone adds, apart from the workers' own GIL contention.
2. Failover time: a master is crashed, and the clock runs until every other replica follows the new
   master. This is done with the default lease (heartbeat every 1 s, 10 s timeout) and with a 1 s
   timeout (heartbeat every 200 ms). The other periods are RocketMQ's defaults; role changes come
   from WatchRoleChanges.

The baseline for ratios is a GetMetadata round trip measured in the same run.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Any

from mqctl.sim.fleet import proc_cpu_seconds

# tests/harness.py (Gate, register_broker): test support the benchmarks borrow
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))

CLUSTER = "BenchSimCluster"
P99_LIMIT_MS = 50.0


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(p / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


# ------------------------------------------------------------------------------------------------
# Worker process: hosts agents, times their heartbeats


class TimedClient:
    """A shared ControllerClient whose heartbeat calls are timed (everything else is delegated)."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._lock = threading.Lock()
        self.samples: list[float] = []
        self.errors = 0
        self.recording = False

    def heartbeat(self, *args: Any, **kw: Any) -> Any:
        t = time.perf_counter()
        try:
            return self._client.heartbeat(*args, **kw)
        except Exception:
            if self.recording:
                self.errors += 1
            raise
        finally:
            if self.recording:
                ms = (time.perf_counter() - t) * 1000
                with self._lock:
                    self.samples.append(ms)

    def take(self) -> tuple[list[float], int]:
        with self._lock:
            out, self.samples = self.samples, []
        errors, self.errors = self.errors, 0
        return out, errors

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def worker(args: argparse.Namespace) -> None:
    from mqctl.broker.agent import BrokerAgent, Role, RoleWatchHub
    from mqctl.broker.config import AgentConfig
    from mqctl.client import ControllerClient

    client = TimedClient(ControllerClient(args.addresses, timeout=10.0))
    hub = RoleWatchHub(client, CLUSTER)
    agents: list[BrokerAgent] = []
    out = sys.stdout
    for line in sys.stdin:
        cmd = line.split()
        if not cmd:
            continue
        if cmd[0] == "add":
            first, count = int(cmd[1]), int(cmd[2])
            t0 = time.monotonic()
            new = []
            for s in range(first, first + count):
                name = f"bench-{s:05d}"
                for r in range(args.replicas):
                    cfg = AgentConfig(
                        CLUSTER,
                        name,
                        os.path.join(args.dir, name, f"r{r}"),
                        args.addresses,
                        peer_transport="local",
                        address=f"{name}-r{r}",
                        storage="offsets",
                        heartbeat_interval=1.0,
                        register_retry_fast=50,
                        controller_timeout=10.0,
                    )
                    new.append(BrokerAgent(cfg, client=client, hub=hub).start())
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and not all(a.role in (Role.MASTER, Role.SLAVE) for a in new):
                time.sleep(0.1)
            agents += new
            ready = sum(a.role in (Role.MASTER, Role.SLAVE) for a in new)
            out.write(
                json.dumps(
                    {"agents": len(agents), "ready": ready, "of": len(new), "seconds": time.monotonic() - t0}
                )
                + "\n"
            )
        elif cmd[0] == "measure":
            client.take()
            client.recording = True
            c0, t0 = os.times(), time.monotonic()
            time.sleep(float(cmd[1]))
            client.recording = False
            c1, t1 = os.times(), time.monotonic()
            samples, errors = client.take()
            cpu = (c1.user + c1.system - c0.user - c0.system) / (t1 - t0)
            out.write(
                json.dumps(
                    {
                        "samples": [round(x, 3) for x in samples],
                        "errors": errors,
                        "cpu": cpu,
                        "threads": threading.active_count(),
                    }
                )
                + "\n"
            )
        elif cmd[0] == "quit":
            stoppers = [threading.Thread(target=a.stop, daemon=True) for a in agents]
            for t in stoppers:
                t.start()
            for t in stoppers:
                t.join(30)
            hub.close()
            client._client.close()
            out.write(json.dumps({"bye": True}) + "\n")
            out.flush()
            return
        out.flush()


class Worker:
    def __init__(self, index: int, addresses: str, base: str, replicas: int) -> None:
        d = os.path.join(base, f"worker{index}")
        os.makedirs(d, exist_ok=True)
        self.log = open(os.path.join(base, f"worker{index}.log"), "wb")  # noqa: SIM115 (the child's; closed on stop)
        self.proc = subprocess.Popen(
            [
                sys.executable,
                os.path.abspath(__file__),
                "--worker",
                "--addresses",
                addresses,
                "--dir",
                d,
                "--replicas",
                str(replicas),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            env={**os.environ, "GRPC_VERBOSITY": "ERROR"},
        )

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def answer(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"worker {self.proc.pid} ended (exit {self.proc.poll()}); see its log")
        doc: dict[str, Any] = json.loads(line)
        return doc

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.send("quit")
                self.answer()
                self.proc.wait(30)
            except Exception:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


# ------------------------------------------------------------------------------------------------
# Main process


class Probe:
    """A lone registered broker beating 20 times a second from this process: the controller's latency
    without the workers' GIL contention."""

    def __init__(self, addresses: str) -> None:
        from harness import register_broker

        from mqctl.client import ControllerClient

        self.client = ControllerClient(addresses, timeout=5.0)
        self.id, self.epoch = register_broker(
            self.client, "bench-probe", "127.0.0.1:1", cluster_name=CLUSTER, heartbeat_timeout_mills=60000
        )
        self.samples: list[float] = []
        self.recording = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            t = time.perf_counter()
            try:
                self.client.heartbeat(
                    CLUSTER,
                    "127.0.0.1:1",
                    "bench-probe",
                    self.id,
                    heartbeat_timeout_mills=60000,
                    broker_epoch=self.epoch,
                )
            except Exception:
                continue
            if self.recording:
                self.samples.append((time.perf_counter() - t) * 1000)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.client.close()


@dataclass
class Step:
    sets: int
    agents: int
    add_seconds: float
    beats: int
    errors: int
    p50: float
    p99: float
    probe_p50: float
    probe_p99: float
    controller_cpu: float
    worker_cpu: float


def capacity(addresses: str, leader_pid: int, base: str, args: argparse.Namespace) -> list[Step]:
    full = [25, 50, 75, 100, 125, 150, 200, 250, 300, 400, 500]
    steps = [10, 25, 50, 100, 150, 200] if args.quick else full
    window = 4.0 if args.quick else 10.0
    budget = 38.0 if args.quick else 600.0
    t_start = time.monotonic()
    workers = [Worker(i, addresses, base, args.replicas) for i in range(args.procs)]
    probe = Probe(addresses)
    results: list[Step] = []
    current = 0
    print(
        f"{'sets':>6} {'agents':>7} {'add s':>6} {'beats':>6} {'err':>4} {'p50 ms':>7} {'p99 ms':>7} "
        f"{'probe p50':>9} {'probe p99':>9} {'ctl CPU':>7} {'workers CPU':>11}"
    )
    try:
        for target in steps:
            if time.monotonic() - t_start > budget:
                print(f"(time budget of {budget:.0f} s reached before {target} sets)")
                break
            add = target - current
            t0 = time.monotonic()
            for i, w in enumerate(workers):  # split the new sets between the workers
                share = add // len(workers) + (1 if i < add % len(workers) else 0)
                first = current + sum(
                    add // len(workers) + (1 if j < add % len(workers) else 0) for j in range(i)
                )
                w.send(f"add {first} {share}")
            added = [w.answer() for w in workers]
            add_seconds = time.monotonic() - t0
            not_ready = sum(a["of"] - a["ready"] for a in added)
            current = target
            time.sleep(1.5)  # let the registrations' SyncStateSet changes settle
            probe.samples = []
            probe.recording = True
            c0 = proc_cpu_seconds(leader_pid)
            m0 = time.monotonic()
            for w in workers:
                w.send(f"measure {window}")
            measured = [w.answer() for w in workers]
            ctl_cpu = (proc_cpu_seconds(leader_pid) - c0) / (time.monotonic() - m0)
            probe.recording = False
            samples = [x for m in measured for x in m["samples"]]
            step = Step(
                target,
                sum(a["agents"] for a in added),
                add_seconds,
                len(samples),
                sum(m["errors"] for m in measured),
                pct(samples, 50),
                pct(samples, 99),
                pct(probe.samples, 50),
                pct(probe.samples, 99),
                ctl_cpu,
                sum(m["cpu"] for m in measured),
            )
            results.append(step)
            print(
                f"{step.sets:>6} {step.agents:>7} {step.add_seconds:>6.1f} {step.beats:>6} "
                f"{step.errors:>4} {step.p50:>7.2f} {step.p99:>7.2f} {step.probe_p50:>9.2f} "
                f"{step.probe_p99:>9.2f} {step.controller_cpu:>6.0%} {step.worker_cpu:>10.0%}"
                + (f"  ({not_ready} agents not ready)" if not_ready else ""),
                flush=True,
            )
            if step.p99 > P99_LIMIT_MS:
                break
    finally:
        probe.close()
        for w in workers:
            w.close()
    return results


def failover(
    addresses: str, base: str, heartbeat_interval: float, timeout_ms: int, rounds: int, replicas: int
) -> list[float]:
    from mqctl.broker.agent import BrokerAgent, Role
    from mqctl.broker.config import AgentConfig

    name = f"fo-{timeout_ms}"
    cfgs = [
        AgentConfig(
            CLUSTER,
            name,
            os.path.join(base, name, f"r{i}"),
            addresses,
            heartbeat_interval=heartbeat_interval,
            heartbeat_timeout_ms=timeout_ms,
            all_ack_in_sync_state_set=True,
            register_retry_fast=50,
        )
        for i in range(replicas)
    ]
    agents = [BrokerAgent(c).start() for c in cfgs]
    times: list[float] = []

    def settled(expect_epoch_above: int) -> BrokerAgent | None:
        live = [a for a in agents if a.alive]
        masters = [a for a in live if a.role == Role.MASTER and a.master_epoch > expect_epoch_above]
        if len(masters) != 1:
            return None
        m = masters[0]
        ok = all(
            a.role == Role.SLAVE and a.master_id == m.broker_id and a.master_epoch == m.master_epoch
            for a in live
            if a is not m
        )
        return m if ok else None

    def wait(pred: Any, limit: float) -> Any:
        end = time.monotonic() + limit
        while time.monotonic() < end:
            v = pred()
            if v:
                return v
            time.sleep(0.005)
        raise TimeoutError("failover did not complete")

    try:
        master = wait(lambda: settled(0), 60)
        for _ in range(rounds):
            for _k in range(20):
                assert master.put(b"x" * 100).ok
            old_epoch = master.master_epoch
            i = agents.index(master)
            t0 = time.monotonic()
            master.crash()
            new = wait(lambda e=old_epoch: settled(e), timeout_ms / 1000 * 3 + 30)
            times.append(time.monotonic() - t0)
            back = agents[i] = BrokerAgent(cfgs[i]).start()  # the old master returns and follows
            wait(lambda e=old_epoch, n=new, b=back: settled(e) is n and b.role == Role.SLAVE, 60)
            master = new
    finally:
        for a in agents:
            a.stop()
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--quick", action="store_true", help="smaller steps and windows, one failover each (under a minute)"
    )
    ap.add_argument("--nodes", type=int, default=1, help="controller nodes (the leader is measured)")
    ap.add_argument("--procs", type=int, default=2, help="worker processes hosting the agents")
    ap.add_argument("--replicas", type=int, default=3)
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory (logs, stores)")
    ap.add_argument("--skip-capacity", action="store_true")
    ap.add_argument("--skip-failover", action="store_true")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--addresses", help=argparse.SUPPRESS)
    ap.add_argument("--dir", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    import grpc

    from mqctl.client import ControllerClient
    from mqctl.localgroup import LocalCluster

    started = time.monotonic()
    base = tempfile.mkdtemp(prefix="mqctl-bench-sim-")
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(f"mqctl broker simulation benchmark, {now}{' (quick)' if args.quick else ''}")
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}, grpcio {grpc.__version__}"
    )
    cluster = LocalCluster(os.path.join(base, "controllers"), size=args.nodes)
    try:
        cluster.start()
        leader = cluster.wait_for_leader()
        assert leader.proc is not None
        with ControllerClient(cluster.addresses) as c:
            c.get_metadata()
            lat = []
            for _ in range(200):
                t = time.perf_counter()
                c.get_metadata()
                lat.append((time.perf_counter() - t) * 1000)
        base_p50 = pct(lat, 50)
        print(
            f"controller: {args.nodes} node(s), leader {leader.name} (pid {leader.proc.pid}); "
            f"baseline GetMetadata round trip p50 {base_p50:.2f} ms, p99 {pct(lat, 99):.2f} ms"
        )
        if not args.skip_capacity:
            print(
                f"\n== capacity: broker sets of {args.replicas} offsets-only agents, heartbeat every 1 s, "
                f"{args.procs} worker process(es); stop when the agents' heartbeat p99 > "
                f"{P99_LIMIT_MS:g} ms =="
            )
            steps = capacity(cluster.addresses, leader.proc.pid, base, args)
            under = [s for s in steps if s.p99 <= P99_LIMIT_MS]
            over = [s for s in steps if s.p99 > P99_LIMIT_MS]
            if under:
                best = under[-1]
                print(
                    f"held {best.sets} broker sets ({best.agents} agents, ~{best.agents} heartbeats/s) "
                    f"with heartbeat p99 {best.p99:.1f} ms ({best.p99 / base_p50:.0f}x the GetMetadata "
                    "p50)"
                )
            if over:
                s = over[0]
                print(
                    f"p99 passed {P99_LIMIT_MS:g} ms at {s.sets} sets: {s.p99:.1f} ms (probe p99 "
                    f"{s.probe_p99:.1f} ms, controller CPU {s.controller_cpu:.0%}, workers "
                    f"{s.worker_cpu:.0%})"
                )
            elif steps:
                print(f"p99 stayed under {P99_LIMIT_MS:g} ms up to the last step ({steps[-1].sets} sets)")
        if not args.skip_failover:
            rounds = 1 if args.quick else 3
            print(
                f"\n== failover: master crashed -> every other replica follows the new master "
                f"({args.replicas} replicas, {rounds} round(s) each) =="
            )
            for interval, timeout_ms, label in ((1.0, 10000, "default"), (0.2, 1000, "1 s timeout")):
                times = failover(cluster.addresses, base, interval, timeout_ms, rounds, args.replicas)
                print(
                    f"{label:>12}: heartbeat every {interval:g} s, lease {timeout_ms} ms -> "
                    + ", ".join(f"{t:.2f} s" for t in times)
                    + f" ({', '.join(f'{t / (timeout_ms / 1000):.2f}' for t in times)} x the lease)",
                    flush=True,
                )
            print("(the lease runs from the master's last heartbeat, up to one interval before the crash)")
    finally:
        cluster.stop()
        if args.keep:
            print(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    print(f"\ntotal {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
