from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import harness
import pytest
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
    """``with unchanged(path): ...`` fails when the block wrote anything under path (harness.unchanged)."""
    return harness.unchanged
