"""``yscv.onnx.load`` sources: data that is not an ONNX model, and external
data (tensor bytes kept in another file). Bytes and ModelProtos have no
folder to resolve external data against and are refused; from a path, only
files inside the model's folder are read."""
from __future__ import annotations

import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import yscv  # noqa: E402
import yscv.onnx  # noqa: E402
from yscv.onnx import OnnxImportError  # noqa: E402

F = TensorProto.FLOAT


def external_tensor(name, location, n=4):
    """A float tensor of ``n`` elements whose bytes are in file ``location``."""
    t = helper.make_tensor(name, F, [n], np.zeros(n, np.float32))
    t.ClearField("float_data")
    t.data_location = TensorProto.EXTERNAL
    entry = t.external_data.add()
    entry.key, entry.value = "location", location
    return t


def add_model(inits=(), nodes=None):
    nodes = nodes or [helper.make_node("Add", ["x", "w"], ["y"], name="add")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, [4])],
                              [helper.make_tensor_value_info("y", F, [4])], list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def run(m, x):
    g = yscv.Graph()
    return g.value(m(g, g.constant(x)))


SECRET = np.array([7.0, 8.0, 9.0, 10.0], np.float32)


@pytest.mark.parametrize("as_bytes", [True, False])
def test_external_data_without_a_folder_is_refused_naming_the_tensor(tmp_path, monkeypatch,
                                                                     as_bytes):
    """A ``secret.bin`` in the current folder is never read into the weights."""
    monkeypatch.chdir(tmp_path)
    SECRET.tofile("secret.bin")
    model = add_model([external_tensor("w", "secret.bin")])
    src = model.SerializeToString() if as_bytes else model
    with pytest.raises(OnnxImportError, match=r"initializer 'w' keeps its data in an external "
                       r"file \('secret.bin'\).*no folder") as info:
        yscv.onnx.load(src)
    assert "load_external_data_for_model" in str(info.value)
    assert isinstance(info.value, yscv.AutogradError)


def test_external_data_of_a_constant_attribute_is_refused_naming_the_node(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    SECRET.tofile("secret.bin")
    const = helper.make_node("Constant", [], ["w"], name="k",
                             value=external_tensor("v", "secret.bin"))
    model = add_model(nodes=[const, helper.make_node("Add", ["x", "w"], ["y"], name="add")])
    with pytest.raises(OnnxImportError, match=r"attribute 'value' of node 'k' \(Constant\)"):
        yscv.onnx.load(model.SerializeToString())


def test_external_data_from_a_path_is_read_from_the_model_folder(tmp_path, monkeypatch):
    """Resolved against the model file's folder, whatever the current folder."""
    folder, elsewhere = tmp_path / "model", tmp_path / "elsewhere"
    folder.mkdir()
    elsewhere.mkdir()
    SECRET.tofile(folder / "secret.bin")
    np.zeros(4, np.float32).tofile(elsewhere / "secret.bin")
    onnx.save(add_model([external_tensor("w", "secret.bin")]), str(folder / "m.onnx"))
    monkeypatch.chdir(elsewhere)
    m = yscv.onnx.load(folder / "m.onnx")
    np.testing.assert_array_equal(m.initializers()["w"], SECRET)
    np.testing.assert_array_equal(run(m, np.ones(4, np.float32)), SECRET + 1)


def test_external_data_written_by_onnx_save_loads_from_its_path(tmp_path):
    w = np.arange(2048, dtype=np.float32)
    nodes = [helper.make_node("Add", ["x", "w"], ["y"], name="add")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, [2048])],
                              [helper.make_tensor_value_info("y", F, [2048])],
                              [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(tmp_path / "m.onnx"), save_as_external_data=True,
              location="weights.data", size_threshold=0)
    assert (tmp_path / "weights.data").exists()
    np.testing.assert_array_equal(yscv.onnx.load(tmp_path / "m.onnx").initializers()["w"], w)
    # a ModelProto whose external data onnx.load has read is self-contained
    proto = onnx.load(str(tmp_path / "m.onnx"))
    np.testing.assert_array_equal(yscv.onnx.load(proto).initializers()["w"], w)
    with pytest.raises(OnnxImportError, match=r"initializer 'w' keeps its data in an external "
                       r"file \('weights.data'\)"):
        yscv.onnx.load(onnx.load(str(tmp_path / "m.onnx"), load_external_data=False))


@pytest.mark.parametrize("location", ["../secret.bin", "sub/../../secret.bin", "ABSOLUTE"])
def test_external_location_outside_the_model_folder_is_refused(tmp_path, location):
    folder = tmp_path / "model"
    (folder / "sub").mkdir(parents=True)
    SECRET.tofile(tmp_path / "secret.bin")
    if location == "ABSOLUTE":
        location = str(tmp_path / "secret.bin")
    onnx.save(add_model([external_tensor("w", location)]), str(folder / "m.onnx"))
    with pytest.raises(OnnxImportError, match=rf"initializer 'w' keeps its data at "
                       rf"{location!r}.*not a file inside"):
        yscv.onnx.load(str(folder / "m.onnx"))


def test_missing_external_file_is_refused_naming_the_tensor(tmp_path):
    onnx.save(add_model([external_tensor("w", "nowhere.bin")]), str(tmp_path / "m.onnx"))
    with pytest.raises(OnnxImportError, match=r"initializer 'w': its external data "
                       r"'nowhere.bin' cannot be read"):
        yscv.onnx.load(tmp_path / "m.onnx")


def test_external_location_inside_the_folder_through_a_subfolder_loads(tmp_path):
    (tmp_path / "sub").mkdir()
    SECRET.tofile(tmp_path / "secret.bin")
    onnx.save(add_model([external_tensor("w", "sub/../secret.bin")]), str(tmp_path / "m.onnx"))
    np.testing.assert_array_equal(yscv.onnx.load(tmp_path / "m.onnx").initializers()["w"],
                                  SECRET)


# ------------------------------------------------------- not an ONNX model
def good_bytes():
    return add_model([numpy_helper.from_array(SECRET, "w")]).SerializeToString()


@pytest.mark.parametrize("data", [
    pytest.param(lambda: good_bytes()[:-7], id="truncated"),
    pytest.param(lambda: np.random.default_rng(0).bytes(300), id="random"),
    pytest.param(lambda: b"\x00\x01garbage\xff\xff", id="garbage"),
])
def test_bytes_that_do_not_decode_are_refused(data, tmp_path):
    raw = data()
    with pytest.raises(OnnxImportError, match=r"is not an ONNX model \(truncated or corrupt"):
        yscv.onnx.load(raw)
    (tmp_path / "bad.onnx").write_bytes(raw)
    with pytest.raises(OnnxImportError, match=r"the file '.*bad.onnx' is not an ONNX model"):
        yscv.onnx.load(tmp_path / "bad.onnx")


def test_empty_model_is_refused(tmp_path):
    """Empty bytes decode as an empty ModelProto: refused, not loaded as an
    empty module."""
    (tmp_path / "empty.onnx").write_bytes(b"")
    for src, what in ((b"", "the data"), (tmp_path / "empty.onnx", "the file"),
                      (onnx.ModelProto(), "the ModelProto")):
        with pytest.raises(OnnxImportError, match=rf"{what}.*is an empty model"):
            yscv.onnx.load(src)


def test_a_valid_model_still_loads_from_every_source(tmp_path):
    path = tmp_path / "m.onnx"
    path.write_bytes(good_bytes())
    for src in (good_bytes(), path, os.fspath(path), onnx.load(str(path))):
        np.testing.assert_array_equal(run(yscv.onnx.load(src), np.ones(4, np.float32)),
                                      SECRET + 1)
