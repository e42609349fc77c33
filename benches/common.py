"""Shared benchmark protocol.

A bench module ``benches/bench_<topic>.py`` defines ``benches(torch)`` which
returns a list of :class:`Bench`; ``torch`` is the imported module or None
when PyTorch is not installed. Each callable runs ONE step (e.g. one
forward+backward). The runner times yscv and the reference alternately in one
process and reports the ratio yscv / reference.
"""
from __future__ import annotations

import dataclasses
import statistics
import time
from typing import Callable, Optional


@dataclasses.dataclass
class Bench:
    name: str
    yscv: Callable[[], object]
    reference: Optional[Callable[[], object]] = None
    reference_name: str = "PyTorch"
    target: Optional[float] = None      # the ratio the issue asks for (<=)
    note: str = ""


def time_once(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def median_time(fn, repeat: int, min_time: float = 0.02) -> float:
    """Median over ``repeat`` samples; each sample loops until ``min_time``."""
    n = 1
    while time_once(lambda: [fn() for _ in range(n)]) < min_time and n < 1 << 16:
        n *= 2
    samples = [time_once(lambda: [fn() for _ in range(n)]) / n for _ in range(repeat)]
    return statistics.median(samples)


def interleaved(a, b, rounds: int = 7, repeat: int = 3):
    """Median per-call seconds of ``a`` and ``b``, alternating to share noise."""
    ta, tb = [], []
    for _ in range(rounds):
        ta.append(median_time(a, repeat))
        if b is not None:
            tb.append(median_time(b, repeat))
    return statistics.median(ta), (statistics.median(tb) if tb else None)


def with_torch_threads(torch, step, threads):
    """``step`` as is when ``threads`` is None, else wrapped to run with
    PyTorch limited to ``threads`` threads (restored afterwards)."""
    if threads is None:
        return step

    def step_with_threads():
        prev = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            return step()
        finally:
            torch.set_num_threads(prev)

    return step_with_threads


def profile_step(step, steps: int, warmup: int = 1, rows: int = 25) -> None:
    """cProfile of ``steps`` calls of ``step`` after ``warmup`` calls: total
    time per function, the top ``rows``."""
    import cProfile
    import pstats

    for _ in range(warmup):
        step()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(steps):
        step()
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(rows)
