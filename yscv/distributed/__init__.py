"""Data-parallel training across processes and machines, on MPI (mpi4py).

    import yscv, yscv.distributed as dist
    dist.init()                                   # a world of one without mpiexec
    model = dist.DistributedDataParallel(net)     # rank 0's parameters everywhere
    sampler = dist.DistributedSampler(len(X), shuffle=True, seed=0)
    ...
    g.backward(loss)                              # p.grad = mean over ranks

Launch: ``mpiexec -n N python -m mpi4py script.py`` (install: ``pip install
mpi4py mpich``, or ``pip install -e ".[mpi]"`` from the checkout). Without ``mpiexec`` the same script runs as one process and
``mpi4py`` is not imported. See docs/scaling_out.md.
"""
from ._comm import (
    all_gather,
    all_reduce,
    barrier,
    broadcast,
    init,
    is_initialized,
    launched_world_size,
    local_world_size,
    rank,
    threads_per_rank,
    timeout,
    world_size,
)
from ..errors import DistributedError
from .ddp import DistributedDataParallel, GradientAverager, broadcast_module
from .sampler import DistributedSampler

__all__ = [
    "init", "timeout", "is_initialized", "rank", "world_size", "local_world_size", "barrier",
    "all_reduce", "broadcast", "all_gather", "launched_world_size", "threads_per_rank",
    "DistributedDataParallel", "GradientAverager", "broadcast_module", "DistributedSampler",
    "DistributedError",
]
