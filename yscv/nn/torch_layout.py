"""Moving weights between PyTorch and yscv: PyTorch's layouts <-> yscv's.

``module.load_state_dict(sd, layout="torch")`` and
``module.state_dict(layout="torch")`` dispatch here. The key names are the
same on both sides (yscv's layers use PyTorch's parameter and buffer names),
only the array layouts differ, layer by layer:

==========================  ===========================  ==========================
layer (parameter)           PyTorch                      yscv
==========================  ===========================  ==========================
Linear (weight)             [out, in]                    [in, out]
Conv1d (weight)             [Cout, Cin/g, K]             [K, Cin/g, Cout]
Conv2d (weight)             [Cout, Cin/g, KH, KW]        [KH, KW, Cin/g, Cout]
Conv3d (weight)             [Cout, Cin/g, KD, KH, KW]    [KD, KH, KW, Cin/g, Cout]
ConvTranspose2d (weight)    [Cin, Cout, KH, KW]          [KH, KW, Cout, Cin]
ConvTranspose1d (weight)    [Cin, Cout/g, K]             [K, Cout/g, Cin]
ConvTranspose3d (weight)    [Cin, Cout/g, KD, KH, KW]    [KD, KH, KW, Cout/g, Cin]
DepthwiseConv2d (weight)    Conv2d(C, C*M, groups=C):    [KH, KW, C, M]
                            [C*M, 1, KH, KW]
RNN / LSTM / GRU            weight_ih_l{k}[_reverse]     the transpose,
(weight_ih_*, weight_hh_*)  [G*H, I], weight_hh [G*H, H]  [I, G*H], [H, G*H]
MultiHeadAttention          in_proj_weight [3E, E]       [E, 3E]
(in_proj_weight)
==========================  ===========================  ==========================

Everything else is the same array on both sides: biases, BatchNorm's
``weight``/``bias``/``running_mean``/``running_var``/``num_batches_tracked``,
LayerNorm, GroupNorm, InstanceNorm, Embedding, PReLU, the recurrent biases
(yscv's RNN and LSTM layers keep PyTorch's two biases ``bias_ih``/``bias_hh``
and sum them when calling the op) and MultiHeadAttention's ``in_proj_bias``
and ``out_proj`` (a Linear). Containers only prefix the keys (``0.weight``,
``encoder.1.bias``). A parameter of your own module is copied as is unless
you register its layout with :func:`register_layout`.

Flatten before a Linear. PyTorch flattens an NCHW activation in (C, H, W)
order, yscv flattens NHWC in (H, W, C) order, so the first Linear after a
Flatten sees its inputs permuted. Name that Linear in ``flatten_from``, a
mapping from the Linear's path to the per-sample shape PyTorch flattened,
channels first: ``model.load_state_dict(sd, layout="torch",
flatten_from={"5": (16, 4, 4)})`` (the Linear at path ``"5"`` reads a
flattened [N, 16, 4, 4] tensor in PyTorch, [N, 4, 4, 16] in yscv). Its
weight rows are permuted accordingly, both ways. Any channels-first shape
works: (C, L) after a Conv1d, (C, D, H, W) after a Conv3d.
"""
from __future__ import annotations

from collections import OrderedDict

import numpy as np

from .attention import MultiHeadAttention
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose2d, DepthwiseConv2d
from .conv import ConvTranspose1d, ConvTranspose3d
from .linear import Linear
from .module import StateDictError, key_problems, register_state_layout
from .recurrent import _RNNBase

__all__ = ["to_torch", "from_torch", "register_layout", "flatten_rows_to_torch",
           "flatten_rows_from_torch"]


# ------------------------------------------------------------ converters
# A layout is a pair (to_torch, from_torch) of functions ``f(array, module)
# -> array``; None means the same array on both sides.
def _transpose(a, module):
    return a.T


_TRANSPOSE = (_transpose, _transpose)


def _conv_layout(nd: int):
    """yscv [*K, Cin/g, Cout] <-> PyTorch [Cout, Cin/g, *K] for nd spatial axes
    (also ConvTranspose2d: yscv [KH, KW, Cout, Cin] <-> PyTorch [Cin, Cout, KH, KW])."""
    to_t = (nd + 1, nd) + tuple(range(nd))
    from_t = tuple(range(2, nd + 2)) + (1, 0)
    return (lambda a, m: a.transpose(to_t)), (lambda a, m: a.transpose(from_t))


def _depthwise_to_torch(a, m):
    kh, kw, c, mult = a.shape
    return a.transpose(2, 3, 0, 1).reshape(c * mult, 1, kh, kw)


def _depthwise_from_torch(a, m):
    return a.reshape(m.channels, m.multiplier, a.shape[2], a.shape[3]).transpose(2, 3, 0, 1)


def _recurrent(module, name):
    return _TRANSPOSE if name.startswith(("weight_ih", "weight_hh")) else None


_LAYOUTS = {
    Linear: {"weight": _TRANSPOSE},
    Conv1d: {"weight": _conv_layout(1)},
    Conv2d: {"weight": _conv_layout(2)},
    Conv3d: {"weight": _conv_layout(3)},
    ConvTranspose2d: {"weight": _conv_layout(2)},
    ConvTranspose1d: {"weight": _conv_layout(1)},
    ConvTranspose3d: {"weight": _conv_layout(3)},
    DepthwiseConv2d: {"weight": (_depthwise_to_torch, _depthwise_from_torch)},
    MultiHeadAttention: {"in_proj_weight": _TRANSPOSE},
    _RNNBase: _recurrent,
}


def register_layout(cls, name: str, to_torch, from_torch) -> None:
    """Declare how parameter (or buffer) ``name`` of module class ``cls``
    maps to PyTorch: ``to_torch(array, module)`` gives PyTorch's array,
    ``from_torch(array, module)`` yscv's. Subclasses inherit it."""
    if not isinstance(cls, type):
        raise TypeError(f"register_layout: cls must be a class, got {type(cls).__name__}")
    if not callable(to_torch) or not callable(from_torch):
        raise TypeError("register_layout: to_torch and from_torch must be callables")
    table = _LAYOUTS.get(cls)
    if not isinstance(table, dict):
        table = _LAYOUTS[cls] = {}
    table[name] = (to_torch, from_torch)


def _layout(module, name):
    """The (to_torch, from_torch) pair of ``module``'s ``name``, or None."""
    for cls in type(module).__mro__:
        table = _LAYOUTS.get(cls)
        if table is None:
            continue
        pair = table(module, name) if callable(table) else table.get(name)
        if pair is not None:
            return pair
    return None


# ------------------------------------------------------ flatten ordering
def flatten_rows_from_torch(w: np.ndarray, shape) -> np.ndarray:
    """Rows of a yscv Linear weight [S*C, out] from the rows of PyTorch's
    transposed weight [C*S, out] (``w`` = ``torch_weight.T``), where
    ``shape`` = (C, *spatial) is what PyTorch flattened channels-first
    (index c*S + s) and yscv flattens channels-last (index s*C + c)."""
    c, s = shape[0], int(np.prod(shape[1:], dtype=np.int64))
    return w.reshape(c, s, w.shape[-1]).transpose(1, 0, 2).reshape(c * s, w.shape[-1])


def flatten_rows_to_torch(w: np.ndarray, shape) -> np.ndarray:
    """The inverse of :func:`flatten_rows_from_torch`: yscv rows [S*C, out]
    -> PyTorch's order [C*S, out] (still input-major)."""
    c, s = shape[0], int(np.prod(shape[1:], dtype=np.int64))
    return w.reshape(s, c, w.shape[-1]).transpose(1, 0, 2).reshape(c * s, w.shape[-1])


def _check_flatten_from(module, flatten_from, fn: str) -> dict:
    """``{path: (C, *spatial)}`` validated against ``module``'s Linear layers."""
    if flatten_from is None:
        return {}
    if not hasattr(flatten_from, "items"):
        raise TypeError(f"{fn}: flatten_from must be a mapping of Linear path -> "
                        f"(C, *spatial), got {type(flatten_from).__name__}")
    paths = dict(module._module_paths())
    out = {}
    for path, shape in flatten_from.items():
        m = paths.get(path)
        if not isinstance(m, Linear):
            what = "no module" if m is None else f"a {type(m).__name__}"
            raise ValueError(f"{fn}: flatten_from names {path!r}, which is {what}; "
                             "expected the path of a Linear (e.g. '5' or 'head.fc')")
        ok = (isinstance(shape, (tuple, list)) and len(shape) >= 1 and all(
            isinstance(e, (int, np.integer)) and not isinstance(e, bool) and e > 0
            for e in shape))
        if not ok or int(np.prod(shape, dtype=np.int64)) != m.in_features:
            raise ValueError(f"{fn}: flatten_from[{path!r}] = {shape!r} must be the "
                             f"channels-first shape (C, *spatial) PyTorch flattened, whose "
                             f"product is the Linear's in_features={m.in_features}")
        out[path] = tuple(int(e) for e in shape)
    return out


# -------------------------------------------------------------- walking
def _entries(module, flat):
    """(key, owner module, name, yscv array, layout pair or None)
    for every key of ``module.state_dict()``."""
    for mname, m in module._module_paths():
        pre = f"{mname}." if mname else ""
        items = [(n, p.data) for n, p in m._parameters.items() if p is not None]
        items += [(n, b) for n, b in m._buffers.items()
                  if b is not None and n not in m._non_persistent]
        for name, arr in items:
            pair = _layout(m, name)
            if name == "weight" and mname in flat:
                pair = _flatten_linear(flat[mname])
            yield pre + name, m, name, arr, pair


def _flatten_linear(shape):
    return ((lambda a, m: flatten_rows_to_torch(a, shape).T),
            (lambda a, m: flatten_rows_from_torch(a.T, shape)))


def _as_array(v):
    """A NumPy view of a state-dict value: ndarray, torch tensor, Parameter."""
    if hasattr(v, "detach") and hasattr(v, "numpy"):  # a torch tensor, without importing torch
        return v.detach().cpu().numpy()
    if hasattr(v, "data") and isinstance(getattr(v, "data"), np.ndarray):
        return v.data
    return np.asarray(v)


def to_torch(module, flatten_from=None) -> "OrderedDict[str, np.ndarray]":
    """``module``'s state in PyTorch's names and layouts: the state dict of
    the equivalent torch module, as C-contiguous NumPy arrays (copies)."""
    flat = _check_flatten_from(module, flatten_from, "state_dict")
    out = OrderedDict()
    for key, m, name, arr, pair in _entries(module, flat):
        out[key] = np.array(pair[0](arr, m) if pair else arr, order="C", copy=True)
    return out


def from_torch(module, state_dict, strict: bool = True,
               flatten_from=None) -> "OrderedDict[str, np.ndarray]":
    """``state_dict`` (PyTorch's names and layouts) converted to yscv's
    layouts for ``module``; keys ``module`` does not have pass through
    unchanged (``load_state_dict`` reports them).

    Raises :class:`StateDictError` naming every missing or unexpected key
    (when ``strict``) and every key whose shape is not the PyTorch shape the
    module expects (always), with both shapes; nothing is converted then.
    """
    fn = "load_state_dict(layout='torch')"
    if not hasattr(state_dict, "keys"):
        raise TypeError(f"{fn}: expected a mapping of name -> array, "
                        f"got {type(state_dict).__name__}")
    flat = _check_flatten_from(module, flatten_from, fn)
    entries = list(_entries(module, flat))
    own = {e[0] for e in entries}
    missing = [e[0] for e in entries if e[0] not in state_dict]
    unexpected = [k for k in state_dict if k not in own]
    mismatched, converted = [], OrderedDict()
    for key, m, name, arr, pair in entries:
        if key not in state_dict:
            continue
        v = _as_array(state_dict[key])
        want = pair[0](arr, m).shape if pair else arr.shape
        if v.shape != want:
            mismatched.append((key, want, v.shape))
        else:
            converted[key] = pair[1](v, m) if pair else v
    problems = key_problems(strict, missing, unexpected)
    for key, want, got in mismatched:
        problems.append(f"size mismatch for {key!r}: the state dict has shape {got}, the "
                        f"model expects {want} in PyTorch's layout")
    if problems:
        raise StateDictError(
            f"{fn}: error(s) loading a PyTorch state dict into {type(module).__name__} "
            "(nothing was loaded):\n  " + "\n  ".join(problems),
            missing, unexpected, mismatched)
    for k in unexpected:
        converted[k] = state_dict[k]
    return converted


register_state_layout("torch", to_torch, from_torch)
