"""Optimizer updates over the cores: one fused kernel per parameter
(yscv/kernels/optim.py), its elements split into contiguous chunks.

An update reads and writes every element of the parameter, its gradient
and its state once: memory-bound, so a big parameter (a ResNet's 3x3
convolutions hold 0.6-2.4 M elements each) gains from the second core's
share of the memory bandwidth, while a small one (a bias, a norm's scale)
costs more to hand out than to update. The split depends on the size only,
and every element is updated by the same arithmetic whichever thread runs
it, so the bits are those of the one-thread kernel.
"""
from __future__ import annotations

from . import regions as par

#: elements per chunk from which an update runs on two or more threads
UPDATE_GRAIN = 1 << 17


def run_update(serial, region, n: int, *args) -> None:
    """``serial(*args)`` for ``n`` elements, or ``region(*args, bounds,
    state)`` over the cores from two `UPDATE_GRAIN` chunks on."""
    chunks = par.num_chunks(n, n, UPDATE_GRAIN)
    if chunks <= 1 or par.workers() <= 0:
        serial(*args)
        return
    b = par.bounds(par.split(n, chunks))
    par.run_region(lambda st: region(*args, b, st), chunks)
