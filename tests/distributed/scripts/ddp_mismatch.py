"""DistributedDataParallel (and the Trainer) refuse ranks whose parameters
differ, on every rank, naming the first difference: rank 2 builds a model
with transposed shapes, one more layer, float64 parameters, a frozen
parameter. Prints ``CASE rank name`` per refused case and ``OK rank world``;
the message of each case goes to DIR/CASE.rankR.txt."""
import os
import sys

import numpy as np

import yscv
import yscv.distributed as dist
import yscv.nn as nn
import yscv.optim as optim
from yscv.train import Trainer

folder = sys.argv[1]
dist.init(timeout=20.0)
r, w = dist.rank(), dist.world_size()
odd = r == w - 1


def net(case):
    if case == "shape" and odd:
        return nn.Sequential(nn.Linear(6, 4), nn.ReLU(), nn.Linear(4, 2))
    if case == "count" and odd:
        return nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 2), nn.Linear(2, 2))
    if case == "dtype" and odd:
        return nn.Sequential(nn.Linear(4, 6, dtype=np.float64), nn.ReLU(),
                             nn.Linear(6, 2, dtype=np.float64))
    m = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 2))
    if case == "frozen" and odd:
        m[2].bias.requires_grad = False
    return m


for case in ("shape", "count", "dtype", "frozen"):
    for who in ("DistributedDataParallel", "Trainer"):
        model = net(case)
        try:
            if who == "Trainer":
                Trainer(model, "cross_entropy", optim.SGD(model.parameters(), lr=0.1))
            else:
                dist.DistributedDataParallel(model)
        except dist.DistributedError as exc:
            assert str(exc).startswith(who + ":"), str(exc)
            assert exc.missing_ranks == [] and exc.rank == r
            with open(os.path.join(folder, f"{case}.{who}.rank{r}.txt"), "w") as f:
                f.write(str(exc))
            print(f"CASE {r} {case}{who}", flush=True)
        else:
            raise AssertionError(f"{who} accepted different parameters ({case})")
# the world is still usable, and the same model everywhere passes
model = dist.DistributedDataParallel(net("same"))
flat = np.concatenate([p.data.ravel() for p in model.parameters()])
assert all(v.tobytes() == flat.tobytes() for v in dist.all_gather(flat))
print(f"OK {r} {w}", flush=True)
