"""Checkpoints in a data-parallel run: rank 0 writes, every rank waits for it.

``yscv.save_checkpoint`` calls `save` when the world has more than one
rank. Every rank must call it (the replicas hold the same model and
optimizer). The ranks' library RNG states are gathered into the file (key
``rng_states`` of the metadata, one per rank); rank 0 writes atomically;
then rank 0 broadcasts success or its error, so every rank returns only once
the file is complete, and a failure on rank 0 raises on every rank instead
of leaving the others waiting. ``yscv.load_checkpoint`` on rank r restores
``rng_states[r]`` when the file holds a state for rank r; a rank that did
not exist in the saving run (elastic resume on more ranks) gets
`derived_rng_state`.
"""
from __future__ import annotations

import hashlib
import json
import sys

import numpy as np

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
    states = _comm._all_gather_bytes(json.dumps(_random.get_rng_state()).encode(),
                                     "save_checkpoint")
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


def derived_rng_state(states: list, rank: int) -> dict:
    """The library RNG state of a rank ``rank >= len(states)`` resuming a
    checkpoint of ``len(states)`` ranks: a PCG64 generator seeded with
    ``SeedSequence(entropy, spawn_key=(rank,))``, where ``entropy`` is the
    SHA-256 of ``json.dumps(states, sort_keys=True)`` read as a little-endian
    integer. Deterministic (the same file and rank give the same state) and
    different for every rank and every saved set of states."""
    digest = hashlib.sha256(json.dumps(states, sort_keys=True).encode()).digest()
    seq = np.random.SeedSequence(int.from_bytes(digest, "little"), spawn_key=(int(rank),))
    return np.random.Generator(np.random.PCG64(seq)).bit_generator.state


def rank_rng_state(meta: dict):
    """The RNG state this rank restores from a checkpoint's metadata: its own
    saved one, or for a rank the saving run did not have, one derived from
    the saved states and the rank (`derived_rng_state`)."""
    states = meta.get("rng_states")
    if isinstance(states, list) and states and _comm.is_initialized() and _comm._size > 1:
        if _comm._rank < len(states):
            return states[_comm._rank]
        return derived_rng_state(states, _comm._rank)
    return meta.get("rng_state")
