"""sum_to (PyTorch's ``Tensor.sum_to_size``): NumPy forward reference,
float64 gradcheck and second order against PyTorch, bad arguments, the
NodeId method, and the ONNX form."""
import numpy as np
import pytest

import yscv
from yscv import Op
from yscv.testing import BadCase, OpCase, make_op_tests, make_second_order_tests


def _np_sum_to(shape):
    def ref(x):
        extra = x.ndim - len(shape)
        axes = tuple(range(extra)) + tuple(
            extra + k for k, s in enumerate(shape) if s == 1 and x.shape[extra + k] != 1)
        return np.sum(x, axis=axes, keepdims=True).reshape(shape)
    return ref


def _row(in_shape, shape, name):
    return OpCase(Op.SUM_TO, lambda g, x: g.sum_to(x, shape), [in_shape], _np_sum_to(shape),
                  name=name, torch_build=lambda t, x: x.sum_to_size(shape))


CASES = [
    _row((2, 3, 4), (3, 4), "sum_to_leading"),
    _row((2, 3, 4), (2, 1, 4), "sum_to_size1"),
    _row((2, 3, 4), (3, 1), "sum_to_leading_and_size1"),
    _row((5, 3), (3,), "sum_to_bias_rows"),
    _row((2, 3), (2, 3), "sum_to_same_shape"),
    _row((4,), (1,), "sum_to_one"),
    _row((2, 3), (), "sum_to_scalar"),
    OpCase(Op.SUM_TO, lambda g, x: g.sum_to(x, 3), [(2, 3)], _np_sum_to((3,)),
           name="sum_to_int_shape", torch_build=lambda t, x: x.sum_to_size(3)),
]


def _leaves(*shapes):
    return lambda g: tuple(g.variable(np.ones(s)) for s in shapes)


BAD = [
    BadCase(Op.SUM_TO, "sum_to_not_broadcasting", _leaves((2, 3)),
            lambda g, x: g.sum_to(x, (2,)), yscv.ShapeError, "sum_to: shape=\\(2,\\)"),
    BadCase(Op.SUM_TO, "sum_to_more_axes", _leaves((3,)),
            lambda g, x: g.sum_to(x, (1, 3)), yscv.ShapeError, "sum_to"),
    BadCase(Op.SUM_TO, "sum_to_negative", _leaves((3,)),
            lambda g, x: g.sum_to(x, (-1,)), ValueError, "sum_to: shape=\\(-1,\\)"),
    BadCase(Op.SUM_TO, "sum_to_float_shape", _leaves((3,)),
            lambda g, x: g.sum_to(x, (3.0,)), TypeError, "sum_to: shape"),
    BadCase(Op.SUM_TO, "sum_to_shape_not_sequence", _leaves((3,)),
            lambda g, x: g.sum_to(x, "3"), TypeError, "sum_to: shape"),
]


test_forward, test_gradcheck, test_bad_arguments = make_op_tests(CASES, BAD)
test_second_order = make_second_order_tests(CASES)


def test_the_backward_is_a_fresh_array_of_the_input_shape():
    g = yscv.Graph()
    x = g.variable(np.arange(6.0).reshape(2, 3))
    g.backward(g.sum_to(x, (3,)), grad=np.array([1.0, 2.0, 3.0]))
    gx = g.grad(x)
    assert gx.shape == (2, 3) and gx.flags.writeable and gx.flags.c_contiguous
    np.testing.assert_array_equal(gx, [[1.0, 2.0, 3.0]] * 2)


def test_the_node_method_is_torchs_sum_to_size():
    g = yscv.Graph()
    x = g.variable(np.arange(24.0).reshape(2, 3, 4))
    a = g.value(x.sum_to_size(3, 1))
    b = g.value(x.sum_to_size((3, 1)))
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, _np_sum_to((3, 1))(np.arange(24.0).reshape(2, 3, 4)))


def test_the_array_name_is_the_forward():
    from yscv.engine.namespace import ARRAY
    x = np.random.default_rng(0).standard_normal((4, 2, 3)).astype(np.float32)
    g = yscv.Graph(dtype=np.float32)
    ref = g.value(g.sum_to(g.variable(x), (2, 1)))
    assert ARRAY.sum_to(x, (2, 1)).tobytes() == ref.tobytes()


def test_onnx_export_matches(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    from yscv import onnx as yonnx
    x = np.random.default_rng(1).standard_normal((2, 3, 4)).astype(np.float32)
    proto = yonnx.export(lambda g, xs: g.sum_to(xs, (3, 1)), (x,), tmp_path / "m.onnx")
    sess = ort.InferenceSession(proto.SerializeToString())
    got = sess.run(None, {sess.get_inputs()[0].name: x})[0]
    np.testing.assert_allclose(got, _np_sum_to((3, 1))(x), rtol=1e-5, atol=1e-6)
