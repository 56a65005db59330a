"""Plain coercion of mqctl's option values, without pydantic.

Typer 0.29 converts every parameter value through a pydantic TypeAdapter built on first use; importing
pydantic and building a dozen adapters costs more start-up time than the rest of a command
(bench/bench_startup.py). mqctl's parameters are str, int, float, bool, a StrEnum of choices, and
lists of str: ``install`` gives those a plain converter (the same values; a bad one is the same
BadParameter, exit 2). Any other parameter (a range, a path, a file) keeps typer's own.

This relies on typer's internal parameter objects (``type_descriptor``, ``_runtime_param``), as pinned
in pyproject.toml (typer 0.29); tests/cli checks every parameter of every command against them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, get_args, get_origin

from typer._click.exceptions import BadParameter
from typer._coercion import RuntimeParam

__all__ = ["install", "is_plain"]

_TRUE = frozenset({"1", "true", "t", "yes", "y", "on"})
_FALSE = frozenset({"0", "false", "f", "no", "n", "off", ""})
_SCALARS = (str, int, float, bool)


class _Bad(ValueError):
    """A value the parameter's type does not accept (becomes BadParameter: a usage error)."""


def _scalar(kind: Any) -> bool:
    return kind in _SCALARS or (isinstance(kind, type) and issubclass(kind, Enum))


def is_plain(param: Any) -> bool:
    """Whether ``param`` (a typer parameter) is one ``install`` converts."""
    desc = getattr(param, "type_descriptor", None)
    if desc is None or desc.is_file or desc.is_path or desc.is_ranged or desc.is_tuple or desc.is_datetime:
        return False
    ann = desc.annotation
    if get_origin(ann) is list:
        (item,) = get_args(ann) or (None,)
        return _scalar(item)
    return _scalar(ann)


def _convert(kind: Any, value: Any, case_sensitive: bool) -> Any:
    if kind is str:
        return value if isinstance(value, str) else str(value)
    if kind is bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in _TRUE or text in _FALSE:
            return text in _TRUE
        raise _Bad(f"{value!r} is not a valid boolean.")
    if kind is int or kind is float:
        if isinstance(value, kind) and not isinstance(value, bool):
            return value
        try:
            return kind(str(value).strip())
        except ValueError:
            raise _Bad(f"{value!r} is not a valid {'integer' if kind is int else 'number'}.") from None
    # an Enum of choices (Output: table, json, yaml)
    if isinstance(value, kind):
        return value
    text = str(value)
    for member in kind:
        if member.value == text or (not case_sensitive and str(member.value).lower() == text.lower()):
            return member
    raise _Bad(f"{text!r} is not one of {', '.join(repr(m.value) for m in kind)}.")


@dataclass(frozen=True)
class _Plain(RuntimeParam):
    """A RuntimeParam that converts str, int, float, bool, Enum and list values without pydantic."""

    def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
        case_sensitive = bool(self.parameter_info.case_sensitive)
        try:
            annotation: Any = self.annotation
            if get_origin(annotation) is list:
                (item,) = get_args(annotation)
                return [_convert(item, v, case_sensitive) for v in value]
            return _convert(annotation, value, case_sensitive)
        except _Bad as exc:
            raise BadParameter(str(exc), ctx=ctx, param=param) from None


def install(command: Any) -> None:
    """Give every plain parameter of ``command`` and its subcommands, their -h/--help options
    included, the plain converter."""
    ctx = command.context_class(command, **command.context_settings)
    for param in (*getattr(command, "params", ()), command.get_help_option(ctx)):
        if getattr(param, "_runtime_param", "absent") is None and is_plain(param):
            param._runtime_param = _Plain(
                parameter_info=param.type_descriptor.parameter_info,
                annotation=param.type_descriptor.annotation,
            )
    for sub in (getattr(command, "commands", None) or {}).values():
        install(sub)
