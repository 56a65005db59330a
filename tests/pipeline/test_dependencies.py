"""Without pyspark or java the pipeline commands on Spark, and without numpy or pyarrow any pipeline
command, exit 9 with one line saying what to install (real `python -m mqctl` processes; no Spark is
started)."""

from __future__ import annotations

import os
import subprocess
import sys

BLOCK = """
import sys
BLOCKED = sys.argv.pop(1).split(",")
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"No module named {name!r}")
sys.meta_path.insert(0, Block())
sys.argv = ["mqctl", *sys.argv[1:]]
from mqctl.cli import main
main()
"""


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, timeout=60)


def test_missing_pyspark_says_how_to_install(tmp_path) -> None:
    p = run(
        [
            "-c",
            BLOCK,
            "pyspark",
            "recover",
            "salvage",
            str(tmp_path),
            "--out",
            str(tmp_path / "o"),
            "--engine",
            "spark",
            "-q",
        ],
        dict(os.environ),
    )
    assert p.returncode == 9, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and p.stderr.startswith("mqctl: error: ")
    assert "needs pyspark" in p.stderr and "pip install 'mqctl[spark]'" in p.stderr
    assert not (tmp_path / "o").exists()


def test_missing_numpy_or_pyarrow_says_how_to_install(tmp_path) -> None:
    for blocked, args in (
        ("numpy", ["analyze", "commitlog", str(tmp_path)]),
        ("pyarrow", ["analyze", "commitlog", str(tmp_path), "--out", str(tmp_path / "o")]),
        ("pyarrow", ["recover", "salvage", str(tmp_path), "--out", str(tmp_path / "o")]),
    ):
        p = run(["-c", BLOCK, blocked, *args], dict(os.environ))
        assert p.returncode == 9, p.stderr
        assert len(p.stderr.strip().splitlines()) == 1 and p.stderr.startswith("mqctl: error: ")
        assert f"needs {blocked}" in p.stderr and "pip install 'mqctl[spark]'" in p.stderr
        assert not (tmp_path / "o").exists()


def test_missing_java_says_what_spark_needs(tmp_path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(tmp_path)  # no java here (the interpreter is called by absolute path)
    p = run(["-m", "mqctl", "analyze", "commitlog", str(tmp_path), "--engine", "spark", "-q"], env)
    assert p.returncode == 9, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
    assert "Java 17" in p.stderr or "pip install 'mqctl[spark]'" in p.stderr
    env["JAVA_HOME"] = str(tmp_path / "jdk")
    p = run(["-m", "mqctl", "analyze", "commitlog", str(tmp_path), "--engine", "spark", "-q"], env)
    assert p.returncode == 9 and ("has no bin/java" in p.stderr or "mqctl[spark]" in p.stderr), p.stderr
