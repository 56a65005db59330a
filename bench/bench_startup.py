"""Start-up benchmark of the `mqctl` command: wall time, CPU and memory against `python -c pass`.

    .venv/bin/python bench/bench_startup.py [--runs 15] [--quick]

It measures, in one run, interleaved so that a busy machine slows every command alike:

* `python -c pass` with the same interpreter (the baseline);
* `mqctl --help`;
* `mqctl getSyncStateSet --help` (a sub-command's help);
* `mqctl getSyncStateSet -o json` against a local one-node controller (`mqctl serve` on a free
  loopback port, started with mqctl.localgroup.LocalCluster in a temporary directory) that knows one
  broker set, so the command does a real gRPC round trip and prints a real document.

For each it prints the median wall time and its ratio to the baseline (the figure to compare
between machines), the median CPU time (user + system, from the child's rusage) and its ratio
(steadier than wall time on a busy machine), and the largest resident set. Goals (issue 16):
`--help` <= 4x, a sub-command's `--help` <= 6x, getSyncStateSet -o json <= 8x; the last column
says whether each one holds. Figures, not a test: the exit code is 0 either way, unless a command
fails.

The .pyc files are written under a private PYTHONPYCACHEPREFIX during the warm-up runs: as installed
by pip, byte-compiled, even where the environment sets PYTHONDONTWRITEBYTECODE.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path

# tests/harness.py (register_broker): test support the benchmark borrows
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
MQCTL = str(Path(sys.executable).with_name("mqctl"))
GOALS = {"mqctl --help": 4.0, "mqctl getSyncStateSet --help": 6.0, "mqctl getSyncStateSet -o json": 8.0}


@dataclass
class Figures:
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    rss_kib: int = 0


# Runs each command for measure(): a child's peak RSS (ru_maxrss) counts the pages of the process it
# was forked from, so the commands are started by this small launcher (python -I -S), not by the
# benchmark process, whose own size would otherwise be every command's floor.
LAUNCHER = """
import json, os, sys, time
for line in sys.stdin:
    argv, env, err = json.loads(line)
    acts = [(os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
            (os.POSIX_SPAWN_OPEN, 2, err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)]
    t0 = time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, env, file_actions=acts)
    _, status, ru = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    print(json.dumps([wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss, os.waitstatus_to_exitcode(status)]),
          flush=True)
"""


class Launcher:
    def __init__(self, err_path: str) -> None:
        self.err_path = err_path
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", LAUNCHER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def measure(self, argv: list[str], figures: Figures, env: dict[str, str]) -> None:
        """Run argv once: its wall time, CPU time (user + system) and peak RSS."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps([argv, env, self.err_path]) + "\n")
        self.proc.stdin.flush()
        wall, cpu, rss_kib, code = json.loads(self.proc.stdout.readline())
        if code != 0:
            with open(self.err_path, encoding="utf-8", errors="replace") as f:
                raise SystemExit(f"{' '.join(argv)} failed ({code}): {f.read()[-500:]}")
        figures.wall.append(wall)
        figures.cpu.append(cpu)
        figures.rss_kib = max(figures.rss_kib, rss_kib)

    def close(self) -> None:
        self.proc.communicate(timeout=30)


def controller_helper(base: str) -> None:
    """--controller-helper: start the controller, print its address, stop it when stdin closes. A
    separate process keeps this one small: a child's peak RSS counts the parent's pages it was forked
    from, so the benchmark's own process must stay lighter than every command it measures."""
    from harness import register_broker

    from mqctl.client import ControllerClient
    from mqctl.localgroup import LocalCluster

    cluster = LocalCluster(os.path.join(base, "ctl"), size=1)
    cluster.start()
    try:
        with ControllerClient(cluster.addresses) as client:
            register_broker(client, "broker-a", "127.0.0.1:10911", "bench-cluster")
        print(cluster.addresses, flush=True)
        sys.stdin.read()
    finally:
        cluster.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=15, help="runs of each command (median taken)")
    ap.add_argument("--quick", action="store_true", help="5 runs")
    ap.add_argument("--controller-helper", metavar="DIR", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.controller_helper:
        controller_helper(args.controller_helper)
        return
    runs = 5 if args.quick else args.runs
    if not os.path.exists(MQCTL):
        raise SystemExit(f"{MQCTL} not found: install mqctl into this interpreter's environment")
    base = tempfile.mkdtemp(prefix="mqctl-bench-startup-")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MQCTL_")}
    env["NO_COLOR"] = "1"
    # As installed by pip: byte-compiled. The warm-up writes the .pyc files of the source tree (an
    # editable install) under a private prefix, not into the tree, even where the environment says
    # PYTHONDONTWRITEBYTECODE.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = os.path.join(base, "pycache")
    helper = subprocess.Popen(
        [sys.executable, __file__, "--controller-helper", base],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        address = (helper.stdout.readline() if helper.stdout else "").strip()
        if not address:
            raise SystemExit("the controller did not start")
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "mqctl --help": [MQCTL, "--help"],
            "mqctl getSyncStateSet --help": [MQCTL, "getSyncStateSet", "--help"],
            "mqctl getSyncStateSet -o json": [MQCTL, "getSyncStateSet", "-o", "json", "-a", address],
        }
        figures = {name: Figures() for name in commands}
        launcher = Launcher(os.path.join(base, "stderr"))
        try:
            for argv in commands.values():  # warm the page cache and write the .pyc files; not counted
                launcher.measure(argv, Figures(), env)
            t_start = time.monotonic()
            for _ in range(runs):
                for name, argv in commands.items():
                    launcher.measure(argv, figures[name], env)
            total = time.monotonic() - t_start
        finally:
            launcher.close()
    finally:
        helper.communicate(timeout=60)  # closes its stdin: it stops the controller and exits
        shutil.rmtree(base, ignore_errors=True)

    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(f"mqctl start-up benchmark, {now}, {runs} runs of each command, interleaved")
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}, typer {version('typer')}, grpcio {version('grpcio')}"
    )
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print()
    base_wall = statistics.median(figures["python -c pass"].wall)
    base_cpu = statistics.median(figures["python -c pass"].cpu)
    head = (
        f"{'command':<32} {'wall ms':>8} {'x python':>9} {'cpu ms':>7} {'x python':>9} "
        f"{'max RSS MiB':>12}  goal (wall)"
    )
    print(head)
    print("-" * len(head))
    for name, f in figures.items():
        wall, cpu = statistics.median(f.wall), statistics.median(f.cpu)
        ratio = wall / base_wall
        goal = GOALS.get(name)
        verdict = "-" if goal is None else f"<= {goal:g}x {'ok' if ratio <= goal else 'MISSED'}"
        print(
            f"{name:<32} {wall * 1000:8.0f} {ratio:8.1f}x {cpu * 1000:7.0f} {cpu / base_cpu:8.1f}x "
            f"{f.rss_kib / 1024:12.1f}  {verdict}"
        )
    print()
    print(f"total {total:.1f} s")


if __name__ == "__main__":
    main()
