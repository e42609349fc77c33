"""Convolution benches: yscv (NHWC, im2col + BLAS) vs PyTorch eager CPU.

1. ResNet-style layer: conv3x3 64->64, padding 1, no bias, x 8x32x32x64,
   forward + backward with a fixed random cotangent, gradients for x and w.
   Target <= 1.5x PyTorch NCHW. Also reported against PyTorch channels-last.
2. CNN training step, input 32x32x3, batch 32: conv3x3(3->16, pad 1) + ReLU,
   max_pool 2, conv3x3(16->32, pad 1) + ReLU, max_pool 2, flatten,
   linear -> 10, cross-entropy (mean); forward + backward (no optimizer step).
   Target <= 1.0x PyTorch eager NCHW; also reported against channels-last.

Both sides get the same data (PyTorch in its own layouts). yscv reuses one
graph per workload: parameters are its first leaves, each step truncates back
to them, zeroes the grads, builds the forward and runs backward. The PyTorch
step sets ``.grad = None`` and runs forward + ``backward``.

``python benches/bench_conv.py --compile`` prints the first-call compile times
of the conv kernels, cold (empty Numba cache) and warm, each in a fresh
interpreter. ``python benches/bench_conv.py --variants`` times the algorithm
variants behind the choices documented in docs/ops/conv.md;
``--direct`` each pass on the direct tiles vs im2col + BLAS and, for
3x3 stride 1, Winograd F(2x2, 3x3).
``python benches/bench_conv.py --paired`` gives ratios that survive a busy
machine better: per-round paired timings (median ratio) and best times.
``--step-ops``: where the yscv CNN step's time goes (per op inside the step,
and each direct-convolution pass alone at its shapes).
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

from common import Bench  # noqa: E402


# ------------------------------------------------------------------ 1. layer
def _layer_data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 32, 32, 64)).astype(np.float32)
    w = (rng.standard_normal((3, 3, 64, 64)) / 24.0).astype(np.float32)
    cot = rng.standard_normal((8, 32, 32, 64)).astype(np.float32)
    return x, w, cot


def _yscv_layer():
    import yscv

    x_np, w_np, cot = _layer_data()
    g = yscv.Graph(np.float32)
    x, w = g.variable(x_np), g.variable(w_np)
    base = len(g)

    def step():
        g.truncate(base)
        g.zero_grads()
        g.backward(g.conv2d(x, w, padding=1), grad=cot)
        return g.grad(x), g.grad(w)

    return step


def _torch_layer(torch, channels_last=False):
    F = torch.nn.functional
    x_np, w_np, cot_np = _layer_data()
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    x = torch.tensor(x_np.transpose(0, 3, 1, 2)).contiguous(memory_format=fmt).requires_grad_()
    w = torch.tensor(w_np.transpose(3, 2, 0, 1)).contiguous(memory_format=fmt).requires_grad_()
    cot = torch.tensor(cot_np.transpose(0, 3, 1, 2)).contiguous(memory_format=fmt)

    def step():
        x.grad = None
        w.grad = None
        F.conv2d(x, w, padding=1).backward(cot)
        return x.grad, w.grad

    return step


# ------------------------------------------------------------------ 2. CNN
def _cnn_data():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((32, 32, 32, 3)).astype(np.float32)
    labels = rng.integers(0, 10, size=32)

    def uni(shape, fan_in):
        b = 1.0 / np.sqrt(fan_in)  # PyTorch's default bound
        return rng.uniform(-b, b, shape).astype(np.float32)

    params = [uni((3, 3, 3, 16), 27), uni((16,), 27), uni((3, 3, 16, 32), 144), uni((32,), 144),
              uni((8 * 8 * 32, 10), 2048), uni((10,), 2048)]
    return x, labels, params


def _yscv_cnn():
    import yscv

    x_np, labels, params = _cnn_data()
    g = yscv.Graph(np.float32)
    w1, b1, w2, b2, wl, bl = (g.variable(p) for p in params)
    base = len(g)

    def step():
        g.truncate(base)
        g.zero_grads()
        x = g.constant(x_np)
        h = g.max_pool2d(g.relu(g.conv2d(x, w1, b1, padding=1)), 2)
        h = g.max_pool2d(g.relu(g.conv2d(h, w2, b2, padding=1)), 2)
        loss = g.cross_entropy(g.matmul(g.flatten(h), wl) + bl, labels)
        g.backward(loss)
        return g.value(loss)

    return step


def _torch_cnn(torch, channels_last=False):
    F = torch.nn.functional
    x_np, labels, params = _cnn_data()
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    x = torch.tensor(x_np.transpose(0, 3, 1, 2)).contiguous(memory_format=fmt)
    y = torch.tensor(labels)
    w1 = torch.tensor(params[0].transpose(3, 2, 0, 1)).contiguous(memory_format=fmt)
    w2 = torch.tensor(params[2].transpose(3, 2, 0, 1)).contiguous(memory_format=fmt)
    # yscv flattens NHWC; PyTorch flattens NCHW: permute the linear rows to match
    wl = torch.tensor(params[4].reshape(8, 8, 32, 10).transpose(2, 0, 1, 3).reshape(2048, 10))
    ts = [w1, torch.tensor(params[1]), w2, torch.tensor(params[3]), wl, torch.tensor(params[5])]
    for t in ts:
        t.requires_grad_()
    w1, b1, w2, b2, wl, bl = ts

    def step():
        for t in ts:
            t.grad = None
        h = F.max_pool2d(F.relu(F.conv2d(x, w1, b1, padding=1)), 2)
        h = F.max_pool2d(F.relu(F.conv2d(h, w2, b2, padding=1)), 2)
        loss = F.cross_entropy(torch.flatten(h, 1) @ wl + bl, y)
        loss.backward()
        return loss

    return step


def benches(torch) -> list:
    out = []
    layer = _yscv_layer()
    cnn = _yscv_cnn()
    ref = (lambda f, *a: None) if torch is None else (lambda f, *a: f(torch, *a))
    out.append(Bench("conv3x3 64->64 8x32x32 fwd+bwd (vs NCHW)", layer, ref(_torch_layer),
                     "PyTorch NCHW", target=1.5))
    out.append(Bench("conv3x3 64->64 8x32x32 fwd+bwd (vs channels-last)", layer,
                     ref(_torch_layer, True), "PyTorch channels-last"))
    out.append(Bench("CNN 32x32x3 batch 32 fwd+bwd (vs NCHW)", cnn, ref(_torch_cnn),
                     "PyTorch NCHW", target=1.0))
    out.append(Bench("CNN 32x32x3 batch 32 fwd+bwd (vs channels-last)", cnn,
                     ref(_torch_cnn, True), "PyTorch channels-last"))
    return out


# ------------------------------------------------------------------ paired rounds
def paired(rounds: int = 40) -> None:
    """Robust ratios on a shared machine: each round times yscv and the reference
    back to back (best of 3 calls each); prints the median of the per-round
    ratios and the ratio of the best times (both sides' uncontended speed)."""
    import statistics
    import time

    from run import load_torch

    torch = load_torch()
    if torch is None:
        print("PyTorch not installed")
        return

    def best_of(fn, k=3):
        best = float("inf")
        for _ in range(k):
            t = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t)
        return best

    for b in benches(torch):
        b.yscv()
        b.reference()
        ty, tr = [], []
        for _ in range(rounds):
            ty.append(best_of(b.yscv))
            tr.append(best_of(b.reference))
        ratios = sorted(y / r for y, r in zip(ty, tr))
        print(f"{b.name}: median of {rounds} paired ratios {statistics.median(ratios):.2f}x "
              f"(quartiles {ratios[rounds // 4]:.2f}-{ratios[3 * rounds // 4]:.2f}); best times "
              f"yscv {min(ty) * 1e3:.2f} ms, {b.reference_name} {min(tr) * 1e3:.2f} ms, "
              f"ratio {min(ty) / min(tr):.2f}x" + (f" (target <= {b.target:.2f}x)" if b.target else ""),
              flush=True)


# ------------------------------------------------------------------ algorithm variants
def _cpu_timer():
    """min over repeats of thread CPU time with BLAS limited to this thread
    (robust on a shared, busy machine), or wall time if threadpoolctl is absent."""
    import time

    try:
        from threadpoolctl import threadpool_limits
        limiter, clock, label = threadpool_limits(limits=1, user_api="blas"), time.thread_time, \
            "thread CPU ms, BLAS 1 thread"
    except ImportError:
        limiter, clock, label = None, time.perf_counter, "wall ms"

    def timeit(fn, n=25):
        fn()
        best = float("inf")
        for _ in range(n):
            t = clock()
            fn()
            best = min(best, clock() - t)
        return best * 1e3

    return timeit, label, limiter


def variants() -> None:
    """Time the formulations behind the choices in docs/ops/conv.md."""
    from yscv.kernels import conv as K
    from yscv.compute import conv as G

    timeit, label, limiter = _cpu_timer()
    print(f"timings: {label}, min of 25")
    rng = np.random.default_rng(0)
    for (n, h, wd, c, o) in [(8, 32, 32, 64, 64), (32, 32, 32, 3, 16), (32, 16, 16, 16, 32)]:
        x = rng.standard_normal((n, 1, h, wd, c)).astype(np.float32)
        w = rng.standard_normal((1, 3, 3, c, o)).astype(np.float32)
        g = rng.standard_normal((n, 1, h, wd, o)).astype(np.float32)
        m = n * h * wd
        w2 = w.reshape(9 * c, o)
        geo = (1, 3, 3, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, h, wd)
        one, zero = (1, 1, 1), (0, 1, 1)
        print(f"x {n}x{h}x{wd}x{c}, 3x3 pad 1, {c}->{o}:")

        def full_im2col():
            cols = np.empty((m, 9, c), np.float32)
            K.im2col(x.reshape(-1), cols.reshape(-1), m, c, 0, 0, 1, h, wd, c, *geo)
            return cols.reshape(m, 9 * c) @ w2

        def shifted():
            xp = np.zeros((n, h + 2, wd + 2, c), np.float32)
            xp[:, 1:-1, 1:-1] = x[:, 0]
            xf = xp.reshape(-1, c)
            rows = xf.shape[0] - 2 * (wd + 2) - 2
            y = np.zeros((xf.shape[0], o), np.float32)
            tmp = np.empty((rows, o), np.float32)
            for i in range(3):
                for j in range(3):
                    s = i * (wd + 2) + j
                    np.matmul(xf[s:s + rows], w[0, i, j], out=tmp)
                    y[:rows] += tmp
            return y.reshape(n, h + 2, wd + 2, o)[:, :h, :wd]

        ref = full_im2col()
        assert np.allclose(shifted().reshape(m, o), ref, atol=1e-2)
        print(f"  forward, whole im2col buffer + 1 GEMM: {timeit(full_im2col):.2f}")
        print(f"  forward, shifted GEMM (9 taps, K={c}): {timeit(shifted):.2f}")
        saved = G.CHUNK_BYTES
        for kb in (128, 256, 512, 1024, 2048, 4096):
            G.CHUNK_BYTES = kb << 10
            f = lambda: G.conv_forward(x, w, one, zero, one, 1)  # noqa: E731
            b = lambda: G.conv_backward(g, w, one, zero, one, 1, x=x)  # noqa: E731
            print(f"  chunk {kb:5d} KB: forward {timeit(f):.2f}, backward (dx, dw) {timeit(b):.2f}")
        G.CHUNK_BYTES = saved
        wflip = np.ascontiguousarray(w[:, ::-1, ::-1].transpose(0, 1, 2, 4, 3))
        dx_gather = lambda: G.conv_forward(g, wflip, one, zero, one, 1)  # noqa: E731
        dx_scatter = lambda: G.conv_backward(g, w, one, zero, one, 1, x=x, need_w=False)  # noqa: E731
        assert np.allclose(dx_gather(), dx_scatter()[0], atol=1e-2)
        print(f"  dx by col2im scatter: {timeit(dx_scatter):.2f}; by im2col of g with the "
              f"flipped kernel: {timeit(dx_gather):.2f}")
    _depthwise_variants(timeit)
    if limiter is not None:
        limiter.unregister()


def _depthwise_variants(timeit) -> None:
    import yscv
    from yscv.kernels import conv as K

    rng = np.random.default_rng(1)
    for (n, h, wd, c, mult) in [(8, 32, 32, 64, 1), (32, 16, 16, 32, 2)]:
        x = rng.standard_normal((n, h, wd, c)).astype(np.float32)
        w = rng.standard_normal((3, 3, c, mult)).astype(np.float32)
        g = yscv.Graph(np.float32)
        xn, wn = g.variable(x), g.variable(w)
        direct = lambda: g.depthwise_conv2d(xn, wn, padding=1)  # noqa: E731
        m = n * h * wd
        geo = (1, 3, 3, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, h, wd)
        w3 = w.reshape(9, c, mult)

        def im2col_einsum():
            cols = np.empty((m, 9, c), np.float32)
            K.im2col(x.reshape(-1), cols.reshape(-1), m, c, 0, 0, 1, h, wd, c, *geo)
            return np.einsum("rtc,tcm->rcm", cols, w3)

        assert np.allclose(im2col_einsum().reshape(n, h, wd, c * mult), g.value(direct()),
                           atol=1e-3)
        print(f"depthwise 3x3 pad 1, x {n}x{h}x{wd}x{c}, M={mult}: forward direct kernel "
              f"{timeit(direct):.2f}; im2col + einsum {timeit(im2col_einsum):.2f}")


def direct_passes() -> None:
    """Each pass on the direct tiles vs chunked im2col + BLAS, and Winograd
    F(2x2, 3x3) where it applies (the drivers of yscv/compute/conv.py,
    conv_direct.py and conv_winograd.py, whatever the gate of conv.py says),
    default threads, wall-time medians; the tables in docs/ops/conv.md."""
    import time

    import yscv
    from yscv.compute import conv as G
    from yscv.compute import conv_direct as D
    from yscv.compute import conv_winograd as W

    def med(fn, n=40):
        time.sleep(0.3)               # let OpenBLAS's worker stop spinning (docs/engine.md)
        fn()
        fn()
        ts = []
        for _ in range(n):
            t = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t)
        return sorted(ts)[n // 2] * 1e3

    yscv.Graph(np.float32)            # the engine's allocator tuning, as in a real run
    rng = np.random.default_rng(0)
    one, pad = (1, 1, 1), (0, 1, 1)
    print("| x, 3x3 pad 1 | pass | im2col + BLAS ms | direct ms | Winograd ms |")
    print("|---|---|---:|---:|---:|")
    for (n, h, c, o) in [(8, 32, 64, 64), (32, 32, 3, 16), (32, 16, 16, 32), (8, 32, 32, 32)]:
        x = rng.standard_normal((n, 1, h, h, c)).astype(np.float32)
        w = rng.standard_normal((1, 3, 3, c, o)).astype(np.float32)
        g = rng.standard_normal((n, 1, h, h, o)).astype(np.float32)
        b = rng.standard_normal(o).astype(np.float32)
        sp = (1, h, h)
        wino = c % 16 == 0
        rows = [("forward + bias",
                 lambda: G.add_bias(G._im2col_forward(x, w, one, pad, one, 1, sp), b),
                 lambda: D.forward(x, w, one, pad, one, bias=b),
                 (lambda: W.forward(x, w, pad, bias=b)) if wino else None),
                ("dW", lambda: G._im2col_backward(g, w, one, pad, one, 1, x, x.shape, False, True),
                 lambda: D.weight_grad(x, g, w.shape, one, pad, one), None)]
        if D.usable(np.float32, c, 1):
            rows.append(("dx",
                         lambda: G._im2col_backward(g, w, one, pad, one, 1, x, x.shape, True,
                                                    False),
                         lambda: D.data_grad(g, w, x.shape, pad, one),
                         lambda: W.data_grad(g, w, pad)))
        for name, *fns in rows:
            times = [[] for _ in fns]
            for _ in range(3):            # alternate, so all share the machine's noise
                for t, fn in zip(times, fns):
                    if fn is not None:
                        t.append(med(fn))
            cells = [f"{sorted(t)[1]:.2f}" if t else "–" for t in times]
            print(f"| {n}x{h}x{h}x{c} -> {o} | {name} | " + " | ".join(cells) + " |")


# ------------------------------------------------------------------ CNN step pieces
def step_ops(steps: int = 300) -> None:
    """Where the yscv CNN step's time goes: every registered forward and
    backward wrapped with a timer inside the step (median step and ms per
    step per op), then each direct-convolution pass alone at the step's
    shapes (median of 200 calls; dW gets the forward's padded input, as in
    the step). Default threads; ``yscv.set_num_threads(1)`` first for one."""
    import collections
    import time

    import yscv
    from yscv import registry
    from yscv.compute import conv_direct as D
    from yscv.node import Op

    acc = collections.defaultdict(float)

    def timed(tab, i, name):
        fn = tab[i]

        def run(*a):
            t = time.perf_counter()
            r = fn(*a)
            acc[name] += time.perf_counter() - t
            return r
        tab[i] = run

    for i in range(len(registry.FORWARD)):
        for tab, kind in ((registry.FORWARD, "fwd"), (registry.BACKWARD, "bwd")):
            if tab[i] is not None:
                timed(tab, i, f"{kind} {Op(i).name}")
    step = _yscv_cnn()
    for _ in range(30):
        step()
    acc.clear()
    ts = []
    for _ in range(steps):
        t = time.perf_counter()
        step()
        ts.append(time.perf_counter() - t)
    print(f"CNN step median {1e3 * np.median(ts):.3f} ms; per op, ms per step:")
    for name, v in sorted(acc.items(), key=lambda kv: -kv[1]):
        print(f"  {name:20s} {1e3 * v / steps:.3f}")
    rng = np.random.default_rng(0)
    f = np.float32
    x1, w1, g1, x2, w2, g2 = (rng.standard_normal(s).astype(f) for s in (
        (32, 1, 32, 32, 3), (1, 3, 3, 3, 16), (32, 1, 32, 32, 16),
        (32, 1, 16, 16, 16), (1, 3, 3, 16, 32), (32, 1, 16, 16, 32)))
    one, pad = (1, 1, 1), (0, 1, 1)
    _, xp1 = D.forward(x1, w1, one, pad, one, bias=w1[0, 0, 0, 0], return_padded=True)
    _, xp2 = D.forward(x2, w2, one, pad, one, bias=w2[0, 0, 0, 0], return_padded=True)
    passes = {
        "forward 3->16 + bias": lambda: D.forward(x1, w1, one, pad, one, bias=w1[0, 0, 0, 0]),
        "forward 16->32 + bias": lambda: D.forward(x2, w2, one, pad, one, bias=w2[0, 0, 0, 0]),
        "dW + db 3->16": lambda: D.weight_grad(x1, g1, w1.shape, one, pad, one, True, xp=xp1),
        "dW + db 16->32": lambda: D.weight_grad(x2, g2, w2.shape, one, pad, one, True, xp=xp2),
        "dx 16->32 (pads g)": lambda: D.data_grad(g2, w2, x2.shape, pad, one),
    }
    print("direct passes alone at the step's shapes, ms (median of 200):")
    for name, fn in passes.items():
        for _ in range(10):
            fn()
        ts = []
        for _ in range(200):
            t = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t)
        print(f"  {name:24s} {1e3 * np.median(ts):.3f}")


# ------------------------------------------------------------------ 3. compile time
def compile_times() -> None:
    """First-call time of the conv family (float32), cold cache then warm; wall
    and CPU time per step (CPU time is the robust figure on a busy machine)."""
    code = r"""
import time, numpy as np
import yscv
f = np.float32
def clock():
    return time.perf_counter(), time.process_time()
marks = [clock()]
import numba  # noqa: F401  (yscv imports it lazily, on the first kernel call)
marks.append(clock())
g = yscv.Graph(f)
x = g.variable(np.ones((1, 5, 5, 2), f))
def run(o):
    marks.append(clock())
    return o
outs = [run(g.conv2d(x, g.variable(np.ones((3, 3, 2, 2), f)), padding=1)),
        run(g.conv_transpose2d(x, g.variable(np.ones((2, 2, 3, 2), f)), stride=2)),
        run(g.depthwise_conv2d(x, g.variable(np.ones((3, 3, 2, 1), f)))),
        run(g.deformable_conv2d(x, g.variable(np.ones((3, 3, 2, 2), f)),
                                g.variable(np.full((1, 3, 3, 18), 0.3, f))))]
for o in outs:
    g.backward(o, grad=np.ones(g.value(o).shape, f))
    marks.append(clock())
for c in (16, 64):   # the direct tiles: 8-row pair (16 channels), 6 x 4 pair (64)
    xc = g.variable(np.ones((1, 5, 5, c), f))
    o = run(g.conv2d(xc, g.variable(np.ones((3, 3, c, c), f)), g.variable(np.ones(c, f)),
                     padding=1))
    g.backward(o, grad=np.ones(g.value(o).shape, f))
    marks.append(clock())
print(" ".join(f"{(b[0] - a[0]) * 1e3:.0f}/{(b[1] - a[1]) * 1e3:.0f}"
               for a, b in zip(marks, marks[1:])))
"""
    steps = ["import numba", "conv2d fwd: set-up + im2col", "conv_transpose2d fwd: col2im",
             "depthwise fwd: depthwise_forward", "deformable fwd: deform_im2col",
             "conv2d bwd (no new kernel)", "conv_transpose2d bwd (none)",
             "depthwise bwd: depthwise_backward", "deformable bwd: deform_col2im",
             "conv2d 16->16 fwd: pad_region + direct_region",
             "conv2d 16->16 bwd (dW, dx: direct_region)",
             "conv2d 64->64 fwd (direct_region, 6x4 tiles)", "conv2d 64->64 bwd"]
    rows = []
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache, "PYTHONPATH": str(HERE.parent)}
        for _ in range(3):
            res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                 check=True, env=env)
            rows.append(res.stdout.split())
    print("first-call times, wall/CPU ms, float32 (cold = empty Numba cache; warm = cache on disk)")
    print("| step | cold | warm | warm |")
    print("|---|---:|---:|---:|")
    for k, name in enumerate(steps):
        print(f"| {name} | " + " | ".join(r[k] for r in rows) + " |")
    tot = [sum(int(v.split("/")[1]) for v in r[1:]) for r in rows]
    print(f"| total CPU after import numba | {tot[0]} | {tot[1]} | {tot[2]} |")


if __name__ == "__main__":
    if "--compile" in sys.argv:
        compile_times()
    elif "--variants" in sys.argv:
        variants()
    elif "--direct" in sys.argv:
        direct_passes()
    elif "--paired" in sys.argv:
        paired()
    elif "--step-ops" in sys.argv:
        step_ops()
    else:
        import run

        sys.exit(run.main(["conv"] + [a for a in sys.argv[1:] if a.startswith("--")]))
