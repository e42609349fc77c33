"""What ``yscv.onnx.load`` refuses at load: models that are not valid ONNX
(the ONNX checker's findings and the attribute values and constant inputs
it lets through). Each case is built with ``onnx.helper`` and raises
``OnnxImportError`` naming the node, tensor or value, before any call."""
from __future__ import annotations

import re

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import yscv  # noqa: E402
import yscv.onnx  # noqa: E402
from yscv.onnx import OnnxImportError  # noqa: E402

F = TensorProto.FLOAT
X = ("x", [1, 1, 4, 4])


def build(nodes, inits=(), inputs=(X,), outputs=(("y", None),), opset=17, ir=8):
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, F, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, F, s) for n, s in outputs],
        [numpy_helper.from_array(np.asarray(a), n) for n, a in inits])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = ir
    return model


def refused(model, match):
    with pytest.raises(OnnxImportError, match=match) as info:
        yscv.onnx.load(model)
    assert isinstance(info.value, yscv.AutogradError) and isinstance(info.value, ValueError)
    return info.value


def node(op, inputs, name, outputs=("y",), **attrs):
    return helper.make_node(op, list(inputs), list(outputs), name=name, **attrs)


W = np.ones((2, 1, 3, 3), np.float32)


# ------------------------------------------------------------ the checker
def test_two_nodes_writing_one_value_break_single_assignment():
    refused(build([node("Relu", ["x"], "a"), node("Relu", ["x"], "b")]),
            r"checker refuses.*single static assignment.*'y'")


def test_duplicate_initializer_names():
    model = build([node("Add", ["x", "w"], "add")], [("w", np.ones(4, np.float32))] * 2)
    refused(model, r"checker refuses.*w initializer name is not unique")


def test_duplicate_graph_input_names():
    refused(build([node("Relu", ["x"], "r")], inputs=(X, X)),
            r"single static assignment.*'x' has been used as graph input names")


def test_duplicate_graph_output_names():
    refused(build([node("Relu", ["x"], "r")], outputs=(("y", None), ("y", None))),
            r"graph output name\(s\) \['y'\] appear more than once")


@pytest.mark.parametrize("op,inputs,name,count", [
    ("Add", ["x"], "add0", 1),            # returned x
    ("Sub", ["x", "x", "x"], "sub0", 3),  # returned -x
])
def test_wrong_input_count(op, inputs, name, count):
    err = refused(build([node(op, inputs, name)]),
                  rf"Node\({name}\) .*has input size {count} not in range \[min=2, max=2\]")
    assert (err.op, err.node) == (op, name)


def test_cycle():
    nodes = [node("Relu", ["b"], "n1", ["a"]), node("Add", ["x", "a"], "n2", ["b"]),
             node("Relu", ["b"], "n3")]
    refused(build(nodes), r"topologically sorted.*input 'b' of node: \nname: n1 OpType: Relu")


def test_unsorted_nodes():
    """ONNX requires topological order; an acyclic unsorted graph is refused
    at load rather than failing with a KeyError at call."""
    nodes = [node("Relu", ["a"], "second"), node("Relu", ["x"], "first", ["a"])]
    err = refused(build(nodes), r"topologically sorted.*input 'a' of node: \nname: second")
    assert err.node == "second"


@pytest.mark.parametrize("opset,match", [
    (9999, r"opset 9999 of the default domain is not between 1 and \d+"),
    (0, r"No Op registered for Relu with domain_version of 0"),
])
def test_opset_out_of_range(opset, match):
    refused(build([node("Relu", ["x"], "r")], opset=opset), match)


def test_ir_version_too_new():
    refused(build([node("Relu", ["x"], "r")], ir=99), r"ir_version 99 is higher than")


def test_float_pads_are_not_truncated():
    model = build([node("Conv", ["x", "w"], "c", pads=[0.5, 0.5, 0.5, 0.5])], [("w", W)])
    refused(model, r"Mismatched attribute type in 'c : pads'")


# --------------------------------------------------- yscv's own checks
def test_unknown_auto_pad():
    model = build([node("Conv", ["x", "w"], "c", auto_pad="WHATEVER")], [("w", W)])
    err = refused(model, r"'Conv' \(node 'c', index 0\): auto_pad='WHATEVER' is not one of")
    assert (err.op, err.node) == ("Conv", "c")


def test_kernel_shape_disagreeing_with_the_weight():
    model = build([node("Conv", ["x", "w"], "c", kernel_shape=[5, 5])], [("w", W)])
    refused(model, r"node 'c'.*kernel_shape \[5, 5\] disagrees with the weight 'w' of shape "
            r"\[2, 1, 3, 3\]")


@pytest.mark.parametrize("op,attrs,match", [
    ("Conv", dict(pads=[1, 1]), r"pads \[1, 1\] has 2 values; the 2-D kernel \[3, 3\] needs 4"),
    ("Conv", dict(strides=[1, 1, 1]), r"strides \[1, 1, 1\] has 3 values"),
    ("Conv", dict(dilations=[0, 1]), r"dilations \[0, 1\] has a value below 1"),
    ("MaxPool", dict(kernel_shape=[2, 2], pads=[0, 0, 0]), r"pads \[0, 0, 0\] has 3 values"),
    ("AveragePool", dict(kernel_shape=[2, 2], strides=[2]), r"strides \[2\] has 1 values"),
])
def test_wrong_length_geometry(op, attrs, match):
    inputs, inits = (["x", "w"], [("w", W)]) if op == "Conv" else (["x"], [])
    refused(build([node(op, inputs, "n", **attrs)], inits), rf"'{op}' \(node 'n'.*{match}")


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("pads", [[2, 2, 2, 2], [0, 0, 0, 2], [3, 0, 0, 0]])
def test_pool_pads_reaching_the_kernel(op, pads):
    """A pad as wide as the kernel makes windows of padding only (MaxPool
    gave -inf); ONNX Runtime refuses it too."""
    k = 2 if max(pads) == 2 else 3
    model = build([node(op, ["x"], "pool", kernel_shape=[k, k], pads=pads)])
    refused(model, rf"'{op}' \(node 'pool'.*pads {re.escape(str(pads))} are not all smaller "
            rf"than the kernel \[{k}, {k}\]")


def test_pool_pads_below_the_kernel_still_match_onnxruntime():
    ort = pytest.importorskip("onnxruntime")
    x = np.random.default_rng(0).standard_normal((1, 1, 4, 4)).astype(np.float32)
    for op, k, pads in (("MaxPool", 3, [2, 2, 2, 2]), ("MaxPool", 2, [1, 0, 0, 1]),
                        ("AveragePool", 3, [2, 1, 2, 1])):
        model = build([node(op, ["x"], "pool", kernel_shape=[k, k], pads=pads)])
        g = yscv.Graph()
        y = g.value(yscv.onnx.load(model)(g, g.constant(x)))
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        want = sess.run(None, {"x": x})[0]
        assert np.isfinite(y).all()
        np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)


def test_reshape_with_two_minus_ones():
    model = build([node("Reshape", ["x", "s"], "rs")], [("s", np.array([-1, -1], np.int64))])
    refused(model, r"'Reshape' \(node 'rs'.*shape \[-1, -1\] has more than one -1")


def test_reshape_with_two_minus_ones_computed_at_call_fails_naming_the_node():
    """A target computed from the input's shape is checked at call; the
    graph is left as it was."""
    nodes = [node("Shape", ["x"], "sh", ["s"]),
             node("Slice", ["s", "a", "b"], "sl", ["one"]),
             node("Concat", ["one", "m", "m"], "cat", ["t"], axis=0),
             node("Reshape", ["x", "t"], "rs")]
    inits = [("a", np.array([0], np.int64)), ("b", np.array([1], np.int64)),
             ("m", np.array([-1], np.int64))]
    m = yscv.onnx.load(build(nodes, inits))
    g = yscv.Graph()
    x = g.constant(np.zeros((1, 1, 4, 4), np.float32))
    n = len(g)
    with pytest.raises(OnnxImportError, match=r"'Reshape' \(node 'rs'.*\[1, -1, -1\] has more"):
        m(g, x)
    assert len(g) == n


def test_complex_initializer_is_not_cast_to_real():
    model = build([node("Add", ["x", "w"], "add")], [("w", np.ones(4, np.complex64))])
    refused(model, r"initializer 'w' has type COMPLEX64, which yscv cannot hold")


def test_complex_constant_is_refused_naming_the_node():
    const = node("Constant", [], "k", ["w"],
                 value=numpy_helper.from_array(np.ones(4, np.complex64)))
    refused(build([const, node("Add", ["x", "w"], "add")]),
            r"attribute 'value' of operator 'Constant' \(node 'k', index 0\) has type COMPLEX64")


@pytest.mark.parametrize("to,match", [(TensorProto.STRING, "to=STRING"),
                                      (TensorProto.COMPLEX64, "to=COMPLEX64"),
                                      (999, "to=999 \\(not an ONNX data type\\)")])
def test_cast_to_a_type_yscv_cannot_hold(to, match):
    refused(build([node("Cast", ["x"], "c", to=to)]),
            rf"'Cast' \(node 'c', index 0\): {match} is not supported")


def test_constant_of_shape_too_large():
    model = build([node("ConstantOfShape", ["s"], "cs")],
                  [("s", np.array([10 ** 6, 10 ** 6], np.int64))], inputs=())
    refused(model, r"'ConstantOfShape' \(node 'cs'.*would hold 1000000000000 elements, more "
            r"than the 2147483648")


def test_constant_of_shape_negative():
    model = build([node("ConstantOfShape", ["s"], "cs")], [("s", np.array([2, -3], np.int64))],
                  inputs=())
    refused(model, r"node 'cs'.*shape \[2, -3\] has a negative size")


def test_constant_of_shape_too_large_at_call():
    """A shape computed from the input is bounded at call, naming the node."""
    nodes = [node("Shape", ["x"], "sh", ["s"]), node("Mul", ["s", "k"], "mul", ["big"]),
             node("ConstantOfShape", ["big"], "cs")]
    m = yscv.onnx.load(build(nodes, [("k", np.array([10 ** 4] * 4, np.int64))]))
    g = yscv.Graph()
    with pytest.raises(OnnxImportError, match=r"node 'cs'.*would hold 10{18} elements"):
        m(g, g.constant(np.zeros((10, 10, 1, 1), np.float32)))


@pytest.mark.parametrize("start,limit,delta,match", [
    (0, 10 ** 12, 1, r"Range\(0, 1000000000000, 1\) would hold 1000000000000 elements"),
    (0, 10, 0, r"delta is 0"),
])
def test_range_bounds(start, limit, delta, match):
    inits = [(n, np.array(v, np.int64)) for n, v in (("a", start), ("b", limit), ("d", delta))]
    model = build([node("Range", ["a", "b", "d"], "rg")], inits, inputs=())
    refused(model, rf"'Range' \(node 'rg'.*{match}")


def test_range_to_infinity():
    inits = [("a", np.float32(0)), ("b", np.float32(np.inf)), ("d", np.float32(1))]
    model = build([node("Range", ["a", "b", "d"], "rg")], inits, inputs=())
    refused(model, r"'Range' \(node 'rg'.*limit is inf")


def test_reshape_shape_from_a_constant_node():
    nodes = [node("Constant", [], "k", ["s"], value_ints=[2, -1, -1]),
             node("Reshape", ["x", "s"], "rs")]
    refused(build(nodes), r"'Reshape' \(node 'rs'.*shape \[2, -1, -1\] has more than one -1")


def test_pad_widths_of_the_wrong_length():
    model = build([node("Pad", ["x", "p"], "pad")], [("p", np.zeros(3, np.int64))])
    refused(model, r"'Pad' \(node 'pad'.*pads \[0, 0, 0\] have 3 values; they need an even count")


def test_pad_widths_not_matching_the_rank_at_call():
    m = yscv.onnx.load(build([node("Pad", ["x", "p"], "pad")], [("p", np.zeros(4, np.int64))]))
    g = yscv.Graph()
    with pytest.raises(OnnxImportError, match=r"node 'pad'.*pads \[0, 0, 0, 0\] have 4 values; "
                       r"the 4 padded axes need 8"):
        m(g, g.constant(np.zeros((1, 1, 4, 4), np.float32)))


def test_resize_without_scales_or_sizes():
    model = build([node("Resize", ["x", ""], "rz", mode="nearest")])
    refused(model, r"'Resize' \(node 'rz'.*neither scales nor sizes")


def test_graph_input_of_a_type_yscv_cannot_hold():
    graph = helper.make_graph([node("Identity", ["s"], "i")], "g",
                              [helper.make_tensor_value_info("s", TensorProto.STRING, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.STRING, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    refused(model, r"graph input 's' has type STRING")


# ------------------------------------------- what the checker is given
def test_large_initializers_and_shapeless_outputs_still_reach_the_checker():
    """The checker gets large initializers as one element and a shape field
    on graph inputs and outputs of unknown rank; it still refuses a bad node,
    a valid model still loads, and the caller's ModelProto is not changed."""
    big = np.arange(300_000, dtype=np.float32)   # > 1 MiB
    ok = build([node("Add", ["v", "w"], "add")], [("w", big)], inputs=(("v", [300_000]),))
    before = ok.SerializeToString()
    m = yscv.onnx.load(ok)
    assert ok.SerializeToString() == before
    assert not ok.graph.output[0].type.tensor_type.HasField("shape")
    g = yscv.Graph()
    y = m(g, g.constant(np.ones(300_000, np.float32)))
    np.testing.assert_array_equal(g.value(y), big + 1)
    bad = build([node("Add", ["v"], "add1")], [("w", big)], inputs=(("v", [300_000]),))
    refused(bad, r"Node\(add1\) .*has input size 1")


def test_a_short_large_initializer_is_refused_naming_it():
    """Its size is checked when it is decoded (the checker sees one element)."""
    t = numpy_helper.from_array(np.zeros(300_000, np.float32), "w")
    t.dims[0] = 300_001
    model = build([node("Add", ["v", "w"], "add")], inputs=(("v", [300_001]),))
    model.graph.initializer.append(t)
    refused(model, r"initializer 'w' cannot be decoded \(dims \[300001\]\)")
