"""MLP training step: batch 128, 784-512-512-10, ReLU, cross-entropy (mean),
forward + backward. Target: <= 0.8x PyTorch eager CPU.

Both sides compute the same math with input-major weights:
``relu(x @ W1 + b1) -> relu(. @ W2 + b2) -> . @ W3 + b3 -> cross_entropy``.
The yscv step reuses one Graph (parameters are its first leaves, the step
truncates back to them, zeroes the grads, binds the batch as a constant,
builds the graph and runs backward), as a training loop would. The PyTorch
step sets ``.grad = None``, runs forward and ``loss.backward()``. No optimizer
update on either side (it is identical work and not the subject here).

Same-process caveat: NumPy's OpenBLAS worker threads keep spinning for a
while after each GEMM and PyTorch's OpenMP/MKL threads do the same, so on a
2-core machine whichever side runs right after the other is slowed (measured:
a PyTorch step right after one NumPy GEMM took 13-31 ms instead of ~5 ms).
``benches/run.py`` alternates the two in one process, so its ratio for this
bench mostly measures that interference. Also time each side alone:

    python benches/bench_mlp.py --separate   # each side in its own process
    python benches/bench_mlp.py --ops        # per-op forward/backward time
    python benches/bench_mlp.py --profile    # cProfile of the yscv step
"""
from __future__ import annotations

import os
import sys

import numpy as np

import yscv
from common import Bench, profile_step

BATCH = 128
SIZES = (784, 512, 512, 10)


def _data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, SIZES[0])).astype(np.float32)
    labels = rng.integers(0, SIZES[-1], size=BATCH)
    params = []
    for fan_in, fan_out in zip(SIZES[:-1], SIZES[1:]):
        bound = 1.0 / np.sqrt(fan_in)  # PyTorch nn.Linear default
        params.append(rng.uniform(-bound, bound, (fan_in, fan_out)).astype(np.float32))
        params.append(rng.uniform(-bound, bound, (fan_out,)).astype(np.float32))
    return x, labels, params


def _yscv_step(x_np, labels, params_np):
    g = yscv.Graph()
    w1, b1, w2, b2, w3, b3 = (g.variable(p) for p in params_np)
    base = len(g)

    def step():
        g.truncate(base)
        g.zero_grads()
        x = g.constant(x_np)
        h = g.relu(g.matmul(x, w1) + b1)
        h = g.relu(g.matmul(h, w2) + b2)
        loss = g.cross_entropy(g.matmul(h, w3) + b3, labels)
        g.backward(loss)
        return g.value(loss), [g.grad(p) for p in (w1, b1, w2, b2, w3, b3)]

    return step


def _torch_step(torch, x_np, labels, params_np):
    x = torch.from_numpy(x_np)
    y = torch.from_numpy(labels)
    params = [torch.tensor(p, requires_grad=True) for p in params_np]
    w1, b1, w2, b2, w3, b3 = params
    F = torch.nn.functional

    def step():
        for p in params:
            p.grad = None
        h = torch.relu(x @ w1 + b1)
        h = torch.relu(h @ w2 + b2)
        loss = F.cross_entropy(h @ w3 + b3, y)
        loss.backward()
        return loss.detach().numpy(), [p.grad.numpy() for p in params]

    return step


def benches(torch):
    x, labels, params = _data()
    ys = _yscv_step(x, labels, params)
    ref = _torch_step(torch, x, labels, params) if torch is not None else None
    if ref is not None:  # same math: loss and every gradient agree
        (ly, gy), (lt, gt) = ys(), ref()
        np.testing.assert_allclose(ly, lt, rtol=1e-4)
        for a, b in zip(gy, gt):
            np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-5)
    return [Bench("MLP 128x784-512-512-10 ReLU CE, fwd+bwd", ys, ref, target=0.8)]


def _profile(steps: int = 300) -> None:
    """cProfile of the yscv step: total time per function, top rows."""
    x, labels, params = _data()
    profile_step(_yscv_step(x, labels, params), steps, warmup=20)


def _op_times(steps: int = 200) -> None:
    """Wall time per op (forward and backward) inside the yscv step, by
    wrapping the dispatch tables; the rest is the engine and Python."""
    import collections
    import time

    from yscv import Op, registry

    spent = collections.defaultdict(float)
    calls = collections.defaultdict(int)
    for kind, table in (("forward", registry.FORWARD), ("backward", registry.BACKWARD)):
        for i, fn in enumerate(table):
            if fn is None:
                continue

            def timed(*args, _fn=fn, _key=(kind, Op(i).name.lower())):
                t0 = time.perf_counter()
                out = _fn(*args)
                spent[_key] += time.perf_counter() - t0
                calls[_key] += 1
                return out

            table[i] = timed
    x, labels, params = _data()
    step = _yscv_step(x, labels, params)
    for _ in range(20):
        step()
    spent.clear()
    calls.clear()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    total = (time.perf_counter() - t0) / steps * 1e3
    print(f"yscv step {total:.3f} ms (instrumented)")
    in_ops = 0.0
    for key, sec in sorted(spent.items(), key=lambda kv: -kv[1]):
        in_ops += sec
        print(f"  {key[1]:<14} {key[0]:<8} {sec / steps * 1e3:7.3f} ms  ({calls[key] // steps} per step)")
    print(f"  engine + Python outside op functions: {total - in_ops / steps * 1e3:.3f} ms")


def _time_alone(which: str, seconds: float) -> None:
    """Child process: time one side alone, print its median ms per step."""
    import statistics
    import time

    x, labels, params = _data()
    if which == "yscv":
        step = _yscv_step(x, labels, params)
    else:
        import torch

        torch.set_num_threads(os.cpu_count() or 2)
        step = _torch_step(torch, x, labels, params)
    for _ in range(20):
        step()
    samples = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        for _ in range(5):
            step()
        samples.append((time.perf_counter() - t0) / 5)
    print(statistics.median(samples) * 1e3)


def _separate(rounds: int = 3, seconds: float = 5.0) -> None:
    """Each side alone in a fresh process, alternating; medians and ratio."""
    import subprocess

    times = {"yscv": [], "torch": []}
    for _ in range(rounds):
        for which in times:
            out = subprocess.run([sys.executable, __file__, "--alone", which, str(seconds)],
                                 capture_output=True, text=True, check=True)
            times[which].append(float(out.stdout.strip().splitlines()[-1]))
    for r, (ty, tt) in enumerate(zip(times["yscv"], times["torch"])):
        print(f"round {r}: yscv {ty:.3f} ms, PyTorch {tt:.3f} ms, ratio {ty / tt:.2f}x")


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    args = sys.argv[1:]
    if args[:1] == ["--alone"]:
        _time_alone(args[1], float(args[2]))
    elif args[:1] == ["--separate"]:
        _separate()
    elif args[:1] == ["--ops"]:
        _op_times()
    else:
        _profile()
