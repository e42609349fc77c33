"""``default_collate``: a list of samples -> one batch of NumPy arrays."""
from __future__ import annotations

import collections.abc
import numbers

import numpy as np

__all__ = ["default_collate"]


def default_collate(batch):
    """Merge a list of samples into a batch, like PyTorch's ``default_collate``
    but producing NumPy arrays.

    - arrays (and NumPy scalars) are stacked along a new first axis: B
      samples of shape S give one array [B, ``*S``] of their common dtype;
    - Python ``bool`` / ``int`` / ``float`` give a [B] array of dtype bool /
      int64 / float64 (as PyTorch's tensors);
    - strings and bytes stay a list;
    - a dict is collated key by key (keys of the first sample);
    - a tuple, namedtuple or list is collated field by field and gives the
      same kind of container (PyTorch returns a list for plain tuples; a tuple
      unpacks the same way: ``xb, yb = batch``); every sample must have the
      same number of fields;
    - anything else (e.g. None or an object) stays a list.

    Raises ValueError naming the shapes when arrays of different shapes are
    stacked, or when samples have different numbers of fields.
    """
    if not isinstance(batch, (list, tuple)) or len(batch) == 0:
        raise ValueError("default_collate: batch must be a non-empty list of samples")
    elem = batch[0]
    if isinstance(elem, (np.ndarray, np.generic)):
        shapes = {np.shape(b) for b in batch}
        if len(shapes) > 1:
            raise ValueError(f"default_collate: cannot stack arrays of different shapes "
                             f"{sorted(shapes)}; pass a collate_fn that pads or keeps a list")
        return np.stack([np.asarray(b) for b in batch])
    if isinstance(elem, bool):
        return np.array(batch, dtype=np.bool_)
    if isinstance(elem, numbers.Integral):
        return np.array(batch, dtype=np.int64)
    if isinstance(elem, numbers.Real):
        return np.array(batch, dtype=np.float64)
    if isinstance(elem, (str, bytes)):
        return list(batch)
    if isinstance(elem, collections.abc.Mapping):
        return {key: default_collate([b[key] for b in batch]) for key in elem}
    if isinstance(elem, (tuple, list)):
        sizes = {len(b) for b in batch}
        if len(sizes) > 1:
            raise ValueError(f"default_collate: samples have different numbers of fields "
                             f"{sorted(sizes)}")
        fields = [default_collate(list(col)) for col in zip(*batch)]
        if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # namedtuple
            return type(elem)(*fields)
        return tuple(fields) if isinstance(elem, tuple) else fields
    return list(batch)
