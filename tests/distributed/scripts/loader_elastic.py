"""Elastic resume of a DataLoader by the plain API: ``loader_elastic.py MODE
DIR`` with MODE "first" (3 batches of epoch 0, then save the loader's state
to DIR/data.safetensors with ``save_checkpoint(data=)`` and to
DIR/state.rankR.json with ``state_dict()``; before iterating, it also saves
DIR/fresh.safetensors) or "resume-checkpoint" / "resume-state" /
"resume-fresh" (``load_checkpoint(data=)`` / ``load_state_dict`` of rank 0's
JSON / ``load_checkpoint`` of fresh.safetensors, possibly on another number
of ranks, then the rest of epoch 0 and epoch 1). 48 samples, batches of 4 from a shuffling DistributedSampler.
Writes DIR/MODE.rankR.json: the sample ids per epoch."""
import json
import os
import sys

import numpy as np

import yscv
import yscv.distributed as dist
from yscv.data import DataLoader, TensorDataset

mode, folder = sys.argv[1], sys.argv[2]
dist.init(timeout=60.0)
r, w = dist.rank(), dist.world_size()
loader = DataLoader(TensorDataset(np.arange(48)), batch_size=4,
                    sampler=dist.DistributedSampler(48, shuffle=True, seed=5))
seen = {0: [], 1: []}
if mode == "first":
    # before iterating, the loader's state_dict asks the sampler for its
    # state, a collective: save_checkpoint must call it on every rank
    yscv.save_checkpoint(os.path.join(folder, "fresh.safetensors"), data=loader)
    batches = iter(loader)
    for _ in range(3):
        seen[0] += next(batches)[0].tolist()
    state = loader.state_dict()
    with open(os.path.join(folder, f"state.rank{r}.json"), "w") as f:
        json.dump(state, f)
    yscv.save_checkpoint(os.path.join(folder, "data.safetensors"), data=loader)
else:
    if mode == "resume-checkpoint":
        yscv.load_checkpoint(os.path.join(folder, "data.safetensors"), data=loader)
    elif mode == "resume-fresh":
        yscv.load_checkpoint(os.path.join(folder, "fresh.safetensors"), data=loader)
    else:
        with open(os.path.join(folder, "state.rank0.json")) as f:
            loader.load_state_dict(json.load(f))
    for epoch in (0, 1):
        assert loader.epoch == epoch, (loader.epoch, epoch)
        for (b,) in loader:
            seen[epoch] += b.tolist()
with open(os.path.join(folder, f"{mode}.rank{r}.json"), "w") as f:
    json.dump(seen, f)
print(f"OK {r} {w}", flush=True)
