"""Allocator tuning: glibc's mmap and trim thresholds, raised once by the
first Graph (``YSCV_MALLOC_TUNING``, `malloc_tuning`)."""
from __future__ import annotations

import sys

from .environment import _ENV

_malloc_enabled = _ENV["YSCV_MALLOC_TUNING"] != "0"
_malloc_done = False
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def malloc_tuning(enabled: bool) -> None:
    """Allow (True) or forbid (False) the allocator tuning of the first Graph."""
    global _malloc_enabled
    _malloc_enabled = bool(enabled)


def malloc_tuned() -> bool:
    """Whether `tune_malloc_once` has already run in this process."""
    return _malloc_done


def tune_malloc_once() -> bool:
    """Apply the glibc thresholds once (Linux glibc only); True if applied."""
    global _malloc_done
    if _malloc_done:
        return False
    _malloc_done = True
    if not _malloc_enabled or not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        ok = libc.mallopt(_M_MMAP_THRESHOLD, 64 << 20) == 1
        ok = (libc.mallopt(_M_TRIM_THRESHOLD, 256 << 20) == 1) and ok
        return ok
    except (OSError, AttributeError):
        return False  # not glibc (musl, ...): nothing to tune
