"""The node-log check of tests/conftest.py: a traceback in a node's log fails the test that made it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from mqctl import localgroup

TEXT_LOG = """\
mqctl controller: data directory /tmp/x
2025-01-02 03:04:05,678 INFO mqctl.serve: serving gRPC on 127.0.0.1:1
2025-01-02 03:04:06,000 ERROR mqctl.node: ticker error
Traceback (most recent call last):
  File "/x/node.py", line 1, in _tick_loop
    self._leader_work()
KeyError: 'a'

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/x/node.py", line 2, in _tick_loop
ValueError: b
2025-01-02 03:04:07,000 WARNING mqctl.node: an error that is no exception
Exception in thread Thread-3 (run):
Traceback (most recent call last):
  File "/usr/lib/python3.11/threading.py", line 1045, in _bootstrap_inner
RuntimeError: c
mqctl controller: stopped
"""


def test_excerpts_in_the_text_format() -> None:
    found = localgroup.find_log_problems(TEXT_LOG)
    assert len(found) == 2, found
    assert found[0].startswith("2025-01-02 03:04:06,000 ERROR mqctl.node: ticker error\nTraceback")
    assert "KeyError: 'a'" in found[0] and found[0].endswith("ValueError: b"), "chained: one excerpt"
    assert found[1].startswith(
        "2025-01-02 03:04:07,000 WARNING mqctl.node: an error that is no exception\n"
        "Exception in thread Thread-3"
    ) and found[1].endswith("RuntimeError: c")
    assert localgroup.find_log_problems("2025-01-02 03:04:07,000 ERROR mqctl.node: no exception\n") == []
    fatal = (
        "Fatal Python error: _enter_buffered_busy: could not acquire lock for <_io.BufferedWriter "
        "name='<stderr>'> at interpreter shutdown, possibly due to daemon threads\n"
        "Python runtime state: finalizing (tstate=0x1)\n\nThread 0x7f (most recent call first):\n"
        '  File "/x/node.py", line 3 in _tick_loop\n'
    )
    assert localgroup.find_log_problems(fatal) == [fatal.rstrip("\n")]


def test_excerpts_in_the_json_format() -> None:
    record = {
        "ts": 1.0,
        "level": "error",
        "logger": "mqctl.node",
        "msg": "ticker error",
        "exc": "Traceback (most recent call last):\n  File \"x\"\nKeyError: 'a'",
    }
    no_tb = dict(record, exc="KeyError: 'a'")  # exc_info without a traceback is still an exception
    quiet = {"ts": 1.0, "level": "info", "logger": "mqctl.node", "msg": "became leader"}
    text = "\n".join(json.dumps(r) for r in (quiet, record, quiet, no_tb)) + "\n"
    assert localgroup.find_log_problems(text) == [json.dumps(record), json.dumps(no_tb)]


def test_scan_log_reads_each_complete_line_once_and_reports_it(tmp_path, monkeypatch) -> None:
    report = tmp_path / "report.jsonl"
    monkeypatch.setenv(localgroup.NODE_LOG_REPORT_ENV, str(report))
    log = tmp_path / "node0.log"
    log.write_text("2025-01-02 03:04:05,678 INFO x: fine\nTraceback (most recent call last):\n  Fi")
    first = "2025-01-02 03:04:05,678 INFO x: fine\nTraceback (most recent call last):"
    assert localgroup.scan_log(str(log)) == [localgroup.LogProblem(str(log), first)]
    with log.open("a") as fh:
        fh.write('le "x"\nKeyError: 1\n2025-01-02 03:04:06,000 INFO x: fine\n')
    assert localgroup.scan_log(str(log)) == [], "the rest of that traceback is no new one"
    with log.open("a") as fh:
        fh.write("Exception ignored in: <function f>\n")
    assert [p.excerpt for p in localgroup.scan_log(str(log))] == ["Exception ignored in: <function f>"]
    problems, offset = localgroup.read_log_report(str(report))
    assert [p.excerpt for p in problems] == [first, "Exception ignored in: <function f>"]
    assert offset == report.stat().st_size and localgroup.read_log_report(str(report), offset) == ([], offset)


INNER_TESTS = """
import os
import subprocess
import sys

import pytest

from mqctl import localgroup

TB = "2025-01-02 03:04:06,000 ERROR mqctl.node: ticker error\\nTraceback (most recent call last):\\n" \\
     "  File \\"x\\", line 1\\nKeyError: 'boom'\\n"


def _node_log(tmp_path, text):
    log = tmp_path / "node0.log"
    localgroup.watch_log(str(log))  # as Node.start does
    log.write_text("2025-01-02 03:04:05,000 INFO mqctl.serve: serving\\n" + text)
    return log


def test_clean(tmp_path):
    _node_log(tmp_path, "2025-01-02 03:04:06,000 INFO mqctl.serve: stopped\\n")


def test_traceback(tmp_path):
    _node_log(tmp_path, TB)


@pytest.mark.node_log_traceback(match="KeyError: 'boom'", reason="the test writes it")
def test_expected(tmp_path):
    _node_log(tmp_path, TB)


@pytest.mark.node_log_traceback(match="ValueError", reason="another one")
def test_expected_another(tmp_path):
    _node_log(tmp_path, TB)


@pytest.mark.node_log_traceback(match="KeyError")
def test_no_reason(tmp_path):
    _node_log(tmp_path, TB)


def test_child_process_removed_its_log(tmp_path):
    # as `mqctl demo` does: its nodes' logs are scanned when it stops them, then its directory goes
    code = "import sys; from mqctl.localgroup import scan_log; scan_log(sys.argv[1]); os.remove(sys.argv[1])"
    log = tmp_path / "child.log"
    log.write_text(TB)
    subprocess.run([sys.executable, "-c", "import os; " + code, str(log)], check=True)
    assert not log.exists()
"""


def test_the_session_check_fails_exactly_the_tests_with_tracebacks(tmp_path) -> None:
    shutil.copy(Path(__file__).parent / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_inner.py").write_text(INNER_TESTS)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", "-q", "test_inner.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = proc.stdout + proc.stderr
    outcome = {}
    for line in out.splitlines():
        for word in ("PASSED", "ERROR", "FAILED"):
            if line.startswith(word + " "):
                name = line.split()[1].split("::")[-1]
                outcome[name] = outcome.get(name, "") + word[0]
    assert outcome == {
        "test_clean": "P",
        "test_traceback": "PE",
        "test_expected": "P",
        "test_expected_another": "PE",
        "test_no_reason": "PE",
        "test_child_process_removed_its_log": "PE",
    }, out
    assert "KeyError: 'boom'" in out and "node0.log ---" in out and "child.log ---" in out, out
    assert "node_log_traceback needs match=<regex> and reason=" in out, out
