"""Small rendering helpers shared by the store-side commands (recover, upgrade, pipeline).

Kept light: rich and json are imported inside the functions, so `mqctl --help` stays fast.
"""

from __future__ import annotations

from typing import Any

import typer

from mqctl.errors import UsageError


def check_output(output: str) -> None:
    if output not in ("table", "json"):
        raise UsageError(f"-o/--output must be table or json, not {output!r}")


def echo_json(doc: Any) -> None:
    import json

    typer.echo(json.dumps(doc, indent=2))


def console() -> Any:
    """A rich console; 200 columns when stdout is not a terminal, so piped tables do not wrap."""
    import sys

    from rich.console import Console

    return Console(highlight=False, width=None if sys.stdout.isatty() else 200)
