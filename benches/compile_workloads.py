"""The training steps of benches/bench_compile.py, written three times with
the same math and the same NumPy-made data: for yscv (``fn(g, *inputs)``,
parameters bound with ``g.param``: the function `yscv.compile` records, or
runs eagerly on a fresh graph), for PyTorch (a loss function of tensors,
then ``loss.backward()``) and for JAX (a loss function of arrays, through
``jax.value_and_grad``).

Each workload is ``(name, data)`` with ``data() -> (params, inputs)``: a
dict of float32 parameter arrays and a tuple of input arrays (float32
data, int64 labels); ``YSCV[name]``, ``TORCH[name]`` and ``JAX[name]`` are
the three loss functions.
"""
from __future__ import annotations

import numpy as np

CHAIN_ITERS = 667              # x 3 ops (mul, add, tanh) = 2,001 scalar ops
LAYERS, WIDTH, CHAIN_BATCH = 200, 64, 32
PINN_SIZES, PINN_BATCH = (2, 64, 64, 64, 1), 1024
MLP_SIZES, MLP_BATCH = (784, 512, 512, 10), 128
T, B, I, H = 32, 16, 64, 128
TB, TS, TD, THEADS = 8, 64, 128, 4


def _uniform(rng, shape, fan_in, gain=1.0):
    k = gain / np.sqrt(fan_in)   # PyTorch's nn.Linear bound
    return rng.uniform(-k, k, shape).astype(np.float32)


def _linears(rng, sizes, prefix="", gain=1.0):
    p = {}
    for n, (i, o) in enumerate(zip(sizes[:-1], sizes[1:])):
        p[f"{prefix}w{n}"] = _uniform(rng, (i, o), i, gain)
        p[f"{prefix}b{n}"] = _uniform(rng, (o,), i, gain)
    return p


def chain_data():
    return ({"w": np.array([0.9], np.float32), "b": np.array([0.1], np.float32)},
            (np.array([0.5], np.float32),))


def deep_data():
    rng = np.random.default_rng(0)
    # the bound times 2 keeps every gradient a normal float (bench_checkpoint.py)
    return (_linears(rng, (WIDTH,) * (LAYERS + 1), gain=2.0),
            (rng.standard_normal((CHAIN_BATCH, WIDTH)).astype(np.float32),))


def pinn_data():
    rng = np.random.default_rng(1)
    return (_linears(rng, PINN_SIZES),
            (rng.uniform(-1, 1, (PINN_BATCH, 2)).astype(np.float32),
             rng.standard_normal(PINN_BATCH).astype(np.float32)))


def mlp_data():
    rng = np.random.default_rng(2)
    return (_linears(rng, MLP_SIZES),
            (rng.standard_normal((MLP_BATCH, MLP_SIZES[0])).astype(np.float32),
             rng.integers(0, MLP_SIZES[-1], MLP_BATCH)))


def cnn_data():
    rng = np.random.default_rng(3)
    p = {"c0": _uniform(rng, (3, 3, 3, 16), 27), "cb0": _uniform(rng, (16,), 27),
         "c1": _uniform(rng, (3, 3, 16, 32), 144), "cb1": _uniform(rng, (32,), 144),
         "w": _uniform(rng, (8 * 8 * 32, 10), 2048), "b": _uniform(rng, (10,), 2048)}
    return p, (rng.standard_normal((32, 32, 32, 3)).astype(np.float32),
               rng.integers(0, 10, 32))


def lstm_data():
    rng = np.random.default_rng(4)
    return ({"w_ih": _uniform(rng, (I, 4 * H), H), "w_hh": _uniform(rng, (H, 4 * H), H),
             "bias": _uniform(rng, (4 * H,), H)},
            (rng.standard_normal((T, B, I)).astype(np.float32),))


def block_data():
    rng = np.random.default_rng(5)
    p = {}
    for n in ("q", "k", "v", "o"):
        p["w" + n], p["b" + n] = _uniform(rng, (TD, TD), TD), _uniform(rng, (TD,), TD)
    p["w1"], p["b1"] = _uniform(rng, (TD, 4 * TD), TD), _uniform(rng, (4 * TD,), TD)
    p["w2"], p["b2"] = _uniform(rng, (4 * TD, TD), 4 * TD), _uniform(rng, (TD,), 4 * TD)
    for n in ("1", "2"):
        p["g" + n] = (1 + 0.1 * rng.standard_normal(TD)).astype(np.float32)
        p["e" + n] = (0.1 * rng.standard_normal(TD)).astype(np.float32)
    return p, (rng.standard_normal((TB * TS, TD)).astype(np.float32),)


WORKLOADS = [
    ("scalar chain, 2,001 ops fwd+bwd", chain_data),
    (f"{LAYERS}-layer chain ({WIDTH}x{WIDTH} linear + tanh) batch {CHAIN_BATCH}", deep_data),
    (f"PINN step (tanh MLP {'-'.join(map(str, PINN_SIZES))}, batch {PINN_BATCH}, Laplacian)",
     pinn_data),
    (f"MLP {'-'.join(map(str, MLP_SIZES))} batch {MLP_BATCH} step", mlp_data),
    ("CNN 32x32x3 batch 32 step", cnn_data),
    (f"LSTM T{T} B{B} {I}->{H} step", lstm_data),
    (f"transformer block B{TB} S{TS} d{TD} step", block_data),
]


# ------------------------------------------------------------------ yscv
def _y_chain(g, P, x0):
    x = g.constant(x0)
    for _ in range(CHAIN_ITERS):
        x = g.tanh(g.add(g.mul(x, P["w"]), P["b"]))
    return g.sum(x)


def _y_deep(g, P, x):
    h = g.constant(x)
    for n in range(LAYERS):
        h = g.tanh(g.add(g.matmul(h, P[f"w{n}"]), P[f"b{n}"]))
    return g.mean(g.mul(h, h))


def _y_mlp_body(g, P, h, n_layers, act):
    for n in range(n_layers):
        h = g.add(g.matmul(h, P[f"w{n}"]), P[f"b{n}"])
        if n < n_layers - 1:
            h = act(h)
    return h


def _y_pinn(g, P, xb, fb):
    x = g.variable(xb)
    u = _y_mlp_body(g, P, x, len(PINN_SIZES) - 1, g.tanh)
    (du,) = g.gradients(g.sum(u), [x], create_graph=True)
    lap = None
    for d in range(2):
        (dd,) = g.gradients(g.sum(du[:, d]), [x], create_graph=True)
        lap = dd[:, d] if lap is None else g.add(lap, dd[:, d])
    r = g.sub(lap, g.constant(fb))
    return g.mean(g.mul(r, r))


def _y_mlp(g, P, xb, yb):
    return g.cross_entropy(_y_mlp_body(g, P, g.constant(xb), 3, g.relu), yb)


def _y_cnn(g, P, xb, yb):
    h = g.max_pool2d(g.relu(g.conv2d(g.constant(xb), P["c0"], P["cb0"], padding=1)), 2)
    h = g.max_pool2d(g.relu(g.conv2d(h, P["c1"], P["cb1"], padding=1)), 2)
    return g.cross_entropy(g.add(g.matmul(g.flatten(h), P["w"]), P["b"]), yb)


def _y_lstm(g, P, xb):
    out = g.lstm(g.constant(xb), P["w_ih"], P["w_hh"], P["bias"])
    return g.mean(g.mul(out, out))


def _y_block(g, P, xb):
    x = g.constant(xb)

    def heads(t):
        return g.transpose(g.reshape(t, (TB, TS, THEADS, TD // THEADS)), (0, 2, 1, 3))

    def lin(t, n):
        return g.add(g.matmul(t, P["w" + n]), P["b" + n])

    h = g.layer_norm(x, P["g1"], P["e1"])
    a = g.scaled_dot_product_attention(heads(lin(h, "q")), heads(lin(h, "k")), heads(lin(h, "v")))
    x1 = g.add(x, lin(g.reshape(g.transpose(a, (0, 2, 1, 3)), (TB * TS, TD)), "o"))
    y = g.add(x1, lin(g.gelu(lin(g.layer_norm(x1, P["g2"], P["e2"]), "1")), "2"))
    return g.mean(g.mul(y, y))


YSCV = dict(zip([w[0] for w in WORKLOADS],
                [_y_chain, _y_deep, _y_pinn, _y_mlp, _y_cnn, _y_lstm, _y_block]))


# --------------------------------------------------------------- PyTorch
def _t_chain(torch, P, x0):
    x = x0
    for _ in range(CHAIN_ITERS):
        x = torch.tanh(x * P["w"] + P["b"])
    return x.sum()


def _t_deep(torch, P, x):
    h = x
    for n in range(LAYERS):
        h = torch.tanh(h @ P[f"w{n}"] + P[f"b{n}"])
    return (h * h).mean()


def _t_body(P, h, n_layers, act):
    for n in range(n_layers):
        h = h @ P[f"w{n}"] + P[f"b{n}"]
        if n < n_layers - 1:
            h = act(h)
    return h


def _t_pinn(torch, P, xb, fb):
    x = xb.detach().requires_grad_(True)
    u = _t_body(P, x, len(PINN_SIZES) - 1, torch.tanh)
    (du,) = torch.autograd.grad(u.sum(), [x], create_graph=True)
    lap = 0
    for d in range(2):
        (dd,) = torch.autograd.grad(du[:, d].sum(), [x], create_graph=True)
        lap = lap + dd[:, d]
    return ((lap - fb) ** 2).mean()


def _t_pinn_func(torch, P, xb, fb):
    """The Laplacian through torch.func (hessian per point, vmapped): the
    form torch.compile traces (double backward through autograd.grad is
    not supported inside it)."""
    def u(x):
        return _t_body(P, x[None], len(PINN_SIZES) - 1, torch.tanh).sum()
    hess = torch.func.vmap(torch.func.hessian(u))(xb)
    lap = hess[:, 0, 0] + hess[:, 1, 1]
    return ((lap - fb) ** 2).mean()


def _t_mlp(torch, P, xb, yb):
    return torch.nn.functional.cross_entropy(_t_body(P, xb, 3, torch.relu), yb)


def _t_cnn(torch, P, xb, yb):
    F = torch.nn.functional
    h = F.max_pool2d(F.relu(F.conv2d(xb, P["c0"], P["cb0"], padding=1)), 2)
    h = F.max_pool2d(F.relu(F.conv2d(h, P["c1"], P["cb1"], padding=1)), 2)
    # yscv flattens NHWC: the NCHW activation permuted to match the weight rows
    return F.cross_entropy(h.permute(0, 2, 3, 1).reshape(h.shape[0], -1) @ P["w"] + P["b"], yb)


def _t_lstm(torch, P, xb):
    out, _ = P["module"](xb)   # nn.LSTM holding the weights (`torch_params`)
    return (out * out).mean()


def _t_block(torch, P, x):
    F = torch.nn.functional

    def heads(t):
        return t.view(TB, TS, THEADS, TD // THEADS).transpose(1, 2)

    def lin(t, n):
        return t @ P["w" + n] + P["b" + n]

    h = F.layer_norm(x, (TD,), P["g1"], P["e1"])
    a = F.scaled_dot_product_attention(heads(lin(h, "q")), heads(lin(h, "k")), heads(lin(h, "v")))
    x1 = x + lin(a.transpose(1, 2).reshape(TB * TS, TD), "o")
    y = x1 + lin(F.gelu(lin(F.layer_norm(x1, (TD,), P["g2"], P["e2"]), "1")), "2")
    return (y * y).mean()


TORCH = dict(zip([w[0] for w in WORKLOADS],
                 [_t_chain, _t_deep, _t_pinn, _t_mlp, _t_cnn, _t_lstm, _t_block]))
#: what torch.compile compiles where the eager form does not trace
TORCH_COMPILED = {**TORCH, WORKLOADS[2][0]: _t_pinn_func}


def torch_inputs(torch, name, inputs):
    """The inputs as PyTorch takes them (NCHW images for the CNN)."""
    out = [torch.from_numpy(np.ascontiguousarray(a)) for a in inputs]
    if name.startswith("CNN"):
        out[0] = out[0].permute(0, 3, 1, 2).contiguous()
    return out


def torch_params(torch, name, params):
    """``(P, leaves)``: the parameters as the PyTorch loss takes them and
    the tensors whose ``.grad`` a step fills."""
    if name.startswith("LSTM"):   # nn.LSTM: output-major weights, b_ih ours, b_hh zero
        m = torch.nn.LSTM(I, H)
        with torch.no_grad():
            m.weight_ih_l0.copy_(torch.from_numpy(params["w_ih"].T.copy()))
            m.weight_hh_l0.copy_(torch.from_numpy(params["w_hh"].T.copy()))
            m.bias_ih_l0.copy_(torch.from_numpy(params["bias"]))
            m.bias_hh_l0.zero_()
        return {"module": m}, list(m.parameters())
    P = {k: torch.from_numpy(v.copy()) for k, v in params.items()}
    if name.startswith("CNN"):   # HWIO -> OIHW
        for k in ("c0", "c1"):
            P[k] = P[k].permute(3, 2, 0, 1).contiguous()
    for t in P.values():
        t.requires_grad_(True)
    return P, list(P.values())


# ------------------------------------------------------------------- JAX
def jax_loss(name):
    """The workload's loss ``f(P, *inputs)`` in jax.numpy."""
    import jax
    import jax.numpy as jnp

    def body(P, h, n_layers, act):
        for n in range(n_layers):
            h = h @ P[f"w{n}"] + P[f"b{n}"]
            if n < n_layers - 1:
                h = act(h)
        return h

    def xent(logits, y):
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], 1))

    def chain(P, x0):
        return jax.lax.fori_loop(0, CHAIN_ITERS, lambda _, x: jnp.tanh(x * P["w"] + P["b"]),
                                 x0).sum()

    def deep(P, x):
        h = x
        for n in range(LAYERS):
            h = jnp.tanh(h @ P[f"w{n}"] + P[f"b{n}"])
        return jnp.mean(h * h)

    def pinn(P, xb, fb):
        def u(x):
            return body(P, x[None], len(PINN_SIZES) - 1, jnp.tanh).sum()
        hess = jax.vmap(jax.hessian(u))(xb)
        return jnp.mean((hess[:, 0, 0] + hess[:, 1, 1] - fb) ** 2)

    def mlp(P, xb, yb):
        return xent(body(P, xb, 3, jax.nn.relu), yb)

    def cnn(P, xb, yb):
        def conv(h, w, b):
            return jax.lax.conv_general_dilated(h, w, (1, 1), "SAME",
                                                dimension_numbers=("NHWC", "HWIO", "NHWC")) + b

        def pool(h):
            return jax.lax.reduce_window(h, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1),
                                         "VALID")
        h = pool(jax.nn.relu(conv(xb, P["c0"], P["cb0"])))
        h = pool(jax.nn.relu(conv(h, P["c1"], P["cb1"])))
        return xent(h.reshape(h.shape[0], -1) @ P["w"] + P["b"], yb)

    def lstm(P, xb):
        def cell(carry, x):
            hp, cp = carry
            z = x @ P["w_ih"] + hp @ P["w_hh"] + P["bias"]
            i, f, gg, o = jnp.split(z, 4, axis=-1)
            c = jax.nn.sigmoid(f) * cp + jax.nn.sigmoid(i) * jnp.tanh(gg)
            hn = jax.nn.sigmoid(o) * jnp.tanh(c)
            return (hn, c), hn
        zero = jnp.zeros((B, H), xb.dtype)
        _, out = jax.lax.scan(cell, (zero, zero), xb)
        return jnp.mean(out * out)

    def block(P, x):
        def ln(t, g, e):
            m = t.mean(-1, keepdims=True)
            v = ((t - m) ** 2).mean(-1, keepdims=True)
            return (t - m) / jnp.sqrt(v + 1e-5) * g + e

        def heads(t):
            return t.reshape(TB, TS, THEADS, TD // THEADS).transpose(0, 2, 1, 3)

        def lin(t, n):
            return t @ P["w" + n] + P["b" + n]
        h = ln(x, P["g1"], P["e1"])
        q, k, v = heads(lin(h, "q")), heads(lin(h, "k")), heads(lin(h, "v"))
        s = jax.nn.softmax(q @ k.transpose(0, 1, 3, 2) / np.sqrt(TD // THEADS), axis=-1)
        a = (s @ v).transpose(0, 2, 1, 3).reshape(TB * TS, TD)
        x1 = x + lin(a, "o")
        y = x1 + lin(jax.nn.gelu(lin(ln(x1, P["g2"], P["e2"]), "1"), approximate=False), "2")
        return jnp.mean(y * y)

    return dict(zip([w[0] for w in WORKLOADS],
                    [chain, deep, pinn, mlp, cnn, lstm, block]))[name]
