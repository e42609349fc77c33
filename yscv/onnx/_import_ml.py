"""Handlers of the feature-extraction ONNX operators: TfIdfVectorizer,
ImageDecoder and, from the ``ai.onnx.ml`` domain, Binarizer,
ArrayFeatureExtractor, LabelEncoder (numeric keys and values) and
TreeEnsemble; and of the optional-value operators Optional,
OptionalHasElement and OptionalGetElement.

TfIdfVectorizer counts, per row of integer tokens, the n-grams of its pool
(``pool_int64s``; n from ``min_gram_length`` to ``max_gram_length``, with
up to ``max_skip_count`` tokens skipped between items; unigrams counted
once), as ONNX's reference does, and weighs them by ``mode`` (TF, IDF,
TFIDF): a float32 array without gradient (its input is integers).
Binarizer (``x > threshold``) is piecewise constant: computed on the
values, as are LabelEncoder's lookups and TreeEnsemble's leaf weights (the
leaf each row reaches is read from the values; ``aggregate_function`` SUM,
AVERAGE, MIN, MAX, no ``post_transform``). ImageDecoder decodes the
encoded bytes with Pillow (imported when the operator runs) into uint8
[H, W, C]. ArrayFeatureExtractor selects entries of the last axis with
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


_MODES = {0: np.less_equal, 1: np.less, 2: np.greater_equal, 3: np.greater, 4: np.equal,
          5: np.not_equal}


def _tree_nodes(at):
    """Per node: (mode, split or member set, feature, true (id, leaf), false (id, leaf),
    missing tracks true)."""
    modes = [int(v) for v in np.asarray(at["nodes_modes"]).reshape(-1)]
    splits = np.asarray(at["nodes_splits"]).reshape(-1)
    members = iter(np.asarray(at.get("membership_values", []), np.float64).reshape(-1).tolist())
    missing = at.get("nodes_missing_value_tracks_true") or [0] * len(modes)
    out = []
    for i, mode in enumerate(modes):
        value = splits[i]
        if mode == 6:
            value = set()
            for v in members:
                if np.isnan(v):
                    break
                value.add(v)
        out.append((mode, value, int(at["nodes_featureids"][i]),
                    (int(at["nodes_truenodeids"][i]), int(at["nodes_trueleafs"][i])),
                    (int(at["nodes_falsenodeids"][i]), int(at["nodes_falseleafs"][i])),
                    bool(missing[i])))
    return out


@handler(_ML + "TreeEnsemble")
def _tree_ensemble(run, node):
    """[N, F] -> [N, n_targets]: each tree's leaf weight added to (or
    averaged, min-ed, max-ed into) its target, per row."""
    at = node.attrs
    x = np.asarray(run.arr(node.inputs[0]))
    if x.ndim != 2:
        raise node.fail(f"the input must be [N, features], got shape {x.shape}")
    tree = _tree_nodes(at)
    weights = np.asarray(at["leaf_weights"]).reshape(-1)
    targets = [int(v) for v in at["leaf_targetids"]]
    agg = int(at.get("aggregate_function", 1))
    roots = [int(r) for r in at["tree_roots"]]
    n_t = int(at["n_targets"])
    fill = {2: np.finfo(x.dtype).max, 3: np.finfo(x.dtype).min}.get(agg, 0)
    out = np.full((x.shape[0], n_t), fill, x.dtype)
    for r, row in enumerate(x):
        for root in roots:
            t, f = tree[root][3], tree[root][4]
            k, leaf = root, bool(t[1] and f[1] and t[0] == f[0])
            while not leaf:
                mode, value, feat, t, f, miss = tree[k]
                v = row[feat]
                hit = (v in value) if mode == 6 else bool(_MODES[mode](v, value))
                k, leaf = t if hit or (miss and np.isnan(v)) else f
                leaf = bool(leaf)
            w, tid = weights[k], targets[k]
            if agg == 1:
                out[r, tid] += w
            elif agg == 0:
                out[r, tid] += w / len(roots)
            else:
                out[r, tid] = (min if agg == 2 else max)(out[r, tid], w)
    return [out]


@handler("ImageDecoder")
def _image_decoder(run, node):
    """uint8 [H, W, 3] (RGB or BGR) or [H, W, 1] (Grayscale) of the encoded image."""
    import io
    try:
        from PIL import Image
    except ImportError as exc:  # pragma: no cover - exercised only without Pillow
        raise ImportError("yscv.onnx.load: ImageDecoder needs Pillow (pip install pillow)") from exc
    data = np.asarray(run.arr(node.inputs[0]))
    if data.dtype != np.uint8 or data.ndim != 1:
        raise node.fail(f"the input must be the encoded bytes (uint8 [n]), got {data.dtype} "
                        f"{data.shape}")
    try:
        img = Image.open(io.BytesIO(data.tobytes()))
        fmt = node.attrs.get("pixel_format", "RGB")
        if fmt == "Grayscale":
            return [np.asarray(img.convert("L"), np.uint8)[:, :, None]]
        rgb = np.asarray(img.convert("RGB"), np.uint8)
    except OSError as exc:
        raise node.fail(f"the bytes are not an image Pillow can decode ({exc})") from None
    return [np.ascontiguousarray(rgb[:, :, ::-1]) if fmt == "BGR" else rgb]


def _label_table(at):
    """(keys, values, default) of a LabelEncoder with numeric keys and values."""
    keys = next(np.asarray(at[k]).reshape(-1) for k in ("keys_tensor", "keys_int64s",
                                                        "keys_floats") if k in at)
    for k, dt in (("values_tensor", None), ("values_int64s", np.int64),
                  ("values_floats", np.float32)):
        if k in at:
            values = np.asarray(at[k], dt).reshape(-1)
            break
    if "default_tensor" in at:
        default = np.asarray(at["default_tensor"]).reshape(-1)[0]
    elif values.dtype.kind == "f":
        default = float(at.get("default_float", -0.0))
    else:
        default = int(at.get("default_int64", -1))
    return keys, values, values.dtype.type(default)


@handler(_ML + "LabelEncoder")
def _label_encoder(run, node):
    """Each element replaced by the value of its key (NaN keys match NaN),
    else the default, in the values' type."""
    keys, values, default = _label_table(node.attrs)
    x = np.asarray(run.arr(node.inputs[0]))
    out = np.full(x.shape, default, values.dtype)
    for k, v in zip(keys.tolist(), values.tolist()):
        hit = np.isnan(x) if isinstance(k, float) and np.isnan(k) else x == k
        out[hit] = v
    return [out]


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
    if node.op == "ImageDecoder" and at.get("pixel_format", "RGB") not in ("RGB", "BGR",
                                                                             "Grayscale"):
        raise fail(f"pixel_format={at['pixel_format']!r} is not supported (RGB, BGR or "
                   "Grayscale)")
    if node.op == _ML + "LabelEncoder":
        if "keys_strings" in at or "values_strings" in at:
            raise fail("string keys and values are not supported (yscv holds no strings)")
        for kind in ("keys", "values"):
            t = at.get(f"{kind}_tensor")
            if t is not None and np.asarray(t).dtype.kind not in "iuf":
                raise fail(f"{kind}_tensor of {np.asarray(t).dtype} is not supported")
            if not any(f"{kind}_{k}" in at for k in ("tensor", "int64s", "floats")):
                raise fail(f"the {kind} are missing")
    if node.op == _ML + "TreeEnsemble":
        if int(at.get("post_transform", 0)):
            raise fail(f"post_transform={at['post_transform']} is not supported (0: none)")
        if int(at.get("aggregate_function", 1)) not in (0, 1, 2, 3):
            raise fail(f"aggregate_function={at['aggregate_function']} is not supported")
        modes = np.asarray(at.get("nodes_modes", [])).reshape(-1)
        if modes.size and (modes.min() < 0 or modes.max() > 6):
            raise fail(f"nodes_modes {modes.tolist()} are not supported (0 to 6)")
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
