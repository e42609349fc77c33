"""yscv.func.vmap against torch.func: compositions with the
other transforms, in_axes/out_axes/pytrees, chunks, randomness, per-sample
gradients of modules, ensembles, and the errors."""
import numpy as np
import pytest
import torch

import yscv
from yscv import func, nn

RNG = np.random.default_rng(3)
X = RNG.standard_normal((5, 3))
W = RNG.standard_normal((3, 4))
V = RNG.standard_normal(4)


def f(g, x, w):
    return g.sum(g.tanh(g.matmul(x, w)))


def tf(x, w):
    return torch.tanh(x @ w).sum()


T = torch.from_numpy


def test_vmap_values_equal_torch_func():
    got = func.vmap(f, in_axes=(0, None))(X, W)
    ref = torch.func.vmap(tf, in_dims=(0, None))(T(X), T(W)).numpy()
    np.testing.assert_allclose(got, ref, rtol=1e-12)


@pytest.mark.parametrize("name", ["vmap_grad", "grad_vmap", "vmap_jacrev", "vmap_jacfwd",
                                  "vmap_hessian", "vmap_vmap", "vmap_hvp", "vmap_vjp",
                                  "vmap_jvp", "vmap_grad_grad"])
def test_compositions_equal_torch_func(name):
    tx, tw, tv = T(X), T(W), T(V)
    if name == "vmap_grad":
        got = func.vmap(func.grad(f, argnums=1), in_axes=(0, None))(X, W)
        ref = torch.func.vmap(torch.func.grad(tf, argnums=1), in_dims=(0, None))(tx, tw)
    elif name == "grad_vmap":
        def loss(g, w):
            return g.sum(func.vmap(f, in_axes=(0, None))(g, g.constant(X), w))
        got = func.grad(loss)(W)
        ref = torch.func.grad(lambda w: torch.func.vmap(tf, in_dims=(0, None))(tx, w).sum())(tw)
    elif name == "vmap_jacrev":
        def h(g, x, w):
            return g.tanh(g.matmul(x, w))
        got = func.vmap(func.jacrev(h), in_axes=(0, None))(X, W)
        ref = torch.func.vmap(torch.func.jacrev(lambda x, w: torch.tanh(x @ w)),
                              in_dims=(0, None))(tx, tw)
    elif name == "vmap_jacfwd":
        def h(g, x, w):
            return g.sin(g.matmul(x, w))
        got = func.vmap(func.jacfwd(h), in_axes=(0, None))(X, W)
        ref = torch.func.vmap(torch.func.jacfwd(lambda x, w: torch.sin(x @ w)),
                              in_dims=(0, None))(tx, tw)
    elif name == "vmap_hessian":
        got = func.vmap(func.hessian(f), in_axes=(0, None))(X, W)
        ref = torch.func.vmap(torch.func.hessian(tf), in_dims=(0, None))(tx, tw)
    elif name == "vmap_vmap":
        def h(g, x, w):
            return g.sum(g.mul(x, w))
        got = func.vmap(func.vmap(h, in_axes=(None, 1)), in_axes=(0, None))(X, W)
        ref = torch.func.vmap(torch.func.vmap(lambda x, w: (x * w).sum(), in_dims=(None, 1)),
                              in_dims=(0, None))(tx, tw)
    elif name == "vmap_hvp":
        def h(g, x, w, t):
            return func.hvp(lambda g, x: f(g, x, w), (g, x), (t,))[1][0]
        got = func.vmap(h, in_axes=(0, None, None))(X, W, X[0])
        def th(x, w, t):
            return torch.func.jvp(torch.func.grad(lambda x: tf(x, w)), (x,), (t,))[1]
        ref = torch.func.vmap(th, in_dims=(0, None, None))(tx, tw, tx[0])
    elif name == "vmap_vjp":
        def h(g, x, w, u):
            _, fn = func.vjp(lambda g, w: g.tanh(g.matmul(x, w)), g, w)
            return fn(u)[0]
        got = func.vmap(h, in_axes=(0, None, 0))(X, W, np.cos(X @ W))
        def th(x, w, u):
            return torch.func.vjp(lambda w: torch.tanh(x @ w), w)[1](u)[0]
        ref = torch.func.vmap(th, in_dims=(0, None, 0))(tx, tw, torch.cos(tx @ tw))
    elif name == "vmap_jvp":
        def h(g, x, w):
            return func.jvp(lambda g, x: g.tanh(g.matmul(x, w)), (g, x), (x,))[1]
        got = func.vmap(h, in_axes=(0, None))(X, W)
        ref = torch.func.vmap(lambda x, w: torch.func.jvp(lambda x: torch.tanh(x @ w), (x,),
                                                          (x,))[1], in_dims=(0, None))(tx, tw)
    else:  # vmap_grad_grad: per-sample second derivative of a scalar function
        def s(g, x):
            return g.sum(g.mul(g.sin(x), x))
        got = func.vmap(func.grad(lambda g, x: g.sum(func.grad(s)(g, x))))(X)
        ref = torch.func.vmap(torch.func.grad(lambda x: torch.func.grad(
            lambda x: (torch.sin(x) * x).sum())(x).sum()))(tx)
    np.testing.assert_allclose(got, ref.numpy(), rtol=1e-10, atol=1e-12)


def test_in_axes_pytrees_negative_axes_out_axes_and_unbatched_outputs():
    params = {"w": W, "b": V}

    def h(g, p, x):
        y = g.add(g.matmul(x, p["w"]), p["b"])
        return {"y": y, "c": g.sum(p["b"])}

    Xt = X.T.copy()  # batch on the last axis
    out = func.vmap(h, in_axes=({"w": None, "b": None}, -1), out_axes={"y": 1, "c": None})(
        params, Xt)
    np.testing.assert_allclose(out["y"], (X @ W + V).T, rtol=1e-12)
    np.testing.assert_allclose(out["c"], V.sum())
    out0 = func.vmap(h, in_axes=(None, 1), out_axes=0)(params, Xt)
    np.testing.assert_allclose(out0["c"], np.full(5, V.sum()))  # broadcast


@pytest.mark.parametrize("chunk", [1, 2, 5, 7])
def test_chunk_size_gives_the_same_results(chunk):
    full = func.vmap(func.grad(f, argnums=1), in_axes=(0, None))(X, W)
    part = func.vmap(func.grad(f, argnums=1), in_axes=(0, None), chunk_size=chunk)(X, W)
    np.testing.assert_allclose(part, full, rtol=1e-13)


def test_integer_labels_batch_and_per_sample_cross_entropy_gradients():
    xs = RNG.standard_normal((6, 2, 3))
    ys = RNG.integers(0, 4, size=(6, 2))

    def loss(g, w, x, y):
        return g.cross_entropy(g.matmul(x, w), y)

    got = func.vmap(func.grad(loss), in_axes=(None, 0, 0))(W, xs, ys)
    ref = torch.func.vmap(torch.func.grad(lambda w, x, y: torch.nn.functional.cross_entropy(
        x @ w, y)), in_dims=(None, 0, 0))(T(W), T(xs), torch.from_numpy(ys))
    np.testing.assert_allclose(got, ref.numpy(), rtol=1e-10, atol=1e-12)
    # a method without a batching rule of its own loops over the samples
    idx = RNG.integers(0, 3, size=(6, 2))
    g2 = func.vmap(lambda g, x, i: g.index_select(x, 1, i), in_axes=(0, 0))(xs, idx)
    np.testing.assert_allclose(g2, np.stack([x[:, i] for x, i in zip(xs, idx)]))


def _mlp(seed=0):
    yscv.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 8, dtype=np.float64), nn.ReLU(),
                         nn.Linear(8, 3, dtype=np.float64))


def _torch_mlp(m):
    t = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3)).double()
    with torch.no_grad():
        t[0].weight.copy_(T(m[0].weight.data.T.copy()))
        t[0].bias.copy_(T(m[0].bias.data))
        t[2].weight.copy_(T(m[2].weight.data.T.copy()))
        t[2].bias.copy_(T(m[2].bias.data))
    return t


def test_per_sample_gradients_of_a_module_equal_torch_func():
    model = _mlp()
    params = {k: p.data for k, p in model.named_parameters()}
    xs = RNG.standard_normal((7, 1, 6))
    ys = RNG.integers(0, 3, size=(7, 1))

    def loss(g, p, x, y):
        return g.cross_entropy(func.functional_call(model, p, (g, x)), y)

    grads = func.vmap(func.grad(loss), in_axes=(None, 0, 0))(params, xs, ys)
    tm = _torch_mlp(model)
    tp = {k: v.detach() for k, v in tm.named_parameters()}

    def tloss(p, x, y):
        return torch.nn.functional.cross_entropy(torch.func.functional_call(tm, p, (x,)), y)

    ref = torch.func.vmap(torch.func.grad(tloss), in_dims=(None, 0, 0))(
        tp, T(xs), torch.from_numpy(ys))
    names = {"0.weight": "0.weight", "0.bias": "0.bias", "2.weight": "2.weight",
             "2.bias": "2.bias"}
    for k, tk in names.items():
        r = ref[tk].numpy()
        if r.ndim == 3:  # torch's [out, in] weights; yscv's are [in, out]
            r = r.transpose(0, 2, 1)
        np.testing.assert_allclose(grads[k], r, rtol=1e-9, atol=1e-12, err_msg=k)
    assert all(p.grad is None for p in model.parameters())  # the module is untouched


def test_ensemble_by_vmap_over_stacked_states():
    models = [_mlp(s) for s in range(4)]
    params, buffers = func.stack_module_state(models)
    x = RNG.standard_normal((5, 6))

    def run(g, p, b, x):
        return func.functional_call(models[0], (p, b), (g, x))

    out = func.vmap(run, in_axes=(0, 0, None))(params, buffers, x)
    for k, m in enumerate(models):
        g = yscv.Graph(np.float64)
        np.testing.assert_allclose(out[k], g.value(m(g, g.constant(x))), rtol=1e-12)


def test_a_cnn_per_sample_gradient_equals_the_loop():
    yscv.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 3, 3, padding=1, dtype=np.float64), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Linear(3 * 3 * 3, 2, dtype=np.float64))
    params = {k: p.data for k, p in model.named_parameters()}
    xs = RNG.standard_normal((4, 1, 6, 6, 1))
    ys = RNG.integers(0, 2, size=(4, 1))

    def loss(g, p, x, y):
        return g.cross_entropy(func.functional_call(model, p, (g, x)), y)

    grads = func.vmap(func.grad(loss), in_axes=(None, 0, 0))(params, xs, ys)
    for b in range(4):
        one = func.grad(loss)(params, xs[b], ys[b])
        for k in params:
            np.testing.assert_allclose(grads[k][b], one[k], rtol=1e-10, atol=1e-12, err_msg=k)


def test_randomness_modes():
    x = np.ones((4, 50))

    def drop(g, x):
        return g.dropout(x, 0.5)

    with pytest.raises(yscv.BatchingError, match="dropout") as exc:
        func.vmap(drop)(x)
    assert exc.value.op == "dropout"
    yscv.manual_seed(1)
    diff = func.vmap(drop, randomness="different")(x)
    assert not np.array_equal(diff[0], diff[1])
    assert set(np.unique(diff)) <= {0.0, 2.0}
    yscv.manual_seed(1)
    same = func.vmap(drop, randomness="same")(x)
    assert all(np.array_equal(same[0], same[k]) for k in range(4))
    assert 0 < (same[0] == 0).sum() < 50


def test_errors_leave_the_graph_unchanged():
    g = yscv.Graph(np.float64)
    a, b = g.variable(np.ones((3, 2))), g.variable(np.ones((4, 2)))
    n = len(g)
    cases = [
        (lambda: func.vmap(lambda g, x, y: g.add(x, y))(g, a, b), ValueError, "different sizes"),
        (lambda: func.vmap(lambda g, x: x, in_axes=2)(g, a), ValueError, "out of range"),
        (lambda: func.vmap(lambda g, x: x, in_axes=(0, 0))(g, a), ValueError, "entries"),
        (lambda: func.vmap(lambda g, x: x, in_axes=None)(g, a), ValueError, "no argument"),
        (lambda: func.vmap(lambda g, x: x, in_axes="0")(g, a), ValueError, "in_axes"),
        (lambda: func.vmap(lambda g, x: g.exp(x), out_axes=None)(g, a), ValueError, "None"),
        (lambda: func.vmap(lambda g, x: g.exp(x), out_axes=3)(g, a), ValueError, "out of range"),
        (lambda: func.vmap(lambda g, x: x, chunk_size=0)(g, a), ValueError, "chunk_size"),
        (lambda: func.vmap(lambda g, x: x, randomness="some")(g, a), ValueError, "randomness"),
        (lambda: func.vmap(lambda g, x: g.value(x))(g, a), yscv.BatchingError, "batched"),
        (lambda: func.vmap(lambda g, x: g.backward(g.sum(x)))(g, a), yscv.BatchingError,
         "backward"),
        (lambda: func.vmap(lambda g, x: g.exp(x), in_axes=({"x": 0},))(g, a), ValueError,
         "structure"),
    ]
    for call, exc, match in cases:
        with pytest.raises(exc, match=match):
            call()
        assert len(g) == n
    assert type(g) is yscv.Graph  # no level left active


def test_an_op_without_a_batching_rule_names_it():
    swish = yscv.custom_op("vmap_swish", lambda x: x / (1 + np.exp(-x)),
                           lambda ns, g, xs, y, needs: (ns.mul(g, ns.const(np.ones_like(xs[0]))),))
    with pytest.raises(yscv.BatchingError, match="vmap_swish") as exc:
        func.vmap(lambda g, x: swish(g, x))(X)
    assert isinstance(exc.value, yscv.AutogradError)


def test_shape_inside_f_is_per_sample_and_eager_code_is_untouched():
    seen = []

    def h(g, x):
        seen.append(tuple(x.shape))
        return g.sum(x * x)

    func.vmap(h)(np.ones((5, 2, 3)))
    assert seen == [(2, 3)]
    g = yscv.Graph()
    a = g.variable(np.ones(3))
    assert yscv.NodeId.__mul__ is not None and g.value(a * a).shape == (3,)


def test_the_looped_ops_table_of_docs_vmap_is_the_registry():
    import pathlib
    import re

    from yscv import registry
    from yscv.op import Op

    page = (pathlib.Path(__file__).resolve().parents[1] / "docs" / "vmap.md").read_text()
    block = page.split("<!-- looped-ops -->")[1].split("<!-- /looped-ops -->")[0]
    row = next(line for line in block.splitlines() if line.startswith("| once per sample"))
    listed = set(re.findall(r"`([a-z0-9_]+)`", row))
    looped = {op.name.lower() for op in Op if registry.BATCHING_HOW[int(op)] == "loop"}
    assert listed == looped
    counts = {h: sum(registry.BATCHING_HOW[int(op)] == h for op in Op)
              for h in ("fold", "loop", "refused")}
    assert f"{counts['fold']} fold" in page and f"{counts['loop']}\nrun once" in page


def test_per_sample_token_indices_through_embedding_and_attention():
    emb = RNG.standard_normal((11, 4))
    tokens = RNG.integers(0, 11, size=(3, 5))

    def h(g, e, t):
        x = g.embedding(e, t)                                  # [5, 4]
        a = g.scaled_dot_product_attention(x, x, x, causal=True)
        return g.sum(g.tanh(a))

    got = func.vmap(func.grad(h), in_axes=(None, 0))(emb, tokens)
    te = T(emb)

    def th(e, t):
        x = e[t]
        a = torch.nn.functional.scaled_dot_product_attention(x, x, x, is_causal=True)
        return torch.tanh(a).sum()

    ref = torch.func.vmap(torch.func.grad(th), in_dims=(None, 0))(te, torch.from_numpy(tokens))
    np.testing.assert_allclose(got, ref.numpy(), rtol=1e-10, atol=1e-12)


def test_the_arrays_form_takes_first_order_gradients_with_the_recorded_bits():
    """vmap(grad(f)) with arrays never differentiates its result, so grad's
    gradients come from the first-order walk (constants, no recorded
    nodes); they equal the graph form's recorded ones bit for bit."""
    model = _mlp()
    params = {k: p.data for k, p in model.named_parameters()}
    xs = RNG.standard_normal((9, 1, 6))
    ys = RNG.integers(0, 3, size=(9, 1))

    def loss(g, p, x, y):
        return g.cross_entropy(func.functional_call(model, p, (g, x)), y)

    fast = func.vmap(func.grad(loss), in_axes=(None, 0, 0))(params, xs, ys)
    g = yscv.Graph(np.float64)
    recorded = func.vmap(func.grad(loss), in_axes=(None, 0, 0))(
        g, {k: g.constant(v) for k, v in params.items()}, g.constant(xs), ys)
    assert all(g.requires_grad(n) for n in recorded.values())  # recorded: differentiable
    for k in params:
        assert fast[k].tobytes() == g.value(recorded[k]).tobytes(), k


def test_the_arrays_form_over_jacobians_and_hessians_keeps_the_recorded_bits():
    def h(g, x):
        return g.sum(g.square(g.tanh(g.matmul(x, W))))

    for transform in (func.hessian, func.jacrev, func.jacfwd):
        fast = func.vmap(transform(h))(X)
        g = yscv.Graph(np.float64)
        rec = func.vmap(transform(h))(g, g.constant(X))
        assert fast.tobytes() == g.value(rec).tobytes(), transform.__name__
