"""JSON and YAML text of the admin documents: stable key order, never coloured.

The YAML emitter covers what the documents hold (mappings, sequences, strings, numbers, booleans,
null) and quotes every string a YAML 1.1 or 1.2 reader could take for something else, so
``yaml.safe_load(to_yaml(doc)) == doc``.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["to_json", "to_yaml"]


def to_json(doc: Any, *, compact: bool = False) -> str:
    if compact:
        return json.dumps(doc, separators=(",", ":"), ensure_ascii=False)
    return json.dumps(doc, indent=2, ensure_ascii=False)


_PLAIN = re.compile(r"^[A-Za-z_/][A-Za-z0-9_./@-]*$")
_RESERVED = {"y", "n", "yes", "no", "true", "false", "on", "off", "null", "~"}


def _scalar(v: Any) -> str:
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return json.dumps(v)
    s = str(v)
    if _PLAIN.match(s) and s.lower() not in _RESERVED:
        return s
    return json.dumps(s, ensure_ascii=False)   # a JSON string is a valid YAML double-quoted scalar


def _key(k: Any) -> str:
    return _scalar(str(k))


def _emit(v: Any, indent: int, out: list[str]) -> None:
    pad = "  " * indent
    if isinstance(v, dict):
        for k, item in v.items():
            if isinstance(item, dict) and item:
                out.append(f"{pad}{_key(k)}:")
                _emit(item, indent + 1, out)
            elif isinstance(item, list) and item:
                out.append(f"{pad}{_key(k)}:")
                _emit(item, indent, out)
            else:
                out.append(f"{pad}{_key(k)}: {_inline(item)}")
    elif isinstance(v, list):
        for item in v:
            if isinstance(item, dict) and item:
                sub: list[str] = []
                _emit(item, indent + 1, sub)
                first = sub[0][len("  " * (indent + 1)):]
                out.append(f"{pad}- {first}")
                out.extend(sub[1:])
            elif isinstance(item, list) and item:
                sub = []
                _emit(item, indent + 1, sub)
                out.append(f"{pad}-")
                out.extend(sub)
            else:
                out.append(f"{pad}- {_inline(item)}")
    else:
        out.append(f"{pad}{_inline(v)}")


def _inline(v: Any) -> str:
    if isinstance(v, dict):
        return "{}"
    if isinstance(v, list):
        return "[]"
    return _scalar(v)


def to_yaml(doc: Any) -> str:
    out: list[str] = []
    _emit(doc, 0, out)
    return "\n".join(out)
