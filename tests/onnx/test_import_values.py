"""``yscv.onnx.load`` values and element types against ONNX Runtime:
negative Flatten axes, Clip bounds, per-channel PRelu, ConvTranspose
padding, reductions over empty axes, scalar Gather results, and integer
dtypes kept through static ops. Gradients are checked to flow through the
data ops."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import yscv  # noqa: E402
import yscv.onnx  # noqa: E402

F = TensorProto.FLOAT


def build(nodes, inputs, outputs, inits=(), opset=17):
    """A ModelProto: ``inputs`` / ``outputs`` are (name, shape, elem) triples,
    ``inits`` (name, array) pairs."""
    ins = [helper.make_tensor_value_info(n, e, s) for n, s, e in inputs]
    outs = [helper.make_tensor_value_info(n, e, s) for n, s, e in outputs]
    graph = helper.make_graph(nodes, "g", ins, outs,
                              [numpy_helper.from_array(np.asarray(a), n) for n, a in inits])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def ort_run(model, feeds):
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def rand(seed, *shape):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def run_yscv(model, *xs):
    """The model's outputs on float variables, and the graph and inputs."""
    m = yscv.onnx.load(model)
    g = yscv.Graph()
    ins = [g.variable(x) if x.dtype.kind == "f" else x for x in xs]
    y = m(g, *ins)
    return g, ins, y


def value(g, y):
    return np.asarray(g.value(y)) if isinstance(y, yscv.NodeId) else np.asarray(y)


def assert_grad_flows(g, y, x):
    """A finite nonzero gradient of input ``x`` through ``y``."""
    g.backward(g.sum(y * y))
    gx = np.asarray(g.grad(x))
    assert np.all(np.isfinite(gx)) and np.any(gx != 0)


# ------------------------------------------------------------- Flatten
@pytest.mark.parametrize("axis", [-1, -2, -3, 0, 2])
def test_flatten_negative_axis_counts_from_the_end(axis):
    x = rand(0, 2, 3, 4)
    model = build([helper.make_node("Flatten", ["x"], ["y"], axis=axis)],
                  [("x", [2, 3, 4], F)], [("y", None, F)])
    g, (xv,), y = run_yscv(model, x)
    (want,) = ort_run(model, {"x": x})
    assert value(g, y).shape == want.shape
    np.testing.assert_allclose(value(g, y), want, rtol=1e-6)
    assert_grad_flows(g, y, xv)


# ---------------------------------------------------------------- Clip
@pytest.mark.parametrize("bounds", [(), (2.0, 1.0), (None, 0.5), (-0.5, None), (-0.5, 0.5)])
def test_clip_bounds_as_onnx_defines_them(bounds):
    """No bounds: the identity; min > max: every value is max."""
    names, inits = [], []
    for i, b in enumerate(bounds):
        if b is None:
            names.append("")
        else:
            names.append(f"b{i}")
            inits.append((f"b{i}", np.array(b, np.float32)))
    x = rand(1, 3, 4)
    model = build([helper.make_node("Clip", ["x", *names], ["y"])],
                  [("x", [3, 4], F)], [("y", [3, 4], F)], inits=inits)
    g, (xv,), y = run_yscv(model, x)
    (want,) = ort_run(model, {"x": x})
    np.testing.assert_allclose(value(g, y), want, rtol=1e-6)
    g.backward(g.sum(y * 3.0))
    inside = np.ones_like(x) if not bounds else (want == x).astype(np.float32)
    if bounds == (2.0, 1.0):
        inside = np.zeros_like(x)
    np.testing.assert_allclose(np.asarray(g.grad(xv)), 3.0 * inside)


@pytest.mark.parametrize("elem,dt", [(TensorProto.INT8, np.int8), (TensorProto.UINT8, np.uint8),
                                     (TensorProto.INT64, np.int64)])
def test_clip_on_integers_keeps_the_dtype(elem, dt):
    x = np.array([[-100, 0, 3], [7, 100, 1]]).astype(dt) if dt != np.uint8 else \
        np.array([[0, 200, 3], [7, 100, 1]], dt)
    lo, hi = np.array(1, dt), np.array(50, dt)
    model = build([helper.make_node("Clip", ["x", "lo", "hi"], ["y"])],
                  [("x", [2, 3], elem), ("lo", [], elem), ("hi", [], elem)],
                  [("y", [2, 3], elem)])
    m = yscv.onnx.load(model)
    y = m(yscv.Graph(), x, lo, hi)
    (want,) = ort_run(model, {"x": x, "lo": lo, "hi": hi})
    assert y.dtype == want.dtype == dt
    np.testing.assert_array_equal(y, want)


# --------------------------------------------------------------- PRelu
def test_prelu_opset6_slope_is_per_channel():
    """Before opset 7 a 1-D slope of C values is one slope per channel."""
    x, slope = rand(2, 2, 3, 4, 5), np.array([0.1, -0.5, 2.0], np.float32)
    model = build([helper.make_node("PRelu", ["x", "s"], ["y"])],
                  [("x", [2, 3, 4, 5], F)], [("y", [2, 3, 4, 5], F)],
                  inits=[("s", slope)], opset=6)
    g, (xv,), y = run_yscv(model, x)
    torch = pytest.importorskip("torch")
    want = torch.nn.functional.prelu(torch.from_numpy(x), torch.from_numpy(slope)).numpy()
    np.testing.assert_allclose(value(g, y), want, rtol=1e-6)
    assert_grad_flows(g, y, xv)


# ---------------------------------------------------------- reductions
@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin", "ReduceProd", "ReduceLogSumExp",
                                "ReduceSum"])
@pytest.mark.parametrize("keep", [0, 1])
def test_reduce_over_an_empty_axis_gives_the_identity(op, keep):
    """Opset 18: -inf for max and logsumexp, +inf for min, 1 for prod, 0 for sum."""
    x = np.zeros((2, 0, 4), np.float32)
    axes = np.array([1], np.int64)
    model = build([helper.make_node(op, ["x", "axes"], ["y"], keepdims=keep)],
                  [("x", [2, 0, 4], F)], [("y", None, F)], inits=[("axes", axes)], opset=18)
    g, (xv,), y = run_yscv(model, x)
    (want,) = ort_run(model, {"x": x})
    np.testing.assert_array_equal(value(g, y), want)
    if op in ("ReduceSum", "ReduceProd"):  # finite results: x stays in the graph
        g.backward(g.sum(y))
        assert np.asarray(g.grad(xv)).shape == (2, 0, 4)


def test_reduce_max_over_an_empty_axis_of_booleans_is_false():
    x = np.zeros((2, 0, 4), bool)
    B = TensorProto.BOOL
    model = build([helper.make_node("ReduceMax", ["x", "axes"], ["y"], keepdims=1)],
                  [("x", [2, 0, 4], B)], [("y", None, B)],
                  inits=[("axes", np.array([1], np.int64))], opset=20)
    y = yscv.onnx.load(model)(yscv.Graph(), x)
    assert y.dtype == bool and y.shape == (2, 1, 4) and not y.any()


def test_reduce_prod_on_data_with_its_gradient():
    torch = pytest.importorskip("torch")
    x = rand(3, 3, 4, 2)
    model = build([helper.make_node("ReduceProd", ["x", "axes"], ["y"], keepdims=0)],
                  [("x", [3, 4, 2], F)], [("y", None, F)],
                  inits=[("axes", np.array([1], np.int64))], opset=18)
    g, (xv,), y = run_yscv(model, x)
    (want,) = ort_run(model, {"x": x})
    np.testing.assert_allclose(value(g, y), want, rtol=1e-5)
    g.backward(g.sum(y))
    xt = torch.from_numpy(x).requires_grad_()
    xt.prod(1).sum().backward()
    np.testing.assert_allclose(np.asarray(g.grad(xv)), xt.grad.numpy(), rtol=1e-5)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceSumSquare", "ReduceMax",
                                "ReduceProd"])
def test_reductions_of_int32_values_stay_int32(op):
    x = np.array([[1, -2, 4], [3, 4, -7]], np.int32)
    I32 = TensorProto.INT32
    model = build([helper.make_node(op, ["x", "axes"], ["y"], keepdims=0)],
                  [("x", [2, 3], I32)], [("y", None, I32)],
                  inits=[("axes", np.array([1], np.int64))], opset=18)
    y = yscv.onnx.load(model)(yscv.Graph(), x)
    (want,) = ort_run(model, {"x": x})
    assert isinstance(y, np.ndarray) and y.dtype == want.dtype == np.int32
    np.testing.assert_array_equal(y, want)


# --------------------------------------------------------------- Gather
def test_gather_with_a_scalar_index_gives_a_static_value():
    """Range(0, Gather(Shape(x), 1), 1) (torch.arange(x.size(1))): the
    gathered dimension is a static scalar, not data."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "one"], ["n"], axis=0),
             helper.make_node("Range", ["zero", "n", "step"], ["r"]),
             helper.make_node("Cast", ["r"], ["rf"], to=F),
             helper.make_node("Mul", ["x", "rf"], ["y"])]
    inits = [("one", np.array(2, np.int64)), ("zero", np.array(0, np.int64)),
             ("step", np.array(1, np.int64))]
    model = build(nodes, [("x", [2, 3, 5], F)], [("y", [2, 3, 5], F)], inits=inits)
    x = rand(4, 2, 3, 5)
    g, (xv,), y = run_yscv(model, x)
    (want,) = ort_run(model, {"x": x})
    np.testing.assert_allclose(value(g, y), want, rtol=1e-6)
    assert_grad_flows(g, y, xv)


# -------------------------------------------------------- ConvTranspose
def reference_run(model, feeds):
    """ONNX's reference evaluator (the backend suite's oracle)."""
    from onnx.reference import ReferenceEvaluator
    return ReferenceEvaluator(model).run(None, feeds)


@pytest.mark.parametrize("attrs,oracles", [
    (dict(auto_pad="SAME_UPPER", strides=[2, 2]), "ref ort"),
    (dict(auto_pad="SAME_LOWER", strides=[2, 2]), "ref ort"),
    (dict(auto_pad="SAME_UPPER", strides=[2, 3]), "ref"),      # odd totals: ORT splits them
    (dict(output_shape=[10, 8], strides=[3, 2]), "ref ort"),   # larger: zeros at the end
    (dict(output_shape=[5, 3], strides=[2, 1]), "ort"),        # smaller: cropped
    (dict(output_shape=[6, 6], strides=[2, 2]), "ort"),        # odd: the larger crop first
])
def test_conv_transpose_auto_pad_and_output_shape(attrs, oracles):
    """SAME_UPPER puts the larger half of the padding at the end, SAME_LOWER
    at the start (ONNX's reference); an output_shape larger than the result
    pads it with zeros."""
    x, w = rand(5, 1, 2, 3, 3), rand(6, 2, 3, 3, 3)
    model = build([helper.make_node("ConvTranspose", ["x", "w"], ["y"], **attrs)],
                  [("x", [1, 2, 3, 3], F)], [("y", None, F)], inits=[("w", w)])
    g, (xv,), y = run_yscv(model, x)
    for oracle in oracles.split():
        (want,) = (reference_run if oracle == "ref" else ort_run)(model, {"x": x})
        assert value(g, y).shape == want.shape
        np.testing.assert_allclose(value(g, y), want, rtol=1e-5, atol=1e-5, err_msg=oracle)
    assert_grad_flows(g, y, xv)


# --------------------------------------------------------------- dtypes
@pytest.mark.parametrize("elem,dt", [(TensorProto.UINT8, np.uint8), (TensorProto.INT8, np.int8)])
def test_max_pool_on_small_integers_keeps_the_dtype(elem, dt):
    info = np.iinfo(dt)
    x = np.random.default_rng(7).integers(info.min, info.max, (1, 2, 5, 5), endpoint=True).astype(dt)
    model = build([helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], pads=[1, 1, 0, 0])],
                  [("x", [1, 2, 5, 5], elem)], [("y", None, elem)], opset=12)
    y = yscv.onnx.load(model)(yscv.Graph(), x)
    (want,) = ort_run(model, {"x": x})
    assert y.dtype == want.dtype == dt
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("elem,dt", [(TensorProto.INT32, np.int32), (TensorProto.INT64, np.int64)])
def test_pow_of_an_integer_base_has_the_base_type(elem, dt):
    """Pow(int, float) is an integer (ONNX: the type of the base), also when
    the exponent is float data."""
    x, e = np.array([1, 2, 3, 5], dt), np.array([2.0, 0.5, 3.0, 1.5], np.float32)
    model = build([helper.make_node("Pow", ["x", "e"], ["y"])],
                  [("x", [4], elem), ("e", [4], F)], [("y", [4], elem)], opset=15)
    m = yscv.onnx.load(model)
    g = yscv.Graph()
    y = m(g, x, g.variable(e))
    (want,) = ort_run(model, {"x": x, "e": e})
    assert isinstance(y, np.ndarray) and y.dtype == want.dtype == dt
    np.testing.assert_array_equal(y, want)


def test_pow_of_int64_with_an_integer_exponent_is_exact():
    x, e = np.array([3, -2, 7], np.int64), np.array([39, 3, 0], np.int64)
    I64 = TensorProto.INT64
    model = build([helper.make_node("Pow", ["x", "e"], ["y"])],
                  [("x", [3], I64), ("e", [3], I64)], [("y", [3], I64)], opset=15)
    y = yscv.onnx.load(model)(yscv.Graph(), x, e)
    (want,) = ort_run(model, {"x": x, "e": e})
    assert y.dtype == want.dtype == np.int64
    assert y.tolist() == [3 ** 39, -8, 1]           # Python's exact integers
    assert y[1:].tolist() == want[1:].tolist()     # ORT (through double) agrees below 2**53


def test_backend_does_not_cast_integer_outputs():
    """yscv.onnx.backend converts float outputs to the declared float type
    only: an integer output is the importer's own array."""
    from yscv.onnx import backend
    model = build([helper.make_node("Shape", ["x"], ["s"]),
                   helper.make_node("Cast", ["s"], ["y"], to=TensorProto.INT32)],
                  [("x", [2, 3], F)], [("y", [2], TensorProto.INT32)])
    (y,) = backend.prepare(model).run([rand(8, 2, 3)])
    assert y.dtype == np.int32 and y.tolist() == [2, 3]

    class Int64Out:  # an importer result of the wrong integer type stays visible
        input_names = []

        def __call__(self, g):
            return np.array([2, 3], np.int64)
    (y,) = backend.YscvRep(Int64Out(), np.float32, [np.dtype(np.int32)]).run([])
    assert y.dtype == np.int64
    half = build([helper.make_node("Relu", ["x"], ["y"])],
                 [("x", [3], TensorProto.FLOAT16)], [("y", [3], TensorProto.FLOAT16)])
    (y,) = backend.prepare(half).run([np.array([-1, 0.5, 2], np.float16)])
    assert y.dtype == np.float16 and y.tolist() == [0, 0.5, 2]


# ----------------------------------------------------------- Cast types
_NARROW = ["BFLOAT16", "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ",
           "FLOAT8E8M0", "FLOAT4E2M1", "INT4", "UINT4", "INT2", "UINT2"]


@pytest.mark.parametrize("saturate", [1, 0])
@pytest.mark.parametrize("to", _NARROW)
def test_cast_to_a_narrow_type_as_onnx_reference(to, saturate):
    """Cast to bfloat16 / float8 / 4-bit / 2-bit types: a static value in
    ml_dtypes' form, saturated as ONNX defines (out-of-range values, inf)."""
    from onnx.reference import ReferenceEvaluator
    if not hasattr(TensorProto, to):
        pytest.skip(f"{to} unknown to this onnx")
    elem = getattr(TensorProto, to)
    x = np.array([0.0, -0.3, 1.7, 3.5, -7.0, 300.0, 1e6, -np.inf, np.inf, np.nan], np.float32)
    if to.endswith(("INT4", "INT2")):
        x = np.array([0.0, 1.0, -1.0, 2.0, 3.0, 7.0, -8.0], np.float32)
    attrs = dict(to=elem) if to.endswith(("INT4", "INT2", "BFLOAT16")) else \
        dict(to=elem, saturate=saturate)
    model = build([helper.make_node("Cast", ["x"], ["y"], **attrs)],
                  [("x", [x.size], F)], [("y", [x.size], elem)], opset=25)
    m = yscv.onnx.load(model)
    g = yscv.Graph()
    y = m(g, g.variable(x))
    with np.errstate(invalid="ignore", over="ignore"):
        (want,) = ReferenceEvaluator(model).run(None, {"x": x})
    assert isinstance(y, np.ndarray) and y.dtype == want.dtype
    np.testing.assert_array_equal(y.astype(np.float32), want.astype(np.float32))


def test_cast_to_float8_and_back_is_quantisation():
    """The quantisation graph Cast(FLOAT8E4M3FN) -> Cast(FLOAT) rounds the
    values to the float8 grid (ONNX Runtime agrees)."""
    x = np.array([0.1, 1.3, -2.6, 500.0, 0.001], np.float32)
    model = build([helper.make_node("Cast", ["x"], ["q"], to=TensorProto.FLOAT8E4M3FN),
                   helper.make_node("Cast", ["q"], ["y"], to=F)],
                  [("x", [5], F)], [("y", [5], F)], opset=21)
    g = yscv.Graph()
    y = yscv.onnx.load(model)(g, g.variable(x))
    (want,) = ort_run(model, {"x": x})
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y, want)


def test_graph_inputs_of_narrow_types_stay_refused():
    for to in ("BFLOAT16", "FLOAT8E4M3FN", "INT4"):
        elem = getattr(TensorProto, to)
        model = build([helper.make_node("Cast", ["x"], ["y"], to=F)],
                      [("x", [3], elem)], [("y", [3], F)], opset=21)
        with pytest.raises(yscv.onnx.OnnxImportError, match=f"graph input 'x' has type {to}"):
            yscv.onnx.load(model)


def test_cast_like_a_float8_value_saturates():
    """CastLike to the type of a float8 value saturates as Cast does."""
    x = np.array([1.0, 1000.0, -1e6], np.float32)
    model = build([helper.make_node("Cast", ["x"], ["q"], to=TensorProto.FLOAT8E4M3FN),
                   helper.make_node("CastLike", ["x", "q"], ["y"]),
                   helper.make_node("Cast", ["y"], ["z"], to=F)],
                  [("x", [3], F)], [("z", [3], F)], opset=21)
    g = yscv.Graph()
    z = yscv.onnx.load(model)(g, g.variable(x))
    (want,) = ort_run(model, {"x": x})
    np.testing.assert_array_equal(z, want)
    assert z.tolist() == [1.0, 448.0, -448.0]


@pytest.mark.parametrize("attrs", [dict(strides=[2, 1, 2], pads=[1, 0, 1, 1, 0, 1]),
                                   dict(pads=[1, 0, 0, 0, 1, 2], output_padding=[0, 0, 0]),
                                   dict(auto_pad="SAME_UPPER", strides=[2, 2, 2])])
def test_conv_transpose_3d(attrs):
    """3-D ConvTranspose on g.conv_transpose3d; input and weight gradients as PyTorch's."""
    torch = pytest.importorskip("torch")
    x, w, b = rand(10, 1, 2, 3, 4, 3), rand(11, 2, 3, 2, 3, 2), rand(12, 3)
    model = build([helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], **attrs)],
                  [("x", [1, 2, 3, 4, 3], F)], [("y", None, F)], inits=[("w", w), ("b", b)])
    m = yscv.onnx.load(model)
    g = yscv.Graph()
    xv = g.variable(x)
    y = m(g, xv)
    (want,) = ort_run(model, {"x": x})
    np.testing.assert_allclose(value(g, y), want, rtol=1e-4, atol=1e-5)
    ct = rand(13, *want.shape)
    g.backward(y, ct)
    # PyTorch: the unpadded transposed convolution, then ONNX's crop
    xt, wt = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    full = torch.nn.functional.conv_transpose3d(xt, wt, torch.tensor(b),
                                                stride=attrs.get("strides", 1))
    pads = attrs.get("pads")
    if pads is None:  # SAME_UPPER, stride 2: total = full - 2 * input, larger half at the end
        pads = []
        tot = [f - 2 * n for f, n in zip(full.shape[2:], x.shape[2:])]
        pads = [t // 2 for t in tot] + [t - t // 2 for t in tot]
    key = (slice(None), slice(None)) + tuple(
        slice(pads[i], full.shape[2 + i] - pads[i + 3]) for i in range(3))
    full[key].backward(torch.tensor(ct))
    np.testing.assert_allclose(np.asarray(g.grad(xv)), xt.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(m.file_layout("w", m.parameter("w").grad), wt.grad.numpy(),
                               rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------ refusals
def test_load_refuses_string_constants_and_non_tensor_outputs():
    """At load, naming the node or the output: a Constant of strings, a
    graph output that is a sequence or of a type yscv cannot hold."""
    x = [("x", [2], F)]
    strings = build([helper.make_node("Constant", [], ["c"], value_strings=["a", "b"]),
                     helper.make_node("Shape", ["c"], ["y"])],
                    x, [("y", [1], TensorProto.INT64)])
    with pytest.raises(yscv.onnx.OnnxImportError,
                       match=r"operator 'Constant' \(node '#0', index 0\): no supported value "
                             r"attribute among \['value_strings'\]"):
        yscv.onnx.load(strings)
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", F, [2])],
                              [helper.make_tensor_sequence_value_info("y", F, [2])])
    seq = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(yscv.onnx.OnnxImportError, match="graph output 'y' is not a tensor"):
        yscv.onnx.load(seq)
    cplx = build([helper.make_node("Identity", ["x"], ["y"])], x,
                 [("y", [2], TensorProto.COMPLEX64)])
    with pytest.raises(yscv.onnx.OnnxImportError,
                       match="graph output 'y' has type COMPLEX64, which yscv cannot hold"):
        yscv.onnx.load(cplx)
