"""The chunk iterators of yscv/kernels/sync.py (``region_chunks``,
``phase2_chunks``) inside compiled kernels: every chunk index below ``n``
is claimed exactly once per region, by whichever participant gets it, and
the first iterator marks the caller as inside the region."""
from __future__ import annotations

import numpy as np
import pytest

import yscv.compute.regions as par
from yscv import runtime
from yscv.kernels import sync
from yscv.kernels._jit import jit


@jit
def _count_chunks(hits, st):
    for c in sync.region_chunks(st, hits.shape[0]):
        hits[c] += 1


@jit
def _two_phases(first, second, st):
    n1 = first.shape[0]
    for c in sync.region_chunks(st, n1):
        first[c] += 1
        sync.phase_done(st)
    sync.wait_phase(st, n1)
    for c in sync.phase2_chunks(st, second.shape[0]):
        second[c] += first.sum()      # the first phase is complete here


@pytest.mark.parametrize("n", [0, 1, 5])
def test_one_participant_claims_every_chunk_in_order(n):
    hits = np.zeros(n, dtype=np.int64)
    st = par.new_state()
    st[sync.SIG] = 7
    _count_chunks(hits, st)
    np.testing.assert_array_equal(hits, np.ones(n))
    assert st[sync.NEXT] == n + 1             # n claims and the one that found none
    assert st[sync.IN_KERNEL] == 7            # marked inside region 7


@pytest.mark.parametrize("threads", [1, 2])
def test_each_chunk_once_on_every_thread_count(threads, monkeypatch):
    monkeypatch.setattr(runtime.threads, "_num_threads", threads)
    for n in (2, 3, 64, 257):
        hits = np.zeros(n, dtype=np.int64)
        par.run_region(lambda st: _count_chunks(hits, st), n)
        np.testing.assert_array_equal(hits, np.ones(n))


@pytest.mark.parametrize("threads", [1, 2])
def test_second_phase_sees_the_whole_first_phase(threads, monkeypatch):
    monkeypatch.setattr(runtime.threads, "_num_threads", threads)
    for _ in range(10):
        first = np.zeros(9, dtype=np.int64)
        second = np.zeros(4, dtype=np.int64)
        par.run_region(lambda st: _two_phases(first, second, st), 9)
        np.testing.assert_array_equal(first, np.ones(9))
        np.testing.assert_array_equal(second, np.full(4, 9))
