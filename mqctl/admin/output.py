"""JSON and YAML text of the admin documents: stable key order, never coloured.

YAML is PyYAML's safe dumper (``yaml.safe_dump``'s, the C one when PyYAML has libyaml), imported only
when a YAML document is printed (``mqctl --help`` stays fast). The document is first made JSON-shaped
(string keys, lists), so ``-o yaml`` prints the same document as ``-o json`` and
``yaml.safe_load(to_yaml(doc)) == json.loads(to_json(doc))``. A string holding a line break (``\\n``,
``\\r``, NEL ``\\x85``, ``\\u2028``, ``\\u2029``) is double-quoted, where each is an escape: one line,
and no reader can fold it (PyYAML's pure-Python emitter writes NEL raw in single quotes, which reads
back as a space).
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["to_json", "to_yaml"]


def to_json(doc: Any, *, compact: bool = False) -> str:
    if compact:
        return json.dumps(doc, separators=(",", ":"), ensure_ascii=False)
    return json.dumps(doc, indent=2, ensure_ascii=False)


_BREAKS = frozenset("\n\r\x85\u2028\u2029")
_dumper: Any = None


def _yaml_dumper() -> Any:
    global _dumper
    if _dumper is None:
        import yaml  # lazy: yaml

        base = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

        class Dumper(base):  # type: ignore[misc,valid-type]
            pass

        def represent_str(dumper: Any, s: str) -> Any:
            style = '"' if not _BREAKS.isdisjoint(s) else None
            return dumper.represent_scalar("tag:yaml.org,2002:str", s, style=style)

        Dumper.add_representer(str, represent_str)
        _dumper = Dumper
    return _dumper


def to_yaml(doc: Any) -> str:
    """``doc`` as one YAML document (no trailing newline)."""
    import yaml  # lazy: yaml

    text: str = yaml.dump(
        json.loads(json.dumps(doc, default=str)),
        Dumper=_yaml_dumper(),
        sort_keys=False,
        allow_unicode=True,
        default_flow_style=False,
        width=2**31 - 1,
    )
    return text[:-1] if text.endswith("\n") else text
