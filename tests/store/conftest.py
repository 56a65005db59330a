from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest


def tree_hash(root: Path) -> str:
    """sha256 over every path, size, mtime and content under root: proves a reader wrote nothing."""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames) + [d + "/" for d in dirnames]:
            p = Path(dirpath) / name.rstrip("/")
            st = p.lstat()
            h.update(f"{p.relative_to(root)}|{st.st_size}|{st.st_mtime_ns}\n".encode())
            if p.is_file():
                h.update(p.read_bytes())
    return h.hexdigest()


@pytest.fixture
def unchanged():
    """Use as `with unchanged(path): ...` to assert the block writes nothing under path."""
    from contextlib import contextmanager

    @contextmanager
    def check(root: Path):
        before = tree_hash(root)
        yield
        assert tree_hash(root) == before, "a reader changed the store"

    return check
