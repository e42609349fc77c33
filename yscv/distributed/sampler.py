"""``DistributedSampler``: this rank's share of the sample indices, per epoch,
and the rest of an interrupted epoch split over a new world (elastic resume).

The rest of an epoch: an epoch's order (the permutation) is consumed in
*stages*, one per world size the epoch ran with. In a stage of ``W`` ranks,
the stage's list is padded by wrapping to a multiple of ``W`` (or cut, with
``drop_last``) and rank r takes every W-th entry from r; ``counts[r]`` of
them were consumed. The next stage's list is the previous one without the
samples consumed in it (a sample counts as consumed when any of its copies
was), in the same order. `stage_list` replays the stages; the trainer
uses it too (yscv/train/_batches.py). ``advanced_state`` records that
every rank consumed more of its share; the DataLoader and the trainer use it
to resume a loader saved on another number of ranks.
"""
from __future__ import annotations

import math

import numpy as np

from . import _comm

__all__ = ["DistributedSampler", "stage_list", "stage_share", "share_size", "advanced_state"]


#: the keys of DistributedSampler.state_dict()
_STATE_KEYS = ("epoch", "progress", "num_replicas", "n", "shuffle", "seed", "drop_last")


def _check_int(name: str, v, minimum: int) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"DistributedSampler: {name} must be an int, got {v!r}")
    if v < minimum:
        raise ValueError(f"DistributedSampler: {name} must be >= {minimum}, got {v}")
    return int(v)


def share_size(n: int, world: int, drop_last: bool) -> int:
    """Entries per rank of a list of ``n`` split over ``world`` ranks
    (padded by wrapping, or the tail cut with ``drop_last``)."""
    if drop_last and n % world != 0:
        return math.ceil((n - world) / world)
    return math.ceil(n / world)


def _padded(order: np.ndarray, world: int, drop_last: bool) -> np.ndarray:
    total = share_size(len(order), world, drop_last) * world
    if total > len(order) and len(order) > 0:
        return np.concatenate([order, np.resize(order, total - len(order))])
    return order[:total]


def stage_share(order: np.ndarray, world: int, rank: int, drop_last: bool) -> np.ndarray:
    """Rank ``rank``'s share of ``order`` split over ``world`` ranks."""
    padded = _padded(order, world, drop_last)
    return padded[rank:len(padded):world]


def stage_list(order: np.ndarray, stages, drop_last: bool) -> np.ndarray:
    """The samples of ``order`` left after the consumed ``stages`` (a list of
    ``[world, [count per rank]]``), in their order: the list the next stage
    splits over its ranks. ``drop_last`` cuts the epoch once, in its first
    stage; the rest of an epoch is padded, never cut (no sample lost)."""
    lst = np.asarray(order, dtype=np.int64)
    for i, (world, counts) in enumerate(stages):
        padded = _padded(lst, world, drop_last and i == 0)
        used = [padded[r:len(padded):world][:c] for r, c in enumerate(counts)]
        kept = lst[:len(padded)] if (drop_last and i == 0) else lst
        if used:
            kept = kept[~np.isin(kept, np.concatenate(used))]
        lst = kept
    return lst


def _check_progress(progress) -> list:
    """``[[world, [count per rank]], ...]`` checked (ValueError otherwise)."""
    ok = isinstance(progress, list)
    out = []
    for stage in progress if ok else ():
        if not (isinstance(stage, (list, tuple)) and len(stage) == 2
                and isinstance(stage[0], int) and not isinstance(stage[0], bool) and stage[0] >= 1
                and isinstance(stage[1], (list, tuple)) and len(stage[1]) == stage[0]
                and all(isinstance(c, int) and not isinstance(c, bool) and c >= 0
                        for c in stage[1])):
            ok = False
            break
        out.append([int(stage[0]), [int(c) for c in stage[1]]])
    if not ok:
        raise ValueError(f"DistributedSampler.load_state_dict: progress must be a list of "
                         f"[world, [samples consumed by each rank]], got {progress!r}")
    return out


class DistributedSampler:
    """Indices of rank ``rank``'s share of ``range(n)``, PyTorch's semantics.

    Per epoch: one permutation of ``range(n)`` (``shuffle=True``; drawn from
    ``numpy.random.default_rng(seed + epoch)``, so the same on every rank) or
    ``range(n)`` in order; padded by wrapping around to a multiple of
    ``num_replicas`` (or, with ``drop_last``, the tail cut to one); rank r
    takes every ``num_replicas``-th index starting at r. ``len()`` is the
    per-rank count, equal on every rank.

    Progress and elastic resume: ``advance(k)`` records that this rank
    trained on ``k`` more of its indices of the current epoch; iterating
    (and `indices`) yields only those not consumed yet.
    `state_dict` holds the epoch and every rank's progress in it (in a
    world of more than one rank it is a collective: every rank calls it, as
    every rank calls ``yscv.save_checkpoint``). `load_state_dict` on the
    same number of ranks continues each rank where it was; on another number
    of ranks, the samples of the epoch that no rank had consumed are split
    over the new ranks (padded by wrapping, as an epoch is), none lost or
    repeated, and the following epochs are split as usual.

    Difference from ``torch.utils.data.DistributedSampler``: PyTorch draws
    the permutation with ``torch.randperm`` on a torch generator, which NumPy
    cannot reproduce, so with ``shuffle=True`` the order differs from
    PyTorch's; with ``shuffle=False`` the index lists are identical.

    Args:
        n: the dataset size (an int, or anything with ``len()``).
        num_replicas: number of ranks (default: ``world_size()``).
        rank: this rank (default: ``rank()``).
        shuffle: a new permutation per epoch, as PyTorch's.
        seed: the permutations' seed, as PyTorch's.
        drop_last: drop the tail instead of padding, as PyTorch's.
    """

    def __init__(self, n, num_replicas=None, rank=None, shuffle: bool = True, seed: int = 0,
                 drop_last: bool = False):
        if not isinstance(n, (int, np.integer, str, bytes)) and hasattr(n, "__len__"):
            n = len(n)
        self.n = _check_int("n", n, 0)
        self.num_replicas = (_comm.world_size() if num_replicas is None
                             else _check_int("num_replicas", num_replicas, 1))
        r = _comm.rank() if rank is None else _check_int("rank", rank, 0)
        if r >= self.num_replicas:
            raise ValueError(f"DistributedSampler: rank {r} is not in [0, {self.num_replicas - 1}]")
        self.rank = r
        self.shuffle = bool(shuffle)
        self.seed = _check_int("seed", seed, 0)
        self.drop_last = bool(drop_last)
        self.epoch = 0
        w = self.num_replicas
        self.num_samples = share_size(self.n, w, self.drop_last)
        self.total_size = self.num_samples * w
        self.consumed = 0      # this rank's indices of the current stage trained on
        self._stages = []      # earlier stages of this epoch: [[world, [counts]], ...]
        self._share = None     # cache: this rank's share of the current stage

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch's permutation (call it at the start of every
        epoch). Another epoch starts from its beginning; the current epoch's
        number keeps the position in it (a loop that calls ``set_epoch``
        after `load_state_dict` continues the resumed epoch)."""
        epoch = _check_int("epoch", epoch, 0)
        if epoch != self.epoch:
            self.epoch, self.consumed, self._stages, self._share = epoch, 0, [], None

    def _order(self) -> np.ndarray:
        if self.shuffle:
            return np.random.default_rng(self.seed + self.epoch).permutation(self.n)
        return np.arange(self.n, dtype=np.int64)

    def _current_share(self) -> np.ndarray:
        if self._share is None or self._share[0] != self.epoch:
            lst = stage_list(self._order(), self._stages, self.drop_last)
            share = stage_share(lst, self.num_replicas, self.rank,
                                self.drop_last and not self._stages)
            self._share = (self.epoch, share.astype(np.int64, copy=False))
        return self._share[1]

    def indices(self) -> np.ndarray:
        """This rank's indices of the current epoch not consumed yet (int64
        array; the whole share at the start of an epoch)."""
        return self._current_share()[self.consumed:]

    def __iter__(self):
        return iter(self.indices().tolist())

    def __len__(self) -> int:
        """This rank's count for the current epoch (after an elastic resume:
        its share of the rest of the epoch), consumed ones included."""
        if not self._stages:
            return self.num_samples
        return len(self._current_share())

    def advance(self, k: int) -> None:
        """Record that this rank trained on ``k`` more of its indices of the
        current epoch (kept by `state_dict`)."""
        k = _check_int("advance: k", k, 0)
        if self.consumed + k > len(self):
            raise ValueError(f"DistributedSampler.advance: {self.consumed} + {k} indices exceed "
                             f"this rank's {len(self)} of epoch {self.epoch}")
        self.consumed += k

    def _all_counts(self) -> list:
        """Every rank's ``consumed`` (gathered when this sampler splits the
        live world; a sampler built for another world records its own count
        for every rank)."""
        w = self.num_replicas
        if w > 1 and _comm.world_size() == w and _comm.rank() == self.rank:
            mine = np.array([self.consumed], dtype=np.int64)
            return [int(c[0]) for c in _comm.all_gather(mine)]
        return [self.consumed] * w

    def state_dict(self) -> dict:
        """``{"epoch", "progress", "num_replicas", "n", "shuffle", "seed",
        "drop_last"}``: ``progress`` lists, per world size the epoch ran with,
        ``[world, [indices consumed by each rank]]`` (empty at an epoch's
        start). In a world of more than one rank, a collective."""
        counts = self._all_counts()
        progress = [list(s) for s in self._stages]
        if any(counts):
            progress.append([self.num_replicas, counts])
        return {"epoch": self.epoch, "progress": progress, "num_replicas": self.num_replicas,
                "n": self.n, "shuffle": self.shuffle, "seed": self.seed,
                "drop_last": self.drop_last}

    def load_state_dict(self, state: dict) -> None:
        """Continue from `state_dict`, possibly saved on another number
        of ranks (see the class docstring). Raises ValueError (nothing
        changed) for a malformed state, or one saved for another ``n``,
        ``shuffle``, ``seed`` or ``drop_last``."""
        fn = "DistributedSampler.load_state_dict"
        if not isinstance(state, dict):
            raise ValueError(f"{fn}: state must be a dict (from state_dict()), got "
                             f"{type(state).__name__} {state!r}")
        if "epoch" not in state:
            raise ValueError(f"{fn}: state lacks 'epoch', got {state!r}")
        unknown = sorted(repr(k) for k in state if k not in _STATE_KEYS)
        if unknown:
            raise ValueError(f"{fn}: unknown key(s) {', '.join(unknown)} in the state "
                             f"(expected {', '.join(map(repr, _STATE_KEYS))})")
        epoch = state["epoch"]
        if isinstance(epoch, (bool, np.bool_)) or not isinstance(epoch, (int, np.integer)) \
                or epoch < 0:
            raise ValueError(f"{fn}: 'epoch' must be an int >= 0, got {epoch!r}")
        epoch = int(epoch)
        for key, kind in (("n", int), ("num_replicas", int), ("seed", int),
                          ("shuffle", bool), ("drop_last", bool)):
            v = state.get(key, kind())
            ok = isinstance(v, (bool, np.bool_)) if kind is bool else (
                isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)))
            if not ok:
                raise ValueError(f"{fn}: {key!r} must be {'a bool' if kind is bool else 'an int'}, "
                                 f"got {v!r}")
        diff = [f"{k}={state[k]!r} (this sampler: {getattr(self, k)!r})"
                for k in ("n", "shuffle", "seed", "drop_last")
                if k in state and state[k] != getattr(self, k)]
        if diff:
            raise ValueError(f"DistributedSampler.load_state_dict: the state was saved with "
                             f"{', '.join(diff)}; the epochs' orders would differ")
        progress = _check_progress(state.get("progress", []))
        stages, consumed = progress, 0
        if progress and progress[-1][0] == self.num_replicas:   # same world: continue in place
            stages, consumed = progress[:-1], progress[-1][1][self.rank]
        order = (np.random.default_rng(self.seed + epoch).permutation(self.n) if self.shuffle
                 else np.arange(self.n, dtype=np.int64))
        for i, (world, counts) in enumerate(progress):
            lst = stage_list(order, progress[:i], self.drop_last)
            size = share_size(len(lst), world, self.drop_last and i == 0)
            if max(counts) > size:
                raise ValueError(f"DistributedSampler.load_state_dict: progress stage {i} "
                                 f"counts {counts} exceed the {size} indices per rank of "
                                 f"{world} ranks")
        self.epoch, self._stages, self.consumed, self._share = epoch, stages, consumed, None


def advanced_state(state: dict, k: int) -> dict:
    """A ``DistributedSampler.state_dict()`` after every rank of its world
    consumed ``k`` more of its indices of the epoch (at most its share).

    Why: a ``DataLoader`` keeps its sampler's state at the epoch's start plus
    the batches handed out; on another number of ranks those batches must
    become consumed progress, so that ``DistributedSampler.load_state_dict``
    splits only the samples no rank had consumed. The counts are added to the
    state's last stage when it ran on the same world, else they make a new
    stage ``[num_replicas, [k] * num_replicas]``.

    Args:
        state: a DistributedSampler state (checked as
            ``DistributedSampler.load_state_dict`` checks it).
        k: indices each rank consumed since ``state`` (an int >= 0).

    Returns:
        A new state dict (``state`` is not modified; a copy of it when ``k``
        is 0).

    Raises:
        ValueError: a malformed ``state`` or a negative ``k``.
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 0:
        raise ValueError(f"advanced_state: k must be an int >= 0, got {k!r}")
    if not isinstance(state, dict):
        raise ValueError(f"advanced_state: state must be a dict (from "
                         f"DistributedSampler.state_dict()), got {type(state).__name__}")
    missing = [key for key in _STATE_KEYS if key not in state]
    if missing:
        raise ValueError(f"advanced_state: the sampler state lacks {missing}")
    world = state["num_replicas"]
    try:
        probe = DistributedSampler(state["n"], num_replicas=world, rank=0,
                                   shuffle=bool(state["shuffle"]), seed=state["seed"],
                                   drop_last=bool(state["drop_last"]))
        probe.load_state_dict(state)
    except TypeError as exc:
        raise ValueError(f"advanced_state: malformed sampler state ({exc})") from None
    progress = [[w, list(c)] for w, c in _check_progress(state["progress"])]
    if not k:
        return dict(state, progress=progress)
    stages, counts = progress, [0] * probe.num_replicas
    if progress and progress[-1][0] == probe.num_replicas:
        stages, counts = progress[:-1], progress[-1][1]
    size = len(probe)
    counts = [min(c + int(k), size) for c in counts]
    return dict(state, progress=stages + [[probe.num_replicas, counts]])
