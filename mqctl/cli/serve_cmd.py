"""`mqctl serve`: start a controller node (see mqctl.controller.server)."""

from __future__ import annotations

from mqctl.cli import app


@app.command("serve")
def serve() -> None:
    """Run a controller node (single node on loopback by default)."""
    raise NotImplementedError
