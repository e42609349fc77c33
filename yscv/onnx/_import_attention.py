"""The handler of ONNX's Attention (opset 23/24) on yscv's graph ops.

Q [B, Hq, Sq, D], K [B, Hkv, Sk, D], V [B, Hkv, Sk, Dv] (or 3-D
[B, S, heads * D] with ``q_num_heads`` / ``kv_num_heads``, split into
heads and merged back). ``past_key`` / ``past_value`` are concatenated in
front of K / V (outputs 1 and 2, the present cache). Grouped heads
(Hq = r * Hkv) repeat each K/V head r times. The masks (``attn_mask`` bool
or additive, padded with blocked keys up to the total length; ``is_causal``
bottom-right aligned after the past; ``nonpad_kv_seqlen``) become one
additive -inf/0 bias, evaluated with NumPy (no gradient). Without
``softcap`` or the qk_matmul_output output the product runs on
``g.scaled_dot_product_attention``; otherwise it is composed (matmul,
tanh, softmax, matmul). A query row with every key blocked gives zeros, as
ONNX specifies.

FlexAttention (domain ``ai.onnx.preview``): the same product with its
``score_mod`` / ``prob_mod`` graph attributes applied to the scores and the
probabilities.
"""
from __future__ import annotations

import numpy as np

from ._import_registry import handler
from ._import_run import run_body


def _split_heads(g, x, heads, name, node):
    b, s, hidden = x.shape
    if heads <= 0 or hidden % heads:
        raise node.fail(f"{name} hidden size {hidden} is not a multiple of {heads} heads")
    return g.transpose(g.reshape(x, (b, s, heads, hidden // heads)), (0, 2, 1, 3))


def _repeat_heads(g, x, reps):
    """[B, H, S, D] -> [B, H * reps, S, D], each head repeated in place."""
    if reps == 1:
        return x
    b, h, s, d = x.shape
    x = g.expand(g.unsqueeze(x, 2), (b, h, reps, s, d))
    return g.reshape(x, (b, h * reps, s, d))


def _bias(run, node, sq, sk, past, batch, dtype):
    """The additive mask [.., Sq, Sk] (None when nothing is masked)."""
    at = node.attrs
    bias = None
    if run.has(node, 3):
        m = np.asarray(run.arr(node.inputs[3]))
        if m.shape[-1] < sk:
            pad = [(0, 0)] * (m.ndim - 1) + [(0, sk - m.shape[-1])]
            m = np.pad(m, pad, constant_values=False if m.dtype == bool else -np.inf)
        bias = np.where(m, 0.0, -np.inf) if m.dtype == bool else m.astype(np.float64)
    nonpad = None
    if len(node.inputs) > 6 and node.inputs[6]:
        nonpad = np.asarray(run.arr(node.inputs[6])).reshape(-1).astype(np.int64)
    if at.get("is_causal", 0):
        i = np.arange(sq)[:, None]
        j = np.arange(sk)[None, :]
        if nonpad is not None and past == 0:
            allowed = j[None] <= i[None] + (nonpad - sq)[:, None, None]
            causal = np.where(allowed, 0.0, -np.inf)[:, None]
        else:
            causal = np.where(j <= i + past, 0.0, -np.inf)
        bias = causal if bias is None else bias + causal
    left = int(at.get("left_window_size", -1))
    right = int(at.get("right_window_size", -1))
    if left >= 0 or right >= 0:
        i = np.arange(sq)[:, None]
        j = np.arange(sk)[None, :]
        if nonpad is not None and past == 0:
            diff = (i[None] + (nonpad - sq)[:, None, None]) - j[None]
        else:
            diff = i + past - j
        allowed = np.ones(diff.shape, bool)
        if left >= 0:
            allowed &= diff <= left
        if right >= 0:
            allowed &= -diff <= right
        window = np.where(allowed, 0.0, -np.inf)
        if window.ndim == 3:
            window = window[:, None]
        bias = window if bias is None else bias + window
    if nonpad is not None:
        pad = np.where(np.arange(sk)[None, :] < nonpad[:, None], 0.0, -np.inf)
        pad = pad.reshape(batch, 1, 1, sk)
        bias = pad if bias is None else bias + pad
    return None if bias is None else bias.astype(dtype)


@handler("Attention")
def _attention(run, node):
    g = run.g
    at = node.attrs
    q, k, v = (run.node(n) for n in node.inputs[:3])
    three_d = len(q.shape) == 3
    if three_d:
        q = _split_heads(g, q, int(at.get("q_num_heads", 0)), "Q", node)
        k = _split_heads(g, k, int(at.get("kv_num_heads", 0)), "K", node)
        v = _split_heads(g, v, int(at.get("kv_num_heads", 0)), "V", node)
    past = 0
    if run.has(node, 4):
        pk = run.node(node.inputs[4])
        past = pk.shape[2]
        k = g.cat([pk, k], axis=2)
    if run.has(node, 5):
        v = g.cat([run.node(node.inputs[5]), v], axis=2)
    present_k, present_v = k, v
    hq, hkv = q.shape[1], k.shape[1]
    if hq % hkv:
        raise node.fail(f"q_num_heads {hq} is not a multiple of kv_num_heads {hkv}")
    k, v = _repeat_heads(g, k, hq // hkv), _repeat_heads(g, v, hq // hkv)
    sq, sk = q.shape[2], k.shape[2]
    scale = at.get("scale")
    scale = float(scale) if scale is not None else 1.0 / np.sqrt(q.shape[3])
    bias = _bias(run, node, sq, sk, past, q.shape[0], g.dtype)
    softcap = float(at.get("softcap", 0.0) or 0.0)
    want_qk = len(node.outputs) > 3 and bool(node.outputs[3])
    qk = None
    if softcap <= 0.0 and not want_qk:
        y = g.scaled_dot_product_attention(q, k, v, mask=bias, scale=scale)
    else:
        s = g.matmul(q, g.transpose(k, (0, 1, 3, 2))) * scale
        if softcap > 0.0:
            s = g.tanh(s * (1.0 / softcap)) * softcap
        mode = int(at.get("qk_matmul_output_mode", 0))
        qk = s
        if bias is not None:
            s = s + bias
            if mode == 2:
                qk = s
        p = g.softmax(s, -1)
        if bias is not None:
            blocked = np.broadcast_to(np.isneginf(bias.max(axis=-1, keepdims=True)),
                                      tuple(p.shape))
            if blocked.any():
                p = g.where(blocked, g.constant(np.zeros(tuple(p.shape), g.dtype)), p)
        if mode == 3:
            qk = p
        y = g.matmul(p, v)
    if three_d:
        b, h, s_, d = y.shape
        y = g.reshape(g.transpose(y, (0, 2, 1, 3)), (b, s_, h * d))
    return [y, present_k, present_v, qk]



def _mod(run, node, key, x):
    """A ``score_mod`` / ``prob_mod`` graph attribute applied to ``x``."""
    sub = node.attrs.get(key)
    if sub is None:
        return x
    if len(sub.inputs) != 1 or len(sub.outputs) != 1:
        raise node.fail(f"{key} must take one input and give one output, got "
                        f"{len(sub.inputs)} and {len(sub.outputs)}")
    (y,) = run_body(run, sub, {sub.inputs[0]: x})
    return run.g.constant(y.astype(run.g.dtype)) if isinstance(y, np.ndarray) else y


@handler("ai.onnx.preview:FlexAttention")
def _flex_attention(run, node):
    """softmax(score_mod(scale * Q K^T)) -> prob_mod -> @ V on Q [B, Hq, L, E],
    K [B, Hkv, S, E], V [B, Hkv, S, Ev] (grouped heads repeat K / V); the
    two mods are graph attributes replayed on the graph, so gradients flow
    through them. Computed in the graph's float type (``softmax_precision``
    asks for at most that)."""
    g = run.g
    q, k, v = (run.node(n) for n in node.inputs[:3])
    if len(q.shape) != 4 or len(k.shape) != 4 or len(v.shape) != 4:
        raise node.fail(f"Q {tuple(q.shape)}, K {tuple(k.shape)} and V {tuple(v.shape)} "
                        "must be 4-D")
    hq, hkv = q.shape[1], k.shape[1]
    if hq % hkv or v.shape[1] != hkv or v.shape[2] != k.shape[2] or k.shape[3] != q.shape[3]:
        raise node.fail(f"Q {tuple(q.shape)}, K {tuple(k.shape)} and V {tuple(v.shape)} do not "
                        "match (heads, lengths, head sizes)")
    scale = node.attrs.get("scale")
    scale = float(scale) if scale is not None else 1.0 / np.sqrt(q.shape[3])
    k, v = _repeat_heads(g, k, hq // hkv), _repeat_heads(g, v, hq // hkv)
    root = float(np.sqrt(np.float32(scale)))
    s = g.matmul(q * root, g.transpose(k * root, (0, 1, 3, 2)))
    p = _mod(run, node, "prob_mod", g.softmax(_mod(run, node, "score_mod", s), -1))
    return [g.matmul(p, v)]
