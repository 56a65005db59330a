"""How fast the deterministic simulator runs (mqctl/dsim): simulated seconds per wall-clock second.

    .venv/bin/python bench/bench_dsim.py [--brokers 300] [--seconds 30] [--seeds 3]
        [--baseline DIR]  # DIR: `git archive <commit> mqctl | tar -x -C DIR`, run side by side

Rows: a 3-node group with no broker (the Raft fork's ticks and heartbeats alone), with the
brokers heartbeating (each beats every node once a second), and with the faults on. The baseline is
real time (1 simulated s per wall s: what the multi-process tests spend); each row is that ratio
per CPU second of this process (on a shared machine the wall clock measures the neighbours) and per
wall second, with the process's peak memory beside it. With --baseline, the same process also runs
another commit's mqctl (its modules swapped in for each run, seed by seed in turn with this tree's,
so that the machine's load falls on both alike) and prints both, their ratio, and whether each
seed's trace is the same. Figures go to bench/README.md.
"""

from __future__ import annotations

import argparse
import logging
import os
import resource
import sys
import time
from types import ModuleType
from typing import Any


def _load(tree: str | None) -> dict[str, ModuleType]:
    """Import mqctl (from `tree` when given) and return its modules, then forget them."""
    for name in [m for m in sys.modules if m == "mqctl" or m.startswith("mqctl.")]:
        del sys.modules[name]
    if tree is not None:
        sys.path.insert(0, tree)
    try:
        import mqctl.dsim
        import mqctl.dsim.check
        import mqctl.dsim.driver
        import mqctl.dsim.world  # noqa: F401

        if tree is not None:
            where = os.path.abspath(sys.modules["mqctl"].__file__ or "")
            assert where.startswith(os.path.abspath(tree)), where
        return {m: mod for m, mod in sys.modules.items() if m == "mqctl" or m.startswith("mqctl.")}
    finally:
        if tree is not None:
            sys.path.remove(tree)


def _use(modules: dict[str, ModuleType]) -> None:
    for name in [m for m in sys.modules if m == "mqctl" or m.startswith("mqctl.")]:
        del sys.modules[name]
    sys.modules.update(modules)


class Tally:
    def __init__(self) -> None:
        self.simulated = self.cpu = self.wall = 0.0
        self.stats: dict[str, int] = {}
        self.digests: list[str] = []

    def run(self, modules: dict[str, ModuleType], seed: int, kw: dict[str, Any]) -> None:
        _use(modules)
        run_seed = modules["mqctl.dsim"].run_seed  # type: ignore[attr-defined]
        wall0, cpu0 = time.perf_counter(), time.process_time()
        outcome, _ = run_seed(seed, **kw)
        self.cpu += time.process_time() - cpu0
        self.wall += time.perf_counter() - wall0
        assert outcome.ok, f"seed {seed}: {outcome.violation}"
        self.simulated += outcome.sim_seconds
        self.digests.append(outcome.digest)
        for k, v in outcome.stats.items():
            self.stats[k] = self.stats.get(k, 0) + v

    def line(self, label: str) -> str:
        return (
            f"{label:<52} {self.simulated / self.cpu:8.1f}x per CPU s, {self.simulated / self.wall:6.1f}x "
            f"per wall s ({self.simulated:.0f} simulated s in {self.wall:.1f} s, CPU {self.cpu:.1f} s; "
            f"{self.stats.get('messages', 0)} Raft messages, "
            f"{self.stats.get('client calls', 0)} calls besides heartbeats)"
        )


def row(
    label: str, seeds: int, mine: dict[str, ModuleType], base: dict[str, ModuleType] | None, **kw: Any
) -> None:
    now, before = Tally(), Tally()
    for seed in range(1, seeds + 1):
        if base is not None:
            before.run(base, seed, kw)
        now.run(mine, seed, kw)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if base is None:
        print(now.line(label) + f", peak RSS {rss:.0f} MiB")
        return
    print(before.line(label + " [baseline]"))
    same = sum(a == b for a, b in zip(now.digests, before.digests, strict=True))
    print(
        now.line(label + " [this tree]")
        + f"\n    -> {before.cpu / now.cpu:.2f}x the baseline's speed per CPU s; "
        f"{same} of {seeds} traces the same"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brokers", type=int, default=300)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--baseline", help="another commit's tree (git archive ... mqctl) to run beside")
    parser.add_argument("--rows", default="idle,ci,brokers", help="which rows: idle, ci, brokers")
    args = parser.parse_args()
    logging.basicConfig(level=logging.CRITICAL)
    base = _load(args.baseline) if args.baseline else None
    mine = _load(None)
    load = os.getloadavg()
    print(
        f"{time.strftime('%Y-%m-%d %H:%M')}, {args.seeds} seeds x {args.seconds:g} simulated s per row, "
        f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}, {os.cpu_count()} CPUs"
    )
    rows = set(args.rows.split(","))
    if "idle" in rows:
        row(
            "3 nodes, no broker, no fault",
            args.seeds,
            mine,
            base,
            seconds=args.seconds,
            brokers=0,
            faults=False,
        )
    if "ci" in rows:
        row("3 nodes, 9 brokers, faults (the CI runs)", args.seeds, mine, base, seconds=args.seconds)
    if "brokers" in rows:
        row(
            f"3 nodes, {args.brokers} heartbeating brokers, no fault",
            args.seeds,
            mine,
            base,
            seconds=args.seconds,
            brokers=args.brokers,
            faults=False,
        )


if __name__ == "__main__":
    main()
