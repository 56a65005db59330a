"""The wheel and the sdist, as CI builds them (`python -m build`, in its isolated build environment), and the
wheel installed into a fresh venv: `mqctl --version`, `mqctl completion install` and `man mqctl` work there,
from what the wheel holds and nothing of this checkout.

The fresh venv gets the wheel's mqctl only (`pip install --no-deps --no-index`); its dependencies (grpcio,
typer, ...) are this venv's, by a path entry after its own site-packages (not this venv's .pth files, so not
this checkout's editable mqctl): the same versions pip would install, without the network or a minute of
installing them again."""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

import mqctl

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "setup.py", "README.md", "mqctl", "man", "completions")


def run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600, **kwargs)  # type: ignore[call-overload]
    assert proc.returncode == 0, f"{argv}: {proc.stdout[-3000:]}{proc.stderr[-3000:]}"
    return proc  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`python -m build` on a copy of the sources (the build writes mqctl.egg-info and build/ beside them)."""
    pytest.importorskip("build")
    src = tmp_path_factory.mktemp("src")
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(path, src / name)
    out = tmp_path_factory.mktemp("dist")
    run([sys.executable, "-m", "build", "--outdir", str(out), str(src)])
    return out


def test_the_sdist_and_the_wheel_hold_the_package_the_man_pages_and_the_completions(dist: Path) -> None:
    version = mqctl.__version__
    (wheel,) = dist.glob(f"mqctl-{version}-*.whl")
    (sdist,) = dist.glob(f"mqctl-{version}.tar.gz")
    names = set(zipfile.ZipFile(wheel).namelist())
    pages = sorted(p.name for p in (ROOT / "man/man1").glob("*.1"))
    data = f"mqctl-{version}.data/data/share"
    assert {f"{data}/man/man1/{p}" for p in pages} <= names
    assert {
        f"{data}/bash-completion/completions/mqctl.bash",
        f"{data}/fish/vendor_completions.d/mqctl.fish",
        f"{data}/zsh/site-functions/_mqctl",
    } <= names
    assert {"mqctl/v1/controller.proto", "mqctl/py.typed", "mqctl/sim/RocketMQDriver.java"} <= names
    with tarfile.open(sdist) as tar:
        members = {m.name.split("/", 1)[1] for m in tar.getmembers() if "/" in m.name}
    assert {"pyproject.toml", "README.md", "man/man1/mqctl.1", "completions/mqctl.bash"} <= members


def test_the_wheel_in_a_fresh_venv(dist: Path, tmp_path: Path) -> None:
    (wheel,) = dist.glob("mqctl-*.whl")
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            "--disable-pip-version-check",
            str(wheel),
        ]
    )
    purelib = run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
    ).stdout.strip()
    ours = [p for p in site.getsitepackages() if p.endswith("site-packages")]
    Path(purelib, "zz-dependencies.pth").write_text("\n".join(ours) + "\n")
    home = tmp_path / "home"
    home.mkdir()
    env = {
        "PATH": f"{venv / 'bin'}:/usr/bin:/bin",
        "HOME": str(home),
        "SHELL": "/bin/bash",
        "LANG": "C.UTF-8",
    }
    where = run(
        [str(python), "-P", "-c", "import mqctl; print(mqctl.__file__)"], env=env, cwd=tmp_path
    ).stdout
    assert where.startswith(purelib), where  # the wheel's package, not this checkout's
    mqctl_bin = venv / "bin" / "mqctl"
    version = run([str(mqctl_bin), "--version"], env=env, cwd=tmp_path).stdout.splitlines()
    assert version[0] == f"mqctl {mqctl.__version__}"
    # a wheel built with a C compiler holds the compiled record walker (a platform wheel), one built
    # without it the numpy walker only (py3-none-any)
    walker = "c" if not wheel.name.endswith("-none-any.whl") else "numpy"
    assert version[1].startswith(f"record walker: {walker} "), version

    man = shutil.which("man")
    if man is not None:
        # from the wheel's data files already: man-db searches ../share/man of each directory on $PATH
        page = run([man, "-P", "cat", "mqctl-serve"], env=env, cwd=tmp_path).stdout
        assert "--listen" in page and "--metrics-address" in page

    installed = run([str(mqctl_bin), "completion", "install"], env=env, cwd=tmp_path).stdout
    script = home / ".local/share/bash-completion/completions/mqctl"
    assert f"wrote {script}" in installed and f"{venv}/share/man/man1" in installed
    # bash loads it: `mqctl <TAB>` calls mqctl's own completion
    complete = run(["bash", "-c", f"source {script} && complete -p mqctl"], env=env, cwd=tmp_path).stdout
    assert complete.strip().endswith(" mqctl") and "-F " in complete
    words = run(
        [str(mqctl_bin)],
        env={**env, "_MQCTL_COMPLETE": "complete_bash", "COMP_WORDS": "mqctl ser", "COMP_CWORD": "1"},
        cwd=tmp_path,
    ).stdout.split()
    assert "serve" in words
    if man is None:
        pytest.skip("man is not installed (Debian's man-db): the rest of the test ran")
    page = run([man, "-P", "cat", "mqctl"], env=env, cwd=tmp_path).stdout
    assert "mqctl" in page and "serve" in page
    assert os.path.exists(venv / "share/man/man1/mqctl-electMaster.1")
