"""A real Spark standalone cluster from the installed pyspark: a master and one worker (spark-class, bound
to 127.0.0.1 on free ports), `mqctl recover salvage` and `mqctl analyze commitlog` sent to it with
--master spark://127.0.0.1:PORT as separate processes, and the same files and summaries as the local
engine's. Both daemons are stopped by pid."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pipeline_fixtures import Fleet, spark_missing, tree_hash

from mqctl.testing import free_port

pytestmark = [pytest.mark.spark, pytest.mark.slow]

START_TIMEOUT = 180.0


def _wait_for(pred, what: str, logs: list[Path], timeout: float = START_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.5)
    tails = "\n".join(f"--- {p}\n{p.read_text(errors='replace')[-3000:]}" for p in logs if p.exists())
    raise AssertionError(f"{what} within {timeout:.0f} s\n{tails}")


def _log_has(path: Path, text: str) -> bool:
    return path.exists() and text in path.read_text(errors="replace")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[str]:
    why = spark_missing()
    if why:
        pytest.skip(why)
    import pyspark

    spark_class = Path(pyspark.__file__).parent / "bin" / "spark-class"
    root = tmp_path_factory.mktemp("standalone")
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_HOME": str(spark_class.parent.parent),
           "SPARK_LOG_DIR": str(root), "SPARK_WORKER_DIR": str(root / "work")}
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    procs: list[subprocess.Popen[bytes]] = []
    mlog, wlog = root / "master.log", root / "worker.log"
    try:
        with open(mlog, "wb") as out:
            procs.append(subprocess.Popen(
                [str(spark_class), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                 "--port", str(port), "--webui-port", str(free_port())],
                stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True))
        _wait_for(lambda: _log_has(mlog, "I have been elected leader"), "the master did not start",
                  [mlog])
        # the port the master bound: another process may have taken the free one meanwhile (Spark then
        # binds the next port)
        text = mlog.read_text(errors="replace")
        m = re.search(r"Starting Spark master at (spark://127\.0\.0\.1:\d+)", text)
        assert m, text[-3000:]
        url = m.group(1)
        with open(wlog, "wb") as out:
            procs.append(subprocess.Popen(
                [str(spark_class), "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
                 "--port", str(free_port()), "--webui-port", str(free_port()), "--cores", "2",
                 "--memory", "1g", "--work-dir", str(root / "work")],
                stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True))
        _wait_for(lambda: _log_has(wlog, "Successfully registered with master"),
                  "the worker did not register", [mlog, wlog])
        yield url
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in reversed(procs):
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=30)


def mqctl(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    return subprocess.run([str(Path(sys.executable).with_name("mqctl")), *args], capture_output=True,
                          text=True, timeout=600, env=env)


@pytest.mark.timeout(1200)         # four JVMs (master, worker, two drivers) and executors on a loaded CI box
def test_salvage_and_analyze_on_a_standalone_cluster(cluster: str, fleet: Fleet, tmp_path: Path) -> None:
    stores = fleet.paths("A", "B", "C", "D", "E")
    docs = {}
    for engine in ("local", "cluster"):
        flags = ["--engine", "local"] if engine == "local" else ["--master", cluster]
        r = mqctl("recover", "salvage", *stores, "--out", str(tmp_path / f"salvage-{engine}"), "-o", "json",
                  *flags)
        assert r.returncode == 0, r.stderr
        assert f"engine {'local' if engine == 'local' else 'spark'} (" in r.stderr
        a = mqctl("analyze", "commitlog", *stores, "--out", str(tmp_path / f"analyze-{engine}"), "-o", "json",
                  *flags)
        assert a.returncode == 0, a.stderr
        docs[engine] = (json.loads(r.stdout), json.loads(a.stdout))
    (s_local, a_local), (s_cluster, a_cluster) = docs["local"], docs["cluster"]
    assert s_local["messages"] == 11 and s_local["digest"] == s_cluster["digest"]
    for x, y in ((s_local, s_cluster), (a_local, a_cluster)):
        assert {k: v for k, v in x.items() if k != "out"} == {k: v for k, v in y.items() if k != "out"}
    assert tree_hash(tmp_path / "salvage-local") == tree_hash(tmp_path / "salvage-cluster")
    assert tree_hash(tmp_path / "analyze-local") == tree_hash(tmp_path / "analyze-cluster")
