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
        if not hasattr(s, "interval"):  # the class attribute lands with the optim branch
            s.interval = "step"
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


# ------------------------------------------------------------------ DataLoader input
from yscv.data import DataLoader, TensorDataset  # noqa: E402
import yscv.train._progress as progress_mod  # noqa: E402


class Crash(Callback):
    """Simulates a killed process: raises right after step ``k``."""

    def __init__(self, k):
        self.k = k

    def on_step_end(self, trainer, step, logs):
        if step == self.k:
            raise RuntimeError(f"crash at step {step}")


def test_loader_gives_the_same_run_as_arrays():
    model, opt, s = _parts()
    h_arr = Trainer(model, "cross_entropy", opt, s, progress=False).fit(
        (X, Y), epochs=2, batch_size=16, shuffle=False, val_data=(XV, YV))
    model, opt, s = _parts()
    loader = DataLoader(TensorDataset(X, Y), batch_size=16)
    tr = Trainer(model, "cross_entropy", opt, s, progress=False)
    h_dl = tr.fit(loader, epochs=2, val_data=DataLoader(TensorDataset(XV, YV), batch_size=256))
    assert h_dl.step_losses == h_arr.step_losses and len(h_dl.steps) == 16
    assert h_dl["val_loss"] == h_arr["val_loss"] and h_dl["accuracy"] == h_arr["accuracy"]
    assert tr.evaluate(DataLoader(TensorDataset(XV, YV), batch_size=7)) == \
        tr.evaluate((XV, YV), batch_size=7)


@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("every,crash_at", [(5, 13), (None, 19), (8, 17)])
def test_loader_resume_after_a_crash_reproduces_the_run(tmp_path, num_workers, every, crash_at):
    def loaders():
        train = DataLoader(TensorDataset(X, Y), batch_size=15, shuffle=True,
                           num_workers=num_workers)  # seed drawn from the library generator
        val = DataLoader(TensorDataset(XV, YV), batch_size=16, shuffle=True, seed=5)
        return train, val

    model, opt, s = _parts(sched="step")
    train, val = loaders()
    full = Trainer(model, "cross_entropy", opt, s, progress=False,
                   checkpoint_dir=tmp_path / "a", checkpoint_every=every)
    h_full = full.fit(train, epochs=4, val_data=val)
    w_full = model.state_dict()
    assert len(h_full.steps) == 32

    model, opt, s = _parts(sched="step")
    train, val = loaders()
    t1 = Trainer(model, "cross_entropy", opt, s, progress=False, callbacks=[Crash(crash_at)],
                 checkpoint_dir=tmp_path / "b", checkpoint_every=every)
    with pytest.raises(RuntimeError, match=f"crash at step {crash_at}"):
        t1.fit(train, epochs=4, val_data=val)
    assert multiprocessing_children() == []  # the crash stopped the loader's workers

    model2, opt2, s2 = _parts(seed=42, sched="step")  # a new process: other init and RNG
    train2, val2 = loaders()
    t2 = Trainer(model2, "cross_entropy", opt2, s2, progress=False, callbacks=[Crash(-1)],
                 checkpoint_dir=tmp_path / "b", checkpoint_every=every)
    h = t2.fit(train2, epochs=4, val_data=val2, resume=True)
    assert t2.global_step == 32
    assert h.step_losses == h_full.step_losses  # equality, not closeness
    strip = [{k: v for k, v in r.items() if k != "time"} for r in h_full.epochs]
    assert [{k: v for k, v in r.items() if k != "time"} for r in h.epochs] == strip
    for k, v in model2.state_dict().items():
        np.testing.assert_array_equal(v, w_full[k])


def multiprocessing_children():
    import multiprocessing
    import time
    deadline = time.monotonic() + 5
    while multiprocessing.active_children() and time.monotonic() < deadline:
        time.sleep(0.05)
    return multiprocessing.active_children()


def test_loader_checkpoint_extra_is_json_and_arrays_round_trip(tmp_path):
    class ArraySampler:
        """A sampler whose state holds a NumPy array (encoded into the JSON extra)."""

        def __init__(self):
            self.order = np.arange(120)[::-1].copy()

        def __iter__(self):
            return iter(self.order.tolist())

        def __len__(self):
            return 120

        def state_dict(self):
            return {"order": self.order.copy()}

        def load_state_dict(self, st):
            assert isinstance(st["order"], np.ndarray) and st["order"].dtype == np.int64
            self.order = st["order"].copy()

    model, opt, _ = _parts(sched=None)
    loader = DataLoader(TensorDataset(X, Y), batch_size=40, sampler=ArraySampler())
    tr = Trainer(model, "cross_entropy", opt, progress=False, callbacks=[StopAt(2)],
                 checkpoint_dir=tmp_path, checkpoint_every=1)
    tr.fit(loader, epochs=1)
    meta = yscv.state.read_checkpoint_metadata(list_checkpoints(tmp_path)[-1][1])
    saved = meta["extra"]["fit"]["loader"]
    assert saved["batches_consumed"] == 2 and saved["sampler"]["order"]["__ndarray__"] == "<i8"
    json.dumps(meta["extra"])
    model, opt, _ = _parts(sched=None)
    sampler = ArraySampler()
    sampler.order = np.arange(120)
    loader2 = DataLoader(TensorDataset(X, Y), batch_size=40, sampler=sampler)
    tr2 = Trainer(model, "cross_entropy", opt, progress=False, callbacks=[StopAt(-1)],
                  checkpoint_dir=tmp_path, checkpoint_every=1)
    tr2.fit(loader2, epochs=1, resume=True)
    np.testing.assert_array_equal(sampler.order, np.arange(120)[::-1])
    assert tr2.global_step == 3


def test_loader_resume_refuses_another_loader_and_changes_nothing(tmp_path):
    model, opt, _ = _parts(sched=None)
    fit(model, "cross_entropy", opt, DataLoader(TensorDataset(X, Y), batch_size=16), epochs=1,
        checkpoint_dir=tmp_path, progress=False)
    model, opt, _ = _parts(seed=5, sched=None)
    before = model.state_dict()
    with pytest.raises(ValueError, match="batch_size"):
        fit(model, "cross_entropy", opt, DataLoader(TensorDataset(X, Y), batch_size=8),
            epochs=2, checkpoint_dir=tmp_path, resume=True, progress=False)
    with pytest.raises(ValueError, match="written for"):  # arrays where a loader was used
        fit(model, "cross_entropy", opt, (X, Y), epochs=2, batch_size=16,
            checkpoint_dir=tmp_path, resume=True, progress=False)
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(v, before[k])


def test_loader_bad_arguments():
    model, opt, _ = _parts(sched=None)
    loader = DataLoader(TensorDataset(X, Y), batch_size=16)
    with pytest.raises(ValueError, match="batch_size given with a DataLoader"):
        fit(model, "cross_entropy", opt, loader, batch_size=16, progress=False)
    with pytest.raises(ValueError, match="shuffle, drop_last given"):
        Trainer(model, "cross_entropy", opt, progress=False).fit(loader, shuffle=True,
                                                                  drop_last=False)
    triples = DataLoader(TensorDataset(X, Y, Y), batch_size=16)
    with pytest.raises(TypeError, match="pairs, got tuple of 3"):
        fit(model, "cross_entropy", opt, triples, progress=False)
    with pytest.raises(ValueError, match="no batch"):
        fit(model, "cross_entropy", opt, DataLoader(TensorDataset(X[:5], Y[:5]), batch_size=8,
                                                    drop_last=True), progress=False)


# ------------------------------------------------------------------ schedulers
class FakeScheduler:
    """Records how the trainer steps it (the interval / takes_metric protocol)."""

    def __init__(self, interval=None, takes_metric=None):
        if interval is not None:
            self.interval = interval
        if takes_metric is not None:
            self.takes_metric = takes_metric
        self.calls = []

    def step(self, *args):
        self.calls.append(args)


@pytest.mark.parametrize("interval,expected", [(None, 3), ("epoch", 3), ("step", 12)])
def test_scheduler_interval_attribute(interval, expected):
    model, opt, _ = _parts(sched=None)
    sched = FakeScheduler(interval=interval)
    tr = Trainer(model, "cross_entropy", opt, sched, progress=False)
    assert tr.scheduler_interval == (interval or "epoch")
    tr.fit((X, Y), epochs=3, batch_size=30)
    assert sched.calls == [()] * expected
    over = FakeScheduler(interval="step")
    Trainer(model, "cross_entropy", opt, over, scheduler_interval="epoch",
            progress=False).fit((X, Y), epochs=2, batch_size=30)
    assert over.calls == [()] * 2


@pytest.mark.parametrize("with_val", [True, False])
def test_metric_scheduler_steps_per_epoch_with_the_monitored_loss(with_val):
    model, opt, _ = _parts(sched=None)
    sched = FakeScheduler(interval="epoch", takes_metric=True)
    hist = fit(model, "cross_entropy", opt, (X, Y), epochs=3, batch_size=30, scheduler=sched,
               val_data=(XV, YV) if with_val else None, progress=False)
    expected = hist["val_loss"] if with_val else hist["loss"]
    assert sched.calls == [(v,) for v in expected] and len(expected) == 3
    with pytest.raises(ValueError, match="takes a metric"):
        Trainer(model, "cross_entropy", opt, FakeScheduler(takes_metric=True),
                scheduler_interval="step")
    with pytest.raises(ValueError, match="takes a metric"):
        Trainer(model, "cross_entropy", opt, FakeScheduler(interval="step", takes_metric=True))


# ------------------------------------------------------------------ progress modes
def test_progress_modes(capsys, monkeypatch):
    def run(progress):
        model, opt, _ = _parts(sched=None)
        fit(model, "cross_entropy", opt, (X, Y), epochs=2, batch_size=30, progress=progress)
        return capsys.readouterr()

    auto = run(None)  # capsys: stdout is not a terminal, and no notebook
    assert len(auto.out.strip().splitlines()) == 2 and "epoch 2/2" not in auto.err
    monkeypatch.setattr(progress_mod, "stderr_isatty", lambda: True)  # the bar's terminal
    forced = run(True)
    assert len(forced.out.strip().splitlines()) == 2
    assert "epoch 1/2" in forced.err and "epoch 2/2" in forced.err and "4/4" in forced.err
    assert run(False) == ("", "")
    monkeypatch.setattr(progress_mod, "in_notebook", lambda: True)
    notebook = run(None)
    assert "epoch 2/2" in notebook.err and "4/4" in notebook.err
    assert len(notebook.out.strip().splitlines()) == 2
    assert run(False) == ("", "")
    model, opt, _ = _parts(sched=None)
    with pytest.raises(TypeError, match="progress"):
        Trainer(model, "cross_entropy", opt, progress="yes")


def test_no_bar_into_a_redirected_stderr(capsys, monkeypatch):
    """stderr is a file or a pipe (capsys): no tqdm bar and no carriage
    return there, whatever ``progress`` says; one line per epoch on stdout."""
    monkeypatch.setattr(progress_mod, "stdout_isatty", lambda: True)
    monkeypatch.setattr(progress_mod, "stderr_isatty", lambda: False, raising=False)
    for progress in (None, True):
        model, opt, _ = _parts(sched=None)
        fit(model, "cross_entropy", opt, (X, Y), epochs=3, batch_size=30, progress=progress)
        out, err = capsys.readouterr()
        assert err == "", (progress, err[:200])
        lines = out.strip().splitlines()
        assert [line.split("  ")[0] for line in lines] == ["epoch 1/3", "epoch 2/3", "epoch 3/3"]
        assert "\r" not in out
    assert progress_mod.epoch_bar(True, 0, 3, 4, 0) is None
    monkeypatch.setattr(progress_mod, "stderr_isatty", lambda: True)
    bar = progress_mod.epoch_bar(True, 0, 3, 4, 0)
    assert bar is not None
    bar.close()


def test_notebook_detection(monkeypatch):
    import sys
    import types
    monkeypatch.delitem(sys.modules, "IPython", raising=False)
    assert progress_mod.in_notebook() is False
    fake = types.ModuleType("IPython")
    fake.get_ipython = lambda: None  # plain python
    monkeypatch.setitem(sys.modules, "IPython", fake)
    assert progress_mod.in_notebook() is False
    fake.get_ipython = lambda: types.SimpleNamespace()  # terminal IPython: no kernel
    assert progress_mod.in_notebook() is False
    fake.get_ipython = lambda: types.SimpleNamespace(kernel=object())  # Jupyter kernel
    assert progress_mod.in_notebook() is True


def test_backward_workers_same_run_and_validated():
    """``backward_workers`` reaches g.backward: threads (or automatic) give the
    serial run's per-step losses bit for bit; bad values raise at once."""
    runs = []
    for workers in (1, 2, None):
        model, opt, s = _parts(sched="step")
        runs.append(fit(model, "cross_entropy", opt, (X, Y), epochs=2, batch_size=16,
                        scheduler=s, progress=False, backward_workers=workers).step_losses)
    assert runs[1] == runs[0] and runs[2] == runs[0]
    model, opt, s = _parts()
    for bad in (0, -1, 1.5, "2", True):
        with pytest.raises(ValueError, match="backward_workers"):
            Trainer(model, "cross_entropy", opt, backward_workers=bad)


# ------------------------------------------------- the bar while kernels compile
class _Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def test_bar_says_compiling_and_keeps_compile_time_out_of_its_rate(monkeypatch):
    """A compile during the first step: the bar shows "compiling kernels"
    instead of a remaining time, and its rate is the later steps' own speed
    (a compile-bound first step would otherwise predict minutes)."""
    import io

    import yscv.kernels as kernels
    from tqdm import tqdm

    clock = _Clock()
    monkeypatch.setattr(kernels.time, "perf_counter", clock)
    out = io.StringIO()
    raw = tqdm(total=20, desc="epoch 1/3", file=out, mininterval=0)   # the fit loop's smoothing
    raw._time = clock
    raw.start_t = raw.last_print_t = clock.t
    bar = progress_mod.EpochBar(raw)
    count, seconds = kernels.compile_stats()
    kernels._compile_event(True)                 # as the numba:compile listener does
    assert "compiling kernels" in out.getvalue().splitlines()[-1].split("\r")[-1]
    clock.t += 30.0                              # 30 s compiling ...
    kernels._compile_event(False)
    clock.t += 0.5                               # ... and 0.5 s of step
    bar.step(2.5)
    shown = out.getvalue().split("\r")[-1]
    assert "compiling kernels" in shown and "<" not in shown and "loss=2.5000" in shown
    assert kernels.compile_stats() == (count + 1, seconds + 30.0)
    clock.t += 0.5                               # a step without compiling: a prediction
    bar.step(2.0)
    shown = out.getvalue().split("\r")[-1]
    assert "compiling" not in shown
    assert raw.format_dict["elapsed"] == 31.0    # the wall time, compiling included
    assert raw.format_dict["rate"] == 2.0        # 0.5 s per step: the compiling step untimed
    assert "<00:09" in shown, shown              # 18 steps left at 2 steps/s, not 18 * 15.5 s
    bar.close()
    assert bar._on_compile not in kernels._compile_watchers


def test_a_real_compile_reaches_the_watchers():
    import numpy as np

    import yscv.kernels as kernels
    from yscv.kernels import _jit

    @_jit.jit(cache=False)
    def add_two(a):
        return a + 2.0

    seen = []
    count, _ = kernels.compile_stats()
    with kernels.watch_compiles(seen.append):
        assert add_two(np.ones(3))[0] == 3.0
        add_two(np.ones(3))                      # compiled already: no event
    assert seen == [True, False]
    assert kernels.compile_stats()[0] == count + 1
