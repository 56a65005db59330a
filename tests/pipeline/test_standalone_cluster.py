"""A real Spark standalone cluster from the installed pyspark: a master and one worker (spark-class, bound
to 127.0.0.1 on free ports), `mqctl recover salvage` and `mqctl analyze commitlog` sent to it with
--master spark://127.0.0.1:PORT as separate processes, and the same files and summaries as the local
engine's. Both daemons are stopped by pid."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import spark_standalone, tree_hash
from pipeline_fixtures import Fleet, spark_missing

pytestmark = [pytest.mark.spark, pytest.mark.slow]

START_TIMEOUT = 180.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[str]:
    why = spark_missing()
    if why:
        pytest.skip(why)
    with spark_standalone(tmp_path_factory.mktemp("standalone"), timeout=START_TIMEOUT) as (url, _):
        yield url


def mqctl(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    return subprocess.run(
        [str(Path(sys.executable).with_name("mqctl")), *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )


@pytest.mark.timeout(1200)  # four JVMs (master, worker, two drivers) and executors on a loaded CI box
def test_salvage_and_analyze_on_a_standalone_cluster(cluster: str, fleet: Fleet, tmp_path: Path) -> None:
    stores = fleet.paths("A", "B", "C", "D", "E")
    docs = {}
    for engine in ("local", "cluster"):
        flags = ["--engine", "local"] if engine == "local" else ["--master", cluster]
        r = mqctl(
            "recover", "salvage", *stores, "--out", str(tmp_path / f"salvage-{engine}"), "-o", "json", *flags
        )
        assert r.returncode == 0, r.stderr
        assert f"engine {'local' if engine == 'local' else 'spark'} (" in r.stderr
        a = mqctl(
            "analyze",
            "commitlog",
            *stores,
            "--out",
            str(tmp_path / f"analyze-{engine}"),
            "-o",
            "json",
            *flags,
        )
        assert a.returncode == 0, a.stderr
        docs[engine] = (json.loads(r.stdout), json.loads(a.stdout))
    (s_local, a_local), (s_cluster, a_cluster) = docs["local"], docs["cluster"]
    assert s_local["messages"] == 11 and s_local["digest"] == s_cluster["digest"]
    for x, y in ((s_local, s_cluster), (a_local, a_cluster)):
        assert {k: v for k, v in x.items() if k != "out"} == {k: v for k, v in y.items() if k != "out"}
    for kind in ("salvage", "analyze"):
        assert tree_hash(tmp_path / f"{kind}-local", metadata=False) == tree_hash(
            tmp_path / f"{kind}-cluster", metadata=False
        )
