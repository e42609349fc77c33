"""A `yscv.nn.Module` as a function of its parameters and buffers:
`functional_call` and `stack_module_state` (``torch.func``'s)."""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..engine.graph import Graph
from ..node import NodeId
from . import pytree

__all__ = ["functional_call", "stack_module_state"]


def _merge(params_and_buffers, fname: str):
    """``(values, sources)``: one dict of every given key, and the dict each
    came from (a key in two dicts is a ValueError, as torch)."""
    if isinstance(params_and_buffers, Mapping):
        dicts = (params_and_buffers,)
    elif isinstance(params_and_buffers, (tuple, list)):
        dicts = tuple(params_and_buffers)
        bad = [type(d).__name__ for d in dicts if not isinstance(d, Mapping)]
        if bad:
            raise TypeError(f"{fname}: params_and_buffers must be a dict or a tuple of dicts, "
                            f"got a tuple holding {', '.join(bad)}")
    else:
        raise TypeError(f"{fname}: params_and_buffers must be a dict or a tuple of dicts, "
                        f"got {type(params_and_buffers).__name__}")
    values, sources = {}, {}
    for d in dicts:
        for k, v in d.items():
            if k in values:
                raise ValueError(f"{fname}: the key {k!r} is in more than one of the dicts; "
                                 "which value to use would be ambiguous")
            values[k], sources[k] = v, d
    return values, sources


def _module_dtype(module, values, args) -> np.dtype:
    """The dtype of the graph the arrays form builds: float64 if any floating
    state the call uses (given values, else the module's own) is float64,
    float32 if it is all float32; the arguments' dtype for a stateless module."""
    from ..nn.parameter import Parameter
    from ..nn.substitute import state_entries

    found = set()
    for key, _, _, _, obj in state_entries(module):
        v = values.get(key, obj)
        if type(v) is NodeId:
            continue
        dt = np.asarray(v.data if isinstance(v, Parameter) else v).dtype
        if dt.kind == "f":
            found.add(dt)
    if found:
        return np.dtype(np.float64) if np.dtype(np.float64) in found else np.dtype(np.float32)
    for a in pytree.flatten((args, values))[0]:
        if isinstance(a, (np.ndarray, np.generic)) and a.dtype == np.float64:
            return np.dtype(np.float64)
    return np.dtype(np.float32)


def _enter(g, tree):
    """Floating arrays of ``tree`` (a pytree) as constants of ``g``; every
    other leaf (integer labels, None, flags) as it is."""
    def enter(x):
        if isinstance(x, (np.ndarray, np.generic)) and x.dtype.kind == "f":
            return g.constant(x)
        return x
    return pytree.tree_map(enter, tree)


def functional_call(module, params_and_buffers, args, kwargs=None, *, strict: bool = False):
    """``module(*args, **kwargs)`` with the given values in place of the
    module's parameters and buffers, as ``torch.func.functional_call``.

    Args:
        module: a `yscv.nn.Module`.
        params_and_buffers: a dict ``{state-dict key: value}`` (the keys of
            ``module.state_dict()``, non-persistent buffers too), or a tuple of
            such dicts (merged; a key in two of them is a ValueError). A key
            not given keeps the module's own parameter or buffer; an unknown
            key is a ValueError naming it. Tied keys (one Parameter or
            module under two paths) take the value given for either; two
            different values for them are a ValueError.
        args: ``(g, *inputs)`` to run on the graph ``g``: the given values
            may be NodeIds of ``g`` (gradients flow to them: the argument of
            `grad`, say) or arrays (constants); the result is the module's
            output, NodeIds of ``g``. Or ``(*inputs)`` without a graph: a
            fresh graph in the state's float dtype, the output as arrays. A
            single non-tuple value is one input. Floating input arrays
            (also in ``kwargs`` and in tuples, lists and dicts of inputs)
            enter the graph as constants; integer ones (labels, indices),
            NodeIds and other values reach ``forward`` as they are.
        kwargs: keyword arguments of ``forward``.
        strict: every parameter and buffer must be given (ValueError otherwise).

    The module is untouched afterwards, also when the call raises: its
    parameters (``Parameter.data``, ``Parameter.grad``), buffers and
    training flags are as before. Buffers behave as in torch: the layer
    works on the given array itself, so batch norm in training mode updates
    the running statistics (and ``num_batches_tracked``) given in the dict
    in place, and the module's own when they are not given; a buffer the
    module reassigns is written back into the dict that gave it. Layers
    must bind parameters with ``self.param(g, name)`` (or
    `yscv.nn.bind_param`), as every `yscv.nn` layer and models loaded with
    `yscv.onnx.load` do; one that calls ``g.param`` itself is a ValueError
    naming the keys. Parameters are substituted per thread; buffers given in
    the dict are swapped on the module for the call, so two threads must
    not call one module with given buffers at once (as in torch).

    Example: the gradient of a loss with respect to a dict of parameters,
    ``grad(lambda g, p, x, y: g.cross_entropy(functional_call(model, p, (g, x)), y))(params, X, Y)``.
    """
    from ..nn.module import Module
    from ..nn.substitute import substituted

    fname = "functional_call"
    if not isinstance(module, Module):
        raise TypeError(f"{fname}: module must be a yscv.nn.Module, got {type(module).__name__}")
    values, sources = _merge(params_and_buffers, fname)
    if not isinstance(args, tuple):
        args = (args,)
    if kwargs is None:
        kwargs = {}
    elif not isinstance(kwargs, Mapping):
        raise TypeError(f"{fname}: kwargs must be a dict, got {type(kwargs).__name__}")
    graph_form = bool(args) and isinstance(args[0], Graph)
    if graph_form:
        g, args = args[0], args[1:]
    else:
        g = Graph(dtype=_module_dtype(module, values, (args, kwargs)))
    inputs, kw = _enter(g, args), _enter(g, dict(kwargs))
    start = len(g)
    with substituted(module, values, g, strict, fname) as call:
        out = module(g, *inputs, **kw)
    for k, v in call.reassigned.items():
        sources[k][k] = v
    _check_bindings(g, start, call.parameters, fname)
    return out if graph_form else pytree.to_arrays(out)


def _check_bindings(g, start: int, parameters: dict, fname: str) -> None:
    """ValueError if a layer bound a substituted parameter with ``g.param``
    itself (not ``self.param(g, name)``) since node ``start``: it computed
    with its own values, not the given ones."""
    direct = [k for i, p in g._param_of.items() if i >= start
              for k in parameters.get(id(p), ())]
    if direct:
        raise ValueError(
            f"{fname}: a layer bound the parameter(s) {direct} with g.param itself, so it "
            "computed with its own values; bind parameters with self.param(g, name) (or "
            "yscv.nn.bind_param) for functional_call to substitute them")


def stack_module_state(models):
    """``(params, buffers)``: dicts ``{key: [M, *shape] array}`` stacking the
    parameters and buffers (``named_parameters`` and ``named_buffers``
    keys) of ``M`` models of one class, as ``torch.func.stack_module_state``:
    fresh copies, for ``functional_call`` per model or an ensemble trained
    as one batch.

    ValueError when there are no models, or they differ in class, training
    mode, keys, shapes, dtypes or ``requires_grad`` (naming what differs).
    """
    from ..nn.module import Module

    fname = "stack_module_state"
    models = list(models)
    if not models:
        raise ValueError(f"{fname}: expected at least one model, got none")
    bad = [type(m).__name__ for m in models if not isinstance(m, Module)]
    if bad:
        raise TypeError(f"{fname}: models must be yscv.nn.Modules, got {', '.join(bad)}")
    first = models[0]
    for i, m in enumerate(models[1:], 1):
        if type(m) is not type(first):
            raise ValueError(f"{fname}: model {i} is a {type(m).__name__}, model 0 a "
                             f"{type(first).__name__}; all models must be of one class")
        if m.training != first.training:
            raise ValueError(f"{fname}: model {i} is in {'training' if m.training else 'eval'} "
                             f"mode, model 0 in {'training' if first.training else 'eval'} mode")
    params = [dict(m.named_parameters()) for m in models]
    for i, d in enumerate(params[1:], 1):
        if [k for k, p in d.items()] != [k for k in params[0]]:
            _differ(fname, "parameters", params[0], d, i)
        for k, p in d.items():
            if p.requires_grad != params[0][k].requires_grad:
                raise ValueError(f"{fname}: {k!r} has requires_grad={p.requires_grad} in "
                                 f"model {i}, {params[0][k].requires_grad} in model 0")
    buffers = [dict(m.named_buffers()) for m in models]
    for i, d in enumerate(buffers[1:], 1):
        if list(d) != list(buffers[0]):
            _differ(fname, "buffers", buffers[0], d, i)
    return (_stack(fname, [{k: p.data for k, p in d.items()} for d in params]),
            _stack(fname, buffers))


def _differ(fname, what, d0, d, i):
    missing = [k for k in d0 if k not in d]
    extra = [k for k in d if k not in d0]
    detail = []
    if missing:
        detail.append(f"lacks {missing}")
    if extra:
        detail.append(f"has {extra} that model 0 lacks")
    if not detail:
        detail.append(f"orders them {list(d)}, model 0 {list(d0)}")
    raise ValueError(f"{fname}: model {i}'s {what} differ from model 0's: " + "; ".join(detail))


def _stack(fname, dicts):
    out = {}
    for k, a0 in dicts[0].items():
        for i, d in enumerate(dicts[1:], 1):
            if d[k].shape != a0.shape or d[k].dtype != a0.dtype:
                raise ValueError(f"{fname}: {k!r} is {d[k].dtype}{list(d[k].shape)} in model {i}, "
                                 f"{a0.dtype}{list(a0.shape)} in model 0")
        out[k] = np.stack([d[k] for d in dicts])
    return out
