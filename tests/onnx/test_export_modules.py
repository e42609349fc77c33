"""yscv.onnx.export on whole modules: the README job's CNN, attention,
recurrent and embedding layers with a dynamic batch; the model left
untouched; float64 kept; argument errors; onnx imported lazily."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import yscv  # noqa: E402
import yscv.nn as nn  # noqa: E402
from yscv.onnx import export  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples"))
from train_digits_cnn import build_model  # noqa: E402


def yscv_run(model, *arrays, dtype=np.float32):
    g = yscv.Graph(dtype)
    args = [g.constant(a) if a.dtype.kind == "f" else a for a in arrays]
    with g.no_grad():
        out = model(g, *args)
    flat = []

    def walk(o):
        if isinstance(o, (tuple, list)):
            for e in o:
                walk(e)
        else:
            flat.append(np.array(g.value(o)))
    walk(out)
    return flat


def ort_run(path, feeds):
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def trained_cnn():
    """The README job's CNN with non-trivial running statistics and grads."""
    yscv.manual_seed(0)
    model = build_model(4)
    rng = np.random.default_rng(0)
    for name, buf in model.named_buffers():
        if name.endswith("running_mean"):
            buf[...] = rng.normal(size=buf.shape)
        elif name.endswith("running_var"):
            buf[...] = rng.uniform(0.5, 2.0, size=buf.shape)
    for p in model.parameters():
        p.grad = rng.normal(size=p.data.shape).astype(p.data.dtype)
    return model


def test_readme_cnn_dynamic_batch_and_model_untouched(tmp_path):
    model = trained_cnn()
    model.train()
    model[0].eval()   # a mixed state must come back as it was
    flags = [m.training for m in model.modules()]
    bufs = {k: v.copy() for k, v in model.named_buffers()}
    grads = {k: p.grad.copy() for k, p in model.named_parameters()}
    data = {k: p.data.copy() for k, p in model.named_parameters()}
    x = np.random.default_rng(1).uniform(size=(3, 8, 8, 1)).astype(np.float32)
    path = tmp_path / "cnn.onnx"
    proto = export(model, x, path, input_names=["image"], output_names=["logits"],
                   dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}})
    assert [m.training for m in model.modules()] == flags
    for k, v in model.named_buffers():
        np.testing.assert_array_equal(v, bufs[k])
    for k, p in model.named_parameters():
        np.testing.assert_array_equal(p.grad, grads[k])
        np.testing.assert_array_equal(p.data, data[k])
    ops = [n.op_type for n in proto.graph.node]
    # NHWC at the edges, NCHW inside: one transpose in, one out, the rest folded
    assert ops.count("Transpose") == 2 and ops.count("Identity") == 0
    assert ops.count("Conv") == 2 and ops.count("BatchNormalization") == 2
    inits = {t.name for t in proto.graph.initializer}
    assert {"0.body.0.weight.oihw", "0.body.1.running_mean", "4.weight"} <= inits
    assert proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    assert proto.graph.output[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    model.eval()
    for batch in (1, 7):
        xb = np.random.default_rng(batch).uniform(size=(batch, 8, 8, 1)).astype(np.float32)
        (want,) = yscv_run(model, xb)
        (got,) = ort_run(path, {"image": xb})
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_float64_model_stays_float64(tmp_path):
    yscv.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 4, dtype=np.float64), nn.Tanh(),
                          nn.LayerNorm(4, dtype=np.float64), nn.Linear(4, 2, dtype=np.float64))
    x = np.random.default_rng(0).normal(size=(3, 5))
    proto = export(model, x, tmp_path / "f64.onnx", dynamic_axes={"input": [0]})
    assert proto.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.DOUBLE
    assert proto.graph.output[0].type.tensor_type.elem_type == onnx.TensorProto.DOUBLE
    assert all(t.data_type == onnx.TensorProto.DOUBLE for t in proto.graph.initializer
               if t.name.endswith(("weight", "bias")))
    for batch in (2, 6):
        xb = np.random.default_rng(batch).normal(size=(batch, 5))
        (want,) = yscv_run(model, xb, dtype=np.float64)
        (got,) = ort_run(tmp_path / "f64.onnx", {"input": xb})
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_multihead_attention_dynamic_batch(tmp_path):
    yscv.manual_seed(0)
    mha = nn.MultiHeadAttention(8, 2)

    def f(g, x):
        return mha(g, x, causal=True)

    x = np.random.default_rng(0).normal(size=(2, 5, 8)).astype(np.float32)
    proto = export(f, x, tmp_path / "mha.onnx", dynamic_axes={"input": {0: "batch"}})
    assert "Reshape" in {n.op_type for n in proto.graph.node}
    for batch in (1, 4):
        xb = np.random.default_rng(batch).normal(size=(batch, 5, 8)).astype(np.float32)
        want = yscv_run(f, xb)
        got = ort_run(tmp_path / "mha.onnx", {"input": xb})
        np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)


def test_multihead_attention_batch_and_sequence_dynamic(tmp_path):
    yscv.manual_seed(0)
    mha = nn.MultiHeadAttention(8, 2)
    x = np.random.default_rng(0).normal(size=(2, 3, 8)).astype(np.float32)
    export(mha, x, tmp_path / "mha2.onnx", dynamic_axes={"input": {0: "batch", 1: "seq"}})
    for batch, seq in ((1, 4), (3, 2)):
        xb = np.random.default_rng(batch).normal(size=(batch, seq, 8)).astype(np.float32)
        want = yscv_run(mha, xb)
        got = ort_run(tmp_path / "mha2.onnx", {"input": xb})
        np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU"])
def test_recurrent_modules_two_layers_bidirectional_batch_first(kind, tmp_path):
    yscv.manual_seed(0)
    layer = getattr(nn, kind)(3, 4, num_layers=2, batch_first=True, bidirectional=True)
    x = np.random.default_rng(0).normal(size=(2, 5, 3)).astype(np.float32)
    proto = export(layer, x, tmp_path / "rnn.onnx", dynamic_axes={"input": {0: "batch"}})
    assert kind in {n.op_type for n in proto.graph.node}
    for batch in (1, 3):
        xb = np.random.default_rng(batch).normal(size=(batch, 5, 3)).astype(np.float32)
        want = yscv_run(layer, xb)
        got = ort_run(tmp_path / "rnn.onnx", {"input": xb})
        assert len(got) == len(want) == (3 if kind == "LSTM" else 2)
        for w, o in zip(want, got):
            np.testing.assert_allclose(o, w, rtol=1e-5, atol=1e-5)


def test_embedding_module_takes_indices(tmp_path):
    yscv.manual_seed(0)
    emb = nn.Embedding(10, 3)
    idx = np.array([[1, 9, 0], [4, 4, 2]])
    proto = export(emb, idx, tmp_path / "emb.onnx", dynamic_axes={"input": [0, 1]})
    assert proto.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.INT64
    ib = np.array([[3, 1, 7, 7, 0]] * 4)
    (got,) = ort_run(tmp_path / "emb.onnx", {"input": ib})
    np.testing.assert_array_equal(got, emb.weight.data[ib])


def test_bad_arguments_raise_before_writing(tmp_path):
    lin = nn.Linear(3, 2)
    x = np.ones((2, 3), np.float32)
    path = tmp_path / "bad.onnx"
    with pytest.raises(ValueError, match="opset=16"):
        export(lin, x, path, opset=16)
    with pytest.raises(TypeError, match="opset"):
        export(lin, x, path, opset="17")
    with pytest.raises(ValueError, match="'nope'"):
        export(lin, x, path, dynamic_axes={"nope": [0]})
    with pytest.raises(ValueError, match="axis 2 is out of range"):
        export(lin, x, path, dynamic_axes={"input": [2]})
    with pytest.raises(ValueError, match="input_names"):
        export(lin, x, path, input_names=["a", "b"])
    with pytest.raises(TypeError, match="returned int"):
        export(lambda g, x: 3, x, path)
    with pytest.raises(TypeError, match="example_inputs\\[0\\] has dtype"):
        export(lin, np.array(["a"]), path)
    with pytest.raises(TypeError, match="example_inputs\\[0\\] has dtype bool"):
        export(lin, np.ones((2, 3), bool), path)
    with pytest.raises(ValueError, match="share a name"):
        export(lin, x, path, input_names=["x"], output_names=["x"])
    with pytest.raises(ValueError, match="fails when 'input_dim0' changes size"):
        export(lambda g, x: g.reshape(x, (2, 3)), x, path, dynamic_axes={"input": [0]})
    with pytest.raises(ValueError, match="records a different graph"):   # squeezes the batch
        export(lambda g, x: g.squeeze(x), x[:1], path, dynamic_axes={"input": [0]})
    assert not path.exists()


def test_failed_export_restores_training_flags(tmp_path):
    model = nn.Sequential(nn.Linear(3, 4), nn.Dropout(0.5), nn.Linear(4, 2))
    model.train()
    with pytest.raises(ValueError, match="share a name"):
        export(model, np.ones((2, 3), np.float32), tmp_path / "m.onnx",
               input_names=["a"], output_names=["a"])
    assert all(m.training for m in model.modules())


def test_missing_onnx_says_how_to_install(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "onnx", None)
    with pytest.raises(ImportError, match=r'pip install onnx \(from yscv.s checkout: pip install -e "\.\[onnx\]"\)'):
        export(nn.Linear(3, 2), np.ones((1, 3), np.float32), tmp_path / "m.onnx")


def test_import_yscv_does_not_import_onnx():
    code = ("import sys, yscv, yscv.onnx, yscv.nn; "
            "assert 'onnx' not in sys.modules and 'onnxruntime' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, timeout=120)


def test_sizes_baked_into_the_file_refuse_a_free_axis(tmp_path):
    x = np.ones((2, 6, 6, 3), np.float32)
    path = tmp_path / "pool.onnx"
    with pytest.raises(ValueError, match=r"adaptive_avg_pool2d \(node 1\) needs fixed sizes "
                                         r"on axes \[1\]"):
        export(lambda g, x: g.adaptive_avg_pool2d(x, (3, 2)), x, path,
               dynamic_axes={"input": {0: "batch", 1: "height"}})
    with pytest.raises(ValueError, match=r"upsample_nearest \(node 1\) needs fixed sizes"):
        export(lambda g, x: g.upsample_nearest(x, 2), x, path,
               dynamic_axes={"input": {2: "width"}})
    assert not path.exists()
    export(lambda g, x: g.adaptive_avg_pool2d(x, (3, 2)), x, path,
           dynamic_axes={"input": {0: "batch"}})
    xb = np.random.default_rng(0).normal(size=(5, 6, 6, 3)).astype(np.float32)
    (want,) = yscv_run(lambda g, x: g.adaptive_avg_pool2d(x, (3, 2)), xb)
    (got,) = ort_run(path, {"input": xb})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_dropout_recorded_in_training_mode_exports_as_identity(tmp_path):
    def f(g, x):
        return g.dropout(g.tanh(x), 0.5, training=True, seed=3)

    x = np.random.default_rng(0).normal(size=(4, 6)).astype(np.float32)
    proto = export(f, x, tmp_path / "drop.onnx")
    assert [n.op_type for n in proto.graph.node] == ["Tanh"]
    (got,) = ort_run(tmp_path / "drop.onnx", {"input": x})
    np.testing.assert_allclose(got, np.tanh(x), rtol=1e-6)


def test_fully_convolutional_with_batch_height_and_width_free(tmp_path):
    yscv.manual_seed(0)
    body = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(4, 4, 3, stride=2, padding=1), nn.Tanh())

    def f(g, x):
        y = body(g, x)
        return g.global_avg_pool2d(y), g.flatten(y)

    x = np.random.default_rng(0).uniform(size=(2, 8, 12, 3)).astype(np.float32)
    path = tmp_path / "fcn.onnx"
    export(f, x, path, dynamic_axes={"input": {0: "batch", 1: "height", 2: "width"}})
    for shape in ((1, 16, 8, 3), (3, 8, 20, 3)):
        xb = np.random.default_rng(shape[0]).uniform(size=shape).astype(np.float32)
        want = yscv_run(f, xb)
        got = ort_run(path, {"input": xb})
        for w, o in zip(want, got):
            assert o.shape == w.shape
            np.testing.assert_allclose(o, w, rtol=1e-5, atol=1e-6)


def test_reshape_target_from_two_free_axes(tmp_path):
    """[B, S, E] -> [B*S, E] -> [B, 2, S, E/2]: the last target names both
    free sizes, computed in the file from the input's runtime shape."""
    def f(g, x):
        b, s, e = x.shape
        rows = g.tanh(g.reshape(x, (b * s, e)))
        return g.reshape(rows, (b, 2, s, e // 2))

    x = np.random.default_rng(0).normal(size=(2, 3, 4)).astype(np.float32)
    path = tmp_path / "reshape.onnx"
    proto = export(f, x, path, dynamic_axes={"input": {0: "batch", 1: "seq"}})
    assert "Shape" in {n.op_type for n in proto.graph.node}
    for shape in ((1, 5, 4), (4, 2, 4)):
        xb = np.random.default_rng(shape[0]).normal(size=shape).astype(np.float32)
        (want,) = yscv_run(f, xb)
        (got,) = ort_run(path, {"input": xb})
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-6)
