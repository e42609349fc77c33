"""Datasets and samplers of the data tests, in a module of their own: worker
processes (started with forkserver or spawn) import it by name to unpickle
them, and it imports nothing heavier than NumPy and yscv.data."""
from __future__ import annotations

import os

import numpy as np

from yscv.data import Dataset


class DictDataset(Dataset):
    """Samples of mixed kinds: dict of an array, an int, a float, a bool and a tuple."""

    def __len__(self):
        return 11

    def __getitem__(self, i):
        return {"x": np.full((2, 3), i, dtype=np.float32), "label": int(i) % 3,
                "weight": 0.5 * i, "flag": bool(i % 2),
                "pair": (np.arange(i, i + 2, dtype=np.int32), np.float64(i) / 7)}


class SquareDataset(Dataset):
    """Plain map-style dataset (not a TensorDataset: the per-sample path)."""

    def __init__(self, n=37, fail_at=None, exit_at=None):
        self.n, self.fail_at, self.exit_at = n, fail_at, exit_at

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.fail_at:
            raise KeyError(f"sample {i} is broken")
        if i == self.exit_at:
            os._exit(3)
        return np.array([i, i * i], dtype=np.float64), i % 4


class SeededSampler:
    """A sampler with its own generator, set_epoch and a state dict: each
    epoch draws a random subset order from the generator (its state advances)."""

    def __init__(self, n, seed):
        self.n = n
        self.rng = np.random.default_rng(seed)
        self.epochs = []

    def set_epoch(self, e):
        self.epochs.append(e)

    def __iter__(self):
        return iter(self.rng.permutation(self.n)[: self.n - 2].tolist())

    def __len__(self):
        return self.n - 2

    def state_dict(self):
        return {"rng": self.rng.bit_generator.state}

    def load_state_dict(self, st):
        self.rng.bit_generator.state = st["rng"]


def keep_samples(samples):
    """A collate_fn that keeps the batch a list of samples."""
    return samples


class LambdaAt(Dataset):
    """Sample ``i`` is ``(array, i)``, except at ``at``: ``(array, a lambda)``,
    which loads and collates (with keep_samples) but does not pickle."""

    def __init__(self, n, at=None):
        self.n, self.at = n, at

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return np.full(2, i, dtype=np.float32), ((lambda: i) if i == self.at else i)


class LocalErrorAt(Dataset):
    """Raises, at sample ``at``, an exception of a class defined inside
    ``__getitem__`` (so it cannot be pickled)."""

    def __init__(self, n, at=None):
        self.n, self.at = n, at

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        class LocalError(Exception):
            pass
        if i == self.at:
            raise LocalError(f"sample {i} is broken")
        return np.array([i, 2 * i], dtype=np.int64)


class SlowDataset(Dataset):
    """Sample ``i`` is ``[i, i * i]`` after ``delay`` seconds."""

    def __init__(self, n, delay):
        self.n, self.delay = n, delay

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        import time
        time.sleep(self.delay)
        return np.array([i, i * i], dtype=np.float64)


class BlockedAt(Dataset):
    """Sample ``i`` is ``[i, 2 * i]``, except that ``__getitem__(at)`` (every
    sample when ``at`` is None) never returns."""

    def __init__(self, n, at=None):
        self.n, self.at = n, at

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        import time
        while self.at is None or i == self.at:
            time.sleep(3600)
        return np.array([i, 2 * i], dtype=np.int64)
