"""Trainer.fit on several ranks: ``trainer.py DIR MODE`` with MODE "full" or
"resume" (continue from the newest checkpoint in DIR/ckpt). Writes the
history (per-step losses as hex, epoch logs) and a digest of the parameters
to DIR/MODE.rankR.log."""
import hashlib
import json
import os
import sys

import numpy as np

import yscv
import yscv.distributed as dist
import yscv.nn as nn
import yscv.optim as optim
from yscv.train import Trainer

folder, mode = sys.argv[1], sys.argv[2]
r, w = dist.rank(), dist.world_size()
rng = np.random.default_rng(1)
X = rng.standard_normal((50, 6)).astype(np.float32)
Y = (X[:, 0] + X[:, 1] > 0).astype(np.int64) + (X[:, 2] > 1).astype(np.int64)
Xv, Yv = X[:13] + 0.1, Y[:13]

yscv.manual_seed(5 + r)      # the trainer broadcasts rank 0's parameters
model = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Dropout(0.2), nn.Linear(12, 3))
opt = optim.Adam(model.parameters(), lr=0.02)
trainer = Trainer(model, "cross_entropy", opt, seed=3,
                  checkpoint_dir=os.path.join(folder, "ckpt"), checkpoint_every=4, keep_last=3)
history = trainer.fit((X, Y), epochs=3, batch_size=5, val_data=(Xv, Yv), resume=(mode == "resume"))
assert trainer.global_step == 15, trainer.global_step
ev = trainer.evaluate((Xv, Yv))
digest = hashlib.sha256(b"".join(p.data.tobytes() for p in model.parameters())).hexdigest()
with open(os.path.join(folder, f"{mode}.rank{r}.log"), "w") as f:
    json.dump({"steps": [float(v).hex() for v in history.step_losses],
               "epochs": [{k: v for k, v in e.items() if k != "time"} for e in history.epochs],
               "eval": {k: float(v).hex() for k, v in ev.items()}, "params": digest}, f,
              sort_keys=True, default=str)
print(f"OK {r} {w}", flush=True)
