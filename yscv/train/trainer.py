"""The fit loop: ``Trainer`` (and the one-call :func:`fit`).

    trainer = yscv.train.Trainer(model, "cross_entropy", opt, scheduler=sched,
                                 checkpoint_dir="runs/a", checkpoint_every=100)
    history = trainer.fit((X, y), epochs=10, batch_size=64, val_data=(Xv, yv))
    # later, after a crash:  trainer.fit((X, y), epochs=10, batch_size=64, resume=True)
    # or with a yscv.data.DataLoader:  trainer.fit(loader, epochs=10, val_data=val_loader)

One step: ``g.truncate(k)`` (one graph reused, parameters and buffers bound
once before index ``k``), forward, loss, ``g.backward``, ``optimizer.step()``,
``optimizer.zero_grad()``, ``g.zero_grads()``, and ``scheduler.step()`` when
the scheduler runs per step. Batches come from :meth:`Trainer._epoch_batches`
(the one place that makes them): from in-memory arrays, a permutation drawn
per epoch from the trainer's own seeded generator; from a
:class:`yscv.data.DataLoader`, one iteration of the loader per epoch.

Resume is exact: a checkpoint stores, besides model / optimizer / scheduler
and the library RNG (dropout seeds), the position (epoch, batch), the
shuffle generator's state (or the loader's state) at the start of the epoch,
the running sums of the epoch's training metrics, the history and the
callbacks' state. A resumed run redraws the same order, skips the batches
already done and reproduces the uninterrupted run's per-step losses exactly.
"""
from __future__ import annotations

import copy
import math
import sys
import time

import numpy as np

from .. import checkpoint_io
from ..graph import Graph
from .callbacks import Callback, ModelCheckpoint, latest_checkpoint
from .history import History

__all__ = ["Trainer", "fit", "accuracy"]

_LOSSES = {
    "cross_entropy": "cross_entropy", "mse": "mse_loss", "mse_loss": "mse_loss",
    "l1": "l1_loss", "l1_loss": "l1_loss", "huber": "huber_loss", "huber_loss": "huber_loss",
    "nll": "nll_loss", "nll_loss": "nll_loss",
    "bce_with_logits": "binary_cross_entropy_with_logits",
    "binary_cross_entropy_with_logits": "binary_cross_entropy_with_logits",
}


def accuracy(output: np.ndarray, target: np.ndarray) -> float:
    """Fraction of correct predictions: argmax over the last axis for [N, C]
    outputs (C > 1), ``output > 0`` against 0/1 targets for [N] / [N, 1] logits."""
    out = np.asarray(output)
    tgt = np.asarray(target)
    if out.ndim >= 2 and out.shape[-1] > 1:
        pred = out.argmax(axis=-1)
    else:
        pred = (out.reshape(tgt.shape) > 0).astype(tgt.dtype)
    return float(np.mean(pred == tgt))


def _resolve_loss(loss_fn):
    if isinstance(loss_fn, str):
        if loss_fn not in _LOSSES:
            raise ValueError(f"Trainer: unknown loss {loss_fn!r}; use one of {sorted(_LOSSES)} "
                             "or a callable loss_fn(g, output, target) -> NodeId")
        name = _LOSSES[loss_fn]
        return lambda g, out, y: getattr(g, name)(out, y)
    if not callable(loss_fn):
        raise TypeError("Trainer: loss_fn must be a loss name or a callable "
                        "loss_fn(g, output, target) -> NodeId")
    return loss_fn


def _resolve_metrics(metrics) -> list:
    out = []
    for m in metrics or ():
        if m == "accuracy" or m == "acc":
            out.append(("accuracy", accuracy))
        elif callable(m):
            out.append((getattr(m, "__name__", "metric"), m))
        else:
            raise ValueError(f"Trainer: unknown metric {m!r}; use 'accuracy' or a callable "
                             "metric(output_array, target_array) -> float")
    return out


def _split(data, what: str):
    if not isinstance(data, (tuple, list)) or len(data) != 2:
        raise TypeError(f"{what} must be a pair (inputs, targets) of arrays with the same "
                        "first dimension, or a yscv.data.DataLoader yielding such pairs")
    x, y = np.asarray(data[0]), np.asarray(data[1])
    if len(x) != len(y):
        raise ValueError(f"{what}: {len(x)} inputs but {len(y)} targets")
    if len(x) == 0:
        raise ValueError(f"{what} is empty")
    return x, y


def _is_loader(data) -> bool:
    """A DataLoader-like source: iterable, sized, with a state dict (duck-typed
    so that the fit loop does not import its sibling package ``yscv.data``)."""
    return not isinstance(data, (tuple, list, np.ndarray)) and all(
        callable(getattr(data, a, None)) for a in ("__iter__", "__len__", "state_dict",
                                                    "load_state_dict"))


def _pair(batch, what: str):
    """(inputs, targets) of one loader batch."""
    if not isinstance(batch, (tuple, list)) or len(batch) != 2:
        raise TypeError(f"{what}: the DataLoader must yield (inputs, targets) pairs, got "
                        f"{type(batch).__name__}" + (f" of {len(batch)}" if
                                                     isinstance(batch, (tuple, list)) else ""))
    return np.asarray(batch[0]), np.asarray(batch[1])


def _to_json(obj):
    """A loader state made JSON-safe for the checkpoint's ``extra``: NumPy
    arrays become ``{"__ndarray__": dtype, "shape": .., "data": [..]}`` (exact:
    JSON keeps Python ints and floats' shortest round-trip repr)."""
    if isinstance(obj, np.ndarray):
        return {"__ndarray__": obj.dtype.str, "shape": list(obj.shape),
                "data": obj.ravel().tolist()}
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, dict):
        return {str(k): _to_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_to_json(v) for v in obj]
    return obj


def _from_json(obj):
    if isinstance(obj, dict):
        if "__ndarray__" in obj and set(obj) == {"__ndarray__", "shape", "data"}:
            return np.array(obj["data"], dtype=np.dtype(obj["__ndarray__"])).reshape(obj["shape"])
        return {k: _from_json(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_from_json(v) for v in obj]
    return obj


def _loader_mismatch(loader, saved: dict) -> str:
    """What differs between a saved DataLoader state and ``loader`` (checked
    before anything is restored, so a refused resume changes nothing)."""
    mine = {"batch_size": getattr(loader, "batch_size", None),
            "shuffle": getattr(loader, "shuffle", None),
            "drop_last": getattr(loader, "drop_last", None)}
    dataset = getattr(loader, "dataset", None)
    if dataset is not None:
        mine["dataset_len"] = len(dataset)
    return ", ".join(f"{k}={saved[k]!r} (this loader: {v!r})" for k, v in mine.items()
                     if isinstance(saved, dict) and k in saved and saved[k] != v)


def _in_notebook() -> bool:
    """True inside a Jupyter / IPython kernel (notebooks, VS Code, Colab):
    stdout is not a terminal there, yet a (widget) progress bar shows."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    try:
        shell = ipython.get_ipython()
    except Exception:
        return False
    return shell is not None and getattr(shell, "kernel", None) is not None


def _stdout_isatty() -> bool:
    try:
        return bool(sys.stdout.isatty())
    except (AttributeError, ValueError):
        return False


def _default_forward(g, model, xb):
    # integer inputs (token indices for an Embedding) go to the model as arrays
    return model(g, xb if xb.dtype.kind in "iub" else g.constant(xb))


class Trainer:
    """A PyTorch-style training loop with checkpoints and exact resume.

    Args:
        model: a :class:`yscv.nn.Module` (called ``model(g, x)``).
        loss_fn: ``loss_fn(g, output, target) -> NodeId`` or a name:
            "cross_entropy", "mse", "l1", "huber", "nll", "bce_with_logits".
        optimizer: a :class:`yscv.optim.Optimizer` over the model's parameters.
        scheduler: optional LR scheduler. Its ``interval`` attribute ("step"
            or "epoch", default "epoch") says when it is stepped; one with
            ``takes_metric = True`` (ReduceLROnPlateau) is stepped once per
            epoch with the validation loss (the training loss without
            validation data).
        metrics: names ("accuracy") or callables ``fn(output, target) -> float``
            (averaged over samples, training and validation).
        callbacks: :class:`Callback` instances (e.g. :class:`EarlyStopping`).
        scheduler_interval: "step" or "epoch"; overrides the scheduler's
            ``interval`` (None: ``getattr(scheduler, "interval", "epoch")``).
        checkpoint_dir: folder for training checkpoints (adds a
            :class:`ModelCheckpoint`); with ``checkpoint_every=N`` one every
            N steps, else one per epoch; ``keep_last`` newest files kept.
        seed: seeds the shuffling generator (``yscv.manual_seed`` seeds
            initialisation and dropout; call it before building the model).
        progress: None (automatic): one line per epoch, plus a tqdm bar
            when stdout is a terminal or the code runs in a Jupyter / IPython
            kernel (notebook); True: the same, with the bar shown also
            without a terminal (on stderr); False: nothing printed.
        forward: ``forward(g, model, x_batch) -> NodeId`` for models whose
            call is not ``model(g, g.constant(x))``.
        grad_clip_norm: clip the global L2 norm of the gradients before each step.
        reuse_graph: one graph reused with ``truncate`` (default) or a fresh
            graph per step.
    """

    def __init__(self, model, loss_fn, optimizer, scheduler=None, *, metrics=("accuracy",),
                 callbacks=(), scheduler_interval=None, checkpoint_dir=None,
                 checkpoint_every=None, keep_last: int = 3, seed: int = 0, progress=None,
                 forward=None, grad_clip_norm=None, reuse_graph: bool = True):
        self.model = model
        self.loss_fn = _resolve_loss(loss_fn)
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.metrics = _resolve_metrics(metrics)
        if scheduler_interval is None:
            scheduler_interval = getattr(scheduler, "interval", "epoch")
        if scheduler_interval not in ("step", "epoch"):
            raise ValueError(f"Trainer: scheduler_interval must be 'step' or 'epoch', "
                             f"got {scheduler_interval!r}")
        self.scheduler_takes_metric = bool(getattr(scheduler, "takes_metric", False))
        if self.scheduler_takes_metric and scheduler_interval != "epoch":
            raise ValueError(f"Trainer: {type(scheduler).__name__} takes a metric "
                             "(scheduler.step(val_loss)) and is stepped once per epoch; "
                             f"scheduler_interval={scheduler_interval!r} is not possible")
        self.scheduler_interval = scheduler_interval
        cbs = list(callbacks)
        for cb in cbs:
            if not isinstance(cb, Callback):
                raise TypeError(f"Trainer: callbacks must be Callback instances, got {type(cb).__name__}")
        self.checkpoint_dir = checkpoint_dir
        if checkpoint_dir is not None and not any(isinstance(c, ModelCheckpoint) for c in cbs):
            cbs.append(ModelCheckpoint(checkpoint_dir, checkpoint_every, keep_last))
        # checkpoint callbacks run last so they save the others' updated state
        self.callbacks = [c for c in cbs if not isinstance(c, ModelCheckpoint)] + \
                         [c for c in cbs if isinstance(c, ModelCheckpoint)]
        self.seed = seed
        if progress is not None and not isinstance(progress, (bool, np.bool_)):
            raise TypeError(f"Trainer: progress must be None, True or False, got {progress!r}")
        self.progress = None if progress is None else bool(progress)
        self.forward = forward or _default_forward
        self.grad_clip_norm = grad_clip_norm
        self.reuse_graph = bool(reuse_graph)
        params = list(model.parameters())
        self.dtype = params[0].data.dtype if params else np.dtype(np.float32)
        self.history = History()
        self.global_step = 0
        self.epoch = 0
        self.stop_training = False
        self._batch_in_epoch = 0
        self._shuffle_rng = np.random.default_rng(seed)
        self._epoch_rng_state = None
        self._acc = self._new_acc()
        self._data_sig = None
        self._train_loader = None   # fit's DataLoader (None: in-memory arrays)
        self._val_loader = None
        self._loader_epoch_state = None  # the train loader's state at the epoch's start
        self._arrays = None
        self._batching = None  # arrays: (batch_size, shuffle, drop_last)

    # ------------------------------------------------------------ helpers
    def _new_acc(self) -> dict:
        return {"n": 0, "loss": 0.0, **{name: 0.0 for name, _ in self.metrics}}

    def _lr(self):
        groups = self.optimizer.param_groups
        return groups[0]["lr"] if groups else None

    def _print(self, msg: str) -> None:
        if self.progress is not False:
            print(msg, flush=True)

    def _clip(self) -> None:
        grads = [p.grad for p in self.model.parameters() if p.grad is not None]
        total = math.sqrt(sum(float(np.dot(gr.ravel().astype(np.float64), gr.ravel()))
                              for gr in grads))
        coef = self.grad_clip_norm / (total + 1e-6)
        if coef < 1.0:
            for p in self.model.parameters():
                if p.grad is not None:
                    p.grad = p.grad * p.grad.dtype.type(coef)

    def _step(self, g, k, xb, yb):
        if self.reuse_graph:
            g.truncate(k)
        else:
            g = Graph(self.dtype)
        out = self.forward(g, self.model, xb)
        loss = self.loss_fn(g, out, yb)
        g.backward(loss)
        # read before the update: a released (checkpointed) value recomputed
        # later would see the new parameters
        loss_value, out_value = float(g.value(loss)), g.value(out)
        if self.grad_clip_norm is not None:
            self._clip()
        self.optimizer.step()
        self.optimizer.zero_grad()
        if self.reuse_graph:
            g.zero_grads()
        return loss_value, out_value

    # ------------------------------------------------------------ training
    def fit(self, train_data, epochs: int = 1, batch_size=None, val_data=None,
            resume: bool = False, shuffle=None, drop_last=None) -> History:
        """Train until ``epochs`` epochs are complete (counting epochs done
        before a resume); returns :attr:`history`.

        Args:
            train_data: ``(inputs, targets)`` arrays (first axis = samples),
                or a :class:`yscv.data.DataLoader` yielding ``(inputs,
                targets)`` batches (one iteration of it per epoch; its own
                batch size, shuffling and workers apply, and its state goes
                into the checkpoints).
            batch_size: samples per step for arrays (default 32); the last
                batch may be smaller unless ``drop_last``. With a DataLoader
                leave ``batch_size``, ``shuffle`` and ``drop_last`` unset.
            shuffle: a new permutation per epoch for arrays (default True).
            val_data: ``(inputs, targets)`` or a DataLoader, evaluated after
                every epoch (``val_loss``, ``val_<metric>`` in the epoch logs).
            resume: continue from the newest checkpoint in ``checkpoint_dir``
                (a fresh start when there is none).
        """
        self._set_train_data(train_data, batch_size, shuffle, drop_last)
        self._val_loader = val_data if _is_loader(val_data) else None
        n_batches = self._num_batches()
        if resume:
            self._resume()
        self.stop_training = False
        for cb in self.callbacks:
            cb.on_train_begin(self)
        g = Graph(self.dtype)
        k = self.model.bind(g) if self.reuse_graph else 0
        self.model.train()
        while self.epoch < epochs and not self.stop_training:
            e = self.epoch
            if self._batch_in_epoch == 0:
                self._acc = self._new_acc()
            for cb in self.callbacks:
                cb.on_epoch_begin(self, e)
            t0 = time.perf_counter()
            bar = self._bar(e, epochs, n_batches)
            batches = self._epoch_batches()
            try:
                for b, (xb, yb) in enumerate(batches, start=self._batch_in_epoch):
                    self._train_step(g, k, e, b, xb, yb, bar)
                    if self.stop_training:
                        break
            finally:
                batches.close()  # stops a loader's workers at once (break, error)
                if bar is not None:
                    bar.close()
            if self._batch_in_epoch < n_batches:
                break  # stopped mid-epoch: no epoch summary
            self._end_epoch(e, epochs, val_data, time.perf_counter() - t0)
        for cb in self.callbacks:
            cb.on_train_end(self)
        return self.history

    def _train_step(self, g, k, e, b, xb, yb, bar) -> None:
        """One optimizer step on batch ``b`` of epoch ``e``, with its
        bookkeeping: running sums, history, per-step scheduler, bar, callbacks."""
        loss, out = self._step(g, k, xb, yb)
        self.global_step += 1
        self._batch_in_epoch = b + 1
        n = len(yb)
        acc = self._acc
        acc["n"] += n
        acc["loss"] += loss * n
        for name, fn in self.metrics:
            acc[name] += float(fn(out, yb)) * n
        lr = self._lr()
        self.history.log_step(self.global_step, e, loss, lr)
        if (self.scheduler is not None and self.scheduler_interval == "step"
                and not self.scheduler_takes_metric):
            self.scheduler.step()
        if bar is not None:
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.4f}")
        logs = {"loss": loss, "lr": lr}
        for cb in self.callbacks:
            cb.on_step_end(self, self.global_step, logs)

    # ------------------------------------------------------------ batching
    def _set_train_data(self, train_data, batch_size, shuffle, drop_last) -> None:
        """Validate fit's data arguments; record the source and its signature
        (checked on resume)."""
        if _is_loader(train_data):
            given = [name for name, v in (("batch_size", batch_size), ("shuffle", shuffle),
                                          ("drop_last", drop_last)) if v is not None]
            if given:
                raise ValueError(f"fit: {', '.join(given)} given with a DataLoader; set "
                                 "them on the DataLoader instead")
            n_batches = len(train_data)
            if n_batches == 0:
                raise ValueError("fit: the DataLoader yields no batch")
            self._train_loader, self._arrays, self._batching = train_data, None, None
            dataset = getattr(train_data, "dataset", None)
            self._data_sig = {"loader": True, "batches": n_batches,
                              "n": None if dataset is None else len(dataset),
                              "batch_size": getattr(train_data, "batch_size", None),
                              "shuffle": getattr(train_data, "shuffle", None),
                              "drop_last": getattr(train_data, "drop_last", None)}
            return
        x, y = _split(train_data, "fit: train_data")
        batch_size = 32 if batch_size is None else batch_size
        shuffle = True if shuffle is None else bool(shuffle)
        drop_last = False if drop_last is None else bool(drop_last)
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"fit: batch_size must be a positive int, got {batch_size!r}")
        n = len(x)
        if (n // batch_size if drop_last else -(-n // batch_size)) == 0:
            raise ValueError(f"fit: {n} samples make no full batch of {batch_size} with drop_last")
        self._train_loader, self._arrays = None, (x, y)
        self._batching = (batch_size, shuffle, drop_last)
        self._data_sig = {"n": n, "batch_size": batch_size, "shuffle": shuffle,
                          "drop_last": drop_last}

    def _num_batches(self) -> int:
        if self._train_loader is not None:
            return len(self._train_loader)
        batch_size, _, drop_last = self._batching
        n = len(self._arrays[0])
        return n // batch_size if drop_last else -(-n // batch_size)

    def _epoch_batches(self):
        """Yield the current epoch's ``(inputs, targets)`` batches from batch
        ``self._batch_in_epoch`` on: the one place that makes batches.

        At the epoch's start it records what redraws the epoch's order (the
        shuffle generator's state, or the loader's state); mid-epoch (after a
        resume or a stop) it restores that record and skips the batches done.
        """
        start = self._batch_in_epoch
        if self._train_loader is not None:
            loader = self._train_loader
            if start >= len(loader):
                return
            if start == 0:
                it = iter(loader)  # starts the loader's next epoch
                self._loader_epoch_state = copy.deepcopy(loader.state_dict())
            else:
                loader.load_state_dict(dict(copy.deepcopy(self._loader_epoch_state),
                                            batches_consumed=start))
                it = iter(loader)
            try:
                for batch in it:
                    yield _pair(batch, "fit")
            finally:
                close = getattr(it, "close", None)
                if close is not None:
                    close()
            return
        x, y = self._arrays
        batch_size, shuffle, _ = self._batching
        rng = self._shuffle_rng
        if start == 0:
            self._epoch_rng_state = copy.deepcopy(rng.bit_generator.state)
        else:  # resumed or restarted mid-epoch: redraw the same permutation
            rng.bit_generator.state = copy.deepcopy(self._epoch_rng_state)
        perm = rng.permutation(len(x)) if shuffle else np.arange(len(x))
        for b in range(start, self._num_batches()):
            idx = perm[b * batch_size:(b + 1) * batch_size]
            yield x[idx], y[idx]

    def _bar(self, epoch, epochs, n_batches):
        if self.progress is False:
            return None
        notebook = _in_notebook()
        if self.progress is None and not (notebook or _stdout_isatty()):
            return None
        if notebook:
            from tqdm.auto import tqdm  # a widget bar when ipywidgets is installed
        else:
            from tqdm import tqdm
        return tqdm(total=n_batches, initial=self._batch_in_epoch, leave=False,
                    desc=f"epoch {epoch + 1}/{epochs}")

    def _end_epoch(self, e, epochs, val_data, elapsed) -> None:
        acc = self._acc
        logs = {"epoch": e, "loss": acc["loss"] / acc["n"]}
        for name, _ in self.metrics:
            logs[name] = acc[name] / acc["n"]
        if val_data is not None:
            for key, v in self.evaluate(val_data).items():
                logs["val_" + key] = v
        logs["lr"] = self._lr()
        logs["time"] = elapsed
        self.history.log_epoch(logs)
        if self.scheduler is not None and self.scheduler_takes_metric:
            self.scheduler.step(logs.get("val_loss", logs["loss"]))
        elif self.scheduler is not None and self.scheduler_interval == "epoch":
            self.scheduler.step()
        self.epoch = e + 1
        self._batch_in_epoch = 0
        parts = [f"epoch {e + 1}/{epochs}"] + [
            f"{k} {v:.4f}" for k, v in logs.items() if k not in ("epoch", "lr", "time")]
        parts.append(f"lr {logs['lr']:.3g}" if logs["lr"] is not None else "")
        parts.append(f"{elapsed:.1f}s")
        self._print("  ".join(p for p in parts if p))
        for cb in self.callbacks:
            cb.on_epoch_end(self, e, logs)

    # ---------------------------------------------------------- evaluation
    def evaluate(self, data, batch_size: int = 256) -> dict:
        """Mean loss and metrics over ``data`` in eval mode, without gradients.

        ``data``: ``(inputs, targets)`` arrays (in batches of ``batch_size``)
        or a DataLoader yielding ``(inputs, targets)`` (one iteration of it).
        """
        if _is_loader(data):
            batches = (_pair(batch, "evaluate") for batch in data)
        else:
            x, y = _split(data, "evaluate: data")
            batches = ((x[s:s + batch_size], y[s:s + batch_size])
                       for s in range(0, len(x), batch_size))
        was_training = self.model.training
        self.model.eval()
        g = Graph(self.dtype)
        k = self.model.bind(g)
        sums = {"loss": 0.0, **{name: 0.0 for name, _ in self.metrics}}
        count = 0
        try:
            with g.no_grad():
                for xb, yb in batches:
                    g.truncate(k)
                    count += len(yb)
                    out = self.forward(g, self.model, xb)
                    loss = float(g.value(self.loss_fn(g, out, yb)))
                    sums["loss"] += loss * len(xb)
                    ov = g.value(out)
                    for name, fn in self.metrics:
                        sums[name] += float(fn(ov, yb)) * len(xb)
        finally:
            self.model.train(was_training)
        if count == 0:
            raise ValueError("evaluate: the data yielded no sample")
        return {k2: v / count for k2, v in sums.items()}

    def predict(self, x, batch_size: int = 256) -> np.ndarray:
        """Model outputs for ``x`` in eval mode (concatenated over batches)."""
        x = np.asarray(x)
        was_training = self.model.training
        self.model.eval()
        g = Graph(self.dtype)
        k = self.model.bind(g)
        outs = []
        try:
            with g.no_grad():
                for s in range(0, len(x), batch_size):
                    g.truncate(k)
                    outs.append(np.array(g.value(self.forward(g, self.model, x[s:s + batch_size]))))
        finally:
            self.model.train(was_training)
        return np.concatenate(outs, axis=0)

    # --------------------------------------------------------- checkpoints
    def state_dict(self) -> dict:
        """The loop's own JSON state (position, shuffle RNG or the loaders'
        states, running sums, history, callbacks); model/optimizer/scheduler
        are saved separately."""
        rng_state = self._shuffle_rng.bit_generator.state if self._batch_in_epoch == 0 \
            else self._epoch_rng_state
        return {"global_step": self.global_step, "epoch": self.epoch,
                "batch_in_epoch": self._batch_in_epoch, "epoch_rng_state": rng_state,
                "loader": _to_json(self._train_loader_state()),
                "val_loader": _to_json(None if self._val_loader is None
                                       else self._val_loader.state_dict()),
                "acc": dict(self._acc), "data": self._data_sig,
                "history": self.history.to_dict(),
                "callbacks": [{"class": type(cb).__name__, "state": cb.state_dict()}
                              for cb in self.callbacks]}

    def _train_loader_state(self):
        """The train loader's state at the trainer's position: the epoch's
        start state with ``batches_consumed`` = batches done (mid-epoch), or
        the loader's own state between epochs."""
        loader = self._train_loader
        if loader is None:
            return None
        if self._batch_in_epoch > 0 and self._loader_epoch_state is not None:
            return dict(self._loader_epoch_state, batches_consumed=self._batch_in_epoch)
        return loader.state_dict()

    def save_checkpoint(self, path, extra=None) -> str:
        """Write a full training checkpoint (model, optimizer, scheduler, RNG,
        loop state; ``extra`` is returned by :meth:`load_checkpoint`)."""
        return checkpoint_io.save_checkpoint(
            path, model=self.model, optimizer=self.optimizer, scheduler=self.scheduler,
            step=self.global_step, extra={"fit": self.state_dict(), "user": extra})

    def load_checkpoint(self, path) -> dict:
        """Restore everything :meth:`save_checkpoint` wrote; returns the user ``extra``."""
        meta = checkpoint_io.read_checkpoint_metadata(path)
        fit_state = (meta.get("extra") or {}).get("fit")
        if not isinstance(fit_state, dict):
            from ..errors import CheckpointError
            raise CheckpointError(f"checkpoint {path!r} was not written by a Trainer "
                                  "(no fit state in its extra)")
        self._check_resume(fit_state, path)
        info = checkpoint_io.load_checkpoint(path, self.model, self.optimizer, self.scheduler)
        self._apply_state(info["extra"]["fit"])
        return info["extra"].get("user")

    def _check_resume(self, st: dict, path) -> None:
        saved = st.get("data")
        if self._data_sig is not None and saved is not None and saved != self._data_sig:
            raise ValueError(f"resume: checkpoint {path!r} was written for {saved}, but fit was "
                             f"called with {self._data_sig}; resuming would not replay the "
                             "same batches")
        for what, loader, saved_state in (("train", self._train_loader, st.get("loader")),
                                          ("validation", self._val_loader, st.get("val_loader"))):
            if loader is None:
                continue
            if saved_state is None:
                if what == "train":
                    raise ValueError(f"resume: checkpoint {path!r} holds no DataLoader state")
                continue
            diff = _loader_mismatch(loader, saved_state)
            if diff:
                raise ValueError(f"resume: checkpoint {path!r} holds a {what} DataLoader state "
                                 f"saved with {diff}; resuming would not replay the same "
                                 "batches")
        cbs = st.get("callbacks", [])
        names = [c["class"] for c in cbs]
        mine = [type(cb).__name__ for cb in self.callbacks]
        if names != mine:
            raise ValueError(f"resume: checkpoint {path!r} has callbacks {names}, this trainer "
                             f"has {mine}")

    def _apply_state(self, st: dict) -> None:
        self.global_step = int(st["global_step"])
        self.epoch = int(st["epoch"])
        self._batch_in_epoch = int(st["batch_in_epoch"])
        self._epoch_rng_state = st["epoch_rng_state"]
        if st["epoch_rng_state"] is not None:  # None: batches came from a DataLoader
            self._shuffle_rng.bit_generator.state = copy.deepcopy(st["epoch_rng_state"])
        self._acc = dict(st["acc"])
        if self._train_loader is not None:
            loader_state = _from_json(st.get("loader"))
            self._loader_epoch_state = dict(loader_state, batches_consumed=0)
            self._train_loader.load_state_dict(loader_state)
        if self._val_loader is not None and st.get("val_loader") is not None:
            self._val_loader.load_state_dict(_from_json(st["val_loader"]))
        self.history = History.from_dict(st["history"])
        for cb, saved in zip(self.callbacks, st.get("callbacks", [])):
            cb.load_state_dict(saved["state"])

    def _resume(self) -> None:
        if self.checkpoint_dir is None:
            raise ValueError("fit: resume=True needs checkpoint_dir")
        prefixes = {cb.prefix for cb in self.callbacks if isinstance(cb, ModelCheckpoint)}
        path = None
        for prefix in prefixes or {"ckpt"}:
            path = latest_checkpoint(self.checkpoint_dir, prefix) or path
        if path is None:
            self._print(f"resume: no checkpoint in {self.checkpoint_dir!r}; starting fresh")
            return
        self.load_checkpoint(path)
        self._print(f"resumed from {path} (step {self.global_step}, epoch {self.epoch + 1}, "
                    f"batch {self._batch_in_epoch})")


def fit(model, loss_fn, optimizer, train_data, epochs: int = 1, batch_size=None,
        scheduler=None, val_data=None, metrics=("accuracy",), callbacks=(), checkpoint_dir=None,
        checkpoint_every=None, keep_last: int = 3, resume: bool = False, seed: int = 0,
        progress=None, **trainer_kwargs) -> History:
    """One call: build a :class:`Trainer` and run :meth:`Trainer.fit`; returns the History.

    ``train_data`` / ``val_data``: ``(inputs, targets)`` arrays or a
    :class:`yscv.data.DataLoader`; ``batch_size`` (default 32) is for arrays.
    """
    trainer = Trainer(model, loss_fn, optimizer, scheduler, metrics=metrics, callbacks=callbacks,
                      checkpoint_dir=checkpoint_dir, checkpoint_every=checkpoint_every,
                      keep_last=keep_last, seed=seed, progress=progress, **trainer_kwargs)
    return trainer.fit(train_data, epochs=epochs, batch_size=batch_size, val_data=val_data,
                       resume=resume)

