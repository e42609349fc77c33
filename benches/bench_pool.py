"""Pooling forward+backward: yscv (NHWC, Numba bin kernels) vs PyTorch (NCHW).

Workloads: max_pool2d 2x2 and avg_pool2d 3x3 stride 1 padding 1,
each forward + backward with a fixed random cotangent, on x of shape
[N, H, W, C] = 32x32x32x16 and 8x32x32x64 (PyTorch gets the same data as
[N, C, H, W] contiguous). yscv reuses one graph per workload: the input leaf
is bound once, each step truncates back to it, pools, and runs backward.
The yscv kernels are single-threaded; each workload is also compared against
PyTorch limited to one thread.

Run ``python benches/bench_pool.py --compile`` for first-call compile times of
the pool kernels, cold (empty Numba cache) and warm (cache on disk), each
measured in a fresh interpreter.
"""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import tempfile

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from common import Bench, with_torch_threads  # noqa: E402

SHAPES = [(32, 32, 32, 16), (8, 32, 32, 64)]
WORKLOADS = [
    ("max_pool2d 2x2", lambda g, x: g.max_pool2d(x, 2), lambda F, t: F.max_pool2d(t, 2)),
    ("avg_pool2d 3x3 s1 p1", lambda g, x: g.avg_pool2d(x, 3, 1, 1),
     lambda F, t: F.avg_pool2d(t, 3, 1, 1)),
]


def _yscv_step(x_nhwc, cot_nhwc, build):
    import yscv

    g = yscv.Graph(np.float32)
    x = g.variable(x_nhwc)
    base = len(g)

    def step():
        g.truncate(base)
        g.zero_grads()
        g.backward(build(g, x), grad=cot_nhwc)
        return g.grad(x)

    return step


def _torch_step(torch, x_nhwc, cot_nhwc, build, threads=None):
    F = torch.nn.functional
    t = torch.tensor(x_nhwc).permute(0, 3, 1, 2).contiguous().requires_grad_(True)
    cot = torch.tensor(cot_nhwc).permute(0, 3, 1, 2).contiguous()

    def step():
        t.grad = None
        build(F, t).backward(cot)
        return t.grad

    return with_torch_threads(torch, step, threads)


def benches(torch) -> list:
    import yscv

    out = []
    rng = np.random.default_rng(0)
    for shape in SHAPES:
        x = rng.standard_normal(shape).astype(np.float32)
        for name, ybuild, tbuild in WORKLOADS:
            g = yscv.Graph(np.float32)
            oshape = g.value(ybuild(g, g.constant(x))).shape
            cot = rng.standard_normal(oshape).astype(np.float32)
            label = f"{name} fwd+bwd {'x'.join(map(str, shape))}"
            step = _yscv_step(x, cot, ybuild)
            out.append(Bench(
                name=label, yscv=step,
                reference=None if torch is None else _torch_step(torch, x, cot, tbuild),
                reference_name="PyTorch NCHW",
            ))
            # yscv's pool kernels are single-threaded; this row compares like
            # with like (and is robust to a busy shared machine, where
            # PyTorch's 2-thread pool can stall waiting for a core). The row
            # exists without PyTorch too, so ``run.py --separate`` finds row i
            # at the same index in a process without PyTorch.
            out.append(Bench(
                name=label + " (torch 1 thread)", yscv=step,
                reference=None if torch is None else _torch_step(torch, x, cot, tbuild, threads=1),
                reference_name="PyTorch NCHW, 1 thread",
            ))
    return out


def compile_times() -> None:
    """First-call time of the four pool kernels (float32), each in a fresh
    interpreter: cold (empty NUMBA_CACHE_DIR), then twice from the warm cache."""
    code = r"""
import time, numpy as np
import yscv
t0 = time.perf_counter()
import numba  # yscv imports it lazily, on the first kernel call
t1 = time.perf_counter()
numba.njit(lambda a: a + 1)(1)  # one-time LLVM/Numba set-up, paid by any first kernel
t2 = time.perf_counter()
g = yscv.Graph(np.float32)
x = g.variable(np.ones((2, 6, 6, 3), np.float32))
outs = [g.max_pool2d(x, 2), g.avg_pool2d(x, 3, 1, 1)]
t3 = time.perf_counter()
for o in outs:
    g.backward(o, grad=np.ones(g.value(o).shape, np.float32))
t4 = time.perf_counter()
print(" ".join(f"{d * 1e3:.0f}" for d in (t1 - t0, t2 - t1, t3 - t2, t4 - t3)))
"""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache, "PYTHONPATH": str(HERE.parent)}
        for label in ("cold cache", "warm cache", "warm cache"):
            res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                 check=True, env=env)
            imp, setup, fwd, bwd = res.stdout.split()
            print(f"{label}: import numba {imp} ms, first-jit set-up {setup} ms; then "
                  f"first max_pool2d + avg_pool2d forward {fwd} ms (2 kernels), "
                  f"first backward of both {bwd} ms (2 kernels)")


if __name__ == "__main__":
    if "--compile" in sys.argv:
        compile_times()
    else:
        import run

        sys.exit(run.main(["pool"] + [a for a in sys.argv[1:] if a.startswith("--")]))
