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
flushes and fsyncs it, ``os.replace``-s it over the target and fsyncs the
folder: a crash at any point leaves either the previous file or the new
one, never a mix. The temporary name is fixed per target and a writer holds
an ``flock`` on its temporary file until the rename, so a save killed
mid-write leaves at most one temporary file per target, which the next save
to that folder removes (it can tell a dead writer's file from a live one's).
New files get the permissions ``open()`` would give them (``0o666`` less
the umask; an existing target's mode is kept).

Loading validates EVERYTHING (header, checksum, format version, keys,
shapes, optimizer and scheduler structure, RNG state) before touching any
object, and raises :class:`yscv.CheckpointError` naming the problem; a
failed load changes nothing.
"""
from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
import struct

import numpy as np

from . import random as _random
from . import runtime
from .errors import CheckpointError

__all__ = ["save_checkpoint", "load_checkpoint", "read_checkpoint_metadata", "FORMAT",
           "FORMAT_VERSION"]

FORMAT = "yscv-checkpoint"
FORMAT_VERSION = 1
_MODEL = "model."
_OPTIM = "optimizer.state."
_EXTRA = "extra."
_DATA = "data."
#: a JSON object ``{_TENSOR: name}`` stands for the tensor ``name``; a user
#: object that would read as a marker is wrapped as ``{_DICT: object}``
_TENSOR = "__yscv_tensor__"
_DICT = "__yscv_dict__"
_TMP_SUFFIX = ".yscv.tmp"
#: NumPy dtypes a checkpoint stores (what safetensors can hold)
_ARRAY_DTYPES = tuple(np.dtype(t) for t in (
    np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64,
    np.uint64, np.float16, np.float32, np.float64, np.complex64))


# ---------------------------------------------------------------- helpers
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


def _lib_version() -> str:
    import yscv  # at call time: yscv/__init__ may still be importing us
    return getattr(yscv, "__version__", "unknown")


def _fsync_dir(folder: str) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return  # e.g. Windows: directories cannot be opened; rename is durable there
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


try:
    import fcntl as _fcntl
except ImportError:  # Windows: no flock; temporary files are still one per target
    _fcntl = None


def _temp_path(path: str) -> str:
    """The one temporary name of ``path``: ``<folder>/.<name>.yscv.tmp``."""
    folder, name = os.path.split(os.path.abspath(path))
    return os.path.join(folder, "." + name + _TMP_SUFFIX)


def _lock(fd: int, block: bool):
    """``flock`` ``fd`` exclusively: True (held), False (another process
    holds it; only when not ``block``), None (no locks on this system or
    file system)."""
    if _fcntl is None:
        return None
    try:
        _fcntl.flock(fd, _fcntl.LOCK_EX | (0 if block else _fcntl.LOCK_NB))
        return True
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return False
        return None


def _same_file(fd: int, path: str) -> bool:
    """``path`` still names the file open as ``fd`` (not renamed or unlinked)."""
    try:
        a, b = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


_O_BINARY = getattr(os, "O_BINARY", 0)


def _open_temp(tmp: str) -> int:
    """Create ``tmp`` afresh (mode ``0o666`` less the umask, as ``open()``)
    and return its descriptor, locked where the system has ``flock``.

    A file already there is a killed save's (removed) or a live save's of
    the same target in another process (waited for: saves to one path run
    one after the other). Each writer checks, once it holds the lock, that
    the name still refers to its file, so no two writers ever share one."""
    for _ in range(1000):
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_BINARY, 0o666)
        except FileExistsError:
            if _fcntl is None:            # no locks: a killed save's file (open files
                try:                      # cannot be removed on Windows, so unlink first)
                    os.unlink(tmp)
                except FileNotFoundError:
                    pass
                continue
            try:
                old = os.open(tmp, os.O_RDONLY | _O_BINARY)
            except FileNotFoundError:
                continue                  # renamed or removed meanwhile: try again
            try:
                if _lock(old, block=True) is not False and _same_file(old, tmp):
                    os.unlink(tmp)        # no live writer: a killed save's file
            finally:
                os.close(old)
            continue
        got = _lock(fd, block=True)
        if got is None or _same_file(fd, tmp):
            return fd
        os.close(fd)                      # removed by another writer before we locked it
    raise FileExistsError(f"save_checkpoint: cannot create the temporary file {tmp!r} "
                          "(something keeps taking its name)")


def _remove_stale_temps(folder: str, mine: str) -> None:
    """Remove the temporary files of saves that were killed (any target in
    ``folder``): those no live writer holds locked. Only where ``flock``
    works: elsewhere a dead writer's file cannot be told from a live one's."""
    try:
        names = [e.name for e in os.scandir(folder)
                 if e.name.startswith(".") and e.name.endswith(_TMP_SUFFIX)]
    except OSError:
        return
    for name in names:
        tmp = os.path.join(folder, name)
        if tmp == mine:
            continue
        try:
            fd = os.open(tmp, os.O_RDONLY | _O_BINARY)
        except OSError:
            continue
        try:
            if _lock(fd, block=False) is True and _same_file(fd, tmp):
                os.unlink(tmp)
        except OSError:
            pass
        finally:
            os.close(fd)


def _atomic_write(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically: temporary file, flush, fsync,
    ``os.replace``, fsync of the folder. The temporary file is removed on
    any error; one killed mid-save is removed by the next save."""
    folder = os.path.dirname(os.path.abspath(path))
    tmp = _temp_path(path)
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)  # an existing target keeps its mode
    except OSError:
        mode = None
    fd = _open_temp(tmp)
    try:
        try:
            if mode is not None and hasattr(os, "fchmod"):
                os.fchmod(fd, mode)
            with os.fdopen(os.dup(fd), "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            if _fcntl is None:
                os.close(fd)              # Windows cannot rename an open file
                fd = -1
            os.replace(tmp, path)         # still locked: no other writer touches tmp
        except BaseException:
            try:
                if fd < 0 or _same_file(fd, tmp):
                    os.unlink(tmp)
            except OSError:
                pass
            raise
        _fsync_dir(folder)
    finally:
        if fd >= 0:
            os.close(fd)
    _remove_stale_temps(folder, tmp)


# ---------------------------------------------- arrays inside JSON values
def _encode(value, prefix: str, arrays: dict, where: str):
    """``value`` (JSON values, dicts, lists, tuples and NumPy arrays) as a
    JSON value in which each NumPy array is the object ``{"__yscv_tensor__":
    "<prefix><n>"}`` and the array is ``arrays["<prefix><n>"]`` (n counts
    from 0 in the order met). A user object of exactly one key that is one
    of the two marker keys is wrapped as ``{"__yscv_dict__": object}``, so
    decoding is unambiguous. ``where`` names the value in errors."""
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
        out = {k: _encode(v, prefix, arrays, f"{where}[{k!r}]") for k, v in value.items()}
        if len(out) == 1 and next(iter(out)) in (_TENSOR, _DICT):
            return {_DICT: out}
        return out
    if isinstance(value, (list, tuple)):
        return [_encode(v, prefix, arrays, f"{where}[{i}]") for i, v in enumerate(value)]
    return value


def _decode(value, arrays: dict, where: str):
    """The inverse of :func:`_encode`: tensor markers become (writable,
    owned) copies of the arrays; raises CheckpointError on a bad marker."""
    if isinstance(value, dict):
        if len(value) == 1:
            ((k, v),) = value.items()
            if k == _TENSOR:
                if not isinstance(v, str) or v not in arrays:
                    raise CheckpointError(f"{where} refers to a tensor {v!r} it does not hold")
                return np.array(arrays[v], copy=True)
            if k == _DICT:
                if not isinstance(v, dict):
                    raise CheckpointError(f"{where} has a corrupt {_DICT!r} object")
                return {kk: _decode(vv, arrays, where) for kk, vv in v.items()}
        return {k: _decode(v, arrays, where) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v, arrays, where) for v in value]
    return value


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
        model: a :class:`yscv.nn.Module` (its ``state_dict()``).
        optimizer: a :class:`yscv.optim.Optimizer` (options, step counts, state arrays).
        scheduler: a learning-rate scheduler (its JSON ``state_dict()``).
        step: an int (or None) returned by :func:`load_checkpoint`.
        extra: a JSON value (dicts, lists, tuples, str, numbers, bools, None)
            that may hold NumPy arrays anywhere; returned by
            :func:`load_checkpoint` (tuples as lists, arrays bit-exact: same
            dtype, shape and values, stored as tensors).
        data: a data loader, or any object with ``state_dict()`` returning a
            dict of JSON values and NumPy arrays (encoded as ``extra``);
            :func:`load_checkpoint` hands it to ``load_state_dict``.

    The library RNG state (``yscv.random.get_rng_state()``) is always saved.
    The file gets the permissions ``open()`` would give it: ``0o666`` less
    the process umask for a new file; an existing file keeps its mode.

    Raises:
        TypeError: ``step`` not an int, ``extra`` or the data state not made
            of JSON values and NumPy arrays (or an array of a dtype that
            safetensors cannot hold), ``data`` without ``state_dict``.
            Nothing is written.

    In a data-parallel run (``mpiexec``, world > 1) EVERY rank must call it:
    rank 0 writes the file (with every rank's RNG state), and each rank
    returns only once the file is complete; an error on rank 0 is raised on
    every rank. A :class:`yscv.distributed.DistributedDataParallel` model is
    saved as its wrapped module.
    """
    # [distributed] every rank calls; rank 0 writes, the others wait (yscv/distributed/_checkpoint.py)
    if _data_parallel():
        from .distributed import _checkpoint as _dist_ckpt

        return _dist_ckpt.save(_save_checkpoint_local, path, model=_unwrap(model),
                               optimizer=optimizer, scheduler=scheduler, step=step, extra=extra,
                               data=data)
    return _save_checkpoint_local(path, _unwrap(model), optimizer, scheduler, step, extra, data)


def _data_parallel() -> bool:
    """True when this process is one rank of a world larger than one."""
    import sys

    if "yscv.distributed" not in sys.modules and runtime.launcher_world_size() <= 1:
        return False
    from .distributed import _checkpoint as _dist_ckpt

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
        from .distributed import _checkpoint as _dist_ckpt

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
            no data-loader state ...), or a data loader that refused its state.
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
