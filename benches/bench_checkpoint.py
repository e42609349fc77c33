"""Activation checkpointing: 200 layers of (linear 64x64 + tanh).

* batch 1024, ``g.checkpoint_sequential`` with sqrt(200) ~ 14 segments (as
  torch.utils.checkpoint.checkpoint_sequential, the last one runs plain: the
  backward would recompute it at once) vs the same chain without
  checkpointing: time ratio (target <= 1.35x) and peak memory ratios, both the
  bytes held by the graph (sampled by hooks during backward) and the process
  peak RSS increase of one step (each in a fresh subprocess, after a warm-up
  step that loads Numba/LLVM and OpenBLAS once): target <= 0.2x.
* batch 32, no checkpointing, vs PyTorch: per-node overhead; target <= 0.5x.
  With PyTorch's initialisation the gradients shrink ~0.55x per layer and the
  lowest ~60 layers' are subnormal floats, which cost x86 cores a slow path
  per operation (a 32x64 @ 64x64 product ~290 us instead of 2-4 us, on both
  sides); a second row runs the same chain with the bound times GAIN, where
  every gradient stays normal and the step is the per-node cost itself; a
  third row runs PyTorch's initialisation with subnormals flushed to zero on
  both sides (``yscv.set_flush_denormal`` / ``torch.set_flush_denormal``).

Run standalone (``python benches/bench_checkpoint.py``) for the memory table.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np

import yscv
from common import Bench

LAYERS = 200
WIDTH = 64
SEGMENTS = 14
#: the initialisation bound times GAIN keeps every gradient of the chain a
#: normal float (with PyTorch's bound they decay by ~0.55 per layer and are
#: subnormal below layer ~60, where x86 cores take a slow path per operation)
GAIN = 2.0


def _params(rng, gain: float = 1.0):
    """PyTorch's nn.Linear initialisation (uniform, bound 1/sqrt(WIDTH)),
    the bound times ``gain``."""
    bound = gain / np.sqrt(WIDTH)
    return [(rng.uniform(-bound, bound, (WIDTH, WIDTH)).astype(np.float32),
             rng.uniform(-bound, bound, WIDTH).astype(np.float32)) for _ in range(LAYERS)]


def _layers(g, h, ps, lo, hi, hook=None):
    for w, b in ps[lo:hi]:
        h = g.tanh(g.matmul(h, w) + b)
        if hook is not None:
            g.register_hook(h, hook)
    return h


def yscv_step(batch: int, segments: int, sample_memory: bool = False, gain: float = 1.0):
    """A step function building the chain (optionally checkpointed) and
    back-propagating; with ``sample_memory`` it records peak graph bytes."""
    rng = np.random.default_rng(0)
    raw = _params(rng, gain)
    x0 = rng.standard_normal((batch, WIDTH)).astype(np.float32)
    g = yscv.Graph()
    ps = [(g.variable(w), g.variable(b)) for w, b in raw]
    x = g.constant(x0)
    base = len(g)
    peak = [0]

    def sample(_grad):
        peak[0] = max(peak[0], g.memory()["total"])

    hook = sample if sample_memory else None

    layers = [lambda g, h, k=k: _layers(g, h, ps, k, k + 1, hook) for k in range(LAYERS)]

    def step():
        g.truncate(base)
        g.zero_grads()
        if segments:  # every segment but the last is checkpointed (as PyTorch's)
            h = g.checkpoint_sequential(layers, segments, x)
        else:
            h = _layers(g, x, ps, 0, LAYERS, hook)
        loss = g.mean(h)
        if sample_memory:
            sample(None)
        g.backward(loss)
        return g.grad(ps[0][0])

    def reset():
        """Drop the step's nodes and grads (the next step would)."""
        g.truncate(base)
        g.zero_grads()

    step.reset = reset
    return step, peak


def torch_step(torch, batch: int, gain: float = 1.0):
    rng = np.random.default_rng(0)
    ps = [(torch.tensor(w, requires_grad=True), torch.tensor(b, requires_grad=True))
          for w, b in _params(rng, gain)]
    x = torch.tensor(rng.standard_normal((batch, WIDTH)).astype(np.float32))

    def step():
        for w, b in ps:
            w.grad = None
            b.grad = None
        h = x
        for w, b in ps:
            h = torch.tanh(h @ w + b)
        h.mean().backward()
        return ps[0][0].grad

    return step


def numpy_step(batch: int, gain: float = 1.0):
    """The same step written by hand in NumPy, with no graph: the forward
    ``tanh(h @ w + b)`` keeping every layer's output, then the backward of
    the mean through each layer (``gz = g (1 - y^2)`` in one temporary, the
    bias gradient ``ones @ gz``, the weight gradient ``h^T @ gz``, then
    ``g = gz @ w^T``), each gradient stored as computed (as yscv's walk
    stores a leaf's first gradient after ``zero_grads``). It is the
    arithmetic yscv's three nodes per layer do, in as few NumPy calls as the
    math allows: the floor of any engine that computes those nodes with
    NumPy, and the reference for yscv's per-node cost."""
    rng = np.random.default_rng(0)
    ps = _params(rng, gain)
    x = rng.standard_normal((batch, WIDTH)).astype(np.float32)
    grads = [None] * (2 * LAYERS)
    ones = np.ones((1, batch), dtype=np.float32)
    seed = np.float32(1.0 / (batch * WIDTH))
    one = np.float32(1.0)

    def step():
        hs = [x]
        h = x
        for w, b in ps:
            h = np.tanh(np.dot(h, w) + b)
            hs.append(h)
        g = np.full_like(h, seed)
        for k in range(LAYERS - 1, -1, -1):
            y = hs[k + 1]
            gz = y * y
            np.subtract(one, gz, out=gz)
            np.multiply(g, gz, out=gz)
            grads[2 * k + 1] = np.dot(ones, gz)[0]
            grads[2 * k] = np.dot(hs[k].T, gz)
            g = np.dot(gz, ps[k][0].T)
        return grads[0]

    return step


_RSS_CHILD = r"""
import ctypes, ctypes.util, re, sys
import numpy as np
sys.path.insert(0, {here!r})
import bench_checkpoint as b

def status(key):
    with open("/proc/self/status") as f:
        return int(re.search(r"^%s:\s+(\d+) kB" % key, f.read(), re.M).group(1)) * 1024

step, _ = b.yscv_step(1024, {segments})
step()                                 # compiles/loads kernels, sets up OpenBLAS
step.reset()                           # the graph lets go of that step's arrays
ctypes.CDLL(ctypes.util.find_library("c")).malloc_trim(0)  # hand freed heap back
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")                       # reset the peak-RSS mark (VmHWM)
base = status("VmRSS")
step()
print(status("VmHWM") - base)
"""


def _rss_increase(segments: int):
    """Peak RSS increase (bytes) of one batch-1024 step, in a fresh process.

    The child first runs one step (loading Numba and LLVM, ~126 MB once per
    process, and OpenBLAS's buffers), returns the freed heap to the OS with
    ``malloc_trim(0)``, resets the kernel's peak-RSS mark and reports
    ``VmHWM - VmRSS`` around a second step (the first one's nodes dropped).
    Linux only (/proc); returns None elsewhere.
    """
    if not os.path.exists("/proc/self/clear_refs"):
        return None
    here = os.path.dirname(os.path.abspath(__file__))
    code = _RSS_CHILD.format(here=here, segments=segments)
    env = {**os.environ, "PYTHONPATH": os.path.dirname(here)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=env)
    return int(out.stdout.strip().splitlines()[-1])


def memory_table() -> dict:
    out = {}
    for name, seg in (("plain", 0), ("checkpointed", SEGMENTS)):
        step, peak = yscv_step(1024, seg, sample_memory=True)
        step()
        out[name] = {"graph_peak_bytes": peak[0], "rss_increase_bytes": _rss_increase(seg)}
    out["graph_ratio"] = out["checkpointed"]["graph_peak_bytes"] / out["plain"]["graph_peak_bytes"]
    ck, plain = out["checkpointed"]["rss_increase_bytes"], out["plain"]["rss_increase_bytes"]
    out["rss_ratio"] = ck / plain if ck is not None and plain else None
    return out


def benches(torch):
    mem = memory_table()
    note = (f"peak graph bytes {mem['checkpointed']['graph_peak_bytes'] / 1e6:.1f} MB vs "
            f"{mem['plain']['graph_peak_bytes'] / 1e6:.1f} MB ({mem['graph_ratio']:.2f}x)")
    if mem["rss_ratio"] is not None:
        note += (f"; peak RSS increase {mem['checkpointed']['rss_increase_bytes'] / 1e6:.1f} MB vs "
                 f"{mem['plain']['rss_increase_bytes'] / 1e6:.1f} MB ({mem['rss_ratio']:.2f}x)")
    note += "; target <= 0.20x"
    ck, _ = yscv_step(1024, SEGMENTS)
    plain, _ = yscv_step(1024, 0)
    small, _ = yscv_step(32, 0)
    normal, _ = yscv_step(32, 0, gain=GAIN)
    by_hand = numpy_step(32, gain=GAIN)
    np.testing.assert_allclose(normal(), by_hand(), rtol=1e-4, atol=1e-7)
    return [
        Bench("200x(linear 64 + tanh), batch 1024: 14 segments vs none", ck, plain,
              reference_name="yscv without checkpointing", target=1.35, note=note),
        Bench("200x(linear 64 + tanh), batch 32, no checkpointing", small,
              torch_step(torch, 32) if torch is not None else None, target=0.5,
              note="the gradients of the lowest ~60 layers are subnormal floats: "
                   "both sides spend most of the step in subnormal arithmetic"),
        Bench(f"200x(linear 64 + tanh), batch 32, weights x{GAIN:g} (no subnormals)", normal,
              torch_step(torch, 32, gain=GAIN) if torch is not None else None, target=0.5,
              note="the per-node overhead this bench is meant to show"),
        Bench(f"200x(linear 64 + tanh), batch 32, weights x{GAIN:g}: yscv vs NumPy by hand",
              normal, by_hand, reference_name="the same arithmetic in NumPy, no graph",
              note="the graph's cost over the arithmetic itself; the NumPy floor against "
                   "PyTorch is the ratio of the row above divided by this one"),
        Bench("200x(linear 64 + tanh), batch 32, flush denormals on both sides",
              flushing(small, yscv.set_flush_denormal),
              flushing(torch_step(torch, 32), torch.set_flush_denormal)
              if torch is not None else None,
              note="PyTorch's init; each step runs with FTZ/DAZ set "
                   "(yscv.set_flush_denormal / torch.set_flush_denormal) and clears it after"),
    ]


def flushing(step, set_flush):
    """``step`` run with subnormals flushed to zero (FTZ/DAZ), switched on
    before and off after every call so no other bench in the process runs
    with it."""
    def run():
        set_flush(True)
        try:
            return step()
        finally:
            set_flush(False)

    return run


if __name__ == "__main__":
    print(json.dumps(memory_table(), indent=2))
