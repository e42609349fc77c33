"""Collectives on every dtype and op, in place, bit-identical on every rank."""
import numpy as np

import yscv.distributed as dist

dist.init()
r, w = dist.rank(), dist.world_size()
assert dist.is_initialized() and w > 1

for dt in (np.float32, np.float64, np.int32, np.int64, np.uint8):
    base = np.arange(6, dtype=dt).reshape(2, 3)
    mine = base + dt(r + 1)
    a = mine.copy()
    out = dist.all_reduce(a, "sum")
    assert out is a
    expect = sum(base + dt(k + 1) for k in range(w))
    assert np.array_equal(a, expect), (dt, a, expect)
    for op, fn in (("max", np.maximum), ("min", np.minimum)):
        a = mine.copy()
        assert dist.all_reduce(a, op) is a
        ref = base + dt(1)
        for k in range(1, w):
            ref = fn(ref, base + dt(k + 1))
        assert np.array_equal(a, ref), (op, dt)
    if np.dtype(dt).kind == "f":
        a = mine.copy()
        assert dist.all_reduce(a, "mean") is a
        assert a.dtype == dt
        np.testing.assert_allclose(a, expect / w, rtol=1e-6)
    for root in (0, w - 1):
        b = mine.copy()
        assert dist.broadcast(b, root=root) is b
        assert np.array_equal(b, base + dt(root + 1))
    got = dist.all_gather(mine)
    assert len(got) == w and all(np.array_equal(got[k], base + dt(k + 1)) for k in range(w))
    assert np.array_equal(mine, base + dt(r + 1))          # all_gather leaves its input alone

# a float sum whose rounding depends on the order: the same bits on every rank
rng = np.random.default_rng(r)
x = (rng.standard_normal(100_003) * 10.0 ** rng.integers(-6, 6, 100_003)).astype(np.float32)
dist.all_reduce(x, "mean")
views = dist.all_gather(x)
assert all(v.tobytes() == views[0].tobytes() for v in views), "ranks differ"

# errors name the function and the bad value, on every rank alike
for call, exc, words in (
        (lambda: dist.all_reduce(np.zeros(3), "prod"), ValueError, "'prod'"),
        (lambda: dist.all_reduce(np.zeros((3, 4))[:, ::2]), ValueError, "C-contiguous"),
        (lambda: dist.all_reduce([1.0, 2.0]), TypeError, "list"),
        (lambda: dist.all_reduce(np.zeros(3, np.int64), "mean"), TypeError, "int64"),
        (lambda: dist.all_reduce(np.zeros(3, np.complex128)), TypeError, "complex128"),
        (lambda: dist.broadcast(np.zeros(3), root=w), ValueError, f"root {w}"),
        (lambda: dist.all_gather(np.zeros(r + 1)), ValueError, "same shape")):
    try:
        call()
    except exc as e:
        assert words in str(e), (words, str(e))
    else:
        raise AssertionError(f"no {exc.__name__} for {words}")
# threads: cores // ranks on this machine for yscv's pool and OpenBLAS,
# unless the environment chose
import os

from yscv import runtime
from yscv.compute import regions

per = max(1, len(os.sched_getaffinity(0)) // dist.local_world_size())
assert dist.threads_per_rank() == per, (dist.threads_per_rank(), per)
if not os.environ.get("YSCV_NUM_THREADS"):
    assert runtime.get_num_threads() == per, runtime.get_num_threads()
    assert regions.workers() <= per - 1, regions.workers()
if not (os.environ.get("OPENBLAS_NUM_THREADS") or os.environ.get("OMP_NUM_THREADS")):
    assert runtime.blas_threads() in (None, per), runtime.blas_threads()

dist.barrier()
print(f"OK {r} {w}", flush=True)
