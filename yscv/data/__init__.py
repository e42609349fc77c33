"""Data loading: datasets and a ``DataLoader`` yielding batches of NumPy arrays.

    from yscv.data import TensorDataset, DataLoader
    loader = DataLoader(TensorDataset(X, y), batch_size=64, shuffle=True, seed=0,
                        num_workers=2)
    for xb, yb in loader:
        ...

``DataLoader.state_dict()`` / ``load_state_dict()`` record the position in
the data stream, so a run resumed mid-epoch sees exactly the batches the
uninterrupted run saw. See docs/data.md.
"""
from .collate import default_collate
from .dataset import Dataset, TensorDataset
from ..errors import WorkerError
from .loader import DataLoader

__all__ = ["Dataset", "TensorDataset", "DataLoader", "default_collate", "WorkerError"]
