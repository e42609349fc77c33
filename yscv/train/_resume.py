"""Resuming the fit loop: checking that a checkpoint fits this run, and
restoring the loop's position from it.

`ResumeState` is the part of `yscv.train.Trainer` that reads a
checkpoint's fit state back (a mixin: it sets the trainer's position,
running sums, history, callbacks and its loaders' states). Every check runs
before anything is restored, so a refused resume changes nothing.
"""
from __future__ import annotations

import copy

import numpy as np

from .callbacks import ModelCheckpoint, latest_checkpoint
from .history import History
from ._batches import from_json, loader_mismatch


class ResumeState:
    """The Trainer's resume logic (see the module docstring)."""

    def _check_resume(self, st: dict, path) -> None:
        saved = st.get("data")
        # the world size may differ (elastic resume), and with it the batches per epoch
        if self._data_sig is not None and saved is not None and \
                _without_world(saved) != _without_world(self._data_sig):
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
        saved_world = int((st.get("data") or {}).get("world", 1))
        world = 1 if self._dp is None else self._dp.world
        if self._train_loader is not None:
            loader_state = from_json(st.get("loader"))
            if saved_world != world:  # [distributed] elastic: the rest of the epoch
                loader_state = _elastic_loader_state(loader_state, self._train_loader)
                self._batch_in_epoch = 0
            self._mid_epoch = bool((loader_state.get("sampler") or {}).get("progress"))
            self._loader_epoch_state = dict(loader_state, batches_consumed=0)
            self._train_loader.load_state_dict(loader_state)
        else:
            self._progress = [list(p) for p in st.get("progress", [])]
            if saved_world != world and self._batch_in_epoch > 0:  # [distributed] elastic
                self._progress.append(self._stage_done(saved_world))
                self._batch_in_epoch = 0
            self._rest_n = self._rest_size() if self._progress else None
            self._mid_epoch = bool(self._progress)
        if self._val_loader is not None and st.get("val_loader") is not None:
            self._val_loader.load_state_dict(from_json(st["val_loader"]))
        self.history = History.from_dict(st["history"])
        for cb, saved in zip(self.callbacks, st.get("callbacks", [])):
            cb.load_state_dict(saved["state"])

    def _epoch_order(self):
        """The current epoch's permutation, redrawn from its saved start state."""
        x = self._arrays[0]
        _, shuffle, _ = self._batching
        if not shuffle:
            return np.arange(len(x))
        rng = np.random.default_rng()
        rng.bit_generator.state = copy.deepcopy(self._epoch_rng_state)
        return rng.permutation(len(x))

    def _rest_size(self) -> int:
        from ..distributed.sampler import stage_list

        return len(stage_list(self._epoch_order(), self._progress, self._batching[2]))

    def _stage_done(self, world: int) -> list:
        """``[world, [samples per rank]]`` consumed by the saving run's ranks:
        ``batch_in_epoch`` batches each, at most its share of the stage."""
        from ..distributed.sampler import share_size

        batch_size, _, drop_last = self._batching
        n = len(self._arrays[0]) if not self._progress else self._rest_size()
        share = share_size(n, world, drop_last and not self._progress)
        return [world, [min(self._batch_in_epoch * batch_size, share)] * world]

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


def _without_world(sig: dict) -> dict:
    return {k: v for k, v in sig.items() if k not in ("world", "batches")}


def _elastic_loader_state(state: dict, loader) -> dict:
    """A DataLoader state saved on another number of ranks, for this one: the
    batches handed out so far become consumed progress of the sampler's state
    (each rank took ``batches_consumed`` batches of its share;
    yscv.distributed.sampler.advanced_state, which the loader's own
    load_state_dict uses too), and the loader starts on the rest of the epoch
    (DistributedSampler splits it over this world)."""
    from ..distributed.sampler import advanced_state

    sampler_state = state.get("sampler")
    if not isinstance(sampler_state, dict) or "num_replicas" not in sampler_state:
        raise ValueError("resume: the checkpoint was written by another number of ranks, and "
                         "its DataLoader state holds no DistributedSampler state to split the "
                         "rest of the epoch with")
    b = int(state["batches_consumed"])
    if b > 0:
        sampler_state = advanced_state(sampler_state, b * int(state["batch_size"]))
    return dict(state, batches_consumed=0, sampler=sampler_state)
