"""Training-state checkpoints: round trip, exact resume, atomic save, and
corrupted / truncated / mismatched files raising CheckpointError with
nothing half-loaded."""
from __future__ import annotations

import json
import os
import struct

import numpy as np
import pytest

import yscv
import yscv.nn as nn
import yscv.optim as optim
from yscv import random as yrandom
from yscv.checkpoint_io import load_checkpoint, read_checkpoint_metadata, save_checkpoint
from yscv.errors import CheckpointError

X = np.random.default_rng(0).standard_normal((64, 6)).astype(np.float32)
Y = (X[:, 0] > 0).astype(np.int64) + (X[:, 1] > 0)


def _setup(seed=0, width=8):
    yscv.manual_seed(seed)
    model = nn.Sequential(nn.Linear(6, width), nn.BatchNorm(width), nn.ReLU(), nn.Dropout(0.3),
                          nn.Linear(width, 3))
    opt = optim.Adam(model.parameters(), lr=1e-2, amsgrad=True)
    sched = optim.OneCycleLR(opt, max_lr=0.05, total_steps=40)
    return model, opt, sched


def _train(model, opt, sched, steps, start=0):
    losses = []
    for s in range(start, start + steps):
        idx = np.arange(s * 8, s * 8 + 16) % 64
        g = yscv.Graph()
        loss = g.cross_entropy(model(g, g.constant(X[idx])), Y[idx])
        g.backward(loss)
        opt.step()
        opt.zero_grad()
        sched.step()
        losses.append(float(g.value(loss)))
    return losses


def _snapshot(model, opt, sched):
    return (model.state_dict(), opt.state_dict(), sched.state_dict(), yrandom.get_rng_state())


def _assert_same(a, b):
    (ma, oa, sa, ra), (mb, ob, sb, rb) = a, b
    assert list(ma) == list(mb)
    for k in ma:
        np.testing.assert_array_equal(ma[k], mb[k])
    assert oa["param_groups"] == ob["param_groups"]
    assert set(oa["state"]) == set(ob["state"])
    for i in oa["state"]:
        for k, v in oa["state"][i].items():
            np.testing.assert_array_equal(v, ob["state"][i][k])
    assert sa == sb
    assert ra == rb


def test_round_trip_restores_everything(tmp_path):
    model, opt, sched = _setup()
    _train(model, opt, sched, 5)
    path = tmp_path / "c.safetensors"
    save_checkpoint(path, model, opt, sched, step=5, extra={"epoch": 1, "note": "hi", "xs": [1.5]})
    saved = _snapshot(model, opt, sched)
    m2, o2, s2 = _setup(seed=9)
    yscv.manual_seed(123)
    info = load_checkpoint(path, m2, o2, s2)
    assert info["step"] == 5
    assert info["extra"] == {"epoch": 1, "note": "hi", "xs": [1.5]}
    assert info["format_version"] == 1 and info["library_version"] == yscv.__version__
    _assert_same(_snapshot(m2, o2, s2), saved)


def test_resume_reproduces_losses_exactly(tmp_path):
    model, opt, sched = _setup()
    full = _train(model, opt, sched, 12)

    model, opt, sched = _setup()
    first = _train(model, opt, sched, 5)
    save_checkpoint(tmp_path / "k.safetensors", model, opt, sched, step=5)
    _train(model, opt, sched, 3)  # the "crashed" run goes on a bit; irrelevant

    m2, o2, s2 = _setup(seed=77)  # a new process: different init, different RNG
    info = load_checkpoint(tmp_path / "k.safetensors", m2, o2, s2)
    rest = _train(m2, o2, s2, 7, start=info["step"])
    assert first + rest == full  # equality, dropout included


def test_file_is_safetensors_with_json_metadata(tmp_path):
    from safetensors.numpy import load_file

    model, opt, sched = _setup()
    _train(model, opt, sched, 2)
    path = save_checkpoint(tmp_path / "c.safetensors", model, opt, sched, step=2)
    tensors = load_file(path)
    assert "model.0.weight" in tensors and "optimizer.state.0.exp_avg" in tensors
    np.testing.assert_array_equal(tensors["model.0.weight"], model[0].weight.data)
    meta = read_checkpoint_metadata(path)
    assert meta["format"] == "yscv-checkpoint" and meta["step"] == 2
    assert meta["optimizer"]["class"] == "Adam"
    assert meta["optimizer"]["state_scalars"]["0"] == {"step": 2}
    assert meta["scheduler"]["type"] == "OneCycleLR"
    assert meta["rng_state"] == yrandom.get_rng_state()
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    assert set(header["__metadata__"]) == {"format", "yscv.meta", "yscv.sha256"}
    assert b"pickle" not in open(path, "rb").read()


def test_crash_mid_save_keeps_the_old_file(tmp_path, monkeypatch):
    model, opt, sched = _setup()
    path = tmp_path / "c.safetensors"
    save_checkpoint(path, model, opt, sched, step=1)
    old = path.read_bytes()
    _train(model, opt, sched, 3)

    def boom(*a, **k):
        raise OSError("disk died during rename")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk died"):
        save_checkpoint(path, model, opt, sched, step=4)
    monkeypatch.undo()
    assert path.read_bytes() == old
    assert [p.name for p in tmp_path.iterdir()] == ["c.safetensors"]  # temp file removed
    assert load_checkpoint(path, *_setup())["step"] == 1


def test_crash_while_writing_keeps_the_old_file(tmp_path, monkeypatch):
    model, opt, sched = _setup()
    path = tmp_path / "c.safetensors"
    save_checkpoint(path, model, opt, sched, step=1)
    old = path.read_bytes()

    def boom(fd):
        raise OSError("power cut before fsync")

    monkeypatch.setattr(os, "fsync", boom)
    with pytest.raises(OSError, match="power cut"):
        save_checkpoint(path, model, opt, sched, step=2)
    monkeypatch.undo()
    assert path.read_bytes() == old
    assert len(list(tmp_path.iterdir())) == 1


def _loaded_objects_untouched(path):
    model, opt, sched = _setup(seed=3)
    _train(model, opt, sched, 2)
    before = _snapshot(model, opt, sched)
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(path, model, opt, sched)
    _assert_same(_snapshot(model, opt, sched), before)
    return str(info.value)


@pytest.fixture
def good_file(tmp_path):
    model, opt, sched = _setup()
    _train(model, opt, sched, 3)
    return save_checkpoint(tmp_path / "good.safetensors", model, opt, sched, step=3,
                           extra={"k": 1})


def test_bit_flips_anywhere_are_detected(good_file, tmp_path):
    data = open(good_file, "rb").read()
    bad = tmp_path / "bad.safetensors"
    bits = range(0, len(data) * 8, 89)  # a spread of positions: header, metadata, tensors
    for bit in bits:
        b = bytearray(data)
        b[bit // 8] ^= 1 << (bit % 8)
        bad.write_bytes(bytes(b))
        with pytest.raises(CheckpointError):
            read_checkpoint_metadata(bad)
    # a flip in tensor bytes is named as a checksum failure, and nothing is loaded
    b = bytearray(data)
    b[-3] ^= 0x10
    bad.write_bytes(bytes(b))
    assert "checksum" in _loaded_objects_untouched(bad)


def test_truncated_files_are_detected(good_file, tmp_path):
    data = open(good_file, "rb").read()
    bad = tmp_path / "bad.safetensors"
    for cut in [0, 5, 8, 40, len(data) // 2, len(data) - 1]:
        bad.write_bytes(data[:cut])
        msg = _loaded_objects_untouched(bad)
        assert "truncated" in msg or "corrupt" in msg


def test_wrong_format_version(good_file, tmp_path):
    from safetensors.numpy import load_file, save

    with open(good_file, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        meta = json.loads(f.read(n))["__metadata__"]
    inner = json.loads(meta["yscv.meta"])
    inner["format_version"] = 99
    meta["yscv.meta"] = json.dumps(inner)
    bad = tmp_path / "v99.safetensors"
    bad.write_bytes(save(load_file(good_file), metadata=meta))
    assert "format version 99" in _loaded_objects_untouched(bad)


def test_not_a_yscv_file(tmp_path):
    from safetensors.numpy import save

    bad = tmp_path / "other.safetensors"
    bad.write_bytes(save({"w": np.ones(3, np.float32)}))
    assert "not a yscv training checkpoint" in _loaded_objects_untouched(bad)


def test_mismatched_model_names_the_problem(tmp_path):
    model, opt, sched = _setup(width=8)
    path = save_checkpoint(tmp_path / "c.safetensors", model, opt, sched, step=0)
    other = nn.Sequential(nn.Linear(6, 5), nn.BatchNorm(5), nn.ReLU(), nn.Dropout(0.3),
                          nn.Linear(5, 3))
    before = other.state_dict()
    with pytest.raises(CheckpointError, match=r"size mismatch for '0.weight'.*\(6, 8\)"):
        load_checkpoint(path, model=other)
    for k, v in other.state_dict().items():
        np.testing.assert_array_equal(v, before[k])
    missing = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    with pytest.raises(CheckpointError, match="unexpected key"):
        load_checkpoint(path, model=missing)
    extra_layer = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm(8), nn.ReLU(), nn.Dropout(0.3),
                                nn.Linear(8, 3), nn.Linear(3, 3))
    with pytest.raises(CheckpointError, match="missing key"):
        load_checkpoint(path, model=extra_layer)


def test_mismatched_optimizer_or_scheduler_loads_nothing(tmp_path):
    model, opt, sched = _setup()
    _train(model, opt, sched, 2)
    path = save_checkpoint(tmp_path / "c.safetensors", model, opt, sched, step=2)
    m2, _, _ = _setup(seed=5)
    before = m2.state_dict()
    sgd = optim.SGD(m2.parameters(), lr=0.1, momentum=0.9)
    with pytest.raises(CheckpointError, match="holds Adam state; the optimizer given is a SGD"):
        load_checkpoint(path, model=m2, optimizer=sgd)
    for k, v in m2.state_dict().items():  # the model was valid but must not be loaded either
        np.testing.assert_array_equal(v, before[k])
    o3 = optim.Adam(m2.parameters(), lr=1e-2)
    step_lr = optim.StepLR(o3, step_size=3)
    with pytest.raises(CheckpointError, match="OneCycleLR state, this is a StepLR"):
        load_checkpoint(path, model=m2, optimizer=o3, scheduler=step_lr)
    for k, v in m2.state_dict().items():
        np.testing.assert_array_equal(v, before[k])
    assert o3.state == {}
    nothing = save_checkpoint(tmp_path / "bare.safetensors", step=1)
    with pytest.raises(CheckpointError, match="no model state"):
        load_checkpoint(nothing, model=m2)


def test_rng_state_is_restored(tmp_path):
    yscv.manual_seed(11)
    yrandom.draw_seed()
    path = save_checkpoint(tmp_path / "r.safetensors")
    expected = [yrandom.draw_seed() for _ in range(3)]
    yscv.manual_seed(0)
    load_checkpoint(path)
    assert [yrandom.draw_seed() for _ in range(3)] == expected
    yscv.manual_seed(0)
    load_checkpoint(path, restore_rng=False)
    assert [yrandom.draw_seed() for _ in range(3)] != expected


def test_extra_must_be_json(tmp_path):
    with pytest.raises(TypeError, match="JSON"):
        save_checkpoint(tmp_path / "x.safetensors", extra={"a": object()})
    with pytest.raises(TypeError, match="step"):
        save_checkpoint(tmp_path / "x.safetensors", step=1.5)
    assert list(tmp_path.iterdir()) == []


def test_missing_file_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_checkpoint(tmp_path / "nope.safetensors")
