"""`yscv.compile`: a recorded step replayed, against the same step run
eagerly by yscv, PyTorch eager, ``torch.compile`` (inductor) and ``jax.jit``.

Workloads (benches/compile_workloads.py, the same math and data on every
side): the scalar chain (2,001 one-element ops + backward), the 200-layer
chain (64x64 linear + tanh) at batch 32, a PINN step (tanh MLP 2-64-64-64-1,
batch 1024, the Laplacian of the output with respect to the inputs in the
loss, then the gradient to the parameters), the MLP 784-512-512-10 at batch
128, the CNN of bench_conv.py, the LSTM of bench_lstm.py and the transformer
block of bench_transformer.py. One step = forward + backward with the
parameters' gradients (no optimizer update).

* yscv compiled: ``yscv.compile(fn)`` of ``fn(g, *inputs)``, which binds
  the parameters (``g.param``), builds the loss and calls ``g.backward``.
* yscv eager: the same ``fn`` on a fresh graph per step.
* PyTorch eager: the loss function, then ``loss.backward()``.
* torch.compile: the loss function through ``torch.compile`` (inductor),
  then ``loss.backward()``; the PINN's Laplacian there goes through
  ``torch.func.vmap(torch.func.hessian(...))`` (``autograd.grad(...,
  create_graph=True)`` does not trace: double backward is not supported in
  compiled graphs).
* jax.jit: ``jax.jit(jax.value_and_grad(loss))`` (the PINN through
  ``jax.vmap(jax.hessian(...))``), results waited for.

Rows per workload: compiled yscv against each of the four, and the record
(the first call of a new ``yscv.compile``, kernels already compiled) against
one eager step. Run standalone for one table with every side's per-step
time and each compiler's first call (record, torch.compile's compile,
jax.jit's trace and compile), each side alone in a fresh process:

    python benches/bench_compile.py            # the standalone table (--pairs N)
    python benches/run.py compile --separate   # the ratio rows
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys

import numpy as np

import yscv
from common import Bench
from compile_workloads import (TORCH, TORCH_COMPILED, WORKLOADS, YSCV, jax_loss, torch_inputs,
                               torch_params)


class _Lazy:
    """A step built on its first call (a process timing one row builds
    only that row's side)."""

    def __init__(self, make):
        self._make, self._step = make, None

    def __call__(self):
        if self._step is None:
            self._step = self._make()
        return self._step()


def _memo(make):
    """``make()`` on the first call, the same object after."""
    box = []

    def get():
        if not box:
            box.append(make())
        return box[0]
    return get


def _data(name):
    return dict(WORKLOADS)[name]()


def yscv_sides(name):
    """``(eager, compiled, record)`` steps of workload ``name``."""
    params, inputs = _data(name)
    ps = {k: yscv.nn.Parameter(v) for k, v in params.items()}
    loss_fn = YSCV[name]

    def fn(g, *args):
        P = {k: g.param(p) for k, p in ps.items()}
        loss = loss_fn(g, P, *args)
        g.backward(loss)
        return loss

    def zero():
        for p in ps.values():
            p.grad = None

    def eager():
        zero()
        g = yscv.Graph()
        return np.array(g.value(fn(g, *inputs)))

    compiled = yscv.compile(fn)

    def replay():
        zero()
        return compiled(*inputs)

    def record():
        zero()
        return yscv.compile(fn)(*inputs)

    return eager, replay, record


def torch_side(torch, name, compiled: bool):
    params, inputs = _data(name)
    P, leaves = torch_params(torch, name, params)
    xs = torch_inputs(torch, name, inputs)
    table = TORCH_COMPILED if compiled else TORCH
    loss_fn = table[name]

    def f(*a):
        return loss_fn(torch, P, *a)
    if compiled:
        f = torch.compile(f)

    def step():
        for t in leaves:
            t.grad = None
        loss = f(*xs)
        loss.backward()
        return loss.detach().numpy()
    return step


def jax_side(name):
    import jax

    params, inputs = _data(name)
    P = {k: jax.numpy.asarray(v) for k, v in params.items()}
    xs = [jax.numpy.asarray(a.astype(np.int32) if a.dtype.kind == "i" else a) for a in inputs]
    f = jax.jit(jax.value_and_grad(jax_loss(name)))

    def step():
        loss, grads = f(P, *xs)
        jax.block_until_ready(grads)
        return np.asarray(loss)
    return step


def _has_jax() -> bool:
    import importlib.util
    return importlib.util.find_spec("jax") is not None


def benches(torch):
    out = []
    jax_ok = _has_jax()
    for name, _ in WORKLOADS:
        sides = _memo(lambda name=name: yscv_sides(name))
        eager, comp, record = (lambda k=k, sides=sides: sides()[k]() for k in range(3))
        ref = (lambda *a: None) if torch is None else (
            lambda c, name=name: _Lazy(lambda: torch_side(torch, name, c)))
        out.append(Bench(f"{name}: compiled", comp, eager, "yscv eager"))
        out.append(Bench(f"{name}: compiled", comp, ref(False), "PyTorch eager"))
        out.append(Bench(f"{name}: compiled", comp, ref(True), "PyTorch torch.compile"))
        if jax_ok:
            out.append(Bench(f"{name}: compiled", comp,
                             _Lazy(lambda name=name: jax_side(name)), "JAX jax.jit"))
        out.append(Bench(f"{name}: record (first call)", record, eager, "yscv eager"))
    return out


# ------------------------------------------------------- standalone table
_SIDES = ("yscv compiled", "yscv eager", "PyTorch eager", "torch.compile", "jax.jit")

_CHILD = """
import sys, time
sys.path.insert(0, {here!r}); sys.path.insert(0, {root!r})
from common import median_time
import bench_compile as bc
side, name = {side!r}, {name!r}
if side.startswith("yscv"):
    eager, replay, record = bc.yscv_sides(name)
    eager()                               # the kernels compiled (or loaded) first
    t0 = time.perf_counter(); step = replay; step(); first = time.perf_counter() - t0
    if side == "yscv eager":
        step, first = eager, float("nan")
elif side == "jax.jit":
    step = bc.jax_side(name)
    t0 = time.perf_counter(); step(); first = time.perf_counter() - t0
else:
    import os, torch
    torch.set_num_threads(os.cpu_count() or 2)
    step = bc.torch_side(torch, name, side == "torch.compile")
    t0 = time.perf_counter(); step(); first = time.perf_counter() - t0
    if side == "PyTorch eager":
        first = float("nan")
step()
print(min(median_time(step, 3) for _ in range({repeats})), first)
"""


def time_alone(name: str, side: str, repeats: int):
    """(per-step seconds, first-call seconds) of one side in a fresh process."""
    here = os.path.dirname(os.path.abspath(__file__))
    code = _CHILD.format(here=here, root=os.path.dirname(here), side=side, name=name,
                         repeats=repeats)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": os.path.dirname(here)})
    if res.returncode != 0:
        return None, res.stderr.strip().splitlines()[-1] if res.stderr else "failed"
    step, first = res.stdout.strip().splitlines()[-1].split()
    return float(step), float(first)


def table(repeats: int = 3, pairs: int = 3) -> None:
    """Every side of every workload alone, ``pairs`` alternating runs, medians."""
    sides = _SIDES if _has_jax() else _SIDES[:-1]
    print(f"machine: {yscv.runtime.machine_line()}; python {sys.version.split()[0]}")
    head = " | ".join(f"{s} ms" for s in sides)
    print(f"| workload | {head} | record ms | torch.compile first call ms | "
          "jax.jit first call ms |")
    print("|---|" + "---:|" * (len(sides) + 3))
    for name, _ in WORKLOADS:
        runs = {s: [] for s in sides}
        for _ in range(pairs):
            for s in sides:
                runs[s].append(time_alone(name, s, repeats))
        cells, firsts = [], {}
        for s in sides:
            ok = [r for r in runs[s] if r[0] is not None]
            if not ok:
                cells.append("fails")
                print(f"  {name}, {s}: {runs[s][0][1]}", file=sys.stderr)
                continue
            cells.append(f"{statistics.median(r[0] for r in ok) * 1e3:.3f}")
            firsts[s] = statistics.median(r[1] for r in ok) * 1e3
        rec = [f"{firsts[s]:.0f}" if s in firsts else "-"
               for s in ("yscv compiled", "torch.compile", "jax.jit")]
        print(f"| {name} | {' | '.join(cells)} | {' | '.join(rec)} |", flush=True)


if __name__ == "__main__":
    if "--check" in sys.argv:   # every side's first loss, against yscv eager
        import torch
        for name, _ in WORKLOADS:
            eager, replay, _ = yscv_sides(name)
            want = eager()
            assert replay().tobytes() == want.tobytes(), name
            got = [torch_side(torch, name, False)(), torch_side(torch, name, True)()]
            if _has_jax():
                got.append(jax_side(name)())
            print(name, want, [float(g) for g in got], flush=True)
            for g in got:
                np.testing.assert_allclose(g, want, rtol=2e-3, atol=1e-5)
        sys.exit(0)
    pairs = int(sys.argv[sys.argv.index("--pairs") + 1]) if "--pairs" in sys.argv else 3
    table(pairs=pairs)
