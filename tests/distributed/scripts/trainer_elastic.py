"""Elastic resume of the Trainer: ``trainer_elastic.py DIR SOURCE MODE`` with
SOURCE "arrays" or "loader" (a DataLoader with a DistributedSampler) and
MODE "first" (crash after step 4; a checkpoint every 3 steps) or "resume"
(continue from DIR/SOURCE, possibly on another number of ranks). 48
samples, batches of 4 per rank, 2 epochs. Writes DIR/SOURCE-MODE.rankR.json:
per step (global step, epoch, sample ids), and at the end the parameters'
digest."""
import hashlib
import json
import os
import sys

import numpy as np

import yscv
import yscv.distributed as dist
import yscv.nn as nn
import yscv.optim as optim
from yscv.data import DataLoader, TensorDataset
from yscv.train import Callback, Trainer

folder, source, mode = sys.argv[1], sys.argv[2], sys.argv[3]
dist.init(timeout=60.0)
r, w = dist.rank(), dist.world_size()
rng = np.random.default_rng(1)
X = rng.standard_normal((48, 6)).astype(np.float32)
Y = (X[:, 0] + X[:, 1] > 0).astype(np.int64)
ids = {X[i].tobytes(): i for i in range(len(X))}
log = []


class Crash(Callback):
    def on_step_end(self, trainer, step, logs):
        if mode == "first" and step == 4:
            raise RuntimeError("crash at step 4")


def forward(g, model, xb):
    log.append([trainer.global_step + 1, trainer.epoch, [ids[row.tobytes()] for row in xb]])
    return model(g, g.constant(xb))


yscv.manual_seed(5 + r)
model = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Dropout(0.2), nn.Linear(12, 2))
opt = optim.Adam(model.parameters(), lr=0.02)
trainer = Trainer(model, "cross_entropy", opt, seed=3, progress=False, forward=forward,
                  callbacks=[Crash()], checkpoint_dir=os.path.join(folder, source),
                  checkpoint_every=3, keep_last=5)
if source == "loader":
    data = DataLoader(TensorDataset(X, Y), batch_size=4,
                      sampler=dist.DistributedSampler(len(X), shuffle=True, seed=9))
    kwargs = {}
else:
    data, kwargs = (X, Y), {"batch_size": 4}
try:
    trainer.fit(data, epochs=2, resume=(mode == "resume"), **kwargs)
except RuntimeError as exc:
    assert mode == "first" and "crash at step 4" in str(exc), exc
digest = hashlib.sha256(b"".join(p.data.tobytes() for p in model.parameters())).hexdigest()
with open(os.path.join(folder, f"{source}-{mode}.rank{r}.json"), "w") as f:
    json.dump({"steps": log, "digest": digest, "history": len(trainer.history.step_losses),
               "epochs": len(trainer.history.epochs)}, f)
print(f"OK {r} {w}", flush=True)
