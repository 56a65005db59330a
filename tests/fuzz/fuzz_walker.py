"""libFuzzer (atheris) harness of the compiled record walker (issue 32), differential against the numpy
walker.

Each input is a header and a commitlog buffer: which entry point and options to walk with, a range and a
base offset (see `decode`). The input is walked by both walkers and their answers (walker_corpus.answer:
every column, problem, extracted item) must be equal; any difference raises, and so does a memory error or
undefined behaviour in the C code, which is built instrumented for this (AddressSanitizer, libFuzzer's
coverage, UndefinedBehaviorSanitizer trapping) by `build`:

    .venv/bin/python tests/fuzz/fuzz_walker.py build DIR          # DIR/_cwalker.so, DIR/seeds/
    LD_PRELOAD=$(.venv/bin/python -c 'import atheris; print(atheris.path())')/asan_with_fuzzer.so \\
      ASAN_OPTIONS=detect_leaks=0 MQCTL_FUZZ_EXT=DIR/_cwalker.so \\
      .venv/bin/python tests/fuzz/fuzz_walker.py -runs=10000000 -max_len=8192 DIR/corpus DIR/seeds

libFuzzer's `-jobs=N -workers=N` starts each job as `sh -c '<argv[0]> ...'`: give it an executable that runs
this file with the venv's Python and keeps its own path in argv[0] (bench/README.md, issue 32's long run:
`exec(compile(open(this file).read(), this file, "exec"), {"__name__": "__main__", "__file__": this file})`
under a `#!/path/to/.venv/bin/python` line), and `-runs` per job. Each job logs to fuzz-N.log in the working
directory; its `#N` lines count the inputs run, `stat::number_of_executed_units` at its end.

tests/fuzz/test_fuzz_walker.py runs a short one in CI; the long run's figures are in bench/README.md.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import sysconfig
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SOURCE = ROOT / "mqctl" / "store" / "_cwalker.c"
HEADER = 13
EXTRACT = ("bodies", "properties", "hosts")


def build(out: Path, cc: str = "clang") -> Path:
    """The extension built with AddressSanitizer and libFuzzer's coverage, UBSan trapping (no runtime of
    its own needed), and the seeds: the damage corpus of the tests, each with a few headers."""
    out.mkdir(parents=True, exist_ok=True)
    so = out / "_cwalker.so"
    inc = sysconfig.get_paths()["include"]
    subprocess.run(
        [
            cc,
            "-O1",
            "-g",
            "-fno-omit-frame-pointer",
            "-fsanitize=address,fuzzer-no-link",
            "-fsanitize=undefined",
            "-fsanitize-trap=undefined",
            "-fno-sanitize-recover=all",
            "-shared",
            "-fPIC",
            f"-I{inc}",
            str(SOURCE),
            "-lz",
            "-o",
            str(so),
        ],
        check=True,
    )
    seeds = out / "seeds"
    seeds.mkdir(exist_ok=True)
    sys.path.insert(0, str(HERE.parent))
    from walker_corpus import corpus

    i = 0
    for seed in (0, 1, 2):
        for _, base, buf in corpus(seed):
            if len(buf) > 8000:
                buf = buf[:8000]
            for flags in (0x00, 0x01, 0x12, 0x07, 0x23, 0x49, 0x86):
                start = (len(buf) // 3) if flags & 0x80 else 0
                head = (
                    bytes([flags])
                    + start.to_bytes(2, "big")
                    + (len(buf) // 2).to_bytes(2, "big")
                    + base.to_bytes(8, "big")
                )
                (seeds / f"seed-{i:05d}").write_bytes(head + buf)
                i += 1
    return so


def decode(data: bytes) -> tuple[int, int, int, int, bytes] | None:
    """(flags, start, end, base, buffer). flags: bits 0-1 the entry point (parse_byte_range, the same with
    every item extracted, parse_blocks, records_at at the records a walk found), bits 2-3 head_owned
    (None, True, False), bit 4 stop_at_damage, bit 5 no CRC, bit 6 no fields, bit 7 a range from `start`
    to `end` (else the whole buffer)."""
    if len(data) < HEADER:
        return None
    flags = data[0]
    buf = data[HEADER:]
    n = len(buf)
    start = int.from_bytes(data[1:3], "big") % (n + 1)
    end = int.from_bytes(data[3:5], "big") % (n + 1)
    base = int.from_bytes(data[5:13], "big") & ((1 << 48) - 1)
    if not flags & 0x80:
        start, end = 0, n
    return flags, start, end, base, buf


def main() -> None:
    import atheris

    ext = os.environ.get("MQCTL_FUZZ_EXT")
    if ext:  # the instrumented build, in place of the installed one
        spec = importlib.util.spec_from_file_location("mqctl.store._cwalker", ext)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        sys.modules["mqctl.store._cwalker"] = mod
    sys.path.insert(0, str(HERE.parent))
    import numpy as np
    from walker_corpus import answer, both, using

    from mqctl.store import walker

    cw = sys.modules["mqctl.store._cwalker"] if ext else importlib.import_module("mqctl.store._cwalker")

    def one(data: bytes) -> None:
        d = decode(data)
        if d is None:
            return
        flags, start, end, base, buf = d
        if cw.crc32(buf) != zlib.crc32(buf):
            raise AssertionError(f"crc32 differs from zlib's on {len(buf)} bytes")
        entry = flags & 3
        owned = (None, True, False, None)[(flags >> 2) & 3]
        kw = dict(
            head_owned=owned,
            stop_at_damage=bool(flags & 0x10),
            check_crc=not flags & 0x20,
            fields=not flags & 0x40,
        )
        if entry == 0:

            def run() -> object:
                return answer(walker.parse_byte_range(buf, base, start, end, **kw))
        elif entry == 1:

            def run() -> object:
                return answer(
                    walker.parse_byte_range(
                        buf, base, start, end, head_owned=owned, check_crc=not flags & 0x20, extract=EXTRACT
                    )
                )
        elif entry == 2:
            with using("numpy"):
                from mqctl.store.commitlog import scan_buffer

                chain = scan_buffer(buf, base, keep_chain=True).chain if flags & 0x10 else None

            def run() -> object:
                return [
                    answer(p)
                    for p in walker.parse_blocks(
                        buf,
                        base,
                        start,
                        end,
                        block=2 + start % 37,
                        head_owned=owned,
                        check_crc=not flags & 0x20,
                        known=chain,
                    )
                ]
        else:
            with using("numpy"):
                pos = walker.parse_byte_range(buf, base, 0, len(buf), fields=False).position
            if flags & 0x40 and pos.size:
                pos = pos[::-1].copy()
            if flags & 0x20 and pos.size:  # and a position that is not a record's
                pos = np.append(pos, start)

            def run() -> object:
                return answer(walker.records_at(buf, base, pos, extract=EXTRACT, topics=not flags & 0x10))

        c, ref = both(run)
        if c != ref:
            diff = (
                [k for k in (ref if isinstance(ref, dict) else {}) if c.get(k) != ref.get(k)]
                if isinstance(c, dict)
                else "whole answer"
            )
            raise AssertionError(
                f"the walkers differ (flags 0x{flags:02x}, range {start}-{end}, base "
                f"{base}, {len(buf)} bytes): {diff}\nc: {c!r:.3000}\nnumpy: {ref!r:.3000}"
            )

    atheris.Setup(sys.argv, one)
    atheris.Fuzz()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "build":
        print(build(Path(sys.argv[2])))
    else:
        main()
