"""Elastic resume by the plain API: ``elastic.py MODE DIR TAG`` with MODE
"full" (epochs 0-1), "first" (epoch 0 up to step 3 or 2, then save to
DIR/TAG.safetensors) or "resume" (load DIR/TAG.safetensors, possibly on
another number of ranks, and finish epochs 0-1). Batches of 4 from a
shuffling DistributedSampler over 42 samples; dropout draws per rank.
Writes DIR/MODE-TAG.rankR.json: per step (epoch, indices, loss hex), and
after a load the RNG state and a digest of model + optimizer; "first" also
writes the digest it saved."""
import hashlib
import json
import os
import sys

import numpy as np

import yscv
import yscv.distributed as dist
import yscv.nn as nn
import yscv.optim as optim

mode, folder, tag = sys.argv[1], sys.argv[2], sys.argv[3]
dist.init(timeout=60.0)
r, w = dist.rank(), dist.world_size()
path = os.path.join(folder, f"{tag}.safetensors")

yscv.manual_seed(11 + r)                   # every rank draws other dropout masks
net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 3))
model = dist.DistributedDataParallel(net)
opt = optim.Adam(model.parameters(), lr=0.01)
rng = np.random.default_rng(0)
X = rng.standard_normal((42, 8)).astype(np.float32)
Y = rng.integers(0, 3, 42)
sampler = dist.DistributedSampler(len(X), shuffle=True, seed=3)


def digest():
    h = hashlib.sha256()
    for p in net.parameters():
        h.update(p.data.tobytes())
    for i, st in sorted(opt.state_dict()["state"].items()):
        for k, v in sorted(st.items()):
            h.update(f"{i}{k}{v if not isinstance(v, np.ndarray) else v.tobytes().hex()}".encode())
    return h.hexdigest()


record = {"steps": []}
if mode == "resume":
    info = yscv.load_checkpoint(path, model=model, optimizer=opt)
    sampler.load_state_dict(info["extra"]["sampler"])
    record["rng"] = yscv.random.get_rng_state()
    record["digest"] = digest()
    step = info["step"]
else:
    step = 0
stop_at = {2: 3, 3: 2}[w] if mode == "first" else None
for epoch in range(sampler.epoch, 2):
    sampler.set_epoch(epoch)                  # the resumed epoch keeps its position
    idx = sampler.indices()
    for s in range(0, len(idx), 4):
        if step == stop_at:
            break
        b = idx[s:s + 4]
        g = yscv.Graph()
        loss = g.cross_entropy(model(g, g.constant(X[b])), Y[b])
        g.backward(loss)
        opt.step(); opt.zero_grad()
        sampler.advance(len(b))
        step += 1
        record["steps"].append([epoch, b.tolist(), float(g.value(loss)).hex()])
    if step == stop_at:
        break
if mode == "first":
    yscv.save_checkpoint(path, model=model, optimizer=opt, step=step,
                         extra={"sampler": sampler.state_dict()})
    record["digest"] = digest()
with open(os.path.join(folder, f"{mode}-{tag}.rank{r}.json"), "w") as f:
    json.dump(record, f)
print(f"OK {r} {w}", flush=True)
