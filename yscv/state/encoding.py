"""How a checkpoint stores Python values: JSON metadata with NumPy arrays
as safetensors tensors, and the SHA-256 checksum over both.

`_encode` turns a JSON value holding NumPy arrays anywhere into a JSON
value with tensor markers ``{"__yscv_tensor__": name}`` plus the arrays;
`_decode` is its inverse. The layout is in docs/checkpoint_format.md.
"""
from __future__ import annotations

import hashlib
import json

import numpy as np

from ..errors import CheckpointError

#: a JSON object ``{_TENSOR: name}`` stands for the tensor ``name``; a user
#: object that would read as a marker is wrapped as ``{_DICT: object}``
_TENSOR = "__yscv_tensor__"
_DICT = "__yscv_dict__"
#: levels of dicts / lists a value of ``extra`` or of the data state may nest
#: (serde_json's default limit): deeper values are refused at save, and at
#: load (a crafted file) before Python's recursion limit is reached
MAX_DEPTH = 128
#: NumPy dtypes a checkpoint stores (what safetensors can hold)
_ARRAY_DTYPES = tuple(np.dtype(t) for t in (
    np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64,
    np.uint64, np.float16, np.float32, np.float64, np.complex64))


def _json_default(o):
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        raise TypeError("numpy arrays cannot go into checkpoint metadata outside extra "
                        "and the data state; put them in the model or optimizer state")
    if isinstance(o, (set, frozenset)):
        return sorted(o)
    raise TypeError(f"object of type {type(o).__name__} is not JSON serialisable")


def _dumps(obj) -> str:
    return json.dumps(obj, default=_json_default, sort_keys=True, separators=(",", ":"))


def _contig(a) -> np.ndarray:
    """C-contiguous without promoting 0-d arrays to 1-d (np.ascontiguousarray does)."""
    a = np.asarray(a)
    return a if a.flags.c_contiguous else a.copy(order="C")


def _checksum(meta_json: str, arrays: dict) -> str:
    """SHA-256 over the metadata JSON and every tensor (key, dtype, shape, bytes)."""
    h = hashlib.sha256()
    h.update(meta_json.encode("utf-8"))
    for key in sorted(arrays):
        a = _contig(arrays[key])
        h.update(b"\0" + key.encode("utf-8") + b"\0" + a.dtype.str.encode() + b"\0"
                 + repr(tuple(a.shape)).encode() + b"\0")
        h.update(memoryview(a).cast("B") if a.size else b"")
    return h.hexdigest()


# ---------------------------------------------- arrays inside JSON values
def _short(where: str) -> str:
    return where if len(where) <= 100 else f"{where[:60]} ... {where[-30:]}"


def _too_deep(where: str, root: str, action: str) -> CheckpointError:
    return CheckpointError(f"{action}: {root} nests dicts / lists more than {MAX_DEPTH} levels "
                           f"deep (level {MAX_DEPTH + 1} at {_short(where)}); a checkpoint "
                           f"stores at most {MAX_DEPTH} levels (a value that contains itself "
                           f"nests without end)")


def _encode(value, prefix: str, arrays: dict, where: str, depth: int = 0, root=None):
    """``value`` (JSON values, dicts, lists, tuples and NumPy arrays) as a
    JSON value in which each NumPy array is the object ``{"__yscv_tensor__":
    "<prefix><n>"}`` and the array is ``arrays["<prefix><n>"]`` (n counts
    from 0 in the order met). A user object of exactly one key that is one
    of the two marker keys is wrapped as ``{"__yscv_dict__": object}``, so
    decoding is unambiguous. ``where`` names the value in errors; ``depth``
    is the dicts / lists around it. Raises CheckpointError for a value
    nested more than MAX_DEPTH levels (before RecursionError could)."""
    root = where if root is None else root
    if isinstance(value, (dict, list, tuple)) and depth >= MAX_DEPTH:  # an array is no level
        raise _too_deep(where, root, "save_checkpoint")
    if isinstance(value, np.ndarray):
        a = np.asarray(value)
        if a.dtype.byteorder == ">":      # safetensors is little-endian; values kept
            a = a.astype(a.dtype.newbyteorder("<"))
        if a.dtype not in _ARRAY_DTYPES:
            names = ", ".join(str(d) for d in _ARRAY_DTYPES)
            raise TypeError(f"save_checkpoint: {where} is a numpy array of dtype {a.dtype}, "
                            f"which a checkpoint cannot store (dtypes: {names})")
        name = f"{prefix}{sum(1 for k in arrays if k.startswith(prefix))}"
        arrays[name] = _contig(a)
        return {_TENSOR: name}
    if isinstance(value, dict):
        out = {k: _encode(v, prefix, arrays, f"{where}[{k!r}]", depth + 1, root)
               for k, v in value.items()}
        if len(out) == 1 and next(iter(out)) in (_TENSOR, _DICT):
            return {_DICT: out}
        return out
    if isinstance(value, (list, tuple)):
        return [_encode(v, prefix, arrays, f"{where}[{i}]", depth + 1, root)
                for i, v in enumerate(value)]
    return value


def _decode(value, arrays: dict, where: str, depth: int = 0):
    """The inverse of `_encode`: tensor markers become (writable,
    owned) copies of the arrays; raises CheckpointError on a bad marker, and
    on a value nested more than MAX_DEPTH levels (``depth``: the decoded
    dicts / lists around ``value``; a ``__yscv_dict__`` wrapper is none)."""
    if isinstance(value, dict) and len(value) == 1 and next(iter(value)) == _TENSOR:
        v = value[_TENSOR]
        if not isinstance(v, str) or v not in arrays:
            raise CheckpointError(f"{where} refers to a tensor {v!r} it does not hold")
        return np.array(arrays[v], copy=True)
    if isinstance(value, (dict, list)) and depth >= MAX_DEPTH:
        raise CheckpointError(f"{where} holds a value nested more than {MAX_DEPTH} levels "
                              f"deep, which save_checkpoint does not write (a corrupt or "
                              f"crafted file)")
    if isinstance(value, dict):
        if len(value) == 1:
            ((k, v),) = value.items()
            if k == _DICT:
                if not isinstance(v, dict):
                    raise CheckpointError(f"{where} has a corrupt {_DICT!r} object")
                return {kk: _decode(vv, arrays, where, depth + 1) for kk, vv in v.items()}
        return {k: _decode(v, arrays, where, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v, arrays, where, depth + 1) for v in value]
    return value
