"""A rank that stops taking part makes the others raise DistributedError
within the timeout: ``timeout.py MODE`` with MODE "exit" (the last rank
leaves cleanly with sys.exit(0) after one step) or "fewer" (the last rank
runs one batch fewer than the others, then ends). A rank that times out
prints ``TIMEOUT rank collective missing-ranks seconds`` (and the message on
stderr) and exits 0."""
import sys
import time

import numpy as np

import yscv
import yscv.distributed as dist
import yscv.nn as nn
import yscv.optim as optim

mode = sys.argv[1]
dist.init(timeout=3.0)
r, w = dist.rank(), dist.world_size()
assert dist.timeout() == 3.0
yscv.manual_seed(0)
model = dist.DistributedDataParallel(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)))
opt = optim.SGD(model.parameters(), lr=0.1)
X = np.random.default_rng(r).standard_normal((40, 4)).astype(np.float32)
Y = np.arange(40) % 2
short = mode == "fewer" and r == w - 1
steps = 4 - (1 if short else 0)
t0 = None
try:
    for s in range(steps):
        if mode == "exit" and r == w - 1 and s == 1:
            sys.exit(0)                         # a clean exit: no traceback, no abort
        g = yscv.Graph()
        loss = g.cross_entropy(model(g, g.constant(X[s * 4:(s + 1) * 4])), Y[s * 4:(s + 1) * 4])
        t0 = time.perf_counter()
        g.backward(loss)                        # the gradient all_reduce
        opt.step(); opt.zero_grad()
except dist.DistributedError as exc:
    waited = time.perf_counter() - t0
    assert isinstance(exc, yscv.AutogradError)
    assert exc.rank == r and exc.collective in str(exc), str(exc)
    print(f"TIMEOUT {r} {exc.collective.replace(' ', '_')} "
          f"{','.join(map(str, exc.missing_ranks))} {waited:.2f}", flush=True)
    print(str(exc), file=sys.stderr, flush=True)
    # the world is unusable now: a later collective raises at once
    t1 = time.perf_counter()
    try:
        dist.barrier()
    except dist.DistributedError as again:
        assert "unusable" in str(again) and time.perf_counter() - t1 < 0.5, str(again)
        print(f"BROKEN {r}", flush=True)
    sys.exit(0)
print(f"DONE {r} {w}", flush=True)
