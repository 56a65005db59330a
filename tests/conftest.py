"""Session-wide checks for every test that starts `mqctl serve` nodes (mqctl.localgroup).

A traceback in a node's log is a bug. After each test (its teardown included, so that what nodes
log while they stop counts too) the logs of every node started since the last check are scanned,
those of nodes started by child processes (`mqctl demo`, `mqctl sim`) included; a Python traceback
or a logged exception fails the test with the excerpt and the log's path.

The opt-out is explicit, rare and reviewed: a test that provokes a traceback on purpose says which
one and why,

    @pytest.mark.node_log_traceback(match=r"ValueError: the injected fault", reason="...")

and only excerpts that match `match` (re.search) are then accepted; any other still fails it.

In parallel (pytest-xdist; tools/test runs `-n 4 --dist loadfile`): the tests of one file run on one
worker in their order (its module-scoped fixtures start once), files that share a session fixture run on
one worker too (XDIST_GROUPS), and the longest files are handed out first (LONGEST_FIRST) so that none of
them starts last. Each worker has its own node-log report (pytest_configure runs in each).
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Generator

import pytest

from mqctl import localgroup

_report = {"path": "", "offset": 0}

# files that share a session-scoped fixture: one worker runs them all (one Spark session, not one per worker)
XDIST_GROUPS = {
    "tests/pipeline/test_engine_choice.py": "spark-session",
    "tests/pipeline/test_salvage_replicas.py": "spark-session",
    "tests/pipeline/test_spark_jobs.py": "spark-session",
}
# the files (or groups) that take longest, longest first (serial run on the 2-core machine, 2026-11-27):
# handed to the workers first, so that the run does not end waiting for one of them
LONGEST_FIRST = [
    "tests/e2e/test_rocketmq_broker_set.py",
    "spark-session",
    "tests/pipeline/test_standalone_cluster.py",
    "tests/e2e/test_rocketmq_demo.py",
    "tests/interop/test_rocketmq_mqadmin.py",
    "tests/raft/test_small_fs.py",
    "tests/cluster/test_leader_kills.py",
    "tests/interop/test_remoting_tls_acl_interop.py",
    "tests/raft/test_power_loss.py",
    "tests/sim/test_chaos.py",
    "tests/recover/test_rocketmq_broker_store.py",
    "tests/e2e/test_rocketmq_metadata.py",
]


def pytest_report_header(config: pytest.Config) -> str:
    """The commitlog record walker the tests use (tools/test runs the record tests with each, issue 32)."""
    try:
        from mqctl.store import walker
    except ImportError as exc:
        return f"record walker: none ({exc})"
    return f"record walker: {walker.describe()}"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "node_log_traceback(match, reason): this test expects a traceback matching `match` "
        "in a node's log, because of `reason` (both required; see tests/conftest.py)",
    )
    if hasattr(config, "workerinput"):
        # an xdist worker starts with COLUMNS=80 and LINES=24 in its environment; without them the CLI's
        # tables are as wide as when piped, here as in a serial run (and in the mqctl it starts)
        for var in ("COLUMNS", "LINES"):
            os.environ.pop(var, None)
    fd, path = tempfile.mkstemp(prefix="mqctl-node-log-report-", suffix=".jsonl")
    os.close(fd)
    _report.update(path=path, offset=0)
    os.environ[localgroup.NODE_LOG_REPORT_ENV] = path  # inherited by child processes (demo, sim)


def pytest_unconfigure(config: pytest.Config) -> None:
    if _report["path"]:
        os.environ.pop(localgroup.NODE_LOG_REPORT_ENV, None)
        try:
            os.unlink(str(_report["path"]))
        except OSError:
            pass


def _group(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0]
    return XDIST_GROUPS.get(path, path)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """--dist loadfile, with the files of an XDIST_GROUPS entry as one unit. (pytest-xdist's own
    loadgroup marks do not group under pytest 9, which no longer reads the node ids xdist rewrites.)"""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class FileGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _group(nodeid)

    return FileGroups(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On an xdist worker the groups of LONGEST_FIRST go first, in that order, each file's tests keeping
    theirs (the scheduler hands out units in the order of their first test: --no-loadscope-reorder)."""
    if hasattr(config, "workerinput"):
        rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
        items.sort(key=lambda item: rank.get(_group(item.nodeid), len(rank)))


def _allowed(item: pytest.Item) -> list[re.Pattern[str]]:
    patterns = []
    for mark in item.iter_markers("node_log_traceback"):
        match, reason = mark.kwargs.get("match"), mark.kwargs.get("reason")
        if mark.args or not match or not reason or not str(reason).strip():
            pytest.fail(
                f"{item.nodeid}: node_log_traceback needs match=<regex> and "
                "reason=<why this traceback is expected>, and nothing else",
                pytrace=False,
            )
        patterns.append(re.compile(match))
    return patterns


def _node_log_problems() -> list[localgroup.LogProblem]:
    localgroup.scan_watched_logs()  # appends what it finds to the report, with what child processes found
    problems, _report["offset"] = localgroup.read_log_report(str(_report["path"]), int(_report["offset"]))
    return problems


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    try:
        return (yield)
    finally:
        found = _node_log_problems()
        allowed = _allowed(item)
        problems = [p for p in found if not any(a.search(p.excerpt) for a in allowed)]
        if problems:
            pytest.fail(
                f"{len(problems)} traceback(s) or logged exception(s) in mqctl serve node logs (a traceback "
                "in a node's log is a bug; an expected one needs @pytest.mark.node_log_traceback, see "
                "tests/conftest.py):\n" + "\n".join(str(p) for p in problems),
                pytrace=False,
            )


@pytest.fixture(scope="session")
def rocketmq_config(tmp_path_factory: pytest.TempPathFactory) -> object:
    """rocketmq_fixtures.ConfigDriver: config/ files written and read by RocketMQ's own managers."""
    from rocketmq_fixtures import config_driver

    return config_driver(tmp_path_factory.mktemp("config-driver"))
