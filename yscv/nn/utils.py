"""Gradient clipping on parameters: ``clip_grad_norm_`` and ``clip_grad_value_``;
flattening parameters: ``parameters_to_vector`` and ``vector_to_parameters``.

As ``torch.nn.utils``: both act on each ``Parameter.grad`` IN PLACE (the
array object an optimizer reads is modified, not replaced), skip parameters
whose ``grad`` is None, and take an iterable of Parameters or one Parameter.
Use them between ``g.backward(loss)`` and ``opt.step()``::

    g.backward(loss)
    yscv.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
"""
from __future__ import annotations

import numpy as np

from ..engine.clipping import check_clip_args, total_grad_norm
from .parameter import Parameter

__all__ = ["clip_grad_norm_", "clip_grad_value_", "parameters_to_vector",
           "vector_to_parameters"]


def _grads_of(params, fname: str) -> list:
    """The distinct non-None ``.grad`` arrays of ``params``."""
    if isinstance(params, Parameter):
        params = [params]
    try:
        params = list(params)
    except TypeError:
        raise TypeError(f"{fname}: params must be a Parameter or an iterable of Parameters, "
                        f"got {type(params).__name__}") from None
    grads = []
    seen = set()
    for k, p in enumerate(params):
        if not isinstance(p, Parameter):
            raise TypeError(f"{fname}: params[{k}] must be a Parameter, got {type(p).__name__}")
        gr = p.grad
        if gr is None or id(gr) in seen:  # one array shared twice: scale it once
            continue
        if not isinstance(gr, np.ndarray) or not gr.flags.writeable:
            raise ValueError(f"{fname}: params[{k}].grad is not a writeable array, so it "
                             "cannot be changed in place")
        seen.add(id(gr))
        grads.append(gr)
    return grads


def clip_grad_norm_(params, max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False) -> float:
    """Scale the gradients of ``params`` so that their joint norm is at most
    ``max_norm``; returns the total norm before clipping.

    The total norm is the ``norm_type``-norm (``float("inf")``: the largest
    absolute value) of every gradient element taken together, accumulated in
    float64. Every gradient is multiplied by ``min(1, max_norm / (total +
    1e-6))`` in its own dtype. A NaN or infinite total raises ``ValueError``
    with ``error_if_nonfinite=True``; otherwise, as PyTorch, the gradients are
    scaled by the resulting factor (NaN, or 0 for an infinite norm).

    Args:
        params: a Parameter or an iterable of Parameters ([shape] each).
        max_norm: the largest allowed total norm (>= 0).
        norm_type: p of the p-norm (> 0), or ``float("inf")``.
        error_if_nonfinite: raise instead of scaling by a non-finite factor.
    """
    check_clip_args("clip_grad_norm_", "max_norm", max_norm, norm_type)
    grads = _grads_of(params, "clip_grad_norm_")
    total = total_grad_norm(grads, float(norm_type))
    if error_if_nonfinite and not abs(total) < float("inf"):
        raise ValueError(
            f"clip_grad_norm_: the total norm of order {float(norm_type)} of the gradients is "
            f"{total}, so it cannot be clipped; pass error_if_nonfinite=False to scale anyway")
    coef = max_norm / (total + 1e-6)
    if not coef >= 1.0:  # a NaN factor scales too, as PyTorch's clamp(max=1) does
        for gr in grads:
            gr *= gr.dtype.type(coef)
    return total


def clip_grad_value_(params, clip_value: float) -> None:
    """Clamp every gradient element of ``params`` to ``[-clip_value, clip_value]``
    in place.

    Args:
        params: a Parameter or an iterable of Parameters.
        clip_value: the largest allowed absolute value (>= 0).
    """
    check_clip_args("clip_grad_value_", "clip_value", clip_value)
    for gr in _grads_of(params, "clip_grad_value_"):
        v = gr.dtype.type(clip_value)
        np.clip(gr, -v, v, out=gr)


def _param_list(params, fname: str) -> list:
    if isinstance(params, Parameter):
        return [params]
    try:
        params = list(params)
    except TypeError:
        raise TypeError(f"{fname}: parameters must be a Parameter or an iterable of "
                        f"Parameters, got {type(params).__name__}") from None
    for k, p in enumerate(params):
        if not isinstance(p, Parameter):
            raise TypeError(f"{fname}: parameters[{k}] must be a Parameter, "
                            f"got {type(p).__name__}")
    return params


def parameters_to_vector(parameters) -> np.ndarray:
    """Every parameter's values flattened (C order) and concatenated into one
    new 1-d array, as ``torch.nn.utils.parameters_to_vector`` (a copy: writing
    to it changes no parameter).

    Args:
        parameters: a Parameter or an iterable of Parameters (of one dtype).

    Returns:
        [sum of the parameters' sizes], the parameters' dtype.
    """
    params = _param_list(parameters, "parameters_to_vector")
    dtypes = {p.data.dtype for p in params}
    if len(dtypes) > 1:
        raise TypeError(f"parameters_to_vector: the parameters have several dtypes "
                        f"{sorted(str(d) for d in dtypes)}; convert them to one")
    if not params:
        return np.zeros(0, np.float32)
    return np.concatenate([p.data.ravel() for p in params])


def vector_to_parameters(vec, parameters) -> None:
    """Copy consecutive slices of ``vec`` into the parameters' values, in
    order, as ``torch.nn.utils.vector_to_parameters``. The copy is in place
    (``p.data[...] = ...``), so graphs bound to the parameters and optimizers
    see the new values; the values are cast to each parameter's dtype.

    Args:
        vec: a 1-d array of exactly the parameters' total size (PyTorch
            ignores a longer one; here any other length is a ValueError).
        parameters: a Parameter or an iterable of Parameters.
    """
    params = _param_list(parameters, "vector_to_parameters")
    if not isinstance(vec, np.ndarray):
        raise TypeError(f"vector_to_parameters: vec must be a NumPy array, "
                        f"got {type(vec).__name__}")
    if vec.ndim != 1:
        raise ValueError(f"vector_to_parameters: vec must be 1-d, got shape {vec.shape}")
    total = sum(p.data.size for p in params)
    if vec.size != total:
        raise ValueError(f"vector_to_parameters: vec has {vec.size} elements, the parameters "
                         f"hold {total}")
    start = 0
    for p in params:
        n = p.data.size
        p.data[...] = vec[start:start + n].reshape(p.data.shape)
        start += n
