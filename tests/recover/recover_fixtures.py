"""Helpers the recover tests import by name (a module of its own: `conftest` is a different module
in each test folder, and which one `import conftest` finds depends on what ran before)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

__all__ = ["tree_hash"]


def tree_hash(root: Path) -> str:
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            p = Path(dirpath) / name
            st = p.lstat()
            h.update(f"{p.relative_to(root)}|{st.st_size}|{st.st_mtime_ns}\n".encode())
            h.update(p.read_bytes())
        for d in dirnames:
            h.update(f"{Path(dirpath, d).relative_to(root)}/\n".encode())
    return h.hexdigest()
