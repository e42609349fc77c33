"""yscv.onnx.load on graphs with subgraphs and sequences: If, Loop, Scan
(_import_control), the sequence operators (_import_sequence), and on the
``ai.onnx.preview.training`` operators, the random generators and the
feature-extraction and optional operators of _import_ml.

Oracles: ONNX Runtime and ONNX's reference implementation for the values;
yscv.gradcheck (float64) through the unrolled loops, the sequence ops and
the optimiser updates; for Gradient, the analytic derivative.
"""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import yscv  # noqa: E402
import yscv.onnx  # noqa: E402
from yscv.onnx import OnnxImportError  # noqa: E402

from _onenode import check_grad, one_node, ort_run, yscv_run  # noqa: E402

F = TensorProto.FLOAT


def vi(name, elem=F, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def model_of(nodes, inputs, outputs, opset=17, extra=()):
    m = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs),
                          opset_imports=[helper.make_opsetid("", opset), *extra])
    m.ir_version = 8
    return m


def check_values(model, ins, oracle="ort", rtol=1e-5, atol=1e-6):
    want = (ort_run(model, ins) if oracle == "ort"
            else ReferenceEvaluator(model).run(None, dict(ins)))
    got, *_ = yscv_run(model, ins)
    for a, b in zip(got, want):
        assert a.shape == b.shape
        if b.dtype.kind != "f":
            assert a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


def scan_body():
    """(state [2], x_t [2]) -> (state + x_t * w, tanh(state) * x_t); w from outside."""
    return helper.make_graph(
        [helper.make_node("Mul", ["xt", "w"], ["xw"]),
         helper.make_node("Add", ["s", "xw"], ["s2"]),
         helper.make_node("Tanh", ["s"], ["ts"]),
         helper.make_node("Mul", ["ts", "xt"], ["o"])],
        "body", [vi("s", F, [2]), vi("xt", F, [2])], [vi("s2", F, [2]), vi("o", F, [2])])


@pytest.mark.parametrize("reverse,out_axis", [(0, 0), (1, 1)])
def test_scan_matches_ort_and_has_gradients(reverse, out_axis):
    s0 = np.array([0.5, -0.2], np.float32)
    x = np.random.default_rng(0).standard_normal((4, 2)).astype(np.float32)
    w = np.array([0.7, -1.3], np.float32)
    node = helper.make_node("Scan", ["s0", "x", "w"][:2], ["s", "ys"], body=scan_body(),
                            num_scan_inputs=1, scan_input_directions=[reverse],
                            scan_output_axes=[out_axis])
    graph = helper.make_graph([node], "g", [vi("s0", F, [2]), vi("x", F, [4, 2]),
                                            vi("w", F, [2])],
                              [vi("s", F, [2]), vi("ys", F, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    ins = [("s0", s0), ("x", x), ("w", w)]
    check_values(model, ins)
    check_grad(model, ins, wrt=(0, 1, 2), out=0)   # w is read by the body from outside
    check_grad(model, ins, wrt=(0, 1), out=1)


def loop_body():
    """(i, cond, y) -> (y_sum < 10, y * 1.5 + i, y); stops when the sum passes 10."""
    return helper.make_graph(
        [helper.make_node("Cast", ["i"], ["fi"], to=F),
         helper.make_node("Constant", [], ["k"], value=helper.make_tensor("k", F, [], [1.5])),
         helper.make_node("Mul", ["y", "k"], ["yk"]),
         helper.make_node("Add", ["yk", "fi"], ["y2"]),
         helper.make_node("ReduceSum", ["y2"], ["tot"], keepdims=0),
         helper.make_node("Constant", [], ["ten"], value=helper.make_tensor("ten", F, [], [10.0])),
         helper.make_node("Less", ["tot", "ten"], ["c2"]),
         helper.make_node("Identity", ["y"], ["scan"])],
        "body", [vi("i", TensorProto.INT64, []), vi("c", TensorProto.BOOL, []), vi("y", F, [2])],
        [vi("c2", TensorProto.BOOL, []), vi("y2", F, [2]), vi("scan", F, [2])])


@pytest.mark.parametrize("trip", [2, 20])
def test_loop_matches_ort_and_has_gradients(trip):
    node = helper.make_node("Loop", ["m", "c", "y0"], ["y", "ys"], body=loop_body())
    model = model_of([node], [vi("m", TensorProto.INT64, []), vi("c", TensorProto.BOOL, []),
                              vi("y0", F, [2])], [vi("y", F, [2]), vi("ys", F, None)])
    ins = [("m", np.array(trip, np.int64)), ("c", np.array(True)),
           ("y0", np.array([0.5, 1.0], np.float32))]
    check_values(model, ins)
    (_, ys), *_ = yscv_run(model, ins)
    assert ys.shape[0] == (2 if trip == 2 else 3)   # the condition stops the long one
    check_grad(model, ins, wrt=(2,), out=0)
    check_grad(model, ins, wrt=(2,), out=1)


def test_if_runs_the_selected_branch_with_gradients():
    then = helper.make_graph([helper.make_node("Mul", ["x", "x"], ["t"])], "then", [],
                             [vi("t", F, [3])])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [],
                              [vi("e", F, [3])])
    node = helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)
    model = model_of([node], [vi("c", TensorProto.BOOL, []), vi("x", F, [3])], [vi("y", F, [3])])
    x = np.array([1.0, -2.0, 0.5], np.float32)
    for c in (True, False):
        ins = [("c", np.array(c)), ("x", x)]
        check_values(model, ins)
        check_grad(model, ins, wrt=(1,))


def test_a_subgraph_with_an_unsupported_operator_is_refused_at_load():
    then = helper.make_graph([helper.make_node("StringNormalizer", ["x"], ["t"])], "then", [],
                             [vi("t", F, [3])])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [],
                              [vi("e", F, [3])])
    model = model_of([helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
                     [vi("c", TensorProto.BOOL, []), vi("x", F, [3])], [vi("y", F, [3])])
    with pytest.raises(OnnxImportError, match=r"'StringNormalizer' \(node '#0/0', index 0/0\)"):
        yscv.onnx.load(model)


def test_sequence_operators_compose_with_gradients():
    """Split x into a sequence, drop one piece, insert y at the front, read one,
    concatenate all: ONNX Runtime's values; gradients reach x and y."""
    nodes = [helper.make_node("SplitToSequence", ["x"], ["s"], axis=1, keepdims=1),
             helper.make_node("Constant", [], ["one"], value=helper.make_tensor(
                 "one", TensorProto.INT64, [], [1])),
             helper.make_node("SequenceErase", ["s", "one"], ["s2"]),
             helper.make_node("Constant", [], ["zero"], value=helper.make_tensor(
                 "zero", TensorProto.INT64, [], [0])),
             helper.make_node("SequenceInsert", ["s2", "y", "zero"], ["s3"]),
             helper.make_node("SequenceAt", ["s3", "one"], ["a"]),
             helper.make_node("SequenceLength", ["s3"], ["n"]),
             helper.make_node("ConcatFromSequence", ["s3"], ["c"], axis=1)]
    model = model_of(nodes, [vi("x", F, [2, 3]), vi("y", F, [2, 1])],
                     [vi("c", F, None), vi("a", F, None), vi("n", TensorProto.INT64, None)])
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    ins = [("x", x), ("y", np.array([[9.0], [8.0]], np.float32))]
    check_values(model, ins)
    check_grad(model, ins, wrt=(0, 1), out=0)


def test_sequence_at_out_of_range_is_refused_at_call():
    nodes = [helper.make_node("SequenceConstruct", ["x", "x"], ["s"]),
             helper.make_node("Constant", [], ["p"], value=helper.make_tensor(
                 "p", TensorProto.INT64, [], [2])),
             helper.make_node("SequenceAt", ["s", "p"], ["y"])]
    m = yscv.onnx.load(model_of(nodes, [vi("x", F, [2])], [vi("y", F, [2])]))
    g = yscv.Graph()
    with pytest.raises(OnnxImportError, match="position 2 is out of range for a sequence of 2"):
        m(g, np.zeros(2, np.float32))
    assert len(g) == 0


TRAINING = helper.make_opsetid("ai.onnx.preview.training", 1)


@pytest.mark.parametrize("op,attrs,n_acc", [
    ("Adagrad", {"decay_factor": 0.1, "epsilon": 1e-6, "norm_coefficient": 0.01}, 1),
    ("Momentum", {"alpha": 0.9, "beta": 0.5, "mode": "nesterov", "norm_coefficient": 0.01}, 1),
    ("Adam", {"alpha": 0.8, "beta": 0.9, "epsilon": 1e-6, "norm_coefficient": 0.01,
              "norm_coefficient_post": 0.02}, 2)])
def test_optimiser_operators_match_the_reference_and_have_gradients(op, attrs, n_acc):
    rng = np.random.default_rng(0)
    names = ["r", "t", "x1", "x2", "g1", "g2"] + [f"a{k}{i}" for k in range(n_acc)
                                                  for i in (1, 2)]
    arrays = [np.array(0.1, np.float32), np.array(3, np.int64)] + [
        (np.abs(rng.standard_normal(3)) + 0.1).astype(np.float32) for _ in names[2:]]
    outs = [f"o{i}" for i in range(2 * (1 + n_acc))]
    node = helper.make_node(op, names, outs, domain="ai.onnx.preview.training", **attrs)
    model = model_of([node], [vi(n, TensorProto.INT64 if n == "t" else F, a.shape)
                              for n, a in zip(names, arrays)], [vi(o, F, None) for o in outs],
                     extra=[TRAINING])
    ins = list(zip(names, arrays))
    check_values(model, ins, oracle="reference", rtol=1e-5, atol=1e-6)
    check_grad(model, ins, wrt=(0, 2, 4, 6), out=0)


def test_gradient_operator_gives_the_derivative():
    nodes = [helper.make_node("Mul", ["a", "b"], ["c"]), helper.make_node("Sin", ["c"], ["d"]),
             helper.make_node("Gradient", ["a", "b"], ["da", "db"],
                              domain="ai.onnx.preview.training", xs=["a", "b"], y="d")]
    model = model_of(nodes, [vi("a", F, [3]), vi("b", F, [3])],
                     [vi("d", F, [3]), vi("da", F, [3]), vi("db", F, [3])], extra=[TRAINING])
    a, b = np.array([0.5, -1.0, 2.0], np.float32), np.array([1.5, 0.3, -0.7], np.float32)
    (_, da, db), *_ = yscv_run(model, [("a", a), ("b", b)])
    np.testing.assert_allclose(da, np.cos(a * b) * b, rtol=1e-5)
    np.testing.assert_allclose(db, np.cos(a * b) * a, rtol=1e-5)


def test_momentum_refuses_an_unknown_mode():
    names = ["r", "t", "x", "g", "v"]
    node = helper.make_node("Momentum", names, ["x2", "v2"], domain="ai.onnx.preview.training",
                            alpha=0.9, beta=0.1, mode="heavy", norm_coefficient=0.0)
    model = model_of([node], [vi(n, TensorProto.INT64 if n == "t" else F, [] if n in "rt"
                                 else [2]) for n in names], [vi("x2", F, None), vi("v2", F, None)],
                     extra=[TRAINING])
    with pytest.raises(OnnxImportError, match="mode='heavy' is not supported"):
        yscv.onnx.load(model)


def test_random_generators():
    p = np.array([0.0, 1.0, 0.0, 1.0] * 50, np.float64)
    m = one_node("Bernoulli", [("p", p)], opset=22, dtype=TensorProto.INT32, out=[np.int32])
    (y,), *_ = yscv_run(m, [("p", p)], dtype=np.float64)
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y, p.astype(np.int32))     # certain outcomes
    x = np.zeros((400, 50), np.float32)
    m = one_node("RandomNormalLike", [("x", x)], opset=22, mean=2.0, scale=0.5, seed=3.0)
    (a,), *_ = yscv_run(m, [("x", x)])
    (b,), *_ = yscv_run(m, [("x", x)])
    np.testing.assert_array_equal(a, b)                      # the seed repeats the draws
    assert a.dtype == np.float32 and abs(a.mean() - 2.0) < 0.01 and abs(a.std() - 0.5) < 0.01
    m = one_node("RandomUniformLike", [("x", x)], opset=22, low=-1.0, high=3.0)
    yscv.manual_seed(5)
    (u,), *_ = yscv_run(m, [("x", x)])
    yscv.manual_seed(5)
    (v,), *_ = yscv_run(m, [("x", x)])
    np.testing.assert_array_equal(u, v)                      # yscv.manual_seed repeats them
    assert u.min() >= -1.0 and u.max() < 3.0 and abs(u.mean() - 1.0) < 0.02
    with pytest.raises(OnnxImportError, match="dtype=8 .* is not supported"):
        yscv.onnx.load(one_node("RandomUniformLike", [("x", x)], opset=22,
                                dtype=TensorProto.STRING))


@pytest.mark.parametrize("mode,skip,lo", [("TF", 0, 2), ("IDF", 2, 1), ("TFIDF", 3, 1)])
def test_tfidf_vectorizer_matches_ort(mode, skip, lo):
    x = np.array([[1, 3, 2, 3, 4, 3, 4, 1], [4, 4, 3, 1, 2, 3, 1, 3]], np.int64)
    attrs = dict(mode=mode, max_skip_count=skip, min_gram_length=lo, max_gram_length=3,
                 ngram_counts=[0, 3, 7], ngram_indexes=[0, 1, 2, 3, 4, 5, 6],
                 pool_int64s=[1, 3, 4, 3, 4, 2, 3, 4, 3, 4, 3, 4, 1])
    if mode != "TF":
        attrs["weights"] = [0.5, 1.5, 2.0, 1.0, 3.0, 0.25, 4.0]
    model = one_node("TfIdfVectorizer", [("x", x)], out=[np.float32], opset=17, **attrs)
    check_values(model, [("x", x)])
    check_values(one_node("TfIdfVectorizer", [("x", x[0])], out=[np.float32], opset=17,
                          **attrs), [("x", x[0])])


def test_tfidf_vectorizer_refuses_a_string_pool():
    x = np.array([1, 2], np.int64)
    with pytest.raises(OnnxImportError, match="pool_strings is not supported"):
        yscv.onnx.load(one_node("TfIdfVectorizer", [("x", x)], out=[np.float32], mode="TF",
                                min_gram_length=1, max_gram_length=1, max_skip_count=0,
                                ngram_counts=[0], ngram_indexes=[0], pool_strings=["a"]))


ML = helper.make_opsetid("ai.onnx.ml", 3)


def test_ml_binarizer_and_array_feature_extractor():
    x = np.array([[0.5, 2.0, -1.0, 3.0], [1.0, 1.5, 0.0, -2.0]], np.float32)
    idx = np.array([3, 1, 1], np.int64)
    nodes = [helper.make_node("Binarizer", ["x"], ["b"], domain="ai.onnx.ml", threshold=1.0),
             helper.make_node("ArrayFeatureExtractor", ["x", "i"], ["z"], domain="ai.onnx.ml")]
    model = model_of(nodes, [vi("x", F, [2, 4]), vi("i", TensorProto.INT64, [3])],
                     [vi("b", F, None), vi("z", F, None)], extra=[ML])
    ins = [("x", x), ("i", idx)]
    check_values(model, ins)
    check_grad(model, ins, wrt=(0,), out=1)


def test_optional_operators_inside_a_graph():
    nodes = [helper.make_node("Optional", ["x"], ["o"]),
             helper.make_node("OptionalHasElement", ["o"], ["h"]),
             helper.make_node("OptionalGetElement", ["o"], ["e"]),
             helper.make_node("Mul", ["e", "e"], ["y"])]
    model = model_of(nodes, [vi("x", F, [3])], [vi("h", TensorProto.BOOL, None),
                                                vi("y", F, None)], opset=18)
    ins = [("x", np.array([1.0, -2.0, 3.0], np.float32))]
    (h, y), *_ = yscv_run(model, ins)
    assert h.dtype == np.bool_ and bool(h)
    np.testing.assert_allclose(y, ins[0][1] ** 2)
    check_grad(model, ins, out=1)
    empty = [helper.make_node("Optional", [], ["o"], type=helper.make_tensor_type_proto(F, [3])),
             helper.make_node("OptionalHasElement", ["o"], ["h"])]
    (h,), *_ = yscv_run(model_of(empty, [], [vi("h", TensorProto.BOOL, None)], opset=18), [])
    assert not bool(h)


def test_sequence_map_runs_its_body_per_element_with_gradients():
    body = helper.make_graph([helper.make_node("Mul", ["e", "w"], ["m"]),
                              helper.make_node("ReduceSum", ["m"], ["r"], keepdims=1)], "body",
                             [vi("e", F, None), vi("w", F, None)], [vi("r", F, None)])
    nodes = [helper.make_node("SplitToSequence", ["x"], ["s"], axis=0, keepdims=0),
             helper.make_node("SequenceMap", ["s", "w"], ["t"], body=body),
             helper.make_node("ConcatFromSequence", ["t"], ["y"], axis=0)]
    model = model_of(nodes, [vi("x", F, [3, 4]), vi("w", F, [4])], [vi("y", F, None)])
    ins = [("x", np.arange(12, dtype=np.float32).reshape(3, 4) * 0.5),
           ("w", np.array([1.0, -2.0, 0.5, 3.0], np.float32))]
    check_values(model, ins)
    check_grad(model, ins, wrt=(0, 1))


@pytest.mark.parametrize("agg", [0, 1, 2, 3])
def test_tree_ensemble_matches_the_reference(agg):
    """Two trees (one with a set-membership node) over three features."""
    attrs = dict(
        aggregate_function=agg, n_targets=2, tree_roots=[0, 2],
        nodes_featureids=[0, 1, 2], nodes_modes=helper.make_tensor("m", TensorProto.UINT8, [3],
                                                                   [0, 3, 6]),
        nodes_splits=helper.make_tensor("s", F, [3], [0.5, -1.0, 0.0]),
        nodes_truenodeids=[1, 0, 2], nodes_trueleafs=[0, 1, 1],
        nodes_falsenodeids=[1, 1, 3], nodes_falseleafs=[1, 1, 1],
        leaf_targetids=[0, 1, 1, 0], leaf_weights=helper.make_tensor("w", F, [4],
                                                                     [1.5, -2.0, 4.0, 0.25]),
        membership_values=helper.make_tensor("mv", F, [3], [1.0, 3.0, np.nan]))
    x = np.array([[0.1, 2.0, 1.0], [0.9, -3.0, 3.0], [0.2, -5.0, 2.0], [1.0, 0.0, 1.0]],
                 np.float32)
    node = helper.make_node("TreeEnsemble", ["x"], ["y"], domain="ai.onnx.ml", **attrs)
    model = model_of([node], [vi("x", F, [4, 3])], [vi("y", F, None)],
                     extra=[helper.make_opsetid("ai.onnx.ml", 5)])
    model.ir_version = onnx.IR_VERSION
    check_values(model, [("x", x)], oracle="reference")


def test_image_decoder_matches_pillow():
    from io import BytesIO
    PIL = pytest.importorskip("PIL.Image")
    img = (np.arange(4 * 5 * 3) * 7 % 256).astype(np.uint8).reshape(4, 5, 3)
    buf = BytesIO()
    PIL.fromarray(img).save(buf, format="PNG")
    data = np.frombuffer(buf.getvalue(), np.uint8)
    for fmt, want in (("RGB", img), ("BGR", img[:, :, ::-1]),
                      ("Grayscale", np.asarray(PIL.fromarray(img).convert("L"))[:, :, None])):
        model = one_node("ImageDecoder", [("b", data)], opset=20, pixel_format=fmt)
        (got,), *_ = yscv_run(model, [("b", data)])
        assert got.dtype == np.uint8
        np.testing.assert_array_equal(got, want)
    bad = one_node("ImageDecoder", [("b", data[:10])], opset=20)
    with pytest.raises(OnnxImportError, match="not an image Pillow can decode"):
        yscv.onnx.load(bad)(yscv.Graph(), data[:10])


@pytest.mark.parametrize("attrs,x,out", [
    (dict(keys_int64s=[1, 5, 7], values_floats=[0.5, -1.0, 2.0]), np.array([5, 1, 3, 7]),
     np.float32),
    (dict(keys_floats=[0.5, np.nan], values_int64s=[3, 9], default_int64=-7),
     np.array([0.5, np.nan, 2.0], np.float32), np.int64)])
def test_ml_label_encoder_with_numeric_keys(attrs, x, out):
    node = helper.make_node("LabelEncoder", ["x"], ["y"], domain="ai.onnx.ml", **attrs)
    ex = helper.np_dtype_to_tensor_dtype(x.dtype)
    model = model_of([node], [vi("x", ex, list(x.shape))],
                     [vi("y", helper.np_dtype_to_tensor_dtype(np.dtype(out)), None)],
                     extra=[helper.make_opsetid("ai.onnx.ml", 4)])
    # ONNX Runtime as the oracle: ONNX compares keys bitwise (a NaN key maps
    # NaN), which ONNX's reference implementation does not do
    (want,) = ort_run(model, [("x", x)])
    (got,), *_ = yscv_run(model, [("x", x)])
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_ml_label_encoder_refuses_string_keys():
    node = helper.make_node("LabelEncoder", ["x"], ["y"], domain="ai.onnx.ml",
                            keys_strings=["a"], values_int64s=[1])
    model = model_of([node], [vi("x", TensorProto.INT64, [2])], [vi("y", TensorProto.INT64,
                                                                     None)],
                     extra=[helper.make_opsetid("ai.onnx.ml", 4)])
    model.ir_version = onnx.IR_VERSION
    with pytest.raises(OnnxImportError, match="string keys and values are not supported"):
        yscv.onnx.load(model)
