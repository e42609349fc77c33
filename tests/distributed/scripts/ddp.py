"""DistributedDataParallel: broadcast at construction, gradients = the mean
over ranks (equal to one process on the global batch), replicas bit-identical,
missing gradients count as zeros, no_sync accumulation."""
import numpy as np

import yscv
import yscv.distributed as dist
import yscv.nn as nn
import yscv.optim as optim

dist.init()
r, w = dist.rank(), dist.world_size()
B = 6                       # samples per rank


class Net(nn.Module):
    def __init__(self, r):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4))
        self.extra = nn.Linear(4, 4)     # used by rank 1 only: zeros elsewhere
        self.unused = nn.Linear(4, 4)    # used by no rank: its grad stays None
        self.register_buffer("stat", np.full(3, float(r), dtype=np.float32))

    def forward(self, g, x, use_extra=False):
        y = self.body(g, x)
        return self.extra(g, y) if use_extra else y


def data(step, k, micro=0):
    rng = np.random.default_rng(1000 * step + 10 * k + micro)
    return rng.standard_normal((B, 8)).astype(np.float32), rng.integers(0, 4, B)


def flat(params, what):
    parts = [getattr(p, what) for p in params]
    return np.concatenate([a.ravel() for a in parts if a is not None])


def same_on_all_ranks(a):
    got = dist.all_gather(np.ascontiguousarray(a))
    return all(x.tobytes() == got[0].tobytes() for x in got)


yscv.manual_seed(100 + r)                   # a different initialisation on every rank
net = Net(r)
model = dist.DistributedDataParallel(net, stagger_compile=True)   # forced: covered at -n 2 too
yscv.manual_seed(100)                       # rank 0's initialisation, everywhere
ref = Net(0)
for (name, p), q in zip(net.named_parameters(), ref.parameters()):
    assert np.array_equal(p.data, q.data), f"{name} was not broadcast from rank 0"
assert np.array_equal(net.stat, np.zeros(3, np.float32)), "buffers were not broadcast"
assert model.module is net and list(model.state_dict()) == list(net.state_dict())

opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
ref_opt = optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
for step in range(4):
    g = yscv.Graph()
    x, y = data(step, r)
    loss = g.cross_entropy(model(g, g.constant(x), use_extra=(r == 1)), y)
    g.backward(loss)
    if step == 0:
        assert net.unused.weight.grad is None and net.unused.bias.grad is None
        assert net.extra.weight.grad is not None
    # one process on the global batch: the mean of the ranks' mean losses
    h = yscv.Graph()
    total = None
    for k in range(w):
        xk, yk = data(step, k)
        lk = h.cross_entropy(ref(h, h.constant(xk), use_extra=(k == 1)), yk)
        total = lk if total is None else total + lk
    h.backward(total * (1.0 / w))
    params = [p for p in net.parameters() if p.grad is not None]
    refs = [q for p, q in zip(net.parameters(), ref.parameters()) if p.grad is not None]
    np.testing.assert_allclose(flat(params, "grad"), flat(refs, "grad"), rtol=2e-5, atol=1e-7)
    assert same_on_all_ranks(flat(params, "grad")), "gradients differ between ranks"
    opt.step(); opt.zero_grad()
    ref_opt.step(); ref_opt.zero_grad()
np.testing.assert_allclose(flat(net.parameters(), "data"), flat(ref.parameters(), "data"),
                           rtol=2e-5, atol=2e-6)
assert same_on_all_ranks(flat(net.parameters(), "data")), "replicas diverged"

# no_sync: local accumulation, then the synced backward averages the sum
x1, y1 = data(9, r, 1)
x2, y2 = data(9, r, 2)
with model.no_sync():
    g = yscv.Graph()
    g.backward(g.cross_entropy(model(g, g.constant(x1)), y1))
local = [p.grad.copy() for p in net.body.parameters()]
h = yscv.Graph()
h.backward(h.cross_entropy(ref(h, h.constant(x1)), y1))
np.testing.assert_allclose(flat(net.body.parameters(), "grad"), flat(ref.body.parameters(), "grad"),
                           rtol=1e-6, atol=1e-8)
ref.zero_grad()
assert not same_on_all_ranks(np.concatenate([a.ravel() for a in local])), "no_sync synced"
g = yscv.Graph()
g.backward(g.cross_entropy(model(g, g.constant(x2)), y2))
h = yscv.Graph()
total = None
for k in range(w):
    for micro in (1, 2):
        xk, yk = data(9, k, micro)
        lk = h.cross_entropy(ref(h, h.constant(xk)), yk)
        total = lk if total is None else total + lk
h.backward(total * (1.0 / w))
np.testing.assert_allclose(flat(net.body.parameters(), "grad"), flat(ref.body.parameters(), "grad"),
                           rtol=2e-5, atol=1e-7)
assert same_on_all_ranks(flat(net.body.parameters(), "grad"))

# the bucket path: after a sync every gradient lives in its bucket slot, and a
# synced backward writes contributions pre-scaled by 1/world (no division
# pass). Cases where a gradient is already held when a forward starts:
# synced steps without zero_grad accumulate the means, and a second backward
# of one forward (retain_graph) adds a second mean.
body = list(net.body.parameters())
assert all(p.grad is p.grad_slot for p in body), "gradients are not bucket views"
opt.zero_grad()
ref.zero_grad()


def ref_mean(h, step):
    total = None
    for k in range(w):
        xk, yk = data(step, k)
        lk = h.cross_entropy(ref(h, h.constant(xk)), yk)
        total = lk if total is None else total + lk
    return total * (1.0 / w)


for step in (20, 21):                 # two synced steps, no zero_grad between
    g = yscv.Graph()
    x, y = data(step, r)
    g.backward(g.cross_entropy(model(g, g.constant(x)), y))
    h = yscv.Graph()
    h.backward(ref_mean(h, step))
    np.testing.assert_allclose(flat(body, "grad"), flat(ref.body.parameters(), "grad"),
                               rtol=2e-5, atol=1e-7)
    assert same_on_all_ranks(flat(body, "grad"))
opt.zero_grad()
ref.zero_grad()
g = yscv.Graph()
x, y = data(22, r)
loss = g.cross_entropy(model(g, g.constant(x)), y)
g.backward(loss, retain_graph=True)
g.backward(loss)                      # no forward in between: counted as is
h = yscv.Graph()
m = ref_mean(h, 22)
h.backward(m, retain_graph=True)
h.backward(m)
np.testing.assert_allclose(flat(body, "grad"), flat(ref.body.parameters(), "grad"),
                           rtol=2e-5, atol=1e-7)
assert same_on_all_ranks(flat(body, "grad"))
print(f"OK {r} {w}", flush=True)
