"""Handlers of ONNX's random generators: RandomUniform, RandomNormal,
RandomUniformLike, RandomNormalLike and Bernoulli.

Draws come from yscv's library generator (`yscv.random`, so
``yscv.manual_seed`` makes them reproducible), or, with the ``seed``
attribute, from a NumPy generator seeded with it at each call (the same
draws every call). They are static arrays of ``dtype`` (default: float, or
the input's type for the ``Like`` forms and Bernoulli): a sample has no
gradient.
"""
from __future__ import annotations

import numpy as np

from .. import random as yrandom
from ._import_registry import handler

__all__ = ["check"]

_OPS = ("RandomUniform", "RandomNormal", "RandomUniformLike", "RandomNormalLike", "Bernoulli")


def _draw(node, fn):
    seed = node.attrs.get("seed")
    if seed is not None:
        return fn(np.random.default_rng(int(seed)))
    return yrandom.draw(fn)


def _out_dtype(run, node):
    """The output type: ``dtype``, else the input's (Like forms, Bernoulli), else float32."""
    if "_np_dtype" in node.attrs:
        return node.attrs["_np_dtype"]
    if node.inputs and node.inputs[0]:
        a = run.raw(node.inputs[0])
        return a.dtype if isinstance(a, np.ndarray) else np.dtype(run.g.dtype)
    return np.dtype(np.float32)


def _shape(run, node):
    if node.op in ("RandomUniform", "RandomNormal"):
        return tuple(int(s) for s in node.attrs["shape"])
    return tuple(run.shape(node.inputs[0]))


@handler("RandomUniform", "RandomUniformLike")
def _random_uniform(run, node):
    """Uniform draws in [low, high) (defaults 0, 1) of the shape given."""
    lo, hi = float(node.attrs.get("low", 0.0)), float(node.attrs.get("high", 1.0))
    shape = _shape(run, node)
    return [_draw(node, lambda r: r.uniform(lo, hi, shape)).astype(_out_dtype(run, node))]


@handler("RandomNormal", "RandomNormalLike")
def _random_normal(run, node):
    """Normal draws of ``mean`` and ``scale`` (defaults 0, 1) of the shape given."""
    mean, scale = float(node.attrs.get("mean", 0.0)), float(node.attrs.get("scale", 1.0))
    shape = _shape(run, node)
    return [_draw(node, lambda r: r.normal(mean, scale, shape)).astype(_out_dtype(run, node))]


@handler("Bernoulli")
def _bernoulli(run, node):
    """1 with the probability the input gives per element, else 0."""
    p = np.asarray(run.arr(node.inputs[0]), np.float64)
    if p.size and (np.nanmin(p) < 0 or np.nanmax(p) > 1 or np.isnan(p).any()):
        raise node.fail("the probabilities must lie in [0, 1]")
    return [(_draw(node, lambda r: r.uniform(0.0, 1.0, p.shape)) < p).astype(
        _out_dtype(run, node))]


def check(node, np_dtype_of) -> None:
    """Load-time refusals of the attribute values these handlers do not implement."""
    if node.op not in _OPS or "dtype" not in node.attrs:
        return
    dt = np.dtype(np_dtype_of(int(node.attrs["dtype"])))
    if dt.kind not in "iufb":
        raise node.fail(f"dtype={node.attrs['dtype']} ({dt}) is not supported (a boolean, "
                        "integer or float type)")
    node.attrs["_np_dtype"] = dt
