"""Trainer(compile=True): a compiled fit gives the eager fit's bits (per-step
losses, final parameters, history), with dropout and batch norm, over two
epochs with a smaller last batch, through a mid-run checkpoint and resume;
a record error falls back to eager with one warning naming it."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import yscv
import yscv.nn as nn
import yscv.optim as optim
from yscv.train import Callback, Trainer, fit

RNG = np.random.default_rng(3)
X = RNG.standard_normal((50, 5)).astype(np.float32)   # batches of 16: 16, 16, 16, 2
Y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(np.int64) + (X[:, 2] > 0.5)
XV = RNG.standard_normal((20, 5)).astype(np.float32)
YV = (XV[:, 0] > 0).astype(np.int64)


def _parts(extra=None, seed=0):
    yscv.manual_seed(seed)
    layers = [nn.Linear(5, 16), nn.BatchNorm(16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 3)]
    if extra is not None:
        layers.insert(1, extra)
    model = nn.Sequential(*layers)
    return model, optim.Adam(model.parameters(), lr=1e-2)


def _run(compile, **kw):
    model, opt = _parts(kw.pop("extra", None))
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # no fallback warning on the supported model
        hist = fit(model, "cross_entropy", opt, (X, Y), epochs=2, batch_size=16,
                   val_data=(XV, YV), seed=1, progress=False, compile=compile, **kw)
    return model, hist


def _same(run_a, run_b):
    (ma, ha), (mb, hb) = run_a, run_b
    la = np.array([r["loss"] for r in ha.steps])
    lb = np.array([r["loss"] for r in hb.steps])
    assert len(la) == 8 and np.array_equal(la, lb)
    for (na, pa), (nb, pb) in zip(ma.named_parameters(), mb.named_parameters()):
        assert na == nb and np.array_equal(pa.data, pb.data), na
    for (na, ba), (nb, bb) in zip(ma.named_buffers(), mb.named_buffers()):
        assert np.array_equal(ba, bb), na
    for key in ("loss", "accuracy", "val_loss", "val_accuracy", "lr"):
        assert np.array_equal(np.array(ha[key]), np.array(hb[key])), key


def test_compiled_fit_gives_the_eager_bits_with_dropout_and_batch_norm():
    eager = _run(False)
    _same(eager, _run(True))


def test_compiled_trainer_records_once_per_batch_shape():
    model, opt = _parts()
    t = Trainer(model, "cross_entropy", opt, progress=False, compile=True)
    t.fit((X, Y), epochs=2, batch_size=16)
    # full batches and the last batch of 2: two records, replayed
    assert t._forward_backward.active and t._forward_backward.compiled.recordings == 2


class StopAt(Callback):
    def __init__(self, k):
        self.k = k

    def on_step_end(self, trainer, step, logs):
        if step == self.k:
            trainer.stop_training = True


@pytest.mark.parametrize("first,second", [(True, True), (False, True), (True, False)])
def test_compiled_resume_gives_the_uninterrupted_eager_run(tmp_path, first, second):
    eager = _run(False)
    model, opt = _parts()
    Trainer(model, "cross_entropy", opt, callbacks=[StopAt(5)], checkpoint_dir=tmp_path,
            checkpoint_every=1, seed=1, progress=False, compile=first).fit(
        (X, Y), epochs=2, batch_size=16, val_data=(XV, YV))
    model, opt = _parts(seed=42)   # a new process: other init and generator state
    t = Trainer(model, "cross_entropy", opt, callbacks=[StopAt(-1)], checkpoint_dir=tmp_path,
                checkpoint_every=1, seed=99, progress=False, compile=second)
    hist = t.fit((X, Y), epochs=2, batch_size=16, val_data=(XV, YV), resume=True)
    assert t.global_step == 8
    _same(eager, (model, hist))


class Counter(nn.Module):
    """Adds 1 to a float buffer outside graph ops on every training call:
    yscv.compile refuses it after the step ran (the state must be put back)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("calls", np.zeros(1, dtype=np.float32))

    def forward(self, g, x):
        if self.training:
            self.calls += 1.0
        return x


@pytest.mark.parametrize("refused", ["hook", "buffer"])
def test_a_record_error_falls_back_to_eager_with_one_warning(refused):
    def make():
        if refused == "buffer":
            return _parts(Counter())
        model, opt = _parts()
        model[0].register_forward_hook(lambda m, g, args, out: None)
        return model, opt

    model_e, opt_e = make()
    hist_e = fit(model_e, "cross_entropy", opt_e, (X, Y), epochs=2, batch_size=16,
                 val_data=(XV, YV), seed=1, progress=False)
    model_c, opt_c = make()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = Trainer(model_c, "cross_entropy", opt_c, seed=1, progress=False, compile=True)
        hist_c = t.fit((X, Y), epochs=2, batch_size=16, val_data=(XV, YV))
    ours = [w for w in caught if str(w.message).startswith("Trainer(compile=True): ")]
    assert len(ours) == 1, [str(w.message) for w in caught]
    assert ("forward hooks" if refused == "hook" else "buffer Counter.calls") \
        in str(ours[0].message)
    assert not t._forward_backward.active
    _same((model_e, hist_e), (model_c, hist_c))
    if refused == "buffer":
        assert model_c[1].calls[0] == model_e[1].calls[0] == 8


def test_compile_argument_checked():
    model, opt = _parts()
    with pytest.raises(TypeError, match="compile"):
        Trainer(model, "cross_entropy", opt, compile="yes")


def test_a_dataloader_fed_compiled_run_with_checkpoint_and_resume(tmp_path):
    from yscv.data import DataLoader, TensorDataset

    def loader():
        return DataLoader(TensorDataset(X, Y), batch_size=16, shuffle=True, seed=5)

    model_e, opt_e = _parts()
    hist_e = Trainer(model_e, "cross_entropy", opt_e, progress=False).fit(
        loader(), epochs=2, val_data=(XV, YV))
    model, opt = _parts()
    Trainer(model, "cross_entropy", opt, callbacks=[StopAt(6)], checkpoint_dir=tmp_path,
            checkpoint_every=3, progress=False, compile=True).fit(
        loader(), epochs=2, val_data=(XV, YV))
    model, opt = _parts(seed=7)
    t = Trainer(model, "cross_entropy", opt, callbacks=[StopAt(-1)], checkpoint_dir=tmp_path,
                checkpoint_every=3, progress=False, compile=True)
    hist = t.fit(loader(), epochs=2, val_data=(XV, YV), resume=True)
    assert t._forward_backward.active
    _same((model_e, hist_e), (model, hist))
