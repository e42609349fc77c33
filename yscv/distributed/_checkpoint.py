"""Checkpoints in a data-parallel run: rank 0 writes, every rank waits for it.

``yscv.save_checkpoint`` calls :func:`save` when the world has more than one
rank. Every rank must call it (the replicas hold the same model and
optimizer). The ranks' library RNG states are gathered into the file (key
``rng_states`` of the metadata, one per rank); rank 0 writes atomically;
then rank 0 broadcasts success or its error, so every rank returns only once
the file is complete, and a failure on rank 0 raises on every rank instead
of leaving the others waiting. ``yscv.load_checkpoint`` on rank r restores
``rng_states[r]`` when the file holds one per rank of this world.
"""
from __future__ import annotations

import json
import sys

from .. import random as _random
from ..errors import CheckpointError
from . import _comm


def active() -> bool:
    """True in a world of more than one rank (joins it if the launcher started one)."""
    if not _comm._initialized:
        if _comm.launched_world_size() <= 1 and "mpi4py.MPI" not in sys.modules:
            return False   # a single process: mpi4py is not imported
        _comm._join()
    return _comm._size > 1


def save(save_local, path, **kwargs) -> str:
    """Gather the RNG states, write on rank 0, share the outcome; returns ``path``."""
    states = _comm._all_gather_bytes(json.dumps(_random.get_rng_state()).encode())
    ok, message = True, ""
    error = None
    if _comm._rank == 0:
        try:
            path = save_local(path, rng_states=[json.loads(s) for s in states], **kwargs)
        except BaseException as exc:  # noqa: BLE001 - re-raised below, after telling the others
            ok, message, error = False, _comm._format_exc(exc), exc
    ok, message = _comm._broadcast_status(ok, message, name="save_checkpoint")
    if not ok:
        if error is not None:
            raise error
        raise CheckpointError(f"save_checkpoint: rank 0 failed to write {path!r}: {message}")
    return path


def rank_rng_state(meta: dict):
    """The RNG state this rank restores from a checkpoint's metadata."""
    states = meta.get("rng_states")
    if isinstance(states, list) and _comm.is_initialized() and len(states) == _comm._size \
            and _comm._size > 1:
        return states[_comm._rank]
    return meta.get("rng_state")
