"""Handlers of the ONNX operators that move elements by an index map known
from the shapes and static inputs: ReverseSequence, TensorScatter and
Col2Im.

Each computes with NumPy, for every output element, where it comes from
(a flat position in the input, or in the inputs laid end to end), and
records one ``index_select`` of the flattened data (Col2Im: a
``scatter_add`` of the selected columns into zeros, as overlapping blocks
sum). The gradient of a gather or a scatter-add is exact, so gradients
reach every input element that reaches the output. Static inputs give a
static result in their own dtype (integers stay integers).
"""
from __future__ import annotations

import numpy as np

from ._import_registry import handler

__all__ = ["check"]


def _flat_take(run, names, src, shape):
    """The inputs ``names`` flattened and laid end to end, taken at the flat
    positions ``src``, reshaped to ``shape``."""
    if all(run.is_static(n) for n in names):
        parts = [run.arr(n).reshape(-1) for n in names]
        dt = np.result_type(*parts)
        return np.concatenate([p.astype(dt) for p in parts])[src].reshape(shape)
    g = run.g
    parts = [g.reshape(run.node(n), (int(np.prod(run.shape(n), dtype=np.int64)),))
             for n in names]
    flat = parts[0] if len(parts) == 1 else g.cat(parts, 0)
    return g.reshape(g.index_select(flat, 0, src.reshape(-1)), tuple(shape))


@handler("ReverseSequence")
def _reverse_sequence(run, node):
    """The first ``sequence_lens[b]`` steps of batch entry ``b`` reversed
    along ``time_axis``; the steps after them unchanged."""
    name = node.inputs[0]
    shape = tuple(run.shape(name))
    if len(shape) < 2:
        raise node.fail(f"the input must have at least 2 axes, got shape {shape}")
    b_ax = int(node.attrs.get("batch_axis", 1)) % len(shape)
    t_ax = int(node.attrs.get("time_axis", 0)) % len(shape)
    lens = run.arr(node.inputs[1]).astype(np.int64).reshape(-1)
    if lens.size != shape[b_ax] or np.any(lens < 0) or np.any(lens > shape[t_ax]):
        raise node.fail(f"sequence_lens {lens.tolist()} do not fit batch axis {b_ax} "
                        f"and time axis {t_ax} of the input of shape {shape}")
    coords = list(np.indices(shape))
    t, b = coords[t_ax], coords[b_ax]
    n = lens[b]
    coords[t_ax] = np.where(t < n, n - 1 - t, t)
    src = np.ravel_multi_index(tuple(coords), shape)
    return [_flat_take(run, [name], src, shape)]


@handler("TensorScatter")
def _tensor_scatter(run, node):
    """``past_cache`` with ``update`` written along ``axis`` from position
    ``write_indices[b]`` of each batch entry ``b`` (axis 0); ``mode``
    circular wraps the positions around the cache length."""
    past, upd = node.inputs[0], node.inputs[1]
    shape, ushape = tuple(run.shape(past)), tuple(run.shape(upd))
    if len(shape) < 2:
        raise node.fail(f"past_cache must have at least 2 axes, got shape {shape}")
    axis = int(node.attrs.get("axis", -2)) % len(shape)
    if axis == 0:
        raise node.fail("axis 0 is the batch axis (write_indices index it)")
    if len(ushape) != len(shape) or any(u != s for i, (u, s) in enumerate(zip(ushape, shape))
                                        if i != axis) or ushape[axis] > shape[axis]:
        raise node.fail(f"update of shape {ushape} does not fit past_cache of shape {shape} "
                        f"on axis {axis}")
    if run.has(node, 2):
        write = run.arr(node.inputs[2]).astype(np.int64).reshape(-1)
    else:
        write = np.zeros(shape[0], np.int64)
    if write.size != shape[0]:
        raise node.fail(f"write_indices has {write.size} entries for a batch of {shape[0]}")
    circular = node.attrs.get("mode", "linear") == "circular"
    m, s = shape[axis], ushape[axis]
    pos = write[:, None] + np.arange(s)
    if circular:
        pos = pos % m
    elif np.any(pos < 0) or np.any(pos >= m):
        raise node.fail(f"write_indices {write.tolist()} with an update of length {s} "
                        f"run past the cache length {m} (mode linear)")
    n_past = int(np.prod(shape, dtype=np.int64))
    src = np.arange(n_past).reshape(shape)
    ucoords = np.indices(ushape)
    step = ucoords[axis]
    tcoords = list(ucoords)
    tcoords[axis] = pos[ucoords[0], step]
    tgt = np.ravel_multi_index(tuple(tcoords), shape).reshape(-1)
    usrc = n_past + np.arange(tgt.size)
    flat = src.reshape(-1)
    flat[tgt] = usrc   # in C order: a later step wins a position written twice
    return [_flat_take(run, [past, upd], flat, shape)]


def _col2im_map(node, xshape, image, block, dil, pads, strides):
    """(source columns, flat targets, output shape) of Col2Im."""
    d = len(image)
    k = int(np.prod(block, dtype=np.int64))
    n, ck, length = xshape
    if ck % k:
        raise node.fail(f"input axis 1 ({ck}) is not a multiple of the block size {k}")
    c = ck // k
    cols = [(image[i] + pads[i] + pads[i + d] - dil[i] * (block[i] - 1) - 1) // strides[i] + 1
            for i in range(d)]
    if any(v < 1 for v in cols) or int(np.prod(cols)) != length:
        raise node.fail(f"input axis 2 ({length}) is not the number of blocks {cols} of "
                        f"image_shape {list(image)} with block_shape {list(block)}")
    kk = np.indices(tuple(block)).reshape(d, -1)      # [d, K]
    ll = np.indices(tuple(cols)).reshape(d, -1)       # [d, L]
    pos = (ll[:, None, :] * np.array(strides)[:, None, None]
           - np.array(pads[:d])[:, None, None]
           + kk[:, :, None] * np.array(dil)[:, None, None])   # [d, K, L]
    inside = np.all((pos >= 0) & (pos < np.array(image)[:, None, None]), axis=0)
    kidx, lidx = np.nonzero(inside)
    spatial = np.ravel_multi_index(tuple(pos[:, kidx, lidx]), tuple(image))
    size = int(np.prod(image, dtype=np.int64))
    bc = np.arange(n * c)[:, None]
    src = (bc * k + kidx) * length + lidx    # flat into [N*C, K, L]
    tgt = bc * size + spatial
    return src.reshape(-1), tgt.reshape(-1), (n, c, *image)


@handler("Col2Im")
def _col2im(run, node):
    """Columns [N, C * prod(block_shape), L] summed into images
    [N, C, *image_shape] (the adjoint of im2col): any number of spatial
    axes, ``dilations``, ``pads``, ``strides``."""
    name = node.inputs[0]
    xshape = tuple(run.shape(name))
    if len(xshape) != 3:
        raise node.fail(f"the input must be [N, C * prod(block_shape), L], got {xshape}")
    image = [int(v) for v in run.arr(node.inputs[1]).reshape(-1)]
    block = [int(v) for v in run.arr(node.inputs[2]).reshape(-1)]
    d = len(image)
    at = node.attrs
    dil = [int(v) for v in at.get("dilations", [1] * d)]
    pads = [int(v) for v in at.get("pads", [0] * 2 * d)]
    strides = [int(v) for v in at.get("strides", [1] * d)]
    if len(block) != d or len(dil) != d or len(strides) != d or len(pads) != 2 * d:
        raise node.fail(f"block_shape {block}, dilations {dil}, strides {strides} and pads "
                        f"{pads} do not match image_shape {image}")
    if min(image + block + dil + strides, default=1) < 1 or min(pads, default=0) < 0:
        raise node.fail(f"image_shape {image}, block_shape {block}, dilations {dil} and "
                        f"strides {strides} must be positive, pads {pads} not negative")
    src, tgt, oshape = _col2im_map(node, xshape, image, block, dil, pads, strides)
    total = int(np.prod(oshape, dtype=np.int64))
    if run.is_static(name):
        a = run.arr(name).reshape(-1)
        out = np.zeros(total, a.dtype)
        np.add.at(out, tgt, a[src])
        return [out.reshape(oshape)]
    g = run.g
    x = g.reshape(run.node(name), (int(np.prod(xshape, dtype=np.int64)),))
    cols = g.index_select(x, 0, src)
    out = g.scatter_add(g.constant(np.zeros(total, g.dtype)), 0, tgt, cols)
    return [g.reshape(out, oshape)]


def check(node, np_dtype_of) -> None:
    """Load-time refusals of the attribute values these handlers do not implement."""
    if node.op == "TensorScatter" and node.attrs.get("mode", "linear") not in ("linear",
                                                                                "circular"):
        raise node.fail(f"mode={node.attrs['mode']!r} is not supported (linear or circular)")
