"""Handlers of the ONNX operators that pick a data-dependent set of
elements: Unique and NonMaxSuppression.

Which elements are picked is read from the values with NumPy (the index
outputs are int64 arrays, without gradient, as ONNX defines them).
Unique's float output ``Y`` is an ``index_select`` of the input at the
first occurrences, so gradients reach those elements.
"""
from __future__ import annotations

import numpy as np

from ._import_registry import handler

__all__ = ["check"]


@handler("Unique")
def _unique(run, node):
    """The unique elements (flattened, or the unique slices along ``axis``),
    sorted (``sorted=1``) or in order of first occurrence; the int64
    indices of the first occurrences, the inverse indices and the counts."""
    name = node.inputs[0]
    a = run.arr(name)
    axis = node.attrs.get("axis")
    if axis is not None:
        if not -a.ndim <= int(axis) < a.ndim:
            raise node.fail(f"axis={axis} is out of range for an input of rank {a.ndim}")
        axis = int(axis) % a.ndim
    flat = a.reshape(-1) if axis is None else a
    _, first, inverse, counts = np.unique(flat, return_index=True, return_inverse=True,
                                          return_counts=True, axis=None if axis is None else axis)
    inverse = inverse.reshape(-1)
    if not int(node.attrs.get("sorted", 1)):
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        first, counts, inverse = first[order], counts[order], rank[inverse]
    ax = 0 if axis is None else axis
    if run.is_static(name):
        y = np.take(flat, first, axis=ax)
    else:
        g = run.g
        x = run.node(name)
        if axis is None:
            x = g.reshape(x, (a.size,))
        y = g.index_select(x, ax, first.astype(np.int64))
    return [y, first.astype(np.int64), inverse.astype(np.int64), counts.astype(np.int64)]


def _corners(boxes, center):
    """[..., 4] boxes as (y1, x1, y2, x2) with y1 <= y2 and x1 <= x2."""
    if center:
        x, y, w, h = (boxes[..., i] for i in range(4))
        return np.stack([y - h / 2, x - w / 2, y + h / 2, x + w / 2], -1)
    y1, x1, y2, x2 = (boxes[..., i] for i in range(4))
    return np.stack([np.minimum(y1, y2), np.minimum(x1, x2),
                     np.maximum(y1, y2), np.maximum(x1, x2)], -1)


def _suppresses(a, b, iou):
    """Whether box ``a`` suppresses box ``b``: IoU > ``iou`` (as ONNX's reference)."""
    ih = min(a[2], b[2]) - max(a[0], b[0])
    iw = min(a[3], b[3]) - max(a[1], b[1])
    if ih <= 0 or iw <= 0:
        return False
    inter = ih * iw
    area_a = (a[2] - a[0]) * (a[3] - a[1])
    area_b = (b[2] - b[0]) * (b[3] - b[1])
    union = area_a + area_b - inter
    if area_a <= 0 or area_b <= 0 or union <= 0:
        return False
    return inter / union > iou


def _scalar(run, node, slot, default, kind):
    if not run.has(node, slot):
        return default
    v = run.arr(node.inputs[slot]).reshape(-1)
    return default if v.size == 0 else kind(v[0])


@handler("NonMaxSuppression")
def _nms(run, node):
    """int64 [K, 3] rows (batch, class, box) of the boxes kept per batch
    entry and class: by decreasing score (equal scores: lower index first),
    above ``score_threshold``, each dropping the later boxes whose IoU with
    it exceeds ``iou_threshold``, at most ``max_output_boxes_per_class``."""
    boxes = np.asarray(run.arr(node.inputs[0]))   # in their own float type, as the
    scores = np.asarray(run.arr(node.inputs[1]))  # reference compares them
    if boxes.ndim != 3 or boxes.shape[2] != 4 or scores.ndim != 3 \
            or scores.shape[0] != boxes.shape[0] or scores.shape[2] != boxes.shape[1]:
        raise node.fail(f"boxes {boxes.shape} and scores {scores.shape} must be "
                        "[B, N, 4] and [B, C, N]")
    limit = max(_scalar(run, node, 2, 0, int), 0)
    iou = _scalar(run, node, 3, boxes.dtype.type(0), boxes.dtype.type)
    floor = _scalar(run, node, 4, None, scores.dtype.type)
    corners = _corners(boxes, int(node.attrs.get("center_point_box", 0)))
    rows = []
    for b in range(scores.shape[0]):
        for c in range(scores.shape[1]):
            s = scores[b, c]
            cand = np.arange(s.size) if floor is None else np.flatnonzero(s > floor)
            cand = cand[np.lexsort((cand, -s[cand]))]
            kept = []
            for i in cand:
                if len(kept) >= limit:
                    break
                if not any(_suppresses(corners[b, j], corners[b, i], iou) for j in kept):
                    kept.append(int(i))
            rows.extend((b, c, i) for i in kept)
    return [np.asarray(rows, np.int64).reshape(-1, 3)]


def check(node, np_dtype_of) -> None:
    """Load-time refusals of the attribute values these handlers do not implement."""
    if node.op == "NonMaxSuppression" and int(node.attrs.get("center_point_box", 0)) not in (0, 1):
        raise node.fail(f"center_point_box={node.attrs['center_point_box']} is not supported "
                        "(0 or 1)")
