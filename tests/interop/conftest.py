"""tests/interop: RocketMQ's own Java classes against `mqctl serve --remoting-port`.

The Java drivers in java/ are compiled once per session, with ``javac -cp "<shared>/rocketmq-java/lib/*"``,
into a temporary directory. <shared> is ../shared beside the repository ($MQCTL_SHARED_DIR to put it
elsewhere). java and javac are on every machine of this project, CI included: these tests are skipped
only when one of them is missing, and then loudly.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from interop_fixtures import CLASSPATH, JAVA_SOURCES, LIB


def _missing() -> str | None:
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            return (
                f"!!! {tool} is not on PATH: the RocketMQ interoperability tests (tests/interop) "
                "cannot run; install Java 17 (every machine of this project has it) !!!"
            )
    if not (LIB / "rocketmq.jar").is_file() or not (LIB / "mqadmin.jar").is_file():
        pytest.fail(
            f"RocketMQ's classes are missing: {LIB} (rocketmq-java beside the repository, or "
            "$MQCTL_SHARED_DIR/rocketmq-java)",
            pytrace=False,
        )
    return None


@pytest.fixture(scope="session")
def java_classes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The compiled drivers of java/ (a directory for java -cp)."""
    why = _missing()
    if why:
        pytest.skip(why)
    out = tmp_path_factory.mktemp("interop-classes")
    sources = sorted(str(p) for p in JAVA_SOURCES.glob("*.java"))
    p = subprocess.run(
        ["javac", "-nowarn", "-encoding", "UTF-8", "-cp", CLASSPATH, "-d", str(out), *sources],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if p.returncode != 0:
        pytest.fail(f"javac failed on {sources}:\n{p.stdout}{p.stderr}", pytrace=False)
    return out


@pytest.fixture(scope="session")
def java_tools() -> None:
    """java on PATH, for mqadmin (no compilation)."""
    why = _missing()
    if why:
        pytest.skip(why)
