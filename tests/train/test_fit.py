"""The fit loop: training, metrics, callbacks, checkpoint rotation, exact
resume (shuffling and dropout included), History output."""
from __future__ import annotations

import csv
import json
import os

import numpy as np
import pytest

import yscv
import yscv.nn as nn
import yscv.optim as optim
from yscv.train import Callback, EarlyStopping, History, Trainer, fit, list_checkpoints

RNG = np.random.default_rng(0)
X = RNG.standard_normal((120, 5)).astype(np.float32)
Y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(np.int64) + (X[:, 2] > 0.5)
XV = RNG.standard_normal((40, 5)).astype(np.float32)
YV = (XV[:, 0] + 0.5 * XV[:, 1] > 0).astype(np.int64) + (XV[:, 2] > 0.5)


def _parts(seed=0, sched="onecycle"):
    yscv.manual_seed(seed)
    model = nn.Sequential(nn.Linear(5, 16), nn.BatchNorm(16), nn.ReLU(), nn.Dropout(0.2),
                          nn.Linear(16, 3))
    opt = optim.Adam(model.parameters(), lr=1e-2)
    if sched == "onecycle":
        s = optim.OneCycleLR(opt, max_lr=0.03, epochs=4, steps_per_epoch=8)
    elif sched == "step":
        s = optim.StepLR(opt, step_size=1, gamma=0.7)
    else:
        s = None
    return model, opt, s


class StopAt(Callback):
    """Simulates a crash: stops training right after step ``k``."""

    def __init__(self, k):
        self.k = k

    def on_step_end(self, trainer, step, logs):
        if step == self.k:
            trainer.stop_training = True


def test_fit_trains_and_records(capsys):
    model, opt, sched = _parts()
    hist = fit(model, "cross_entropy", opt, (X, Y), epochs=4, batch_size=16, scheduler=sched,
               val_data=(XV, YV), seed=1)
    assert isinstance(hist, History) and len(hist) == 4 and len(hist.steps) == 32
    assert hist.columns() == ["epoch", "loss", "accuracy", "val_loss", "val_accuracy", "lr", "time"]
    assert hist["loss"][-1] < hist["loss"][0]
    assert hist["val_accuracy"][-1] > 0.7
    assert [r["step"] for r in hist.steps] == list(range(1, 33))
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 4 and out[0].startswith("epoch 1/4  loss ")  # one line per epoch, no bar
    assert "val_accuracy" in out[-1]


def test_progress_false_prints_nothing(capsys):
    model, opt, _ = _parts(sched=None)
    fit(model, "cross_entropy", opt, (X, Y), epochs=1, batch_size=32, progress=False)
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("sched,every,stop_at", [("onecycle", 3, 13), ("step", 5, 20),
                                                  ("step", None, 19)])
def test_resume_reproduces_the_uninterrupted_run_exactly(tmp_path, sched, every, stop_at):
    model, opt, s = _parts(sched=sched)
    full = Trainer(model, "cross_entropy", opt, s, seed=3, progress=False,
                   checkpoint_dir=tmp_path / "a", checkpoint_every=every)
    h_full = full.fit((X, Y), epochs=4, batch_size=15, val_data=(XV, YV))
    w_full = model.state_dict()

    model, opt, s = _parts(sched=sched)
    t1 = Trainer(model, "cross_entropy", opt, s, seed=3, progress=False, callbacks=[StopAt(stop_at)],
                 checkpoint_dir=tmp_path / "b", checkpoint_every=every)
    t1.fit((X, Y), epochs=4, batch_size=15, val_data=(XV, YV))
    assert t1.global_step == stop_at

    model2, opt2, s2 = _parts(seed=42, sched=sched)  # a new process: other init and RNG state
    t2 = Trainer(model2, "cross_entropy", opt2, s2, seed=99, progress=False,
                 callbacks=[StopAt(-1)], checkpoint_dir=tmp_path / "b", checkpoint_every=every)
    h = t2.fit((X, Y), epochs=4, batch_size=15, val_data=(XV, YV), resume=True)
    assert t2.global_step == 32
    assert h.step_losses == h_full.step_losses  # equality, not closeness
    assert [r["lr"] for r in h.steps] == [r["lr"] for r in h_full.steps]
    strip = [{k: v for k, v in r.items() if k != "time"} for r in h_full.epochs]
    assert [{k: v for k, v in r.items() if k != "time"} for r in h.epochs] == strip
    for k, v in model2.state_dict().items():
        np.testing.assert_array_equal(v, w_full[k])


def test_keep_last_rotates_checkpoints(tmp_path):
    model, opt, s = _parts()
    fit(model, "cross_entropy", opt, (X, Y), epochs=2, batch_size=16, scheduler=s,
        checkpoint_dir=tmp_path, checkpoint_every=3, keep_last=2, progress=False)
    found = list_checkpoints(tmp_path)
    assert [step for step, _ in found] == [12, 15]
    assert sorted(os.listdir(tmp_path)) == ["ckpt-00000012.safetensors", "ckpt-00000015.safetensors"]


def test_resume_without_checkpoint_starts_fresh(tmp_path, capsys):
    model, opt, s = _parts()
    hist = fit(model, "cross_entropy", opt, (X, Y), epochs=1, batch_size=16, scheduler=s,
               checkpoint_dir=tmp_path / "empty", resume=True)
    assert "starting fresh" in capsys.readouterr().out
    assert len(hist.steps) == 8


def test_resume_with_other_batch_size_is_refused(tmp_path):
    model, opt, s = _parts()
    fit(model, "cross_entropy", opt, (X, Y), epochs=1, batch_size=16, scheduler=s,
        checkpoint_dir=tmp_path, progress=False)
    model, opt, s = _parts()
    with pytest.raises(ValueError, match="batch_size"):
        fit(model, "cross_entropy", opt, (X, Y), epochs=2, batch_size=8, scheduler=s,
            checkpoint_dir=tmp_path, resume=True, progress=False)


def test_resume_needs_checkpoint_dir():
    model, opt, _ = _parts(sched=None)
    with pytest.raises(ValueError, match="checkpoint_dir"):
        fit(model, "cross_entropy", opt, (X, Y), resume=True, progress=False)


def test_early_stopping_logic():
    class T:
        stop_training = False

    es = EarlyStopping(monitor="val_loss", patience=2, min_delta=0.01)
    t = T()
    for e, v in enumerate([1.0, 0.5, 0.495, 0.6]):
        es.on_epoch_end(t, e, {"val_loss": v})
    assert t.stop_training and es.stopped_epoch == 3 and es.best == 0.5 and es.best_epoch == 1
    es2 = EarlyStopping(monitor="val_accuracy", patience=1)
    assert es2.mode == "max"
    es2.load_state_dict(json.loads(json.dumps(es.state_dict())))
    assert es2.best == 0.5 and es2.wait == 2
    with pytest.raises(KeyError, match="val_data"):
        EarlyStopping().on_epoch_end(T(), 0, {"loss": 1.0})


def test_early_stopping_stops_fit():
    model, opt, _ = _parts(sched=None)
    es = EarlyStopping(monitor="val_accuracy", patience=1, min_delta=1.0)  # never improves
    hist = fit(model, "cross_entropy", opt, (X, Y), epochs=10, batch_size=30, val_data=(XV, YV),
               callbacks=[es], progress=False)
    assert len(hist) == 2 and es.stopped_epoch == 1


def test_history_csv_json_and_plot(tmp_path):
    model, opt, s = _parts()
    hist = fit(model, "cross_entropy", opt, (X, Y), epochs=2, batch_size=16, scheduler=s,
               val_data=(XV, YV), progress=False)
    hist.save_csv(tmp_path / "epochs.csv")
    hist.save_csv(tmp_path / "steps.csv", which="steps")
    rows = list(csv.DictReader(open(tmp_path / "epochs.csv")))
    assert len(rows) == 2 and float(rows[1]["val_loss"]) == hist["val_loss"][1]
    steps = list(csv.DictReader(open(tmp_path / "steps.csv")))
    assert [float(r["loss"]) for r in steps] == hist.step_losses
    hist.save_json(tmp_path / "h.json")
    back = History.load_json(tmp_path / "h.json")
    assert back.to_dict() == hist.to_dict()
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="pip install matplotlib"):
            hist.plot(tmp_path / "h.png")
    else:
        hist.plot(tmp_path / "h.png")
        assert (tmp_path / "h.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_evaluate_predict_custom_loss_and_metric():
    model, opt, _ = _parts(sched=None)

    def top2(out, y):
        return float(np.mean([yy in np.argsort(o)[-2:] for o, yy in zip(out, y)]))

    def loss_fn(g, out, y):
        return g.cross_entropy(out, y, label_smoothing=0.1)

    tr = Trainer(model, loss_fn, opt, metrics=["accuracy", top2], progress=False,
                 reuse_graph=False)
    hist = tr.fit((X, Y), epochs=3, batch_size=20)
    assert "top2" in hist.columns() and hist["top2"][-1] >= hist["accuracy"][-1]
    res = tr.evaluate((XV, YV), batch_size=7)
    assert set(res) == {"loss", "accuracy", "top2"}
    pred = tr.predict(XV, batch_size=9)
    assert pred.shape == (40, 3)
    assert res["accuracy"] == pytest.approx(np.mean(pred.argmax(1) == YV))
    assert model.training  # evaluate/predict restore the mode


def test_integer_inputs_reach_embedding_models():
    yscv.manual_seed(0)
    model = nn.Sequential(nn.Embedding(10, 4), nn.Flatten(), nn.Linear(12, 2))
    tokens = np.random.default_rng(1).integers(0, 10, size=(50, 3))
    labels = (tokens[:, 0] > 4).astype(np.int64)
    hist = fit(model, "cross_entropy", optim.Adam(model.parameters(), lr=0.05), (tokens, labels),
               epochs=15, batch_size=10, progress=False)
    assert hist["accuracy"][-1] > 0.9


def test_mse_regression_and_grad_clipping():
    yscv.manual_seed(0)
    model = nn.Linear(5, 1)
    target = (X @ np.arange(1, 6, dtype=np.float32)[:, None]).astype(np.float32)
    tr = Trainer(model, "mse", optim.SGD(model.parameters(), lr=0.05), metrics=(),
                 grad_clip_norm=1.0, progress=False)
    snapshots = [np.concatenate([model.weight.data.ravel(), model.bias.data])]

    class Record(Callback):
        def on_step_end(self, trainer, step, logs):
            snapshots.append(np.concatenate([model.weight.data.ravel(), model.bias.data]))

    tr.callbacks.append(Record())
    hist = tr.fit((X, target), epochs=40, batch_size=40)
    assert hist["loss"][-1] < 0.2 * hist["loss"][0]
    # clipped: every SGD step moves the parameters by at most lr * max_norm
    moves = np.linalg.norm(np.diff(np.array(snapshots), axis=0), axis=1)
    assert moves.max() <= 0.05 + 1e-5 and moves.max() > 0.049


def test_bad_arguments():
    model, opt, _ = _parts(sched=None)
    with pytest.raises(ValueError, match="unknown loss"):
        Trainer(model, "hinge", opt)
    with pytest.raises(ValueError, match="scheduler_interval"):
        Trainer(model, "mse", opt, scheduler_interval="batch")
    with pytest.raises(TypeError, match="pair"):
        fit(model, "cross_entropy", opt, X, progress=False)
    with pytest.raises(ValueError, match="120 inputs but 3 targets"):
        fit(model, "cross_entropy", opt, (X, Y[:3]), progress=False)
    with pytest.raises(ValueError, match="batch_size"):
        fit(model, "cross_entropy", opt, (X, Y), batch_size=0, progress=False)
