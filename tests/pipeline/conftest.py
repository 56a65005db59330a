"""Pipeline tests: one SparkSession per test run (skipped cleanly without pyspark or java), the fleet."""

from __future__ import annotations

import pytest
from harness import run_cli
from pipeline_fixtures import HERE, Fleet, build_fleet, spark_missing


@pytest.fixture(scope="session")
def spark():
    why = spark_missing()
    if why:
        pytest.skip(why)
    from mqctl.pipeline.engine import spark_session

    with spark_session("local[2]", log4j=str(HERE / "log4j2.properties"), app_name="mqctl-tests") as s:
        yield s


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> Fleet:
    return build_fleet(tmp_path_factory.mktemp("fleet"))


@pytest.fixture
def cli():
    return run_cli
