"""``DataLoader``: batches of NumPy arrays from a dataset, with reproducible
shuffling, ordered worker processes and an exact mid-epoch ``state_dict``.

    loader = DataLoader(TensorDataset(X, y), batch_size=64, shuffle=True, seed=0)
    for xb, yb in loader:          # one epoch per iteration
        ...
    state = loader.state_dict()    # JSON: epoch, batches consumed, seed, sampler state
    # later, in a new process: DataLoader(...same arguments...).load_state_dict(state)
    # and iterating it continues with exactly the batches the first run had next.

Order of an epoch: the sampler's indices, else ``range(len(dataset))``
permuted (``shuffle=True``) by a generator seeded from ``(seed, epoch)``.
Because an epoch's order is a function of the seed and the epoch number,
restoring those two (plus the sampler's state) redraws it exactly.
"""
from __future__ import annotations

import copy
import functools
import multiprocessing

import numpy as np

from .. import random as _random
from .. import runtime as _runtime
from ._workers import WorkerPool, pack_job
from .collate import default_collate
from .dataset import TensorDataset

__all__ = ["DataLoader"]

_STATE_KEYS = ("epoch", "batches_consumed", "seed", "shuffle", "batch_size", "drop_last",
               "dataset_len", "sampler")


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _other_world(sampler, sampler_state) -> bool:
    """Whether ``sampler_state`` is a DistributedSampler state saved on
    another number of ranks than ``sampler`` (a DistributedSampler) splits."""
    world = getattr(sampler, "num_replicas", None)
    if not (isinstance(sampler_state, dict) and _is_int(world)
            and sampler_state.get("num_replicas", world) != world):
        return False
    from ..distributed.sampler import DistributedSampler

    return isinstance(sampler, DistributedSampler)


def _fetch_batch(dataset, indices, collate_fn):
    """Load and collate one batch (runs in the main process or a worker)."""
    if collate_fn is None:
        if type(dataset).__getitem__ is TensorDataset.__getitem__ and isinstance(dataset,
                                                                                  TensorDataset):
            idx = np.asarray(indices)
            if idx.dtype.kind in "iu":
                return dataset.get_batch(idx)
    if isinstance(indices, np.ndarray):  # keys as Python ints, as PyTorch passes them
        indices = indices.tolist()
    samples = [dataset[i] for i in indices]
    return default_collate(samples) if collate_fn is None else collate_fn(samples)


class DataLoader:
    """Iterate a dataset in batches of NumPy arrays, like ``torch.utils.data.DataLoader``.

    Args:
        dataset: any object with ``__len__`` and ``__getitem__`` (e.g. a
            `TensorDataset`).
        batch_size: samples per batch (positive int).
        shuffle: a new permutation of the samples every epoch, drawn from a
            generator seeded from ``(seed, epoch)``: reproducible, and
            independent of how many epochs ran before in this process.
        drop_last: drop the last batch when it is smaller than ``batch_size``.
        sampler: any iterable of dataset keys (a list of indices, a
            ``DistributedSampler``, ...), iterated once per epoch; excludes
            ``shuffle=True``. If it has ``set_epoch(e)``, the loader calls it
            at the start of each of ITS epochs with its own epoch counter
            (0, 1, ... one per iteration of the loader, restored by
            `load_state_dict`), so do not call it yourself as well. If
            it has ``state_dict()`` / ``load_state_dict()``, its state at the
            start of the epoch is part of the loader's state.
        collate_fn: ``collate_fn(list_of_samples) -> batch``; default
            `yscv.data.default_collate` (stacks arrays into a new first
            axis, collates tuples / lists / dicts per field).
        num_workers: 0 loads in the main process; ``n > 0`` loads in ``n``
            worker processes, ``prefetch_factor`` batches ahead per worker,
            and yields the same batches in the same order as 0 (for a
            dataset whose ``__getitem__`` is deterministic).
        seed: seed of the shuffling; None draws one from the library
            generator (`yscv.manual_seed`) when the loader is built.
        prefetch_factor: batches loaded ahead per worker (keyword only).
        multiprocessing_context: start method of the workers ("forkserver",
            "spawn", "fork") or a multiprocessing context; None is
            "forkserver" where the platform has it (else its default), never
            "fork", which deadlocks when another thread is inside OpenBLAS.
            Except with "fork", the dataset and collate_fn must pickle:
            ``iter()`` raises TypeError, saying how to fix it, if they do not.
        timeout: seconds (a number >= 0, keyword only) to wait for a batch
            from the workers; 0 (the default) or ``math.inf`` waits for ever,
            as PyTorch's. A batch that has not arrived within ``timeout``
            seconds of the loader starting to wait for it raises
            ``yscv.errors.WorkerError`` (a RuntimeError: "DataLoader
            timed out after N seconds ...", as PyTorch), and the workers are
            stopped. Needs ``num_workers > 0`` (ValueError otherwise, as
            PyTorch requires timeout 0 without workers).

    Iterating the loader runs one epoch. ``iter(loader)`` starts the next
    epoch, also when the previous one was abandoned part-way (as PyTorch,
    whose sampler draws a new order per iteration) — except right after
    `load_state_dict`, whose position the next iteration continues.
    Run one iteration at a time: the loader keeps one position.
    Workers are stopped and joined when the iteration ends, raises or is
    abandoned (the iterator closed or garbage-collected). A worker's
    exception is re-raised in the main process (same type when it can be
    rebuilt, else `yscv.errors.WorkerError`) with the worker, the
    batch number and the worker's traceback in its message; a batch that does
    not pickle, a worker that dies or cannot rebuild the dataset raise
    WorkerError (a RuntimeError) instead of waiting for ever, and so does a
    batch that takes longer than ``timeout`` seconds (when set).
    """

    def __init__(self, dataset, batch_size: int = 1, shuffle: bool = False,
                 drop_last: bool = False, sampler=None, collate_fn=None, num_workers: int = 0,
                 seed=None, *, prefetch_factor: int = 2, multiprocessing_context=None,
                 timeout: float = 0):
        if not (hasattr(dataset, "__len__") and hasattr(dataset, "__getitem__")):
            raise TypeError(f"DataLoader: dataset must have __len__ and __getitem__, got "
                            f"{type(dataset).__name__}")
        if not _is_int(batch_size):
            raise TypeError(f"DataLoader: batch_size must be a positive int, got {batch_size!r}")
        if batch_size <= 0:
            raise ValueError(f"DataLoader: batch_size must be a positive int, got {batch_size!r}")
        for name, v in (("shuffle", shuffle), ("drop_last", drop_last)):
            if not isinstance(v, (bool, np.bool_)):
                raise TypeError(f"DataLoader: {name} must be a bool, got {v!r}")
        if sampler is not None:
            if shuffle:
                raise ValueError("DataLoader: shuffle=True and sampler are mutually exclusive; "
                                 "shuffle in the sampler, or pass shuffle=False")
            if not hasattr(sampler, "__iter__"):
                raise TypeError(f"DataLoader: sampler must be an iterable of indices, got "
                                f"{type(sampler).__name__}")
        if collate_fn is not None and not callable(collate_fn):
            raise TypeError(f"DataLoader: collate_fn must be callable or None, got "
                            f"{type(collate_fn).__name__}")
        if not _is_int(num_workers):
            raise TypeError(f"DataLoader: num_workers must be an int >= 0, got {num_workers!r}")
        if num_workers < 0:
            raise ValueError(f"DataLoader: num_workers must be an int >= 0, got {num_workers!r}")
        if seed is not None and (not _is_int(seed) or seed < 0):
            raise ValueError(f"DataLoader: seed must be a non-negative int or None, got {seed!r}")
        if not _is_int(prefetch_factor) or prefetch_factor <= 0:
            raise ValueError(f"DataLoader: prefetch_factor must be a positive int, got "
                             f"{prefetch_factor!r}")
        if isinstance(timeout, (bool, np.bool_)) or not isinstance(timeout, (int, float,
                                                                           np.integer,
                                                                           np.floating)):
            raise TypeError(f"DataLoader: timeout must be a number of seconds >= 0, got "
                            f"{timeout!r}")
        if not timeout >= 0:  # also NaN
            raise ValueError(f"DataLoader: timeout must be a number of seconds >= 0, got "
                             f"{timeout!r}")
        if timeout and num_workers == 0:
            raise ValueError(f"DataLoader: timeout={timeout!r} needs num_workers > 0 (the "
                             f"main process loading with num_workers=0 cannot be interrupted); "
                             f"pass timeout=0")
        if multiprocessing_context is None:
            ctx = _runtime.worker_context()
        elif isinstance(multiprocessing_context, str):
            try:
                ctx = multiprocessing.get_context(multiprocessing_context)
            except ValueError:
                raise ValueError(f"DataLoader: multiprocessing_context must be one of "
                                 f"{multiprocessing.get_all_start_methods()}, got "
                                 f"{multiprocessing_context!r}") from None
        elif hasattr(multiprocessing_context, "Process"):
            ctx = multiprocessing_context
        else:
            raise TypeError(f"DataLoader: multiprocessing_context must be a start-method name "
                            f"or a multiprocessing context, got {multiprocessing_context!r}")
        self.dataset = dataset
        self.batch_size = int(batch_size)
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self.sampler = sampler
        self.collate_fn = collate_fn
        self.num_workers = int(num_workers)
        self.prefetch_factor = int(prefetch_factor)
        self.timeout = float(timeout)
        self._ctx = ctx
        if seed is None and self.shuffle:
            seed = _random.draw_seed()
        self.seed = None if seed is None else int(seed)
        # position of the data stream: epoch, batches of it handed out, and
        # whether the next iteration begins exactly there (``_fresh``) or
        # starts the next epoch (the current one was begun)
        self._epoch = 0
        self._consumed = 0
        self._fresh = True
        self._epoch_len = None
        self._epoch_sampler_state = None

    # ------------------------------------------------------------ sizes
    def _num_batches(self, n: int) -> int:
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def __len__(self) -> int:
        """Batches per epoch."""
        if self.sampler is not None:
            if not hasattr(self.sampler, "__len__"):
                raise TypeError(f"DataLoader: len() needs a sampler with __len__; "
                                f"{type(self.sampler).__name__} has none")
            return self._num_batches(len(self.sampler))
        return self._num_batches(len(self.dataset))

    @property
    def epoch(self) -> int:
        """The loader's epoch counter, as `state_dict` records it: the
        epoch being iterated (or abandoned part-way), or the next one once an
        epoch is complete."""
        return self._epoch if self._fresh or not self._epoch_done() else self._epoch + 1

    def _epoch_done(self) -> bool:
        return self._epoch_len is not None and self._consumed >= self._epoch_len

    # ------------------------------------------------------------ order
    def _permutation(self, epoch: int, n: int) -> np.ndarray:
        ss = np.random.SeedSequence(self.seed, spawn_key=(epoch,))
        return np.random.Generator(np.random.PCG64(ss)).permutation(n)

    def _epoch_batches(self, epoch: int) -> list:
        """The index lists of every batch of ``epoch`` (sets the sampler's epoch)."""
        if self.sampler is not None:
            if hasattr(self.sampler, "set_epoch"):
                self.sampler.set_epoch(epoch)
            order = list(self.sampler)
        else:  # batches are views of one index array (no per-sample Python ints)
            n = len(self.dataset)
            order = self._permutation(epoch, n) if self.shuffle else np.arange(n)
        bs = self.batch_size
        stop = self._num_batches(len(order)) * bs
        return [order[s:s + bs] for s in range(0, min(stop, len(order)), bs)]

    def _sampler_state(self):
        sd = getattr(self.sampler, "state_dict", None)
        return copy.deepcopy(sd()) if callable(sd) else None

    # ------------------------------------------------------------ iteration
    def __iter__(self):
        # the epoch starts here (its order is drawn now, as PyTorch draws the
        # sampler's iterator in iter()); workers start on the first next()
        fetch = functools.partial(_fetch_batch, collate_fn=self.collate_fn)
        job = None
        if self.num_workers > 0:  # raises (state unchanged) if the workers cannot get them
            job = pack_job(self._ctx, self.dataset, fetch, self.collate_fn, self.num_workers)
        if not self._fresh:  # the previous iteration was begun: next epoch
            self._epoch += 1
            self._consumed = 0
        self._fresh = False
        self._epoch_sampler_state = self._sampler_state()
        batches = self._epoch_batches(self._epoch)
        self._epoch_len = len(batches)
        start = min(self._consumed, len(batches))
        return self._generate(batches[start:], start, self._epoch, fetch, job)

    def _generate(self, todo: list, start: int, epoch: int, fetch, job):
        if self.num_workers == 0 or not todo:
            for k, indices in enumerate(todo):
                batch = fetch(self.dataset, indices)
                self._consumed = start + k + 1
                yield batch
        else:
            pool = WorkerPool(self._ctx, min(self.num_workers, len(todo)), job, todo, start,
                              self.prefetch_factor * self.num_workers, self.timeout)
            del job  # the workers have it (a pickle of the dataset can be large)
            try:
                for k, batch in enumerate(pool.results()):
                    self._consumed = start + k + 1
                    yield batch
            finally:
                pool.shutdown()
        if self._epoch == epoch and not self._fresh:  # not overtaken by a newer iteration
            self._epoch += 1
            self._consumed = 0
            self._fresh = True

    # ------------------------------------------------------------ state
    def state_dict(self) -> dict:
        """The data stream's position, JSON-serialisable (ints, bools, None;
        the seed may exceed 64 bits' worth of JSON doubles — Python's json
        keeps it exact):

        ``epoch``, ``batches_consumed`` (batches of that epoch handed out),
        ``seed`` (shuffling), ``sampler`` (the sampler's ``state_dict()`` at
        the start of the epoch, or None), and ``shuffle``, ``batch_size``,
        ``drop_last``, ``dataset_len``, checked by `load_state_dict`.
        """
        if not self._fresh and self._epoch_done():  # finished but not closed yet
            epoch, consumed, sampler = self._epoch + 1, 0, self._sampler_state()
        elif self._fresh:
            epoch, consumed, sampler = self._epoch, self._consumed, self._sampler_state()
            if self._consumed:  # loaded mid-epoch and not iterated yet
                sampler = self._epoch_sampler_state
        else:
            epoch, consumed, sampler = self._epoch, self._consumed, self._epoch_sampler_state
        return {"epoch": int(epoch), "batches_consumed": int(consumed), "seed": self.seed,
                "shuffle": self.shuffle, "batch_size": self.batch_size,
                "drop_last": self.drop_last, "dataset_len": len(self.dataset),
                "sampler": copy.deepcopy(sampler)}

    def load_state_dict(self, state: dict) -> None:
        """Continue from a `state_dict`: the next iteration yields the
        rest of the saved epoch (the batches the saved run had not yet
        handed out), then the following epochs as the saved run would.

        Elastic resume: a state saved with a ``DistributedSampler`` of W
        ranks, loaded into a loader whose DistributedSampler splits W' != W
        ranks, resumes the rest of the interrupted epoch as the samples no
        rank had consumed (each of the W ranks handed out
        ``batches_consumed`` batches), split over the W' ranks, none lost or
        repeated; the next iteration yields this rank's share of them. Every
        rank of the run that saved must have handed out the same number of
        batches (as a data-parallel loop does).

        The saved seed replaces this loader's. Raises ValueError naming the
        key (nothing changed) when the state is malformed (not a dict, a key
        missing or unknown, a value of the wrong type or out of range) or was
        saved for another batch_size / drop_last / shuffle / dataset length,
        or holds a sampler state that this loader's sampler refuses (its
        error, whatever its type, becomes a ValueError naming ``sampler``).
        """
        fn = "DataLoader.load_state_dict"
        if not isinstance(state, dict):
            raise ValueError(f"{fn}: state must be a dict (a DataLoader.state_dict()), got "
                             f"{type(state).__name__}")
        missing = [k for k in _STATE_KEYS if k not in state]
        if missing:
            raise ValueError(f"{fn}: state lacks {missing}")
        unknown = sorted(repr(k) for k in state if k not in _STATE_KEYS)
        if unknown:
            raise ValueError(f"{fn}: unknown key(s) {', '.join(unknown)} in the state "
                             f"(expected {list(_STATE_KEYS)})")
        for key in ("epoch", "batches_consumed"):
            if not _is_int(state[key]) or state[key] < 0:
                raise ValueError(f"{fn}: {key} must be an int >= 0, got {state[key]!r}")
        for key in ("batch_size", "dataset_len"):
            if not _is_int(state[key]):
                raise ValueError(f"{fn}: {key} must be an int, got {state[key]!r}")
        for key in ("shuffle", "drop_last"):
            if not isinstance(state[key], (bool, np.bool_)):
                raise ValueError(f"{fn}: {key} must be a bool, got {state[key]!r}")
        seed = state["seed"]
        if seed is not None and (not _is_int(seed) or seed < 0):
            raise ValueError(f"{fn}: seed must be a non-negative int or None, got {seed!r}")
        mine = {"shuffle": self.shuffle, "batch_size": self.batch_size,
                "drop_last": self.drop_last, "dataset_len": len(self.dataset)}
        diff = {k: (state[k], v) for k, v in mine.items() if state[k] != v}
        if diff:
            text = ", ".join(f"{k}={a!r} (this loader: {b!r})" for k, (a, b) in diff.items())
            raise ValueError(f"DataLoader.load_state_dict: state was saved with {text}; "
                             "resuming would not replay the same batches")
        if self.shuffle and seed is None:
            raise ValueError("DataLoader.load_state_dict: state has no seed but this loader "
                             "shuffles")
        sampler_state = state["sampler"]
        if sampler_state is not None and not callable(getattr(self.sampler, "load_state_dict",
                                                              None)):
            raise ValueError("DataLoader.load_state_dict: state holds a sampler state but this "
                             "loader's sampler has no load_state_dict")
        consumed, epoch = int(state["batches_consumed"]), int(state["epoch"])
        if consumed and _other_world(self.sampler, sampler_state):
            # [distributed] elastic: the batches every rank handed out become
            # consumed progress; the sampler splits the rest over this world
            from ..distributed.sampler import advanced_state

            try:
                sampler_state = advanced_state(sampler_state, consumed * self.batch_size)
            except ValueError as exc:
                raise ValueError(f"{fn}: sampler: {exc}") from exc
            consumed = 0
        try:
            n_batches = len(self)
        except TypeError:
            n_batches = None
        if n_batches is not None and consumed > n_batches:
            raise ValueError(f"DataLoader.load_state_dict: batches_consumed={consumed} exceeds "
                             f"the {n_batches} batches of an epoch")
        if sampler_state is not None:
            try:
                self.sampler.load_state_dict(copy.deepcopy(sampler_state))
            except (TypeError, ValueError, KeyError, IndexError, AttributeError) as exc:
                raise ValueError(f"{fn}: sampler: this loader's sampler refused the saved "
                                 f"sampler state ({type(exc).__name__}: {exc})") from exc
        if n_batches is not None and consumed == n_batches:
            # a finished epoch: the next one follows (the sampler, restored
            # to the epoch's start, runs through the epoch to advance its state)
            if self.sampler is not None:
                self._epoch_batches(epoch)
            epoch, consumed = epoch + 1, 0
            sampler_state = self._sampler_state()
        self.seed = None if seed is None else int(seed)
        self._epoch, self._consumed, self._fresh = epoch, consumed, True
        self._epoch_len = None
        self._epoch_sampler_state = copy.deepcopy(sampler_state)
