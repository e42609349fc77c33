"""The exception hierarchy.

Every failure the library raises on purpose derives from `AutogradError`
or is a standard ``ValueError`` / ``TypeError`` / ``IndexError`` whose message
names the op and the bad argument. Errors carry structured fields (``op``,
``node``, ``expected``, ``got``) where they apply, so callers can inspect them
instead of parsing messages.
"""
from __future__ import annotations


class AutogradError(Exception):
    """Base class of every yscv error.

    Attributes:
        op: name of the operation involved, or None.
        node: arena index of the node involved, or None.
        expected: what was expected (shape, dtype, ...), or None.
        got: what was received, or None.
    """

    def __init__(self, message: str, *, op=None, node=None, expected=None, got=None):
        super().__init__(message)
        self.op = op
        self.node = node
        self.expected = expected
        self.got = got


class ShapeError(AutogradError, ValueError):
    """Operand or gradient shapes do not fit; the message names op and shapes."""


class NodeNotFoundError(AutogradError, IndexError):
    """A NodeId from another graph, or one removed by ``truncate``."""


class NonScalarTargetError(AutogradError, ValueError):
    """``backward(target)`` without ``grad`` on a target with more than one element."""


class BackwardError(AutogradError):
    """Backward cannot run (e.g. the target does not require grad)."""


class AnomalyError(AutogradError, FloatingPointError):
    """Anomaly mode found a NaN or Inf; names the op and the node index."""


class GradcheckError(AutogradError, AssertionError):
    """Analytic and numerical gradients disagree; names the worst element."""


class CheckpointError(AutogradError):
    """A released value cannot be recomputed, a recompute changed shape, or a
    training-state checkpoint file is corrupt, truncated or mismatched."""


class WorkerError(AutogradError, RuntimeError):
    """A ``DataLoader`` worker process failed: it died (killed, crashed,
    ``os._exit``), could not load the dataset, raised an exception whose type
    cannot be rebuilt in the main process, or produced a batch that does not
    pickle. The message names the worker, the batch and the cause.

    Attributes (besides ``op="DataLoader"``):
        worker: the worker's number (0 .. num_workers - 1), or None.
        batch: the number of the batch in its epoch, or None.
        original_type: qualified name of the worker's exception type, or None.
    """

    def __init__(self, message: str, *, worker=None, batch=None, original_type=None):
        super().__init__(message, op="DataLoader")
        self.worker = worker
        self.batch = batch
        self.original_type = original_type


class DistributedError(AutogradError):
    """A data-parallel run cannot go on: a collective did not complete within
    ``yscv.distributed.init(timeout=...)`` (a rank exited, crashed, or ran
    fewer batches than the others), or the ranks disagree where they must
    agree (``DistributedDataParallel`` construction: different parameters).

    Attributes (besides ``op``, ``expected``, ``got``):
        collective: the collective that failed (e.g. "all_reduce"), or None.
        missing_ranks: the ranks that did not arrive at it (a list; empty
            for a disagreement).
        rank: the rank that raised.
    """

    def __init__(self, message: str, *, collective=None, missing_ranks=(), rank=None, **fields):
        super().__init__(message, **fields)
        self.collective = collective
        self.missing_ranks = list(missing_ranks)
        self.rank = rank


class CompileError(AutogradError):
    """`yscv.compile` cannot record a function faithfully: ``fn`` does
    something a replay would not repeat (a hook, gradient clipping,
    ``g.gradients`` without ``create_graph``, a Python-side write to a
    Parameter, an array made from an input with NumPy, ...). The message
    names it; nothing is cached."""


class BatchingError(AutogradError):
    """`yscv.func.vmap` cannot batch what ``f`` does: an op without a
    batching rule (a user op), randomness under ``randomness='error'``, a
    value read from a batched node, a gradient that would be summed over
    the samples. ``op`` names the op."""


class CompileMismatchError(CompileError):
    """``yscv.compile(fn, check=True)``: the eager run of ``fn`` and the
    replay of its record differ. ``node`` is the arena index of the first
    node whose value (or op) differs, ``op`` its op's name."""


__all__ = [
    "AutogradError",
    "ShapeError",
    "NodeNotFoundError",
    "NonScalarTargetError",
    "BackwardError",
    "AnomalyError",
    "GradcheckError",
    "CheckpointError",
    "WorkerError",
    "DistributedError",
    "CompileError",
    "BatchingError",
    "CompileMismatchError",
]
