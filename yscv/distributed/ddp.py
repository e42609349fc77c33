"""Data-parallel training: gradients averaged over ranks in one fused allreduce.

`GradientAverager` packs every trainable parameter's ``.grad`` (a
missing gradient counts as zeros) into one flat buffer per dtype, appends
one "has a gradient" flag per parameter, and reduces the buffer with ONE
``Allreduce`` per step (per dtype; a model has one). Dividing the sum by the
world size gives the mean; every rank computes it from the same summed bits,
so the replicas stay bit-identical. A parameter that got no gradient on any
rank keeps ``grad = None`` (an optimizer skips it, as in one process).

`DistributedDataParallel` wraps a module: construction broadcasts
rank 0's parameters and buffers; calling it calls the module and registers a
backward-end hook on the graph (``g.register_backward_end_hook``), which
runs the averager after ``g.backward`` has accumulated every ``p.grad``.

Cold start, when this machine has more ranks than cores (``stagger_compile``
None, the default; True forces it): the first time, rank 0 runs its forward
and backward alone while the other ranks wait (a barrier before their first
forward, met by rank 0 after its first backward). Numba compiles the kernels
once, on rank 0, into its on-disk cache, and the other ranks load them from
there instead of compiling the same kernels on shared cores. With a core per
rank, compiling on every rank at once is as fast or faster (measured:
docs/benchmarks.md), so the ranks start together.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import weakref

import numpy as np

from .. import runtime
from ..errors import DistributedError
from . import _comm

__all__ = ["DistributedDataParallel", "GradientAverager", "broadcast_module",
           "check_same_parameters"]


def _describe(module) -> list:
    """[kind, name, shape, dtype, requires_grad] of every parameter and
    array buffer, in the module's order: what every rank must agree on."""
    rows = [["parameter", name, list(p.data.shape), str(p.data.dtype),
             bool(getattr(p, "requires_grad", True))] for name, p in module.named_parameters()]
    named_buffers = getattr(module, "named_buffers", None)
    if callable(named_buffers):
        rows += [["buffer", name, list(b.shape), str(b.dtype), False]
                 for name, b in named_buffers() if isinstance(b, np.ndarray)]
    return rows


def _row_text(row) -> str:
    kind, name, shape, dtype, grad = row
    frozen = "" if grad or kind == "buffer" else ", requires_grad=False"
    return f"{kind} {name!r} of shape {tuple(shape)} {dtype}{frozen}"


def _first_difference(descs: list) -> tuple:
    """(rank, text) of the first difference from rank 0's description."""
    ref = descs[0]
    for r, rows in enumerate(descs[1:], start=1):
        if rows == ref:
            continue
        for i in range(max(len(rows), len(ref))):
            mine = ref[i] if i < len(ref) else None
            theirs = rows[i] if i < len(rows) else None
            if mine == theirs:
                continue
            if mine is None or theirs is None:
                extra, has, lacks = (theirs, r, 0) if mine is None else (mine, 0, r)
                return r, (f"rank {has} has {len(descs[has])} parameters and buffers, rank "
                           f"{lacks} has {len(descs[lacks])}: entry #{i} is the {_row_text(extra)} "
                           f"on rank {has} and missing on rank {lacks}")
            if mine[:2] == theirs[:2]:
                what = [f"shape {tuple(mine[2])} on rank 0 but {tuple(theirs[2])} on rank {r}"
                        if mine[2] != theirs[2] else "",
                        f"dtype {mine[3]} on rank 0 but {theirs[3]} on rank {r}"
                        if mine[3] != theirs[3] else "",
                        f"requires_grad={mine[4]} on rank 0 but {theirs[4]} on rank {r}"
                        if mine[4] != theirs[4] else ""]
                return r, f"{mine[0]} {mine[1]!r} has " + ", ".join(w for w in what if w)
            return r, (f"entry #{i} is the {_row_text(mine)} on rank 0 but the "
                       f"{_row_text(theirs)} on rank {r}")
    return 0, ""


def check_same_parameters(module, who: str = "DistributedDataParallel") -> None:
    """Raise `yscv.DistributedError` on EVERY rank unless every rank's
    ``module`` has the same parameters and buffers (names, shapes, dtypes,
    ``requires_grad``, order). One all-gather of a 32-byte digest when they
    agree; when not, the descriptions are gathered and the error names the
    first difference from rank 0 (entry, rank, shape / dtype on each side)."""
    if _comm.world_size() == 1:
        return
    rows = _describe(module)
    text = json.dumps(rows).encode()
    digest = np.frombuffer(hashlib.sha256(text).digest(), dtype=np.uint8).copy()
    if all((d == digest).all() for d in _comm.all_gather(digest)):
        return
    descs = [json.loads(b) for b in _comm._all_gather_bytes(text, f"{who} (parameter check)")]
    r, what = _first_difference(descs)
    differ = [q for q in range(1, len(descs)) if descs[q] != descs[0]]
    raise DistributedError(
        f"{who}: the ranks hold different parameters: {what} (ranks differing from rank 0: "
        f"{differ}). Every rank must build the same model, with the same parameter names, "
        "shapes, dtypes and order.", collective=f"{who} (parameter check)",
        rank=_comm.rank(), op=who, expected=descs[0], got=descs[r])


def broadcast_module(module, root: int = 0) -> None:
    """Overwrite every parameter's ``.data`` and every buffer of ``module`` with
    rank ``root``'s, in place (one broadcast per array)."""
    for p in module.parameters():
        _comm.broadcast(p.data, root)
    for b in module.buffers():
        if isinstance(b, np.ndarray) and b.flags.c_contiguous and b.flags.writeable:
            _comm.broadcast(b, root)


class GradientAverager:
    """Mean of the ranks' ``p.grad`` for ``params``, in one fused allreduce.

    Args:
        params: the trainable `yscv.nn.Parameter` objects, in the
            same order on every rank.
        stagger_compile: let rank 0 compile first: True, False, or None
            (when the ranks on this machine outnumber its cores; see the
            module docstring).
    """

    def __init__(self, params, stagger_compile=None):
        self.params = [p for p in params if getattr(p, "requires_grad", True)]
        groups: dict = {}
        for p in self.params:
            groups.setdefault(np.dtype(p.data.dtype), []).append(p)
        self._groups = list(groups.items())
        if stagger_compile is None:
            stagger_compile = _comm.world_size() > 1 and \
                _comm.local_world_size() > runtime.usable_cores()
        self._stagger = bool(stagger_compile)
        self._warm = False
        self._waited = False
        self._buffers: dict = {}
        self._slotted = False     # every parameter has its grad_slot in a bucket
        self._scale = 1.0         # the grad_scale the parameters carry now

    def before_forward(self, synced: bool = True) -> None:
        """Call before every forward. The first time, ranks other than 0 wait
        for rank 0's first backward (its kernels are then in Numba's cache).
        ``synced``: the backward of this forward will be averaged (False
        inside ``no_sync``). Once the buckets exist, a synced backward writes
        each contribution times ``1 / world`` into its bucket slot
        (``Parameter.grad_scale``), so the allreduce's sum is the mean and no
        division pass follows; a gradient already held is rescaled here to
        match (as PyTorch, the forward decides whether its backward syncs)."""
        world = _comm.world_size()
        if self._stagger and not self._warm and not self._waited and world > 1 \
                and _comm.rank() != 0:
            _comm.barrier()
            self._waited = True
        if world > 1 and self._slotted:
            self._set_scale(1.0 / world if synced else 1.0)

    def _set_scale(self, scale: float) -> None:
        if scale == self._scale:
            return
        ratio = scale / self._scale
        for p in self.params:   # gradients already held count at the new scale
            grad = p.grad
            if grad is not None:
                if grad is p.grad_slot:
                    grad *= ratio
                else:
                    p.grad = grad * ratio
        self._mark_scale(scale)

    def _mark_scale(self, scale: float) -> None:
        """Every parameter's ``grad_scale`` (what backward multiplies by)."""
        for p in self.params:
            p.grad_scale = scale
        self._scale = scale

    def _after_first_backward(self) -> None:
        if self._stagger and not self._warm and _comm.world_size() > 1:
            if _comm.rank() == 0 or not self._waited:
                _comm.barrier()
        self._warm = True

    def sync(self, extra=None):
        """Average the gradients over ranks, in place: ``p.grad`` becomes a view
        of this averager's flat buffer and the parameter's ``grad_slot``: the
        next backward writes its gradient straight into that slice (PyTorch's
        ``gradient_as_bucket_view``; copy a gradient to keep it past the next
        step), so a step copies no gradient into the buffer.
        ``extra``: optional float64 values summed over ranks in the same
        allreduce (appended to the first dtype's buffer); returns their sums
        as float64 (or None)."""
        self._after_first_backward()
        world = _comm.world_size()
        extra = None if extra is None else np.asarray(extra, dtype=np.float64).ravel()
        if world == 1:
            return extra
        out_extra = None
        for gi, (dt, params) in enumerate(self._groups):
            n_extra = extra.size if (gi == 0 and extra is not None) else 0
            buf, slots, total, views = self._buffer(gi, dt, params, n_extra)
            flags = buf[total:total + len(params)]
            for j, (p, (lo, hi), view) in enumerate(zip(params, slots, views)):
                grad = p.grad
                if grad is None:
                    buf[lo:hi] = 0
                    flags[j] = 0
                else:
                    if grad is not view:  # backward wrote elsewhere: copy in
                        view[...] = grad
                    flags[j] = 1
            if n_extra:
                buf[total + len(params):] = extra
            _comm._allreduce_inplace(buf, _comm._MPI.SUM, "all_reduce (gradients)")
            if n_extra:
                out_extra = buf[total + len(params):].astype(np.float64)
            if self._scale == 1.0:  # the contributions were not pre-scaled
                grads = buf[:total]
                grads /= dt.type(world)
            for j, (p, view) in enumerate(zip(params, views)):
                p.grad = view if flags[j] > 0 else None
                # the next backward writes this parameter's gradient straight
                # into its slice of the bucket (Parameter.grad_slot)
                p.grad_slot = view
        self._slotted = True
        if self._scale != 1.0:  # p.grad is the mean now: later contributions count as is
            self._mark_scale(1.0)
        if extra is not None and out_extra is None:  # no parameters at all
            out_extra = extra.copy()
            _comm.all_reduce(out_extra, "sum")
        return out_extra

    def _buffer(self, gi, dt, params, n_extra):
        """(flat buffer, [(lo, hi)] per parameter, gradient length, [view shaped
        as the parameter] per parameter) of group ``gi``, allocated once per
        (group, extra length)."""
        key = (gi, n_extra)
        cached = self._buffers.get(key)
        shapes = [p.data.shape for p in params]
        if cached is None or cached[4] != shapes:
            sizes = [p.data.size for p in params]
            total = sum(sizes)
            bounds = np.cumsum([0] + sizes).tolist()
            slots = list(zip(bounds[:-1], bounds[1:]))
            buf = np.zeros(total + len(params) + n_extra, dtype=dt)
            views = [buf[lo:hi].reshape(shape) for (lo, hi), shape in zip(slots, shapes)]
            cached = (buf, slots, total, views, shapes)
            self._buffers[key] = cached
        return cached[:4]


class DistributedDataParallel:
    """Wrap a `yscv.nn.Module` for data-parallel training over MPI ranks.

    Calling the wrapper is calling the module (``model(g, x)``). Construction
    checks that every rank holds the same parameters and buffers (names,
    shapes, dtypes, order; else `yscv.DistributedError` on every rank,
    naming the first difference) and broadcasts rank 0's parameters and
    buffers to every rank. After
    ``g.backward(...)`` on a graph the wrapper was called with, every
    trainable parameter's ``.grad`` is the mean over ranks (one fused
    allreduce), bit-identical on every rank. Inside ``with model.no_sync():``
    gradients stay local and accumulate; the next synced backward averages
    what was accumulated. A parameter without a gradient on some rank counts
    as zeros there (every rank takes part in every allreduce: no deadlock).

    Args:
        module: the model.
        broadcast_buffers: broadcast rank 0's buffers (batch-norm running
            statistics) before every forward, as PyTorch's DDP does, so the
            replicas stay identical (one broadcast per buffer; no cost for
            a model without buffers).
        stagger_compile: rank 0 compiles the kernels first, the other ranks
            load them from Numba's cache: True, False, or None (the default:
            when the ranks on this machine outnumber its cores; see
            docs/scaling_out.md).

    ``model.module`` is the wrapped module; ``state_dict()``,
    ``load_state_dict()``, ``parameters()``, ``train()``, ``eval()`` and any
    other attribute are the module's.
    """

    def __init__(self, module, broadcast_buffers: bool = True, stagger_compile=None):
        if not callable(module) or not hasattr(module, "parameters"):
            raise TypeError("DistributedDataParallel: module must be a yscv.nn.Module, got "
                            f"{type(module).__name__}")
        _comm._join()
        check_same_parameters(module)
        self.__dict__["module"] = module
        self.__dict__["broadcast_buffers"] = bool(broadcast_buffers)
        self.__dict__["_averager"] = GradientAverager(module.parameters(), stagger_compile)
        self.__dict__["_require_sync"] = True
        self.__dict__["_hooked"] = weakref.WeakSet()
        broadcast_module(module, 0)

    # ----------------------------------------------------------------- calls
    def _hook(self, g) -> None:
        if g not in self._hooked:
            # the graph holds this bound method; the wrapper only holds a weak
            # reference to the graph: no cycle keeps a finished graph alive
            g.register_backward_end_hook(self._on_backward_end)
            self._hooked.add(g)

    def __call__(self, g, *args, **kwargs):
        self._hook(g)
        if self.broadcast_buffers and _comm.world_size() > 1:
            for b in self.module.buffers():
                if isinstance(b, np.ndarray) and b.flags.c_contiguous and b.flags.writeable:
                    _comm.broadcast(b, 0)
        # after the broadcasts: no collective may run between a rank's wait
        # here and rank 0's first backward end
        self._averager.before_forward(self._require_sync)
        return self.module(g, *args, **kwargs)

    forward = __call__

    def bind(self, g) -> int:
        """Bind the module's parameters and buffers into ``g`` (see
        `yscv.nn.Module.bind`) and hook the graph."""
        self._hook(g)
        return self.module.bind(g)

    def _on_backward_end(self, g) -> None:
        if self._require_sync:
            self._averager.sync()
        else:
            self._averager._after_first_backward()

    @contextlib.contextmanager
    def no_sync(self):
        """Keep gradients local inside the block (accumulate micro-batches);
        the first synced backward after it averages what was accumulated."""
        old = self._require_sync
        self.__dict__["_require_sync"] = False
        try:
            yield
        finally:
            self.__dict__["_require_sync"] = old

    # ------------------------------------------------------ the module's face
    def state_dict(self, *args, **kwargs):
        """The wrapped module's state dict (its keys, no ``module.`` prefix)."""
        return self.module.state_dict(*args, **kwargs)

    def load_state_dict(self, *args, **kwargs):
        return self.module.load_state_dict(*args, **kwargs)

    def parameters(self, *args, **kwargs):
        return self.module.parameters(*args, **kwargs)

    def named_parameters(self, *args, **kwargs):
        return self.module.named_parameters(*args, **kwargs)

    def train(self, mode: bool = True):
        self.module.train(mode)
        return self

    def eval(self):
        self.module.eval()
        return self

    def __getattr__(self, name):
        if name.startswith("__") or name == "module":
            raise AttributeError(name)
        return getattr(self.__dict__["module"], name)

    def __setattr__(self, name, value):
        if name in self.__dict__:
            self.__dict__[name] = value
        else:
            setattr(self.module, name, value)

    def __repr__(self) -> str:
        return f"DistributedDataParallel(\n  {self.module!r}\n)"
