"""Rolling restart of a three-node controller group under write load: the longest write stall, with the
leader's handover on SIGTERM (the default) and without it (`--handover-timeout 0`). Figures, not
assertions.

    .venv/bin/python bench/bench_rolling.py [--rounds 3] [--writers 2] [--keep]

Each round starts a LocalCluster (real `mqctl serve` processes on loopback ports, a temporary
directory), lets W writers (one ControllerClient and thread each) write ApplyBrokerId of new broker
sets, each a durable Raft write, and then restarts the three nodes one by one: SIGTERM, start again,
wait until the node is back in the group, two seconds of writes, the next node. The leader is among
them, once or more (the handover moves it to a node restarted later).

* **stall**: the longest time without an acknowledged write, from any writer, during the restarts.
  A write the old leader could not finish is retried by the client (on another node); the stall
  includes that retry and the client's backoff.
* **baseline**: the median write latency before the restarts, in the same process: the stall is
  also shown as a multiple of it.
* **elections**: why each election of the restarts started, from the nodes' `mqctl.raft.election`
  lines ("a leadership transfer" = a handover; "no append_entries ... for N ms" = an election timeout).
* CPU time of this process and the peak RSS of the nodes (`getrusage` of the children) beside.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import os
import platform
import re
import resource
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

from mqctl.client import ControllerClient
from mqctl.errors import ControllerError
from mqctl.localgroup import LocalCluster, metadata, wait_until

CLUSTER = "bench-rolling"
ELECTION = re.compile(r"raft: starting an election for term (\d+): (.*)")
SETTLE_S = 2.0  # writes between two restarts


@dataclass
class Round:
    stall: float  # s, the longest time without an acknowledged write during the restarts
    baseline: float  # s, the median write latency before them
    leaders: int  # how often the node stopped was the leader
    refused: dict[str, int]
    elections: list[str] = field(default_factory=list)  # why each election of the restarts started
    where: str = ""  # the step of the restarts the longest stall began in
    leader_stall: float = 0.0  # s, the longest stall from a leader's SIGTERM to the next node's
    follower_stall: float = 0.0  # s, the same from a follower's

    def causes(self) -> Counter[str]:
        return Counter(re.sub(r"\d+ ms", "N ms", e) for e in self.elections)


def elections(cluster: LocalCluster) -> set[tuple[int, str]]:
    return {(int(m.group(1)), m.group(2)) for n in cluster.nodes for m in ELECTION.finditer(n.log_text())}


class Load:
    """W writer threads; the completion time of every acknowledged write, and each one's latency."""

    def __init__(self, addresses: str, writers: int) -> None:
        self.addresses = addresses
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.acked: list[float] = []
        self.latency: list[float] = []
        self.refused: Counter[str] = Counter()
        self.threads = [threading.Thread(target=self._run, args=(w,), daemon=True) for w in range(writers)]

    def __enter__(self) -> Load:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(60)

    def _run(self, writer: int) -> None:
        with ControllerClient(self.addresses, timeout=10) as client:
            n = 0
            while not self.stop.is_set():
                n += 1
                start = time.monotonic()
                try:
                    client.apply_broker_id(CLUSTER, f"w{writer}-set{n}", 1, f"127.0.0.1:20001;{writer}")
                except ControllerError as exc:
                    with self.lock:
                        self.refused[exc.code.name if hasattr(exc.code, "name") else str(exc.code)] += 1
                    time.sleep(0.01)
                    continue
                end = time.monotonic()
                with self.lock:
                    self.acked.append(end)
                    self.latency.append(end - start)

    def longest_gap(self, since: float, until: float) -> tuple[float, float]:
        """(the longest time without an acknowledged write, when it began)"""
        with self.lock:
            times = sorted(t for t in self.acked if since <= t <= until)
        points = [since, *times, until]
        return max((b - a, a) for a, b in itertools.pairwise(points))


def one_round(base: str, handover: bool, writers: int) -> Round:
    args = [] if handover else ["--handover-timeout", "0"]
    cluster = LocalCluster(base, size=3, extra_args=args)
    with cluster:
        cluster.start()
        with Load(cluster.addresses, writers) as load:
            wait_until(lambda: len(load.acked) >= 200, 60, what="writes before the restarts")
            with load.lock:
                baseline = statistics.median(load.latency)
            before = elections(cluster)
            began = time.monotonic()
            leaders_stopped = 0
            steps: list[tuple[float, str]] = []
            for node in cluster.nodes:
                led = bool(metadata(node.grpc_address).get("is_leader"))
                leaders_stopped += led
                role = "the leader" if led else "a follower"
                steps.append((time.monotonic(), f"stopping {role}"))
                node.stop()
                steps.append((time.monotonic(), f"starting {role} again"))
                node.start()
                cluster.wait_for_leader()
                wait_until(
                    lambda node=node: metadata(node.grpc_address).get("controller_leader_address"),
                    60,
                    what=f"{node.name} back in the group",
                )
                steps.append((time.monotonic(), f"after {role}'s restart"))
                time.sleep(SETTLE_S)
            ended = time.monotonic()
            stall, at = load.longest_gap(began, ended)
            where = [what for t, what in steps if t <= at][-1]
            stops = [(t, what) for t, what in steps if what.startswith("stopping")]
            windows = zip(stops, [t for t, _ in stops[1:]] + [ended], strict=True)
            per_step = [(what, load.longest_gap(t, until)[0]) for (t, what), until in windows]
            refused = dict(load.refused)
        during = sorted(elections(cluster) - before)
    return Round(
        stall,
        baseline,
        leaders_stopped,
        refused,
        [why for _, why in during],
        where,
        max((g for what, g in per_step if "leader" in what), default=0.0),
        max((g for what, g in per_step if "follower" in what), default=0.0),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--writers", type=int, default=2)
    parser.add_argument("--keep", action="store_true", help="keep the data directories and node logs")
    opts = parser.parse_args()
    base = tempfile.mkdtemp(prefix="mqctl-bench-rolling-")
    print(
        f"# bench_rolling {datetime.date.today()} {platform.machine()} {os.cpu_count()} cores "
        f"python {platform.python_version()} load {os.getloadavg()[0]:.1f}; {opts.writers} writers, "
        f"{opts.rounds} rounds per mode, in turn"
    )
    results: dict[str, list[Round]] = {"handover": [], "no handover": []}
    cpu0 = time.process_time()
    try:
        for r in range(opts.rounds):
            for mode in results:  # the modes in turn, round by round: the machine's drift hits both
                out = one_round(
                    os.path.join(base, f"{mode.replace(' ', '-')}-{r}"), mode == "handover", opts.writers
                )
                results[mode].append(out)
                print(
                    f"{mode:12} round {r}: stall {out.stall * 1000:7.1f} ms "
                    f"({out.stall / out.baseline:.0f}x the median write of {out.baseline * 1000:.2f} ms), "
                    f"while {out.where}; around the leader's restart {out.leader_stall * 1000:.0f} ms, a "
                    f"follower's {out.follower_stall * 1000:.0f} ms; leader stopped {out.leaders}x, "
                    f"elections {dict(out.causes())}, refused {out.refused}",
                    flush=True,
                )
    finally:
        if not opts.keep:
            shutil.rmtree(base, ignore_errors=True)
    print()
    print(
        "| mode | longest write stall, median of rounds (max) | x median write "
        "| around the leader's restart | around a follower's | elections by cause |"
    )
    print("|---|---|---|---|---|---|")
    for mode, rows in results.items():
        stalls = [row.stall for row in rows]
        ratios = [row.stall / row.baseline for row in rows]
        causes = sum((row.causes() for row in rows), Counter[str]())
        leader = statistics.median(row.leader_stall for row in rows) * 1000
        follower = statistics.median(row.follower_stall for row in rows) * 1000
        print(
            f"| {mode} | {statistics.median(stalls) * 1000:.0f} ms ({max(stalls) * 1000:.0f} ms) | "
            f"{statistics.median(ratios):.0f}x | {leader:.0f} ms | {follower:.0f} ms | {dict(causes)} |"
        )
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(
        f"\nCPU of this process {time.process_time() - cpu0:.1f} s; the nodes "
        f"{children.ru_utime + children.ru_stime:.1f} s of CPU in all, peak RSS of one node "
        f"{children.ru_maxrss / 1024:.0f} MiB"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
