"""Keep large freed blocks in the heap (glibc only), once per process.

glibc returns freed blocks above its mmap threshold (128 KiB, adaptive) to the
OS, so a training step that allocates fresh activation arrays page-faults
them in again every step (~0.8 ms per MB measured here; PERF_NOTES). PyTorch
avoids this with its own allocator. yscv raises glibc's mmap threshold to
64 MiB and its trim threshold to 256 MiB when the first Graph is created:
measured on the LSTM bench step 4.31 -> 3.43 ms, transformer block 11.7 ->
8.0 ms. Set ``YSCV_MALLOC_TUNING=0`` before creating a Graph to opt out.
The cost is that up to 256 MiB of freed memory may stay mapped.
"""
from __future__ import annotations

import os
import sys

_done = False

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def tune_malloc_once() -> bool:
    """Apply the thresholds once (glibc Linux only). Returns True if applied."""
    global _done
    if _done:
        return False
    _done = True
    if os.environ.get("YSCV_MALLOC_TUNING", "1") == "0" or not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        ok = libc.mallopt(_M_MMAP_THRESHOLD, 64 << 20) == 1
        ok = (libc.mallopt(_M_TRIM_THRESHOLD, 256 << 20) == 1) and ok
        return ok
    except (OSError, AttributeError):
        return False  # not glibc (musl, ...): nothing to tune
