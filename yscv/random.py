"""The library's random generator: initialisation, dropout seeds, shuffling.

``manual_seed(s)`` makes everything that draws from it reproducible;
``get_rng_state()`` / ``set_rng_state()`` save and restore it exactly (used by
training-state checkpoints). Ops never draw at replay time: dropout records
the seed it drew on its node, so checkpoint recomputation reuses the mask.
"""
from __future__ import annotations

import threading

import numpy as np

_lock = threading.Lock()
_generator = np.random.default_rng()


def manual_seed(seed: int) -> None:
    """Seed the library generator."""
    global _generator
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"manual_seed: seed must be a non-negative int, got {seed!r}")
    with _lock:
        _generator = np.random.default_rng(int(seed))


def generator() -> np.random.Generator:
    """The library generator (shared; draw from it under `draw_seed`
    or via the helpers here when used from several threads)."""
    return _generator


def draw_seed() -> int:
    """A fresh 63-bit seed from the library generator (e.g. for dropout)."""
    with _lock:
        return int(_generator.integers(0, 2**63 - 1))


def draw(fn):
    """``fn(generator)`` run under the generator's lock (an array drawn at
    once, e.g. ``g.randn_like``), so threads drawing together get disjoint
    draws."""
    with _lock:
        return fn(_generator)


def get_rng_state() -> dict:
    """A JSON-serialisable copy of the generator state."""
    with _lock:
        return _generator.bit_generator.state


def set_rng_state(state: dict) -> None:
    """Restore a state returned by `get_rng_state`."""
    global _generator
    with _lock:
        gen = np.random.default_rng()
        gen.bit_generator.state = state
        _generator = gen
