"""Activation checkpointing (SPEC section 5): bit-exact gradients, released
memory, recompute on read, nesting, seed-compatible configs, errors."""
import numpy as np
import pytest

import yscv
from yscv import CheckpointConfig, CheckpointSegment, Graph

F64 = np.float64


def _layers(rng, n, d):
    return [(rng.standard_normal((d, d)) / np.sqrt(d), rng.standard_normal(d) * 0.1) for _ in range(n)]


def _mlp_chain(g, h, params, lo, hi):
    for w, b in params[lo:hi]:
        h = g.tanh(g.matmul(h, w) + b)
    return h


def _chain_setup(seed, n, d, batch):
    """A float64 graph with input leaf x and n (w, b) layer leaves."""
    rng = np.random.default_rng(seed)
    raw = _layers(rng, n, d)
    x0 = rng.standard_normal((batch, d))
    g = Graph(F64)
    x = g.variable(x0)
    params = [(g.variable(w), g.variable(b)) for w, b in raw]
    return g, x0, raw, x, params


def _checkpointed_segments(g, h, params, n, segments):
    """h through the chain split into ``segments`` checkpointed segments;
    returns the output and each segment's output."""
    mids = []
    bounds = np.linspace(0, n, segments + 1).astype(int)
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        h = g.checkpoint(lambda g, h, lo=lo, hi=hi: _mlp_chain(g, h, params, lo, hi), h)
        mids.append(h)
    return h, mids


def _run_chain(segments, n=12, d=6, batch=5, retain_graph=True):
    """Gradients of sum(chain(x)) with the chain split into checkpointed segments."""
    g, _, _, x, params = _chain_setup(0, n, d, batch)
    if segments:
        h, _ = _checkpointed_segments(g, x, params, n, segments)
    else:
        h = _mlp_chain(g, x, params, 0, n)
    loss = g.sum(h * h)
    held = g.memory()["values"]
    g.backward(loss, retain_graph=retain_graph)
    grads = [g.grad(x)] + [g.grad(p) for pair in params for p in pair]
    return g, loss, grads, held


def _assert_bit_equal(a, b):
    assert len(a) == len(b)
    for u, v in zip(a, b):
        assert u.dtype == v.dtype and u.shape == v.shape
        np.testing.assert_array_equal(u, v)


def test_chain_gradients_bit_identical_and_memory_released():
    _, _, plain, held_plain = _run_chain(0)
    _, _, ckpt, held_ckpt = _run_chain(4)
    _assert_bit_equal(plain, ckpt)
    assert held_ckpt < 0.6 * held_plain


def test_segments_are_released_again_after_backward():
    g, _, _, held = _run_chain(4)
    assert g.memory()["values"] == held


def test_residual_blocks():
    rng = np.random.default_rng(1)
    raw = _layers(rng, 4, 5)
    x0 = rng.standard_normal((3, 5))

    def run(ck):
        g = Graph(F64)
        x = g.variable(x0)
        ps = [(g.variable(w), g.variable(b)) for w, b in raw]
        h = x
        for k in range(0, 4, 2):
            block = lambda g, h, k=k: h + _mlp_chain(g, h, ps, k, k + 2)  # noqa: E731
            h = g.checkpoint(block, h) if ck else block(g, h)
        g.backward(g.sum(h * h))
        return [g.grad(x)] + [g.grad(p) for pr in ps for p in pr]

    _assert_bit_equal(run(False), run(True))


def test_dropout_replays_the_same_mask():
    rng = np.random.default_rng(2)
    x0 = rng.standard_normal((4, 8))
    w0 = rng.standard_normal((8, 8))

    def run(ck):
        yscv.manual_seed(123)
        g = Graph(F64)
        x, w = g.variable(x0), g.variable(w0)
        body = lambda g, h: g.dropout(g.tanh(g.matmul(h, w)), 0.5)  # noqa: E731
        h = g.checkpoint(body, x) if ck else body(g, x)
        g.backward(g.sum(h * h))
        return [g.grad(x), g.grad(w), np.array(g.value(h))]

    _assert_bit_equal(run(False), run(True))


def test_batch_norm_gradients_and_running_buffers_match():
    rng = np.random.default_rng(3)
    x0 = rng.standard_normal((6, 4))
    w0 = rng.standard_normal((4, 4))

    def run(ck):
        g = Graph(F64)
        x, w = g.variable(x0), g.variable(w0)
        gamma, beta = g.variable(np.ones(4)), g.variable(np.zeros(4))
        rm, rv = g.constant(np.zeros(4)), g.constant(np.ones(4))

        def body(g, h):
            return g.tanh(g.batch_norm(g.matmul(h, w), gamma, beta, rm, rv, training=True))

        h = g.checkpoint(body, x) if ck else body(g, x)
        g.backward(g.sum(h * h))
        return [g.grad(x), g.grad(w), g.grad(gamma), g.grad(beta),
                np.array(g.value(rm)), np.array(g.value(rv))]

    plain, ckpt = run(False), run(True)
    _assert_bit_equal(plain, ckpt)
    assert not np.allclose(plain[4], 0.0)  # the running mean did move, exactly once


def test_attention_and_lstm_segments():
    rng = np.random.default_rng(4)
    q0, k0, v0 = (rng.standard_normal((2, 3, 4)) for _ in range(3))
    xs = rng.standard_normal((3, 2, 4))
    wih, whh, b = rng.standard_normal((4, 12)), rng.standard_normal((3, 12)), rng.standard_normal(12)

    def run(ck):
        g = Graph(F64)
        q, k, v = g.variable(q0), g.variable(k0), g.variable(v0)
        x = g.variable(xs)
        ps = [g.variable(a) for a in (wih, whh, b)]
        attn = lambda g, q, k, v: g.scaled_dot_product_attention(q, k, v, causal=True)  # noqa: E731
        rec = lambda g, x: g.tanh(g.lstm(x, *ps))  # noqa: E731
        a = g.checkpoint(attn, q, k, v) if ck else attn(g, q, k, v)
        r = g.checkpoint(rec, x) if ck else rec(g, x)
        g.backward(g.sum(a * a) + g.sum(r * r))
        return [g.grad(n) for n in (q, k, v, x, *ps)]

    _assert_bit_equal(run(False), run(True))


def test_nested_checkpoints():
    rng = np.random.default_rng(5)
    raw = _layers(rng, 6, 4)
    x0 = rng.standard_normal((2, 4))

    def run(ck):
        g = Graph(F64)
        x = g.variable(x0)
        ps = [(g.variable(w), g.variable(b)) for w, b in raw]

        def inner(g, h):
            return _mlp_chain(g, h, ps, 2, 4)

        def outer(g, h):
            h = _mlp_chain(g, h, ps, 0, 2)
            h = g.checkpoint(inner, h) if ck else inner(g, h)
            return _mlp_chain(g, h, ps, 4, 6)

        h = g.checkpoint(outer, x) if ck else outer(g, x)
        g.backward(g.sum(h))
        return [g.grad(x)] + [g.grad(p) for pr in ps for p in pr]

    _assert_bit_equal(run(False), run(True))


def test_parameters_inside_a_segment_get_gradients_with_constant_input():
    g = Graph(F64)
    x = g.constant(np.ones((2, 3)))
    w = g.variable(np.full((3, 3), 0.5))
    h = g.checkpoint(lambda g, h: g.tanh(g.matmul(h, w)), x)
    g.backward(g.sum(h))
    assert g.grad(w) is not None
    np.testing.assert_allclose(g.grad(w), 2 * (1 - np.tanh(1.5) ** 2) * np.ones((3, 3)))


def test_reading_a_released_value_recomputes_it():
    rng = np.random.default_rng(6)
    x0, w0 = rng.standard_normal((3, 4)), rng.standard_normal((4, 4))
    g = Graph(F64)
    x, w = g.variable(x0), g.variable(w0)
    inner = []

    def body(g, h):
        a = g.matmul(h, w)
        inner.append(a)
        return g.tanh(a)

    out = g.checkpoint(body, x)
    held = g.memory()["values"]
    np.testing.assert_array_equal(g.value(inner[0]), x0 @ w0)
    assert g.memory()["values"] == held  # read did not keep the recomputed value
    np.testing.assert_array_equal(g.value(out), np.tanh(x0 @ w0))
    assert "released" in g.summary()
    # a released node used as an input to a later op is recomputed too
    z = g.add(inner[0], 1.0)
    np.testing.assert_array_equal(g.value(z), x0 @ w0 + 1.0)


def test_recompute_with_a_different_shape_raises():
    g = Graph(F64)
    x = g.variable(np.ones((2, 3)))
    inner = []

    def body(g, h):
        inner.append(g.sum(h, axis=0))
        return g.sum(inner[0])

    g.checkpoint(body, x)
    g._values[x.index] = np.ones((3, 2))  # simulate a leaf swapped behind the graph's back
    with pytest.raises(yscv.CheckpointError, match="shape"):
        g.value(inner[0])


def test_checkpoint_fn_errors_leave_graph_unchanged():
    g = Graph()
    x = g.variable(np.ones(3))
    with pytest.raises(TypeError, match="checkpoint"):
        g.checkpoint(lambda g, h: g.value(h * 2.0), x)
    assert len(g) == 1
    with pytest.raises(yscv.ShapeError):
        g.checkpoint(lambda g, h: g.add(h * 2.0, np.ones(4)), x)
    assert len(g) == 1
    with pytest.raises(TypeError, match="callable"):
        g.checkpoint(3, x)


def test_checkpoint_sequential_matches_plain():
    rng = np.random.default_rng(7)
    raw = _layers(rng, 6, 4)
    x0 = rng.standard_normal((2, 4))

    def run(ck):
        g = Graph(F64)
        x = g.variable(x0)
        ps = [(g.variable(w), g.variable(b)) for w, b in raw]
        fns = [lambda g, h, k=k: _mlp_chain(g, h, ps, k, k + 1) for k in range(6)]
        if ck:
            h = g.checkpoint_sequential(fns, 3, x)
        else:
            h = x
            for f in fns:
                h = f(g, h)
        g.backward(g.sum(h))
        return [g.grad(x)] + [g.grad(p) for pr in ps for p in pr]

    _assert_bit_equal(run(False), run(True))
    with pytest.raises(ValueError):
        Graph().checkpoint_sequential([], 2, None)


def test_checkpoint_config_uniform_and_backward_with_checkpoints():
    cfg = CheckpointConfig.uniform(10, 3)
    assert cfg.segments == [CheckpointSegment(0, 2), CheckpointSegment(3, 5), CheckpointSegment(6, 9)]
    with pytest.raises(ValueError):
        CheckpointSegment(4, 2)
    with pytest.raises(ValueError):
        CheckpointConfig.uniform(10, 0)

    _, _, plain, _ = _run_chain(0)
    rng = np.random.default_rng(0)
    raw = _layers(rng, 12, 6)
    x0 = rng.standard_normal((5, 6))
    g = Graph(F64)
    x = g.variable(x0)
    params = [(g.variable(w), g.variable(b)) for w, b in raw]
    h = _mlp_chain(g, x, params, 0, 12)
    mid = g.inputs(h)[0]
    mid_value = np.array(g.value(mid))
    loss = g.sum(h * h)
    before = g.memory()["values"]
    g.backward_with_checkpoints(loss, CheckpointConfig.uniform(len(g), 4))
    _assert_bit_equal(plain, [g.grad(x)] + [g.grad(p) for pr in params for p in pr])
    assert g.memory()["values"] < before
    np.testing.assert_array_equal(g.value(mid), mid_value)
    with pytest.raises(ValueError):
        g.backward_with_checkpoints(loss, CheckpointConfig([CheckpointSegment(0, len(g))]))


def test_retain_graph_false_releases_and_second_backward_still_exact():
    g, loss, first, held = _run_chain(0, retain_graph=False)
    first = [a.copy() for a in first]
    assert g.memory()["values"] < 0.5 * held
    g.zero_grads()
    g.backward(loss)
    _assert_bit_equal(first, [g.grad(n) for n in _leaf_ids(g)])


def _leaf_ids(g):
    return [g._node_id(i) for i in range(len(g)) if g.op(g._node_id(i)) is yscv.Op.LEAF
            and g.requires_grad(g._node_id(i))]


def test_non_leaf_gradients_are_dropped_once_consumed():
    g, _, grads, _ = _run_chain(0)
    assert g.memory()["grads"] == sum(a.nbytes for a in grads)


def test_peak_bytes_held_during_backward_is_bounded():
    """Peak graph memory (values + saved + grads), sampled by a hook on every
    layer output as the backward walk reaches it: the checkpointed chain (4
    segments of 4 layers) peaks far below the plain one."""
    def peak(checkpointed):
        rng = np.random.default_rng(0)
        raw = _layers(rng, 16, 32)
        g = Graph()
        x = g.variable(rng.standard_normal((64, 32)))
        ps = [(g.variable(w), g.variable(b)) for w, b in raw]
        samples = []

        def layers(g, h, lo, hi):
            for w, b in ps[lo:hi]:
                h = g.tanh(g.matmul(h, w) + b)
                g.register_hook(h, lambda gr: samples.append(g.memory()["total"]))
            return h

        h = x
        for k in range(0, 16, 4):
            if checkpointed:
                h = g.checkpoint(lambda g, h, k=k: layers(g, h, k, k + 4), h)
            else:
                h = layers(g, h, k, k + 4)
        samples.append(g.memory()["total"])
        g.backward(g.sum(h))
        return max(samples)

    assert peak(True) < 0.5 * peak(False)


def _checkpointed_chain(segments, n=8, d=5, batch=4):
    g, x0, raw, x, params = _chain_setup(1, n, d, batch)
    h, mids = _checkpointed_segments(g, x, params, n, segments)
    return g, x0, raw, x, params, mids, g.sum(h * h)


def test_gradients_through_checkpointed_segments_match_torch():
    torch = pytest.importorskip("torch")
    g, x0, raw, x, params, mids, loss = _checkpointed_chain(4)
    held = g.memory()["values"]
    w0, b3 = params[0][0], params[3][1]
    dx, dw0, dmid, db3 = g.gradients(loss, [x, w0, mids[1], b3])
    assert g.memory()["values"] == held  # segments released again
    assert all(g.grad(n) is None for n in (x, w0, b3))

    tx = torch.tensor(x0, requires_grad=True)
    tp = [(torch.tensor(w, requires_grad=True), torch.tensor(b, requires_grad=True)) for w, b in raw]
    h = tx
    tmid = None
    for k, (w, b) in enumerate(tp):
        h = torch.tanh(h @ w + b)
        if k == 3:  # the output of the second of four segments
            tmid = h
    ref = torch.autograd.grad((h * h).sum(), [tx, tp[0][0], tmid, tp[3][1]])
    for ours, r in zip((dx, dw0, dmid, db3), ref):
        np.testing.assert_allclose(ours, r.numpy(), rtol=1e-12, atol=1e-12)

    # bit-identical to backward on the same checkpointed graph
    g.backward(loss)
    np.testing.assert_array_equal(g.grad(x), dx)
    np.testing.assert_array_equal(g.grad(w0), dw0)
    np.testing.assert_array_equal(g.grad(b3), db3)
    assert g.memory()["values"] == held


def test_gradients_of_a_node_inside_a_segment_release_it_again():
    # the input lies inside a checkpointed segment: the walk stops there, having
    # recomputed the segment, and must release it again
    rng = np.random.default_rng(2)
    w0 = rng.standard_normal((4, 4))
    x0 = rng.standard_normal((3, 4))
    inner = []

    def body(g, h, w):
        a = g.tanh(g.matmul(h, w))
        inner.append(a)
        return g.sigmoid(g.matmul(a, w))

    def build(ckpt):
        g = Graph(F64)
        x = g.variable(x0)
        w = g.variable(w0)
        out = g.checkpoint(body, x, w) if ckpt else body(g, x, w)
        return g, g.sum(out * out)

    g, loss = build(True)
    held = g.memory()["values"]
    (d,) = g.gradients(loss, [inner[-1]])
    assert g.memory()["values"] == held
    g2, loss2 = build(False)
    (ref,) = g2.gradients(loss2, [inner[-1]])
    np.testing.assert_array_equal(d, ref)


def test_shape_of_a_released_node_does_not_recompute(monkeypatch):
    g = Graph(F64)
    x = g.variable(np.ones((3, 4)))
    inner = []

    def body(g, h):
        a = g.tanh(h)
        inner.append(a)
        return g.sum(a * 2.0, axis=0)

    out = g.checkpoint(body, x)
    a = inner[0]
    assert g._values[a.index] is None  # released

    def no_recompute(*args, **kwargs):
        raise AssertionError("recomputed")

    monkeypatch.setattr(g, "_materialize", no_recompute)
    assert a.shape == (3, 4) and a.dtype == np.float64
    assert out.shape == (4,)
    assert g._values[a.index] is None


def test_truncate_after_checkpointing_keeps_or_clears_released_state():
    """truncate rescans for released values only after a release: truncating
    above a checkpointed segment keeps it released (and its gradients exact),
    truncating below it leaves a graph whose walk takes the plain path with
    the same bits as a never-checkpointed graph."""
    _, _, ref, _ = _run_chain(0)
    g, x0, raw, x, params = _chain_setup(0, 12, 6, 5)
    base = len(g)
    h, _ = _checkpointed_segments(g, x, params, 12, 3)
    assert g._has_released
    g.truncate(len(g))  # nothing removed: the segments stay released
    assert g._has_released
    g.backward(g.sum(h * h))
    _assert_bit_equal([g.grad(x)] + [g.grad(p) for pair in params for p in pair], ref)
    g.truncate(base)  # every released node removed
    assert not g._has_released
    g.zero_grads()
    h = _mlp_chain(g, x, params, 0, 12)
    g.backward(g.sum(h * h))
    _assert_bit_equal([g.grad(x)] + [g.grad(p) for pair in params for p in pair], ref)
