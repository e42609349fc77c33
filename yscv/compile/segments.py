"""Checkpointed segments in a replay: released and recomputed as in eager.

``g.checkpoint`` (and ``checkpoint_sequential``, ``backward_with_checkpoints``)
inside a compiled function leave ``("release", at, start, end, keep)``
actions in the record (yscv/compile/record.py): after node ``at - 1`` the
replay drops the values and saved data of the segment's non-leaf nodes but
``keep`` (its outputs), as ``Graph._release_segment`` does
(yscv/engine/recompute.py). The replay's backward walk then does what the
eager walk does on such a graph: before a visited node's rule runs, its
released value, saved data and input values are recomputed, with their
released ancestors, in index order, by the registered forwards
(`prepare`); once the walk has passed below a segment's first index the
segment is released again (`release_points` says where), and after the
walk every segment is. Same forwards on the same inputs: the eager bits,
and the eager step's memory profile.
"""
from __future__ import annotations

import numpy as np

from .. import registry
from ..engine.recompute import released_ancestry
from ..node import N_INPUTS, N_OP, N_RG, Op

_LEAF = int(Op.LEAF)
_FORWARD = registry.FORWARD


def release(seg, values, saved, nodes) -> None:
    """Drop segment ``seg = (start, end, keep)``'s non-leaf values."""
    start, end, keep = seg
    for k in range(start, end):
        if k not in keep and nodes[k][N_OP] != _LEAF:
            values[k] = None
            saved[k] = None


def materialize(nodes, values, attrs, saved, roots) -> list:
    """Recompute released ``roots`` and their released ancestors, ascending
    (``CheckpointMixin._materialize``); returns the indices recomputed."""
    need = released_ancestry(nodes, values, roots)
    for k in need:
        rec = nodes[k]
        v, s = _FORWARD[rec[N_OP]](attrs[k], *[values[j] for j in rec[N_INPUTS]])
        values[k] = v if type(v) is np.ndarray else np.asarray(v)
        saved[k] = s if rec[N_RG] else None
    return need


def prepare(nodes, values, attrs, saved, i: int) -> None:
    """Node i's value, saved data and input values, recomputed if released
    (``CheckpointMixin._prepare_node_for_backward``)."""
    roots = [j for j in nodes[i][N_INPUTS] if values[j] is None]
    if values[i] is None:
        roots.append(i)
    if roots:
        materialize(nodes, values, attrs, saved, roots)


def value(nodes, values, attrs, saved, i: int):
    """Node i's value, recomputed without keeping its ancestors if released
    (``Graph._recompute_value``)."""
    if values[i] is not None:
        return values[i]
    rebuilt = materialize(nodes, values, attrs, saved, [i])
    v = values[i]
    for k in rebuilt:
        values[k] = None
        saved[k] = None
    return v


def release_points(segs, entries) -> dict:
    """For a backward's visit plan: entry position -> the segments the walk
    has left once it reaches that entry (their start above its index)."""
    out: dict = {}
    left = sorted(segs, key=lambda s: -s[0])
    q = 0
    for pos, e in enumerate(entries):
        i = e[0]
        while q < len(left) and left[q][0] > i:
            out.setdefault(pos, []).append(left[q])
            q += 1
    return out


def mark_prepared(nodes, gone, i: int) -> None:
    """What `prepare` of node i recomputes (and keeps), marked present in
    ``gone`` (the plan's record of released values)."""
    stack = [j for j in nodes[i][N_INPUTS]] + [i]
    while stack:
        k = stack.pop()
        if gone[k]:
            gone[k] = False
            stack.extend(nodes[k][N_INPUTS])
