"""RocketMQ's camelCase names for mqctl's snake_case fields: the documents mqctl prints (-o json|yaml)
and the files it writes name a record's fields as RocketMQ's Java beans do (brokerName, masterEpoch,
confirmOffset), so a record's document is its fields under those names."""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["camel", "camel_fields"]


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def camel_fields(obj: Any, *names: str) -> dict[str, Any]:
    """The attributes `names` of `obj` (default: every field of the dataclass, in order) by camelCase name."""
    return {camel(n): getattr(obj, n) for n in names or [f.name for f in dataclasses.fields(obj)]}
