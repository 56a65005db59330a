"""`mqctl recover ...`: offline store inspection and manual recovery."""

from __future__ import annotations

import typer

from mqctl.cli import app

recover_app = typer.Typer(help="Inspect broker store directories and plan a manual recovery.",
                          no_args_is_help=True)
app.add_typer(recover_app, name="recover")
