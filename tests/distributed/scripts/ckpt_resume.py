"""Data-parallel training with dropout and a shuffling sampler, checkpointed by
every rank (rank 0 writes) and resumed: usage ``ckpt_resume.py MODE DIR`` with
MODE "full" (epochs 0-3), "first" (epochs 0-1, then save) or "resume" (load,
then epochs 2-3). Writes ``epoch batch loss-hex`` per step to DIR/MODE.rankR.log
(one file per rank: lines printed by two ranks may interleave)."""
import os
import sys

import numpy as np

import yscv
import yscv.distributed as dist
import yscv.nn as nn
import yscv.optim as optim
from yscv.state import read_checkpoint_metadata
from yscv.errors import CheckpointError

mode, folder = sys.argv[1], sys.argv[2]
dist.init()
r, w = dist.rank(), dist.world_size()
path = os.path.join(folder, "ckpt.safetensors")

yscv.manual_seed(7 + r)                  # every rank draws other dropout masks
net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 3))
model = dist.DistributedDataParallel(net)
opt = optim.Adam(model.parameters(), lr=0.01)
rng = np.random.default_rng(0)
X = rng.standard_normal((42, 8)).astype(np.float32)
Y = rng.integers(0, 3, 42)
sampler = dist.DistributedSampler(len(X), shuffle=True, seed=3)
start, stop = {"full": (0, 4), "first": (0, 2), "resume": (2, 4)}[mode]

if mode == "resume":
    info = yscv.load_checkpoint(path, model=model, optimizer=opt)
    sampler.load_state_dict(info["extra"]["sampler"])
    assert sampler.epoch == start and info["step"] == 12, (sampler.epoch, info["step"])

step = 0
log = open(os.path.join(folder, f"{mode}.rank{r}.log"), "w")
for epoch in range(start, stop):
    sampler.set_epoch(epoch)
    idx = sampler.indices()
    for s in range(0, len(idx), 4):
        b = idx[s:s + 4]
        g = yscv.Graph()
        loss = g.cross_entropy(model(g, g.constant(X[b])), Y[b])
        g.backward(loss)
        opt.step(); opt.zero_grad()
        step += 1
        log.write(f"{epoch} {s} {float(g.value(loss)).hex()}\n")
log.close()
flat = np.concatenate([p.data.ravel() for p in net.parameters()])
views = dist.all_gather(flat)
assert all(v.tobytes() == views[0].tobytes() for v in views), "replicas diverged"

if mode == "first":
    mine = yscv.random.get_rng_state()
    sampler.set_epoch(stop)                     # the epoch to run next
    out = yscv.save_checkpoint(path, model=model, optimizer=opt, step=step,
                               extra={"sampler": sampler.state_dict()})
    assert out == path and os.path.exists(path)   # complete on every rank when it returns
    meta = read_checkpoint_metadata(path)
    assert len(meta["rng_states"]) == w and meta["rng_states"][r] == mine
    assert meta["model"]["class"] == "Sequential"
    # a failure on rank 0 is raised on every rank (nobody waits forever)
    try:
        yscv.save_checkpoint(os.path.join(folder, "no", "such", "dir", "x.safetensors"),
                             model=model)
    except (CheckpointError, OSError) as exc:
        print(f"SAVE_ERR {r} {type(exc).__name__} {'rank 0' in str(exc)}", flush=True)
    else:
        raise AssertionError("saving into a missing folder did not fail")
    assert [n for n in os.listdir(folder) if n.endswith(".tmp")] == []
print(f"OK {r} {w}", flush=True)
