"""glibc's allocator, as a long-lived server wants it (bench/bench_scale.py measures the leader's
memory per broker at 10,000 brokers). Nothing happens elsewhere than glibc."""

from __future__ import annotations

import ctypes
import os
from typing import Any

# (environment variable, glibc's mallopt parameter, value): M_ARENA_MAX, M_MMAP_THRESHOLD, M_TRIM_THRESHOLD
_OPTIONS = (
    ("MALLOC_ARENA_MAX", -8, 2),
    ("MALLOC_MMAP_THRESHOLD_", -3, 256 * 1024),
    ("MALLOC_TRIM_THRESHOLD_", -1, 256 * 1024),
)


def _libc() -> Any:
    try:
        libc = ctypes.CDLL(None)
        return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


def tune() -> None:
    """Set before any thread starts; a setting in the environment (MALLOC_ARENA_MAX,
    MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_) wins over ours:

    - two heaps: glibc gives each thread that allocates a heap of its own (up to 8 per core), and
      the request pools' threads then keep free memory in a dozen heaps;
    - fixed mmap and trim thresholds: glibc raises both each time a large block is freed (up to 32
      MiB), after which the large answers of whole-fleet reads come from the heap and their memory
      stays with the process when freed; fixed, such blocks are mapped and unmapped and the heap's
      free top is given back."""
    libc = _libc()
    if libc is None:
        return
    for env, option, value in _OPTIONS:
        if not os.environ.get(env):
            libc.mallopt(option, value)


def trim() -> None:
    """Give the free pages inside the heap back to the system, not only its free top, which is all
    glibc gives back by itself (malloc_trim: about 10 ms for a 250 MiB heap)."""
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)
