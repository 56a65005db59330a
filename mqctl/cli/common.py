"""What every command prints the same way: the -o/--output option, the one JSON or YAML document per
command (errors included, docs/admin.md), and the rich console of the store-side tables.

Kept light: rich and json are imported inside the functions, so `mqctl --help` stays fast.
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable
from typing import Any, TypeVar, cast

import typer

from mqctl.cli.render import AdminOutput, Output
from mqctl.cli.render import console as render_console
from mqctl.errors import ControllerError, MqctlError, UsageError, code_name


def verbose_option() -> Any:
    """-v/--verbose on the commands that read commitlog records: which record walker reads them."""

    return typer.Option(
        False,
        "-v",
        "--verbose",
        help="Name the commitlog record walker in use (the compiled one or numpy) on stderr.",
    )


def say_walker(verbose: bool) -> None:
    """One line on stderr naming the record walker (MQCTL_WALKER chooses; docs/pipeline.md)."""
    if verbose:
        from mqctl.store import walker  # lazy: numpy

        print(f"record walker: {walker.describe()}", file=sys.stderr)


def output_option(mqadmin: bool = False) -> Any:
    """-o/--output table|json|yaml, the same on every command that prints state; ``mqadmin``: also
    -o mqadmin (an AdminOutput), mqadmin's own text."""

    if mqadmin:
        return typer.Option(
            AdminOutput.table,
            "-o",
            "--output",
            case_sensitive=False,
            help="output format: a table for people, one JSON or YAML document for "
            "scripts, or mqadmin's text exactly (mqadmin)",
        )
    return typer.Option(
        Output.table,
        "-o",
        "--output",
        case_sensitive=False,
        help="output format: a table for people, one JSON or YAML document for scripts",
    )


_no_color = False


def _set_no_color(value: bool) -> bool:
    global _no_color
    _no_color = _no_color or bool(value)
    return value


def no_color_option() -> Any:
    """--no-color, the same on every command that prints: every console of this command (mqctl.cli.
    render.console) prints without colours; NO_COLOR=1 does the same."""

    return typer.Option(
        False,
        "--no-color",
        callback=_set_no_color,
        help="no colours (also NO_COLOR=1); JSON is never coloured",
    )


F = TypeVar("F", bound=Callable[..., Any])


def printing(*, verbose: bool = False) -> Callable[[F], F]:
    """--no-color (and, with ``verbose``, -v/--verbose: the record walker named on stderr before the
    command runs), declared once here for the commands that print: typer sees them at the end of the
    command's own options (``__signature__``); the command does not take them (--no-color acts
    through its callback)."""

    def deco(fn: F) -> F:
        options = {"no_color": (bool, no_color_option())}
        if verbose:
            options["verbose"] = (bool, verbose_option())
        sig = inspect.signature(fn)

        @functools.wraps(fn)
        def command(*args: Any, **kwargs: Any) -> Any:
            kwargs.pop("no_color")
            if verbose:
                say_walker(kwargs.pop("verbose"))
            return fn(*args, **kwargs)

        added = [
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=kind)
            for name, (kind, option) in options.items()
        ]
        command.__signature__ = sig.replace(parameters=[*sig.parameters.values(), *added])  # type: ignore[attr-defined]
        command.__annotations__ = {
            **fn.__annotations__,
            **{name: kind for name, (kind, _) in options.items()},
        }
        return cast(F, command)

    return deco


def env_option(flag: str, help: str, **extra: Any) -> Any:
    """An option that MQCTL_<FLAG> also sets (--tls-ca: MQCTL_TLS_CA), the same name on every command."""
    return typer.Option(None, flag, envvar="MQCTL_" + flag[2:].upper().replace("-", "_"), help=help, **extra)


def dry_run_option(help: str) -> Any:
    """--dry-run: every command that writes has one; its help says what it shows instead."""
    return typer.Option(False, "--dry-run", help=help)


def yes_option() -> Any:
    """--yes/-y: the commands that ask before they write skip the question."""
    return typer.Option(False, "--yes", "-y", help="Do not ask for confirmation.")


def broker_name_option(help: str, default: Any = None, short: str = "-b") -> Any:
    """-b/--broker-name with mqadmin's spelling --brokerName beside it (mqadmin's -bn where -b is an id)."""
    return typer.Option(default, short, "--broker-name", "--brokerName", help=help)


def cluster_option(help: str, default: Any = None) -> Any:
    """-c/--cluster-name with mqadmin's spelling --clusterName beside it."""
    return typer.Option(default, "-c", "--cluster-name", "--clusterName", help=help)


def namesrv_option(help: str, **extra: Any) -> Any:
    """-n/--namesrvAddr, mqadmin's name servers, 'h:p;h:p'."""
    return typer.Option(None, "-n", "--namesrvAddr", metavar="ADDRS", help=help, **extra)


def store_option(help: str, default: Any = None) -> Any:
    """--store DIR: a broker's store root (storePathRootDir)."""
    return typer.Option(default, "--store", metavar="DIR", help=help)


def stores_argument(help: str | None = None) -> Any:
    """STORE...: the broker store roots a recover or pipeline command reads."""
    return typer.Argument(..., metavar="STORE...", help=help)


def backup_dir_option(help: str) -> Any:
    """--backup-dir DIR: where a command that replaces files keeps the old ones."""
    return typer.Option(None, "--backup-dir", metavar="DIR", help=help)


def spark_master_option(help: str) -> Any:
    """--master URL of the commands that can run on Spark (MQCTL_SPARK_MASTER)."""
    return typer.Option(None, "--master", metavar="URL", envvar="MQCTL_SPARK_MASTER", help=help)


def engine_option(help: str) -> Any:
    """--engine auto|local|spark of the commands that can run on Spark."""
    return typer.Option("auto", "--engine", metavar="auto|local|spark", help=help)


def no_color() -> bool:
    """Whether --no-color was given to this command."""
    return _no_color


# Exit code -> the "code" of an error document that does not come from a controller (docs/admin.md).
_ERROR_CODES = {
    1: "INTERNAL",
    2: "USAGE",
    3: "REFUSED",
    4: "STORE",
    5: "NOT_FOUND",
    6: "UNREACHABLE",
    7: "UNHEALTHY",
    8: "TIMEOUT",
    9: "MISSING_DEPENDENCY",
    10: "DEGRADED",
    130: "INTERRUPTED",
}

_printed = False


def new_document() -> None:
    """Start a command: no document printed yet (``mqctl.cli.run`` can run several in one process)."""
    global _printed, _no_color
    _printed = False
    _no_color = False


def document_printed() -> bool:
    """Whether this process printed its JSON/YAML document already (an error then goes into the
    document, or only to stderr, never into a second document)."""
    return _printed


def error_doc(message: str, exit_code: int, controller_code: int | None = None) -> dict[str, Any]:
    """The ``"error"`` object of a JSON/YAML document: ``code`` is the controller's code name
    (``CONTROLLER_ELECT_MASTER_FAILED``) when the controller refused, else the exit code's name."""
    if controller_code is not None:
        doc: dict[str, Any] = {"code": code_name(controller_code), "controllerCode": controller_code}
    else:
        doc = {"code": _ERROR_CODES.get(exit_code, f"EXIT_{exit_code}")}
    doc.update(message=message, exitCode=exit_code)
    return doc


def error_of(exc: BaseException) -> dict[str, Any]:
    """error_doc of an exception (an MqctlError, or any other as an internal error)."""

    if isinstance(exc, MqctlError):
        return error_doc(str(exc), exc.exit_code, exc.code if isinstance(exc, ControllerError) else None)
    return error_doc(f"internal error: {type(exc).__name__}: {exc}", 1)


def print_document(doc: Any, fmt: str = "json") -> None:
    """Print the command's one JSON (indented) or YAML document on stdout."""
    global _printed

    from mqctl.admin.output import to_json, to_yaml  # lazy: start-up

    sys.stdout.write((to_yaml(doc) if fmt == "yaml" else to_json(doc)) + "\n")
    sys.stdout.flush()
    _printed = True


def print_line(doc: Any) -> None:
    """One compact JSON line of a command that streams (JSON Lines); an error after it goes to stderr only."""
    global _printed

    from mqctl.admin.output import to_json  # lazy: start-up

    sys.stdout.write(to_json(doc, compact=True) + "\n")
    _printed = True


def echo_doc(output: Any, doc: Any, error: BaseException | None = None) -> None:
    """Print the command's document as ``output`` (Output.json or Output.yaml); ``error``, raised next
    by the caller, goes into it."""
    if error is not None:
        doc = {**doc, "error": error_of(error)}
    print_document(doc, output.value)


def show_doc(output: Any, doc: dict[str, Any], print_table: Any, error: BaseException | None = None) -> None:
    """The command's result: its document as -o asks (``error`` inside it), or ``print_table(doc)``;
    then ``error``, raised (its line on stderr, its exit code)."""
    if output is not Output.table:
        echo_doc(output, doc, error=error)
    else:
        print_table(doc)
    if error is not None:
        raise error


def console() -> Any:
    """The rich console of tables (mqctl.cli.render.console: colours as the terminal allows, 200 columns
    when stdout is not a terminal, so that piped tables do not wrap)."""

    return render_console()


def human_size(n: int) -> str:
    """1536 -> '1.5 KiB' (bytes below 1 KiB as they are)."""
    f = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(f) < 1024 or unit == "TiB":
            return f"{n} B" if unit == "B" else f"{f:.1f} {unit}"
        f /= 1024
    return str(n)


def confirm(question: str, output: Any = None, *, terminal_only: bool = False) -> None:
    """Ask; UsageError (exit 2, nothing changed) unless the answer is yes. ``terminal_only``: refuse
    at once when stdin is not a terminal (a script would hang or guess). The question goes to stderr
    when stdout carries a JSON or YAML document."""

    if terminal_only and not sys.stdin.isatty():
        raise UsageError(
            "stdin is not a terminal and --yes was not given: nothing was changed; pass --yes "
            "to go ahead without the question"
        )
    try:
        ok = typer.confirm(question, default=False, err=output is not None and output.value != "table")
    except (typer.Abort, EOFError):
        ok = False
    if not ok:
        raise UsageError("not confirmed; nothing was changed (use --yes to skip the question)")
