#!/usr/bin/env python3
"""Inspect and deep-check throughput of `mqctl recover inspect`, as a ratio to `cat` reading the same files
in the same run (not a test).

    .venv/bin/python bench/bench_store.py [--store DIR | --size 512M] [--file-size 64M] [--repeat 3]

Without --store it generates a store of --size with tests/gen_large_store.py in a temporary directory
(default 512M for a quick run; use --size 4G or more for the real figure). Each measurement is the best of
--repeat runs after one warm-up `cat` so both sides read from the page cache.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from gen_large_store import generate, parse_size

from mqctl.recover.inspect import inspect_store
from mqctl.store.commitlog import CommitLog


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def cat(files: list[Path]) -> None:
    subprocess.run(["cat", *map(str, files)], stdout=subprocess.DEVNULL, check=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", type=Path)
    ap.add_argument("--size", default="512M")
    ap.add_argument("--file-size", default="64M")
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    tmp = None
    store = a.store
    if store is None:
        tmp = tempfile.TemporaryDirectory(prefix="mqctl-bench-")
        store = Path(tmp.name) / "store"
        print(f"generating {a.size} in {store} ...", file=sys.stderr)
        print(
            "generated:",
            generate(
                store,
                parse_size(a.size),
                parse_size(a.file_size),
                a.record_size,
                parse_size("1G"),
                quiet=True,
            ),
        )
    log = CommitLog(store / "commitlog")
    files = [f.path for f in log.files]
    last3 = files[-3:]
    cat(files)  # warm the page cache
    rows = []
    for name, fn, fset in (
        ("inspect", lambda: inspect_store(store), last3),
        ("inspect --deep", lambda: inspect_store(store, deep=True), files),
    ):
        nbytes = sum(p.stat().st_size for p in fset)
        t_cat = best(lambda fset=fset: cat(fset), a.repeat)
        t_ours = best(fn, a.repeat)
        rep = inspect_store(store, deep=(name != "inspect"))
        rows.append((name, len(fset), nbytes, rep.scan.records if rep.scan else 0, t_ours, t_cat))
    print(
        f"store {store}: {len(files)} files, {log.total_bytes / (1 << 20):.0f} MiB, "
        f"file size {log.file_size / (1 << 20):.0f} MiB"
    )
    print(
        f"{'mode':16} {'files':>5} {'MiB':>8} {'records':>10} {'s':>8} {'MiB/s':>9} {'cat MiB/s':>10} "
        f"{'ratio':>7}"
    )
    for name, nf, nb, recs, t, tc in rows:
        mib = nb / (1 << 20)
        print(
            f"{name:16} {nf:5d} {mib:8.0f} {recs:10d} {t:8.3f} {mib / t:9.0f} {mib / tc:10.0f} {tc / t:7.3f}"
        )
    print("ratio = mqctl throughput / cat throughput over the same files (1.0 = as fast as cat)")
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
