"""Fixtures for tests/broker: real `mqctl serve` processes (mqctl.localgroup.LocalCluster)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mqctl.localgroup import LocalCluster


@pytest.fixture(scope="module")
def controller(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """One controller node shared by a module (tests use distinct broker set names)."""
    cluster = LocalCluster(str(tmp_path_factory.mktemp("ctl1")), size=1)
    with cluster:
        cluster.start()
        yield cluster


@pytest.fixture
def trio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A three-node controller group."""
    cluster = LocalCluster(str(tmp_path_factory.mktemp("ctl3")), size=3)
    with cluster:
        cluster.start()
        yield cluster
