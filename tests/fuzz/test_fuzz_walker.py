"""A short run of the record walker's fuzz harness (tests/fuzz/fuzz_walker.py): the compiled walker built
with AddressSanitizer, UBSan and libFuzzer's coverage, every input walked by both walkers and compared.
The long run (>= 10 million inputs) is recorded in bench/README.md."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
RUNS = 3000


def _missing() -> str | None:
    if shutil.which("clang") is None:
        return "no clang here (Debian: apt-get install clang): the harness needs -fsanitize=fuzzer-no-link"
    try:
        import atheris  # noqa: F401
    except ImportError:
        return "atheris is not installed (pip install 'mqctl[dev]')"
    if not Path("/usr/include/zlib.h").exists():
        return "no zlib.h"
    return None


@pytest.mark.skipif(_missing() is not None, reason=str(_missing()))
def test_a_short_fuzz_run_finds_no_difference_and_no_memory_error(tmp_path: Path) -> None:
    import atheris

    sys.path.insert(0, str(HERE))
    from fuzz_walker import build

    so = build(tmp_path)
    (tmp_path / "corpus").mkdir()
    env = dict(
        os.environ,
        LD_PRELOAD=str(Path(atheris.path()) / "asan_with_fuzzer.so"),
        ASAN_OPTIONS="detect_leaks=0",
        MQCTL_FUZZ_EXT=str(so),
    )
    out = subprocess.run(
        [
            sys.executable,
            str(HERE / "fuzz_walker.py"),
            f"-runs={RUNS}",
            "-max_len=4096",
            "-seed=1",
            f"-artifact_prefix={tmp_path}/",
            str(tmp_path / "corpus"),
            str(tmp_path / "seeds"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    done = re.search(r"Done (\d+) runs", out.stderr)
    assert done and int(done.group(1)) >= RUNS, out.stderr[-2000:]
    # the instrumented build was the one walked: libFuzzer saw its coverage counters
    cov = re.findall(r"cov: (\d+)", out.stderr)
    assert cov and int(cov[-1]) > 20, out.stderr[-2000:]


def _libpython() -> list[str] | None:
    import sysconfig

    libdir, ver = sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("LDVERSION")
    if not libdir or not ver or not (Path(libdir) / f"libpython{ver}.so").exists():
        return None
    return [f"-L{libdir}", f"-lpython{ver}", f"-Wl,-rpath,{libdir}"]


@pytest.mark.skipif(shutil.which("clang") is None, reason="no clang here (Debian: apt-get install clang)")
def test_the_c_code_alone_at_libfuzzers_speed(tmp_path: Path) -> None:
    # memory safety of _cwalker.c under ASan and UBSan without Python in the loop (fuzz_walker_c.c); the
    # numpy walker is the oracle of the other harness
    import sysconfig

    link = _libpython()
    if link is None:
        pytest.skip("no shared libpython to link the harness with")
    exe = tmp_path / "fuzz_walker_c"
    subprocess.run(
        [
            "clang",
            "-O1",
            "-g",
            "-fsanitize=fuzzer,address,undefined",
            "-fno-sanitize-recover=all",
            f"-I{sysconfig.get_paths()['include']}",
            str(HERE / "fuzz_walker_c.c"),
            *link,
            "-lz",
            "-o",
            str(exe),
        ],
        check=True,
    )
    sys.path.insert(0, str(HERE.parent))
    from walker_corpus import corpus

    seeds = tmp_path / "seeds"
    seeds.mkdir()
    for i, (_, base, buf) in enumerate(corpus(0)):
        (seeds / f"s{i}").write_bytes(base.to_bytes(8, "big") + (len(buf) // 3).to_bytes(2, "big") + buf)
    (tmp_path / "corpus").mkdir()
    out = subprocess.run(
        [
            str(exe),
            "-runs=30000",
            "-max_len=8192",
            "-seed=1",
            f"-artifact_prefix={tmp_path}/",
            str(tmp_path / "corpus"),
            str(seeds),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    assert re.search(r"Done (\d+) runs", out.stderr), out.stderr[-2000:]
