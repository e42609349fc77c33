"""``gradcheck``: analytic gradients against central finite differences."""
from __future__ import annotations

import inspect

import numpy as np

from .errors import GradcheckError
from .node import NodeId


def _build(fn, arrays):
    from .engine.graph import Graph

    g = Graph(dtype=np.float64)
    nodes = [g.variable(a) for a in arrays]
    out = fn(g, *nodes)
    if type(out) is not NodeId:
        raise TypeError(f"gradcheck: fn must return a NodeId, got {type(out).__name__}")
    return g, nodes, out


def _input_names(fn, n: int) -> list:
    """The names of ``fn``'s parameters after ``g`` for its ``n`` inputs
    (None where a name is not known: ``*args``, builtins)."""
    try:
        params = list(inspect.signature(fn).parameters.values())[1:]
    except (TypeError, ValueError):
        return [None] * n
    names = []
    for p in params:
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            break
        names.append(p.name)
    return (names + [None] * n)[:n]


def _label(k: int, names) -> str:
    """``input 1 ('w')``, or ``input 1`` when the name is not known."""
    name = names[k] if names is not None and k < len(names) else None
    return f"input {k}" if name is None else f"input {k} ({name!r})"


def _num(v) -> str:
    """A value as a plain number (``7.59``, not ``np.float64(7.59)``)."""
    return repr(float(v))


def gradcheck(fn, arrays, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
              seed: int = 0) -> bool:
    """Check ``fn``'s analytic gradients in float64 against central differences.

    Args:
        fn: ``fn(g, *nodes) -> NodeId``; ``nodes`` are variables holding ``arrays``.
        arrays: the inputs to differentiate with respect to.
        eps: finite-difference step.
        atol: absolute tolerance: pass when ``|analytic - numeric| <= atol + rtol * |numeric|``.
        rtol: relative tolerance (same test).
        seed: seeds the random cotangent (not all-ones, so transposition and
            broadcasting errors cannot cancel out).

    Returns True, or raises ``GradcheckError`` naming the input (its
    position and ``fn``'s parameter name), the worst element and both values
    as plain numbers.
    """
    arrays = [np.array(a, dtype=np.float64) for a in arrays]
    return _gradcheck(fn, arrays, eps, atol, rtol, seed, _input_names(fn, len(arrays)))


def _gradcheck(fn, arrays, eps, atol, rtol, seed, names) -> bool:
    """``gradcheck`` on float64 ``arrays`` whose inputs are called ``names``."""
    g, nodes, out = _build(fn, arrays)
    y = g.value(out)
    cot = np.random.default_rng(seed).standard_normal(y.shape)
    analytic = []
    if g.requires_grad(out):
        g.backward(out, grad=cot)
        for n, a in zip(nodes, arrays):
            gr = g.grad(n)
            if gr is not None and (gr.shape != a.shape or gr.dtype != np.float64):
                raise GradcheckError(
                    f"gradcheck: gradient of {_label(len(analytic), names)} has shape "
                    f"{gr.shape} and "
                    f"dtype {gr.dtype}, expected {a.shape} float64")
            analytic.append(np.zeros_like(a) if gr is None else np.array(gr))
    else:
        analytic = [np.zeros_like(a) for a in arrays]

    def objective(vals):
        g2, _, o = _build(fn, vals)
        return float(np.sum(g2.value(o) * cot))

    for k, a in enumerate(arrays):
        numeric = np.zeros_like(a)
        flat = a.reshape(-1)
        for e in range(flat.size):
            vals = [v.copy() for v in arrays]
            vf = vals[k].reshape(-1)
            orig = flat[e]
            vf[e] = orig + eps
            plus = objective(vals)
            vf[e] = orig - eps
            minus = objective(vals)
            numeric.reshape(-1)[e] = (plus - minus) / (2 * eps)
        excess = np.abs(analytic[k] - numeric) - (atol + rtol * np.abs(numeric))
        if excess.size and (np.max(excess) > 0 or not np.all(np.isfinite(analytic[k]))):
            bad = np.where(np.isfinite(excess), excess, np.inf)
            w = np.unravel_index(int(np.argmax(bad)), a.shape)
            raise GradcheckError(
                f"gradcheck: {_label(k, names)} element {tuple(int(i) for i in w)}: analytic "
                f"{_num(analytic[k][w])} vs numeric {_num(numeric[w])} "
                f"(atol={atol}, rtol={rtol})",
                node=nodes[k].index, expected=float(numeric[w]), got=float(analytic[k][w]))
    return True


def gradgradcheck(fn, arrays, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
                  seed: int = 0) -> bool:
    """Check ``fn``'s second derivatives in float64 against central
    differences of its first derivatives (docs/higher_order.md).

    With a random cotangent ``u`` of the output and random directions ``v``
    of the inputs, the recorded first-order gradients
    ``d = g.gradients(fn(x), x, grad=u, create_graph=True)`` are contracted to
    ``s(x, u) = sum_k <d_k, v_k>``, and `gradcheck` compares the
    recorded backward of ``s`` (with respect to every input and to ``u``)
    with finite differences: every product of the Hessian and the mixed
    terms is exercised.

    Returns True, or raises `GradcheckError` naming the ops of
    ``fn``'s graph, the input and the worst element.
    """
    arrays = [np.array(a, dtype=np.float64) for a in arrays]
    g0, nodes0, out0 = _build(fn, arrays)
    rng = np.random.default_rng(seed + 1)
    u = rng.standard_normal(g0.value(out0).shape)
    vs = [rng.standard_normal(a.shape) for a in arrays]
    ops = sorted({g0.op(g0._node_id(i)).name.lower() for i in range(len(g0))
                  if g0._inputs[i]})

    def contracted(g, *nodes):
        *xs, un = nodes
        out = fn(g, *xs)
        if type(out) is not NodeId:
            raise TypeError(f"gradgradcheck: fn must return a NodeId, got {type(out).__name__}")
        grads = g.gradients(out, xs, grad=un, create_graph=True)
        total = None
        for d, v in zip(grads, vs):
            term = g.sum(g.mul(d, v))
            total = term if total is None else g.add(total, term)
        return total

    names = _input_names(fn, len(arrays)) + ["cotangent"]
    try:
        return _gradcheck(contracted, arrays + [u], eps, atol, rtol, seed, names)
    except GradcheckError as exc:
        raise GradcheckError(
            f"gradgradcheck of ({', '.join(ops)}): {exc}", op=", ".join(ops),
            node=exc.node, expected=exc.expected, got=exc.got) from None
