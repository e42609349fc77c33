"""MAML (model-agnostic meta-learning) on sine regression with yscv.

    python examples/maml_sine.py            # meta-trains, prints the loss after one inner step
    python examples/maml_sine.py --quick    # small budget (tests)

Each task is a sine wave a sin(x + b) (amplitude a in [0.1, 5], phase b in
[0, pi], x in [-5, 5]); a ReLU MLP 1-40-40-1 adapts to a task with ONE
gradient step on 10 support points, theta' = theta - alpha grad L_s(theta),
and the meta-objective is the loss of theta' on 10 query points of the same
task. The inner gradient is recorded (``create_graph=True``), so the outer
backward differentiates through it: the second-order MAML of Finn et al.
(2017), with Adam on theta. The printed figures are the query loss of the
meta-learned theta after one inner step, against the same step from a
randomly initialised network.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import yscv  # noqa: E402
import yscv.nn as nn  # noqa: E402
import yscv.optim as optim  # noqa: E402

SIZES = (1, 40, 40, 1)
INNER_LR = 0.01


def sample_tasks(rng, n):
    return rng.uniform(0.1, 5.0, n), rng.uniform(0.0, np.pi, n)


def task_points(rng, amp, phase, k):
    x = rng.uniform(-5.0, 5.0, (k, 1))
    return x, amp * np.sin(x + phase)


def mlp(g, x, params):
    """The network with its weights given as nodes: [w0, b0, w1, b1, w2, b2]."""
    h = x
    for k in range(0, len(params), 2):
        h = g.matmul(h, params[k]) + params[k + 1]
        if k < len(params) - 2:
            h = g.relu(h)
    return h


def adapted_loss(g, params, support, query):
    """Query loss after one recorded inner SGD step on the support set."""
    (xs, ys), (xq, yq) = support, query
    inner = g.mse_loss(mlp(g, g.constant(xs), params), g.constant(ys))
    grads = g.gradients(inner, params, create_graph=True)
    fast = [p - INNER_LR * gp for p, gp in zip(params, grads)]
    return g.mse_loss(mlp(g, g.constant(xq), fast), g.constant(yq))


def init_params(seed):
    yscv.manual_seed(seed)
    layers = [nn.Linear(a, b) for a, b in zip(SIZES[:-1], SIZES[1:])]
    params = []
    for layer in layers:
        params += [layer.weight, layer.bias]
    return params


def evaluate(params, rng, tasks=50, k=10):
    losses = []
    for amp, phase in zip(*sample_tasks(rng, tasks)):
        g = yscv.Graph()
        nodes = [g.param(p) for p in params]
        loss = adapted_loss(g, nodes, task_points(rng, amp, phase, k),
                            task_points(rng, amp, phase, 100))
        losses.append(float(g.value(loss)))
    return float(np.mean(losses))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--tasks", type=int, default=8, help="tasks per meta-batch")
    ap.add_argument("--quick", action="store_true", help="150 meta-steps")
    args = ap.parse_args(argv)
    steps = 150 if args.quick else args.steps
    params = init_params(0)
    baseline = evaluate(init_params(0), np.random.default_rng(1))
    opt = optim.Adam(params, lr=1e-3)
    rng = np.random.default_rng(0)
    for step in range(steps):
        g = yscv.Graph()
        nodes = [g.param(p) for p in params]
        total = None
        for amp, phase in zip(*sample_tasks(rng, args.tasks)):
            loss = adapted_loss(g, nodes, task_points(rng, amp, phase, 10),
                                task_points(rng, amp, phase, 10))
            total = loss if total is None else total + loss
        meta = total / float(args.tasks)
        g.backward(meta)                      # through the recorded inner step
        opt.step()
        opt.zero_grad()
        if step % max(1, steps // 5) == 0 or step == steps - 1:
            print(f"meta-step {step:5d}  query loss after one inner step {float(g.value(meta)):.3f}")
    final = evaluate(params, np.random.default_rng(1))
    print(f"query MSE after one inner step on 50 new tasks: meta-learned {final:.3f}, "
          f"random initialisation {baseline:.3f}")
    return {"meta_learned": final, "baseline": baseline}


if __name__ == "__main__":
    main()
