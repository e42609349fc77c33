"""The fit loop: ``Trainer`` (and the one-call `fit`).

    trainer = yscv.train.Trainer(model, "cross_entropy", opt, scheduler=sched,
                                 checkpoint_dir="runs/a", checkpoint_every=100)
    history = trainer.fit((X, y), epochs=10, batch_size=64, val_data=(Xv, yv))
    # later, after a crash:  trainer.fit((X, y), epochs=10, batch_size=64, resume=True)
    # or with a yscv.data.DataLoader:  trainer.fit(loader, epochs=10, val_data=val_loader)

One step: ``g.truncate(k)`` (one graph reused, parameters and buffers bound
once before index ``k``), forward, loss, ``g.backward``, ``optimizer.step()``,
``optimizer.zero_grad()``, ``g.zero_grads()``, and ``scheduler.step()`` when
the scheduler runs per step. Batches come from `Trainer._epoch_batches`
(the one place that makes them): from in-memory arrays, a permutation drawn
per epoch from the trainer's own seeded generator; from a
`yscv.data.DataLoader`, one iteration of the loader per epoch.

Resume is exact: a checkpoint stores, besides model / optimizer / scheduler
and the library RNG (dropout seeds), the position (epoch, batch), the
shuffle generator's state (or the loader's state) at the start of the epoch,
the running sums of the epoch's training metrics, the history and the
callbacks' state. A resumed run redraws the same order, skips the batches
already done and reproduces the uninterrupted run's per-step losses exactly.

Data-parallel: launched with ``mpiexec -n N python -m mpi4py script.py``,
the same code trains on N ranks: each rank takes its share of every epoch's
permutation (``batch_size`` is per rank; a DataLoader must shard itself with
a ``yscv.distributed.DistributedSampler``), gradients and the step's metric
sums are averaged in one allreduce, evaluation is split over ranks, rank 0
alone prints and writes checkpoints (every rank calls the save). The places
are marked ``[distributed]``; the rank-side work is yscv/distributed/_fit.py.

The pieces: batches and their saved position (train/_batches.py), resume
(train/_resume.py), the progress bar (train/_progress.py), losses and
metrics by name (train/_losses.py).
"""
from __future__ import annotations

import sys
import time

import numpy as np

from .. import runtime, state
from ..engine.graph import Graph
from ..nn.utils import clip_grad_norm_
from ._batches import BatchSource, is_loader, is_sharded, pair, split, to_json
from ._compiled import step_runner
from ._losses import accuracy, default_forward, resolve_loss, resolve_metrics
from ._progress import epoch_bar
from ._resume import ResumeState
from .callbacks import Callback, ModelCheckpoint
from .history import History

__all__ = ["Trainer", "fit", "accuracy"]


def one_blas_thread(model) -> bool:
    """Whether NumPy's products run on one OpenBLAS thread while ``model``
    trains or is evaluated by a `Trainer`: yscv's kernels use two
    threads or more, the environment did not choose OpenBLAS's count, and the
    model has convolutions. Their direct kernels split every step over the
    cores (yscv/compute/regions.py); a product on OpenBLAS's two threads
    leaves its worker spinning on the second core for up to ~0.1 s, where
    the region helper needs it. Measured on the README job: the helper ran
    0.1-0.15 s of a ~3 s run, and the job was faster with one thread than
    with two (docs/engine.md, "Two cores"). Decided from the model, once per
    call, so every step of a run (and of a resumed run) multiplies alike."""
    from ..nn.conv import ConvTranspose2d, DepthwiseConv2d, _ConvNd

    return (runtime.kernel_threads() > 1 and not runtime.blas_threads_set_by_user()
            and any(isinstance(m, (_ConvNd, ConvTranspose2d, DepthwiseConv2d))
                    for m in model.modules()))


class _BlasScope:
    """``with``: OpenBLAS at one thread inside when ``hold``
    (`yscv.runtime.hold_one_blas_thread`), restored after."""

    def __init__(self, hold: bool):
        self.hold = hold

    def __enter__(self):
        if self.hold:
            runtime.hold_one_blas_thread(True)
        return self

    def __exit__(self, *exc):
        if self.hold:
            runtime.hold_one_blas_thread(False)
        return False


class Trainer(BatchSource, ResumeState):
    """A PyTorch-style training loop with checkpoints and exact resume.

    Args:
        model: a `yscv.nn.Module` (called ``model(g, x)``).
        loss_fn: ``loss_fn(g, output, target) -> NodeId`` or a name:
            "cross_entropy", "mse", "l1", "huber", "nll", "bce_with_logits".
        optimizer: a `yscv.optim.Optimizer` over the model's parameters.
        scheduler: optional LR scheduler. Its ``interval`` attribute ("step"
            or "epoch", default "epoch") says when it is stepped; one with
            ``takes_metric = True`` (ReduceLROnPlateau) is stepped once per
            epoch with the validation loss (the training loss without
            validation data).
        metrics: names ("accuracy") or callables ``fn(output, target) -> float``
            (averaged over samples, training and validation).
        callbacks: `Callback` instances (e.g. `EarlyStopping`).
        scheduler_interval: "step" or "epoch"; overrides the scheduler's
            ``interval`` (None: ``getattr(scheduler, "interval", "epoch")``).
        checkpoint_dir: folder for training checkpoints (adds a
            `ModelCheckpoint`); with ``checkpoint_every=N`` one every
            N steps, else one per epoch; ``keep_last`` newest files kept.
        seed: seeds the shuffling generator (``yscv.manual_seed`` seeds
            initialisation and dropout; call it before building the model).
        progress: None (automatic): one line per epoch, plus a tqdm bar
            when stdout and stderr are terminals or the code runs in a
            Jupyter / IPython kernel (notebook); True: the same, with the
            bar (on stderr) shown also when stdout is redirected; False:
            nothing printed. No bar is drawn into a stderr that is not a
            terminal (a file, a pipe), outside a notebook.
        forward: ``forward(g, model, x_batch) -> NodeId`` for models whose
            call is not ``model(g, g.constant(x))``.
        grad_clip_norm: clip the global L2 norm of the gradients before each
            step (`yscv.nn.utils.clip_grad_norm_`).
        reuse_graph: one graph reused with ``truncate`` (default) or a fresh
            graph per step.
        backward_workers: threads for each step's backward,
            ``g.backward(loss, workers=backward_workers)``: 1 (default)
            serial, n > 1 up to n threads on independent branches (same
            bits), None automatic (see docs/engine.md).
        compile: each step's forward, loss and backward through `yscv.compile`
            (same bits; eager after a record error, with a warning naming it).
    """

    def __init__(self, model, loss_fn, optimizer, scheduler=None, *, metrics=("accuracy",),
                 callbacks=(), scheduler_interval=None, checkpoint_dir=None,
                 checkpoint_every=None, keep_last: int = 3, seed: int = 0, progress=None,
                 forward=None, grad_clip_norm=None, reuse_graph: bool = True,
                 backward_workers=1, compile: bool = False):
        # [distributed] data-parallel on more than one rank (yscv/distributed/_fit.py)
        model, self._dp = _data_parallel(model)
        self.model = model
        self.loss_fn = resolve_loss(loss_fn)
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.metrics = resolve_metrics(metrics)
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
        if self._dp is not None and self._dp.rank != 0:  # [distributed] rank 0 prints
            self.progress = False
        self.forward = forward or default_forward
        self.grad_clip_norm = grad_clip_norm
        self.reuse_graph = bool(reuse_graph)
        if backward_workers is not None and (
                isinstance(backward_workers, bool)
                or not isinstance(backward_workers, (int, np.integer)) or backward_workers < 1):
            raise ValueError(f"Trainer: backward_workers must be a positive int or None, got "
                             f"{backward_workers!r}")
        self.backward_workers = backward_workers
        params = list(model.parameters())
        self.dtype = params[0].data.dtype if params else np.dtype(np.float32)
        self._forward_backward = step_runner(self, compile)  # (g, k, xb, yb) -> (loss, out)
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
        self._progress = []   # elastic resume: consumed stages of this epoch (train/_batches.py)
        self._rest_n = None   # ... and the number of samples they left
        self._mid_epoch = False  # resumed elastically into the rest of an epoch
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

    def _step(self, g, k, xb, yb):
        """Forward, backward and update on one batch: (loss, output, sums);
        ``sums`` is None in a world of one, else the step's [n, ``loss*n``,
        ``metric*n`` ...] summed over ranks."""
        loss_value, out_value = self._forward_backward(g, k, xb, yb)
        sums = None
        if self._dp is not None:  # [distributed] mean gradients + the step's sums over ranks
            sums = self._dp.sync_step(loss_value, out_value, yb, self.metrics)
        if self.grad_clip_norm is not None:
            clip_grad_norm_(self.model.parameters(), self.grad_clip_norm)
        self.optimizer.step()
        self.optimizer.zero_grad()
        if self.reuse_graph:
            g.zero_grads()
        return loss_value, out_value, sums

    # ------------------------------------------------------------ training
    def fit(self, train_data, epochs: int = 1, batch_size=None, val_data=None,
            resume: bool = False, shuffle=None, drop_last=None) -> History:
        """Train until ``epochs`` epochs are complete (counting epochs done
        before a resume); returns `history`.

        Args:
            train_data: ``(inputs, targets)`` arrays (first axis = samples),
                or a `yscv.data.DataLoader` yielding ``(inputs,
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

        For a model with convolutions (and yscv's kernels on two threads or
        more), NumPy's products run on one OpenBLAS thread during the call,
        unless ``OPENBLAS_NUM_THREADS`` / ``OMP_NUM_THREADS`` chose the count
        (`one_blas_thread`; docs/training.md, "Threads").
        """
        with self._blas_scope():
            return self._fit(train_data, epochs, batch_size, val_data, resume, shuffle,
                             drop_last)

    def _blas_scope(self):
        """A context holding OpenBLAS at one thread when
        `one_blas_thread` says so for this model, else doing nothing."""
        return _BlasScope(one_blas_thread(self.model))

    def _fit(self, train_data, epochs, batch_size, val_data, resume, shuffle,
             drop_last) -> History:
        """`fit` inside its thread scope."""
        self._set_train_data(train_data, batch_size, shuffle, drop_last)
        self._val_loader = val_data if is_loader(val_data) else None
        if resume:
            self._resume()
        self.stop_training = False
        for cb in self.callbacks:
            cb.on_train_begin(self)
        if self._dp is not None:  # [distributed] rank 0's parameters and buffers everywhere
            self._dp.broadcast(self.model)
        g = Graph(self.dtype)
        k = self.model.bind(g) if self.reuse_graph else 0
        self.model.train()
        while self.epoch < epochs and not self.stop_training:
            e = self.epoch
            if self._batch_in_epoch == 0 and not self._mid_epoch:
                self._acc = self._new_acc()
            n_batches = self._num_batches()
            for cb in self.callbacks:
                cb.on_epoch_begin(self, e)
            t0 = time.perf_counter()
            bar = epoch_bar(self.progress, e, epochs, n_batches, self._batch_in_epoch)
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
        loss, out, sums = self._step(g, k, xb, yb)
        self.global_step += 1
        self._batch_in_epoch = b + 1
        acc = self._acc
        if sums is None:
            n = len(yb)
            acc["n"] += n
            acc["loss"] += loss * n
            for name, fn in self.metrics:
                acc[name] += float(fn(out, yb)) * n
        else:  # [distributed] the whole step's sums, the same on every rank
            loss = self._dp.add_sums(acc, sums, self.metrics)
        lr = self._lr()
        self.history.log_step(self.global_step, e, loss, lr)
        if (self.scheduler is not None and self.scheduler_interval == "step"
                and not self.scheduler_takes_metric):
            self.scheduler.step()
        if bar is not None:
            bar.step(loss)
        logs = {"loss": loss, "lr": lr}
        for cb in self.callbacks:
            cb.on_step_end(self, self.global_step, logs)

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
        self._progress, self._rest_n, self._mid_epoch = [], None, False
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
        In a data-parallel run each rank evaluates its share of the arrays
        (or of a DataLoader with a ``DistributedSampler``; another DataLoader
        is evaluated whole on every rank) and the sums are added over ranks.
        """
        split_over_ranks = False
        if is_loader(data):
            batches = (pair(batch, "evaluate") for batch in data)
            split_over_ranks = self._dp is not None and is_sharded(data)
        else:
            x, y = split(data, "evaluate: data")
            if self._dp is not None:  # [distributed] each rank evaluates its share
                x, y = self._dp.eval_share(x, y)
                split_over_ranks = True
            batches = ((x[s:s + batch_size], y[s:s + batch_size])
                       for s in range(0, len(x), batch_size))
        was_training = self.model.training
        self.model.eval()
        g = Graph(self.dtype)
        k = self.model.bind(g)
        sums = {"loss": 0.0, **{name: 0.0 for name, _ in self.metrics}}
        count = 0
        try:
            with g.no_grad(), self._blas_scope():
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
        if split_over_ranks:  # [distributed] the sums and the count over ranks
            sums = self._dp.sum_over_ranks(dict(sums, __count__=float(count)))
            count = int(round(sums.pop("__count__")))
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
                "loader": to_json(self._train_loader_state()),
                "val_loader": to_json(None if self._val_loader is None
                                       else self._val_loader.state_dict()),
                "acc": dict(self._acc), "data": self._data_sig,
                "progress": [list(p) for p in self._progress],
                "history": self.history.to_dict(),
                "callbacks": [{"class": type(cb).__name__, "state": cb.state_dict()}
                              for cb in self.callbacks]}

    def save_checkpoint(self, path, extra=None) -> str:
        """Write a full training checkpoint (model, optimizer, scheduler, RNG,
        loop state; ``extra`` is returned by `load_checkpoint`)."""
        return state.save_checkpoint(
            path, model=self.model, optimizer=self.optimizer, scheduler=self.scheduler,
            step=self.global_step, extra={"fit": self.state_dict(), "user": extra})

    def load_checkpoint(self, path) -> dict:
        """Restore everything `save_checkpoint` wrote; returns the user ``extra``."""
        meta = state.read_checkpoint_metadata(path)
        fit_state = (meta.get("extra") or {}).get("fit")
        if not isinstance(fit_state, dict):
            from ..errors import CheckpointError
            raise CheckpointError(f"checkpoint {path!r} was not written by a Trainer "
                                  "(no fit state in its extra)")
        self._check_resume(fit_state, path)
        info = state.load_checkpoint(path, self.model, self.optimizer, self.scheduler)
        self._apply_state(info["extra"]["fit"])
        return info["extra"].get("user")


def _data_parallel(model):
    """(model, None) in a world of one; else (the model, unwrapped from a
    DistributedDataParallel, and the rank-side helper). yscv.distributed is
    imported only then: a single process never loads it."""
    if (runtime.launcher_world_size() <= 1 and "mpi4py.MPI" not in sys.modules
            and type(model).__name__ != "DistributedDataParallel"):
        return model, None
    from ..distributed._fit import for_trainer

    return for_trainer(model)


def fit(model, loss_fn, optimizer, train_data, epochs: int = 1, batch_size=None,
        scheduler=None, val_data=None, metrics=("accuracy",), callbacks=(), checkpoint_dir=None,
        checkpoint_every=None, keep_last: int = 3, resume: bool = False, seed: int = 0,
        progress=None, backward_workers=1, compile: bool = False, **trainer_kwargs) -> History:
    """One call: build a `Trainer` and run `Trainer.fit`; returns the History.

    ``train_data`` / ``val_data``: ``(inputs, targets)`` arrays or a
    `yscv.data.DataLoader`; ``batch_size`` (default 32) is for arrays;
    ``backward_workers``: threads per backward (1, n or None: automatic);
    ``compile=True``: steps through `yscv.compile` (`Trainer`).
    """
    trainer = Trainer(model, loss_fn, optimizer, scheduler, metrics=metrics, callbacks=callbacks,
                      checkpoint_dir=checkpoint_dir, checkpoint_every=checkpoint_every,
                      keep_last=keep_last, seed=seed, progress=progress,
                      backward_workers=backward_workers, compile=compile, **trainer_kwargs)
    return trainer.fit(train_data, epochs=epochs, batch_size=batch_size, val_data=val_data,
                       resume=resume)

