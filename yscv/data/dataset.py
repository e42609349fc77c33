"""Datasets: the map-style protocol (``__len__`` + ``__getitem__``) and
`TensorDataset` over in-memory arrays."""
from __future__ import annotations

import numpy as np

__all__ = ["Dataset", "TensorDataset"]


class Dataset:
    """Base class of a map-style dataset, as ``torch.utils.data.Dataset``.

    Subclasses implement ``__len__() -> int`` (number of samples) and
    ``__getitem__(i)`` (sample ``i``, for ``0 <= i < len``): an array, a
    number, or a tuple / list / dict of them. Any object with these two
    methods works with `yscv.data.DataLoader`; subclassing is optional.
    """

    def __len__(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} must implement __len__")

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must implement __getitem__")


class TensorDataset(Dataset):
    """Samples are the rows of several arrays: ``ds[i] == (a[i], b[i], ...)``.

    Args:
        *arrays: NumPy arrays (or array-likes) with the same first-axis length
            ``N``; they are converted with ``np.asarray`` (no copy of arrays).

    Raises ValueError naming the lengths when they differ, or when no array
    is given / an array is 0-d.
    """

    def __init__(self, *arrays):
        if not arrays:
            raise ValueError("TensorDataset: give at least one array")
        arrs = tuple(np.asarray(a) for a in arrays)
        for k, a in enumerate(arrs):
            if a.ndim == 0:
                raise ValueError(f"TensorDataset: array {k} is 0-d (a scalar); every array "
                                 "needs a first axis of samples")
        lengths = [len(a) for a in arrs]
        if len(set(lengths)) != 1:
            raise ValueError(f"TensorDataset: arrays must have the same first-axis length, "
                             f"got lengths {lengths}")
        self.arrays = arrs

    def __len__(self) -> int:
        return len(self.arrays[0])

    def __getitem__(self, index):
        return tuple(a[index] for a in self.arrays)

    def get_batch(self, indices) -> tuple:
        """The collated batch for ``indices`` (an integer array) in one
        fancy-indexing step per array: equal to stacking ``ds[i]`` for each
        ``i``, without the per-sample Python loop."""
        return tuple(a[indices] for a in self.arrays)
