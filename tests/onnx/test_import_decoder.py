"""yscv.onnx.load on the decoder-block operators of _import_decoder:
RotaryEmbedding, SwiGLU, CausalConvWithState and LinearAttention.

Oracles: ONNX's reference implementation (``onnx.reference``; ONNX Runtime
has no kernels for the newest of these) for the forward values,
yscv.gradcheck (float64, central differences) for the gradients with
respect to every float input.
"""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx.reference import ReferenceEvaluator  # noqa: E402

import yscv.onnx  # noqa: E402
from yscv.onnx import OnnxImportError  # noqa: E402

from _onenode import check_grad, one_node, yscv_run  # noqa: E402


def new_node(op, inputs, n_out=1, opset=28, **attrs):
    model = one_node(op, inputs, n_out=n_out, opset=opset, **attrs)
    model.ir_version = onnx.IR_VERSION
    return model


def check_reference(model, inputs, rtol=1e-5, atol=1e-6):
    want = ReferenceEvaluator(model).run(None, {n: a for n, a in inputs})
    got, *_ = yscv_run(model, inputs)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a.shape == b.shape, (a.shape, b.shape)
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


def normal(*shape, seed=0, scale=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


@pytest.mark.parametrize("alpha", [1.0, 1.7])
def test_swiglu(alpha):
    ins = [("a", normal(3, 4)), ("b", normal(3, 4, seed=1))]
    model = new_node("SwiGLU", ins, alpha=alpha)
    check_reference(model, ins)
    check_grad(model, ins, wrt=(0, 1))


@pytest.mark.parametrize("interleaved,rd,pos,rank", [
    (0, 0, True, 4), (1, 0, True, 4), (0, 4, False, 4), (1, 4, True, 3), (0, 0, False, 3)])
def test_rotary_embedding(interleaved, rd, pos, rank):
    b, h, s, d = 2, 3, 5, 8
    half = (rd or d) // 2
    x = normal(b, h, s, d) if rank == 4 else normal(b, s, h * d)
    if pos:
        ins = [("x", x), ("cos", normal(7, half, seed=1)), ("sin", normal(7, half, seed=2)),
               ("pos", np.random.default_rng(3).integers(0, 7, (b, s)).astype(np.int64))]
    else:
        ins = [("x", x), ("cos", normal(b, s, half, seed=1)), ("sin", normal(b, s, half, seed=2))]
    attrs = {"interleaved": interleaved, "rotary_embedding_dim": rd}
    if rank == 3:
        attrs["num_heads"] = h
    model = new_node("RotaryEmbedding", ins, opset=23, **attrs)
    check_reference(model, ins)
    check_grad(model, ins, wrt=(0, 1, 2))


@pytest.mark.parametrize("k,bias,past,act", [
    (3, False, False, "none"), (4, True, True, "silu"), (1, True, False, "swish"),
    (2, False, True, "none")])
def test_causal_conv_with_state(k, bias, past, act):
    b, c, length = 2, 3, 5
    ins = [("x", normal(b, c, length)), ("w", normal(c, 1, k, seed=1))]
    if bias:
        ins.append(("bias", normal(c, seed=2)))
    if past:
        ins.append(("past", normal(b, c, k - 1, seed=3)))
    names = ["x", "w", "bias" if bias else "", "past" if past else ""]
    model = new_node("CausalConvWithState", ins, n_out=2, opset=27, activation=act)
    model.graph.node[0].ClearField("input")
    model.graph.node[0].input.extend(names)
    check_reference(model, ins)
    wrt = tuple(range(len(ins)))
    check_grad(model, ins, wrt=wrt)
    if k > 1 and past:   # the new state: the last k - 1 steps of x (L >= k - 1)
        check_grad(model, ins, wrt=(0,), out=1)


@pytest.mark.parametrize("rule,hq,hkv,decay_dim,beta_dim,past", [
    ("linear", 2, 2, None, None, False), ("gated", 4, 2, "head", None, True),
    ("delta", 2, 1, None, 1, True), ("gated_delta", 4, 2, "key", "head", True),
    ("gated_delta", 2, 2, "head", "head", False)])
def test_linear_attention(rule, hq, hkv, decay_dim, beta_dim, past):
    b, t, dk, dv = 2, 4, 3, 2
    ins = [("q", normal(b, t, hq * dk, scale=0.5)), ("k", normal(b, t, hkv * dk, seed=1,
                                                                    scale=0.5)),
           ("v", normal(b, t, hkv * dv, seed=2))]
    names = ["q", "k", "v", "", "", ""]
    if past:
        ins.append(("s", normal(b, hkv, dk, dv, seed=3, scale=0.3)))
        names[3] = "s"
    if decay_dim:
        ins.append(("decay", -np.abs(normal(b, t, hkv if decay_dim == "head" else hkv * dk,
                                            seed=4, scale=0.3))))
        names[4] = "decay"
    if beta_dim:
        bt = 1 / (1 + np.exp(-normal(b, t, hkv if beta_dim == "head" else 1, seed=5)))
        ins.append(("beta", bt.astype(np.float32)))
        names[5] = "beta"
    model = new_node("LinearAttention", ins, n_out=2, opset=27, q_num_heads=hq,
                     kv_num_heads=hkv, update_rule=rule)
    model.graph.node[0].ClearField("input")
    model.graph.node[0].input.extend(names)
    check_reference(model, ins, rtol=1e-4, atol=1e-5)
    check_grad(model, ins, wrt=tuple(range(len(ins))))
    check_grad(model, ins, wrt=tuple(range(1, len(ins))), out=1)   # q does not reach S


def test_linear_attention_refuses_a_missing_decay_and_a_bad_rule():
    ins = [("q", normal(1, 2, 4)), ("k", normal(1, 2, 4)), ("v", normal(1, 2, 4))]
    with pytest.raises(OnnxImportError, match="update_rule='gated' needs the decay input"):
        yscv.onnx.load(new_node("LinearAttention", ins, n_out=2, opset=27, q_num_heads=2,
                                kv_num_heads=2, update_rule="gated"))
    bad = new_node("LinearAttention", ins, n_out=2, opset=27, q_num_heads=2, kv_num_heads=2,
                   update_rule="linear")
    next(a for a in bad.graph.node[0].attribute if a.name == "update_rule").s = b"mamba"
    with pytest.raises(OnnxImportError, match="update_rule='mamba' is not supported"):
        yscv.onnx.load(bad)


def test_causal_conv_refuses_an_unknown_activation():
    ins = [("x", normal(1, 2, 3)), ("w", normal(2, 1, 2))]
    with pytest.raises(OnnxImportError, match="activation='gelu' is not supported"):
        yscv.onnx.load(new_node("CausalConvWithState", ins, n_out=2, opset=27,
                                activation="gelu"))


def test_rotary_embedding_rejects_a_cache_of_the_wrong_width():
    ins = [("x", normal(1, 2, 3, 8)), ("cos", normal(1, 3, 3)), ("sin", normal(1, 3, 3))]
    m = yscv.onnx.load(new_node("RotaryEmbedding", ins, opset=23))
    g = yscv.Graph()
    n = len(g)
    with pytest.raises(OnnxImportError, match="does not match"):
        m(g, *[a for _, a in ins])
    assert len(g) == n


def test_flex_attention_with_a_score_mod_matches_the_reference_and_has_gradients():
    """score_mod adds a bias per key (an initializer of the subgraph) to
    tanh of the scores; grouped heads (4 query heads on 2 key/value heads)."""
    from onnx import TensorProto, helper, numpy_helper
    f = TensorProto.FLOAT
    mod = helper.make_graph([helper.make_node("Tanh", ["s"], ["t"]),
                             helper.make_node("Add", ["t", "bias"], ["o"])], "score_mod",
                            [helper.make_tensor_value_info("s", f, None)],
                            [helper.make_tensor_value_info("o", f, None)],
                            [numpy_helper.from_array(normal(5, seed=3), "bias")])
    node = helper.make_node("FlexAttention", ["q", "k", "v"], ["y"], domain="ai.onnx.preview",
                            score_mod=mod, scale=0.3)
    ins = [("q", normal(1, 4, 3, 2)), ("k", normal(1, 2, 5, 2, seed=1)),
           ("v", normal(1, 2, 5, 3, seed=2))]
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, f, a.shape)
                                            for n, a in ins],
                              [helper.make_tensor_value_info("y", f, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 24),
                                                    helper.make_opsetid("ai.onnx.preview", 1)])
    model.ir_version = onnx.IR_VERSION
    check_reference(model, ins)
    check_grad(model, ins, wrt=(0, 1, 2))
