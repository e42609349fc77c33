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


EPS32 = float(np.finfo(np.float32).eps)


def twin_of(module):
    """A copy of ``module``'s parameters in a fresh Net: gradients at the
    same point (DDP's replicas and a model trained alone drift apart in the
    last bits, since their means are summed in other orders)."""
    t = Net(0)
    for p, q in zip(module.parameters(), t.parameters()):
        q.data[...] = p.data
    return t


def rank_grads(t, params_of, batches):
    """Each rank's local gradient (``batches[k]``: its list of (x, y, use_extra)),
    computed here as that rank computed it: one graph per batch, seed 1,
    summed in batch order; zeros where a parameter got none."""
    out = []
    for batch in batches:
        t.zero_grad()
        for xk, yk, extra in batch:
            h = yscv.Graph()
            h.backward(h.cross_entropy(t(h, h.constant(xk), use_extra=extra), yk))
        out.append(np.concatenate([np.zeros(p.data.size, np.float32) if p.grad is None
                                   else p.grad.ravel() for p in params_of(t)]))
    t.zero_grad()
    return out


def sums_in_any_order(terms):
    """Every way an allreduce may add ``terms`` up, pairwise in some order:
    for 2 terms a + b; for 3, (a + b) + c, (a + c) + b and (b + c) + a
    (MPI fixes no order, and MPICH may use another one per buffer segment)."""
    if len(terms) == 1:
        return [terms[0]]
    if len(terms) == 2:
        return [terms[0] + terms[1]]
    a, b, c = terms
    return [(a + b) + c, (a + c) + b, (b + c) + a]


def check_ddp_order(got, terms, mean_of_sum):
    """``got`` (the averaged gradient) has, element by element, the bits of
    one summation order of ``terms``, then the division by the world size
    when the contributions were not pre-scaled (``mean_of_sum``)."""
    cands = sums_in_any_order(terms)
    if mean_of_sum:
        cands = [c / np.float32(w) for c in cands]
    hit = np.zeros(got.shape, bool)
    for c in cands:
        hit |= got == c          # equal floats (a signed zero counts as zero)
    assert hit.all(), (f"{(~hit).sum()} of {got.size} gradient elements are no sum of the "
                       f"ranks' contributions (max diff {np.abs(got - cands[0]).max():.3g})")


def sample_grads(t, params_of, step):
    """|per-sample gradient| summed over the global batch, each scaled as in
    the mean: sum_k sum_b |grad of sample b of rank k| / (B * w)."""
    total = 0.0
    for k in range(w):
        xk, yk = data(step, k)
        for b in range(B):
            (gb,) = rank_grads(t, params_of, [[(xk[b:b + 1], yk[b:b + 1], k == 1)]])
            total = total + np.abs(gb.astype(np.float64))
    return total / (B * w)


def check_global_batch(got, scale, one_process):
    """The averaged gradient against one process's gradient of the mean loss
    over the global batch, at the same parameters.

    They differ by rounding only: the allreduce adds the w per-rank terms in
    another order, and the one-process graph carries its 1/w seed through
    every op of each rank's branch instead of multiplying at the end. Each
    rounding is within EPS32/2 of the value it rounds, and every value on
    the way is a partial sum of per-sample terms; so relative to the
    element the difference has no bound where terms cancel (it was 1.6e-5
    relative at an element near 0), and the bound is relative to ``scale``,
    the per-sample gradients' magnitudes summed as the mean sums them:
    |got - one| <= C * EPS32 * scale, with C the roundings on one path:
    the w - 1 additions of the allreduce and the batch sum (B - 1), plus
    4 per op on the longest backward path (8 ops: cross-entropy, linear,
    tanh, linear, the extra linear), in each of the two computations."""
    C = 2 * ((w - 1) + (B - 1) + 4 * 8)
    bound = C * EPS32 * scale + np.finfo(np.float32).tiny
    err = np.abs(got.astype(np.float64) - one_process.astype(np.float64))
    assert (err <= bound).all(), (f"beyond the rounding bound: max ratio "
                                  f"{(err / bound).max():.3g}")


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
    params = [p for p in net.parameters() if p.grad is not None]
    # bitwise: the ranks' local gradients, computed here at the replicas'
    # parameters, pre-scaled by 1/w as the buckets do (from the second step:
    # the first one divides the sum), summed in an allreduce's order
    twin = twin_of(net)
    twin_params = [q for p, q in zip(net.parameters(), twin.parameters()) if p.grad is not None]
    local = rank_grads(twin, lambda t: twin_params,
                       [[(*data(step, k), k == 1)] for k in range(w)])
    first = step == 0
    terms = local if first else [np.multiply(t, 1.0 / w) for t in local]
    check_ddp_order(flat(params, "grad"), terms, mean_of_sum=first)
    # one process on the global batch (the mean of the ranks' mean losses),
    # at the same parameters: equal up to the rounding of check_global_batch
    h = yscv.Graph()
    total = None
    for k in range(w):
        xk, yk = data(step, k)
        lk = h.cross_entropy(twin(h, h.constant(xk), use_extra=(k == 1)), yk)
        total = lk if total is None else total + lk
    h.backward(total * (1.0 / w))
    one = flat(twin_params, "grad")
    check_global_batch(flat(params, "grad"), sample_grads(twin, lambda t: twin_params, step), one)
    assert same_on_all_ranks(flat(params, "grad")), "gradients differ between ranks"
    # ref is trained alone on the global batch: its parameters are compared
    # after the loop (the trajectory); its gradients are not (other point)
    h = yscv.Graph()
    total = None
    for k in range(w):
        xk, yk = data(step, k)
        lk = h.cross_entropy(ref(h, h.constant(xk), use_extra=(k == 1)), yk)
        total = lk if total is None else total + lk
    h.backward(total * (1.0 / w))
    opt.step(); opt.zero_grad()
    ref_opt.step(); ref_opt.zero_grad()
np.testing.assert_allclose(flat(net.parameters(), "data"), flat(ref.parameters(), "data"),
                           rtol=2e-5, atol=2e-6)
assert same_on_all_ranks(flat(net.parameters(), "data")), "replicas diverged"

# From here on the one-process references run at the replicas' parameters
# (twin): ref's drifted apart from them in the last bits over the steps above
# (their means were summed in other orders), and a gradient at another point
# differs by more than rounding (an element near 0 by 1.6e-5 relative with
# OpenBLAS's AVX2 kernels, beyond the rtol=1e-6 once asked of it).
twin = twin_of(net)

# no_sync: local accumulation, then the synced backward averages the sum
x1, y1 = data(9, r, 1)
x2, y2 = data(9, r, 2)
with model.no_sync():
    g = yscv.Graph()
    g.backward(g.cross_entropy(model(g, g.constant(x1)), y1))
local = [p.grad.copy() for p in net.body.parameters()]
# the local gradient is this rank's alone: the bits of one process at the
# same parameters
(mine,) = rank_grads(twin, lambda t: list(t.body.parameters()), [[(x1, y1, False)]])
assert np.array_equal(flat(net.body.parameters(), "grad"), mine), "no_sync: not the local gradient"
assert not same_on_all_ranks(np.concatenate([a.ravel() for a in local])), "no_sync synced"
g = yscv.Graph()
g.backward(g.cross_entropy(model(g, g.constant(x2)), y2))
h = yscv.Graph()
total = None
for k in range(w):
    for micro in (1, 2):
        xk, yk = data(9, k, micro)
        lk = h.cross_entropy(twin(h, h.constant(xk)), yk)
        total = lk if total is None else total + lk
h.backward(total * (1.0 / w))
np.testing.assert_allclose(flat(net.body.parameters(), "grad"),
                           flat(twin.body.parameters(), "grad"), rtol=2e-5, atol=1e-7)
assert same_on_all_ranks(flat(net.body.parameters(), "grad"))

# the bucket path: after a sync every gradient lives in its bucket slot, and a
# synced backward writes contributions pre-scaled by 1/world (no division
# pass). Cases where a gradient is already held when a forward starts:
# synced steps without zero_grad accumulate the means, and a second backward
# of one forward (retain_graph) adds a second mean.
body = list(net.body.parameters())
assert all(p.grad is p.grad_slot for p in body), "gradients are not bucket views"
opt.zero_grad()
twin.zero_grad()


def ref_mean(h, step):
    total = None
    for k in range(w):
        xk, yk = data(step, k)
        lk = h.cross_entropy(twin(h, h.constant(xk)), yk)
        total = lk if total is None else total + lk
    return total * (1.0 / w)


for step in (20, 21):                 # two synced steps, no zero_grad between
    g = yscv.Graph()
    x, y = data(step, r)
    g.backward(g.cross_entropy(model(g, g.constant(x)), y))
    h = yscv.Graph()
    h.backward(ref_mean(h, step))
    np.testing.assert_allclose(flat(body, "grad"), flat(twin.body.parameters(), "grad"),
                               rtol=2e-5, atol=1e-7)
    assert same_on_all_ranks(flat(body, "grad"))
opt.zero_grad()
twin.zero_grad()
g = yscv.Graph()
x, y = data(22, r)
loss = g.cross_entropy(model(g, g.constant(x)), y)
g.backward(loss, retain_graph=True)
g.backward(loss)                      # no forward in between: counted as is
h = yscv.Graph()
m = ref_mean(h, 22)
h.backward(m, retain_graph=True)
h.backward(m)
np.testing.assert_allclose(flat(body, "grad"), flat(twin.body.parameters(), "grad"),
                           rtol=2e-5, atol=1e-7)
assert same_on_all_ranks(flat(body, "grad"))
print(f"OK {r} {w}", flush=True)
