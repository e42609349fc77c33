"""The replay of a `Record` (yscv/compile/record.py): the recorded step as
a loop over kernels, with no graph, no NodeIds and no validation.

`build_plan` turns the record into a list of steps, once:

=============  ==============================================================
``fwd``        a run of nodes: each is ``(index, mode, fn, inputs)``; ``fn``
               is the op's ufunc where the eager fast paths
               (``Graph._apply1`` / ``_apply2``) call it, else its registered
               forward ``registry.FORWARD[op]``; the value (and saved data)
               go into the replay's lists
``call``       a graph method that consumed an input array (``g.constant(xb)``,
               ``g.cross_entropy(logits, yb)``): called again on a scratch
               graph with the new array, its nodes' values, attributes and
               saved data copied over
``seed``       a dropout seed, drawn again from yscv's generator (in the
               eager order), written into the node's attributes
``draw``       a ``randn_like`` / ``rand_like`` leaf, drawn again
``bn``         a batch-norm running-statistics update, as
               ``Graph._update_running_stats`` does it, in place
``backward``   the recorded `Schedule`'s visit plan, each node's rule called
               as the serial walk calls it (``registry.BACKWARD[op](ARRAY,
               ...)``), gradients conformed and summed by the same expressions
               and functions (yscv/engine/walk.py, yscv/engine/schedule.py), in
               the same order; leaves accumulate and ``Parameter.grad`` is
               written by `schedule.add_param_grad`, as in the eager step
=============  ==============================================================

Parameters are read when the replay starts (a view of ``p.data``, so an
optimizer step between calls is seen), buffers likewise. Same functions,
same operands, same order: the replay's bits are the eager step's.
"""
from __future__ import annotations

import numpy as np

from .. import random as _random
from .. import registry
from ..compute import norm as _norm
from ..engine.graph import Graph
from ..engine.namespace import ARRAY
from ..engine.schedule import add_param_grad, conform
from ..errors import CompileError
from ..node import N_ATTRS, N_INPUTS, N_OP, N_RG, N_SAVED, N_SHAPE, Op
from ..ops._common import as_graph_array
from . import higher as _higher
from . import segments as _segments

_LEAF = int(Op.LEAF)
_VJP = int(Op.VJP)
_ndarray = np.ndarray
_FORWARD = registry.FORWARD
_UFUNC = registry.UFUNC
_BACKWARD = registry.BACKWARD


class _Conform:
    """What `schedule.conform` reads of a graph: its dtype and anomaly flag."""

    __slots__ = ("dtype", "detect_anomaly")

    def __init__(self, dtype):
        self.dtype = dtype
        self.detect_anomaly = False


def _forward_entry(record, k: int):
    """``(k, mode, fn, inputs)`` of node k (see the module docstring):
    mode 1 / 2 a one- / two-input ufunc, 3 / 4 a one- / two-input
    forward, 0 a forward of any arity."""
    nodes = record.nodes
    op, ins = nodes[k][N_OP], nodes[k][N_INPUTS]
    if op == _VJP:
        return (k, 5, _FORWARD[op], ins)
    uf = _UFUNC[op]
    if uf is not None and len(ins) == 1:
        return (k, 1, uf, ins)
    if uf is not None and len(ins) == 2 \
            and len(nodes[ins[0]][N_SHAPE]) == len(nodes[ins[1]][N_SHAPE]):
        return (k, 2, uf, ins)
    return (k, {1: 3, 2: 4}.get(len(ins), 0), _FORWARD[op], ins)


def _backward_entries(record, sched, params: dict) -> list:
    """The visit plan as ``(index, inputs, op, needs, plain, param)``;
    for a leaf ``plain`` holds whether it requires grad."""
    out = []
    nodes = record.nodes
    for i in sched.visit:
        op, ins, _, _, rg, needs, pl, _ = nodes[i]
        if not ins:
            out.append((i, (), op, None, rg, params.get(i)))
        else:
            out.append((i, ins, op, needs, pl, None))
    return out


def build_plan(record) -> list:
    """The steps of the replay (see the module docstring)."""
    n = len(record.nodes)
    params = dict(record.params)
    covered = np.zeros(n, dtype=bool)
    for a in record.actions:
        if a[0] == "call":
            covered[a[1]:a[2]] = True
    rules = []   # the recorded walks' rules a replay calls again (yscv/compile/higher.py)
    for a in record.actions:
        if a[0] == "rule" and (a[8] or covered[a[4]]):
            covered[a[1]:a[2]] = True
            rules.append(a)
    rules = {id(a) for a in rules}
    steps = []
    pos = 0
    segs = []                          # checkpointed segments released so far
    gone = np.zeros(n, dtype=bool)     # released and not recomputed by a walk

    def forward_to(end):
        nonlocal pos
        run = [_forward_entry(record, k) for k in range(pos, end)
               if not covered[k] and record.nodes[k][N_OP] != _LEAF]
        if segs:   # a node reading a released value: that value recomputed for it
            part = []
            for e in run:
                reads = tuple(j for j in e[3] if gone[j])
                if reads:
                    if part:
                        steps.append(("fwd", part))
                    part = []
                    steps.append(("fwd_released", e, reads))
                else:
                    part.append(e)
            run = part
        if run:
            steps.append(("fwd", run))
        pos = max(pos, end)

    for a in record.actions:
        kind = a[0]
        if kind == "call":
            forward_to(a[1])
            steps.append(a)
            pos = a[2]
        elif kind in ("seed", "draw"):
            forward_to(a[1])
            steps.append(a)
        elif kind == "bn":
            forward_to(a[1])
            _, _, k, i_mean, i_var, momentum, m = a
            steps.append(("bn", k, i_mean, i_var, momentum, m, record.nodes[k][N_RG]))
        elif kind == "rule":
            if id(a) in rules:
                forward_to(a[1])
                steps.append(a)
                pos = a[2]
        elif kind == "acc":
            forward_to(a[1])
            steps.append(a)
        elif kind == "release":
            forward_to(a[1])
            seg = (a[2], a[3], a[4])
            segs.append(seg)
            steps.append(("release", seg))
            gone[a[2]:a[3]] = True
            for k in a[4]:
                gone[k] = False
        elif kind == "prep":   # a recorded walk recomputing released values (kept)
            forward_to(a[1])
            steps.append(a)
            _segments.mark_prepared(record.nodes, gone, a[2])
        elif kind == "backward":
            _, at, t, sched, seed = a
            forward_to(at)
            entries = _backward_entries(record, sched, params)
            rel = None
            if segs:
                points = _segments.release_points(segs, entries)
                rel = ({entries[q][0]: v for q, v in points.items()}, list(segs))
            steps.append(("backward", t, entries, seed, rel))
    forward_to(n)
    if segs:   # returned nodes a segment released: recomputed, as g.value does
        outs: list = []
        _output_nodes(record.outputs, outs)
        steps.append(("outs", outs))
    record.attrs = [r[N_ATTRS] for r in record.nodes]
    return steps


def _forward_released(step, values, attrs, saved, nodes) -> None:
    """One forward entry (as the ``fwd`` loop runs it) whose inputs ``reads``
    a segment released: recomputed for it, then dropped again, as the eager
    graph reads a released value (``Graph._recompute_value``)."""
    _, (k, mode, f, ins), reads = step
    for j in reads:
        values[j] = _segments.value(nodes, values, attrs, saved, j)
    if mode == 1:
        v = f(values[ins[0]])
    elif mode == 2:
        v = f(values[ins[0]], values[ins[1]])
    else:
        if mode == 5:
            attrs[k] = _higher.renew_vjp(attrs[k], attrs, saved, ins[1])
        v, saved[k] = f(attrs[k], *[values[j] for j in ins])
    values[k] = v if type(v) is _ndarray else np.asarray(v)
    for j in reads:
        values[j] = None
        saved[j] = None


def _output_nodes(tpl, out: list) -> None:
    kind = tpl[0]
    if kind == "node":
        out.append(tpl[1])
    elif kind == "seq":
        for t in tpl[2]:
            _output_nodes(t, out)
    elif kind == "dict":
        for _, t in tpl[1]:
            _output_nodes(t, out)


def _arg(tpl, values, args, scratch, memo, rg_of):
    kind = tpl[0]
    if kind == "in":
        return args[tpl[1]]
    if kind == "node":
        j = tpl[1]
        nid = memo.get(j)
        if nid is None:
            nid = memo[j] = scratch._append(_LEAF, (), values[j], None, None, rg_of(j), ())
        return nid
    if kind == "seq":
        return tpl[1](_arg(t, values, args, scratch, memo, rg_of) for t in tpl[2])
    if kind == "val":   # a node's value g.value gave, fed back
        return values[tpl[1]]
    return tpl[1]


def _template_nodes(tpl):
    """The node indices a call argument's template (`record._template`) names."""
    if tpl[0] == "node":
        yield tpl[1]
    elif tpl[0] == "seq":
        for t in tpl[2]:
            yield from _template_nodes(t)


def _replay_call(record, step, values, attrs, saved, args) -> None:
    """Call the recorded graph method again on a scratch graph with the new
    input arrays; copy its nodes' values, attributes and saved data."""
    _, start, end, meth, (targs, tkw) = step
    nodes = record.nodes
    scratch = Graph(dtype=record.dtype)
    memo: dict = {}
    rg_of = lambda j: nodes[j][N_RG]  # noqa: E731
    reads = [j for t in targs + tuple(tkw.values()) for j in _template_nodes(t)
             if values[j] is None]
    for j in reads:   # released by a checkpointed segment: recomputed for the call
        values[j] = _segments.value(nodes, values, attrs, saved, j)
    a = [_arg(t, values, args, scratch, memo, rg_of) for t in targs]
    kw = {k: _arg(t, values, args, scratch, memo, rg_of) for k, t in tkw.items()}
    m = len(scratch._uids)
    meth(scratch, *a, **kw)
    for j in reads:
        values[j] = None
        saved[j] = None
    made = scratch._nodes[m:]
    if len(made) != end - start or any(r[N_OP] != nodes[start + q][N_OP]
                                       for q, r in enumerate(made)):
        raise CompileError(
            f"yscv.compile: {meth.__name__} built different nodes (from node {start}) for the "
            "new input arrays than at record time; the recorded step does not fit them",
            node=start, op=meth.__name__)
    svals = scratch._values
    for q, r in enumerate(made):
        values[start + q] = svals[m + q]
        attrs[start + q] = r[N_ATTRS]
        saved[start + q] = r[N_SAVED]


def _bn_update(step, values, saved, nodes) -> None:
    """``Graph._update_running_stats`` (yscv/ops/norm.py) on the replay's values."""
    _, k, i_mean, i_var, momentum, n, rg = step
    s = saved[k] if rg else None
    if s is None:  # the node keeps no saved data: the eager update recomputes it
        s = _norm.group_statistics(values[nodes[k][N_INPUTS][0]], False, 1)
    mean, var = s
    keep = 1.0 - momentum
    old_mean = values[i_mean].astype(np.float64)
    old_var = values[i_var].astype(np.float64)
    for i, new in ((i_mean, momentum * mean[0] + keep * old_mean),
                   (i_var, momentum * (var[0] * (n / (n - 1))) + keep * old_var)):
        v = values[i]
        v.flags.writeable = True
        np.copyto(v, new, casting="same_kind")


def _seed(spec, values, args, dtype):
    kind = spec[0]
    if kind == "ones":
        return np.ones(spec[1], dtype=dtype)
    if kind == "node":
        return values[spec[1]]
    if kind == "in":
        return as_graph_array(args[spec[1]], dtype, "backward", "grad", copy=False)
    return spec[1]


def _walk(entries, t, seed, values, attrs, saved, stored, ctx, rel=None,
          nodes=None) -> None:
    """The serial walk (yscv/engine/walk.py ``WalkMixin._walk``, its plain
    case) over a recorded visit plan; keep the two alike. ``rel``: the
    checkpointed segments (yscv/compile/segments.py), recomputed and
    released as the eager walk does."""
    released = rel is not None
    if released:
        points, all_segs = rel
    pending = [None] * (t + 1)
    pending[t] = seed
    backward = _BACKWARD
    ns = ARRAY
    ndarray = _ndarray
    dtype = ctx.dtype
    for i, ins, op, needs_i, pl, p in entries:
        if released and i in points:   # the walk has left these segments
            for seg in points[i]:
                _segments.release(seg, values, saved, nodes)
        gi = pending[i]
        if gi is None:
            continue
        pending[i] = None
        if type(gi) is not ndarray:
            gi = np.asarray(gi)
        if released and ins:
            _segments.prepare(nodes, values, attrs, saved, i)
        if not ins:
            if pl:   # the leaf requires grad
                cur = stored.get(i)
                stored[i] = gi if cur is None else np.asarray(cur + gi)
                if p is not None:
                    add_param_grad(p, gi)
            continue
        n_in = len(ins)
        if n_in == 1:
            j = ins[0]
            vj = values[j]
            gj = backward[op](ns, gi, (vj,), values[i], attrs[i], saved[i], needs_i)[0]
            if gj is not None and needs_i[0]:
                if not pl and (type(gj) is not ndarray
                               or (gj.dtype is not dtype and gj.dtype != dtype)
                               or gj.shape != vj.shape):
                    gj = conform(ctx, gj, vj.shape, op, i, j)
                cur = pending[j]
                pending[j] = gj if cur is None else cur + gj
        elif n_in == 2:
            j, k = ins
            vj = values[j]
            vk = values[k]
            gj, gk = backward[op](ns, gi, (vj, vk), values[i], attrs[i], saved[i], needs_i)
            rj, rk = needs_i
            if gj is not None and rj:
                if not pl and (type(gj) is not ndarray
                               or (gj.dtype is not dtype and gj.dtype != dtype)
                               or gj.shape != vj.shape):
                    gj = conform(ctx, gj, vj.shape, op, i, j)
                cur = pending[j]
                pending[j] = gj if cur is None else cur + gj
            if gk is not None and rk:
                if not pl and (type(gk) is not ndarray
                               or (gk.dtype is not dtype and gk.dtype != dtype)
                               or gk.shape != vk.shape):
                    gk = conform(ctx, gk, vk.shape, op, i, k)
                cur = pending[k]
                pending[k] = gk if cur is None else cur + gk
        else:
            in_vals = tuple([values[j] for j in ins])
            grads = backward[op](ns, gi, in_vals, values[i], attrs[i], saved[i], needs_i)
            for j, gj, vj, r in zip(ins, grads, in_vals, needs_i):
                if gj is None or not r:
                    continue
                gj = conform(ctx, gj, vj.shape, op, i, j)
                cur = pending[j]
                pending[j] = gj if cur is None else cur + gj
    if released:
        for seg in all_segs:
            _segments.release(seg, values, saved, nodes)


def replay(record, args) -> tuple:
    """Run the record with the call's arguments; returns ``(values, stored)``
    (every node's value, the leaves' gradients) after applying the step's
    effects (Parameter.grad, running statistics, generator draws, integer
    buffers)."""
    plan = record.plan
    if plan is None:
        plan = record.plan = build_plan(record)
    nodes = record.nodes
    dtype = record.dtype
    values = list(record.values)
    attrs = list(record.attrs)
    saved = [None] * len(nodes)
    for i, p in record.params:
        v = p.data
        if type(v) is not _ndarray or v.dtype != dtype or v.shape != nodes[i][N_SHAPE]:
            raise CompileError(
                f"yscv.compile: a parameter bound at node {i} now has "
                f"{getattr(v, 'shape', None)} {getattr(v, 'dtype', type(v).__name__)}, "
                f"recorded {nodes[i][N_SHAPE]} {dtype}", node=i)
        values[i] = v.view()
    for i, arr in record.buffers:
        values[i] = arr.view()
    for i, before in record.fresh:
        values[i] = np.array(before, copy=True)
    stored: dict = {}
    params = dict(record.params)
    ctx = _Conform(dtype)
    for step in plan:
        kind = step[0]
        if kind == "fwd":
            for k, mode, f, ins in step[1]:
                if mode == 1:
                    v = f(values[ins[0]])
                elif mode == 2:
                    v = f(values[ins[0]], values[ins[1]])
                else:
                    if mode == 3:
                        v, s = f(attrs[k], values[ins[0]])
                    elif mode == 4:
                        v, s = f(attrs[k], values[ins[0]], values[ins[1]])
                    else:
                        if mode == 5:   # Op.VJP: the forward node's data of this replay
                            attrs[k] = _higher.renew_vjp(attrs[k], attrs, saved, ins[1])
                        v, s = f(attrs[k], *[values[j] for j in ins])
                    saved[k] = s
                if type(v) is not _ndarray:
                    v = np.asarray(v)
                values[k] = v
        elif kind == "backward":
            _, t, entries, spec, rel = step
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                _walk(entries, t, _seed(spec, values, args, dtype), values, attrs, saved,
                      stored, ctx, rel, nodes)
        elif kind == "call":
            _replay_call(record, step, values, attrs, saved, args)
        elif kind == "rule":
            _higher.replay_rule(record, step, values, attrs, saved)
        elif kind == "acc":
            _higher.replay_acc(step, values, stored, params)
        elif kind == "release":
            _segments.release(step[1], values, saved, nodes)
        elif kind == "prep":
            _segments.prepare(nodes, values, attrs, saved, step[2])
        elif kind == "fwd_released":
            _forward_released(step, values, attrs, saved, nodes)
        elif kind == "outs":
            for i in step[1]:
                if values[i] is None:
                    values[i] = _segments.value(nodes, values, attrs, saved, i)
        elif kind == "seed":
            k = step[1]
            attrs[k] = attrs[k]._replace(seed=_random.draw_seed())
        elif kind == "draw":
            k, fn = step[1], step[2]
            values[k] = np.asarray(_random.draw(fn), dtype=dtype)
        else:  # "bn"
            _bn_update(step, values, saved, nodes)
    for b, delta in record.int_buffers:
        b += delta
    return values, stored


def outputs(tpl, values, grads):
    """The returned structure, NodeIds filled in as array copies."""
    kind = tpl[0]
    if kind == "node":
        return np.array(values[tpl[1]], copy=True)
    if kind == "grad":
        return np.array(grads[tpl[1]], copy=True)
    if kind == "seq":
        return tpl[1](outputs(t, values, grads) for t in tpl[2])
    if kind == "dict":
        return {k: outputs(t, values, grads) for k, t in tpl[1]}
    return tpl[1]
