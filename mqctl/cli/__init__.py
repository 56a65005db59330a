"""The `mqctl` command line. It parses and renders; decisions live in the library modules.

Start-up time is a feature (bench/bench_startup.py): only typer is imported here at module level;
grpc, pysyncobj, pyspark, sqlite_utils and rich are imported inside the commands that need them,
``run`` imports only the command module the command line names (COMMAND_MODULES), prints help
without parsing options, and converts option values without pydantic (mqctl.cli.params).

``root_app`` is the Typer every ``mqctl/cli/*_cmd.py`` adds its commands to; ``app`` is the same
Typer with every command loaded (for CliRunner and the doc generator).
"""

from __future__ import annotations

import atexit
import copy
import importlib
import inspect
import os
import sys
import threading
import traceback
from typing import Any

import typer
from typer._click.exceptions import ClickException, NoArgsIsHelpError
from typer._completion_classes import completion_init
from typer.main import get_command

from mqctl import __version__
from mqctl.cli import common, params
from mqctl.errors import EXIT_INTERNAL, EXIT_USAGE, ControllerError, MqctlError

# Plain help text (click's formatter), not rich panels: rich and its markdown parser cost more start-up
# time than all of typer, and help is read in terminals, pipes and man pages alike.
_SETTINGS: dict[str, Any] = {
    "rich_markup_mode": None,
    "pretty_exceptions_enable": False,
    "context_settings": {"help_option_names": ["-h", "--help"]},
}

root_app = typer.Typer(
    name="mqctl",
    help="Controller, inspection and recovery tools for RocketMQ-style master/slave broker sets.",
    no_args_is_help=True,
    add_completion=False,  # `mqctl completion ...` instead: no two options and their imports per call
    **_SETTINGS,
)


def sub_app(name: str, help: str) -> typer.Typer:
    """A command group (``mqctl recover ...``) with the same settings as the root, added to it."""
    group = typer.Typer(help=help, no_args_is_help=True, **_SETTINGS)
    root_app.add_typer(group, name=name)
    return group


# The module(s) that define each top-level command (hidden aliases included). Only an optimisation:
# a name missing here makes `run` import every module, and tests/cli checks the table is complete.
COMMAND_MODULES: dict[str, tuple[str, ...]] = {
    "serve": ("serve_cmd",),
    **dict.fromkeys(
        (
            "getSyncStateSet",
            "get-sync-state-set",
            "getBrokerEpoch",
            "get-broker-epoch",
            "getControllerMetaData",
            "get-controller-metadata",
            "electMaster",
            "elect-master",
            "cleanBrokerMetadata",
            "clean-broker-metadata",
            "getControllerConfig",
            "get-controller-config",
            "updateControllerConfig",
            "update-controller-config",
            "quorum",
        ),
        ("admin_cmd",),
    ),
    "demo": ("sim_cmd",),
    "sim": ("sim_cmd",),
    "recover": ("recover_cmd", "pipeline_cmd", "recover_guard_cmd"),
    "analyze": ("pipeline_cmd",),
    "upgrade": ("upgrade_cmd",),
    "metadata": ("metadata_cmd",),
    "check": ("check_cmd",),
    "completion": ("completion_cmd",),
    **dict.fromkeys(("history", "failover", "switchover", "rebalance"), ("decisions_cmd",)),
    "health": ("health_cmd",),
    "snapshot": ("snapshot_cmd",),
}


def command_modules() -> list[str]:
    """Every `mqctl/cli/*_cmd.py`: serve first (it leads the help), then the rest alphabetically."""
    names = sorted(f[:-3] for f in os.listdir(os.path.dirname(__file__)) if f.endswith("_cmd.py"))
    names.sort(key=lambda n: n != "serve_cmd")
    return names


def load_commands(modules: list[str] | tuple[str, ...] | None = None) -> typer.Typer:
    """Import command modules (all by default): each adds its commands to ``root_app``, so a feature
    adds a module and this file only names it in COMMAND_MODULES."""

    for name in command_modules() if modules is None else modules:
        importlib.import_module(f"mqctl.cli.{name}")
    return root_app


def __getattr__(name: str) -> Any:
    if name == "app":  # `from mqctl.cli import app`: the whole CLI
        return load_commands()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_debug = False


def debug_enabled() -> bool:
    """--debug (or MQCTL_DEBUG) was given."""
    return _debug


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"mqctl {__version__}")
        try:  # numpy is imported for this line only (the walker module needs it)
            from mqctl.store import walker  # lazy: optional numpy
        except ImportError as exc:
            typer.echo(f"record walker: none ({exc})")
        else:
            typer.echo(f"record walker: {walker.describe()}")
        raise typer.Exit(0)


@root_app.callback()
def _global_options(
    debug: bool = typer.Option(
        False, "--debug", envvar="MQCTL_DEBUG", help="show a traceback with errors (and debug logging)"
    ),
    version: bool = typer.Option(
        False,
        "--version",
        "-V",
        is_eager=True,
        expose_value=False,
        callback=_print_version,
        help="print mqctl's version and exit",
    ),
) -> None:
    """Controller, inspection and recovery tools for RocketMQ-style master/slave broker sets."""
    global _debug
    _debug = debug
    if debug:
        import logging  # lazy: start-up

        logging.basicConfig(level=logging.DEBUG, format="%(asctime)s %(name)s %(levelname)s %(message)s")


def output_format(args: list[str]) -> str | None:
    """The -o/--output value (lower case) given on the command line, "json" for the simulator's
    --json, None when there is none. Read from argv, not from the parsed options, so that an error
    before or during parsing is still reported in the format the caller asked for."""
    found = None
    it = iter(args)
    for tok in it:
        if tok == "--":
            break
        if tok in ("-o", "--output"):
            found = next(it, "")
        elif tok.startswith("--output="):
            found = tok[len("--output=") :]
        elif tok.startswith("-o") and not tok.startswith("--") and len(tok) > 2:
            found = tok[2:].lstrip("=")
        elif tok == "--json":
            found = "json"
    return found.lower() if found is not None else None


def _usage_line(exc: Exception) -> str:
    ctx = getattr(exc, "ctx", None)
    if ctx is None:
        return ""
    help_hint = f" (see '{ctx.command_path} {ctx.help_option_names[0]}')" if ctx.help_option_names else ""
    usage: str = ctx.get_usage()
    return usage.strip().replace("Usage:", "usage:", 1) + help_hint


def fail(
    message: str, exit_code: int, args: list[str], *, controller_code: int | None = None, usage: str = ""
) -> int:
    """Report an error: one line on stderr (after the usage line of a usage error) and, when the
    command was asked for JSON or YAML and printed no document yet, the error as that document on
    stdout (docs/admin.md). Returns the exit code."""

    fmt = output_format(args)
    if fmt in ("json", "yaml") and not common.document_printed():
        common.print_document(
            {"version": 1, "error": common.error_doc(message, exit_code, controller_code)}, fmt
        )
    if usage:
        print(usage, file=sys.stderr)
    print(f"mqctl: error: {message}", file=sys.stderr)
    return exit_code


def _first_command(args: list[str]) -> str | None:
    """The top-level command the arguments name (root options are flags: none takes a value)."""
    for tok in args:
        if tok == "--":
            return None
        if not tok.startswith("-"):
            return tok
    return None


def _wants_help(args: list[str]) -> bool:
    return any(a in ("-h", "--help") for a in args[: args.index("--") if "--" in args else len(args)])


def _help(root: Any, args: list[str]) -> int | None:
    """Print the help of the (sub)command the arguments name, without parsing its options (no value
    is converted or checked). None when a command name is unknown: the parser then says so."""
    cmd, ctx = root, root.context_class(root, info_name="mqctl", **root.context_settings)
    for tok in args:
        if tok == "--":
            break
        commands = getattr(cmd, "commands", None)
        if tok.startswith("-") or commands is None:
            continue  # an option, or an argument of the command whose help this is
        if tok not in commands:
            return None
        cmd = commands[tok]
        ctx = cmd.context_class(cmd, info_name=tok, parent=ctx, **cmd.context_settings)
    typer.echo(cmd.get_help(ctx))
    return 0


def _only(name: str) -> typer.Typer:
    """``root_app`` with just the command or group ``name``: typer builds the parameters of what runs,
    not of a hundred commands (it reads every signature to do so)."""

    part = copy.copy(root_app)
    part.registered_commands = [c for c in root_app.registered_commands if c.name == name]
    part.registered_groups = [g for g in root_app.registered_groups if g.name == name]
    return part


def _no_parameters() -> None:
    """A stand-in callback (see _overview)."""


def _overview() -> typer.Typer:
    """``root_app`` for `mqctl --help`: every visible command and group with its help and nothing
    else (no parameters, no subcommands, no hidden alias), which is all that help shows."""

    part = copy.copy(root_app)
    part.registered_commands = []
    for c in root_app.registered_commands:
        if not c.hidden:
            stub = copy.copy(c)
            stub.help, stub.callback = c.help or inspect.getdoc(c.callback), _no_parameters
            part.registered_commands.append(stub)
    part.registered_groups = []
    for g in root_app.registered_groups:
        group = copy.copy(g)
        if g.typer_instance is not None:
            group.typer_instance = copy.copy(g.typer_instance)
            group.typer_instance.registered_commands, group.typer_instance.registered_groups = [], []
        part.registered_groups.append(group)
    return part


def run(argv: list[str] | None = None) -> int:
    """Run ``mqctl ARGS``; return the exit code. Every error is one line on stderr with its exit code
    (docs/codes.md), and a JSON/YAML document too with -o json|yaml."""

    common.new_document()
    args = list(sys.argv[1:] if argv is None else argv)
    if "--debug" in args[1:] and "--" not in args[: args.index("--debug")]:
        args.remove("--debug")  # accepted after the command name too: `mqctl getSyncStateSet --debug`
        args.insert(0, "--debug")
    first = _first_command(args)
    completing = any(k.startswith("_MQCTL_COMPLETE") for k in os.environ)
    known = first in COMMAND_MODULES and not completing
    load_commands(COMMAND_MODULES[first] if known and first is not None else None)
    if _wants_help(args) and not completing:
        shown = _help(get_command(_only(first) if known and first is not None else _overview()), args)
        if shown is not None:
            return shown
    root = get_command(_only(first) if known and first is not None else root_app)
    params.install(root)
    if completing:
        completion_init()  # typer's bash/zsh/fish completion classes (what add_completion would do)
    try:
        rv = root.main(args=args, prog_name="mqctl", standalone_mode=False)
        return rv if isinstance(rv, int) else 0
    except NoArgsIsHelpError as exc:  # `mqctl recover` alone: its help, as a usage error
        print(exc.format_message(), file=sys.stderr)
        return EXIT_USAGE
    except ClickException as exc:  # a usage error found while parsing: one line, and the usage line
        code = exc.exit_code if exc.exit_code != 1 else EXIT_USAGE
        return fail(exc.format_message(), code, args, usage=_usage_line(exc))
    except typer.Abort:
        return fail("aborted", EXIT_INTERNAL, args)
    except MqctlError as exc:
        if _debug:
            traceback.print_exc()
        return fail(
            str(exc),
            exc.exit_code,
            args,
            controller_code=exc.code if isinstance(exc, ControllerError) else None,
        )
    except KeyboardInterrupt:
        print("mqctl: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug: one line, the traceback with --debug
        if _debug or os.environ.get("MQCTL_DEBUG"):
            raise
        return fail(
            f"internal error: {type(exc).__name__}: {exc} (run with --debug for the traceback)",
            EXIT_INTERNAL,
            args,
        )


def main() -> None:
    """Console entry point (``mqctl``): ``run`` with the process's arguments, then exit with its code.

    Without the interpreter's teardown when nothing is left to wait for: finalising every module and
    object costs about 30 ms once grpc is loaded (a fifth of a controller command, bench/
    bench_startup.py). The streams are flushed and the atexit handlers (logging, executors) run as
    in a normal exit; a non-daemon thread still running means a normal exit, which waits for it."""

    code = run()
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        sys.exit(code)

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`mqctl ... | head`): nothing more to say
            pass
    atexit._run_exitfuncs()
    os._exit(code)
