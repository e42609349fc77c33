"""A finished graph is freed by reference counting alone (SPEC section 8).

Every test runs with the cycle collector disabled: a graph kept alive by a
reference cycle (Graph -> NodeId -> Graph) would then never be freed, and its
weak reference would stay alive.
"""
import gc
import weakref

import numpy as np
import pytest

import yscv
import yscv.nn as nn
import yscv.optim as optim
from yscv import Graph


@pytest.fixture
def no_gc():
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class _Net(nn.Module):
    """Every layer kind that binds state into the graph in its own way."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)                      # buffers bound as view leaves
        self.emb = nn.Embedding(10, 8, padding_idx=0)    # registers a gradient hook
        self.lin = nn.Linear(8, 8)
        self.ln = nn.LayerNorm(8)
        self.drop = nn.Dropout(0.25)
        self.mha = nn.MultiHeadAttention(8, 2)
        self.lstm = nn.LSTM(8, 8)
        self.frozen = nn.Linear(8, 8)
        self.frozen.weight.requires_grad = False         # bound like a buffer

    def forward(self, g, img, tokens):
        a = g.mean(self.bn(g, self.conv(g, img)))
        t = self.drop(g, self.ln(g, self.lin(g, self.emb(g, tokens))))
        t = self.mha(g, t)
        t = g.checkpoint(lambda g, h: g.tanh(self.frozen(g, h)), t)
        out = self.lstm(g, t)[0]
        return a + g.mean(out * out)


def _batch(rng):
    return rng.standard_normal((2, 5, 5, 3)), rng.integers(0, 10, size=(2, 4))


def _train_step(net, opt, rng, extra=None):
    g = Graph()
    img, tokens = _batch(rng)
    loss = net(g, g.constant(img), tokens)
    if extra is not None:
        extra(g, loss)
    g.backward(loss)
    g.clip_grad_norm([g.param(p) for p in net.parameters() if p.requires_grad], 1.0)
    opt.step()
    opt.zero_grad()
    return weakref.ref(g), float(g.value(loss))


def test_graph_built_through_layers_is_freed_without_the_cycle_collector(no_gc):
    yscv.manual_seed(0)
    net = _Net()
    net.train()
    opt = optim.Adam(net.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    calls = []

    def extra(g, loss):
        # engine features a user or a wrapper reaches for, none of which may cycle
        g.register_backward_end_hook(lambda graph: calls.append(len(graph)))
        g.register_hook(loss, lambda grad: None)
        g.retain_grad(loss)
        g.gradients(loss, [g.param(net.lin.weight)])
        g.register_post_accumulate_hook(g.param(net.lin.bias), lambda graph, leaf: None)

    ref, value = _train_step(net, opt, rng, extra)
    assert np.isfinite(value) and len(calls) == 1
    assert ref() is None, "the graph is still alive: a reference cycle holds it"


def test_user_reference_keeps_the_graph_until_it_goes(no_gc):
    yscv.manual_seed(1)
    lin = nn.Linear(4, 2)
    g = Graph()
    loss = g.sum(lin(g, g.constant(np.ones((3, 4)))))
    g.backward(loss)
    ref = weakref.ref(g)
    del g
    assert ref() is not None  # the NodeId `loss` holds its graph
    assert loss.shape == ()
    del loss
    assert ref() is None


def test_fresh_graph_per_step_keeps_a_bounded_number_of_graphs_alive(no_gc):
    yscv.manual_seed(2)
    net = _Net()
    opt = optim.SGD(net.parameters(), lr=1e-2)
    rng = np.random.default_rng(1)
    refs = []
    for _ in range(6):
        ref, _ = _train_step(net, opt, rng)
        refs.append(ref)
        assert sum(r() is not None for r in refs) == 0
        assert sum(type(o) is Graph for o in gc.get_objects()) == 0


def test_fit_with_a_fresh_graph_per_step_keeps_no_dead_graphs(no_gc):
    yscv.manual_seed(3)
    model = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Dropout(0.1),
                          nn.Linear(8, 3))
    opt = optim.SGD(model.parameters(), lr=0.1)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((40, 6)).astype(np.float32)
    y = rng.integers(0, 3, size=40)
    alive = []

    class Count(yscv.train.Callback):
        def on_step_end(self, trainer, step, logs):
            alive.append(sum(type(o) is Graph for o in gc.get_objects()))

    trainer = yscv.train.Trainer(model, "cross_entropy", opt, metrics=(), callbacks=[Count()],
                                 progress=False, reuse_graph=False, grad_clip_norm=1.0)
    trainer.fit((x, y), epochs=2, batch_size=8)
    assert len(alive) == 10
    # the fit loop holds its unused reuse-graph plus at most the current step's graph
    assert max(alive) <= 2
