from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from recover_fixtures import tree_hash
from typer.testing import CliRunner

from mqctl.errors import MqctlError


@dataclass
class Run:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def run_cli(*args: str, input: str | None = None) -> Run:
    """Invoke `mqctl ...` in-process the way mqctl.cli.main does: an MqctlError becomes one stderr line
    `mqctl: error: ...` and its exit code; any other exception fails the test (a traceback)."""
    from mqctl.cli import app

    res = CliRunner().invoke(app, list(args), input=input)
    exc = res.exception
    if isinstance(exc, MqctlError):
        return Run(exc.exit_code, res.stdout, f"mqctl: error: {exc}\n")
    if exc is not None and not isinstance(exc, SystemExit):
        raise exc
    return Run(res.exit_code, res.stdout, res.stderr if res.stderr_bytes is not None else "")


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture
def unchanged():
    from contextlib import contextmanager

    @contextmanager
    def check(root: Path):
        before = tree_hash(root)
        yield
        assert tree_hash(root) == before, "the command changed the store"

    return check
