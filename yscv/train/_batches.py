"""Where the fit loop's batches come from, and how their position is saved.

In-memory arrays: a permutation drawn per epoch from the trainer's own
seeded generator (in a data-parallel run, this rank's share of it, as
``DistributedSampler`` shards: ``batch_size`` is per rank). A
`yscv.data.DataLoader`: one iteration of the loader per epoch (in a
data-parallel run the loader shards itself: its sampler must be a
``yscv.distributed.DistributedSampler``).

`BatchSource` is the part of `yscv.train.Trainer` that makes
the batches (``_epoch_batches``, the one place) and records what redraws an
epoch's order for an exact resume (the shuffle generator's state or the
loader's state at the epoch's start). The helpers below validate the data
arguments and make loader states JSON-safe for the checkpoint.
"""
from __future__ import annotations

import copy

import numpy as np


def split(data, what: str):
    """``(inputs, targets)`` arrays of ``data``, checked."""
    if not isinstance(data, (tuple, list)) or len(data) != 2:
        raise TypeError(f"{what} must be a pair (inputs, targets) of arrays with the same "
                        "first dimension, or a yscv.data.DataLoader yielding such pairs")
    x, y = np.asarray(data[0]), np.asarray(data[1])
    if len(x) != len(y):
        raise ValueError(f"{what}: {len(x)} inputs but {len(y)} targets")
    if len(x) == 0:
        raise ValueError(f"{what} is empty")
    return x, y


def is_loader(data) -> bool:
    """A DataLoader-like source: iterable, sized, with a state dict (duck-typed
    so that the fit loop does not import its sibling package ``yscv.data``)."""
    return not isinstance(data, (tuple, list, np.ndarray)) and all(
        callable(getattr(data, a, None)) for a in ("__iter__", "__len__", "state_dict",
                                                    "load_state_dict"))


def pair(batch, what: str):
    """(inputs, targets) of one loader batch."""
    if not isinstance(batch, (tuple, list)) or len(batch) != 2:
        raise TypeError(f"{what}: the DataLoader must yield (inputs, targets) pairs, got "
                        f"{type(batch).__name__}" + (f" of {len(batch)}" if
                                                     isinstance(batch, (tuple, list)) else ""))
    return np.asarray(batch[0]), np.asarray(batch[1])


def count_batches(n: int, batch_size: int, drop_last: bool) -> int:
    """Batches of ``batch_size`` in ``n`` samples (a last partial one unless ``drop_last``)."""
    return n // batch_size if drop_last else -(-n // batch_size)


def is_sharded(loader) -> bool:
    """Whether ``loader`` draws its indices from a ``DistributedSampler``."""
    sampler = getattr(loader, "sampler", None)
    return sampler is not None and type(sampler).__name__ == "DistributedSampler" and \
        type(sampler).__module__.startswith("yscv.distributed")


def to_json(obj):
    """A loader state made JSON-safe for the checkpoint's ``extra``: NumPy
    arrays become ``{"__ndarray__": dtype, "shape": .., "data": [..]}`` (exact:
    JSON keeps Python ints and floats' shortest round-trip repr)."""
    if isinstance(obj, np.ndarray):
        return {"__ndarray__": obj.dtype.str, "shape": list(obj.shape),
                "data": obj.ravel().tolist()}
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, dict):
        return {str(k): to_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_json(v) for v in obj]
    return obj


def from_json(obj):
    if isinstance(obj, dict):
        if "__ndarray__" in obj and set(obj) == {"__ndarray__", "shape", "data"}:
            return np.array(obj["data"], dtype=np.dtype(obj["__ndarray__"])).reshape(obj["shape"])
        return {k: from_json(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [from_json(v) for v in obj]
    return obj


def loader_mismatch(loader, saved: dict) -> str:
    """What differs between a saved DataLoader state and ``loader`` (checked
    before anything is restored, so a refused resume changes nothing)."""
    mine = {"batch_size": getattr(loader, "batch_size", None),
            "shuffle": getattr(loader, "shuffle", None),
            "drop_last": getattr(loader, "drop_last", None)}
    dataset = getattr(loader, "dataset", None)
    if dataset is not None:
        mine["dataset_len"] = len(dataset)
    return ", ".join(f"{k}={saved[k]!r} (this loader: {v!r})" for k, v in mine.items()
                     if isinstance(saved, dict) and k in saved and saved[k] != v)


class BatchSource:
    """The Trainer's batching (a mixin: it reads and sets the trainer's
    ``_train_loader``, ``_arrays``, ``_batching``, ``_data_sig``,
    ``_shuffle_rng``, ``_epoch_rng_state``, ``_loader_epoch_state``,
    ``_batch_in_epoch``, ``_progress``, ``_rest_n`` and ``_dp``).

    ``_progress``: after an elastic resume (a checkpoint of another number of
    ranks, saved mid-epoch), the consumed stages of the current epoch
    (``[[world, [samples per rank]], ...]``, as ``DistributedSampler``'s);
    the epoch's batches then come from the samples no rank had consumed
    (``_rest_n`` of them), split over this world. Empty otherwise."""

    def _set_train_data(self, train_data, batch_size, shuffle, drop_last) -> None:
        """Validate fit's data arguments; record the source and its signature
        (checked on resume)."""
        dp = self._dp
        if is_loader(train_data):
            given = [name for name, v in (("batch_size", batch_size), ("shuffle", shuffle),
                                          ("drop_last", drop_last)) if v is not None]
            if given:
                raise ValueError(f"fit: {', '.join(given)} given with a DataLoader; set "
                                 "them on the DataLoader instead")
            # [distributed] the loader must give each rank its share
            if dp is not None and not (is_sharded(train_data)
                                       and train_data.sampler.num_replicas == dp.world):
                raise ValueError(
                    f"fit: in a data-parallel run ({dp.world} ranks) the DataLoader must give "
                    "each rank its share of the samples; pass "
                    "sampler=DistributedSampler(len(dataset)) (from yscv.distributed) to the "
                    "DataLoader (and shuffle in the sampler, not the loader)")
            n_batches = len(train_data)
            if n_batches == 0:
                raise ValueError("fit: the DataLoader yields no batch")
            self._train_loader, self._arrays, self._batching = train_data, None, None
            dataset = getattr(train_data, "dataset", None)
            self._data_sig = {"loader": True, "batches": n_batches,
                              "n": None if dataset is None else len(dataset),
                              "batch_size": getattr(train_data, "batch_size", None),
                              "shuffle": getattr(train_data, "shuffle", None),
                              "drop_last": getattr(train_data, "drop_last", None)}
            if dp is not None:
                self._data_sig["world"] = dp.world
            return
        x, y = split(train_data, "fit: train_data")
        batch_size = 32 if batch_size is None else batch_size
        shuffle = True if shuffle is None else bool(shuffle)
        drop_last = False if drop_last is None else bool(drop_last)
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"fit: batch_size must be a positive int, got {batch_size!r}")
        n = len(x)
        n_local = n if dp is None else dp.shard_size(n, drop_last)  # [distributed] per rank
        if count_batches(n_local, batch_size, drop_last) == 0:
            raise ValueError(f"fit: {n} samples make no full batch of {batch_size} with drop_last")
        self._train_loader, self._arrays = None, (x, y)
        self._batching = (batch_size, shuffle, drop_last)
        self._data_sig = {"n": n, "batch_size": batch_size, "shuffle": shuffle,
                          "drop_last": drop_last}
        if dp is not None:
            self._data_sig["world"] = dp.world

    def _num_batches(self) -> int:
        """Batches of the current epoch on this rank (after an elastic resume
        mid-epoch: of its share of the rest of the epoch)."""
        if self._train_loader is not None:
            loader = self._train_loader
            sampler = getattr(loader, "sampler", None)
            if is_sharded(loader) and sampler.epoch != loader.epoch:
                sampler.set_epoch(loader.epoch)   # the rest of a resumed epoch is over
            return len(loader)
        batch_size, _, drop_last = self._batching
        n = len(self._arrays[0]) if not self._progress else self._rest_n
        cut = drop_last and not self._progress    # the rest of an epoch is never cut
        if self._dp is not None:  # [distributed] batches come from this rank's shard
            n = self._dp.shard_size(n, cut)
        return count_batches(n, batch_size, cut)

    def _epoch_batches(self):
        """Yield the current epoch's ``(inputs, targets)`` batches from batch
        ``self._batch_in_epoch`` on: the one place that makes batches.

        At the epoch's start it records what redraws the epoch's order (the
        shuffle generator's state, or the loader's state); mid-epoch (after a
        resume or a stop) it restores that record and skips the batches done.
        """
        start = self._batch_in_epoch
        if self._train_loader is not None:
            loader = self._train_loader
            if start >= len(loader):
                return
            if start == 0:
                it = iter(loader)  # starts the loader's next epoch
                self._loader_epoch_state = copy.deepcopy(loader.state_dict())
            else:
                loader.load_state_dict(dict(copy.deepcopy(self._loader_epoch_state),
                                            batches_consumed=start))
                it = iter(loader)
            try:
                for batch in it:
                    yield pair(batch, "fit")
            finally:
                close = getattr(it, "close", None)
                if close is not None:
                    close()
            return
        x, y = self._arrays
        batch_size, shuffle, drop_last = self._batching
        rng = self._shuffle_rng
        if start == 0:
            self._epoch_rng_state = copy.deepcopy(rng.bit_generator.state)
        else:  # resumed or restarted mid-epoch: redraw the same permutation
            rng.bit_generator.state = copy.deepcopy(self._epoch_rng_state)
        perm = rng.permutation(len(x)) if shuffle else np.arange(len(x))
        cut = drop_last
        if self._progress:  # [distributed] elastic resume: the samples no rank had consumed
            from ..distributed.sampler import stage_list

            perm, cut = stage_list(perm, self._progress, drop_last), False
        if self._dp is not None:  # [distributed] this rank's share of the same permutation
            perm = self._dp.shard(perm, cut)
        for b in range(start, self._num_batches()):
            idx = perm[b * batch_size:(b + 1) * batch_size]
            yield x[idx], y[idx]

    def _train_loader_state(self):
        """The train loader's state at the trainer's position: the epoch's
        start state with ``batches_consumed`` = batches done (mid-epoch), or
        the loader's own state between epochs."""
        loader = self._train_loader
        if loader is None:
            return None
        if self._batch_in_epoch > 0 and self._loader_epoch_state is not None:
            return dict(self._loader_epoch_state, batches_consumed=self._batch_in_epoch)
        return loader.state_dict()
