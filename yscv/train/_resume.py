"""Resuming the fit loop: checking that a checkpoint fits this run, and
restoring the loop's position from it.

:class:`ResumeState` is the part of :class:`yscv.train.Trainer` that reads a
checkpoint's fit state back (a mixin: it sets the trainer's position,
running sums, history, callbacks and its loaders' states). Every check runs
before anything is restored, so a refused resume changes nothing.
"""
from __future__ import annotations

import copy

from .callbacks import ModelCheckpoint, latest_checkpoint
from .history import History
from ._batches import from_json, loader_mismatch


class ResumeState:
    """The Trainer's resume logic (see the module docstring)."""

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
            diff = loader_mismatch(loader, saved_state)
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
            loader_state = from_json(st.get("loader"))
            self._loader_epoch_state = dict(loader_state, batches_consumed=0)
            self._train_loader.load_state_dict(loader_state)
        if self._val_loader is not None and st.get("val_loader") is not None:
            self._val_loader.load_state_dict(from_json(st["val_loader"]))
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
