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
from yscv.state import load_checkpoint, read_checkpoint_metadata, save_checkpoint
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


# ------------------------------------------------ NumPy arrays in extra
def _same_array(a, b):
    assert isinstance(b, np.ndarray)
    assert a.dtype == b.dtype and a.shape == b.shape
    assert np.ascontiguousarray(a).tobytes() == b.tobytes()


def test_extra_arrays_round_trip_bit_exact(tmp_path):
    rng = np.random.default_rng(1)
    arrays = {
        "f32": rng.standard_normal((3, 4)).astype(np.float32),
        "f64_0d": np.array(np.pi),
        "i64_0d": np.array(-7, dtype=np.int64),
        "f16": np.array([1.5, -np.inf, np.nan], dtype=np.float16),
        "u8": np.arange(7, dtype=np.uint8),
        "i32_empty": np.zeros((0, 3), dtype=np.int32),
        "bool": np.array([[True, False], [False, True]]),
        "c64": np.array([1 + 2j, -3.5j], dtype=np.complex64),
        "u64": np.array([2**64 - 1, 0], dtype=np.uint64),
        "strided": rng.standard_normal((4, 6))[:, ::2].T,     # not contiguous
        "nan_bits": np.array([np.nan, -0.0], dtype=np.float64),
    }
    extra = {"epoch": 3, "arrays": arrays, "nested": [1, (np.arange(3), {"deep": np.ones(2)})],
             "__yscv_tensor__": "not a marker (two keys here)",
             "marker_lookalike": {"__yscv_tensor__": "extra.0"},
             "dict_lookalike": {"__yscv_dict__": {"__yscv_tensor__": 5}}}
    path = save_checkpoint(tmp_path / "x.safetensors", extra=extra)
    got = load_checkpoint(path)["extra"]
    for k, a in arrays.items():
        _same_array(a, got["arrays"][k])
        assert got["arrays"][k].flags.writeable and got["arrays"][k].flags.owndata
    assert got["epoch"] == 3
    assert got["nested"][0] == 1
    _same_array(np.arange(3), got["nested"][1][0])       # the tuple comes back as a list
    _same_array(np.ones(2), got["nested"][1][1]["deep"])
    assert got["__yscv_tensor__"] == "not a marker (two keys here)"
    assert got["marker_lookalike"] == {"__yscv_tensor__": "extra.0"}
    assert got["dict_lookalike"] == {"__yscv_dict__": {"__yscv_tensor__": 5}}


def test_extra_arrays_are_tensors_not_json_and_checksummed(tmp_path):
    from safetensors.numpy import load_file, save

    big = np.arange(1000, dtype=np.float32)
    path = save_checkpoint(tmp_path / "x.safetensors", extra={"w": big, "s": np.array(2.5)})
    tensors = load_file(path)
    assert sorted(k for k in tensors if k.startswith("extra.")) == ["extra.0", "extra.1"]
    np.testing.assert_array_equal(tensors["extra.0"], big)
    meta = read_checkpoint_metadata(path)             # the raw document: markers
    assert meta["extra"] == {"s": {"__yscv_tensor__": "extra.1"},
                             "w": {"__yscv_tensor__": "extra.0"}}
    assert len(json.dumps(meta)) < 2000               # the values are not in the JSON
    # an edited extra tensor (header metadata kept) fails the checksum
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))["__metadata__"]
    tensors["extra.0"] = tensors["extra.0"].copy()
    tensors["extra.0"][5] += 1
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(save(tensors, metadata=header))
    with pytest.raises(CheckpointError, match="checksum"):
        load_checkpoint(bad)
    # a marker naming a tensor the file lacks
    inner = json.loads(header["yscv.meta"])
    inner["extra"]["w"] = {"__yscv_tensor__": "extra.9"}
    header["yscv.meta"] = json.dumps(inner)
    del tensors["extra.0"]
    from yscv.state.encoding import _checksum
    header["yscv.sha256"] = _checksum(header["yscv.meta"], tensors)
    bad.write_bytes(save(tensors, metadata=header))
    with pytest.raises(CheckpointError, match="refers to a tensor 'extra.9'"):
        load_checkpoint(bad)


def test_extra_big_endian_array_keeps_its_values(tmp_path):
    a = np.arange(5, dtype=">f4") / 3
    got = load_checkpoint(save_checkpoint(tmp_path / "x.safetensors", extra=[a]))["extra"][0]
    assert got.dtype == np.float32 and got.dtype.byteorder in "=<"
    np.testing.assert_array_equal(got, a)


@pytest.mark.parametrize("bad", [np.array(["a", "b"]), np.array([object()], dtype=object),
                                 np.zeros(2, dtype=np.complex128)])
def test_extra_array_of_unstorable_dtype_is_refused(tmp_path, bad):
    with pytest.raises(TypeError, match=r"extra\['x'\]\[1\] is a numpy array of dtype"):
        save_checkpoint(tmp_path / "x.safetensors", extra={"x": [0, bad]})
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------ permissions
@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
@pytest.mark.parametrize("umask,mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_new_file_gets_the_umask_permissions(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        path = save_checkpoint(tmp_path / "p.safetensors", step=1)
    finally:
        os.umask(old)
    assert os.stat(path).st_mode & 0o777 == mode


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
def test_existing_file_keeps_its_mode(tmp_path):
    path = save_checkpoint(tmp_path / "p.safetensors", step=1)
    os.chmod(path, 0o640)
    old = os.umask(0o022)
    try:
        save_checkpoint(path, step=2)
    finally:
        os.umask(old)
    assert os.stat(path).st_mode & 0o777 == 0o640
    assert read_checkpoint_metadata(path)["step"] == 2


# ------------------------------------------------------- data-loader state
class _FakeLoader:
    """Any object with state_dict/load_state_dict (check_state_dict optional)."""

    def __init__(self, epoch=0, order=None, fail_check=False, fail_load=False):
        self.epoch, self.order = epoch, order
        self.fail_check, self.fail_load = fail_check, fail_load
        self.loaded = None

    def state_dict(self):
        return {"epoch": self.epoch, "position": 5, "order": self.order,
                "rng": {"seed": 12, "counts": [np.array(3, dtype=np.int64)]}}

    def load_state_dict(self, state):
        if self.fail_load:
            raise ValueError("wrong dataset length")
        self.loaded = state
        self.epoch, self.order = state["epoch"], state["order"]


class _CheckingLoader(_FakeLoader):
    def check_state_dict(self, state):
        if self.fail_check:
            raise ValueError(f"order has {len(state['order'])} entries, the dataset 9")


def test_data_state_round_trip(tmp_path):
    order = np.random.default_rng(0).permutation(10)
    model, opt, sched = _setup()
    path = save_checkpoint(tmp_path / "d.safetensors", model, opt, sched, step=4,
                           data=_FakeLoader(epoch=2, order=order))
    from safetensors.numpy import load_file
    assert sorted(k for k in load_file(path) if k.startswith("data.")) == ["data.0", "data.1"]
    loader = _FakeLoader()
    info = load_checkpoint(path, *_setup(seed=4), data=loader)
    assert info["step"] == 4 and loader.epoch == 2
    _same_array(order, loader.order)
    assert loader.loaded["position"] == 5 and loader.loaded["rng"]["seed"] == 12
    _same_array(np.array(3, dtype=np.int64), loader.loaded["rng"]["counts"][0])
    load_checkpoint(path, data=_CheckingLoader())     # data alone, with a check
    # a file without data state: no data-loader state stored
    assert read_checkpoint_metadata(save_checkpoint(tmp_path / "n.safetensors"))["data"] is None


def test_data_state_mismatch_loads_nothing(tmp_path):
    model, opt, sched = _setup()
    _train(model, opt, sched, 2)
    path = save_checkpoint(tmp_path / "d.safetensors", model, opt, sched, step=2,
                           data=_FakeLoader(order=np.arange(10)))
    plain = save_checkpoint(tmp_path / "plain.safetensors", model, opt, sched, step=2)
    for bad_path, loader, match in [
            (path, _CheckingLoader(fail_check=True), "order has 10 entries"),
            (path, _FakeLoader(fail_load=True), "refused its state.*wrong dataset length"),
            (plain, _FakeLoader(), "no data-loader state")]:
        m2, o2, s2 = _setup(seed=3)
        _train(m2, o2, s2, 1)
        before = _snapshot(m2, o2, s2)
        with pytest.raises(CheckpointError, match=match):
            load_checkpoint(bad_path, m2, o2, s2, data=loader)
        _assert_same(_snapshot(m2, o2, s2), before)
        assert loader.loaded is None


def test_data_bad_arguments(tmp_path):
    with pytest.raises(TypeError, match="save_checkpoint: data must have a state_dict"):
        save_checkpoint(tmp_path / "d.safetensors", data=object())

    class NotADict:
        def state_dict(self):
            return [1, 2]

    with pytest.raises(TypeError, match="must return a dict, got list"):
        save_checkpoint(tmp_path / "d.safetensors", data=NotADict())

    class Unstorable:
        def state_dict(self):
            return {"f": object()}

    with pytest.raises(TypeError, match="JSON"):
        save_checkpoint(tmp_path / "d.safetensors", data=Unstorable())
    assert list(tmp_path.iterdir()) == []
    path = save_checkpoint(tmp_path / "d.safetensors", data=_FakeLoader())
    with pytest.raises(TypeError, match="load_checkpoint: data must have a load_state_dict"):
        load_checkpoint(path, data=object())


# ------------------------------------------ saves killed or run side by side
# A child process saving a checkpoint; its first os.fsync (the temporary
# file's, after the whole file is written and before the rename) announces
# itself on stdout and then sleeps ("hang": until killed; "slow": 2 s).
_SAVER = """
import os, sys, time
import numpy as np
from yscv.state import save_checkpoint

path, step, how = sys.argv[1], int(sys.argv[2]), sys.argv[3]
real, calls = os.fsync, []

def fsync(fd):
    calls.append(fd)
    if len(calls) == 1:
        print("in fsync", flush=True)
        time.sleep(600 if how == "hang" else 2.0)
    real(fd)

os.fsync = fsync
save_checkpoint(path, step=step, extra={"w": np.arange(200_000, dtype=np.float64)})
print("saved", flush=True)
"""


def _saver(path, step, how):
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))]
        + [p for p in [os.environ.get("PYTHONPATH")] if p])}
    proc = subprocess.Popen([sys.executable, "-c", _SAVER, str(path), str(step), how],
                            stdout=subprocess.PIPE, text=True, env=env)
    line = proc.stdout.readline()
    assert line.strip() == "in fsync", line
    return proc


def _temps(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX signals")
def test_saves_killed_mid_write_leave_one_temp_file_then_none(tmp_path):
    import signal

    path = tmp_path / "c.safetensors"
    save_checkpoint(path, step=1, extra={"w": np.arange(3.0)})
    old = path.read_bytes()
    for k in range(4):                       # killed saves to the same target
        proc = _saver(path, 10 + k, "hang")
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert _temps(tmp_path) == [".c.safetensors.yscv.tmp"]   # at most one, reused
        assert path.read_bytes() == old
    for k in range(3):                       # killed saves to other targets (new names)
        proc = _saver(tmp_path / f"ckpt-{k}.safetensors", 20 + k, "hang")
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert len(_temps(tmp_path)) == 4
    info = load_checkpoint(path)             # the previous checkpoint still loads
    assert info["step"] == 1
    np.testing.assert_array_equal(info["extra"]["w"], np.arange(3.0))
    save_checkpoint(path, step=2)            # the next save removes every dead save's file
    assert _temps(tmp_path) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.safetensors"]
    assert load_checkpoint(path)["step"] == 2


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX processes")
def test_a_live_save_is_not_disturbed_by_another(tmp_path):
    # another target in the same folder: its temporary file is left alone
    a, b = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    proc = _saver(a, 7, "slow")
    save_checkpoint(b, step=1)               # must not remove a's temporary file
    assert proc.stdout.readline().strip() == "saved"
    assert proc.wait() == 0
    assert load_checkpoint(a)["step"] == 7 and load_checkpoint(b)["step"] == 1
    # the same target: the second save waits for the first, then replaces it
    proc = _saver(a, 8, "slow")
    save_checkpoint(a, step=9, extra={"x": np.zeros(3)})
    assert proc.stdout.readline().strip() == "saved"
    assert proc.wait() == 0
    info = load_checkpoint(a)
    assert info["step"] == 9
    np.testing.assert_array_equal(info["extra"]["x"], np.zeros(3))
    assert _temps(tmp_path) == []


@pytest.mark.parametrize("flock", [True, False])
def test_a_stale_temporary_file_is_replaced(tmp_path, monkeypatch, flock):
    """A killed save's temporary file (here: junk, read-only) is removed by
    the next save to that target, with flock and without it (Windows)."""
    import yscv.state.atomic as cio

    if not flock:
        monkeypatch.setattr(cio, "_fcntl", None)
    stale = tmp_path / ".c.safetensors.yscv.tmp"
    stale.write_bytes(b"junk from a killed save" * 100)
    os.chmod(stale, 0o444)
    path = save_checkpoint(tmp_path / "c.safetensors", step=3, extra={"a": np.arange(4)})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.safetensors"]
    info = load_checkpoint(path)
    assert info["step"] == 3
    np.testing.assert_array_equal(info["extra"]["a"], np.arange(4))


# ------------------------------------------------- values that overflow the dtype
def test_value_overflowing_the_model_dtype_is_refused(tmp_path):
    import warnings

    yscv.manual_seed(0)
    wide = nn.Sequential(nn.Linear(6, 8, dtype=np.float64), nn.BatchNorm(8),
                         nn.Linear(8, 3, dtype=np.float64))
    wide.to(np.float64)
    wide[2].weight.data[1, 2] = 1e300            # finite in float64, inf in float32
    path = save_checkpoint(tmp_path / "wide.safetensors", model=wide)
    narrow = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm(8), nn.Linear(8, 3))
    before = narrow.state_dict()
    with warnings.catch_warnings():
        warnings.simplefilter("error")           # no RuntimeWarning on the way either
        with pytest.raises(CheckpointError, match=r"'2\.weight': value 1e\+300 overflows "
                                                  r"float32"):
            load_checkpoint(path, model=narrow)
        for k, v in narrow.state_dict().items():
            np.testing.assert_array_equal(v, before[k], err_msg=k)
        # the same check in Module.load_state_dict, in yscv's and PyTorch's layouts
        sd = wide.state_dict()
        with pytest.raises(nn.StateDictError, match=r"'2\.weight': value 1e\+300 overflows"):
            narrow.load_state_dict(sd)
        with pytest.raises(nn.StateDictError, match=r"'2\.weight': value 1e\+300 overflows"):
            narrow.load_state_dict(wide.state_dict(layout="torch"), layout="torch")
        sd["1.num_batches_tracked"] = np.float64(1e300)
        with pytest.raises(nn.StateDictError, match=r"'1\.num_batches_tracked': value 1e\+300 "
                                                    r"does not fit int64"):
            narrow.load_state_dict(sd, strict=False)
        sd = wide.state_dict()
        sd["2.weight"][1, 2] = -np.inf               # inf stays inf: loaded as is
        sd["1.num_batches_tracked"] = np.float64(7.0)
        narrow.load_state_dict(sd)
        assert narrow[2].weight.data[1, 2] == -np.inf and narrow[1].num_batches_tracked == 7
        sd["2.weight"][1, 2] = 3.4e38                # rounds to float32's largest: fine
        narrow.load_state_dict(sd)
        assert np.isfinite(narrow[2].weight.data).all()
    # optimizer state arrays: the same
    wide[2].weight.data[1, 2] = 0.5
    wopt = optim.Adam(wide.parameters(), lr=1e-2)
    g = yscv.Graph(dtype=np.float64)
    g.backward(g.cross_entropy(wide(g, g.constant(X.astype(np.float64))), Y))
    wopt.step()
    wopt.state[wide[0].weight]["exp_avg_sq"][0, 0] = 1e300
    path = save_checkpoint(tmp_path / "wopt.safetensors", model=wide, optimizer=wopt)
    narrow = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm(8), nn.Linear(8, 3))
    nopt = optim.Adam(narrow.parameters(), lr=1e-2)
    with pytest.raises(CheckpointError, match=r"state for parameter 0: 'exp_avg_sq': value "
                                              r"1e\+300 overflows float32"):
        load_checkpoint(path, model=narrow, optimizer=nopt)
    assert nopt.state == {}


# ------------------------------------------------------------ symbolic links
@pytest.mark.skipif(not hasattr(os, "symlink") or os.name != "posix", reason="POSIX symlinks")
def test_saving_through_a_symlink_writes_its_target_atomically(tmp_path):
    store, links = tmp_path / "store", tmp_path / "links"
    store.mkdir()
    links.mkdir()
    target = store / "real.safetensors"
    save_checkpoint(target, step=1)
    os.chmod(target, 0o640)
    link = links / "latest.safetensors"
    os.symlink(os.path.relpath(target, links), link)        # a relative link
    chain = links / "chain.safetensors"
    os.symlink(link, chain)                                  # a link to the link
    assert save_checkpoint(link, step=2) == str(link)
    assert os.path.islink(link) and os.path.realpath(link) == str(target)
    assert read_checkpoint_metadata(target)["step"] == 2
    assert os.stat(target).st_mode & 0o777 == 0o640         # the target's mode kept
    save_checkpoint(chain, step=3)
    assert os.path.islink(chain) and os.path.islink(link)
    assert read_checkpoint_metadata(target)["step"] == 3
    assert sorted(os.listdir(store)) == ["real.safetensors"]  # no temporary file left
    assert sorted(os.listdir(links)) == ["chain.safetensors", "latest.safetensors"]
    # a dangling link: the target is created, as open(link, "wb") would
    dangling = links / "new.safetensors"
    os.symlink(store / "new.safetensors", dangling)
    save_checkpoint(dangling, step=4)
    assert os.path.islink(dangling) and read_checkpoint_metadata(store / "new.safetensors")["step"] == 4
    # a loop of links fails as open() does, and replaces nothing
    loop = links / "loop.safetensors"
    os.symlink(loop, loop)
    with pytest.raises(OSError, match="symbolic links"):
        save_checkpoint(loop, step=5)
    assert os.path.islink(loop)
