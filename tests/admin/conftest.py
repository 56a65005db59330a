"""Admin command tests; helpers live in admin_fixtures.py so imports never clash with other conftests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from admin_fixtures import World, build_world, close_world


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """Three controller nodes and simulated brokers, shared by the tests of one module."""
    w = build_world(tmp_path_factory.mktemp("admin"), 3)
    try:
        yield w
    finally:
        close_world(w)
