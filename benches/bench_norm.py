"""Normalization forward+backward: yscv (channel-last, Numba kernels) vs PyTorch.

Workloads, float32, each one forward + backward with a fixed random
cotangent and gradients to x, gamma and beta:

* batch norm, training mode (batch statistics + running-stat update), x of
  shape [N, H, W, C] = 32x32x32x64. PyTorch gets the same data twice: as
  [N, C, H, W] contiguous (its native layout) and as channels_last.
* layer norm over the last axis of x [4096, 512] (gamma and beta).

yscv reuses one graph per workload: the leaves (x, gamma, beta, running
stats) are bound once; each step truncates back to them, zeroes the grads,
applies the op and runs backward (PyTorch: ``grad = None`` then backward).
Both sides use the machine's cores: yscv splits each kernel call of these
sizes into row chunks run on the calling thread and one worker thread
(yscv/compute/regions.py; ``yscv.set_num_threads(1)`` keeps it on one thread),
PyTorch uses its OpenMP pool. The "1 thread" rows run both sides on one
thread (PyTorch ``set_num_threads(1)``, yscv's chunks in sequence on the
caller, same results) to compare the kernels core for core.

Run ``python benches/bench_norm.py --compile`` for the first-call time of the
norm kernels, cold (empty Numba cache) and warm, each in a fresh interpreter.
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

BN_SHAPE = (32, 32, 32, 64)   # NHWC
LN_SHAPE = (4096, 512)


def _yscv_step(x0, cot, build, c):
    import yscv

    g = yscv.Graph(np.float32)
    x = g.variable(x0)
    gamma = g.variable(np.ones(c, np.float32))
    beta = g.variable(np.zeros(c, np.float32))
    rm = g.constant(np.zeros(c, np.float32))
    rv = g.constant(np.ones(c, np.float32))
    base = len(g)

    def step():
        g.truncate(base)
        g.zero_grads()
        g.backward(build(g, x, gamma, beta, rm, rv), grad=cot)
        return g.grad(x)

    return step


def _one_thread(step):
    """``step`` with yscv's row chunks run in sequence on the calling thread."""
    from yscv import runtime

    def step_one_thread():
        prev = runtime.get_num_threads()
        runtime.set_num_threads(1, blas=False)
        try:
            return step()
        finally:
            runtime.set_num_threads(prev, blas=False)

    return step_one_thread


def _torch_step(torch, x0, cot, build, c, to_torch, threads=None):
    t = to_torch(torch.tensor(x0)).requires_grad_(True)
    tc = to_torch(torch.tensor(cot))
    gamma = torch.ones(c, requires_grad=True)
    beta = torch.zeros(c, requires_grad=True)
    rm, rv = torch.zeros(c), torch.ones(c)

    def step():
        t.grad = gamma.grad = beta.grad = None
        build(t, gamma, beta, rm, rv).backward(tc)
        return t.grad

    return with_torch_threads(torch, step, threads)


def benches(torch) -> list:
    """The same rows with or without PyTorch (``reference`` None without it),
    so ``run.py --separate`` finds row ``i`` in a process without PyTorch."""
    rng = np.random.default_rng(0)
    out = []

    x = rng.standard_normal(BN_SHAPE).astype(np.float32)
    cot = rng.standard_normal(BN_SHAPE).astype(np.float32)
    c = BN_SHAPE[-1]
    step = _yscv_step(x, cot, lambda g, x, a, b, rm, rv: g.batch_norm(
        x, a, b, rm, rv, training=True), c)
    label = f"batch_norm train fwd+bwd {'x'.join(map(str, BN_SHAPE))} NHWC"
    refs = [None, None, None]
    if torch is not None:
        F = torch.nn.functional
        tb = lambda t, a, b, rm, rv: F.batch_norm(t, rm, rv, a, b, training=True)  # noqa: E731
        nchw = lambda t: t.permute(0, 3, 1, 2).contiguous()  # noqa: E731
        cl = lambda t: t.permute(0, 3, 1, 2)  # NHWC memory seen as NCHW = channels_last  # noqa: E731
        refs = [_torch_step(torch, x, cot, tb, c, nchw), _torch_step(torch, x, cot, tb, c, cl),
                _torch_step(torch, x, cot, tb, c, cl, threads=1)]
    out.append(Bench(name=label + " vs torch NCHW", yscv=step, reference=refs[0],
                     reference_name="PyTorch NCHW", target=1.0))
    out.append(Bench(name=label + " vs torch channels_last", yscv=step, reference=refs[1],
                     reference_name="PyTorch channels_last", target=1.0))
    # both on one core: how the kernels compare core for core (also robust to a
    # busy shared machine, where a 2-thread pool can stall).
    out.append(Bench(name=label + " vs torch channels_last 1 thread", yscv=_one_thread(step),
                     reference=refs[2], reference_name="PyTorch channels_last, 1 thread"))

    x = rng.standard_normal(LN_SHAPE).astype(np.float32)
    cot = rng.standard_normal(LN_SHAPE).astype(np.float32)
    c = LN_SHAPE[-1]
    step = _yscv_step(x, cot, lambda g, x, a, b, rm, rv: g.layer_norm(x, a, b), c)
    label = f"layer_norm fwd+bwd {'x'.join(map(str, LN_SHAPE))}"
    refs = [None, None]
    if torch is not None:
        F = torch.nn.functional
        tb = lambda t, a, b, rm, rv: F.layer_norm(t, (c,), a, b)  # noqa: E731
        refs = [_torch_step(torch, x, cot, tb, c, lambda t: t),
                _torch_step(torch, x, cot, tb, c, lambda t: t, threads=1)]
    out.append(Bench(name=label, yscv=step, target=1.0, reference=refs[0]))
    out.append(Bench(name=label + " vs torch 1 thread", yscv=_one_thread(step),
                     reference=refs[1], reference_name="PyTorch, 1 thread"))
    return out


def compile_times() -> None:
    """First-call time of the norm kernels (float32): cold, then warm cache."""
    code = r"""
import time, numpy as np
import yscv
t0 = time.perf_counter()
import numba  # noqa: F401  (yscv imports it lazily, on the first kernel call)
t1 = time.perf_counter()
g = yscv.Graph(np.float32)
x = g.variable(np.ones((2, 3, 3, 4), np.float32))
rm, rv = g.constant(np.zeros(4)), g.constant(np.ones(4))
bn = g.batch_norm(x, None, None, rm, rv, training=True)
t2 = time.perf_counter()
g.backward(bn, grad=np.ones((2, 3, 3, 4), np.float32))
t3 = time.perf_counter()
ln = g.layer_norm(x)
t4 = time.perf_counter()
g.backward(ln, grad=np.ones((2, 3, 3, 4), np.float32))
t5 = time.perf_counter()
print(" ".join(f"{d * 1e3:.0f}" for d in (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4)))
"""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache, "PYTHONPATH": str(HERE.parent)}
        for label in ("cold cache", "warm cache", "warm cache"):
            res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                 check=True, env=env)
            imp, bf, bb, lf, lb = res.stdout.split()
            print(f"{label}: import numba {imp} ms; first batch_norm forward {bf} ms "
                  f"(2 kernels, incl. one-time LLVM set-up), backward {bb} ms (2 kernels); "
                  f"first layer_norm forward {lf} ms (1 kernel), backward {lb} ms (1 kernel)")


if __name__ == "__main__":
    if "--compile" in sys.argv:
        compile_times()
    else:
        import run

        sys.exit(run.main(["norm"] + [a for a in sys.argv[1:] if a.startswith("--")]))
