"""Handlers of the decoder-block ONNX operators: RotaryEmbedding (opset
23), SwiGLU (28), CausalConvWithState and LinearAttention (27).

Each is composed from yscv graph ops, so gradients reach every float
input (the caches, weights and states as well as the activations):

- RotaryEmbedding rotates pairs of features (the two halves, or even and
  odd features with ``interleaved``) by the cos / sin caches, read at
  ``position_ids`` with ``index_select``;
- SwiGLU is ``A * sigmoid(alpha * A) * B``;
- CausalConvWithState is a depthwise ``conv1d`` of the input with the past
  state (or zeros) in front; the last ``k - 1`` steps are the new state;
- LinearAttention runs its recurrence step by step (T steps of matmuls):
  ``S <- S * exp(decay_t)`` (gated rules), ``v_t <- beta_t * (v_t - S^T
  k_t)`` (delta rules), ``S <- S + k_t v_t^T``, ``o_t = scale * q_t^T S``,
  with grouped query heads reading their key/value head's state.
"""
from __future__ import annotations

import math

import numpy as np

from ._import_registry import handler

__all__ = ["check"]

_ACTIVATIONS = ("none", "silu", "swish")
_RULES = ("linear", "gated", "delta", "gated_delta")


@handler("SwiGLU")
def _swiglu(run, node):
    """``A * sigmoid(alpha * A) * B`` (A and B of one shape)."""
    g = run.g
    a, b = run.node(node.inputs[0]), run.node(node.inputs[1])
    if tuple(a.shape) != tuple(b.shape):
        raise node.fail(f"A {tuple(a.shape)} and B {tuple(b.shape)} must have one shape")
    alpha = float(node.attrs.get("alpha", 1.0))
    return [g.mul(g.mul(a, g.sigmoid(a * alpha)), b)]


def _cache(run, node, slot, pos, b, s, half):
    """A cos / sin cache as [B, S, 1, half]: read at ``pos`` when given."""
    g = run.g
    c = run.node(node.inputs[slot])
    if pos is not None:
        if len(c.shape) != 2:
            raise node.fail(f"with position_ids the cache must be [max_position, dim/2], "
                            f"got {tuple(c.shape)}")
        if pos.min(initial=0) < 0 or pos.max(initial=0) >= c.shape[0]:
            raise node.fail(f"position_ids out of range for a cache of {c.shape[0]} positions")
        c = g.reshape(g.index_select(c, 0, pos.reshape(-1)), (b, s, c.shape[1]))
    if tuple(c.shape) != (b, s, half):
        raise node.fail(f"the cache of shape {tuple(c.shape)} does not match [batch {b}, "
                        f"sequence {s}, rotary dim / 2 = {half}]")
    return g.unsqueeze(c, 2)


@handler("RotaryEmbedding")
def _rotary_embedding(run, node):
    """X [B, H, S, D] or [B, S, H * D] (``num_heads``) with its first
    ``rotary_embedding_dim`` features (0: all) rotated by the caches."""
    g = run.g
    x = run.node(node.inputs[0])
    at = node.attrs
    if len(x.shape) == 4:
        x = g.transpose(x, (0, 2, 1, 3))
    elif len(x.shape) == 3:
        heads = int(at.get("num_heads", 0))
        if heads <= 0 or x.shape[2] % heads:
            raise node.fail(f"a 3-D input {tuple(x.shape)} needs num_heads dividing its "
                            f"hidden size (num_heads={heads})")
        x = g.reshape(x, (x.shape[0], x.shape[1], heads, x.shape[2] // heads))
    else:
        raise node.fail(f"the input must be 3-D or 4-D, got shape {tuple(x.shape)}")
    b, s, _, d = x.shape
    rd = int(at.get("rotary_embedding_dim", 0)) or d
    if rd > d or rd % 2:
        raise node.fail(f"rotary_embedding_dim={rd} must be even and at most the head size {d}")
    pos = (np.asarray(run.arr(node.inputs[3])).astype(np.int64)
           if run.has(node, 3) else None)
    cos = _cache(run, node, 1, pos, b, s, rd // 2)
    sin = _cache(run, node, 2, pos, b, s, rd // 2)
    rot = g.narrow(x, 3, 0, rd) if rd < d else x
    inter = bool(at.get("interleaved", 0))
    if inter:
        x1, x2 = rot[..., 0::2], rot[..., 1::2]
    else:
        x1, x2 = g.narrow(rot, 3, 0, rd // 2), g.narrow(rot, 3, rd // 2, rd // 2)
    real = g.sub(g.mul(cos, x1), g.mul(sin, x2))
    imag = g.add(g.mul(sin, x1), g.mul(cos, x2))
    if inter:
        rot = g.reshape(g.stack([real, imag], -1), (b, s, x.shape[2], rd))
    else:
        rot = g.cat([real, imag], 3)
    y = g.cat([rot, g.narrow(x, 3, rd, d - rd)], 3) if rd < d else rot
    shape = run.shape(node.inputs[0])
    if len(shape) == 3:
        return [g.reshape(y, tuple(shape))]
    return [g.transpose(y, (0, 2, 1, 3))]


@handler("CausalConvWithState")
def _causal_conv_with_state(run, node):
    """Depthwise causal conv of input [B, C, L] with weight [C, 1, k] (the
    past state [B, C, k - 1] or zeros in front), bias, optional SiLU;
    outputs the result [B, C, L] and the new state [B, C, k - 1]."""
    g = run.g
    x, w = run.node(node.inputs[0]), run.node(node.inputs[1])
    if len(x.shape) != 3 or len(w.shape) != 3 or w.shape[0] != x.shape[1] or w.shape[1] != 1:
        raise node.fail(f"input {tuple(x.shape)} and weight {tuple(w.shape)} must be "
                        "[B, C, L] and [C, 1, k]")
    b, c, length = x.shape
    k = w.shape[2]
    if run.has(node, 3):
        past = run.node(node.inputs[3])
        if tuple(past.shape) != (b, c, k - 1):
            raise node.fail(f"past_state {tuple(past.shape)} must be [{b}, {c}, {k - 1}]")
        padded = g.cat([past, x], 2) if k > 1 else x
    else:
        padded = g.pad(x, [(0, 0), (0, 0), (k - 1, 0)]) if k > 1 else x
    bias = run.opt_node(node, 2)
    y = g.conv1d(g.transpose(padded, (0, 2, 1)), g.transpose(w, (2, 1, 0)), bias, groups=c)
    if node.attrs.get("activation", "none") in ("silu", "swish"):
        y = g.silu(y)
    state = (g.narrow(padded, 2, length, k - 1) if k > 1
             else np.zeros((b, c, 0), g.dtype))
    return [g.transpose(y, (0, 2, 1)), state]


def _heads(g, x, heads, node, name):
    """[B, T, H * D] -> [B, H, T, D]."""
    if len(x.shape) != 3 or x.shape[2] % heads:
        raise node.fail(f"{name} of shape {tuple(x.shape)} is not [B, T, {heads} * D]")
    b, t, hd = x.shape
    return g.transpose(g.reshape(x, (b, t, heads, hd // heads)), (0, 2, 1, 3))


@handler("LinearAttention")
def _linear_attention(run, node):
    """The linear-attention recurrence over T steps; outputs [B, T, Hq * Dv]
    and the final state [B, Hkv, Dk, Dv]."""
    g, at = run.g, node.attrs
    hq, hkv = int(at["q_num_heads"]), int(at["kv_num_heads"])
    rule = at.get("update_rule", "gated_delta")
    q = _heads(g, run.node(node.inputs[0]), hq, node, "query")
    k = _heads(g, run.node(node.inputs[1]), hkv, node, "key")
    v = _heads(g, run.node(node.inputs[2]), hkv, node, "value")
    b, _, t, dk = q.shape
    dv = v.shape[3]
    if tuple(k.shape) != (b, hkv, t, dk) or tuple(v.shape[:3]) != (b, hkv, t):
        raise node.fail(f"query {tuple(q.shape)}, key {tuple(k.shape)} and value "
                        f"{tuple(v.shape)} (as [B, H, T, D]) do not match")
    if run.has(node, 3):
        state = run.node(node.inputs[3])
        if tuple(state.shape) != (b, hkv, dk, dv):
            raise node.fail(f"past_state {tuple(state.shape)} must be [{b}, {hkv}, {dk}, {dv}]")
    else:
        state = g.constant(np.zeros((b, hkv, dk, dv), g.dtype))
    decay = beta = None
    if rule in ("gated", "gated_delta"):
        dec = run.node(node.inputs[4])
        if len(dec.shape) != 3 or dec.shape[2] not in (hkv, hkv * dk):
            raise node.fail(f"decay {tuple(dec.shape)} must be [B, T, {hkv}] or "
                            f"[B, T, {hkv * dk}]")
        decay = g.exp(_heads(g, dec, hkv, node, "decay"))          # [B, H, T, 1 or dk]
    if rule in ("delta", "gated_delta"):
        bt = run.node(node.inputs[5])
        if len(bt.shape) != 3 or bt.shape[2] not in (hkv, 1):
            raise node.fail(f"beta {tuple(bt.shape)} must be [B, T, {hkv}] or [B, T, 1]")
        beta = _heads(g, bt, bt.shape[2], node, "beta")           # [B, H or 1, T, 1]
    scale = float(at.get("scale", 0.0)) or 1.0 / math.sqrt(dk)
    reps = np.repeat(np.arange(hkv), hq // hkv)
    outs = []
    for i in range(t):
        k_t, v_t = g.select(k, 2, i), g.select(v, 2, i)           # [B, H, dk], [B, H, dv]
        if decay is not None:
            state = g.mul(state, g.unsqueeze(g.select(decay, 2, i), -1))
        if beta is not None:
            got = g.squeeze(g.matmul(g.unsqueeze(k_t, 2), state), 2)
            v_t = g.mul(g.select(beta, 2, i), g.sub(v_t, got))
        state = g.add(state, g.mul(g.unsqueeze(k_t, -1), g.unsqueeze(v_t, 2)))
        read = state if hq == hkv else g.index_select(state, 1, reps)
        o = g.squeeze(g.matmul(g.unsqueeze(g.select(q, 2, i), 2), read), 2)
        outs.append(o * scale)
    y = g.transpose(g.stack(outs, 2), (0, 2, 1, 3))
    return [g.reshape(y, (b, t, hq * dv)), state]


def check(node, np_dtype_of) -> None:
    """Load-time refusals of the attribute values these handlers do not implement."""
    at, fail = node.attrs, node.fail
    if node.op == "CausalConvWithState" and at.get("activation", "none") not in _ACTIVATIONS:
        raise fail(f"activation={at['activation']!r} is not supported (none, silu or swish)")
    if node.op != "LinearAttention":
        return
    rule = at.get("update_rule", "gated_delta")
    if rule not in _RULES:
        raise fail(f"update_rule={rule!r} is not supported ({', '.join(_RULES)})")
    hq, hkv = int(at.get("q_num_heads", 0)), int(at.get("kv_num_heads", 0))
    if hq <= 0 or hkv <= 0 or hq % hkv:
        raise fail(f"q_num_heads={hq} must be a positive multiple of kv_num_heads={hkv}")
    has = lambda i: len(node.inputs) > i and node.inputs[i] != ""   # noqa: E731
    gated, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
    if has(4) != gated:
        raise fail(f"update_rule={rule!r} {'needs' if gated else 'takes no'} the decay input")
    if has(5) != delta:
        raise fail(f"update_rule={rule!r} {'needs' if delta else 'takes no'} the beta input")
