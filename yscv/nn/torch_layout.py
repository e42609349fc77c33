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

The Transformer layers (TransformerEncoderLayer, TransformerDecoderLayer,
TransformerEncoder, TransformerDecoder, Transformer) are made of these (their
MultiHeadAttention, Linear and LayerNorm sub-modules under PyTorch's names,
``layers.0.self_attn.in_proj_weight``, ``layers.0.linear1.weight``,
``norm.weight``, ...), so they convert layer by layer with nothing of
their own.

Everything else is the same array on both sides: biases, BatchNorm's
``weight``/``bias``/``running_mean``/``running_var``/``num_batches_tracked``,
LayerNorm, GroupNorm, InstanceNorm, Embedding, PReLU, the recurrent biases
(yscv's RNN and LSTM layers keep PyTorch's two biases ``bias_ih``/``bias_hh``
and sum them when calling the op) and MultiHeadAttention's ``in_proj_bias``
and ``out_proj`` (a Linear). Containers only prefix the keys (``0.weight``,
``encoder.1.bias``). A parameter of your own module is copied as is unless
you register its layout with `register_layout`.

Flatten before a Linear. PyTorch flattens an NCHW activation in (C, H, W)
order, yscv flattens NHWC in (H, W, C) order, so the first Linear after a
Flatten sees its inputs permuted: PyTorch's weight row ``c*S + s`` is
yscv's row ``s*C + c`` (S the number of spatial positions). In a Sequential
the loader finds that Linear itself and permutes its weight rows, both ways,
when the layer before the Flatten tells the channel count C (a convolution,
a BatchNorm2d/3d, GroupNorm or InstanceNorm, also through poolings,
activations and dropout): S is ``in_features / C``, so nothing has to be
passed. After a global pooling or an Embedding, a Linear or a LayerNorm the
orders agree and nothing is permuted.

``flatten_from`` is still needed where the structure does not tell C or the
order: a Flatten of the model's input, of a layer whose layout is unknown,
of a pooling with no channel-telling layer before it, or a Flatten
registered outside a Sequential (whose forward decides the order; name a
Linear of the same module). It maps the Linear's path to the per-sample
shape PyTorch flattened, channels first: ``model.load_state_dict(sd,
layout="torch", flatten_from={"5": (16, 4, 4)})`` (the Linear at path
``"5"`` reads a flattened [N, 16, 4, 4] tensor in PyTorch, [N, 4, 4, 16] in
yscv); ``(in_features,)`` when both sides flatten the same order. Any
channels-first shape works: (C, L) after a Conv1d, (C, D, H, W) after a
Conv3d. A shape given where the structure tells C is checked against it: it
must start with that layer's channel count and have its number of spatial
axes (a shape in yscv's (H, W, C) order is refused). Every refusal is a
``ValueError`` naming the Linear's key and ``flatten_from``; nothing is
converted then.
"""
from __future__ import annotations

from collections import OrderedDict

import numpy as np

from .activation import (GELU, Flatten, LeakyReLU, LogSoftmax, Mish, PReLU, ReLU, SiLU,
                         Sigmoid, Softmax, Softplus, Tanh)
from .attention import MultiHeadAttention
from .container import ModuleDict, ModuleList, Sequential
from .conv import (Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d,
                   DepthwiseConv2d)
from .dropout import Dropout
from .embedding import Embedding
from .linear import Identity, Linear
from .state_dict import StateDictError, key_problems, register_state_layout
from .norm import BatchNorm2d, BatchNorm3d, GroupNorm, InstanceNorm, LayerNorm
from .pooling import AdaptiveAvgPool2d, AdaptiveMaxPool2d, AvgPool2d, GlobalAvgPool2d, MaxPool2d
from .recurrent import _RNNBase
from .transformer import (Transformer, TransformerDecoder, TransformerDecoderLayer,
                          TransformerEncoder, TransformerEncoderLayer)

__all__ = ["to_torch", "from_torch", "register_layout", "flatten_rows_to_torch",
           "flatten_rows_from_torch"]


# ------------------------------------------------------------ converters
# A layout is a pair (to_torch, from_torch) of functions ``f(array, module)
# -> array``; None means the same array on both sides.
def _transpose(a, module):
    return a.T


_TRANSPOSE = (_transpose, _transpose)


def _conv_layout(nd: int):
    """yscv [``*K``, Cin/g, Cout] <-> PyTorch [Cout, Cin/g, ``*K``] for nd spatial axes
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
    """Rows of a yscv Linear weight [``S*C``, out] from the rows of PyTorch's
    transposed weight [``C*S``, out] (``w`` = ``torch_weight.T``), where
    ``shape`` = (C, ``*spatial``) is what PyTorch flattened channels-first
    (index ``c*S`` + s) and yscv flattens channels-last (index ``s*C`` + c)."""
    c, s = shape[0], int(np.prod(shape[1:], dtype=np.int64))
    return w.reshape(c, s, w.shape[-1]).transpose(1, 0, 2).reshape(c * s, w.shape[-1])


def flatten_rows_to_torch(w: np.ndarray, shape) -> np.ndarray:
    """The inverse of `flatten_rows_from_torch`: yscv rows [``S*C``, out]
    -> PyTorch's order [``C*S``, out] (still input-major)."""
    c, s = shape[0], int(np.prod(shape[1:], dtype=np.int64))
    return w.reshape(s, c, w.shape[-1]).transpose(1, 0, 2).reshape(c * s, w.shape[-1])


# Layers a Flatten's input or output passes through unchanged in layout
# (elementwise, or a softmax over the last axis): skipped when looking for
# the layer that produced what the Flatten flattens, and between the
# Flatten and its Linear.
_PASS_THROUGH = (ReLU, LeakyReLU, Sigmoid, Tanh, GELU, SiLU, Mish, Softplus, PReLU, Softmax,
                 LogSoftmax, Dropout, Identity)
# Outputs laid out the same in both libraries (features on the last axis).
_SAME_LAYOUT = (Linear, Embedding, LayerNorm, MultiHeadAttention, _RNNBase,
                TransformerEncoderLayer, TransformerDecoderLayer, TransformerEncoder,
                TransformerDecoder, Transformer)
_POOLS = (MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, AdaptiveMaxPool2d)


def _channels_last(m):
    """(channels or None, spatial axes or None) when ``m``'s output is
    channels-last in yscv and channels-first in PyTorch; None otherwise."""
    for cls, nd in ((Conv1d, 1), (Conv2d, 2), (Conv3d, 3)):
        if isinstance(m, cls):
            return m.out_channels, nd
    if isinstance(m, ConvTranspose2d):
        return m.out_channels, 2
    if isinstance(m, DepthwiseConv2d):
        return m.channels * m.multiplier, 2
    if isinstance(m, (BatchNorm2d, BatchNorm3d)):
        return m.num_features, 2 if isinstance(m, BatchNorm2d) else 3
    if isinstance(m, GroupNorm):
        return m.num_channels, None
    if isinstance(m, InstanceNorm):
        return m.num_features, None
    if isinstance(m, _POOLS):
        return None, 2
    return None


def _global_pool(m) -> bool:
    """``m`` leaves one spatial position: the two flatten orders agree."""
    if isinstance(m, GlobalAvgPool2d):
        return True
    if isinstance(m, (AdaptiveAvgPool2d, AdaptiveMaxPool2d)):
        size = m.output_size
        return size == 1 or (isinstance(size, (tuple, list)) and all(s == 1 for s in size))
    return False


def _leaves(path, m):
    """(path, module) in the order a Sequential runs them, nested Sequentials
    expanded."""
    for name, child in m._modules.items():
        if child is None:
            continue
        cpath = f"{path}.{name}" if path else name
        if isinstance(child, Sequential):
            yield from _leaves(cpath, child)
        else:
            yield cpath, child


def _flatten_sites(module):
    """What the module structure tells about every Flatten.

    Returns ``(sites, unordered)``: ``sites`` maps the path of a Linear that
    reads a Flatten's output in a Sequential to ``(flatten path, producer
    path, producer, need, channels, spatial)`` with ``need`` one of
    "permute" (channels-last input: flatten_from required), "unknown" (the
    model's input or a layer whose layout is not known: required too),
    "none" (same order on both sides) or "global" (one spatial position);
    ``unordered`` lists ``(flatten path, scope path)`` for each Flatten
    outside a Sequential, whose Linear the structure does not tell.
    """
    paths = list(module._module_paths())
    by_path = dict(paths)
    sites, unordered = {}, []
    for path, m in paths:
        parent = by_path.get(path.rpartition(".")[0] if "." in path else "") if path else None
        if isinstance(m, Flatten) and not isinstance(parent, Sequential):
            scope = path.rpartition(".")[0] if "." in path else ""
            while scope and isinstance(by_path.get(scope), (ModuleList, ModuleDict)):
                scope = scope.rpartition(".")[0] if "." in scope else ""
            unordered.append((path, scope))
        if not isinstance(m, Sequential) or isinstance(parent, Sequential):
            continue
        seq = list(_leaves(path, m))
        for i, (fpath, f) in enumerate(seq):
            if not isinstance(f, Flatten):
                continue
            j = i + 1
            while j < len(seq) and isinstance(seq[j][1], _PASS_THROUGH) and not any(
                    True for _ in seq[j][1].parameters()):
                j += 1
            if j >= len(seq) or not isinstance(seq[j][1], Linear):
                continue
            k = i - 1
            while k >= 0 and isinstance(seq[k][1], _PASS_THROUGH):
                k -= 1
            ppath, prod = seq[k] if k >= 0 else (None, None)
            channels = spatial = None
            if prod is None:
                need = "unknown"
            elif _global_pool(prod):
                need = "global"
            elif isinstance(prod, _SAME_LAYOUT):
                need = "none"
            elif _channels_last(prod) is not None:
                need = "permute"
                # channels and spatial rank from the nearest layers that tell them
                for q in range(k, -1, -1):
                    info = _channels_last(seq[q][1])
                    if info is None:
                        if isinstance(seq[q][1], _PASS_THROUGH):
                            continue
                        break
                    spatial = spatial if spatial is not None else info[1]
                    if info[0] is not None:
                        channels = info[0]
                        break
            else:
                need = "unknown"
            sites[seq[j][0]] = (fpath, ppath, prod, need, channels, spatial)
    return sites, unordered


def _shape_text(channels, spatial):
    names = {1: "L", 2: "H, W", 3: "D, H, W"}.get(spatial, "*spatial")
    return f"({channels if channels is not None else 'C'}, {names})"


def _check_flatten_from(module, flatten_from, fn: str) -> dict:
    """``{path: (C, *spatial)}`` validated against ``module``'s Linear layers
    and against what its structure tells about the Flatten before each."""
    if flatten_from is not None and not hasattr(flatten_from, "items"):
        raise TypeError(f"{fn}: flatten_from must be a mapping of Linear path -> "
                        f"(C, *spatial), got {type(flatten_from).__name__}")
    paths = dict(module._module_paths())
    out = {}
    for path, shape in (flatten_from or {}).items():
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
    sites, unordered = _flatten_sites(module)
    for lpath, (fpath, ppath, prod, need, channels, spatial) in sites.items():
        src = ("the model's input" if prod is None
               else f"the output of the {type(prod).__name__} at {ppath!r}")
        shape = out.get(lpath)
        if shape is None:
            if need in ("none", "global"):
                continue
            n = paths[lpath].in_features
            if need == "permute" and channels is not None:
                # the row permutation (torch row c*S + s -> yscv row s*C + c) needs
                # only C, known from the producer, and S = in_features / C
                if n % channels:
                    raise ValueError(
                        f"{fn}: the Linear {lpath!r} ({lpath + '.weight'!r}) reads the "
                        f"Flatten at {fpath!r}, which flattens {src} with {channels} "
                        f"channels, but its in_features={n} is not a multiple of {channels}")
                out[lpath] = (channels, n // channels)
                continue
            if need == "permute":
                why = ("channels-last in yscv, channels-first in PyTorch, so the Linear's "
                       "weight rows must be permuted, and the channel count cannot be told "
                       "from the model")
                fix = f"flatten_from={{{lpath!r}: {_shape_text(channels, spatial)}}}"
            else:
                why = ("whether it is laid out the same in both libraries cannot be told "
                       "from the model")
                fix = (f"flatten_from={{{lpath!r}: (C, *spatial)}} (the channels-first shape "
                       f"PyTorch flattened) or flatten_from={{{lpath!r}: ({n},)}} if both "
                       "flatten the same order")
            raise ValueError(
                f"{fn}: the Linear {lpath!r} ({lpath + '.weight'!r}) reads the Flatten at "
                f"{fpath!r}, which flattens {src}; {why}: pass {fix}")
        if need == "global" and int(np.prod(shape[1:], dtype=np.int64)) != 1:
            raise ValueError(
                f"{fn}: flatten_from[{lpath!r}] = {shape!r}, but the Flatten at {fpath!r} "
                f"flattens {src}, which has one spatial position: (C,) or (C, 1, 1)")
        if need == "permute":
            bad_c = channels is not None and shape[0] != channels
            bad_rank = spatial is not None and len(shape) != 1 + spatial
            if bad_c or bad_rank:
                hint = (" (yscv's channels-last order? PyTorch's is channels first)"
                        if channels is not None and shape[-1] == channels else "")
                raise ValueError(
                    f"{fn}: flatten_from[{lpath!r}] = {shape!r} does not match the Flatten "
                    f"at {fpath!r}, which flattens {src}: expected the channels-first shape "
                    f"{_shape_text(channels, spatial)} PyTorch flattened{hint}")
    for fpath, scope in unordered:
        linears = [p for p, m in paths.items() if isinstance(m, Linear)
                   and (not scope or p.startswith(scope + "."))]
        if linears and not any(p == scope or p.startswith(scope + ".") or not scope for p in out):
            where = f"the module at {scope!r}" if scope else "the model"
            raise ValueError(
                f"{fn}: {where} has a Flatten at {fpath!r} outside a Sequential, so which "
                "Linear reads it (and in which order) cannot be told from the model: name "
                "that Linear in flatten_from, {'<path>': (C, *spatial)} (the channels-first "
                "shape PyTorch flattened), or {'<path>': (in_features,)} if both libraries "
                "flatten the same order")
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
    if hasattr(v, "detach") and hasattr(v, "cpu"):  # a torch tensor, not a NodeId
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

    Raises `StateDictError` naming every missing or unexpected key
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
