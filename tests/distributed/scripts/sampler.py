"""DistributedSampler with the world's defaults: the shards of all ranks are
disjoint (up to the wrap-around padding), cover range(n), equal in size."""
import numpy as np

import yscv.distributed as dist

r, w = dist.rank(), dist.world_size()
for n, drop_last in ((10, False), (10, True), (2, False), (31, False)):
    s = dist.DistributedSampler(n, shuffle=True, seed=4, drop_last=drop_last)
    assert s.num_replicas == w and s.rank == r
    for epoch in (0, 1):
        s.set_epoch(epoch)
        mine = np.array(list(s), dtype=np.int64)
        assert len(mine) == len(s)
        shards = dist.all_gather(mine)
        allidx = np.concatenate(shards)
        if drop_last:
            assert len(np.unique(allidx)) == len(allidx) == (n // w) * w
        else:
            assert set(allidx.tolist()) == set(range(n)) and len(allidx) == -(-n // w) * w
    assert not np.array_equal(*[dist.DistributedSampler(n, seed=4).indices()
                                for _ in range(1)], np.arange(len(s))) or n <= 2
print(f"OK {r} {w}", flush=True)
