"""The `mqctl` command line. It parses and renders; decisions live in the library modules.

Only typer is imported here at module level: grpc, pysyncobj, pyspark, sqlite_utils and
rich tables are imported inside the commands that need them so `mqctl --help` stays fast.
"""

from __future__ import annotations

import sys

import typer

from mqctl.errors import MqctlError

app = typer.Typer(
    name="mqctl",
    help="Controller, inspection and recovery tools for RocketMQ-style master/slave broker sets.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _register() -> None:
    # Each module adds its commands to `app`; kept apart so features do not edit one file.
    from mqctl.cli import recover_cmd, serve_cmd  # noqa: F401


_register()


def main() -> None:
    """Console entry point: every MqctlError becomes one line on stderr and its exit code."""
    try:
        app()
    except MqctlError as exc:
        print(f"mqctl: error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        print("mqctl: interrupted", file=sys.stderr)
        sys.exit(130)
