"""`python -m mqctl.dsim`: run seeds of the deterministic simulator (docs/raft-safety.md).

    python -m mqctl.dsim --seed 42                  # one run of 120 simulated seconds, 3 nodes
    python -m mqctl.dsim --seeds 1-500 --seconds 120 --nodes 5
    python -m mqctl.dsim --seed 42 --trace          # the whole trace of one run

A failing run prints its seed, the violation, the end of its trace and the command that replays
it; exit 1. Bad options: one line on stderr, exit 2.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from typing import NoReturn

from mqctl.dsim import run_seed


def _seeds(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2 (docs/codes.md)
        print(f"mqctl.dsim: {message}", file=sys.stderr)
        sys.exit(2)


def main(argv: list[str] | None = None) -> int:
    from mqctl.dsim.world import MUTATIONS  # lazy: pysyncobj, the raft fork

    parser = _Parser(prog="python -m mqctl.dsim", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, help="one seed")
    parser.add_argument("--seeds", help="seeds: 1-500 or 1,5,9-12")
    parser.add_argument("--seconds", type=float, default=120.0, help="simulated seconds per run (120)")
    parser.add_argument("--nodes", type=int, default=3, choices=(3, 5))
    parser.add_argument("--brokers", type=int, default=9, help="brokers (9: 3 broker sets of 3)")
    parser.add_argument("--no-faults", action="store_true")
    parser.add_argument(
        "--no-membership", action="store_true", help="no quorum add and remove among the faults"
    )
    parser.add_argument("--mutation", choices=MUTATIONS, help="a planted bug (the mutation tests)")
    parser.add_argument("--trace", action="store_true", help="print the whole trace")
    parser.add_argument("--tail", type=int, default=40, help="trace lines printed for a failure (40)")
    parser.add_argument("--quiet", action="store_true", help="print failures and the summary only")
    try:
        args = parser.parse_args(argv)
        seeds = [args.seed] if args.seed is not None else _seeds(args.seeds or "1")
    except ValueError as exc:
        print(f"mqctl.dsim: bad --seeds: {exc}", file=sys.stderr)
        return 2
    if os.environ.get("PYTHONHASHSEED") is None:
        # runs do not depend on string hashing (world.py), but a replay should not even have to trust it
        os.environ["PYTHONHASHSEED"] = "0"
        rest = argv if argv is not None else sys.argv[1:]
        os.execv(sys.executable, [sys.executable, "-m", "mqctl.dsim", *rest])

    logging.basicConfig(level=logging.CRITICAL)

    failed = 0
    totals: dict[str, int] = {}
    started = time.perf_counter()
    simulated = 0.0
    for seed in seeds:
        outcome, world = run_seed(
            seed,
            seconds=args.seconds,
            nodes=args.nodes,
            brokers=args.brokers,
            faults=not args.no_faults,
            membership=not args.no_membership,
            mutation=args.mutation,
            full_trace=args.trace,
        )
        simulated += outcome.sim_seconds
        for k, v in outcome.stats.items():
            totals[k] = totals.get(k, 0) + v
        if args.trace and world.full_trace is not None:
            print("\n".join(world.full_trace))
        if outcome.ok:
            if not args.quiet:
                print(f"seed {seed}: ok  trace {outcome.digest[:16]}")
            continue
        failed += 1
        print(f"seed {seed}: VIOLATION {outcome.violation}")
        print("\n".join(f"  {line}" for line in outcome.tail[-args.tail :]))
        extra = f" --nodes {args.nodes}" if args.nodes != 3 else ""
        extra += f" --mutation {args.mutation}" if args.mutation else ""
        extra += " --no-faults" if args.no_faults else ""
        extra += " --no-membership" if args.no_membership else ""
        extra += f" --brokers {args.brokers}" if args.brokers != 9 else ""
        print(f"  replay: python -m mqctl.dsim --seed {seed} --seconds {args.seconds:g}{extra} --trace")
    wall = time.perf_counter() - started
    print(
        f"{len(seeds)} seeds, {failed} failed; {simulated:.0f} simulated s in {wall:.1f} s "
        f"({simulated / max(wall, 1e-9):.0f}x); " + ", ".join(f"{k} {v}" for k, v in totals.items())
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
