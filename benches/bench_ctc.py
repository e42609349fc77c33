"""CTC loss forward+backward: yscv (one fused op, Numba forward-backward in
log space) vs torch.nn.functional.ctc_loss (CPU).

Workloads: time-major log-probabilities [T, N, C] (a log-softmax of random
logits, float32) with padded targets [N, S] of random lengths between S/2
and S (labels 1..C-1, blank 0), input lengths between 3T/4 and T, mean
reduction; one step is the loss and its gradient with respect to the
log-probabilities. yscv reuses one graph: the leaf is bound once, each step
truncates back to it. The yscv kernels are single-threaded; each workload
is also compared against PyTorch limited to one thread.
"""
from __future__ import annotations

import pathlib
import sys

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from common import Bench, with_torch_threads  # noqa: E402

SHAPES = [(50, 8, 20, 12), (200, 32, 40, 50)]   # T, N, C, S


def _data(t, n, c, s, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((t, n, c)).astype(np.float32)
    lp = x - np.log(np.exp(x).sum(axis=-1, keepdims=True))
    targets = rng.integers(1, c, size=(n, s))
    tl = rng.integers(s // 2, s + 1, size=n)
    il = rng.integers(3 * t // 4, t + 1, size=n)
    return lp.astype(np.float32), targets, il, tl


def _yscv_step(lp, targets, il, tl):
    import yscv

    g = yscv.Graph(np.float32)
    x = g.variable(lp)
    base = len(g)

    def step():
        g.truncate(base)
        g.zero_grads()
        g.backward(g.ctc_loss(x, targets, il, tl))
        return g.grad(x)

    return step


def _torch_step(torch, lp, targets, il, tl, threads=None):
    F = torch.nn.functional
    t = torch.tensor(lp, requires_grad=True)
    tg, ti, tt = torch.tensor(targets), torch.tensor(il), torch.tensor(tl)

    def step():
        t.grad = None
        F.ctc_loss(t, tg, ti, tt).backward()
        return t.grad

    return with_torch_threads(torch, step, threads)


def benches(torch) -> list:
    out = []
    for t, n, c, s in SHAPES:
        lp, targets, il, tl = _data(t, n, c, s)
        label = f"ctc_loss fwd+bwd T={t} N={n} C={c} S={s}"
        step = _yscv_step(lp, targets, il, tl)
        out.append(Bench(name=label, yscv=step,
                         reference=None if torch is None else _torch_step(torch, lp, targets,
                                                                          il, tl)))
        # single-threaded kernels against single-threaded PyTorch; the row
        # exists without PyTorch too, so ``run.py --separate`` finds row i at
        # the same index in a process without PyTorch
        out.append(Bench(name=label + " (torch 1 thread)", yscv=step,
                         reference=None if torch is None else _torch_step(
                             torch, lp, targets, il, tl, threads=1),
                         reference_name="PyTorch, 1 thread"))
    return out


if __name__ == "__main__":
    import run

    sys.exit(run.main(["ctc"] + [a for a in sys.argv[1:] if a.startswith("--")]))
