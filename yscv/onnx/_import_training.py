"""Handlers of the ``ai.onnx.preview.training`` domain: the optimisers
Adagrad, Adam and Momentum (standard and Nesterov), and Gradient.

Each takes the learning rate R, the step count T and, for every optimised
tensor, its value X, gradient G and accumulators (Momentum: V; Adagrad: H;
Adam: V and H), and gives the updated values and accumulators, in ONNX's
order (all new X, then all new V / H). The updates are recorded with graph
ops on the data (R included), so they are differentiable; T is read by
value.

Gradient gives d sum(y) / d x for the values ``xs`` of the graph: the nodes
``y`` depends on are replayed on a fresh yscv Graph with the ``xs`` as
variables, and ``g.backward`` fills their gradients (static arrays: a
Gradient output is not differentiated again).
"""
from __future__ import annotations

import numpy as np

from ._import_registry import handler

__all__ = ["check"]

_D = "ai.onnx.preview.training:"


def _groups(run, node, per):
    """(R node, T, [(X, G, accumulators...)]) of a node with ``per`` inputs
    per optimised tensor after R and T."""
    names = node.inputs
    n, rest = divmod(len(names) - 2, per)
    if rest or n < 1:
        raise node.fail(f"{len(names)} inputs do not hold R, T and {per} tensors per "
                        "optimised tensor")
    r = run.node(names[0])
    t = int(np.asarray(run.arr(names[1])).reshape(-1)[0])
    tensors = [[run.node(names[2 + k * n + i]) for k in range(per)] for i in range(n)]
    return r, t, tensors


def _regularized(x, grad, norm):
    return grad + x * norm if norm else grad


@handler(_D + "Adagrad")
def _adagrad(run, node):
    """H' = H + G_r^2, X' = X - R / (1 + T decay) * G_r / (sqrt(H') + epsilon),
    with G_r = G + norm_coefficient X."""
    g, at = run.g, node.attrs
    decay, eps = float(at.get("decay_factor", 0.0)), float(at.get("epsilon", 0.0))
    norm = float(at.get("norm_coefficient", 0.0))
    r, t, tensors = _groups(run, node, 3)
    rate = r * (1.0 / (1.0 + t * decay))
    xs, hs = [], []
    for x, grad, h in tensors:
        gr = _regularized(x, grad, norm)
        h2 = g.add(h, g.mul(gr, gr))
        xs.append(g.sub(x, g.div(g.mul(rate, gr), g.sqrt(h2) + eps)))
        hs.append(h2)
    return xs + hs


@handler(_D + "Adam")
def _adam(run, node):
    """V' = alpha V + (1 - alpha) G_r, H' = beta H + (1 - beta) G_r^2,
    X' = (1 - norm_coefficient_post) (X - R_t V' / (sqrt(H') + epsilon)),
    R_t = R sqrt(1 - beta^T) / (1 - alpha^T) for T > 0, else R."""
    g, at = run.g, node.attrs
    alpha, beta = float(at.get("alpha", 0.9)), float(at.get("beta", 0.999))
    eps, norm = float(at.get("epsilon", 0.0)), float(at.get("norm_coefficient", 0.0))
    post = float(at.get("norm_coefficient_post", 0.0))
    r, t, tensors = _groups(run, node, 4)
    rate = r * (np.sqrt(1 - beta ** t) / (1 - alpha ** t)) if t > 0 else r
    xs, vs, hs = [], [], []
    for x, grad, v, h in tensors:
        gr = _regularized(x, grad, norm)
        v2 = g.add(v * alpha, gr * (1 - alpha))
        h2 = g.add(h * beta, g.mul(gr, gr) * (1 - beta))
        x2 = g.sub(x, g.mul(rate, g.div(v2, g.sqrt(h2) + eps)))
        xs.append(x2 * (1 - post) if post else x2)
        vs.append(v2)
        hs.append(h2)
    return xs + vs + hs


@handler(_D + "Momentum")
def _momentum(run, node):
    """V' = alpha V + beta_T G_r (beta_T = 1 at T = 0); X' = X - R V'
    (``mode`` nesterov: X' = X - R (G_r + alpha V'))."""
    g, at = run.g, node.attrs
    alpha, beta = float(at["alpha"]), float(at["beta"])
    norm = float(at["norm_coefficient"])
    r, t, tensors = _groups(run, node, 3)
    b = beta if t > 0 else 1.0
    xs, vs = [], []
    for x, grad, v in tensors:
        gr = _regularized(x, grad, norm)
        v2 = g.add(v * alpha, gr * b)
        step = v2 if at["mode"] == "standard" else g.add(gr, v2 * alpha)
        xs.append(g.sub(x, g.mul(r, step)))
        vs.append(v2)
    return xs + vs


def _ancestors(nodes, before, target):
    """The nodes (before index ``before``) that ``target`` depends on, in order."""
    by_out = {o: n for n in nodes[:before] for o in n.outputs if o}
    need, todo = set(), [target]
    while todo:
        p = by_out.get(todo.pop())
        if p is not None and p.index not in need:
            need.add(p.index)
            todo.extend(i for i in p.inputs if i)
    return [n for n in nodes[:before] if n.index in need]


@handler(_D + "Gradient")
def _gradient(run, node):
    """d sum(y) / d x for every name x of ``xs`` (zeros where y does not
    depend on x)."""
    from ._import_registry import HANDLERS
    from ._import_run import Prepared, Run, _store
    at = node.attrs
    xs, y = list(at["xs"]), at["y"]
    nodes = run.m._nodes
    pos = next(i for i, n in enumerate(nodes) if n.index == node.index)
    g2 = type(run.g)(run.g.dtype)
    sub = Run(run.m, g2)
    for k, v in run.env.items():   # every value computed so far, as a constant of g2
        if isinstance(v, Prepared):
            sub.env[k] = Prepared(g2.constant(np.asarray(run.g.value(v.node))), v.tag)
        elif not isinstance(v, list):
            sub.env[k] = run.arr(k)
    leaves = {}
    for x in xs:
        if x not in run.env:
            raise node.fail(f"xs names {x!r}, which is not computed before the node")
        leaves[x] = sub.env[x] = g2.variable(np.asarray(run.arr(x), g2.dtype))
    for n in _ancestors(nodes, pos, y):
        if not any(o in leaves for o in n.outputs):
            _store(sub, n, HANDLERS[n.op](sub, n))
    if y not in sub.env:
        raise node.fail(f"y names {y!r}, which is not computed before the node")
    g2.backward(g2.sum(sub.node(y)))
    out = []
    for x in xs:
        grad = g2.grad(leaves[x])
        out.append(np.zeros(leaves[x].shape, g2.dtype) if grad is None else np.asarray(grad))
    return out


def check(node, np_dtype_of) -> None:
    """Load-time refusals of the attribute values these handlers do not implement."""
    if node.op == _D + "Gradient" and node.attrs.get("zs"):
        raise node.fail("the zs attribute is not supported")
    if node.op == _D + "Momentum" and node.attrs.get("mode") not in ("standard", "nesterov"):
        raise node.fail(f"mode={node.attrs.get('mode')!r} is not supported (standard or "
                        "nesterov)")
