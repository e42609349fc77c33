"""Callbacks for `yscv.train.Trainer`: periodic checkpoints, early stopping.

A callback overrides any of ``on_train_begin(trainer)``,
``on_epoch_begin(trainer, epoch)``, ``on_step_end(trainer, step, logs)``,
``on_epoch_end(trainer, epoch, logs)``, ``on_train_end(trainer)``; it may set
``trainer.stop_training = True``. Its ``state_dict()`` (JSON) goes into the
training checkpoints, so a resumed run continues its counters.
"""
from __future__ import annotations

import math
import os
import re

__all__ = ["Callback", "ModelCheckpoint", "EarlyStopping", "list_checkpoints",
           "latest_checkpoint"]


class Callback:
    """Base class: every hook does nothing."""

    def on_train_begin(self, trainer) -> None:
        pass

    def on_epoch_begin(self, trainer, epoch: int) -> None:
        pass

    def on_step_end(self, trainer, step: int, logs: dict) -> None:
        pass

    def on_epoch_end(self, trainer, epoch: int, logs: dict) -> None:
        pass

    def on_train_end(self, trainer) -> None:
        pass

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


def _pattern(prefix: str):
    return re.compile(re.escape(prefix) + r"-(\d+)\.safetensors$")


def list_checkpoints(directory, prefix: str = "ckpt") -> list:
    """``[(step, path), ...]`` of ``<prefix>-<step>.safetensors`` files, by step."""
    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        return []
    pat = _pattern(prefix)
    found = []
    for name in os.listdir(directory):
        m = pat.match(name)
        if m:
            found.append((int(m.group(1)), os.path.join(directory, name)))
    return sorted(found)


def latest_checkpoint(directory, prefix: str = "ckpt"):
    """Path of the checkpoint with the highest step in ``directory``, or None."""
    found = list_checkpoints(directory, prefix)
    return found[-1][1] if found else None


class ModelCheckpoint(Callback):
    """Save a training checkpoint every ``every_n_steps`` optimizer steps
    (None: at the end of every epoch), keeping the newest ``keep_last`` files.

    Files are ``<directory>/<prefix>-<step:08d>.safetensors`` written by
    `yscv.state.save_checkpoint` (atomic). An older file is
    deleted only after the new one is safely on disk. The trainer runs
    checkpoint callbacks after all others, so the saved state includes the
    other callbacks' updates for that step or epoch.
    """

    def __init__(self, directory, every_n_steps=None, keep_last: int = 3, prefix: str = "ckpt"):
        if every_n_steps is not None and (isinstance(every_n_steps, bool)
                                          or not isinstance(every_n_steps, int)
                                          or every_n_steps <= 0):
            raise ValueError(f"ModelCheckpoint: every_n_steps must be a positive int or None, "
                             f"got {every_n_steps!r}")
        if keep_last is not None and (not isinstance(keep_last, int) or keep_last <= 0):
            raise ValueError(f"ModelCheckpoint: keep_last must be a positive int or None, "
                             f"got {keep_last!r}")
        self.directory = os.fspath(directory)
        self.every_n_steps = every_n_steps
        self.keep_last = keep_last
        self.prefix = prefix
        self.last_path = None

    def path_for(self, step: int) -> str:
        return os.path.join(self.directory, f"{self.prefix}-{step:08d}.safetensors")

    def on_train_begin(self, trainer) -> None:
        os.makedirs(self.directory, exist_ok=True)

    def on_step_end(self, trainer, step, logs) -> None:
        if self.every_n_steps is not None and step % self.every_n_steps == 0:
            self.save(trainer)

    def on_epoch_end(self, trainer, epoch, logs) -> None:
        if self.every_n_steps is None:
            self.save(trainer)

    def save(self, trainer) -> str:
        path = trainer.save_checkpoint(self.path_for(trainer.global_step))
        self.last_path = path
        if self.keep_last is not None:
            for _, old in list_checkpoints(self.directory, self.prefix)[:-self.keep_last]:
                try:
                    os.remove(old)
                except OSError:
                    pass
        return path


class EarlyStopping(Callback):
    """Stop when ``monitor`` (an epoch log key, e.g. "val_loss" or
    "val_accuracy") has not improved by more than ``min_delta`` for
    ``patience`` epochs. ``mode`` "min", "max" or "auto" (max for names
    containing "acc", else min)."""

    def __init__(self, monitor: str = "val_loss", patience: int = 5, min_delta: float = 0.0,
                 mode: str = "auto"):
        if mode not in ("min", "max", "auto"):
            raise ValueError(f"EarlyStopping: mode must be 'min', 'max' or 'auto', got {mode!r}")
        if mode == "auto":
            mode = "max" if "acc" in monitor else "min"
        if not isinstance(patience, int) or patience < 0:
            raise ValueError(f"EarlyStopping: patience must be an int >= 0, got {patience!r}")
        self.monitor = monitor
        self.patience = patience
        self.min_delta = abs(float(min_delta))
        self.mode = mode
        self.best = None
        self.best_epoch = None
        self.wait = 0
        self.stopped_epoch = None

    def _improved(self, value: float) -> bool:
        if self.best is None:
            return True
        if self.mode == "min":
            return value < self.best - self.min_delta
        return value > self.best + self.min_delta

    def on_epoch_end(self, trainer, epoch, logs) -> None:
        if self.monitor not in logs:
            raise KeyError(f"EarlyStopping: monitored {self.monitor!r} is not in the epoch logs "
                           f"{sorted(logs)}; pass val_data to monitor validation metrics")
        value = float(logs[self.monitor])
        if math.isnan(value):
            value = math.inf if self.mode == "min" else -math.inf
        if self._improved(value):
            self.best, self.best_epoch, self.wait = value, epoch, 0
        else:
            self.wait += 1
            if self.wait >= self.patience:
                self.stopped_epoch = epoch
                trainer.stop_training = True

    def state_dict(self) -> dict:
        return {"best": self.best, "best_epoch": self.best_epoch, "wait": self.wait,
                "stopped_epoch": self.stopped_epoch}

    def load_state_dict(self, state: dict) -> None:
        self.best = state.get("best")
        self.best_epoch = state.get("best_epoch")
        self.wait = int(state.get("wait", 0))
        self.stopped_epoch = state.get("stopped_epoch")
