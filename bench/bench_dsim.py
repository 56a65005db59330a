"""How fast the deterministic simulator runs (mqctl/dsim): simulated seconds per wall-clock second.

    .venv/bin/python bench/bench_dsim.py [--brokers 300] [--seconds 30] [--seeds 3]

Rows: a 3-node group with no broker (the Raft fork's ticks and heartbeats alone), with the
brokers heartbeating (each beats every node once a second), and with the faults on. The baseline is
real time (1 simulated s per wall s: what the multi-process tests spend); each row is that ratio
per CPU second of this process (on a shared machine the wall clock measures the neighbours) and per
wall second, with the process's peak memory beside it. Figures go to bench/README.md.
"""

from __future__ import annotations

import argparse
import logging
import resource
import time

from mqctl.dsim import run_seed


def row(label: str, seeds: int, **kw: object) -> None:
    wall0, cpu0 = time.perf_counter(), time.process_time()
    simulated = 0.0
    stats: dict[str, int] = {}
    for seed in range(1, seeds + 1):
        outcome, _ = run_seed(seed, **kw)  # type: ignore[arg-type]
        assert outcome.ok, f"seed {seed}: {outcome.violation}"
        simulated += outcome.sim_seconds
        for k, v in outcome.stats.items():
            stats[k] = stats.get(k, 0) + v
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"{label:<44} {simulated / cpu:8.1f}x per CPU s, {simulated / wall:6.1f}x per wall s "
        f"({simulated:.0f} simulated s in {wall:.1f} s, "
        f"CPU {cpu:.1f} s, peak RSS {rss:.0f} MiB; {stats.get('messages', 0)} Raft messages, "
        f"{stats.get('client calls', 0)} calls besides heartbeats)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brokers", type=int, default=300)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    logging.basicConfig(level=logging.CRITICAL)
    print(f"{time.strftime('%Y-%m-%d %H:%M')}, {args.seeds} seeds x {args.seconds:g} simulated s per row")
    row("3 nodes, no broker, no fault", args.seeds, seconds=args.seconds, brokers=0, faults=False)
    row("3 nodes, 9 brokers, faults (the CI runs)", args.seeds, seconds=args.seconds)
    row(
        f"3 nodes, {args.brokers} heartbeating brokers, no fault",
        args.seeds,
        seconds=args.seconds,
        brokers=args.brokers,
        faults=False,
    )


if __name__ == "__main__":
    main()
