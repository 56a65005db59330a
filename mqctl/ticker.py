"""A daemon thread that calls a function every fraction of a second while a block runs: the redraws of
the terminal views (mqctl sim's live table, the pipeline's progress bar)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["ticking"]


@contextmanager
def ticking(seconds: float, tick: Callable[[], bool | None], name: str) -> Iterator[None]:
    """`tick()` every `seconds` until the block ends (then waited for up to 2 s) or it returns False."""
    stop = threading.Event()

    def run() -> None:
        while not stop.wait(seconds):
            if tick() is False:
                return

    t = threading.Thread(target=run, name=name, daemon=True)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join(2)
