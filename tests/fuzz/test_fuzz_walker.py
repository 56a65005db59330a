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
    env = dict(os.environ, LD_PRELOAD=str(Path(atheris.path()) / "asan_with_fuzzer.so"),
               ASAN_OPTIONS="detect_leaks=0", MQCTL_FUZZ_EXT=str(so))
    out = subprocess.run([sys.executable, str(HERE / "fuzz_walker.py"), f"-runs={RUNS}", "-max_len=4096",
                          "-seed=1", f"-artifact_prefix={tmp_path}/", str(tmp_path / "corpus"),
                          str(tmp_path / "seeds")], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-4000:]
    done = re.search(r"Done (\d+) runs", out.stderr)
    assert done and int(done.group(1)) >= RUNS, out.stderr[-2000:]
    # the instrumented build was the one walked: libFuzzer saw its coverage counters
    cov = re.findall(r"cov: (\d+)", out.stderr)
    assert cov and int(cov[-1]) > 20, out.stderr[-2000:]
