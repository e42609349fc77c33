"""The backward walk of the arena ``Graph``: ``backward``, ``gradients``, hooks
and gradient accumulation.

Arena order is a topological order, so backward is one reverse walk over the
indices from the target down (``WalkMixin._walk``). Each visited node gets its
complete gradient (the sum of its consumers' contributions), runs its hooks,
and calls its registered backward rule (``registry.BACKWARD[op]``), which
RETURNS one gradient per input (or None). The walk is the only place that
conforms them (`yscv.schedule.conform`: dtype check, broadcast axes summed
back to the input's shape, finiteness in anomaly mode) and sums them.

Leaves store their gradient in ``_grads`` (and a bound Parameter's ``.grad``,
then post-accumulate hooks); retained non-leaf nodes too. ``gradients`` is
the functional variant: it captures the requested gradients and stores none.
Seeding, hooks, conforming and accumulation are written once in
yscv/engine/schedule.py, for this serial runner, the threaded one
(yscv/engine/walk_parallel.py) and the recorded one (yscv/engine/walk_recorded.py).
"""
from __future__ import annotations

import numpy as np

from .. import registry
from . import schedule as _schedule
from . import walk_parallel as _walk_parallel
from . import walk_recorded as _walk_recorded
from .namespace import ARRAY as _ARRAY
from ..node import N_OP, N_RG, N_SAVED, NodeId, Op
from .schedule import accumulate_leaf as _accumulate_leaf
from .schedule import accumulate_stored as _accumulate_stored
from .schedule import conform as _conform
from .schedule import run_hooks as _run_hooks

_BACKWARD = registry.BACKWARD
_LEAF = int(Op.LEAF)
_ndarray = np.ndarray



class _HookHandle:
    """Returned by ``register_hook``; ``remove()`` unregisters the hook."""

    __slots__ = ("_hooks", "_fn")

    def __init__(self, hooks: list, fn):
        self._hooks = hooks
        self._fn = fn

    def remove(self) -> None:
        if self._fn in self._hooks:
            self._hooks.remove(self._fn)


class WalkMixin:
    """Hooks and the backward walk; storage comes from ``yscv.graph``."""

    def register_hook(self, n: NodeId, fn) -> _HookHandle:
        """``fn(grad) -> grad | None`` runs when n's gradient is complete and
        may replace it (a returned array must have n's shape)."""
        if not callable(fn):
            raise TypeError("register_hook: fn must be callable")
        hooks = self._hooks.setdefault(self._index(n), [])
        hooks.append(fn)
        return _HookHandle(hooks, fn)

    def register_post_accumulate_hook(self, leaf: NodeId, fn) -> _HookHandle:
        """``fn(graph, leaf)`` runs after the leaf's gradient was accumulated."""
        if not callable(fn):
            raise TypeError("register_post_accumulate_hook: fn must be callable")
        i = self._index(leaf)
        if self._nodes[i][N_OP] != _LEAF:
            raise TypeError(f"register_post_accumulate_hook: node {i} is not a leaf")
        hooks = self._post_hooks.setdefault(i, [])
        hooks.append(fn)
        return _HookHandle(hooks, fn)

    def register_backward_end_hook(self, fn) -> _HookHandle:
        """``fn(graph)`` runs once after each successful `backward` on
        this graph, when every leaf and parameter gradient was accumulated and
        every post-accumulate hook ran (not after a failed backward, not for
        `gradients`). The graph holds ``fn``: to let the graph be freed
        by reference counting, ``fn`` should not hold the graph itself (it
        gets it as its argument)."""
        if not callable(fn):
            raise TypeError("register_backward_end_hook: fn must be callable")
        self._end_hooks.append(fn)
        return _HookHandle(self._end_hooks, fn)

    # ------------------------------------------------------------- backward
    def backward(self, target: NodeId, grad=None, retain_graph: bool = True,
                 workers=1, create_graph: bool = False) -> None:
        """Accumulate d(target)/d(leaf) into every leaf that requires grad.

        With ``grad=None`` the target must hold exactly one element and is
        seeded with 1; otherwise ``grad`` (the target's shape: an array, or a
        NodeId of this graph whose value is used) is the cotangent of a
        vector-Jacobian product. With ``retain_graph=False`` the values and
        saved data of the non-leaf nodes the walk went through are released as
        soon as they are consumed (reading or differentiating them again
        recomputes them from the leaves). Once the walk has finished, the
        backward-end hooks run (`register_backward_end_hook`).

        ``workers=n > 1`` runs the backward rules of independent branches on up
        to n threads, bit-identical to ``workers=1`` (yscv/engine/walk_parallel.py);
        ``workers=None`` picks serial for chains and small graphs.

        ``create_graph=True`` records the walk itself as nodes of this graph
        (docs/higher_order.md): every leaf's gradient is then also a node,
        `grad_node`, differentiable again; ``grad`` may be a NodeId;
        every value is kept (``retain_graph`` is ignored) and the walk is
        serial (the same bits for any ``workers``).
        """
        _walk_parallel.check_workers(workers)
        t = self._index(target)
        if create_graph:
            with _walk_recorded.dropped_on_error(self), np.errstate(divide="ignore", invalid="ignore",
                                                                   over="ignore"):
                seed = _schedule.seed_node(self, t, grad, "backward")
                outer = _schedule.begin_taking(self)
                try:
                    _walk_recorded.recorded_walk(self, t, seed)
                finally:
                    _schedule.settle_taken(self, outer)
            if self._end_hooks:
                for fn in list(self._end_hooks):
                    fn(self)
            return
        seed, borrowed = _schedule.seed_array(self, t, grad, "backward")
        if workers is None:
            workers = _walk_parallel.choose_workers(self, t)
        # inf + -inf = nan where two paths' gradients meet (after a log at 0,
        # say) comes without NumPy's RuntimeWarning, as in PyTorch
        outer = _schedule.begin_taking(self)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            try:
                if workers > 1 and self._nodes[t][1]:  # N_INPUTS
                    _walk_parallel.parallel_walk(self, t, seed, retain_graph, borrowed,
                                                 int(workers))
                else:
                    self._walk(t, seed, retain_graph, borrowed)
            finally:
                _schedule.settle_taken(self, outer)
        if self._end_hooks:
            for fn in list(self._end_hooks):
                fn(self)

    def gradients(self, target: NodeId, inputs, grad=None, create_graph: bool = False) -> tuple:
        """d(target)/d(input) for each NodeId of ``inputs`` (a NodeId or a
        sequence), as a tuple of new arrays of the inputs' shapes.

        Functional (``torch.autograd.grad``): no stored gradient changes (leaf
        and retained grads, ``Parameter.grad``), post-accumulate and
        backward-end hooks do not run; ``register_hook`` hooks do. Inputs may
        be leaves or intermediate nodes; one the target does not depend on
        (or that does not require grad) gets zeros. Seeding (``grad`` an
        array or a NodeId) and errors as `backward`; the values are
        kept (``retain_graph=True``).

        ``create_graph=True`` returns NodeIds instead, recorded on this graph
        and differentiable again (docs/higher_order.md); ``grad`` may then be a
        NodeId, and an input the target does not depend on gets a constant
        node of zeros.
        """
        t = self._index(target)
        single = type(inputs) is NodeId
        nodes = (inputs,) if single else tuple(inputs) if isinstance(inputs, (tuple, list)) \
            else None
        if nodes is None:
            raise TypeError("gradients: inputs must be a NodeId or a tuple/list of NodeIds, "
                            f"got {type(inputs).__name__}")
        for k, n in enumerate(nodes):
            if type(n) is not NodeId:
                raise TypeError(f"gradients: inputs[{k}] must be a NodeId, got {type(n).__name__}")
        idx = [self._index(n) for n in nodes]
        if create_graph:
            capture = {i: None for i in idx if i <= t}
            with _walk_recorded.dropped_on_error(self), np.errstate(divide="ignore", invalid="ignore",
                                                                   over="ignore"):
                seed = _schedule.seed_node(self, t, grad, "gradients")
                if capture:
                    _walk_recorded.recorded_walk(self, t, seed, capture)
            return tuple(capture.get(i) if capture.get(i) is not None
                         else self.constant(np.zeros(self._shape(i), dtype=self.dtype))
                         for i in idx)
        seed, borrowed = _schedule.seed_array(self, t, grad, "gradients")
        capture = {i: None for i in idx if i <= t}
        if capture:
            self._walk(t, seed, True, borrowed, capture)
        out = []
        for i in idx:
            gi = capture.get(i)
            if gi is None:
                gi = np.zeros(self._shape(i), dtype=self.dtype)
            elif not gi.flags.writeable or any(np.may_share_memory(gi, o) for o in out):
                gi = gi.copy()  # never alias the caller's seed or another result
            out.append(gi)
        return tuple(out)

    def grad_node(self, leaf: NodeId):
        """The NodeId of the gradient a ``backward(..., create_graph=True)``
        accumulated into ``leaf`` (or a retained node), or None if no recorded
        backward reached it since the last `zero_grads`. Its value equals
        `grad` (an array that stays as it is)."""
        i = self._index(leaf)
        nid = self._grad_nodes.get(i)
        if nid is not None and not self._is_live(nid):
            return None
        return nid

    def _is_live(self, nid: NodeId) -> bool:
        i = nid.index
        return i < len(self._uids) and self._uids[i] == nid.uid

    def _recorded_vjp(self, build, inputs: tuple, grad: NodeId, needs) -> tuple:
        """The recorded gradients of ``out = build(self, *inputs)`` against the
        cotangent node ``grad``, one NodeId (or None) per input: a composite
        op's recorded backward (``backward/_recorded.py``). Each input that
        needs a gradient is aliased by an identity node first, so an input
        passed twice gets each position's own gradient; hooks do not run
        (they belong to the outer walk)."""
        aliases = tuple(self.reshape(x, self._shape(x.index)) if need else x
                        for x, need in zip(inputs, needs))
        out = build(self, *aliases)
        if not self._nodes[out.index][N_RG]:
            return (None,) * len(inputs)
        capture = {a.index: None for a, need in zip(aliases, needs) if need}
        _walk_recorded.recorded_walk(self, out.index, grad, capture, run_hooks=False)
        return tuple(capture.get(a.index) if need else None for a, need in zip(aliases, needs))

    def _walk(self, t: int, seed: np.ndarray, retain_graph: bool = True,
              borrowed: bool = False, capture=None) -> None:
        """Reverse index walk from ``t`` to 0 (arena order is a topological order).

        ``borrowed``: ``seed`` is a read-only view of the caller's array; any
        read-only gradient (it, or a view of it passed through by a backward)
        is copied before it is stored as a grad, so stored grads never alias
        the caller's data.

        ``capture`` (functional mode, `gradients`): a dict whose keys are
        the indices to differentiate; each gets its complete gradient (a leaf's
        after its hooks, another node's before them) and nothing is stored or
        accumulated. The walk stops below the lowest key."""
        stop = -1
        terminal = ()
        if capture is not None:
            stop = min(capture) - 1
            terminal = _schedule.terminal_of(self._nodes, capture, stop + 1, t)
        pending = [None] * (t + 1)
        pending[t] = seed
        nodes = self._nodes
        values = self._values
        hooks = self._hooks
        stored = self._grads
        param_of = self._param_of
        post_hooks = self._post_hooks
        retained = self._retained if capture is None else ()
        anomaly = self.detect_anomaly
        # a node's plain flag: its rule's gradients provably have its inputs'
        # shapes and the graph dtype (an elementwise rule, every input of the
        # output's shape: Graph._apply1/_apply2); anomaly mode checks every
        # gradient
        check_plain = not anomaly
        dtype = self.dtype
        seg_starts = self._segment_starts
        released = self._has_released
        backward = _BACKWARD
        ns = _ARRAY
        ndarray = _ndarray
        plain_leaves = not (param_of or post_hooks)
        # One flag for the features a plain backward does not use, so a node
        # of the common case pays one test for all of them (the per-node
        # path; hooks can only be added during the walk by a hook, which
        # needs hooks at the start).
        special = capture is not None or bool(hooks) or borrowed or bool(retained) or released
        for i in range(t, stop, -1):
            if seg_starts and i + 1 in seg_starts:
                for seg in seg_starts[i + 1]:  # the walk has left these segments
                    self._release_segment(seg)
            gi = pending[i]
            if gi is None:
                continue
            pending[i] = None
            if type(gi) is not ndarray:  # 0-d arithmetic yields NumPy scalars
                gi = np.asarray(gi)
            # the node's record (yscv.node: N_OP ...) in one read
            op, ins, attrs_i, saved_i, rg_i, needs_i, pl, _ = nodes[i]
            if special:
                if capture is not None and ins and i in capture:
                    capture[i] = gi  # before the node's hooks (torch.autograd.grad does so)
                if hooks and i in hooks:
                    gi = _run_hooks(self, i, gi)
                if terminal and i in terminal:
                    continue  # captured, and nothing below it is wanted
                if borrowed and (not ins or (retained and i in retained)) \
                        and not gi.flags.writeable:
                    gi = gi.copy()
                if not ins:
                    if capture is not None:  # a leaf input: after its hooks, as torch
                        if i in capture:
                            capture[i] = gi
                        continue
                else:
                    if retained and i in retained:
                        _accumulate_stored(self, i, gi)
                    if released:  # may rebuild the value and saved data
                        self._prepare_node_for_backward(i)
                        saved_i = nodes[i][N_SAVED]
            if not ins:
                if plain_leaves and rg_i:  # plain leaf: schedule.accumulate_stored, inline
                    cur = stored.get(i)
                    stored[i] = gi if cur is None else np.asarray(cur + gi)
                else:
                    _accumulate_leaf(self, i, gi)
                continue
            # Conform and add, written out per path: one- and two-input nodes
            # (nearly all) are unrolled, with no per-node zip loop or call on
            # this hot path (both measured slower: docs/engine.md, "Why the hot
            # path is written out"). The test is schedule.needs_conform's,
            # written out (keep the copies alike). A plain node's gradients skip the
            # test (its result is known: docs/engine.md). An input requires
            # grad iff the node's needs say so (needs[k] is its rg, recorded
            # at the append).
            pl = pl and check_plain
            n_in = len(ins)
            if n_in == 1:
                j = ins[0]
                vj = values[j]
                gj = backward[op](ns, gi, (vj,), values[i], attrs_i, saved_i, needs_i)[0]
                if gj is not None and needs_i[0]:
                    if not pl and (type(gj) is not ndarray
                                         or (gj.dtype is not dtype and gj.dtype != dtype)
                                         or gj.shape != vj.shape or anomaly):
                        gj = _conform(self, gj, vj.shape, op, i, j)
                    cur = pending[j]
                    pending[j] = gj if cur is None else cur + gj
            elif n_in == 2:
                j, k = ins
                vj = values[j]
                vk = values[k]
                gj, gk = backward[op](ns, gi, (vj, vk), values[i], attrs_i, saved_i, needs_i)
                rj, rk = needs_i
                if gj is not None and rj:
                    if not pl and (type(gj) is not ndarray
                                   or (gj.dtype is not dtype and gj.dtype != dtype)
                                   or gj.shape != vj.shape or anomaly):
                        gj = _conform(self, gj, vj.shape, op, i, j)
                    cur = pending[j]
                    pending[j] = gj if cur is None else cur + gj
                if gk is not None and rk:
                    if not pl and (type(gk) is not ndarray
                                   or (gk.dtype is not dtype and gk.dtype != dtype)
                                   or gk.shape != vk.shape or anomaly):
                        gk = _conform(self, gk, vk.shape, op, i, k)
                    cur = pending[k]
                    pending[k] = gk if cur is None else cur + gk
            else:
                in_vals = tuple([values[j] for j in ins])
                grads = backward[op](ns, gi, in_vals, values[i], attrs_i, saved_i, needs_i)
                for j, gj, vj, r in zip(ins, grads, in_vals, needs_i):
                    if gj is None or not r:
                        continue
                    gj = _conform(self, gj, vj.shape, op, i, j)
                    cur = pending[j]
                    pending[j] = gj if cur is None else cur + gj
            if not retain_graph:
                self._release(i)
        if seg_starts:  # segments the loop did not leave (all of them if it stopped early)
            for seg in seg_starts.get(0, ()) if stop < 0 else self._segments:
                self._release_segment(seg)
