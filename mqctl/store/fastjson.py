"""The JSON dialect of a broker's config/ files: what fastjson writes and reads.

fastjson writes a map with Integer keys (consumerOffset.json's queue ids, delayOffset.json's levels) with
the keys unquoted, `{0:12,1:34}`, which a strict JSON parser rejects. `loads` quotes them (outside strings
only) and parses; `dumps` writes standard JSON with fastjson's tab indentation, which fastjson reads back
(tests/store check it with RocketMQ's own managers).
"""

from __future__ import annotations

import json
import re
from typing import Any

from mqctl.store._util import store_error

__all__ = ["dumps", "loads"]

# a string literal (kept as it is) or an unquoted integer key after '{' or ','
_KEY = re.compile(r'("(?:[^"\\]|\\.)*")|([{,]\s*)(-?\d+)(\s*:)')


def _quote(m: re.Match[str]) -> str:
    if m.group(1) is not None:
        return m.group(1)
    return f'{m.group(2)}"{m.group(3)}"{m.group(4)}'


def loads(text: str, path: str) -> Any:
    """The document of one config file; StoreError naming the file, line and offset when it is not one."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    fixed = _KEY.sub(_quote, text)
    try:
        return json.loads(fixed)
    except json.JSONDecodeError as exc:
        # the position in the quoted text is at most a few characters past the original's; the line is exact
        raise store_error(path, f"not JSON: {exc.msg}", line=exc.lineno) from None


def dumps(doc: Any) -> str:
    return json.dumps(doc, indent="\t", separators=(",", ":"), ensure_ascii=False)
