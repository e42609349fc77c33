"""The fit loop: ``Trainer`` (and the one-call :func:`fit`).

    trainer = yscv.train.Trainer(model, "cross_entropy", opt, scheduler=sched,
                                 checkpoint_dir="runs/a", checkpoint_every=100)
    history = trainer.fit((X, y), epochs=10, batch_size=64, val_data=(Xv, yv))
    # later, after a crash:  trainer.fit((X, y), epochs=10, batch_size=64, resume=True)

One step: ``g.truncate(k)`` (one graph reused, parameters and buffers bound
once before index ``k``), forward, loss, ``g.backward``, ``optimizer.step()``,
``optimizer.zero_grad()``, ``g.zero_grads()``, and ``scheduler.step()`` when
the scheduler runs per step. Batches come from a permutation drawn per epoch
from the trainer's own seeded generator.

Resume is exact: a checkpoint stores, besides model / optimizer / scheduler
and the library RNG (dropout seeds), the position (epoch, batch), the
shuffle generator's state at the start of the epoch, the running sums of the
epoch's training metrics, the history and the callbacks' state. A resumed
run redraws the same permutation, skips the batches already done and
reproduces the uninterrupted run's per-step losses exactly.

Data-parallel: launched with ``mpiexec -n N python -m mpi4py script.py``,
the same code trains on N ranks: each rank takes its share of every epoch's
permutation (``batch_size`` is per rank), gradients and the step's metric
sums are averaged in one allreduce, evaluation is split over ranks, rank 0
alone prints and writes checkpoints (every rank calls the save). See
docs/scaling_out.md.
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
                        "first dimension")
    x, y = np.asarray(data[0]), np.asarray(data[1])
    if len(x) != len(y):
        raise ValueError(f"{what}: {len(x)} inputs but {len(y)} targets")
    if len(x) == 0:
        raise ValueError(f"{what} is empty")
    return x, y


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
        scheduler: optional LR scheduler.
        metrics: names ("accuracy") or callables ``fn(output, target) -> float``
            (averaged over samples, training and validation).
        callbacks: :class:`Callback` instances (e.g. :class:`EarlyStopping`).
        scheduler_interval: "step" or "epoch" (default: "step" for
            OneCycleLR, "epoch" otherwise — how PyTorch code calls them).
        checkpoint_dir: folder for training checkpoints (adds a
            :class:`ModelCheckpoint`); with ``checkpoint_every=N`` one every
            N steps, else one per epoch; ``keep_last`` newest files kept.
        seed: seeds the shuffling generator (``yscv.manual_seed`` seeds
            initialisation and dropout; call it before building the model).
        progress: print one line per epoch, plus a tqdm bar when stdout is a
            terminal. False prints nothing.
        forward: ``forward(g, model, x_batch) -> NodeId`` for models whose
            call is not ``model(g, g.constant(x))``.
        grad_clip_norm: clip the global L2 norm of the gradients before each step.
        reuse_graph: one graph reused with ``truncate`` (default) or a fresh
            graph per step.
    """

    def __init__(self, model, loss_fn, optimizer, scheduler=None, *, metrics=("accuracy",),
                 callbacks=(), scheduler_interval=None, checkpoint_dir=None,
                 checkpoint_every=None, keep_last: int = 3, seed: int = 0, progress: bool = True,
                 forward=None, grad_clip_norm=None, reuse_graph: bool = True):
        # [distributed] data-parallel on more than one rank (yscv/distributed/_fit.py)
        model, self._dp = _dp_for_trainer(model)
        self.model = model
        self.loss_fn = _resolve_loss(loss_fn)
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.metrics = _resolve_metrics(metrics)
        if scheduler_interval is None:
            scheduler_interval = "step" if type(scheduler).__name__ == "OneCycleLR" else "epoch"
        if scheduler_interval not in ("step", "epoch"):
            raise ValueError(f"Trainer: scheduler_interval must be 'step' or 'epoch', "
                             f"got {scheduler_interval!r}")
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
        self.progress = bool(progress) and (self._dp is None or self._dp.rank == 0)
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

    # ------------------------------------------------------------ helpers
    def _new_acc(self) -> dict:
        return {"n": 0, "loss": 0.0, **{name: 0.0 for name, _ in self.metrics}}

    def _lr(self):
        groups = self.optimizer.param_groups
        return groups[0]["lr"] if groups else None

    def _print(self, msg: str) -> None:
        if self.progress:
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
        if self._dp is not None:  # [distributed] rank 0 compiles the kernels first
            self._dp.averager.before_forward()
        out = self.forward(g, self.model, xb)
        loss = self.loss_fn(g, out, yb)
        g.backward(loss)
        # read before the update: a released (checkpointed) value recomputed
        # later would see the new parameters
        loss_value, out_value = float(g.value(loss)), g.value(out)
        sums = None
        if self._dp is not None:  # [distributed] mean gradients + the step's sums over ranks
            sums = self._dp.sync_step(loss_value, out_value, yb, self.metrics)
        if self.grad_clip_norm is not None:
            self._clip()
        self.optimizer.step()
        self.optimizer.zero_grad()
        if self.reuse_graph:
            g.zero_grads()
        return loss_value, out_value, sums

    # ------------------------------------------------------------ training
    def fit(self, train_data, epochs: int = 1, batch_size: int = 32, val_data=None,
            resume: bool = False, shuffle: bool = True, drop_last: bool = False) -> History:
        """Train until ``epochs`` epochs are complete (counting epochs done
        before a resume); returns :attr:`history`.

        Args:
            train_data: ``(inputs, targets)`` arrays, first axis = samples.
            batch_size: samples per step; the last batch may be smaller
                unless ``drop_last``.
            val_data: ``(inputs, targets)`` evaluated after every epoch
                (``val_loss``, ``val_<metric>`` in the epoch logs).
            resume: continue from the newest checkpoint in ``checkpoint_dir``
                (a fresh start when there is none).
        """
        x, y = _split(train_data, "fit: train_data")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"fit: batch_size must be a positive int, got {batch_size!r}")
        n = len(x)
        # [distributed] batches come from this rank's shard of each permutation
        n_local = n if self._dp is None else self._dp.shard_size(n, drop_last)
        n_batches = n_local // batch_size if drop_last else -(-n_local // batch_size)
        if n_batches == 0:
            raise ValueError(f"fit: {n} samples make no full batch of {batch_size} with drop_last")
        self._data_sig = {"n": n, "batch_size": batch_size, "shuffle": bool(shuffle),
                          "drop_last": bool(drop_last)}
        if self._dp is not None:
            self._data_sig["world"] = self._dp.world
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
        rng = self._shuffle_rng
        while self.epoch < epochs and not self.stop_training:
            e = self.epoch
            if self._batch_in_epoch == 0:
                self._epoch_rng_state = copy.deepcopy(rng.bit_generator.state)
                self._acc = self._new_acc()
            else:  # resumed mid-epoch: redraw the same permutation
                rng.bit_generator.state = copy.deepcopy(self._epoch_rng_state)
            perm = rng.permutation(n) if shuffle else np.arange(n)
            if self._dp is not None:  # [distributed] this rank's share
                perm = self._dp.shard(perm, drop_last)
            for cb in self.callbacks:
                cb.on_epoch_begin(self, e)
            t0 = time.perf_counter()
            bar = self._bar(e, epochs, n_batches)
            for b in range(self._batch_in_epoch, n_batches):
                idx = perm[b * batch_size:(b + 1) * batch_size]
                xb, yb = x[idx], y[idx]
                loss, out, sums = self._step(g, k, xb, yb)
                self.global_step += 1
                self._batch_in_epoch = b + 1
                acc = self._acc
                if sums is None:
                    acc["n"] += len(idx)
                    acc["loss"] += loss * len(idx)
                    for name, fn in self.metrics:
                        acc[name] += float(fn(out, yb)) * len(idx)
                else:  # [distributed] the whole step's sums, the same on every rank
                    loss = self._dp.add_sums(acc, sums, self.metrics)
                lr = self._lr()
                self.history.log_step(self.global_step, e, loss, lr)
                if self.scheduler is not None and self.scheduler_interval == "step":
                    self.scheduler.step()
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(loss=f"{loss:.4f}")
                logs = {"loss": loss, "lr": lr}
                for cb in self.callbacks:
                    cb.on_step_end(self, self.global_step, logs)
                if self.stop_training:
                    break
            if bar is not None:
                bar.close()
            if self._batch_in_epoch < n_batches:
                break  # stopped mid-epoch: no epoch summary
            self._end_epoch(e, epochs, val_data, time.perf_counter() - t0)
        for cb in self.callbacks:
            cb.on_train_end(self)
        return self.history

    def _bar(self, epoch, epochs, n_batches):
        if not self.progress or not sys.stdout.isatty():
            return None
        from tqdm.auto import tqdm
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
        if self.scheduler is not None and self.scheduler_interval == "epoch":
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
        """Mean loss and metrics over ``data`` in eval mode, without gradients."""
        x, y = _split(data, "evaluate: data")
        n_total = len(x)
        if self._dp is not None:  # [distributed] each rank evaluates its share
            x, y = self._dp.eval_share(x, y)
        was_training = self.model.training
        self.model.eval()
        g = Graph(self.dtype)
        k = self.model.bind(g)
        sums = {"loss": 0.0, **{name: 0.0 for name, _ in self.metrics}}
        try:
            with g.no_grad():
                for s in range(0, len(x), batch_size):
                    g.truncate(k)
                    xb, yb = x[s:s + batch_size], y[s:s + batch_size]
                    out = self.forward(g, self.model, xb)
                    loss = float(g.value(self.loss_fn(g, out, yb)))
                    sums["loss"] += loss * len(xb)
                    ov = g.value(out)
                    for name, fn in self.metrics:
                        sums[name] += float(fn(ov, yb)) * len(xb)
        finally:
            self.model.train(was_training)
        if self._dp is not None:
            sums = self._dp.sum_over_ranks(sums)
        return {k2: v / n_total for k2, v in sums.items()}

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
        """The loop's own JSON state (position, shuffle RNG, running sums,
        history, callbacks); model/optimizer/scheduler are saved separately."""
        rng_state = self._shuffle_rng.bit_generator.state if self._batch_in_epoch == 0 \
            else self._epoch_rng_state
        return {"global_step": self.global_step, "epoch": self.epoch,
                "batch_in_epoch": self._batch_in_epoch, "epoch_rng_state": rng_state,
                "acc": dict(self._acc), "data": self._data_sig,
                "history": self.history.to_dict(),
                "callbacks": [{"class": type(cb).__name__, "state": cb.state_dict()}
                              for cb in self.callbacks]}

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
        self._shuffle_rng.bit_generator.state = copy.deepcopy(st["epoch_rng_state"])
        self._acc = dict(st["acc"])
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


def _dp_for_trainer(model):
    """(model, None) in a world of one; else the data-parallel helper (imported
    only then: a single process never loads yscv.distributed)."""
    import os

    if not any(os.environ.get(v, "1") not in ("", "1")
               for v in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE")) \
            and type(model).__name__ != "DistributedDataParallel":
        import sys

        if "mpi4py.MPI" not in sys.modules:
            return model, None
    from ..distributed._fit import for_trainer

    return for_trainer(model)


def fit(model, loss_fn, optimizer, train_data, epochs: int = 1, batch_size: int = 32,
        scheduler=None, val_data=None, metrics=("accuracy",), callbacks=(), checkpoint_dir=None,
        checkpoint_every=None, keep_last: int = 3, resume: bool = False, seed: int = 0,
        progress: bool = True, **trainer_kwargs) -> History:
    """One call: build a :class:`Trainer` and run :meth:`Trainer.fit`; returns the History."""
    trainer = Trainer(model, loss_fn, optimizer, scheduler, metrics=metrics, callbacks=callbacks,
                      checkpoint_dir=checkpoint_dir, checkpoint_every=checkpoint_every,
                      keep_last=keep_last, seed=seed, progress=progress, **trainer_kwargs)
    return trainer.fit(train_data, epochs=epochs, batch_size=batch_size, val_data=val_data,
                       resume=resume)

