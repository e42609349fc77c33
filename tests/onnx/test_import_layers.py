"""Importing ONNX's layer and loss operators: RMSNormalization,
GroupNormalization, LRN, Attention, SoftmaxCrossEntropyLoss,
NegativeLogLikelihoodLoss, ReduceProd on data, GRU with
linear_before_reset=0 and the extra outputs (LayerNormalization's Mean /
InvStdDev, BatchNormalization's training-mode running statistics,
Dropout's mask, MaxPool's Indices). Each model is built with onnx.helper;
the forward is compared with ONNX Runtime and a gradient must reach a float
input (finite and nonzero)."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

import yscv  # noqa: E402
import yscv.onnx  # noqa: E402
from yscv.onnx import OnnxImportError  # noqa: E402

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
_NP = {F: np.float32, I64: np.int64, B: np.bool_}


def model_of(nodes, inputs, outputs, opset=23):
    """inputs / outputs: (name, elem type, shape) triples."""
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    return model


def feeds(inputs, seed=0, ints=None):
    rng = np.random.default_rng(seed)
    out = []
    for name, t, shape in inputs:
        if ints and name in ints:
            out.append(ints[name])
        else:
            out.append(rng.standard_normal(shape).astype(_NP[t]))
    return out


def check(model, xs, n_out=None, rtol=1e-4, atol=1e-5, grad=True, constant=()):
    """yscv's outputs against ONNX Runtime's; a random-cotangent backward of
    output 0 must give every float input a finite, nonzero gradient (except
    the positions in ``constant``: inputs read by value, or not reaching
    output 0)."""
    names = [i.name for i in model.graph.input]
    want = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(
        None, dict(zip(names, xs)))
    m = yscv.onnx.load(model)
    g = yscv.Graph()
    args = [g.variable(x) if x.dtype == np.float32 else x for x in xs]
    got = m(g, *args)
    got = got if isinstance(got, tuple) else (got,)
    for k, (w, y) in enumerate(zip(want, got[:n_out or len(got)])):
        v = np.asarray(g.value(y)) if isinstance(y, yscv.NodeId) else np.asarray(y)
        np.testing.assert_allclose(v.astype(w.dtype), w, rtol=rtol, atol=atol,
                                   err_msg=f"output {k}")
    if grad:
        y0 = got[0]
        ct = np.random.default_rng(7).standard_normal(tuple(y0.shape)).astype(np.float32)
        g.backward(y0, ct.reshape(tuple(y0.shape)))
        for k, a in enumerate(args):
            if isinstance(a, yscv.NodeId) and k not in constant:
                gr = g.grad(a)
                assert gr is not None and np.all(np.isfinite(gr)) and np.any(gr != 0)
    return m, got


def test_rms_normalization_over_the_last_two_axes():
    ins = [("x", F, [2, 3, 4]), ("s", F, [3, 4])]
    node = helper.make_node("RMSNormalization", ["x", "s"], ["y"], axis=1, epsilon=1e-3)
    check(model_of([node], ins, [("y", F, None)]), feeds(ins))


def test_group_normalization_scale_per_channel():
    ins = [("x", F, [2, 4, 3, 3]), ("s", F, [4]), ("b", F, [4])]
    node = helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2,
                            epsilon=1e-4)
    check(model_of([node], ins, [("y", F, None)], opset=21), feeds(ins))


def test_lrn_matches_onnx_runtime_and_pytorch():
    torch = pytest.importorskip("torch")
    ins = [("x", F, [2, 5, 3, 3])]
    node = helper.make_node("LRN", ["x"], ["y"], size=3, alpha=0.01, beta=0.75, bias=2.0)
    xs = feeds(ins)
    _, (y,) = check(model_of([node], ins, [("y", F, None)], opset=13), xs)
    ref = torch.nn.LocalResponseNorm(3, alpha=0.01, beta=0.75, k=2.0)(torch.tensor(xs[0]))
    m = yscv.onnx.load(model_of([node], ins, [("y", F, None)], opset=13))
    g = yscv.Graph()
    np.testing.assert_allclose(g.value(m(g, xs[0])), ref.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_softmax_cross_entropy_nd_weights_ignore_index_log_prob(reduction):
    ins = [("x", F, [3, 4, 2]), ("t", I64, [3, 2]), ("w", F, [4])]
    labels = np.array([[0, 3], [2, 1], [1, 1]], np.int64)
    node = helper.make_node("SoftmaxCrossEntropyLoss", ["x", "t", "w"], ["y", "lp"],
                            reduction=reduction, ignore_index=1)
    xs = feeds(ins, ints={"t": labels})
    xs[2] = np.abs(xs[2]) + 0.5
    model = model_of([node], ins, [("y", F, None), ("lp", F, None)])
    _, got = check(model, xs, constant=(2,))  # the class weights are read by value
    assert len(got) == 2


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_negative_log_likelihood_loss_nd(reduction):
    ins = [("x", F, [3, 4, 2]), ("t", I64, [3, 2])]
    labels = np.array([[0, 3], [2, 1], [1, 0]], np.int64)
    node = helper.make_node("NegativeLogLikelihoodLoss", ["x", "t"], ["y"],
                            reduction=reduction)
    check(model_of([node], ins, [("y", F, None)]), feeds(ins, ints={"t": labels}))


def test_reduce_prod_on_data():
    ins = [("x", F, [3, 4]), ("a", I64, [1])]
    node = helper.make_node("ReduceProd", ["x", "a"], ["y"], keepdims=0)
    check(model_of([node], ins, [("y", F, None)], opset=18),
          feeds(ins, ints={"a": np.array([1], np.int64)}))


@pytest.mark.parametrize("attrs, mask", [
    ({}, None), ({"is_causal": 1}, None), ({"softcap": 2.0, "scale": 0.3}, "float"),
    ({}, "bool")])
def test_attention_4d_grouped_heads_masks(attrs, mask):
    ins = [("q", F, [2, 4, 3, 8]), ("k", F, [2, 2, 5, 8]), ("v", F, [2, 2, 5, 6])]
    extra = {}
    if mask == "bool":
        ins.append(("m", B, [3, 5]))
        extra["m"] = np.array([[1, 1, 0, 1, 0], [0, 0, 0, 0, 0], [1, 0, 1, 1, 1]], bool)
    elif mask == "float":
        ins.append(("m", F, [3, 5]))
    node = helper.make_node("Attention", [n for n, _, _ in ins], ["y"], **attrs)
    xs = feeds(ins, ints=extra)
    check(model_of([node], ins, [("y", F, None)]), xs, constant=(3,))  # the mask: by value


def test_attention_3d_with_past_present_and_qk_output():
    ins = [("q", F, [2, 3, 16]), ("k", F, [2, 3, 8]), ("v", F, [2, 3, 8]),
           ("pk", F, [2, 2, 4, 4]), ("pv", F, [2, 2, 4, 4])]
    node = helper.make_node("Attention", ["q", "k", "v", "", "pk", "pv"],
                            ["y", "pres_k", "pres_v", "qk"], q_num_heads=4, kv_num_heads=2,
                            is_causal=1, qk_matmul_output_mode=3)
    outs = [("y", F, None), ("pres_k", F, None), ("pres_v", F, None), ("qk", F, None)]
    check(model_of([node], ins, outs), feeds(ins))


def test_gru_linear_before_reset_0_bidirectional():
    hidden, inp = 3, 2
    ins = [("x", F, [4, 2, inp]), ("w", F, [2, 3 * hidden, inp]),
           ("r", F, [2, 3 * hidden, hidden]), ("b", F, [2, 6 * hidden]),
           ("", F, None), ("h0", F, [2, 2, hidden])]
    ins = [i for i in ins if i[0]]
    node = helper.make_node("GRU", ["x", "w", "r", "b", "", "h0"], ["y", "yh"],
                            hidden_size=hidden, direction="bidirectional")
    check(model_of([node], ins, [("y", F, None), ("yh", F, None)], opset=14), feeds(ins))


def test_layer_normalization_mean_and_inv_std_dev():
    ins = [("x", F, [2, 3, 4]), ("s", F, [3, 4]), ("b", F, [3, 4])]
    node = helper.make_node("LayerNormalization", ["x", "s", "b"], ["y", "mu", "isd"],
                            axis=1)
    outs = [("y", F, None), ("mu", F, None), ("isd", F, None)]
    check(model_of([node], ins, outs, opset=17), feeds(ins))


def test_batch_normalization_training_mode_running_statistics():
    ins = [("x", F, [3, 2, 2, 2]), ("s", F, [2]), ("b", F, [2]), ("mean", F, [2]),
           ("var", F, [2])]
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "mean", "var"],
                            ["y", "rm", "rv"], training_mode=1, momentum=0.8)
    xs = feeds(ins)
    xs[4] = np.abs(xs[4]) + 0.5
    outs = [("y", F, None), ("rm", F, None), ("rv", F, None)]
    check(model_of([node], ins, outs, opset=15), xs, constant=(3, 4))  # only in outputs 1, 2


def test_batch_normalization_training_mode_with_initializer_statistics():
    """Running statistics stored in the file (the module's buffers)."""
    from onnx import numpy_helper
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "mean", "var"],
                            ["y", "rm", "rv"], training_mode=1)
    model = model_of([node], [("x", F, [3, 2, 2, 2])],
                     [("y", F, None), ("rm", F, None), ("rv", F, None)], opset=15)
    model.graph.initializer.extend(
        numpy_helper.from_array(np.full(2, v, np.float32), n)
        for n, v in (("s", 1.5), ("b", 0.2), ("mean", 0.3), ("var", 2.0)))
    check(model, feeds([("x", F, [3, 2, 2, 2])]))


def test_dropout_mask_output_eval_and_training():
    ins = [("x", F, [4, 5])]
    node = helper.make_node("Dropout", ["x"], ["y", "mask"])
    model = model_of([node], ins, [("y", F, None), ("mask", B, None)], opset=13)
    check(model, feeds(ins))
    # training: the mask is where the output kept (scaled) the input
    ins2 = ins + [("ratio", F, []), ("train", B, [])]
    node = helper.make_node("Dropout", ["x", "ratio", "train"], ["y", "mask"])
    m = yscv.onnx.load(model_of([node], ins2, [("y", F, None), ("mask", B, None)], opset=13))
    g = yscv.Graph()
    x = np.ones((40, 50), np.float32)
    y, mask = m(g, x, np.array(0.5, np.float32), np.array(True))
    assert mask.dtype == bool and 0 < mask.mean() < 1
    np.testing.assert_allclose(g.value(y), np.where(mask, 2.0, 0.0))


def test_seeded_dropout_drops_onnx_reference_mask_and_trains():
    """A Dropout with a seed drops NumPy's RandomState(seed) draw (ONNX's
    reference), in NCHW as the file says, and its gradient is the kept
    positions' scale."""
    ins = [("x", F, [2, 3, 4, 5]), ("ratio", F, []), ("train", B, [])]
    node = helper.make_node("Dropout", ["x", "ratio", "train"], ["y", "mask"], seed=7)
    m = yscv.onnx.load(model_of([node], ins, [("y", F, None), ("mask", B, None)], opset=13))
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 5)).astype(np.float32)
    want = np.random.RandomState(7).uniform(0.0, 1.0, x.shape) >= 0.25
    g = yscv.Graph()
    xn = g.variable(x)
    y, mask = m(g, xn, np.array(0.25, np.float32), np.array(True))
    np.testing.assert_array_equal(mask, want)
    np.testing.assert_array_equal(g.value(y), want * x * (1 / (1 - 0.25)))
    (gx,) = g.gradients(g.sum(y), [xn])
    np.testing.assert_allclose(gx, want / 0.75, rtol=1e-6)


@pytest.mark.parametrize("order", [0, 1])
def test_max_pool_indices(order):
    ins = [("x", F, [2, 3, 5, 4])]
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 2], strides=[2, 1],
                            pads=[1, 0, 0, 1], storage_order=order)
    check(model_of([node], ins, [("y", F, None), ("i", I64, None)], opset=12), feeds(ins))


def test_attention_without_heads_for_3d_input_is_refused_at_call():
    ins = [("q", F, [2, 3, 16]), ("k", F, [2, 3, 8]), ("v", F, [2, 3, 8])]
    node = helper.make_node("Attention", ["q", "k", "v"], ["y"], name="att",
                            q_num_heads=3, kv_num_heads=2)
    m = yscv.onnx.load(model_of([node], ins, [("y", F, None)]))
    g = yscv.Graph()
    with pytest.raises(OnnxImportError, match="'att'.*Q hidden size 16 .* 3 heads"):
        m(g, *feeds(ins))
    assert len(g) == 0


@pytest.mark.parametrize("axis", [-1, -2, 0, 2])
def test_flatten_negative_axis_counts_from_the_end(axis):
    """Flatten(axis=-1) of [2, 3, 4] is [6, 4] (LayerNormalization's function
    body flattens with it)."""
    ins = [("x", F, [2, 3, 4])]
    node = helper.make_node("Flatten", ["x"], ["y"], axis=axis)
    check(model_of([node], ins, [("y", F, None)], opset=13), feeds(ins))


def test_class_weights_and_attention_mask_initializers_are_constants():
    """Read by value, so a Parameter there would never get a gradient."""
    from onnx import numpy_helper
    ins = [("x", F, [3, 4]), ("t", I64, [3])]
    node = helper.make_node("SoftmaxCrossEntropyLoss", ["x", "t", "w"], ["y"])
    model = model_of([node], ins, [("y", F, None)], opset=13)
    model.graph.initializer.append(numpy_helper.from_array(np.ones(4, np.float32), "w"))
    assert not list(yscv.onnx.load(model).parameters())
    ins = [("q", F, [1, 1, 2, 4]), ("k", F, [1, 1, 3, 4]), ("v", F, [1, 1, 3, 4])]
    node = helper.make_node("Attention", ["q", "k", "v", "m"], ["y"])
    model = model_of([node], ins, [("y", F, None)])
    model.graph.initializer.append(numpy_helper.from_array(np.zeros((2, 3), np.float32), "m"))
    m = yscv.onnx.load(model)
    assert not list(m.parameters())
    check(model, feeds(ins))


def _torch_grads(model, xs, torch_fn):
    """yscv's gradient of output 0 (summed) for float input 0 and PyTorch's."""
    torch = pytest.importorskip("torch")
    m = yscv.onnx.load(model)
    g = yscv.Graph(np.float64)
    m.to(np.float64)
    args = [g.variable(x.astype(np.float64)) if x.dtype == np.float32 else x for x in xs]
    y = m(g, *args)
    y = y[0] if isinstance(y, tuple) else y
    g.backward(g.sum(y))
    t = [torch.tensor(x.astype(np.float64) if x.dtype == np.float32 else x,
                      requires_grad=x.dtype == np.float32) for x in xs]
    ty = torch_fn(*t)
    ty.sum().backward()
    np.testing.assert_allclose(g.value(y), ty.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(g.grad(args[0]), t[0].grad.numpy(), rtol=1e-10, atol=1e-12)


def test_softmax_cross_entropy_gradient_as_pytorch():
    torch = pytest.importorskip("torch")
    ins = [("x", F, [3, 4, 2]), ("t", I64, [3, 2]), ("w", F, [4])]
    labels = np.array([[0, 3], [2, 1], [1, 1]], np.int64)
    node = helper.make_node("SoftmaxCrossEntropyLoss", ["x", "t", "w"], ["y"], ignore_index=3)
    xs = feeds(ins, ints={"t": labels})
    xs[2] = np.abs(xs[2]) + 0.5
    _torch_grads(model_of([node], ins, [("y", F, None)], opset=13), xs,
                 lambda x, t, w: torch.nn.functional.cross_entropy(
                     x, t, weight=w.detach(), ignore_index=3))


def test_attention_grouped_causal_gradient_as_pytorch():
    torch = pytest.importorskip("torch")
    ins = [("q", F, [1, 4, 3, 8]), ("k", F, [1, 2, 3, 8]), ("v", F, [1, 2, 3, 8])]
    node = helper.make_node("Attention", ["q", "k", "v"], ["y"], is_causal=1)
    _torch_grads(model_of([node], ins, [("y", F, None)]), feeds(ins),
                 lambda q, k, v: torch.nn.functional.scaled_dot_product_attention(
                     q, k, v, is_causal=True, enable_gqa=True))
