"""Fixtures for tests/grpc; the helpers live in grpc_fixtures.py (a unique module name, so that
test modules can import them without clashing with other directories' conftest modules)."""

from grpc_fixtures import (  # noqa: F401
    core_server,
    dead_address,
    make_core_node,
    make_follower,
    pki,
    pki_named,
    serve,
)
