"""Handlers of the feature-extraction ONNX operators: TfIdfVectorizer and,
from the ``ai.onnx.ml`` domain, Binarizer and ArrayFeatureExtractor; and of
the optional-value operators Optional, OptionalHasElement and
OptionalGetElement.

TfIdfVectorizer counts, per row of integer tokens, the n-grams of its pool
(``pool_int64s``; n from ``min_gram_length`` to ``max_gram_length``, with
up to ``max_skip_count`` tokens skipped between items; unigrams counted
once), as ONNX's reference does, and weighs them by ``mode`` (TF, IDF,
TFIDF): a float32 array without gradient (its input is integers).
Binarizer (``x > threshold``) is piecewise constant: computed on the
values. ArrayFeatureExtractor selects entries of the last axis with
``index_select``, so gradients reach them.

An optional value is the value itself, or None when empty (only inside a
graph: optional graph inputs and outputs stay refused at load).
"""
from __future__ import annotations

import numpy as np

from ._import_registry import handler

__all__ = ["check"]

_ML = "ai.onnx.ml:"


def _pool(at):
    """(n-gram tuple -> output column, the set of their prefixes) for the
    n-grams of the pool whose length is in [min, max]."""
    pool = [int(v) for v in at.get("pool_int64s", [])]
    counts = [int(v) for v in at["ngram_counts"]] + [len(pool)]
    index = [int(v) for v in at["ngram_indexes"]]
    lo, hi = int(at["min_gram_length"]), int(at["max_gram_length"])
    grams, prefixes, gid = {}, set(), 0
    for n, (a, b) in enumerate(zip(counts[:-1], counts[1:]), start=1):
        for s in range(a, a + (b - a) // n * n, n):
            if lo <= n <= hi:
                gram = tuple(pool[s:s + n])
                grams.setdefault(gram, index[gid])
                prefixes.update(gram[:k] for k in range(1, n + 1))
            gid += 1
    return grams, prefixes


@handler("TfIdfVectorizer")
def _tfidf(run, node):
    """[C] or [B, C] integer tokens -> float32 [width] or [B, width] weights."""
    at = node.attrs
    x = np.asarray(run.arr(node.inputs[0]))
    if x.dtype.kind not in "iu" or x.ndim > 2:
        raise node.fail(f"the input must be integers [C] or [B, C], got {x.dtype} {x.shape}")
    rows = x.reshape(1, -1) if x.ndim < 2 else x
    grams, prefixes = _pool(at)
    width = max(int(v) for v in at["ngram_indexes"]) + 1
    lo, hi = int(at["min_gram_length"]), int(at["max_gram_length"])
    freq = np.zeros((rows.shape[0], width), np.int64)
    for r, row in enumerate(rows.tolist()):
        first = lo
        for d in range(1, int(at.get("max_skip_count", 0)) + 2):
            for s in range(len(row)):
                for n in range(1, hi + 1):
                    i = s + (n - 1) * d
                    if i >= len(row) or tuple(row[s:i + 1:d]) not in prefixes:
                        break
                    col = grams.get(tuple(row[s:i + 1:d]))
                    if n >= first and col is not None:
                        freq[r, col] += 1
            if first == 1:
                first = 2
                if first > hi:
                    break
    mode = at["mode"]
    w = np.asarray(at.get("weights", []), np.float64)
    if mode == "TF":
        y = freq.astype(np.float64)
    elif mode == "IDF":
        y = np.where(freq > 0, w if w.size else 1.0, 0.0)
    else:
        y = freq * w if w.size else freq.astype(np.float64)
    y = y.astype(np.float32)
    return [y if x.ndim == 2 else y.reshape(-1)]


@handler(_ML + "Binarizer")
def _binarizer(run, node):
    """1 where x > threshold, else 0, in x's type."""
    a = np.asarray(run.arr(node.inputs[0]))
    return [(a > float(node.attrs.get("threshold", 0.0))).astype(a.dtype)]


@handler(_ML + "ArrayFeatureExtractor")
def _array_feature_extractor(run, node):
    """The entries of the last axis at the indices Y (any shape, flattened)."""
    name = node.inputs[0]
    shape = run.shape(name)
    idx = np.asarray(run.arr(node.inputs[1])).astype(np.int64).reshape(-1)
    if idx.size and (idx.min() < 0 or idx.max() >= shape[-1]):
        raise node.fail(f"indices {idx.tolist()} are out of range for a last axis of "
                        f"{shape[-1]}")
    if run.is_static(name):
        return [np.take(run.arr(name), idx, axis=-1)]
    return [run.g.index_select(run.node(name), len(shape) - 1, idx)]


@handler("Optional")
def _optional(run, node):
    return [run.raw(node.inputs[0]) if run.has(node, 0) else None]


@handler("OptionalHasElement")
def _optional_has_element(run, node):
    return [np.array(run.has(node, 0) and run.raw(node.inputs[0]) is not None)]


@handler("OptionalGetElement")
def _optional_get_element(run, node):
    v = run.raw(node.inputs[0])
    if v is None:
        raise node.fail(f"the optional {node.inputs[0]!r} is empty")
    return [v]


def check(node, np_dtype_of) -> None:
    """Load-time refusals of the attribute values these handlers do not implement."""
    at, fail = node.attrs, node.fail
    if node.op != "TfIdfVectorizer":
        return
    if at.get("pool_strings"):
        raise fail("pool_strings is not supported (yscv holds no strings; pool_int64s)")
    if at.get("mode") not in ("TF", "IDF", "TFIDF"):
        raise fail(f"mode={at.get('mode')!r} is not supported (TF, IDF or TFIDF)")
    lo, hi = int(at.get("min_gram_length", 0)), int(at.get("max_gram_length", 0))
    if not 1 <= lo <= hi or int(at.get("max_skip_count", 0)) < 0:
        raise fail(f"min_gram_length={lo}, max_gram_length={hi} and max_skip_count="
                   f"{at.get('max_skip_count', 0)} are not valid")
    if "ngram_counts" not in at or "ngram_indexes" not in at:
        raise fail("ngram_counts and ngram_indexes are required")
