"""yscv.onnx.load on the signal-processing operators of _import_signal:
DFT, STFT, HannWindow, HammingWindow, BlackmanWindow and MelWeightMatrix.

Oracles: NumPy's FFT and ONNX's reference implementation
(``onnx.reference``) for the values, yscv.gradcheck (float64, central
differences) for the gradients through the signal and STFT's window.
"""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import yscv.onnx  # noqa: E402
from yscv.onnx import OnnxImportError  # noqa: E402

from _onenode import check_grad, one_node, yscv_run  # noqa: E402


def signal(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def with_inputs(model, names):
    model.graph.node[0].ClearField("input")
    model.graph.node[0].input.extend(names)
    return model


def reference(model, ins):
    return ReferenceEvaluator(model).run(None, {n: a for n, a in ins})


@pytest.mark.parametrize("complex_in,inverse,onesided,n", [
    (False, False, False, None), (True, False, False, None), (False, False, True, None),
    (True, True, False, None), (True, True, True, None), (True, False, False, 7),
    (False, False, True, 3), (True, True, True, 9)])
def test_dft_matches_numpy_fft_and_has_gradients(complex_in, inverse, onesided, n):
    x = signal(2, 6, 3, 2 if complex_in else 1)
    ins = [("x", x)] + ([("n", np.array(n, np.int64))] if n else []) + [("axis",
                                                                          np.array(1, np.int64))]
    model = with_inputs(one_node("DFT", ins, opset=20, inverse=int(inverse),
                                 onesided=int(onesided)), ["x", "n" if n else "", "axis"])
    (got,), *_ = yscv_run(model, ins)
    z = x[..., 0] + 1j * x[..., 1] if complex_in else x[..., 0].astype(np.complex128)
    length = n or (2 * (x.shape[1] - 1) if inverse and onesided else x.shape[1])
    if inverse and onesided:
        want = np.fft.irfft(z, n=length, axis=1)[..., None]
    else:
        y = (np.fft.ifft if inverse else np.fft.fft)(z, n=length, axis=1)
        if onesided:
            y = y[:, :length // 2 + 1]
        want = np.stack([y.real, y.imag], -1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    check_grad(model, ins)


def test_dft_opset_17_takes_the_axis_attribute():
    x = signal(3, 5, 1)
    model = one_node("DFT", [("x", x)], opset=17, axis=1)
    (got,), *_ = yscv_run(model, [("x", x)])
    (want,) = reference(model, [("x", x)])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_dft_refuses_the_complex_axis():
    x = signal(3, 5, 2)
    m = yscv.onnx.load(one_node("DFT", [("x", x)], opset=17, axis=2))
    with pytest.raises(OnnxImportError, match="axis=2 is the complex axis"):
        m(yscv.Graph(), x)


@pytest.mark.parametrize("window,onesided", [(True, 1), (False, 0), (True, 0)])
def test_stft_matches_the_reference_and_has_gradients(window, onesided):
    x = signal(2, 16, 1)
    ins = [("x", x), ("step", np.array(3, np.int64))]
    names = ["x", "step", "", ""]
    if window:
        ins.append(("w", np.hanning(6).astype(np.float32) + 0.1))
        names[2] = "w"
    else:
        ins.append(("len", np.array(6, np.int64)))
        names[3] = "len"
    model = with_inputs(one_node("STFT", ins, opset=17, onesided=onesided), names)
    (got,), *_ = yscv_run(model, ins)
    (want,) = reference(model, ins)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    check_grad(model, ins, wrt=(0, 2) if window else (0,))


@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("periodic,dtype", [(1, TensorProto.FLOAT), (0, TensorProto.DOUBLE)])
def test_windows_match_the_reference(op, periodic, dtype):
    ins = [("n", np.array(10, np.int64))]
    out = helper.tensor_dtype_to_np_dtype(dtype)
    model = one_node(op, ins, opset=17, out=[out], periodic=periodic, output_datatype=dtype)
    (got,), *_ = yscv_run(model, ins)
    (want,) = reference(model, ins)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def test_mel_weight_matrix_matches_the_reference():
    ins = [("bins", np.array(8, np.int64)), ("n", np.array(16, np.int64)),
           ("rate", np.array(8192, np.int64)), ("lo", np.array(0, np.float32)),
           ("hi", np.array(4096, np.float32))]
    model = one_node("MelWeightMatrix", ins, opset=17, out=[np.float32])
    (got,), *_ = yscv_run(model, ins)
    (want,) = reference(model, ins)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, want)


def test_windows_refuse_a_string_output_type():
    with pytest.raises(OnnxImportError, match="output_datatype=8 .* is not supported"):
        yscv.onnx.load(one_node("HannWindow", [("n", np.array(4, np.int64))], opset=17,
                                out=[np.float32], output_datatype=TensorProto.STRING))
