"""The fit loop's OpenBLAS thread scope (yscv/train/trainer.py,
``one_blas_thread``): a model with convolutions trains and is evaluated
with NumPy's products on one OpenBLAS thread (its spinning worker would
take the core yscv's convolution helpers need), restored afterwards; other
models, one kernel thread, or an OpenBLAS count chosen in the environment
leave it alone. And the runtime hold it uses nests with the parallel
backward's."""
from __future__ import annotations

import numpy as np
import pytest

import yscv
import yscv.nn as nn
import yscv.optim as optim
from yscv import runtime
from yscv.train import Callback, Trainer
from yscv.train.trainer import one_blas_thread


@pytest.fixture
def fake_blas(monkeypatch):
    """OpenBLAS at 2 threads, as ctypes would see it, with every change recorded."""
    state = {"n": 2, "calls": []}

    def set_blas(n):
        state["calls"].append(n)
        state["n"] = n
        return True

    for where in (runtime, runtime.threads):   # the API and the holds' own calls
        monkeypatch.setattr(where, "blas_threads", lambda: state["n"])
        monkeypatch.setattr(where, "set_blas_threads", set_blas)
    monkeypatch.setattr(runtime.threads, "_num_threads", 2)
    monkeypatch.setattr(runtime, "blas_threads_set_by_user", lambda: False)
    return state


class _SeeBlas(Callback):
    def __init__(self, state):
        self.state, self.seen = state, []

    def on_step_end(self, trainer, step, logs):
        self.seen.append(self.state["n"])


def _cnn():
    return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Flatten(),
                         nn.Linear(4 * 4 * 16, 3))


def _mlp():
    return nn.Sequential(nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 3))


def _data(shape):
    rng = np.random.default_rng(0)
    return rng.standard_normal((24, *shape)).astype(np.float32), rng.integers(0, 3, 24)


def _train(model, data, state):
    yscv.manual_seed(0)
    seen = _SeeBlas(state)
    t = Trainer(model, "cross_entropy", optim.SGD(model.parameters(), lr=0.1),
                callbacks=[seen], progress=False)
    t.fit(data, epochs=1, batch_size=8, val_data=data)
    return t, seen.seen


def test_conv_model_trains_on_one_blas_thread_and_restores(fake_blas):
    model = _cnn()
    assert one_blas_thread(model)
    t, seen = _train(model, _data((4, 4, 1)), fake_blas)
    assert seen == [1, 1, 1]                      # every step, evaluation included after
    assert fake_blas["n"] == 2 and fake_blas["calls"] == [1, 2]
    fake_blas["calls"].clear()
    t.evaluate(_data((4, 4, 1)))
    assert fake_blas["calls"] == [1, 2] and fake_blas["n"] == 2


def test_other_models_and_settings_keep_blas_threads(fake_blas, monkeypatch):
    _, seen = _train(_mlp(), _data((16,)), fake_blas)
    assert seen == [2, 2, 2] and fake_blas["calls"] == []
    monkeypatch.setattr(runtime, "blas_threads_set_by_user", lambda: True)
    assert not one_blas_thread(_cnn())            # the environment chose OpenBLAS's count
    monkeypatch.setattr(runtime, "blas_threads_set_by_user", lambda: False)
    monkeypatch.setattr(runtime.threads, "_num_threads", 1)
    assert not one_blas_thread(_cnn())            # yscv's kernels on one thread: no helper


def test_scope_restores_after_an_error(fake_blas):
    class Boom(Callback):
        def on_step_end(self, trainer, step, logs):
            raise RuntimeError("boom")

    model = _cnn()
    t = Trainer(model, "cross_entropy", optim.SGD(model.parameters(), lr=0.1),
                callbacks=[Boom()], progress=False)
    with pytest.raises(RuntimeError, match="boom"):
        t.fit(_data((4, 4, 1)), epochs=1, batch_size=8)
    assert fake_blas["n"] == 2 and fake_blas["calls"] == [1, 2]


def test_blas_holds_nest_with_the_single_threaded_kernels(fake_blas):
    runtime.hold_one_blas_thread(True)
    runtime.hold_single_threaded_kernels(True)
    assert fake_blas["n"] == 1 and runtime.kernel_threads() == 1
    runtime.hold_one_blas_thread(False)
    assert fake_blas["n"] == 1                    # the kernels' hold still holds OpenBLAS
    runtime.hold_single_threaded_kernels(False)
    assert fake_blas["n"] == 2 and runtime.kernel_threads() == 2
    assert fake_blas["calls"] == [1, 2]
    runtime.hold_one_blas_thread(False)           # an extra release changes nothing
    runtime.hold_single_threaded_kernels(False)
    assert fake_blas["calls"] == [1, 2] and runtime.kernel_threads() == 2
