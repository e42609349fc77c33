"""Training-state checkpoints: one safetensors file, written atomically.

    yscv.save_checkpoint("run/ckpt.safetensors", model=model, optimizer=opt,
                         scheduler=sched, step=1200, extra={"epoch": 3})
    info = yscv.load_checkpoint("run/ckpt.safetensors", model=model, optimizer=opt,
                                scheduler=sched)       # -> {"step": 1200, "extra": {...}, ...}

Arrays (model parameters and buffers, optimizer state arrays, NumPy arrays
anywhere in ``extra`` or in a data loader's state) are safetensors tensors;
everything else (format version, library version, step, the library RNG
state, optimizer options and step counts, scheduler state, the user's
``extra``, the data loader's state, a SHA-256 checksum) is JSON in the
safetensors header metadata. No pickle. The exact layout is in
docs/checkpoint_format.md.

Saving writes the temporary file ``.<name>.yscv.tmp`` in the target folder,
fsyncs it and renames it over the target: a crash at any point leaves
either the previous file or the new one, never a mix (yscv/state/atomic.py).
New files get the permissions ``open()`` would give them (``0o666`` less
the umask; an existing target's mode is kept). The encoding of values with
arrays and the checksum are in yscv/state/encoding.py.

Loading validates EVERYTHING (header, checksum, format version, keys,
shapes, optimizer and scheduler structure, RNG state) before touching any
object, and raises `yscv.CheckpointError` naming the problem; a
failed load changes nothing.
"""
from __future__ import annotations

import json
import os
import struct

import numpy as np

from .. import random as _random
from .. import runtime
from .atomic import _atomic_write
from .encoding import _checksum, _contig, _decode, _dumps, _encode
from ..errors import CheckpointError

__all__ = ["save_checkpoint", "load_checkpoint", "read_checkpoint_metadata", "FORMAT",
           "FORMAT_VERSION"]

FORMAT = "yscv-checkpoint"
FORMAT_VERSION = 1
_MODEL = "model."
_OPTIM = "optimizer.state."
_EXTRA = "extra."
_DATA = "data."


def _lib_version() -> str:
    import yscv  # at call time: yscv/__init__ may still be importing us
    return getattr(yscv, "__version__", "unknown")


# ------------------------------------------------------------------- save
def _optimizer_parts(optimizer):
    sd = optimizer.state_dict()
    arrays, scalars = {}, {}
    for i, st in sd["state"].items():
        sc = {}
        for name, v in st.items():
            if isinstance(v, np.ndarray):
                arrays[f"{_OPTIM}{i}.{name}"] = _contig(v)
            else:
                sc[name] = v
        scalars[str(i)] = sc
    meta = {"class": type(optimizer).__name__, "param_groups": sd["param_groups"],
            "state_scalars": scalars}
    return arrays, meta


def save_checkpoint(path, model=None, optimizer=None, scheduler=None, step=None,
                    extra=None, data=None) -> str:
    """Write one checkpoint file atomically; returns its path.

    Args:
        path: file to write (its folder must exist). An existing file is
            replaced only once the new one is complete on disk.
        model: a `yscv.nn.Module` (its ``state_dict()``).
        optimizer: a `yscv.optim.Optimizer` (options, step counts, state arrays).
        scheduler: a learning-rate scheduler (its JSON ``state_dict()``).
        step: an int (or None) returned by `load_checkpoint`.
        extra: a JSON value (dicts, lists, tuples, str, numbers, bools, None)
            that may hold NumPy arrays anywhere; returned by
            `load_checkpoint` (tuples as lists, arrays bit-exact: same
            dtype, shape and values, stored as tensors).
        data: a data loader, or any object with ``state_dict()`` returning a
            dict of JSON values and NumPy arrays (encoded as ``extra``);
            `load_checkpoint` hands it to ``load_state_dict``.

    The library RNG state (``yscv.random.get_rng_state()``) is always saved.
    The file gets the permissions ``open()`` would give it: ``0o666`` less
    the process umask for a new file; an existing file keeps its mode.

    Raises:
        TypeError: ``step`` not an int, ``extra`` or the data state not made
            of JSON values and NumPy arrays (or an array of a dtype that
            safetensors cannot hold), ``data`` without ``state_dict``.
            Nothing is written.
        CheckpointError: ``extra`` or the data state nests dicts / lists
            more than 128 levels deep (or contains itself); nothing is
            written.

    In a data-parallel run (``mpiexec``, world > 1) EVERY rank must call it:
    rank 0 writes the file (with every rank's RNG state), and each rank
    returns only once the file is complete; an error on rank 0 is raised on
    every rank. ``data.state_dict()`` is called on every rank (a
    ``DistributedSampler``'s is a collective), rank 0's state is written. A
    ``yscv.distributed.DistributedDataParallel`` model is saved as its
    wrapped module.
    """
    # [distributed] every rank calls; rank 0 writes, the others wait (yscv/distributed/_checkpoint.py)
    if _data_parallel():
        from ..distributed import _checkpoint as _dist_ckpt

        if data is not None and callable(getattr(data, "state_dict", None)):
            # on every rank: a DistributedSampler's state_dict (in a loader's) is a collective
            data = _TakenState(data.state_dict())

        return _dist_ckpt.save(_save_checkpoint_local, path, model=_unwrap(model),
                               optimizer=optimizer, scheduler=scheduler, step=step, extra=extra,
                               data=data)
    return _save_checkpoint_local(path, _unwrap(model), optimizer, scheduler, step, extra, data)


class _TakenState:
    """A data state already taken (``state_dict()`` returns it)."""

    def __init__(self, state):
        self._state = state

    def state_dict(self):
        return self._state


def _data_parallel() -> bool:
    """True when this process is one rank of a world larger than one."""
    import sys

    if "yscv.distributed" not in sys.modules and runtime.launcher_world_size() <= 1:
        return False
    from ..distributed import _checkpoint as _dist_ckpt

    return _dist_ckpt.active()


def _unwrap(model):
    """The module inside a DistributedDataParallel wrapper (its class is recorded)."""
    return getattr(model, "module", model) if type(model).__name__ == "DistributedDataParallel" \
        else model


def _save_checkpoint_local(path, model=None, optimizer=None, scheduler=None, step=None,
                           extra=None, data=None, rng_states=None) -> str:
    """One process's write (rank 0's in a data-parallel run: ``rng_states``
    then holds every rank's RNG state)."""
    from safetensors.numpy import save as st_save

    path = os.fspath(path)
    if step is not None and (isinstance(step, bool) or not isinstance(step, (int, np.integer))):
        raise TypeError(f"save_checkpoint: step must be an int or None, got {step!r}")
    if data is not None and not callable(getattr(data, "state_dict", None)):
        raise TypeError(f"save_checkpoint: data must have a state_dict() method (a data "
                        f"loader), got {type(data).__name__}")
    arrays = {}
    meta = {"format": FORMAT, "format_version": FORMAT_VERSION, "library": "yscv",
            "library_version": _lib_version(), "step": None if step is None else int(step),
            "rng_state": _random.get_rng_state(), "model": None, "optimizer": None,
            "scheduler": None, "extra": _encode(extra, _EXTRA, arrays, "extra"), "data": None}
    if data is not None:
        state = data.state_dict()
        if not isinstance(state, dict):
            raise TypeError(f"save_checkpoint: data.state_dict() must return a dict, got "
                            f"{type(state).__name__}")
        meta["data"] = _encode(state, _DATA, arrays, "data.state_dict()")
    if model is not None:
        sd = model.state_dict()
        for k, v in sd.items():
            arrays[_MODEL + k] = _contig(v)
        meta["model"] = {"class": type(model).__name__, "keys": list(sd),
                         "training": bool(getattr(model, "training", True))}
    if optimizer is not None:
        opt_arrays, meta["optimizer"] = _optimizer_parts(optimizer)
        arrays.update(opt_arrays)
    if scheduler is not None:
        meta["scheduler"] = scheduler.state_dict()
    if rng_states is not None:
        meta["rng_states"] = rng_states
    try:
        meta_json = _dumps(meta)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"save_checkpoint: metadata is not JSON-serialisable ({exc}); "
                        "extra and the data state must be made of dicts, lists, str, "
                        "numbers, bools, None and NumPy arrays") from None
    header = {"format": FORMAT, "yscv.meta": meta_json,
              "yscv.sha256": _checksum(meta_json, arrays)}
    blob = st_save(arrays, metadata=header)
    _atomic_write(path, blob)
    return path


# ------------------------------------------------------------------- load
def _parse(path: str):
    """(meta dict, arrays dict) of a verified checkpoint file."""
    with open(path, "rb") as f:
        data = f.read()
    where = f"checkpoint {path!r}"
    try:
        return _parse_bytes(data, where)
    except CheckpointError:
        raise
    except Exception as exc:  # any other failure while decoding means a damaged file
        raise CheckpointError(f"{where} is corrupt ({type(exc).__name__}: {exc})") from None


def _parse_bytes(data: bytes, where: str):
    from safetensors.numpy import load as st_load

    if len(data) < 8:
        raise CheckpointError(f"{where} is truncated: {len(data)} bytes, not even a header")
    (n,) = struct.unpack("<Q", data[:8])
    if n > len(data) - 8:
        raise CheckpointError(f"{where} is truncated or corrupt: the header claims {n} bytes, "
                              f"the file has {len(data) - 8} after the length field")
    try:
        header = json.loads(data[8:8 + n].decode("utf-8"))
        st_meta = header.get("__metadata__")
        ends = [int(t["data_offsets"][1]) for k, t in header.items() if k != "__metadata__"]
    except Exception as exc:
        raise CheckpointError(f"{where} has a corrupt safetensors header "
                              f"({type(exc).__name__}: {exc})") from None
    if not isinstance(st_meta, dict) or st_meta.get("format") != FORMAT:
        raise CheckpointError(f"{where} is not a yscv training checkpoint (no "
                              f"'format: {FORMAT}' in its metadata; corrupt or another tool's file)")
    need = 8 + n + (max(ends) if ends else 0)
    if len(data) < need:
        raise CheckpointError(f"{where} is truncated: {len(data)} bytes, the header needs {need}")
    try:
        meta_json = st_meta["yscv.meta"]
        meta = json.loads(meta_json)
        digest = st_meta["yscv.sha256"]
    except (KeyError, ValueError, TypeError) as exc:
        raise CheckpointError(f"{where} has corrupt metadata ({type(exc).__name__}: {exc})") from None
    version = meta.get("format_version") if isinstance(meta, dict) else None
    if version != FORMAT_VERSION:
        raise CheckpointError(f"{where} has format version {version!r}; this yscv "
                              f"({_lib_version()}) reads version {FORMAT_VERSION}")
    try:
        arrays = st_load(data)
    except Exception as exc:  # safetensors raises its own error types
        raise CheckpointError(f"{where} has corrupt tensor data ({type(exc).__name__}: {exc})") from None
    if _checksum(meta_json, arrays) != digest:
        raise CheckpointError(f"{where} is corrupt: the SHA-256 checksum over its metadata and "
                              "tensors does not match (bit flip, partial copy or edit)")
    return meta, arrays


def read_checkpoint_metadata(path) -> dict:
    """The verified JSON metadata of a checkpoint (no object is touched)."""
    meta, _ = _parse(os.fspath(path))
    return meta


def _model_state(meta, arrays, where):
    if meta.get("model") is None:
        raise CheckpointError(f"{where} holds no model state, but a model was given")
    keys = meta["model"].get("keys", [])
    missing = [k for k in keys if _MODEL + k not in arrays]
    if missing:
        raise CheckpointError(f"{where} lacks the tensors of model key(s) {missing}")
    return {k: arrays[_MODEL + k] for k in keys}


def _optimizer_state(meta, arrays, optimizer, where):
    om = meta.get("optimizer")
    if om is None:
        raise CheckpointError(f"{where} holds no optimizer state, but an optimizer was given")
    if om.get("class") != type(optimizer).__name__:
        raise CheckpointError(f"{where} holds {om.get('class')} state; the optimizer given is "
                              f"a {type(optimizer).__name__}")
    state = {}
    for i, sc in om.get("state_scalars", {}).items():
        state[int(i)] = dict(sc)
    for key, arr in arrays.items():
        if key.startswith(_OPTIM):
            i, _, name = key[len(_OPTIM):].partition(".")
            state.setdefault(int(i), {})[name] = arr
    return {"state": state, "param_groups": om.get("param_groups", [])}


def _data_state(meta, arrays, data, where):
    """The data-loader state stored in the checkpoint, decoded and checked
    against ``data`` (its ``check_state_dict``, when it has one)."""
    if meta.get("data") is None:
        raise CheckpointError(f"{where} holds no data-loader state, but data was given")
    state = _decode(meta["data"], arrays, where)
    check = getattr(data, "check_state_dict", None)
    if callable(check):
        try:
            check(state)
        except CheckpointError:
            raise
        except Exception as exc:
            raise CheckpointError(f"{where} does not match the objects given (nothing was "
                                  f"loaded): data: {exc}") from None
    return state


def _rank_rng_state(meta: dict):
    """This rank's saved RNG state (one per rank in a data-parallel checkpoint)."""
    if "rng_states" in meta and _data_parallel():
        from ..distributed import _checkpoint as _dist_ckpt

        return _dist_ckpt.rank_rng_state(meta)
    return meta.get("rng_state")


def load_checkpoint(path, model=None, optimizer=None, scheduler=None,
                    restore_rng: bool = True, data=None) -> dict:
    """Restore ``model``, ``optimizer``, ``scheduler``, ``data`` (those
    given) and the library RNG state from a checkpoint, in place.

    Everything is validated before anything is modified. ``data`` (a data
    loader, or any object with ``load_state_dict``) gets the state that
    ``save_checkpoint(..., data=)`` stored, first of the objects: if its
    ``load_state_dict`` refuses it, nothing else is loaded. Returns a dict
    with ``step``, ``extra`` (NumPy arrays restored bit-exact),
    ``library_version`` and ``format_version``.

    Raises:
        CheckpointError: truncated or corrupt file (checksum), another
            format version, or a state that does not fit the given objects
            (missing/unexpected keys, wrong shapes, other optimizer type,
            no data-loader state ...), a data loader that refused its state,
            or an ``extra`` / data state nested more than 128 levels deep
            (a crafted file: save_checkpoint never writes one).
        TypeError: ``data`` without ``load_state_dict``.
        FileNotFoundError: no such file.
    """
    path = os.fspath(path)
    where = f"checkpoint {path!r}"
    if data is not None and not callable(getattr(data, "load_state_dict", None)):
        raise TypeError(f"load_checkpoint: data must have a load_state_dict() method (a "
                        f"data loader), got {type(data).__name__}")
    meta, arrays = _parse(path)
    extra = _decode(meta.get("extra"), arrays, where)
    data_sd = None if data is None else _data_state(meta, arrays, data, where)
    model_sd = opt_sd = sched_sd = None
    try:
        if model is not None:
            model_sd = _model_state(meta, arrays, where)
            model.check_state_dict(model_sd, strict=True)
        if optimizer is not None:
            opt_sd = _optimizer_state(meta, arrays, optimizer, where)
            optimizer.check_state_dict(opt_sd)
        if scheduler is not None:
            sched_sd = meta.get("scheduler")
            if sched_sd is None:
                raise CheckpointError(f"{where} holds no scheduler state, but a scheduler was given")
            scheduler.check_state_dict(sched_sd)
        rng = _rank_rng_state(meta)
        if restore_rng:
            probe = np.random.default_rng()
            probe.bit_generator.state = rng
    except CheckpointError:
        raise
    except Exception as exc:
        raise CheckpointError(f"{where} does not match the objects given (nothing was "
                              f"loaded): {exc}") from None
    if data is not None:
        try:
            data.load_state_dict(data_sd)
        except Exception as exc:
            raise CheckpointError(f"{where}: the data loader refused its state (nothing else "
                                  f"was loaded): {exc}") from None
    if model_sd is not None:
        model.load_state_dict(model_sd, strict=True)
    if opt_sd is not None:
        optimizer.load_state_dict(opt_sd)
    if sched_sd is not None:
        scheduler.load_state_dict(sched_sd)
    if restore_rng:
        _random.set_rng_state(rng)
    return {"step": meta.get("step"), "extra": extra,
            "library_version": meta.get("library_version"),
            "format_version": meta.get("format_version")}
