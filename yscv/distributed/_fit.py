"""What ``yscv.train.Trainer`` does differently on more than one rank.

The trainer keeps one `DataParallelFit` (None in a world of one) and
calls it at a few marked places: the epoch permutation is sharded as
``DistributedSampler`` shards it (padded by wrapping, rank r takes every
world-th index), so ``batch_size`` is per rank (the global batch is
``batch_size * world``; a DataLoader shards itself with its
``DistributedSampler``, which the trainer requires); after each backward ONE allreduce averages the
gradients and sums the step's sample count, loss and metric sums over ranks
(so the history, the running sums and the logged metrics are the same on
every rank); evaluation splits the samples over ranks and sums; rank 0 alone
prints; checkpoints are written by rank 0 (``yscv.save_checkpoint``).
"""
from __future__ import annotations

import numpy as np

from . import _comm
from .ddp import GradientAverager, broadcast_module, check_same_parameters


def for_trainer(model):
    """(model to train, DataParallelFit or None). A
    `DistributedDataParallel` model is unwrapped: the trainer averages
    the gradients itself, fused with its metrics."""
    inner = model.module if type(model).__name__ == "DistributedDataParallel" else model
    if _comm.launched_world_size() <= 1 and not _comm._initialized:
        return inner, None
    _comm._join()
    if _comm._size <= 1:
        return inner, None
    return inner, DataParallelFit(inner)


class DataParallelFit:
    def __init__(self, model):
        self.rank, self.world = _comm.rank(), _comm.world_size()
        check_same_parameters(model, "Trainer")
        self.averager = GradientAverager(model.parameters())

    def broadcast(self, model) -> None:
        """Rank 0's parameters and buffers on every rank (start of fit)."""
        broadcast_module(model, 0)

    def shard_size(self, n: int, drop_last: bool) -> int:
        w = self.world
        return -(-(n - w) // w) if drop_last and n % w else -(-n // w)

    def shard(self, perm: np.ndarray, drop_last: bool) -> np.ndarray:
        """This rank's share of the epoch permutation (DistributedSampler's rule)."""
        m = self.shard_size(len(perm), drop_last)
        total = m * self.world
        if total > len(perm):
            perm = np.concatenate([perm, np.resize(perm, total - len(perm))])
        return perm[:total][self.rank::self.world]

    def sync_step(self, loss: float, out, target, metrics) -> np.ndarray:
        """Average the gradients; returns [n, ``loss*n``, ``metric*n`` ...] summed over ranks."""
        n = len(target)
        local = [n, loss * n] + [float(fn(out, target)) * n for _, fn in metrics]
        return self.averager.sync(np.array(local, dtype=np.float64))

    @staticmethod
    def add_sums(acc: dict, sums: np.ndarray, metrics) -> float:
        """Add a step's global sums to the running ones; returns the step's mean loss."""
        acc["n"] += int(round(sums[0]))
        acc["loss"] += float(sums[1])
        for i, (name, _) in enumerate(metrics):
            acc[name] += float(sums[2 + i])
        return float(sums[1] / sums[0])

    def eval_share(self, x, y):
        return x[self.rank::self.world], y[self.rank::self.world]

    @staticmethod
    def sum_over_ranks(sums: dict) -> dict:
        keys = list(sums)   # every rank builds it in the same order
        buf = np.array([sums[k] for k in keys], dtype=np.float64)
        _comm.all_reduce(buf, "sum")
        return dict(zip(keys, buf.tolist()))
