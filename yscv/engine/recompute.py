"""Activation checkpointing: release values, recompute them by replaying forwards.

Every registered forward is a pure function of its input values and static
attributes, so the value (and saved data) of any non-leaf node can be rebuilt
from its inputs. This module uses that in three ways:

* ``g.checkpoint(fn, *nodes)`` runs ``fn``; the nodes it appended form a
  *segment*. Once ``fn`` returns, the segment's values and saved data are
  released, except its outputs and any leaves created inside it.
* The backward walk, on reaching a node whose value, saved data or input
  values were released, recomputes them (and their released ancestors, in
  index order) and keeps them while it works through the segment; once the
  walk passes below the segment's first index it releases the segment again.
* ``g.value(n)`` on a released node recomputes it (without keeping the
  recomputed ancestors), so a read never returns stale data.

Gradients are bit-identical to the un-checkpointed graph because the replayed
forwards are the same functions on the same inputs (dropout replays its seed,
batch norm's running statistics are updated by the Graph method, never by the
forward, so a replay cannot update them twice).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from .. import registry
from ..errors import CheckpointError
from ..node import N_ATTRS, N_INPUTS, N_OP, N_RG, N_SAVED, N_SHAPE, NodeId, Op, with_saved

_LEAF = int(Op.LEAF)


def released_ancestry(nodes, values, roots) -> list:
    """Indices of the released nodes (value None) needed to rebuild
    ``roots``: they and their released ancestors, ascending. A released
    leaf cannot be rebuilt: `CheckpointError`."""
    need, seen, stack = [], set(), list(roots)
    while stack:
        k = stack.pop()
        if k in seen:
            continue
        seen.add(k)
        if values[k] is not None:
            continue
        if nodes[k][N_OP] == _LEAF:
            raise CheckpointError(
                f"cannot recompute node {k}: it is a leaf whose value was released",
                node=k)
        need.append(k)
        stack.extend(nodes[k][N_INPUTS])
    need.sort()
    return need


@dataclasses.dataclass(frozen=True)
class CheckpointSegment:
    """Node indices ``start_node .. end_node`` (end inclusive): one segment of a
    `CheckpointConfig`."""

    start_node: int
    end_node: int

    def __post_init__(self):
        if self.start_node < 0 or self.end_node < self.start_node:
            raise ValueError(
                f"CheckpointSegment: need 0 <= start_node <= end_node, got "
                f"({self.start_node}, {self.end_node})")


@dataclasses.dataclass
class CheckpointConfig:
    """A list of segments for `Graph.backward_with_checkpoints`."""

    segments: list = dataclasses.field(default_factory=list)

    @classmethod
    def uniform(cls, num_nodes: int, num_segments: int) -> "CheckpointConfig":
        """Split node indices [0, num_nodes) into ``num_segments`` equal
        segments; the last takes the remainder."""
        if num_nodes < 0 or num_segments <= 0:
            raise ValueError(
                f"CheckpointConfig.uniform: need num_nodes >= 0 and num_segments > 0, got "
                f"({num_nodes}, {num_segments})")
        if num_nodes == 0:
            return cls([])
        num_segments = min(num_segments, num_nodes)
        size = num_nodes // num_segments
        segs = []
        for k in range(num_segments):
            start = k * size
            end = num_nodes - 1 if k == num_segments - 1 else start + size - 1
            segs.append(CheckpointSegment(start, end))
        return cls(segs)


class _Segment:
    """A release group: indices [start, end) minus ``keep`` (outputs)."""

    __slots__ = ("start", "end", "keep")

    def __init__(self, start: int, end: int, keep: frozenset):
        self.start = start
        self.end = end
        self.keep = keep


class CheckpointMixin:
    """Graph methods for activation checkpointing (see module docstring)."""

    # -------------------------------------------------------------- release
    def _release(self, i: int) -> None:
        """Drop node i's value and saved data (its record keeps its shape)."""
        v = self._values[i]
        rec = self._nodes[i]
        if v is None or rec[N_OP] == _LEAF:
            return
        self._values[i] = None
        if rec[N_SAVED] is not None:
            self._nodes[i] = with_saved(rec, None)
        self._has_released = True

    def _release_segment(self, seg: _Segment) -> None:
        for i in range(seg.start, min(seg.end, len(self._uids))):
            if i not in seg.keep:
                self._release(i)

    # ------------------------------------------------------------ recompute
    def _released_ancestry(self, roots) -> list:
        """Indices of released nodes needed to rebuild ``roots``, ascending."""
        return released_ancestry(self._nodes, self._values, roots)

    def _materialize(self, roots) -> list:
        """Recompute released ``roots`` and their released ancestors in place
        (values and saved data); returns the indices recomputed."""
        need = self._released_ancestry(roots)
        forward = registry.FORWARD
        values, nodes = self._values, self._nodes
        for k in need:
            rec = nodes[k]
            op, ins, attrs = rec[N_OP], rec[N_INPUTS], rec[N_ATTRS]
            try:
                value, sv = forward[op](attrs, *[values[j] for j in ins])
            except Exception as exc:
                raise CheckpointError(
                    f"recomputing node {k} ({Op(op).name.lower()}) failed: {exc}",
                    node=k) from exc
            if type(value) is not np.ndarray:
                value = np.asarray(value)
            want = rec[N_SHAPE]
            if value.shape != want:
                raise CheckpointError(
                    f"recomputing node {k} ({Op(op).name.lower()}) gave shape "
                    f"{value.shape}, but the recorded value had shape {want}",
                    node=k, expected=want, got=value.shape)
            values[k] = value
            if rec[N_RG]:
                nodes[k] = with_saved(rec, sv)
        return need

    def _recompute_value(self, i: int):
        """Value of released node i, rebuilt without keeping its ancestors."""
        if not self._has_released or self._values[i] is not None:
            v = self._values[i]
            if v is None:
                raise CheckpointError(f"value of node {i} is not available", node=i)
            return v
        rebuilt = self._materialize([i])
        value = self._values[i]
        for k in rebuilt:
            self._release(k)
        return value

    def _prepare_node_for_backward(self, i: int) -> None:
        """Make node i's value, saved data and input values available."""
        # value and saved data are released and rebuilt together, so a present
        # value means its saved data is valid too
        roots = [j for j in self._nodes[i][N_INPUTS] if self._values[j] is None]
        if self._values[i] is None:
            roots.append(i)
        if roots:
            self._materialize(roots)

    # ----------------------------------------------------------- public API
    def checkpoint(self, fn, *nodes):
        """Run ``fn(g, *nodes)`` as a checkpointed segment.

        ``fn`` returns a NodeId or a tuple of NodeIds (the outputs). The nodes
        it appended are released once it returns, except the outputs and any
        leaves created inside; backward recomputes them from the segment
        inputs. If ``fn`` raises, the nodes it appended are removed.
        """
        if not callable(fn):
            raise TypeError("checkpoint: fn must be callable")
        for k, n in enumerate(nodes):
            if type(n) is NodeId:
                self._index(n)
        start = len(self._uids)
        try:
            outs = fn(self, *nodes)
            single = type(outs) is NodeId
            out_list = [outs] if single else list(outs) if isinstance(outs, (tuple, list)) else None
            if out_list is None or not all(type(o) is NodeId for o in out_list):
                raise TypeError(
                    "checkpoint: fn must return a NodeId or a tuple of NodeIds, got "
                    f"{type(outs).__name__}")
            keep = frozenset(self._index(o) for o in out_list)
        except BaseException:
            if len(self._uids) > start:
                self.truncate(start)
            raise
        end = len(self._uids)
        if end > start:
            seg = _Segment(start, end, keep)
            self._segments.append(seg)
            self._segment_starts.setdefault(start, []).append(seg)
            self._release_segment(seg)
        return outs if single else tuple(out_list)

    def checkpoint_sequential(self, fns, segments: int, x):
        """Run ``fns`` (each ``fn(g, x) -> NodeId``) in order, split into
        ``segments`` chunks; every chunk but the last is checkpointed (as
        torch.utils.checkpoint.checkpoint_sequential)."""
        fns = list(fns)
        if not fns:
            raise ValueError("checkpoint_sequential: fns is empty")
        if isinstance(segments, bool) or not isinstance(segments, int) or segments <= 0:
            raise ValueError(f"checkpoint_sequential: segments must be a positive int, got {segments!r}")
        segments = min(segments, len(fns))
        size = (len(fns) + segments - 1) // segments
        chunks = [fns[k:k + size] for k in range(0, len(fns), size)]

        def run(chunk):
            def body(g, h):
                for f in chunk:
                    h = f(g, h)
                return h
            return body

        for chunk in chunks[:-1]:
            x = self.checkpoint(run(chunk), x)
        return run(chunks[-1])(self, x)

    def backward_with_checkpoints(self, target, config: CheckpointConfig) -> None:
        """Plain backward, then release the values of the
        non-leaf nodes inside ``config``'s segments (recomputed on read)."""
        if not isinstance(config, CheckpointConfig):
            raise TypeError("backward_with_checkpoints: config must be a CheckpointConfig")
        n = len(self._uids)
        for s in config.segments:
            if s.end_node >= n:
                raise ValueError(
                    f"backward_with_checkpoints: segment ({s.start_node}, {s.end_node}) "
                    f"reaches past the last node {n - 1}")
        self.backward(target)
        for s in config.segments:
            seg = _Segment(s.start_node, s.end_node + 1, frozenset())
            self._segments.append(seg)
            self._segment_starts.setdefault(seg.start, []).append(seg)
            self._release_segment(seg)
