"""Rank 1 raises; the others wait in a barrier: the job must end, not hang."""
import yscv.distributed as dist

dist.init()
if dist.rank() == 1:
    raise RuntimeError("boom on rank 1")
dist.barrier()
print("unreachable", flush=True)
