"""yscv.compile: a replay is bit-identical to the eager step (returned
values, Parameter.grad, running statistics, dropout masks), keyed by shapes,
static arguments and training flags, bounded by cache_size; check=True
catches a value-dependent branch; what cannot be replayed is refused at
record time."""
from __future__ import annotations

import numpy as np
import pytest

import yscv
from yscv import nn, optim
from yscv.errors import CompileError, CompileMismatchError


def _eager(fn, dtype=np.float32):
    """fn run eagerly on a fresh graph, NodeIds returned as array copies."""
    def call(*args):
        g = yscv.Graph(dtype=dtype)
        out = fn(g, *args)

        def conv(o):
            if type(o) is yscv.NodeId:
                return np.array(g.value(o), copy=True)
            if isinstance(o, (tuple, list)):
                return type(o)(conv(x) for x in o)
            if isinstance(o, dict):
                return {k: conv(v) for k, v in o.items()}
            return o
        return conv(out)
    return call


def _same(a, b):
    if isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
        return
    if a is None or b is None:
        assert a is None and b is None
        return
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype
    assert a.tobytes() == b.tobytes()


def _state(model):
    return ([p.grad for p in model.parameters()], [b for _, b in model.named_buffers()])


def _compare_runs(make_model, make_fn, batches, dtype=np.float32, lr=0.05, check=False):
    """Two models built from one seed: one stepped eagerly, one compiled;
    after every call the outputs, grads and buffers agree bit for bit, then
    both take the same optimizer step (the replay must read new params)."""
    yscv.manual_seed(7)
    m_eager = make_model()
    yscv.manual_seed(7)
    m_comp = make_model()
    eager = _eager(make_fn(m_eager), dtype)
    comp = yscv.compile(make_fn(m_comp), dtype=dtype, check=check)
    o_eager = optim.SGD(m_eager.parameters(), lr=lr, momentum=0.9)
    o_comp = optim.SGD(m_comp.parameters(), lr=lr, momentum=0.9)
    for k, batch in enumerate(batches):
        yscv.manual_seed(100 + k)
        want = eager(*batch)
        yscv.manual_seed(100 + k)
        got = comp(*batch)
        _same(want, got)
        for a, b in zip(*(_state(m) for m in (m_eager, m_comp))):
            _same(a, b)
        o_eager.step()
        o_comp.step()
        o_eager.zero_grad()
        o_comp.zero_grad()
    assert comp.recordings == 1
    return comp, m_eager, m_comp


def _classification(n, shape, classes, calls, seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((n,) + shape).astype(np.float32),
             rng.integers(0, classes, n)) for _ in range(calls)]


def test_mlp_step_replays_bit_identical():
    def make():
        return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 16), nn.Tanh(),
                             nn.Linear(16, 3))

    def make_fn(model):
        def step(g, xb, yb):
            loss = g.cross_entropy(model(g, g.constant(xb)), yb)
            g.backward(loss)
            return loss
        return step

    _compare_runs(make, make_fn, _classification(8, (6,), 3, 4))


def test_mlp_step_float64_with_two_outputs():
    def make():
        return nn.Sequential(nn.Linear(4, 8, dtype=np.float64), nn.GELU(),
                             nn.Linear(8, 1, dtype=np.float64))

    def make_fn(model):
        def step(g, xb, yb):
            pred = model(g, g.constant(xb))
            loss = g.mean((pred - g.constant(yb)) ** 2)
            g.backward(loss)
            return loss, pred
        return step

    rng = np.random.default_rng(1)
    batches = [(rng.standard_normal((5, 4)), rng.standard_normal((5, 1))) for _ in range(3)]
    _compare_runs(make, make_fn, batches, dtype=np.float64)


class _CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.drop = nn.Dropout(0.3)
        self.fc = nn.Linear(4, 5)

    def forward(self, g, x):
        h = g.relu(self.bn(g, self.conv(g, x)))
        d = self.drop(g, h)
        return self.fc(g, g.mean(d, axis=(1, 2))), d


@pytest.mark.parametrize("check", [False, True])
def test_cnn_with_batch_norm_and_dropout(check):
    """With check=True every call also runs eagerly from the same state
    (generator, grads, buffers) and finds no difference."""
    def make_fn(model):
        def step(g, xb, yb):
            logits, dropped = model(g, g.constant(xb))
            loss = g.cross_entropy(logits, yb)
            g.backward(loss)
            return loss, dropped        # the dropout output shows the mask
        return step

    batches = _classification(4, (6, 6, 3), 5, 3, seed=2)
    comp, m_eager, m_comp = _compare_runs(_CNN, make_fn, batches, check=check)
    assert int(m_comp.bn.num_batches_tracked) == 3
    _same(m_eager.bn.running_mean, m_comp.bn.running_mean)
    _same(m_eager.bn.running_var, m_comp.bn.running_var)
    # eval mode is another key: recorded again, and again equal to eager
    m_eager.eval()
    m_comp.eval()
    xb, yb = batches[0]
    _same(_eager(make_fn(m_eager))(xb, yb), comp(xb, yb))
    assert comp.recordings == 2
    _same(m_eager.bn.running_mean, m_comp.bn.running_mean)


def test_lstm_step():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(3, 5)
            self.head = nn.Linear(5, 2)

        def forward(self, g, x):
            out, (h, c) = self.lstm(g, x)
            return self.head(g, g.reshape(h, (-1, 5)))

    def make_fn(model):
        def step(g, xb, yb):
            loss = g.mse_loss(model(g, g.constant(xb)), g.constant(yb))
            g.backward(loss)
            return loss
        return step

    rng = np.random.default_rng(3)
    batches = [(rng.standard_normal((4, 2, 3)).astype(np.float32),
                rng.standard_normal((2, 2)).astype(np.float32)) for _ in range(3)]
    _compare_runs(Net, make_fn, batches)


def test_transformer_block():
    def make():
        return nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.1,
                                          batch_first=True)

    def make_fn(model):
        def step(g, xb):
            y = model(g, g.constant(xb))
            loss = g.mean(y * y)
            g.backward(loss)
            return loss, y
        return step

    rng = np.random.default_rng(4)
    batches = [(rng.standard_normal((2, 5, 8)).astype(np.float32),) for _ in range(3)]
    _compare_runs(make, make_fn, batches)


def _chain(g, x):
    w = g.variable(x)
    h = w
    for _ in range(50):
        h = g.tanh(h * 0.9 + 0.1)
    loss = g.sum(h)
    g.backward(loss)
    return loss, g.grad(w)


def test_scalar_chain_and_returned_grad():
    comp = yscv.compile(_chain)
    for v in (0.3, -1.2, 2.0):
        x = np.array(v, dtype=np.float32)
        _same(_eager(_chain)(x), comp(x))
    assert comp.recordings == 1


def test_new_shape_records_again_and_lru_bound():
    comp = yscv.compile(_chain, cache_size=2)
    shapes = [(2,), (3,), (2,), (4,), (3,)]
    for s in shapes:
        x = np.linspace(-1, 1, int(np.prod(s))).astype(np.float32).reshape(s)
        _same(_eager(_chain)(x), comp(x))
    # (2,) and (3,) recorded; (2,) hit; (4,) drops (3,), which then records again
    assert comp.recordings == 4
    assert len(comp.records) == 2


def test_static_argnums():
    def fn(g, x, n):
        h = g.variable(x)
        w = h
        for _ in range(n):
            h = g.sin(h)
        g.backward(g.sum(h))
        return h, g.grad(w)

    comp = yscv.compile(fn, static_argnums=(1,))
    x = np.array([0.5, 1.5], dtype=np.float32)
    for n in (1, 3, 1):
        _same(_eager(fn)(x, n), comp(x, n))
    assert comp.recordings == 2


def _branchy(g, x):
    v = g.variable(x)
    if g.value(v).sum() > 0:           # Python control flow on a value: frozen
        y = g.exp(v)
    else:
        y = g.neg(v)
    return g.sum(y)


def test_check_catches_a_value_dependent_branch():
    pos = np.array([1.0, 2.0], dtype=np.float32)
    neg = -pos
    plain = yscv.compile(_branchy)
    plain(pos)
    # without check the replay follows the recorded branch (trace semantics)
    assert plain(neg) == pytest.approx(np.exp(neg).sum())
    checked = yscv.compile(_branchy, check=True)
    checked(pos)
    _same(checked(pos), _eager(_branchy)(pos))
    with pytest.raises(CompileMismatchError) as info:
        checked(neg)
    assert info.value.node == 1 and "exp" in str(info.value)


def test_backward_with_workers_replays_serially():
    def make():
        return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))

    def make_fn(model):
        def step(g, xb, yb):
            loss = g.cross_entropy(model(g, g.constant(xb)), yb)
            g.backward(loss, workers=2)
            return loss
        return step

    _compare_runs(make, make_fn, _classification(6, (4,), 2, 3, seed=5))


@pytest.mark.parametrize("case", ["gradients", "hook", "derived", "returned",
                                  "opt_step", "zero_grad"])
def test_record_time_errors(case):
    model = nn.Linear(3, 1)
    opt = optim.SGD(model.parameters(), lr=0.1)

    def fn(g, x):
        c = g.constant(x * 2.0 if case == "derived" else x)
        loss = g.sum(model(g, c))
        if case == "hook":
            g.register_hook(loss, lambda gr: gr)
        if case == "zero_grad":
            opt.zero_grad()
        if case == "gradients":   # plain arrays out: they would be frozen
            g.gradients(loss, [c])
        g.backward(loss)
        if case == "opt_step":
            opt.step()
        return float(g.value(loss)) if case == "returned" else loss

    comp = yscv.compile(fn)
    with pytest.raises(CompileError):
        comp(np.ones((2, 3), dtype=np.float32))
    assert len(comp.records) == 0


def test_new_parameter_arrays_and_generator_draws_are_seen():
    """A Parameter whose .data is replaced between calls is read anew;
    randn_like leaves are drawn again in the eager order; a dict return."""
    p = nn.Parameter(np.array([0.5, -0.25], dtype=np.float32))

    def fn(g, x):
        w = g.param(p)
        noise = g.randn_like(w)
        h = g.dropout(g.constant(x) * w + noise, 0.5)
        loss = g.sum(h * h)
        g.backward(loss)
        return {"loss": loss, "noise": noise}

    comp = yscv.compile(fn)
    x = np.array([1.0, 2.0], dtype=np.float32)
    for k in range(3):
        p.data = p.data * 0.5 + k           # a new array each time
        yscv.manual_seed(k)
        p.grad = None
        want = _eager(fn)(x)
        want_grad = p.grad
        yscv.manual_seed(k)
        p.grad = None
        got = comp(x)
        assert sorted(got) == ["loss", "noise"]
        _same(np.asarray(want["loss"]), got["loss"])
        _same(np.asarray(want["noise"]), got["noise"])
        _same(want_grad, p.grad)
    assert comp.recordings == 1


def test_seed_from_an_input_and_released_values():
    """backward(grad=<an input array>, retain_graph=False), twice in one
    step: the seed is the new array on replay, leaf grads accumulate."""
    def fn(g, x, cot):
        w = g.variable(x)
        y = g.tanh(w * w)
        g.backward(y, grad=cot, retain_graph=False)
        g.backward(g.sum(g.exp(w)))
        return y, g.grad(w)

    comp = yscv.compile(fn)
    rng = np.random.default_rng(6)
    for _ in range(3):
        x = rng.standard_normal(4).astype(np.float32)
        cot = rng.standard_normal(4).astype(np.float32)
        _same(_eager(fn)(x, cot), comp(x, cot))
    assert comp.recordings == 1


def test_an_input_the_eager_step_rejects_is_rejected_on_replay():
    """Calls that take an input array run their validation again: a label
    out of range raises the eager IndexError."""
    model = nn.Linear(3, 2)

    def fn(g, x, y):
        loss = g.cross_entropy(model(g, g.constant(x)), y)
        g.backward(loss)
        return loss

    comp = yscv.compile(fn)
    x = np.ones((2, 3), dtype=np.float32)
    comp(x, np.array([0, 1]))
    with pytest.raises(IndexError):
        comp(x, np.array([0, 5]))


def test_a_static_array_is_keyed_by_its_bytes():
    def fn(g, x, mask):
        w = g.variable(x)
        g.backward(g.sum(g.mul(w, g.constant(mask))))
        return g.grad(w)

    comp = yscv.compile(fn, static_argnums=(1,))
    x = np.ones(3, dtype=np.float32)
    for m in ([1, 0, 1], [0, 1, 1], [1, 0, 1]):
        mask = np.array(m, dtype=np.float32)
        _same(_eager(fn)(x, mask), comp(x, mask))
    assert comp.recordings == 2


def test_a_module_with_forward_hooks_is_refused():
    model = nn.Linear(2, 1)
    model.register_forward_hook(lambda mod, g, args, out: None)

    def fn(g, x):
        return g.sum(model(g, g.constant(x)))

    with pytest.raises(CompileError, match="forward hooks"):
        yscv.compile(fn)(np.ones((1, 2), dtype=np.float32))


def _swish_rule(ns, g, xs, y, attrs, saved, needs):
    (x,) = xs
    s = ns.sigmoid(x)
    return (ns.mul(g, ns.add(s, ns.mul(x, ns.mul(s, ns.sub(1.0, s))))),)


_swish = yscv.custom_op("swish_compiled", lambda x: x / (1 + np.exp(-x)), _swish_rule)


def test_a_user_op_replays_and_its_raw_input_is_refused():
    def fn(g, x):
        w = g.variable(x)
        g.backward(g.sum(_swish(g, w)))
        return g.grad(w)

    comp = yscv.compile(fn)
    for v in ([0.5, -1.0], [2.0, 0.25]):
        x = np.array(v, dtype=np.float32)
        _same(_eager(fn)(x), comp(x))
    assert comp.recordings == 1

    def raw(g, x):
        return g.sum(_swish(g, x))

    with pytest.raises(CompileError, match="g.constant"):
        yscv.compile(raw)(np.ones(2, dtype=np.float32))
