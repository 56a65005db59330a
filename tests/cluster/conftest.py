"""Fixtures for tests that run real `mqctl serve` processes on loopback ports."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mqctl.localgroup import LocalCluster


@pytest.fixture
def single(tmp_path) -> Iterator[LocalCluster]:
    cluster = LocalCluster(str(tmp_path), size=1)
    with cluster:
        cluster.start()
        yield cluster


@pytest.fixture
def trio(tmp_path) -> Iterator[LocalCluster]:
    cluster = LocalCluster(str(tmp_path), size=3)
    with cluster:
        cluster.start()
        yield cluster
