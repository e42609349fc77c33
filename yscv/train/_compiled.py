"""``Trainer(compile=True)``: the training step through `yscv.compile`.

What is compiled is the part of a step that builds nodes: the forward, the
loss and ``g.backward`` (filling ``Parameter.grad``, updating batch-norm
running statistics, drawing dropout masks from yscv's generator as the eager
step does). Gradient clipping, the optimizer step, ``zero_grad`` and the
scheduler stay outside (as in the loop of docs/compile.md), and so does
evaluation (`Trainer.evaluate` / `predict` run eagerly: one forward without
gradients has no backward to save).

One record per key of `yscv.compile` (the batch's shape and dtype, the
targets', the modules' training flags): the full batches share one record,
a smaller last batch records once more; ``cache_size`` keeps 8. A replay
gives the eager step's bits, so a compiled fit gives the eager fit's
per-step losses, parameters, history and checkpoints, and a run may be
resumed with or without ``compile``.

Fallback: when a record raises `yscv.CompileError` (the step uses something
`yscv.compile` refuses: a forward hook, gradient clipping, a buffer
changed outside graph ops ...), the state the refused record touched
(yscv's generator, the gradients, the module buffers) is put back, the step
runs eagerly, and so does every later step; one warning says why, starting
"Trainer(compile=True): ". Batches that are not NumPy arrays (a tuple of
inputs) and data-parallel runs are not compiled either, with a warning.
"""
from __future__ import annotations

import warnings

import numpy as np

from .. import random as _random
from ..engine.graph import Graph
from ..errors import CompileError

_PREFIX = "Trainer(compile=True): "


def step_runner(trainer, compile: bool):
    """The trainer's ``(g, k, xb, yb) -> (loss value, output array)``: the
    eager step, or a `CompiledStep` falling back to it."""
    if not isinstance(compile, (bool, np.bool_)):
        raise TypeError(f"Trainer: compile must be True or False, got {compile!r}")

    def eager(g, k, xb, yb):
        return eager_step(trainer, g, k, xb, yb)

    return CompiledStep(trainer, eager) if compile else eager


def eager_step(trainer, g, k, xb, yb):
    """Forward, loss and backward on ``g`` (truncated to ``k``, or a fresh
    graph without ``reuse_graph``): (loss value, output array)."""
    if trainer.reuse_graph:
        g.truncate(k)
    else:
        g = Graph(trainer.dtype)
    if trainer._dp is not None:  # [distributed] rank 0 compiles the kernels first
        trainer._dp.averager.before_forward()
    out = trainer.forward(g, trainer.model, xb)
    loss = trainer.loss_fn(g, out, yb)
    g.backward(loss, workers=trainer.backward_workers)
    # read before the update: a released (checkpointed) value recomputed
    # later would see the new parameters
    return float(g.value(loss)), g.value(out)


class CompiledStep:
    """``step(g, k, xb, yb) -> (loss value, output array)`` for a `Trainer`:
    the compiled forward + loss + backward, or ``eager(g, k, xb, yb)`` (the
    trainer's own) once compiling was given up."""

    def __init__(self, trainer, eager, cache_size: int = 8):
        from ..compile import Compiled

        self.eager = eager
        self.model = trainer.model
        self.active = True
        self.reason = None
        if trainer._dp is not None:
            self._give_up("data-parallel steps are not compiled yet; running eagerly")
            return
        model, forward, loss_fn = trainer.model, trainer.forward, trainer.loss_fn
        workers = trainer.backward_workers

        def train_step(g, xb, yb):
            out = forward(g, model, xb)
            loss = loss_fn(g, out, yb)
            g.backward(loss, workers=workers)
            return loss, out

        self.compiled = Compiled(train_step, cache_size=cache_size, dtype=trainer.dtype)

    def _give_up(self, reason: str) -> None:
        self.active = False
        self.reason = reason
        warnings.warn(_PREFIX + reason, RuntimeWarning, stacklevel=4)

    def __call__(self, g, k, xb, yb):
        if not self.active:
            return self.eager(g, k, xb, yb)
        if type(xb) is not np.ndarray or type(yb) is not np.ndarray:
            self._give_up(f"batches of {type(xb).__name__} inputs and {type(yb).__name__} "
                          "targets are not compiled (NumPy arrays are); running eagerly")
            return self.eager(g, k, xb, yb)
        compiled = self.compiled
        args = (xb, yb)
        snap = None
        if self._records(compiled, args):
            snap = _snapshot(self.model)
        try:
            loss, out = compiled(*args)
        except CompileError as e:
            if snap is not None:
                _restore(snap)
            self._give_up(f"the step could not be recorded ({e}); running eagerly")
            return self.eager(g, k, xb, yb)
        return float(loss), out

    @staticmethod
    def _records(compiled, args) -> bool:
        """Whether this call records (a key not cached yet)."""
        from ..compile import _reachable_modules

        return compiled.key(args, _reachable_modules(compiled.fn, args)) not in compiled.records


def _snapshot(model):
    """What a refused record may have changed: yscv's generator, every
    parameter's gradient, the module buffers (copies)."""
    params = [(p, None if p.grad is None else p.grad.copy(), p.grad,
               None if p.grad_slot is None else p.grad_slot.copy())
              for p in model.parameters()]
    bufs = [(b, b.copy()) for m in model.modules() for b in m._buffers.values()
            if b is not None]
    return _random.get_rng_state(), params, bufs


def _restore(snap) -> None:
    rng, params, bufs = snap
    _random.set_rng_state(rng)
    for p, copy, grad, slot in params:
        if grad is not None:
            np.copyto(grad, copy)
        p.grad = grad
        if slot is not None:
            np.copyto(p.grad_slot, slot)
    for b, copy in bufs:
        np.copyto(b, copy)
