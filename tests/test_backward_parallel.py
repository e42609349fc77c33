"""Parallel backward (SPEC §2): bit-identical to the serial walk, hooks once,
errors in walk order, no thread left behind."""
import threading
import time

import numpy as np
import pytest

import yscv
from yscv.engine import walk_parallel


def _rng(seed=0):
    return np.random.default_rng(seed)


def _towers(g, dtype, rng, *, checkpointed=False, shared=None):
    """A branchy graph: BLAS, region kernels (layer/batch norm, LSTM),
    conv/pool, attention; branches share leaves; summed at the end."""
    x = g.constant(rng.standard_normal((16, 32)))
    w_shared = g.variable(rng.standard_normal((32, 32)) * 0.2) if shared is None else shared
    leaves = {"w_shared": w_shared}
    outs = []
    for k in range(3):  # linear + tanh towers sharing one weight
        w = g.variable(rng.standard_normal((32, 32)) * 0.2)
        leaves[f"w{k}"] = w
        def tower(g, h, w=w):
            h = g.tanh(g.matmul(h, w_shared))
            return g.tanh(g.matmul(h, w))
        h = g.checkpoint(tower, x) if checkpointed and k == 1 else tower(g, x)
        outs.append(g.mean(h * h))
    # layer norm on a region-sized input
    xl = g.variable(rng.standard_normal((512, 64)))
    gam = g.variable(rng.standard_normal(64))
    leaves["xl"], leaves["gam"] = xl, gam
    outs.append(g.mean(g.layer_norm(xl, gam, None) ** 2))
    # batch norm with batch statistics
    xb = g.variable(rng.standard_normal((8, 8, 8, 16)))
    gb = g.variable(np.ones(16))
    bb = g.variable(np.zeros(16))
    leaves["xb"] = xb
    outs.append(g.mean(g.relu(g.batch_norm(xb, gb, bb, g.constant(np.zeros(16)),
                                           g.constant(np.ones(16)), training=True))))
    # conv + pool
    xc = g.variable(rng.standard_normal((2, 12, 12, 4)))
    wc = g.variable(rng.standard_normal((3, 3, 4, 8)) * 0.3)
    leaves["xc"], leaves["wc"] = xc, wc
    outs.append(g.mean(g.max_pool2d(g.relu(g.conv2d(xc, wc, padding=1)), 2)))
    # LSTM
    xs = g.variable(rng.standard_normal((6, 4, 8)))
    wih = g.variable(rng.standard_normal((8, 64)) * 0.3)
    whh = g.variable(rng.standard_normal((16, 64)) * 0.3)
    b = g.variable(np.zeros(64))
    leaves["wih"] = wih
    outs.append(g.mean(g.lstm(xs, wih, whh, b)))
    # attention, using a shared leaf as the query input
    q = g.matmul(g.reshape(x, (2, 8, 32)), w_shared)
    kv = g.variable(rng.standard_normal((2, 8, 32)))
    leaves["kv"] = kv
    outs.append(g.mean(g.scaled_dot_product_attention(q, kv, kv, causal=True)))
    total = outs[0]
    for o in outs[1:]:
        total = total + o
    return total, leaves


def _grads(workers, dtype, *, seed_grad=False, checkpointed=False, retain=True):
    g = yscv.Graph(dtype)
    total, leaves = _towers(g, dtype, _rng(1), checkpointed=checkpointed)
    if seed_grad:
        total = g.stack([total, total * 2.0], 0)
        g.backward(total, grad=np.array([0.5, -1.5]), workers=workers, retain_graph=retain)
    else:
        g.backward(total, workers=workers, retain_graph=retain)
    return {k: g.grad(n).copy() for k, n in leaves.items()}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kw", [{}, {"seed_grad": True}, {"checkpointed": True},
                                {"retain": False}])
def test_bit_identical_to_serial(dtype, kw):
    ref = _grads(1, dtype, **kw)
    for workers in (2, 4, None):
        for _ in range(5):
            got = _grads(workers, dtype, **kw)
            for k in ref:
                assert got[k].dtype == ref[k].dtype
                assert np.array_equal(got[k], ref[k]), (workers, k)


def _backward_threads():
    return [t for t in threading.enumerate() if t.name == "yscv-backward"]


def _note_thread_and_sleep(names):
    def hook(grad):
        names.add(threading.current_thread().name)
        time.sleep(0.005)
    return hook


def test_threads_really_run_in_parallel_and_none_is_left():
    names = set()
    g = yscv.Graph()
    rng = _rng(2)
    x = g.constant(rng.standard_normal((64, 256)))
    outs = []
    for _ in range(8):
        h = x
        for _ in range(2):
            w = g.variable(rng.standard_normal((256, 256)) * 0.05)
            h = g.tanh(g.matmul(h, w))
        h = g.mean(h)
        # a hook that sleeps (releasing the GIL) keeps one thread busy while
        # the other branches are ready: the helper must take some of them
        g.register_hook(h, _note_thread_and_sleep(names))
        outs.append(h)
    total = outs[0]
    for o in outs[1:]:
        total = total + o
    g.backward(total, workers=2)
    assert "yscv-backward" in names  # a helper thread ran some branch
    assert _backward_threads() == []


def test_hooks_run_once_on_the_complete_gradient():
    for workers in (1, 2, 4):
        g = yscv.Graph(np.float64)
        x = g.variable(np.arange(6.0).reshape(2, 3))
        h = g.tanh(x)
        seen = []
        g.register_hook(h, lambda gr: seen.append(gr.copy()))
        branches = [g.sum(h * float(k + 1)) for k in range(4)]
        total = branches[0] + branches[1] + branches[2] + branches[3]
        g.backward(total, workers=workers)
        assert len(seen) == 1
        np.testing.assert_array_equal(seen[0], np.full((2, 3), 10.0))


def test_post_accumulate_hooks_and_params_as_serial():
    def run(workers):
        p = yscv.nn.Parameter(np.ones((3, 3), np.float32))
        order = []
        g = yscv.Graph()
        w = g.param(p)
        v = g.variable(np.full((3, 3), 2.0))
        g.register_post_accumulate_hook(w, lambda gg, n: order.append("w"))
        g.register_post_accumulate_hook(v, lambda gg, n: order.append("v"))
        a = g.sum(g.tanh(w) * v)
        b = g.sum(g.sigmoid(v) * w)
        g.backward(a + b, workers=workers)
        return p.grad.copy(), g.grad(v).copy(), order

    pg1, vg1, o1 = run(1)
    for w in (2, 4):
        pg, vg, o = run(w)
        assert np.array_equal(pg, pg1) and np.array_equal(vg, vg1) and o == o1


def test_error_in_a_branch_propagates_no_thread_left_library_usable():
    g = yscv.Graph()
    rng = _rng(3)
    x = g.constant(rng.standard_normal((32, 64)))
    ws = [g.variable(rng.standard_normal((64, 64))) for _ in range(6)]
    hs = [g.mean(g.tanh(g.matmul(x, w))) for w in ws]

    def boom(gr):
        raise RuntimeError("hook failed")

    g.register_hook(hs[3], boom)
    total = hs[0]
    for h in hs[1:]:
        total = total + h
    with pytest.raises(RuntimeError, match="hook failed"):
        g.backward(total, workers=2)
    assert _backward_threads() == []
    # as after a failed serial backward: no leaf got a gradient (leaves are
    # below every failing node in walk order)
    g2 = yscv.Graph()
    assert all(g.grad(w) is None for w in ws)
    # the library stays usable
    y = g2.variable(np.ones(3))
    g2.backward(g2.sum(y * y), workers=2)
    np.testing.assert_array_equal(g2.grad(y), np.full(3, 2.0, np.float32))


def test_anomaly_names_the_same_node_as_serial():
    def run(workers):
        g = yscv.Graph(np.float64, detect_anomaly=True)
        a = g.variable(np.array([0.0, 1.0]))
        b = g.variable(np.array([4.0, 9.0]))
        # two branches whose backward produces inf: sqrt at 0 and log at 0
        l1 = g.sum(g.sqrt(a))
        l2 = g.sum(g.sqrt(b - 4.0 + a * 0.0 + 0.0))
        with pytest.raises(yscv.AnomalyError) as e:
            g.backward(l1 + l2, workers=workers)
        return e.value.node

    ref = run(1)
    for _ in range(10):
        assert run(2) == ref and run(4) == ref


def test_checkpointed_branch_replays_on_other_threads():
    def run(workers):
        g = yscv.Graph(np.float64)
        rng = _rng(5)
        x = g.variable(rng.standard_normal((16, 16)))
        outs = []
        for k in range(4):
            w = g.constant(rng.standard_normal((16, 16)))
            outs.append(g.checkpoint(lambda g, h, w=w: g.sum(g.tanh(g.matmul(h, w))), x))
        g.backward(outs[0] + outs[1] + outs[2] + outs[3], workers=workers)
        return g.grad(x).copy()

    ref = run(1)
    for _ in range(5):
        assert np.array_equal(run(2), ref)


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True])
def test_bad_workers_raise_before_anything(bad):
    g = yscv.Graph()
    x = g.variable(np.ones(3))
    y = g.sum(x * x)
    n = len(g)
    with pytest.raises(ValueError, match="workers"):
        g.backward(y, workers=bad)
    assert len(g) == n and g.grad(x) is None


def test_workers_none_is_serial_for_chains_and_small_graphs():
    g = yscv.Graph()
    h = g.variable(np.ones((64, 64)))
    for _ in range(10):
        h = g.tanh(g.matmul(h, g.variable(np.eye(64))))
    t = g._index(g.sum(h))
    assert walk_parallel.choose_workers(g, t) == 1      # a chain
    g2 = yscv.Graph()
    a = g2.variable(np.ones(3))
    small = g2.sum(g2.tanh(a)) + g2.sum(g2.exp(a))
    assert walk_parallel.choose_workers(g2, g2._index(small)) == 1  # tiny


def test_leaf_target_and_workers_on_a_leaf():
    g = yscv.Graph()
    x = g.variable(np.array([3.0]))
    g.backward(x, workers=2)
    np.testing.assert_array_equal(g.grad(x), np.array([1.0], np.float32))


def test_region_kernels_and_gemm_from_two_threads_under_load():
    """Two threads running region kernels (layer norm, batch norm, LSTM) and
    the GEMM dispatch at once get the bits of a lone run, call after call."""
    rng = _rng(7)
    xs = rng.standard_normal((1024, 128)).astype(np.float32)
    ws = rng.standard_normal((128, 256)).astype(np.float32)
    xb = rng.standard_normal((8, 16, 16, 32)).astype(np.float32)
    seq = rng.standard_normal((8, 8, 16)).astype(np.float32)
    wih = rng.standard_normal((16, 128)).astype(np.float32) * 0.3
    whh = rng.standard_normal((32, 128)).astype(np.float32) * 0.3

    def once():
        g = yscv.Graph()
        x = g.variable(xs)
        w = g.variable(ws)
        b = g.variable(xb)
        s = g.variable(seq)
        y = g.layer_norm(g.matmul(x, w))
        z = g.batch_norm(b, g.constant(np.ones(32)), g.constant(np.zeros(32)),
                         g.constant(np.zeros(32)), g.constant(np.ones(32)), training=True)
        h = g.lstm(s, g.constant(wih), g.constant(whh), g.constant(np.zeros(128)))
        loss = g.mean(y * y) + g.mean(z * z) + g.mean(h)
        g.backward(loss)
        return [g.grad(n).copy() for n in (x, w, b, s)]

    ref = once()
    bad = []

    def worker():
        for _ in range(15):
            got = once()
            if not all(np.array_equal(a, r) for a, r in zip(got, ref)):
                bad.append(1)

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad


def test_graph_freed_after_parallel_backward_without_the_cycle_collector():
    import gc
    import weakref

    gc.disable()
    try:
        g = yscv.Graph()
        x = g.variable(np.ones((8, 8)))
        y = g.sum(g.tanh(x)) + g.sum(g.exp(x))
        g.backward(y, workers=2)
        ref = weakref.ref(g)
        del g, x, y
        assert ref() is None
    finally:
        gc.enable()


def _towers_bench_graph(seed=0):
    """benches/bench_backward_parallel.py's towers graph: 8 branches of
    3 x (linear 256 + tanh) at batch 64, 4 of conv3x3 16->16 + relu."""
    rng = np.random.default_rng(seed)
    g = yscv.Graph()
    x = g.constant(rng.standard_normal((64, 256)).astype(np.float32))
    xc = g.constant(rng.standard_normal((8, 16, 16, 16)).astype(np.float32))
    outs, leaves = [], []
    for _ in range(8):
        h = x
        for _ in range(3):
            w = g.variable(rng.standard_normal((256, 256)).astype(np.float32) / 16.0)
            b = g.variable(np.zeros(256, np.float32))
            leaves += [w, b]
            h = g.tanh(g.matmul(h, w) + b)
        outs.append(g.mean(h))
    for _ in range(4):
        w = g.variable(rng.standard_normal((3, 3, 16, 16)).astype(np.float32) * 0.1)
        b = g.variable(np.zeros(16, np.float32))
        leaves += [w, b]
        outs.append(g.mean(g.relu(g.conv2d(xc, w, b, padding=1))))
    total = outs[0]
    for o in outs[1:]:
        total = total + o
    return g, total, leaves


class _FakeClock:
    """``walk_parallel._clock`` for a trial: each timed run of the serial
    walk lasts ``serial`` seconds, of the parallel walk ``parallel``."""

    def __init__(self, monkeypatch, serial, parallel):
        self.serial, self.parallel = serial, parallel
        self.now = 0.0
        self.calls = 0
        self.ran_parallel = False
        self.modes = []
        real = walk_parallel._parallel_walk

        def parallel_walk(*args):
            self.ran_parallel = True
            return real(*args)

        monkeypatch.setattr(walk_parallel, "_parallel_walk", parallel_walk)
        monkeypatch.setattr(walk_parallel, "_clock", self)

    def __call__(self):
        self.calls += 1
        if self.calls % 2 == 0:   # the end of a run
            self.now += self.parallel if self.ran_parallel else self.serial
            self.modes.append("P" if self.ran_parallel else "S")
        self.ran_parallel = False
        return self.now


@pytest.fixture
def fresh_auto_choice():
    walk_parallel.reset_auto_choice()
    yield
    walk_parallel.reset_auto_choice()


def _backward_grads(g, total, leaves, workers):
    g.zero_grads()
    g.backward(total, workers=workers)
    return [g.grad(n) for n in leaves]


def _branchy_big(n=512):
    """Elementwise branches on 512 x 1024: past AUTO_MIN_ELEMENTS, cheap."""
    g = yscv.Graph()
    x = g.variable(np.linspace(-1.0, 1.0, n * 1024).reshape(n, 1024))
    return g, g.sum(g.tanh(x)) + g.sum(g.exp(x)) + g.sum(g.sigmoid(x)), [x]


def test_decide_keeps_serial_unless_parallel_clearly_wins():
    decide = walk_parallel.decide
    assert decide([4.5e-3], [2.0e-3]) is None           # one pair: measure on
    assert decide([4.5e-3] * 2, [2.0e-3] * 2) is None
    # the towers graph on a 2-vCPU EPYC, idle: parallel 1.6x the serial time
    assert decide([4.5e-3] * 3, [7.2e-3] * 3) is False
    assert decide([1.0, 1.0, 1.0], [0.95, 0.92, 0.97]) is False   # within the margin
    assert decide([1.0, 1.1, 1.0], [0.7, 0.72, 0.75]) is True      # 1.39x: parallel
    # medians: one run disturbed by the machine's load does not decide
    assert decide([1.0, 5.0, 1.0], [1.2, 1.1, 1.3]) is False
    assert decide([1.0, 1.0, 1.0], [0.7, 6.0, 0.7]) is True


def test_workers_none_on_the_towers_graph_measures_and_stays_serial(
        monkeypatch, fresh_auto_choice):
    """The towers graph's measured times on a 2-vCPU EPYC (serial 4.5 ms,
    parallel 7.2 ms): workers=None runs the parallel walk four times (a
    warm-up and three timed pairs), then serial for good; every run gives
    the bits of workers=1."""
    monkeypatch.setattr(walk_parallel, "_cores", lambda: 2)
    clock = _FakeClock(monkeypatch, serial=4.5e-3, parallel=7.2e-3)
    g, total, leaves = _towers_bench_graph()   # one graph, back-propagated again and again
    ref = _backward_grads(g, total, leaves, 1)
    for _ in range(2 * (1 + walk_parallel.AUTO_TRIAL_PAIRS) + 1):
        got = _backward_grads(g, total, leaves, None)
        assert all(np.array_equal(a, b) for a, b in zip(got, ref))
    assert clock.modes == ["S", "P"] * (1 + walk_parallel.AUTO_TRIAL_PAIRS)
    assert walk_parallel.choose_workers(g, g._index(total)) == 1
    assert walk_parallel._local.trial is None      # no note left: a plain serial walk
    # a new towers graph (the next step of a training loop) is serial at once
    g2, total2, _ = _towers_bench_graph(seed=1)
    assert walk_parallel.choose_workers(g2, g2._index(total2)) == 1


def test_workers_none_takes_threads_where_they_pay(monkeypatch, fresh_auto_choice):
    monkeypatch.setattr(walk_parallel, "_cores", lambda: 2)
    clock = _FakeClock(monkeypatch, serial=10e-3, parallel=6e-3)
    g, total, leaves = _branchy_big()
    ref = _backward_grads(g, total, leaves, 1)
    for _ in range(2 * (1 + walk_parallel.AUTO_TRIAL_PAIRS) + 1):
        got = _backward_grads(g, total, leaves, None)
        assert all(np.array_equal(a, b) for a, b in zip(got, ref))
    assert clock.modes == ["S", "P"] * (1 + walk_parallel.AUTO_TRIAL_PAIRS)
    assert walk_parallel.choose_workers(g, g._index(total)) == 2
    walk_parallel._local.trial = None
    # the choice is the shape's: a new graph of the same shape gets it at once
    g2, total2, _ = _branchy_big()
    assert walk_parallel.choose_workers(g2, g2._index(total2)) == 2
    walk_parallel._local.trial = None
    # AUTO_RECHECK_SECONDS later the machine is busier and the threads no
    # longer pay: timed pairs (no warm-ups) and the shape turns serial
    later = walk_parallel._now() + walk_parallel.AUTO_RECHECK_SECONDS + 1.0
    monkeypatch.setattr(walk_parallel, "_now", lambda: later)
    clock.modes.clear()
    clock.parallel = 15e-3
    for _ in range(2 * walk_parallel.AUTO_TRIAL_PAIRS + 1):
        got = _backward_grads(g, total, leaves, None)
        assert all(np.array_equal(a, b) for a, b in zip(got, ref))
    assert clock.modes == ["S", "P"] * walk_parallel.AUTO_TRIAL_PAIRS
    assert walk_parallel.choose_workers(g, g._index(total)) == 1
    # one usable core: serial whatever was measured
    monkeypatch.setattr(walk_parallel, "_cores", lambda: 1)
    walk_parallel.reset_auto_choice()
    assert walk_parallel.choose_workers(g2, g2._index(total2)) == 1


def test_workers_none_chains_and_small_graphs_plan_once(monkeypatch, fresh_auto_choice):
    monkeypatch.setattr(walk_parallel, "_cores", lambda: 2)
    plans = []
    real_plan = walk_parallel._Plan

    def counting_plan(graph, t):
        plans.append(t)
        return real_plan(graph, t)

    monkeypatch.setattr(walk_parallel, "_Plan", counting_plan)

    def chain():
        g = yscv.Graph()
        h = g.variable(np.ones((64, 64)))
        for _ in range(10):
            h = g.tanh(g.matmul(h, g.variable(np.eye(64))))
        return g, g.sum(h)

    for _ in range(5):   # a training loop: a new graph of the same shape each step
        g, loss = chain()
        g.backward(loss, workers=None)
    assert len(plans) == 1   # serial from the first look, without a plan after it
    g, loss = chain()
    assert walk_parallel.choose_workers(g, g._index(loss)) == 1


def test_workers_none_with_a_colliding_shape_falls_back_to_serial(
        monkeypatch, fresh_auto_choice):
    """Two graphs with the same node count, target index and dtype but other
    sizes share a key: the second one stays serial (the safe side)."""
    monkeypatch.setattr(walk_parallel, "_cores", lambda: 2)

    g, total, _ = _branchy_big(512)
    assert walk_parallel.choose_workers(g, g._index(total)) == 2   # a trial run
    walk_parallel._local.trial = None
    g2, total2, _ = _branchy_big(1100)
    assert walk_parallel.choose_workers(g2, g2._index(total2)) == 1
    assert walk_parallel.choose_workers(g, g._index(total)) == 1
