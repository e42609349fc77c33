"""Trainer.fit on several ranks fed by a DataLoader with a DistributedSampler:
``trainer_loader.py DIR MODE`` with MODE "full" (uninterrupted), "crash"
(killed after step 7: an exception on every rank; checkpoints every 3 steps)
or "resume" (a new process continuing from DIR/ckpt). Writes the per-step
losses (hex), the epoch logs and a digest of the parameters to
DIR/MODE.rankR.log. Also checks that a DataLoader without a
DistributedSampler is refused."""
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

folder, mode = sys.argv[1], sys.argv[2]
r, w = dist.rank(), dist.world_size()
rng = np.random.default_rng(1)
X = rng.standard_normal((47, 6)).astype(np.float32)
Y = (X[:, 0] + X[:, 1] > 0).astype(np.int64) + (X[:, 2] > 1).astype(np.int64)
Xv, Yv = X[:13] + 0.1, Y[:13]


class Crash(Callback):
    """Raises after step ``k`` on every rank (None: never); in every run, as a
    resumed trainer must have the callbacks of the saved one."""

    def __init__(self, k):
        self.k = k

    def on_step_end(self, trainer, step, logs):
        if step == self.k:
            raise RuntimeError(f"crash at step {step}")


def parts(init_seed):
    yscv.manual_seed(init_seed + r)   # the trainer broadcasts rank 0's parameters
    model = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Dropout(0.2), nn.Linear(12, 3))
    opt = optim.Adam(model.parameters(), lr=0.02)
    sched = optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.7)
    train = DataLoader(TensorDataset(X, Y), batch_size=5,
                       sampler=dist.DistributedSampler(len(X), shuffle=True, seed=3))
    val = DataLoader(TensorDataset(Xv, Yv), batch_size=4,
                     sampler=dist.DistributedSampler(len(Xv), shuffle=False))
    return model, opt, sched, train, val


# a DataLoader that does not shard itself is refused, naming the fix
model, opt, sched, _, _ = parts(5)
try:
    Trainer(model, "cross_entropy", opt, progress=False).fit(
        DataLoader(TensorDataset(X, Y), batch_size=5, shuffle=True), epochs=1)
except ValueError as exc:
    assert "sampler=DistributedSampler(len(dataset))" in str(exc), str(exc)
else:
    raise AssertionError("a DataLoader without a DistributedSampler was accepted")

model, opt, sched, train, val = parts(5 if mode != "resume" else 42)
ckpt = os.path.join(folder, "full_ckpt" if mode == "full" else "ckpt")
trainer = Trainer(model, "cross_entropy", opt, sched, seed=3, progress=False,
                  callbacks=[Crash(7 if mode == "crash" else None)],
                  checkpoint_dir=ckpt, checkpoint_every=3, keep_last=2)
try:
    history = trainer.fit(train, epochs=3, val_data=val, resume=(mode == "resume"))
except RuntimeError as exc:
    assert mode == "crash" and "crash at step 7" in str(exc), exc
    print(f"CRASHED {r} {w}", flush=True)
    sys.exit(0)
assert trainer.global_step == 15, trainer.global_step   # ceil(ceil(47 / 2) / 5) * 3
digest = hashlib.sha256(b"".join(p.data.tobytes() for p in model.parameters())).hexdigest()
with open(os.path.join(folder, f"{mode}.rank{r}.log"), "w") as f:
    json.dump({"steps": [float(v).hex() for v in history.step_losses],
               "epochs": [{k: v for k, v in e.items() if k != "time"} for e in history.epochs],
               "params": digest}, f, sort_keys=True, default=str)
print(f"OK {r} {w}", flush=True)
