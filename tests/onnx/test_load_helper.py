"""``yscv.onnx.load`` on models built with ``onnx.helper``: operator options
PyTorch's exporter does not write (asymmetric pads, auto_pad, ceil_mode,
1-D and 3-D convolutions, older opsets, batch-major and reverse recurrent
layers...), and the load-time errors.

Oracles: PyTorch where it defines the operation (outputs and gradients),
ONNX Runtime for ONNX-only semantics, and yscv.gradcheck (float64, finite
differences) for the gradients of ONNX-only graphs.
"""
from __future__ import annotations

import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import yscv  # noqa: E402
import yscv.onnx  # noqa: E402
from yscv.onnx import OnnxImportError  # noqa: E402

TOL = dict(rtol=2e-4, atol=2e-5)
F = TensorProto.FLOAT


def build(nodes, inputs, outputs, inits=(), opset=17):
    """A checked ModelProto: ``inputs`` / ``outputs`` are (name, shape)
    pairs (shape None = unknown rank), ``inits`` (name, array) pairs."""
    def vi(name, shape, elem=F):
        return helper.make_tensor_value_info(name, elem, shape)
    ins = [vi(n, s, TensorProto.INT64 if n.startswith("ids") else F) for n, s in inputs]
    outs = [vi(n, s) for n, s in outputs]
    graph = helper.make_graph(nodes, "g", ins, outs,
                              [numpy_helper.from_array(np.asarray(a), n) for n, a in inits])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8

    return model


def rand(seed, *shape):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def ort_run(model, feeds):
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def forward(m, *xs):
    g = yscv.Graph()
    ins = [g.variable(x) if x.dtype.kind == "f" else x for x in xs]
    y = m(g, *ins)
    return g, ins, y


def grads_vs_torch(model, xs, torch_fn, params=()):
    """Output and gradients (inputs and the named initializers) of the
    imported model against ``torch_fn(*inputs, *params)``."""
    torch = pytest.importorskip("torch")
    m = yscv.onnx.load(model)
    g, ins, y = forward(m, *xs)
    ct = rand(99, *g.value(y).shape)
    g.backward(y, ct)
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    tx = [torch.tensor(x, requires_grad=True) for x in xs]
    tp = [torch.tensor(inits[n], requires_grad=True) for n in params]
    ty = torch_fn(*tx, *tp)
    ty.backward(torch.tensor(ct))
    np.testing.assert_allclose(g.value(y), ty.detach().numpy(), **TOL)
    for n, t in zip(ins, tx):
        np.testing.assert_allclose(g.grad(n), t.grad.numpy(), **TOL)
    for name, t in zip(params, tp):
        np.testing.assert_allclose(m.file_layout(name, m.parameter(name).grad), t.grad.numpy(),
                                   err_msg=name, **TOL)
    return m


# ------------------------------------------------------------ convolution
def test_conv1d_asymmetric_pads_dilation_groups():
    torch = pytest.importorskip("torch")
    w, b = rand(1, 4, 2, 3), rand(2, 4)
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[2, 1], dilations=[2],
                            strides=[2], group=2)
    model = build([node], [("x", [2, 4, 11])], [("y", None)], [("w", w), ("b", b)])
    fn = lambda x, w, b: torch.nn.functional.conv1d(  # noqa: E731
        torch.nn.functional.pad(x, (2, 1)), w, b, stride=2, dilation=2, groups=2)
    m = grads_vs_torch(model, [rand(0, 2, 4, 11)], fn, ["w", "b"])
    assert m.parameter("w").shape == (3, 2, 4)  # [K, Cin/groups, Cout]


def test_conv3d():
    torch = pytest.importorskip("torch")
    w, b = rand(1, 3, 2, 2, 3, 2), rand(2, 3)
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 0, 1, 1, 0, 1],
                            strides=[1, 2, 1])
    model = build([node], [("x", [1, 2, 4, 5, 4])], [("y", None)], [("w", w), ("b", b)])
    fn = lambda x, w, b: torch.nn.functional.conv3d(x, w, b, stride=(1, 2, 1),  # noqa: E731
                                                    padding=(1, 0, 1))
    grads_vs_torch(model, [rand(0, 1, 2, 4, 5, 4)], fn, ["w", "b"])


def test_conv2d_auto_pad_same_upper_against_onnxruntime():
    w = rand(1, 3, 2, 3, 3)
    node = helper.make_node("Conv", ["x", "w"], ["y"], auto_pad="SAME_UPPER", strides=[2, 2])
    model = build([node], [("x", [1, 2, 6, 7])], [("y", None)], [("w", w)])
    x = rand(0, 1, 2, 6, 7)
    g, _, y = forward(yscv.onnx.load(model), x)
    np.testing.assert_allclose(g.value(y), ort_run(model, {"x": x})[0], **TOL)


@pytest.mark.parametrize("nd", [1, 2])
def test_conv_transpose_asymmetric_pads_output_padding_groups(nd):
    torch = pytest.importorskip("torch")
    k = (3,) * nd
    w, b = rand(1, 4, 3, *k), rand(2, 6)
    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], strides=[2] * nd,
                            pads=[0] * nd + [1] * nd, output_padding=[1] * nd, group=2)
    shape = [2, 4] + [5] * nd
    model = build([node], [("x", shape)], [("y", None)], [("w", w), ("b", b)])
    conv_t = torch.nn.functional.conv_transpose1d if nd == 1 else torch.nn.functional.conv_transpose2d

    def fn(x, w, b):
        y = conv_t(x, w, b, stride=2, output_padding=1, groups=2)
        return y[..., :-1] if nd == 1 else y[..., :-1, :-1]
    grads_vs_torch(model, [rand(0, *shape)], fn, ["w", "b"])


# ------------------------------------------------------------------ pooling
@pytest.mark.parametrize("op,kw", [
    ("MaxPool", dict(ceil_mode=1, pads=[1, 1, 1, 1])),
    ("AveragePool", dict(ceil_mode=1, pads=[1, 1, 1, 1], count_include_pad=1)),
    ("AveragePool", dict(ceil_mode=1, pads=[1, 1, 1, 1], count_include_pad=0)),
    ("AveragePool", dict(ceil_mode=0, pads=[0, 0, 0, 0])),
])
def test_pool2d_ceil_mode_and_padding(op, kw):
    torch = pytest.importorskip("torch")
    F_ = torch.nn.functional
    node = helper.make_node(op, ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], **kw)
    model = build([node], [("x", [2, 3, 8, 9])], [("y", None)])
    p = kw["pads"][0]
    if op == "MaxPool":
        fn = lambda x: F_.max_pool2d(x, 3, 2, p, ceil_mode=True)  # noqa: E731
    else:
        fn = lambda x: F_.avg_pool2d(x, 3, 2, p, ceil_mode=bool(kw["ceil_mode"]),  # noqa: E731
                                     count_include_pad=bool(kw.get("count_include_pad", 0)))
    grads_vs_torch(model, [rand(0, 2, 3, 8, 9)], fn)


def test_pool_asymmetric_pads_against_onnxruntime():
    nodes = [helper.make_node("MaxPool", ["x"], ["a"], kernel_shape=[2, 3], pads=[0, 1, 1, 0]),
             helper.make_node("AveragePool", ["x"], ["b"], kernel_shape=[3, 2],
                              strides=[2, 1], pads=[1, 0, 0, 1])]
    model = build(nodes, [("x", [1, 2, 5, 6])], [("a", None), ("b", None)])
    x = rand(0, 1, 2, 5, 6)
    g, _, (a, b) = forward(yscv.onnx.load(model), x)
    ra, rb = ort_run(model, {"x": x})
    np.testing.assert_allclose(g.value(a), ra, **TOL)
    np.testing.assert_allclose(g.value(b), rb, **TOL)


def test_pool1d():
    torch = pytest.importorskip("torch")
    F_ = torch.nn.functional
    nodes = [helper.make_node("MaxPool", ["x"], ["a"], kernel_shape=[3], strides=[2], pads=[1, 1]),
             helper.make_node("AveragePool", ["a"], ["y"], kernel_shape=[2], strides=[2])]
    model = build(nodes, [("x", [2, 3, 9])], [("y", None)])
    grads_vs_torch(model, [rand(0, 2, 3, 9)],
                   lambda x: F_.avg_pool1d(F_.max_pool1d(x, 3, 2, 1), 2))


# -------------------------------------------------------------- norms etc.
def test_batchnorm_1d_instance_norm_prelu():
    torch = pytest.importorskip("torch")
    F_ = torch.nn.functional
    c = 3
    inits = [("s", rand(1, c) + 1), ("b", rand(2, c)), ("mu", rand(3, c)),
             ("var", np.abs(rand(4, c)) + 0.5), ("slope", rand(5, c, 1))]
    nodes = [helper.make_node("BatchNormalization", ["x", "s", "b", "mu", "var"], ["y1"],
                              epsilon=1e-3),
             helper.make_node("InstanceNormalization", ["y1", "s", "b"], ["y2"]),
             helper.make_node("PRelu", ["y2", "slope"], ["y"])]
    model = build(nodes, [("x", [2, c, 7])], [("y", None)], inits)

    def fn(x, s, b, slope):
        y = F_.batch_norm(x, torch.tensor(inits[2][1]), torch.tensor(inits[3][1]), s, b,
                          eps=1e-3)
        y = F_.instance_norm(y, weight=s, bias=b)
        return torch.where(y > 0, y, slope * y)
    m = grads_vs_torch(model, [rand(0, 2, c, 7)], fn, ["s", "b", "slope"])
    assert {"mu", "var"} <= set(m.state_dict()) and len(list(m.buffers())) == 2


def test_layer_norm_over_two_axes():
    torch = pytest.importorskip("torch")
    inits = [("s", rand(1, 4, 5)), ("b", rand(2, 4, 5))]
    node = helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"], axis=-2)
    model = build([node], [("x", [3, 4, 5])], [("y", None)], inits)
    grads_vs_torch(model, [rand(0, 3, 4, 5)],
                   lambda x, s, b: torch.nn.functional.layer_norm(x, (4, 5), s, b), ["s", "b"])


def test_gemm_options():
    torch = pytest.importorskip("torch")
    inits = [("b", rand(1, 5, 4)), ("c", rand(2, 5))]
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], transA=1, transB=1, alpha=0.5,
                            beta=2.0)
    model = build([node], [("a", [4, 2])], [("y", None)], inits)
    grads_vs_torch(model, [rand(0, 4, 2)],
                   lambda a, b, c: 0.5 * a.T @ b.T + 2.0 * c, ["b", "c"])


def test_dropout_identity_in_eval_active_in_train():
    node = helper.make_node("Dropout", ["x", "r"], ["y"])
    model = build([node], [("x", [4, 50])], [("y", None)],
                  [("r", np.array(0.5, np.float32))], opset=13)
    m = yscv.onnx.load(model)
    x = rand(0, 4, 50)
    g, _, y = forward(m, x)
    np.testing.assert_array_equal(g.value(y), x)
    m.train()
    g, _, y = forward(m, x)
    v = g.value(y)
    kept = v != 0
    assert 0.2 < kept.mean() < 0.8
    np.testing.assert_allclose(v[kept], 2 * x[kept], rtol=1e-6)


# ---------------------------------------------- elementwise and shape ops
def kitchen_sink():
    """Many elementwise, reduction and shape operators in one graph."""
    c = lambda name, v, dt=np.int64: helper.make_node(  # noqa: E731
        "Constant", [], [name], value=numpy_helper.from_array(np.array(v, dt)))
    nodes = [
        c("two", 2.0, np.float32), c("half", 0.5, np.float32),
        c("st", [-1, 4]), c("en", [-100, -100]), c("ax", [1, 2]), c("sp", [-1, -1]),
        c("split", [2, 1]), c("rs", [0, -1]), c("uax", [0]), c("exp", [2, 1, 1]),
        c("rax", [1]), c("tile", [1, 2]), c("pads", [0, 1, 0, 2]),
        helper.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["s"]),  # x[:, ::-1, 4::-1]
        helper.make_node("Split", ["s", "split"], ["s1", "s2"], axis=1),
        helper.make_node("Concat", ["s2", "s1"], ["cat"], axis=1),
        helper.make_node("Mul", ["cat", "two"], ["m"]),
        helper.make_node("Clip", ["m", "", "two"], ["clip"]),
        helper.make_node("LeakyRelu", ["clip"], ["lr"], alpha=0.2),
        helper.make_node("Pow", ["lr", "two"], ["pw"]),
        helper.make_node("Add", ["pw", "half"], ["pos"]),
        helper.make_node("Sqrt", ["pos"], ["sq"]),
        helper.make_node("Log", ["pos"], ["lg"]),
        helper.make_node("Sub", ["sq", "lg"], ["d"]),
        helper.make_node("Exp", ["half"], ["e"]),
        helper.make_node("Div", ["d", "e"], ["dv"]),
        helper.make_node("Transpose", ["dv"], ["t"], perm=[2, 0, 1]),
        helper.make_node("Reshape", ["t", "rs"], ["r"]),
        helper.make_node("Unsqueeze", ["r", "uax"], ["u"]),
        helper.make_node("Expand", ["u", "exp"], ["ex"]),
        helper.make_node("ReduceSum", ["ex", "rax"], ["red"], keepdims=1),
        helper.make_node("Squeeze", ["red", "rax"], ["sqz"]),
        helper.make_node("ReduceMean", ["sqz"], ["mean"], axes=[1], keepdims=0),
        helper.make_node("Tile", ["sqz", "tile"], ["tl"]),
        helper.make_node("Pad", ["tl", "pads"], ["pd"]),
        helper.make_node("Neg", ["pd"], ["ng"]),
        helper.make_node("Greater", ["ng", "half"], ["gt"]),
        helper.make_node("Where", ["gt", "ng", "pd"], ["wh"]),
        helper.make_node("Abs", ["wh"], ["ab"]),
        helper.make_node("Einsum", ["ab", "ab"], ["es"], equation="ij, ij -> i"),
        helper.make_node("Softmax", ["es"], ["sm"], axis=0),
        helper.make_node("Mul", ["sm", "mean"], ["y"]),
    ]
    return build(nodes, [("x", [2, 3, 6])], [("y", None)], opset=17)


def test_kitchen_sink_against_onnxruntime_and_gradcheck():
    model = kitchen_sink()
    m = yscv.onnx.load(model)
    x = rand(0, 2, 3, 6)
    g, _, y = forward(m, x)
    np.testing.assert_allclose(g.value(y), ort_run(model, {"x": x})[0], **TOL)
    m.to(np.float64)
    assert yscv.gradcheck(lambda g, x: g.sum(m(g, x) * np.arange(1.0, 3.0)), [x.astype(np.float64)])


def test_softmax_before_opset_13_flattens_the_tail():
    node = helper.make_node("Softmax", ["x"], ["y"], axis=1)
    model = build([node], [("x", [2, 3, 4])], [("y", None)], opset=11)
    x = rand(0, 2, 3, 4)
    g, _, y = forward(yscv.onnx.load(model), x)
    np.testing.assert_allclose(g.value(y), ort_run(model, {"x": x})[0], **TOL)


def test_gather_on_data_with_index_matrix():
    node = helper.make_node("Gather", ["x", "i"], ["y"], axis=1)
    idx = np.array([[0, 2], [-1, 1]], np.int64)
    model = build([node], [("x", [2, 3, 4])], [("y", None)], [("i", idx)])
    m = yscv.onnx.load(model)
    x = rand(0, 2, 3, 4)
    g, (xn,), y = forward(m, x)
    np.testing.assert_array_equal(g.value(y), np.take(x, idx, axis=1))
    ct = rand(1, 2, 2, 2, 4)
    g.backward(y, ct)
    want = np.zeros_like(x)
    np.add.at(want, (slice(None), idx % 3), ct)
    np.testing.assert_allclose(g.grad(xn), want, **TOL)


# ---------------------------------------------------------------- recurrent
def recurrent_model(op, direction, layout, h, i, t, b):
    d = 2 if direction == "bidirectional" else 1
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
    inits = [("W", rand(1, d, gates * h, i)), ("R", rand(2, d, gates * h, h)),
             ("B", rand(3, d, 2 * gates * h)), ("lens", np.full(b, t, np.int32))]
    ins = ["x", "W", "R", "B", "lens", "h0"] + (["c0"] if op == "LSTM" else [])
    outs = ["y", "yh"] + (["yc"] if op == "LSTM" else [])
    kw = dict(activations=["Relu"] * d) if op == "RNN" else {}
    if op == "GRU":
        kw["linear_before_reset"] = 1
    node = helper.make_node(op, ins, outs, hidden_size=h, direction=direction, layout=layout,
                            **kw)
    bd = [b, d] if layout else [d, b]
    graph_ins = [("x", [b, t, i] if layout else [t, b, i]), ("h0", bd + [h])]
    if op == "LSTM":
        graph_ins.append(("c0", bd + [h]))
    return build([node], graph_ins, [(o, None) for o in outs], inits, opset=14), d


@pytest.mark.parametrize("op,direction", [("LSTM", "reverse"), ("GRU", "bidirectional"),
                                          ("RNN", "bidirectional"), ("LSTM", "forward")])
def test_recurrent_direction_initial_state_layout(op, direction):
    """Against ONNX Runtime (time-major); the batch-major form (layout=1,
    which ONNX Runtime does not run) must give the transposed results."""
    h, i, t, b = 3, 2, 4, 2
    model, d = recurrent_model(op, direction, 0, h, i, t, b)
    feeds = {"x": rand(4, t, b, i), "h0": rand(5, d, b, h)}
    if op == "LSTM":
        feeds["c0"] = rand(6, d, b, h)
    m = yscv.onnx.load(model)
    g, _, ys = forward(m, *feeds.values())
    refs = ort_run(model, feeds)
    for mine, ref in zip(ys, refs):
        np.testing.assert_allclose(g.value(mine), ref, **TOL)
    batch_major, _ = recurrent_model(op, direction, 1, h, i, t, b)
    g, _, ys = forward(yscv.onnx.load(batch_major), feeds["x"].transpose(1, 0, 2),
                       *[v.transpose(1, 0, 2) for k, v in feeds.items() if k != "x"])
    np.testing.assert_allclose(g.value(ys[0]), refs[0].transpose(2, 0, 1, 3), **TOL)
    for mine, ref in zip(ys[1:], refs[1:]):
        np.testing.assert_allclose(g.value(mine), ref.transpose(1, 0, 2), **TOL)
    m.to(np.float64)
    arrays = [v.astype(np.float64) for v in feeds.values()]
    assert yscv.gradcheck(lambda g, *xs: g.sum(m(g, *xs)[0] * np.arange(h, dtype=float)), arrays)


# ------------------------------------------------------------------ sources
def test_load_from_path_bytes_and_proto(tmp_path):
    model = build([helper.make_node("Relu", ["x"], ["y"])], [("x", [2])], [("y", None)])
    path = tmp_path / "relu.onnx"
    onnx.save(model, str(path))
    x = np.array([-1.0, 2.0], np.float32)
    for src in (path, str(path), path.read_bytes(), model):
        g, _, y = forward(yscv.onnx.load(src), x)
        np.testing.assert_array_equal(g.value(y), [0.0, 2.0])
    with pytest.raises(TypeError, match="onnx.load"):
        yscv.onnx.load(3.5)


# ------------------------------------------------------------------ errors
@pytest.mark.parametrize("node,match", [
    (helper.make_node("MaxRoiPool", ["x", "r"], ["y"], pooled_shape=[1, 1], name="u1"),
     "'MaxRoiPool' \\(node 'u1'"),
    (helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2, 2, 2], name="mp"),
     "'MaxPool' \\(node 'mp'.*kernel_shape \\[2, 2, 2, 2\\] is not supported"),
    (helper.make_node("Pad", ["x", "p"], ["y"], mode="symmetric", name="pad"),
     "'Pad' \\(node 'pad'.*symmetric"),
    (helper.make_node("Custom", ["x"], ["y"], domain="com.example", name="c"),
     "'com.example:Custom' \\(node 'c'"),
])
def test_unsupported_operator_fails_at_load(node, match):
    inits = [("p", np.zeros(8, np.int64))] if node.op_type == "Pad" else []
    if node.op_type == "MaxRoiPool":
        inits = [("r", np.zeros((1, 5), np.float32))]
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", F, [1, 1, 4, 4])],
                              [helper.make_tensor_value_info("y", F, None)],
                              [numpy_helper.from_array(a, n) for n, a in inits])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.example", 1)])
    with pytest.raises(OnnxImportError, match=match) as info:
        yscv.onnx.load(model)
    assert info.value.op == (node.op_type if not node.domain else f"{node.domain}:{node.op_type}")
    assert isinstance(info.value, yscv.AutogradError) and isinstance(info.value, ValueError)


def test_gru_without_linear_before_reset_runs_as_onnx_runtime():
    """ONNX's default GRU (reset gate before the recurrent product), composed
    per step: values as ONNX Runtime, gradients by gradcheck in float64."""
    inits = [("W", rand(1, 1, 6, 2)), ("R", rand(2, 1, 6, 2)), ("B", rand(3, 1, 12))]
    node = helper.make_node("GRU", ["x", "W", "R", "B"], ["y"], hidden_size=2, name="gru0")
    model = build([node], [("x", [3, 1, 2])], [("y", None)], inits, opset=14)
    x = rand(4, 3, 1, 2)
    m = yscv.onnx.load(model)
    g, _, y = forward(m, x)
    np.testing.assert_allclose(g.value(y), ort_run(model, {"x": x})[0], **TOL)
    m.to(np.float64)
    assert yscv.gradcheck(lambda g, xs: g.sum(m(g, xs) * np.arange(2, dtype=float)),
                          [x.astype(np.float64)])


def test_missing_onnx_package_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnx", None)
    with pytest.raises(ImportError, match=r'pip install onnx \(from yscv.s checkout: pip install -e "\.\[onnx\]"\)'):
        yscv.onnx.load(b"")


def test_bad_call_leaves_the_graph_unchanged():
    w = rand(0, 3, 4)
    model = build([helper.make_node("MatMul", ["x", "w"], ["y"])], [("x", [2, 3])],
                  [("y", None)], [("w", w)])
    m = yscv.onnx.load(model)
    g = yscv.Graph()
    x, x2, x3 = g.constant(rand(1, 2, 3)), g.constant(rand(1, 3)), g.constant(rand(1, 2, 5))
    n = len(g)
    with pytest.raises(TypeError, match="takes 1 input"):
        m(g, x, x)
    with pytest.raises(ValueError, match="must have 2 axes"):
        m(g, x2)
    with pytest.raises(ValueError, match="matmul") as info:
        m(g, x3)
    if sys.version_info >= (3, 11):
        assert "while running ONNX operator 'MatMul' (node '#0', index 0)" in info.value.__notes__
    assert len(g) == n


# ------------------------------------------------------- names and fusion
def test_initializer_names_that_clash_with_module_attributes():
    """Initializers called like Module attributes stay parameters under a
    free key; the module still calls, and ``onnx_names`` maps the keys."""
    inits = [("forward", rand(0, 3, 3)), ("training", rand(1, 3)), ("fc.eval", rand(2, 3)),
             ("onnx::MatMul_7", rand(3, 3, 3))]
    nodes = [helper.make_node("MatMul", ["x", "forward"], ["a"]),
             helper.make_node("Add", ["a", "training"], ["b"]),
             helper.make_node("Mul", ["b", "fc.eval"], ["c"]),
             helper.make_node("MatMul", ["c", "onnx::MatMul_7"], ["y"])]
    m = yscv.onnx.load(build(nodes, [("x", [2, 3])], [("y", None)], inits))
    assert sorted(m.onnx_names.values()) == sorted(n for n, _ in inits)
    assert m.onnx_names["onnx__MatMul_7"] == "onnx::MatMul_7"
    assert callable(m.forward) and m.training is False
    x = rand(4, 2, 3)
    g, _, y = forward(m, x)
    a = dict(inits)
    np.testing.assert_allclose(g.value(y), ((x @ a["forward"] + a["training"]) * a["fc.eval"])
                               @ a["onnx::MatMul_7"], **TOL)
    assert set(m.state_dict()) == set(m.onnx_names)


def test_frozen_parameters_get_no_gradient():
    inits = [("w", rand(0, 3, 3)), ("b", rand(1, 3))]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["a"]), helper.make_node("Add", ["a", "b"], ["y"])]
    m = yscv.onnx.load(build(nodes, [("x", [2, 3])], [("y", None)], inits))
    m.parameter("w").requires_grad = False
    g, _, y = forward(m, rand(2, 2, 3))
    g.backward(g.sum(y))
    assert m.parameter("w").grad is None
    np.testing.assert_allclose(m.parameter("b").grad, [2.0, 2.0, 2.0])


def test_erf_gelu_written_with_mul_by_inverse_sqrt2():
    """(x * 0.5) * (1 + erf(x * 0.70710677)): one GELU, as torch's erf GELU."""
    torch = pytest.importorskip("torch")
    c = lambda name, v: helper.make_node(  # noqa: E731
        "Constant", [], [name], value=numpy_helper.from_array(np.array(v, np.float32)))
    nodes = [c("k", 0.70710677), c("one", 1.0), c("half", 0.5),
             helper.make_node("Mul", ["k", "x"], ["t"]), helper.make_node("Erf", ["t"], ["e"]),
             helper.make_node("Add", ["one", "e"], ["a"]),
             helper.make_node("Mul", ["x", "half"], ["h"]),
             helper.make_node("Mul", ["h", "a"], ["y"])]
    model = build(nodes, [("x", [3, 4])], [("y", None)])
    grads_vs_torch(model, [rand(0, 3, 4)], torch.nn.functional.gelu)


def recorded_ops(g):
    """The op name of every node of ``g``, from ``g.summary()``."""
    return [line.split()[1] for line in g.summary().splitlines()[1:-1]]


def test_channel_last_file_records_no_transpose():
    """A channel-last file (Transpose to NCHW, Conv, BatchNorm, Relu,
    Transpose back, as yscv.onnx.export writes) runs on yscv's channel-last
    ops with no transpose node; in an NCHW file the chain changes layout
    once on the way in and once on the way out."""
    w = rand(0, 4, 3, 3, 3)
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 3, 1, 2]),
             helper.make_node("Conv", ["t", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "s", "b", "mu", "var"], ["n"]),
             helper.make_node("Relu", ["n"], ["r"]),
             helper.make_node("Transpose", ["r"], ["y"], perm=[0, 2, 3, 1])]
    inits = [("w", w), ("s", rand(1, 4)), ("b", rand(2, 4)), ("mu", rand(3, 4)),
             ("var", np.abs(rand(4, 4)) + 0.5)]
    model = build(nodes, [("x", [2, 5, 5, 3])], [("y", None)], inits)
    x = rand(5, 2, 5, 5, 3)
    g, _, y = forward(yscv.onnx.load(model), x)
    np.testing.assert_allclose(g.value(y), ort_run(model, {"x": x})[0], **TOL)
    ops = recorded_ops(g)
    assert "conv2d" in ops and "transpose" not in ops
    nchw = build(nodes[1:4], [("t", [2, 3, 5, 5])], [("r", None)], inits)
    xt = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    g, _, y = forward(yscv.onnx.load(nchw), xt)
    np.testing.assert_allclose(g.value(y), ort_run(nchw, {"t": xt})[0], **TOL)
    assert recorded_ops(g).count("transpose") == 2


# ------------------------------------------------------------ indexing
def test_gather_and_scatter_elements_against_torch():
    torch = pytest.importorskip("torch")
    idx = np.array([[0, 2], [1, -1], [3, 0]], np.int64)
    sidx = np.array([[0, 1], [2, 3], [1, 0]], np.int64)
    nodes = [helper.make_node("GatherElements", ["x", "i"], ["a"], axis=1),
             helper.make_node("ScatterElements", ["x", "s", "a"], ["b"], axis=1, reduction="add"),
             helper.make_node("ScatterElements", ["b", "s", "a"], ["y"], axis=1)]
    model = build(nodes, [("x", [3, 4])], [("y", None)], [("i", idx), ("s", sidx)], opset=18)

    def fn(x):
        a = torch.gather(x, 1, torch.tensor(idx % 4))
        b = x.scatter_add(1, torch.tensor(sidx), a)
        return b.scatter(1, torch.tensor(sidx), a)
    grads_vs_torch(model, [rand(0, 3, 4)], fn)


def test_scatter_nd_depth_to_space_isinf_against_onnxruntime():
    idx = np.array([[1, 0], [0, 2]], np.int64)
    nodes = [helper.make_node("ScatterND", ["x", "i", "u"], ["s"]),
             helper.make_node("Reshape", ["s", "shape"], ["r"]),
             helper.make_node("DepthToSpace", ["r"], ["dcr"], blocksize=2),
             helper.make_node("DepthToSpace", ["r"], ["crd"], blocksize=2, mode="CRD"),
             helper.make_node("Add", ["dcr", "crd"], ["sum"]),
             helper.make_node("IsInf", ["sum"], ["inf"]),
             helper.make_node("Where", ["inf", "crd", "sum"], ["y"])]
    inits = [("i", idx), ("shape", np.array([1, 8, 3, 1], np.int64))]
    model = build(nodes, [("x", [2, 3, 4]), ("u", [2, 4])], [("y", None)], inits)
    x, u = rand(0, 2, 3, 4), rand(1, 2, 4)
    m = yscv.onnx.load(model)
    g, _, y = forward(m, x, u)
    np.testing.assert_allclose(g.value(y), ort_run(model, {"x": x, "u": u})[0], **TOL)
    m.to(np.float64)
    assert yscv.gradcheck(lambda g, x, u: g.sum(m(g, x, u) * np.arange(24.0).reshape(1, 2, 6, 2)),
                          [x.astype(np.float64), u.astype(np.float64)])


def test_deform_conv_against_onnxruntime():
    w, b = rand(0, 4, 2, 3, 3), rand(1, 4)
    node = helper.make_node("DeformConv", ["x", "w", "off", "b"], ["y"], pads=[1, 1, 1, 1],
                            kernel_shape=[3, 3])
    model = build([node], [("x", [1, 2, 5, 5]), ("off", [1, 18, 5, 5])], [("y", None)],
                  [("w", w), ("b", b)], opset=19)
    x, off = rand(2, 1, 2, 5, 5), rand(3, 1, 18, 5, 5)
    g, _, y = forward(yscv.onnx.load(model), x, off)
    np.testing.assert_allclose(g.value(y), ort_run(model, {"x": x, "off": off})[0], **TOL)


def test_batchnorm_buffers_follow_to_float64_and_load_state_dict():
    """Running statistics are read from the module's buffers at each call:
    after ``to(np.float64)`` (which replaces the arrays) and after
    ``load_state_dict`` the call uses the new values."""
    inits = [("s", rand(1, 3) + 1), ("b", rand(2, 3)), ("mu", rand(3, 3)),
             ("var", np.abs(rand(4, 3)) + 0.5)]
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "mu", "var"], ["y"])
    model = build([node], [("x", [2, 3, 4])], [("y", None)], inits)
    x = rand(5, 2, 3, 4)
    m = yscv.onnx.load(model)
    m.to(np.float64)
    g = yscv.Graph(np.float64)
    y = m(g, g.constant(x.astype(np.float64)))
    assert g.value(y).dtype == np.float64
    np.testing.assert_allclose(g.value(y), ort_run(model, {"x": x})[0], **TOL)
    sd = m.state_dict()
    sd["mu"] = sd["mu"] + 1.0
    m.load_state_dict(sd)
    g2 = yscv.Graph(np.float64)
    y2 = m(g2, g2.constant(x.astype(np.float64)))
    scale = (inits[0][1] / np.sqrt(inits[3][1] + 1e-5))[None, :, None]
    np.testing.assert_allclose(g2.value(y2), g.value(y) - scale, rtol=1e-6, atol=1e-6)
