"""Handlers of ONNX's control-flow operators: If, Loop and Scan.

Their bodies (graph attributes, decoded at load as `Subgraph`) are replayed
on the same yscv Graph by `yscv.onnx._import_run.run_body`, unrolled: If
runs the branch its condition selects, Loop and Scan run the body once per
iteration with the carried values of the previous one. Conditions and trip
counts are read by value at call (they are static or integer values in
ONNX), so the recorded graph is the unrolled computation and gradients
flow through every iteration to the initial states, the scanned inputs
and whatever the bodies read from outside.

Scan before opset 9 has a leading batch axis on every input (and an
optional ``sequence_lens``, which must equal the sequence length): each
batch entry is scanned on its own and the results stacked.
"""
from __future__ import annotations

import numpy as np

from ._import_registry import handler
from ._import_run import run_body

__all__ = ["check"]

#: iterations a Loop without a trip count may run before it is refused
MAX_ITERATIONS = 1_000_000


def _flag(run, name) -> bool:
    v = np.asarray(run.arr(name)).reshape(-1)
    if v.size != 1:
        raise ValueError(f"a condition must hold one element, got {v.size}")
    return bool(v[0])


def _node_of(run, v):
    if isinstance(v, np.ndarray):
        return run.g.constant(v.astype(run.g.dtype, copy=False))
    return v


def _take(run, v, axis, i):
    if isinstance(v, np.ndarray):
        return np.take(v, i, axis=axis)
    return run.g.select(v, axis, i)


def _stack(run, items, axis):
    """Per-iteration values stacked along a new ``axis``."""
    if all(isinstance(v, np.ndarray) for v in items):
        return np.stack(items, axis)
    if any(isinstance(v, np.ndarray) and v.dtype.kind != "f" for v in items):
        raise ValueError("a scan output mixes integer values and float data")
    return run.g.stack([_node_of(run, v) for v in items], axis)


@handler("If")
def _if(run, node):
    """The outputs of ``then_branch`` or ``else_branch``, by the condition's value."""
    branch = node.attrs["then_branch" if _flag(run, node.inputs[0]) else "else_branch"]
    outs = run_body(run, branch, {})
    if len(outs) != len(node.outputs):
        raise node.fail(f"the branch {branch.name!r} gives {len(outs)} outputs for "
                        f"{len(node.outputs)}")
    return outs


@handler("Loop")
def _loop(run, node):
    """The body run while the iteration is below the trip count ``M`` and
    the condition holds; outputs the final carried values and the scan
    outputs stacked along a new first axis."""
    body = node.attrs["body"]
    trip = int(np.asarray(run.arr(node.inputs[0])).reshape(-1)[0]) if run.has(node, 0) else None
    cond = _flag(run, node.inputs[1]) if run.has(node, 1) else True
    carried = [run.raw(n) for n in node.inputs[2:]]
    n_carried = len(carried)
    if len(body.inputs) != 2 + n_carried or len(body.outputs) < 1 + n_carried:
        raise node.fail(f"the body takes {len(body.inputs)} inputs and gives "
                        f"{len(body.outputs)} outputs for {n_carried} carried values")
    scans, i = [], 0
    while (trip is None or i < trip) and cond:
        if i >= MAX_ITERATIONS:
            raise node.fail(f"the loop ran {MAX_ITERATIONS} iterations without stopping")
        bound = {body.inputs[0]: np.array(i, np.int64), body.inputs[1]: np.array(cond)}
        bound.update(zip(body.inputs[2:], carried))
        outs = run_body(run, body, bound)
        cond = bool(np.asarray(outs[0] if isinstance(outs[0], np.ndarray)
                               else run.g.value(outs[0])).reshape(-1)[0])
        carried = outs[1:1 + n_carried]
        scans.append(outs[1 + n_carried:])
        i += 1
    k = len(body.outputs) - 1 - n_carried
    if k and not scans:
        raise node.fail("the loop ran no iteration: its scan outputs have no element type "
                        "or shape to take")
    stacked = [_stack(run, [s[j] for s in scans], 0) for j in range(k)]
    return list(carried) + stacked


def _scan_once(run, node, body, states, scans, at):
    """Scan (opset 9 form) of the values ``states`` and ``scans``."""
    m, n = len(scans), len(states)
    in_axes = [int(a) for a in at.get("scan_input_axes") or [0] * m]
    in_dirs = [int(a) for a in at.get("scan_input_directions") or [0] * m]
    k = len(body.outputs) - n
    out_axes = [int(a) for a in at.get("scan_output_axes") or [0] * k]
    out_dirs = [int(a) for a in at.get("scan_output_directions") or [0] * k]
    ranks = [len(v.shape) for v in scans]
    in_axes = [a % r for a, r in zip(in_axes, ranks)]
    lengths = {v.shape[a] for v, a in zip(scans, in_axes)}
    if len(lengths) != 1:
        raise node.fail(f"the scanned inputs have different lengths {sorted(lengths)}")
    steps = lengths.pop()
    outs = []
    for t in range(steps):
        bound = dict(zip(body.inputs[:n], states))
        for j, (v, a, d) in enumerate(zip(scans, in_axes, in_dirs)):
            bound[body.inputs[n + j]] = _take(run, v, a, steps - 1 - t if d else t)
        res = run_body(run, body, bound)
        states = res[:n]
        outs.append(res[n:])
    if k and not outs:
        raise node.fail("the scan has no step: its outputs have no shape to take")
    stacked = []
    for j in range(k):
        items = [o[j] for o in outs]
        if out_dirs[j]:
            items = items[::-1]
        rank = len(items[0].shape) + 1
        stacked.append(_stack(run, items, out_axes[j] % rank))
    return list(states), stacked


@handler("Scan")
def _scan(run, node):
    """The body run once per slice of the scanned inputs (along
    ``scan_input_axes``, forward or reverse), carrying the states; outputs
    the final states and the per-step outputs stacked along
    ``scan_output_axes`` (``scan_output_directions`` 1: last step first)."""
    at, body = node.attrs, node.attrs["body"]
    m = int(at["num_scan_inputs"])
    if run.m.opset >= 9:
        values = [run.raw(x) if run.is_static(x) else run.node(x) for x in node.inputs]
        n = len(values) - m
        states, scans = _scan_once(run, node, body, values[:n], values[n:], at)
        return states + scans
    values = [run.raw(x) if run.is_static(x) else run.node(x) for x in node.inputs[1:]]
    n = len(values) - m
    batch = values[0].shape[0]
    steps = values[n].shape[1]
    if run.has(node, 0):
        lens = np.asarray(run.arr(node.inputs[0])).reshape(-1)
        if np.any(lens != steps):
            raise node.fail(f"sequence_lens {lens.tolist()} must equal the sequence length "
                            f"{steps} (shorter sequences are not supported)")
    attrs = {"scan_input_directions": at.get("directions")}
    per = [_scan_once(run, node, body, [_take(run, v, 0, b) for v in values[:n]],
                      [_take(run, v, 0, b) for v in values[n:]], attrs) for b in range(batch)]
    states = [_stack(run, [p[0][j] for p in per], 0) for j in range(n)]
    scans = [_stack(run, [p[1][j] for p in per], 0) for j in range(len(per[0][1]))]
    return states + scans


def check(node, np_dtype_of) -> None:
    """Load-time refusals of what these handlers do not implement."""
    if node.op == "Scan" and node.attrs.get("scan_input_axes") is not None \
            and len(node.attrs["scan_input_axes"]) != int(node.attrs["num_scan_inputs"]):
        raise node.fail(f"scan_input_axes {node.attrs['scan_input_axes']} must have "
                        f"num_scan_inputs={node.attrs['num_scan_inputs']} entries")
