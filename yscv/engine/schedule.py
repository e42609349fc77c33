"""The one schedule of a backward walk, and the steps every runner shares.

Three runners walk the arena backward: the serial array walk
(``Graph._walk``, yscv/engine/walk.py), the threaded one (yscv/engine/walk_parallel.py)
and the recorded one (``create_graph=True``, yscv/engine/walk_recorded.py). What a
walk does besides running the rules is written here once, and all three
call it:

* seeding: `seed_array` (the first-order walks) and `seed_node` (the
  recorded walk: the seed as a node);
* the visit plan, as data: `Schedule` (the target, the capture set, the
  nodes to visit from the target down and, for each, the input slots that
  need a gradient; consumer counts for the threaded runner). The serial
  runner visits the same nodes (those a gradient reaches) without building
  it first: its loop is the plan's own walk, fused with the work;
* hooks: `run_hooks` (array) and `run_hooks_node` (recorded: the hooks see
  the value, a replacement enters as a constant);
* conforming an input gradient: `conform` (arrays: dtype, broadcast axes
  summed back with `yscv.compute.arrays.sum_to_shape`, finiteness in anomaly
  mode) and `conform_node` (nodes: the same checks, the sum as a
  ``Graph.sum_to`` node, whose forward is that same function, so both walks
  sum a broadcast gradient to the same bits);
* accumulation into leaves, retained nodes and parameters:
  `accumulate_stored`, `accumulate_leaf`, `add_param_grad`, `settle_taken`
  (a parameter's first gradient taken without a copy when it is the walk's
  own), and `accumulate_node` (recorded: also the gradient node,
  `Graph.grad_node`).
"""
from __future__ import annotations

import numpy as np

from ..compute.arrays import broadcasts_to, sum_to_shape
from ..errors import AnomalyError, BackwardError, NonScalarTargetError, ShapeError
from ..node import N_INPUTS, N_NEEDS, N_OP, N_RG, NodeId, Op
from ..ops._common import as_graph_array

_LEAF = int(Op.LEAF)
_ndarray = np.ndarray


def _name(op: int) -> str:
    return Op(op).name.lower()


# ---------------------------------------------------------------- the plan
class Schedule:
    """The visit plan of one backward call from node ``target``.

    ``visit``: the node indices a gradient can reach, from the target down
    (arena order is a topological order, so every consumer of a node comes
    before it); with a ``capture`` set (`Graph.gradients`) the plan stops
    below its lowest index. ``slots[i]``: for each visited non-leaf node,
    the input positions that need a gradient (the node's needs; with a
    capture, only inputs a captured node depends on). ``terminal``: captured
    nodes below which no gradient is wanted (their rule need not run). ``remaining[j]``:
    how many (consumer, slot) contributions node j awaits; ``leaves``: the
    visited leaves, highest first; ``branchy``: whether two nodes can be
    ready at the same time (a fork or a join of non-leaf nodes);
    ``elements``: the element count of the visited non-leaf values."""

    __slots__ = ("target", "capture", "visit", "slots", "remaining", "leaves", "terminal",
                 "branchy", "elements")

    def __init__(self, graph, t: int, capture=None):
        nodes, values = graph._nodes, graph._values
        stop = min(capture) - 1 if capture else -1
        reach = _reaching(nodes, capture, stop + 1, t) if capture else None
        remaining = {t: 0}
        visit = []
        slots = {}
        leaves = []
        terminal = set()
        branchy = False
        elements = 0
        for i in range(t, stop, -1):
            if i not in remaining or (reach is not None and i not in reach):
                continue
            visit.append(i)
            rec = nodes[i]
            ins = rec[N_INPUTS]
            if not ins:
                leaves.append(i)
                continue
            v = values[i]
            if v is not None:
                elements += v.size
            needs = rec[N_NEEDS]
            if reach is None:
                need_slots = tuple(k for k, r in enumerate(needs) if r)
            else:
                need_slots = tuple(k for k, r in enumerate(needs) if r and ins[k] in reach)
                if not need_slots:
                    terminal.add(i)  # a captured node no lower captured one depends on
            slots[i] = need_slots
            nonleaf = 0
            for k in need_slots:
                j = ins[k]
                c = remaining.get(j)
                nonleaf_j = nodes[j][N_OP] != _LEAF
                if c is None:
                    remaining[j] = 1
                else:
                    remaining[j] = c + 1
                    if nonleaf_j:
                        branchy = True   # a non-leaf consumed twice: a fork
                if nonleaf_j:
                    nonleaf += 1
            if nonleaf > 1:
                branchy = True           # two non-leaf inputs: a join
        self.target = t
        self.capture = None if capture is None else frozenset(capture)
        self.visit = visit
        self.slots = slots
        self.remaining = remaining
        self.leaves = leaves
        self.terminal = terminal
        self.branchy = branchy
        self.elements = elements


def _reaching(nodes, capture, lo: int, t: int) -> set:
    """The nodes in ``[lo, t]`` that depend on a captured node (the captured
    ones included): the only ones a gradient to the captured nodes flows
    through. The others (a shared weight's expand beside the captured
    per-sample one, say) are left out of the plan."""
    reach = set(capture)
    for i in range(lo, t + 1):
        if i in reach:
            continue
        for j in nodes[i][N_INPUTS]:
            if j in reach:
                reach.add(i)
                break
    return reach


def terminal_of(nodes, capture, lo: int, t: int) -> set:
    """The captured nodes in ``[lo, t]`` below which no captured node lies
    (no needed input of theirs depends on one): a walk that only captures
    need not run their rules (`Schedule.terminal`, for the serial walk that
    builds no plan)."""
    reach = _reaching(nodes, capture, lo, t)
    out = set()
    for i in capture:
        rec = nodes[i]
        ins = rec[N_INPUTS]
        if ins and not any(r and ins[k] in reach for k, r in enumerate(rec[N_NEEDS])):
            out.add(i)
    return out


# ----------------------------------------------------------------- seeding
def check_target(graph, t: int, fname: str) -> None:
    """BackwardError unless the target requires grad."""
    if not graph._nodes[t][N_RG]:
        raise BackwardError(
            f"{fname}: target node {t} ({_name(graph._nodes[t][N_OP])}) does not "
            "require grad; it depends on no variable, or was built under no_grad()",
            node=t,
        )


def seed_array(graph, t: int, grad, fname: str):
    """The seed of a first-order walk from target t: ``(array, borrowed)``.
    ``grad`` is None (a one-element target, seeded with 1), an array-like of
    the target's shape, or a NodeId of this graph (its value is the seed).
    ``borrowed``: the seed is a read-only view of the caller's array (no
    copy: rules never write to g), which the walk copies before it stores
    it (or a view of it) as a grad."""
    check_target(graph, t, fname)
    shape = graph._shape(t)
    if grad is None:
        if int(np.prod(shape)) != 1:
            raise NonScalarTargetError(
                f"{fname}: target node {t} has shape {shape}; pass grad= of that "
                "shape for a vector-Jacobian product, or reduce it to one element",
                node=t,
                got=shape,
            )
        return np.ones(shape, dtype=graph.dtype), False
    if type(grad) is NodeId:
        # a graph value as cotangent enters by its (read-only, so
        # borrowed) value; a foreign or stale NodeId: NodeNotFoundError
        grad = graph.value(grad)
    seed = as_graph_array(grad, graph.dtype, fname, "grad", copy=False)
    borrowed = not isinstance(grad, np.ndarray) or np.may_share_memory(seed, grad)
    if borrowed:
        seed = seed.view()
        seed.flags.writeable = False
    if seed.shape != shape:
        raise ShapeError(
            f"{fname}: grad has shape {seed.shape}, target node {t} has {shape}",
            op=fname, node=t, expected=shape, got=seed.shape)
    return seed, borrowed


def seed_node(graph, t: int, grad, fname: str) -> NodeId:
    """The seed of the recorded walk as a node: ones for ``grad=None``, a
    constant for an array, or the given NodeId (a cotangent that is itself a
    graph value)."""
    if type(grad) is NodeId:
        j = graph._index(grad)
        shape = graph._shape(t)
        if graph._shape(j) != shape:
            raise ShapeError(
                f"{fname}: grad node {j} has shape {graph._shape(j)}, target node {t} "
                f"has {shape}", op=fname, node=t, expected=shape, got=graph._shape(j))
        return grad
    seed, _ = seed_array(graph, t, grad, fname)
    return graph.constant(seed)


# --------------------------------------------------------------- conforming
def _shape_error(gshape, shape, op: int, i: int, j: int, recorded: bool) -> ShapeError:
    name = _name(op)
    return ShapeError(
        f"{'recorded ' if recorded else ''}backward of {name} (node {i}) returned a gradient "
        f"of shape {gshape} for input node {j} of shape {shape}",
        op=name, node=i, expected=shape, got=gshape)


def _anomaly(op: int, i: int, j: int) -> AnomalyError:
    name = _name(op)
    return AnomalyError(
        f"anomaly: backward of {name} (node {i}) produced a NaN or Inf "
        f"gradient for its input node {j}", op=name, node=i)


def needs_conform(gj, shape: tuple, dtype, anomaly: bool) -> bool:
    """Whether `conform` has work to do: the test the serial runner
    writes out inline on its hot path (keep them alike)."""
    return (type(gj) is not _ndarray or (gj.dtype is not dtype and gj.dtype != dtype)
            or gj.shape != shape or anomaly)


def conform(graph, gj, shape: tuple, op: int, i: int, j: int) -> np.ndarray:
    """Conform input gradient ``gj`` of node i for its input j of ``shape``:
    an ndarray of the graph dtype (else BackwardError), broadcast axes
    summed back (`sum_to_shape`; ShapeError if ``shape`` does not
    broadcast to it), finite in anomaly mode (else AnomalyError). Returns
    ``gj`` itself when nothing is to be done."""
    if type(gj) is not _ndarray:
        gj = np.asarray(gj)
    if gj.dtype != graph.dtype:
        name = _name(op)
        raise BackwardError(
            f"backward of {name} (node {i}) returned a {gj.dtype} gradient for "
            f"node {j}; graph dtype is {graph.dtype}",
            op=name, node=i, expected=graph.dtype, got=gj.dtype)
    if gj.shape != shape:
        if not broadcasts_to(gj.shape, shape):
            raise _shape_error(gj.shape, shape, op, i, j, False)
        gj = sum_to_shape(gj, shape)
    if graph.detect_anomaly and not np.all(np.isfinite(gj)):
        raise _anomaly(op, i, j)
    return gj


def conform_node(graph, gj, shape: tuple, op: int, i: int, j: int) -> NodeId:
    """`conform` for the recorded walk: ``gj`` must be a NodeId (else
    BackwardError: it would be detached from the graph); broadcast axes are
    summed by a ``Graph.sum_to`` node; finiteness of its value in anomaly
    mode."""
    if type(gj) is not NodeId:
        raise BackwardError(
            f"recorded backward of {_name(op)} (node {i}) returned a "
            f"{type(gj).__name__} for input node {j}, not a NodeId: the "
            "gradient would be detached from the graph", op=_name(op), node=i)
    gshape = graph._shape(gj.index)
    if gshape != shape:
        if not broadcasts_to(gshape, shape):
            raise _shape_error(gshape, shape, op, i, j, True)
        gj = graph.sum_to(gj, shape)
    if graph.detect_anomaly and not np.all(np.isfinite(graph._values[gj.index])):
        raise _anomaly(op, i, j)
    return gj


# -------------------------------------------------------------------- hooks
def run_hooks(graph, i: int, gi):
    """Node i's hooks on its complete gradient ``gi``; returns the gradient
    that flows on (the last array a hook returned, else ``gi``).

    Each hook gets a read-only view of ``gi``: ``gi`` may be the very
    array another node's gradient is (``add`` hands one array to both
    inputs; a reshape passes a view on), so an in-place write would
    change a sibling's gradient, and with ``workers > 1`` do so depending
    on thread timing. A write raises BackwardError naming the hook and the
    node; a hook changes the gradient by returning a new array, as in
    PyTorch. A read-only array a hook returns (a view of its argument, say)
    is copied, so stored gradients stay writable."""
    shape = gi.shape
    for fn in list(graph._hooks[i]):
        view = gi.view()
        view.flags.writeable = False
        try:
            res = fn(view)
        except ValueError as exc:
            if "read-only" not in str(exc):
                raise
            raise _hook_wrote(fn, i, graph._nodes[i][N_OP]) from exc
        if res is not None and res is not view:
            res = as_graph_array(res, graph.dtype, "hook", "return value", copy=False)
            if res.shape != shape:
                raise ShapeError(
                    f"hook on node {i} returned shape {res.shape}, expected {shape}",
                    op="hook", node=i, expected=shape, got=res.shape)
            gi = res if res.flags.writeable else res.copy()
    return gi


def run_hooks_node(graph, i: int, gi: NodeId) -> NodeId:
    """`run_hooks` in the recorded walk: the hooks see the gradient's
    array (read-only, as every graph value); a replacement enters the
    recorded graph as a constant."""
    arr = graph.value(gi)
    out = run_hooks(graph, i, arr)
    if out is arr:
        return gi
    return graph.constant(out)


def _hook_wrote(fn, i: int, op: int) -> BackwardError:
    """The error for a hook that wrote to the read-only gradient it got."""
    name = getattr(fn, "__qualname__", None) or repr(fn)
    return BackwardError(
        f"hook {name} on node {i} ({_name(op)}) wrote to its gradient in place; the "
        "gradient a hook gets is read-only (it may be another node's gradient too): "
        "return a new array instead, e.g. `return grad * 2`",
        op="hook", node=i, got=name)


# ------------------------------------------------------------- accumulation
def accumulate_stored(graph, i: int, gi) -> None:
    """``grads[i] += gi`` (``gi`` itself when none is stored yet)."""
    cur = graph._grads.get(i)
    graph._grads[i] = gi if cur is None else np.asarray(cur + gi)


def accumulate_leaf(graph, i: int, gi) -> None:
    """A leaf's complete gradient: stored (if it requires grad), added to
    its bound parameter's ``.grad``, then its post-accumulate hooks run."""
    if not graph._nodes[i][N_RG]:
        return
    post = graph._post_hooks.get(i) if graph._post_hooks else None
    # a post-accumulate hook may change g.grad(leaf) in place: store a
    # private copy, never gi itself (which may be another node's
    # gradient too: x + y hands one array to x and y)
    accumulate_stored(graph, i, gi.copy() if post and i not in graph._grads else gi)
    p = graph._param_of.get(i) if graph._param_of else None
    if p is not None:
        taken = graph._taken
        if (taken is not None and not post and p.grad is None and gi.base is None
                and gi.flags.writeable and getattr(p, "grad_slot", None) is None):
            p.grad = gi           # no copy: `settle_taken` proves it private after the walk
            taken.append((i, p, gi))
        else:
            add_param_grad(p, gi)
    if post:
        nid = graph._node_id(i)
        for fn in list(post):
            fn(graph, nid)


def add_param_grad(p, gi: np.ndarray) -> None:
    """``p.grad += gi`` (a copy of ``gi`` when ``p.grad`` is None); through
    ``p.grad_slot``, times ``p.grad_scale``, when the parameter has a slot
    (data-parallel gradient buckets: yscv/nn/parameter.py)."""
    cur = p.grad
    slot = getattr(p, "grad_slot", None)
    if slot is None:
        p.grad = gi.copy() if cur is None else cur + gi
        return
    scale = p.grad_scale
    if cur is None and slot.shape == gi.shape and slot.dtype == gi.dtype:
        if scale == 1.0:
            np.copyto(slot, gi)
        else:
            np.multiply(gi, scale, out=slot)
        p.grad = slot
        return
    if scale != 1.0:
        gi = gi * scale
    if cur is slot:
        np.add(cur, gi, out=cur)     # same bits as cur + gi
    else:
        p.grad = gi.copy() if cur is None else cur + gi


def begin_taking(graph) -> bool:
    """Start a first-order walk's list of uncopied ``Parameter.grad``s
    (`settle_taken`); returns whether a walk of this graph is already
    running (a hook's backward inside a walk): the inner walk adds to the
    outer walk's list, which the outer walk settles when it ends."""
    if graph._taken is not None:
        return True
    graph._taken = [] if graph._param_of else None
    return False


def settle_taken(graph, nested: bool = False) -> None:
    """After a first-order walk: each ``Parameter.grad`` that
    `accumulate_leaf` set to the walk's own array (no copy) keeps it only if
    nothing else holds that memory but the leaf's stored gradient; any other
    holder (another leaf's or a retained node's stored gradient, or another
    parameter: ``x + y`` hands one array to both) gets it copied, as the
    copy made before. So ``clip_grad_norm_`` and friends, which write
    ``.grad`` in place, never reach a second gradient through it. The
    first gradient of a big model's parameters is then not copied at all
    (PyTorch's AccumulateGrad takes the tensor when it holds the only
    reference, likewise)."""
    if nested:
        return
    taken, graph._taken = graph._taken, None
    if not taken:
        return
    count: dict = {}
    for a in graph._grads.values():
        if type(a) is _ndarray:
            o = a if a.base is None else a.base
            count[id(o)] = count.get(id(o), 0) + 1
    for _i, _p, a in taken:
        count[id(a)] = count.get(id(a), 0) + 1
    stored = graph._grads
    for i, p, a in taken:
        mine = 1 + (stored.get(i) is a)
        if count[id(a)] > mine and p.grad is a:
            p.grad = a.copy()


def accumulate_node(graph, i: int, gi: NodeId, leaf: bool = True) -> None:
    """The recorded walk's accumulation of ``gi`` into node i: the stored
    array (and a leaf's parameter ``.grad``, post-accumulate hooks) as a
    first-order walk would, and the gradient node, summed with an earlier
    recorded one (`Graph.grad_node`)."""
    value = np.array(graph._values[gi.index], copy=True)
    prev = graph._grad_nodes.get(i)
    if prev is not None and graph._is_live(prev):
        total = graph.add(prev, gi)
    elif i in graph._grads:
        total = graph.add(graph.constant(graph._grads[i]), gi)
    else:
        total = gi
    graph._grad_nodes[i] = total
    if leaf:
        accumulate_leaf(graph, i, value)
    else:
        accumulate_stored(graph, i, value)
