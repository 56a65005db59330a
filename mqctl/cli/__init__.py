"""The `mqctl` command line. It parses and renders; decisions live in the library modules.

Only typer is imported here at module level: grpc, pysyncobj, pyspark, sqlite_utils and
rich tables are imported inside the commands that need them so `mqctl --help` stays fast.
"""

from __future__ import annotations

import os
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


_debug = False


@app.callback()
def _global_options(
    debug: bool = typer.Option(False, "--debug", envvar="MQCTL_DEBUG",
                               help="show a traceback with errors (and debug logging)"),
) -> None:
    """Controller, inspection and recovery tools for RocketMQ-style master/slave broker sets."""
    global _debug
    _debug = debug
    if debug:
        import logging

        logging.basicConfig(level=logging.DEBUG, format="%(asctime)s %(name)s %(levelname)s %(message)s")


def _register() -> None:
    """Import every `mqctl/cli/*_cmd.py`: each adds its commands to `app`, so a feature adds a
    module and never edits this file. Order: serve, then the rest alphabetically."""
    import importlib
    import pkgutil

    names = sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name.endswith("_cmd"))
    names.sort(key=lambda n: n != "serve_cmd")
    for name in names:
        importlib.import_module(f"mqctl.cli.{name}")


_register()


def main() -> None:
    """Console entry point: every MqctlError becomes one line on stderr and its exit code."""
    args = sys.argv[1:]
    if "--debug" in args[1:] and "--" not in args[: args.index("--debug")]:
        args.remove("--debug")  # accepted after the command name too: `mqctl getSyncStateSet --debug`
        args.insert(0, "--debug")
    try:
        app(args=args)
    except MqctlError as exc:
        if _debug:
            import traceback

            traceback.print_exc()
        print(f"mqctl: error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        print("mqctl: interrupted", file=sys.stderr)
        sys.exit(130)
    except Exception as exc:  # a bug: one line, the traceback with --debug
        if _debug or os.environ.get("MQCTL_DEBUG"):
            raise
        print(f"mqctl: error: internal error: {type(exc).__name__}: {exc} (run with --debug for "
              "the traceback)", file=sys.stderr)
        sys.exit(1)
