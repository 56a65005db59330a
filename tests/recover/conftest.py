from __future__ import annotations

import harness
import pytest


@pytest.fixture
def cli():
    return harness.run_cli


@pytest.fixture
def unchanged():
    """``with unchanged(path): ...`` fails when the block wrote anything under path (harness.unchanged)."""
    return harness.unchanged
