"""Project-level checks: fast start, committed generated code, lint."""

from __future__ import annotations

import filecmp
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("grpc", "pysyncobj", "pyspark", "sqlite_utils", "yaml")


def test_help_imports_no_heavy_package() -> None:
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", "import mqctl.cli"],
                          capture_output=True, text=True, check=True, cwd=ROOT)
    modules = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if "|" in line}
    assert not [m for m in modules if m.split(".")[0] in HEAVY]
    out = subprocess.run([sys.executable, "-m", "mqctl", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "serve" in out.stdout


def test_generated_grpc_code_is_up_to_date(tmp_path) -> None:
    pytest.importorskip("grpc_tools")
    work = tmp_path / "gen"
    (work / "mqctl" / "v1").mkdir(parents=True)
    shutil.copy(ROOT / "mqctl/v1/controller.proto", work / "mqctl/v1/controller.proto")
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I", ".", "--python_out=.",
                    "--pyi_out=.", "--grpc_python_out=.", "mqctl/v1/controller.proto"],
                   cwd=work, check=True)
    for name in ("controller_pb2.py", "controller_pb2.pyi", "controller_pb2_grpc.py"):
        assert filecmp.cmp(work / "mqctl/v1" / name, ROOT / "mqctl/v1" / name, shallow=False), (
            f"mqctl/v1/{name} differs from what the .proto generates: run tools/gen-proto and commit")


def test_ruff_clean() -> None:
    ruff = shutil.which("ruff", path=os.path.dirname(sys.executable)) or shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff not installed")
    proc = subprocess.run([ruff, "check", "mqctl", "tests", "bench"], capture_output=True, text=True,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_strict_on_the_stores_the_api_and_the_cli() -> None:
    """mqctl/store, mqctl/recover, mqctl/api.py and mqctl/cli are typed (`mypy --strict`; the modules
    they import are checked by their own tests, hence --follow-imports=silent)."""
    pytest.importorskip("mypy")
    proc = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental",
                           "--follow-imports=silent", "mqctl/store", "mqctl/recover", "mqctl/api.py",
                           "mqctl/cli"],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_strict_on_the_controller() -> None:
    """The controller, its records, the method table and the Raft layer are typed (`mypy --strict`)."""
    pytest.importorskip("mypy")
    proc = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental",
                           "mqctl/controller", "mqctl/methods.py", "mqctl/raft"],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
