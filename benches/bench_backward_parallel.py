"""Parallel backward (``g.backward(loss, workers=2)``) against the serial walk.

Both sides are yscv; the reference is ``workers=1`` on the same graph, so the
ratio is (time with two workers) / (serial time): below 1 means the second
thread pays. Only the backward pass is timed (the graph is built once and
back-propagated again and again, gradients zeroed in between).

- towers: 8 independent branches of 3 x (linear 256 + tanh) on batch 64 plus
  4 branches of conv3x3 16->16 + relu on 8x16x16x16, summed. Target: at
  least 1.4x faster with two workers (ratio <= 0.71).
- chain24: 24 x (linear 256 + tanh) on batch 64, one chain: nothing to run
  in parallel; the scheduling must not show (ratio <= 1.05).
- towers with ``workers=None``: the automatic choice must not be slower
  than serial (ratio <= 1.05; it measures on its first calls).

``python benches/bench_backward_parallel.py --rules`` measures the ceiling:
each backward rule of the towers graph called on two of its nodes, first
one after the other, then on two threads at once (kernels on one thread
each, so nothing else competes), and prints the speed-up of the two-thread
run. No scheduler is involved, so no parallel walk can beat these figures.

``python benches/bench_backward_parallel.py --auto`` times the towers and
chain24 backward with ``workers=1``, ``2`` and ``None`` (after the automatic
choice has made its measurement), alternated round by round, and prints the
medians and each one's ratio to ``workers=1``.
"""
from __future__ import annotations

import statistics
import sys
import threading
import time

import numpy as np

import yscv
from common import Bench, median_time


def _linear(g, rng, h, n_in, n_out):
    w = g.variable(rng.standard_normal((n_in, n_out)).astype(np.float32) / np.sqrt(n_in))
    b = g.variable(np.zeros(n_out, np.float32))
    return g.tanh(g.matmul(h, w) + b)


def towers_graph(seed: int = 0):
    rng = np.random.default_rng(seed)
    g = yscv.Graph()
    x = g.constant(rng.standard_normal((64, 256)).astype(np.float32))
    xc = g.constant(rng.standard_normal((8, 16, 16, 16)).astype(np.float32))
    outs = []
    for _ in range(8):
        h = x
        for _ in range(3):
            h = _linear(g, rng, h, 256, 256)
        outs.append(g.mean(h))
    for _ in range(4):
        w = g.variable(rng.standard_normal((3, 3, 16, 16)).astype(np.float32) * 0.1)
        b = g.variable(np.zeros(16, np.float32))
        outs.append(g.mean(g.relu(g.conv2d(xc, w, b, padding=1))))
    total = outs[0]
    for o in outs[1:]:
        total = total + o
    return g, total


def chain_graph(layers: int = 24, seed: int = 0):
    rng = np.random.default_rng(seed)
    g = yscv.Graph()
    h = g.constant(rng.standard_normal((64, 256)).astype(np.float32))
    for _ in range(layers):
        h = _linear(g, rng, h, 256, 256)
    return g, g.mean(h)


def _step(build, workers):
    g, loss = build()

    def step():
        g.zero_grads()
        g.backward(loss, workers=workers)

    return step


def benches(torch):
    return [
        Bench("backward towers, workers=2 vs 1", _step(towers_graph, 2),
              _step(towers_graph, 1), reference_name="yscv workers=1", target=1 / 1.4),
        Bench("backward chain24, workers=2 vs 1", _step(chain_graph, 2),
              _step(chain_graph, 1), reference_name="yscv workers=1", target=1.05),
        Bench("backward towers, workers=None vs 1", _step(towers_graph, None),
              _step(towers_graph, 1), reference_name="yscv workers=1", target=1.05,
              note="workers=None measures on its first calls (the runner's warm-up)"),
    ]


def rule_ceiling(rounds: int = 5, calls: int = 300) -> list:
    """[(op name, serial us per call, two-thread us per call, speed-up)] for
    the towers graph's backward rules (see the module docstring)."""
    from yscv import registry
    from yscv.engine.namespace import ARRAY
    from yscv.node import Op

    yscv.set_num_threads(1)
    g, loss = towers_graph()
    g.backward(loss)
    rows = []
    for name in ("MATMUL", "CONV2D", "TANH", "MEAN", "RELU"):
        code = int(getattr(Op, name))
        nodes = [i for i, op in enumerate(g._ops) if op == code]
        pair = (nodes[-2], nodes[-1])   # same shapes, same needs: equal work
        gis = {i: np.ones_like(g._values[i]) for i in pair}
        rule = registry.BACKWARD[code]

        def run(i, n, rule=rule, gis=gis):
            ins = tuple(g._values[j] for j in g._inputs[i])
            for _ in range(n):
                rule(ARRAY, gis[i], ins, g._values[i], g._attrs[i], g._saved[i], g._needs[i])

        run(pair[0], 20)
        run(pair[1], 20)
        serial, threaded = [], []
        for _ in range(rounds):
            t = time.perf_counter()
            run(pair[0], calls)
            run(pair[1], calls)
            serial.append(time.perf_counter() - t)
            ths = [threading.Thread(target=run, args=(i, calls)) for i in pair]
            t = time.perf_counter()
            for th in ths:
                th.start()
            for th in ths:
                th.join()
            threaded.append(time.perf_counter() - t)
        s_us = statistics.median(serial) / (2 * calls) * 1e6
        t_us = statistics.median(threaded) / (2 * calls) * 1e6
        rows.append((name, s_us, t_us, s_us / t_us))
    return rows


if __name__ == "__main__" and "--rules" in sys.argv:
    print("towers backward rules, kernels on one thread: two nodes one after the other vs on two threads")
    print(f"{'rule':<8}{'serial us/call':>16}{'2 threads us/call':>20}{'speed-up':>10}")
    for name, s_us, t_us, sp in rule_ceiling():
        print(f"{name:<8}{s_us:>16.1f}{t_us:>20.1f}{sp:>9.2f}x")


def auto_rounds(build, rounds: int = 9) -> dict:
    """Median seconds per backward for workers=1, 2 and None on ``build``'s
    graph, the three alternated (the order rotated each round)."""
    steps = {w: _step(build, w) for w in (1, 2, None)}
    for w, step in steps.items():
        for _ in range(12):   # warm-up; workers=None makes its measurement here
            step()
    times = {w: [] for w in steps}
    order = list(steps)
    for r in range(rounds):
        for w in order[r % 3:] + order[:r % 3]:
            times[w].append(median_time(steps[w], 3))
    return {w: statistics.median(v) for w, v in times.items()}


if __name__ == "__main__" and "--auto" in sys.argv:
    from yscv.engine import walk_parallel

    for name, build in (("towers", towers_graph), ("chain24", chain_graph)):
        med = auto_rounds(build)
        g, loss = build()
        print(f"{name}: workers=None chooses {walk_parallel.choose_workers(g, g._index(loss))}")
        for w, t in med.items():
            print(f"  workers={w!s:<5}{t * 1e3:8.2f} ms  {t / med[1]:5.2f}x of workers=1")
