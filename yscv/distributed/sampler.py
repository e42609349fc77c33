"""``DistributedSampler``: this rank's share of the sample indices, per epoch."""
from __future__ import annotations

import math

import numpy as np

from . import _comm

__all__ = ["DistributedSampler"]


def _check_int(name: str, v, minimum: int) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"DistributedSampler: {name} must be an int, got {v!r}")
    if v < minimum:
        raise ValueError(f"DistributedSampler: {name} must be >= {minimum}, got {v}")
    return int(v)


class DistributedSampler:
    """Indices of rank ``rank``'s share of ``range(n)``, PyTorch's semantics.

    Per epoch: one permutation of ``range(n)`` (``shuffle=True``; drawn from
    ``numpy.random.default_rng(seed + epoch)``, so the same on every rank) or
    ``range(n)`` in order; padded by wrapping around to a multiple of
    ``num_replicas`` (or, with ``drop_last``, the tail cut to one); rank r
    takes every ``num_replicas``-th index starting at r. ``len()`` is the
    per-rank count, equal on every rank.

    Difference from ``torch.utils.data.DistributedSampler``: PyTorch draws
    the permutation with ``torch.randperm`` on a torch generator, which NumPy
    cannot reproduce, so with ``shuffle=True`` the order differs from
    PyTorch's; with ``shuffle=False`` the index lists are identical.

    Args:
        n: the dataset size (an int, or anything with ``len()``).
        num_replicas: number of ranks (default: ``world_size()``).
        rank: this rank (default: ``rank()``).
        shuffle, seed, drop_last: as PyTorch's.
    """

    def __init__(self, n, num_replicas=None, rank=None, shuffle: bool = True, seed: int = 0,
                 drop_last: bool = False):
        if not isinstance(n, (int, np.integer, str, bytes)) and hasattr(n, "__len__"):
            n = len(n)
        self.n = _check_int("n", n, 0)
        self.num_replicas = (_comm.world_size() if num_replicas is None
                             else _check_int("num_replicas", num_replicas, 1))
        r = _comm.rank() if rank is None else _check_int("rank", rank, 0)
        if r >= self.num_replicas:
            raise ValueError(f"DistributedSampler: rank {r} is not in [0, {self.num_replicas - 1}]")
        self.rank = r
        self.shuffle = bool(shuffle)
        self.seed = _check_int("seed", seed, 0)
        self.drop_last = bool(drop_last)
        self.epoch = 0
        w = self.num_replicas
        if self.drop_last and self.n % w != 0:
            self.num_samples = math.ceil((self.n - w) / w)
        else:
            self.num_samples = math.ceil(self.n / w)
        self.total_size = self.num_samples * w

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch's permutation (call it at the start of every epoch)."""
        self.epoch = _check_int("epoch", epoch, 0)

    def indices(self) -> np.ndarray:
        """This rank's indices for the current epoch (int64 array)."""
        if self.shuffle:
            idx = np.random.default_rng(self.seed + self.epoch).permutation(self.n)
        else:
            idx = np.arange(self.n, dtype=np.int64)
        if not self.drop_last:
            pad = self.total_size - len(idx)
            if pad > 0 and len(idx) > 0:
                idx = np.concatenate([idx, np.resize(idx, pad)])
        else:
            idx = idx[:self.total_size]
        return idx[self.rank:self.total_size:self.num_replicas].astype(np.int64, copy=False)

    def __iter__(self):
        return iter(self.indices().tolist())

    def __len__(self) -> int:
        return self.num_samples

    def state_dict(self) -> dict:
        """``{"epoch": e}``: enough to resume (the other options are arguments)."""
        return {"epoch": self.epoch}

    def load_state_dict(self, state: dict) -> None:
        """Restore the epoch from :meth:`state_dict`. A corrupted state (not
        a dict, ``epoch`` missing or not an int >= 0, an unknown key) raises
        ``ValueError`` naming the key; nothing is changed."""
        fn = "DistributedSampler.load_state_dict"
        if not isinstance(state, dict):
            raise ValueError(f"{fn}: state must be a dict {{'epoch': int}}, got "
                             f"{type(state).__name__} {state!r}")
        if "epoch" not in state:
            raise ValueError(f"{fn}: state lacks 'epoch' (expected {{'epoch': int}}), got "
                             f"{state!r}")
        unknown = sorted(repr(k) for k in state if k != "epoch")
        if unknown:
            raise ValueError(f"{fn}: unknown key(s) {', '.join(unknown)} in the state "
                             "(expected only 'epoch')")
        epoch = state["epoch"]
        if isinstance(epoch, (bool, np.bool_)) or not isinstance(epoch, (int, np.integer)) \
                or epoch < 0:
            raise ValueError(f"{fn}: 'epoch' must be an int >= 0, got {epoch!r}")
        self.epoch = int(epoch)
