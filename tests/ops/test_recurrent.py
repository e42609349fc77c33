"""Recurrent ops (RNN, LSTM, GRU): NumPy step-loop references, float64
gradcheck (T=3, B=2, I=3, H=2), bad arguments, and PyTorch cross-checks."""
import numpy as np
import pytest

import yscv
from yscv import Op
from yscv.testing import (BadCase, OpCase, check_second_order_float32, check_torch_build,
                          make_op_tests, make_second_order_tests)

T, B, I, H = 3, 2, 3, 2


# ------------------------------------------------------------ references
def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def _batch(x, state):
    """Unbatched [T, I] / [H] -> batched [T, 1, I] / [1, H]."""
    if x.ndim == 2:
        return x[:, None, :], (None if state is None else state[None, :]), True
    return x, state, False


def ref_rnn(x, w_ih, w_hh, b, h0=None, relu=False):
    x, h0, unb = _batch(x, h0)
    h = np.zeros((x.shape[1], w_hh.shape[0])) if h0 is None else h0
    outs = []
    for t in range(x.shape[0]):
        a = x[t] @ w_ih + b + h @ w_hh
        h = np.maximum(a, 0.0) if relu else np.tanh(a)
        outs.append(h)
    out = np.stack(outs)
    return out[:, 0] if unb else out


def _ref_lstm_run(x, w_ih, w_hh, b, h0=None, c0=None):
    """(all hidden states, final cell state) of the reference LSTM."""
    x, h0, unb = _batch(x, h0)
    if c0 is not None and c0.ndim == 1:
        c0 = c0[None, :]
    n = w_hh.shape[0]
    h = np.zeros((x.shape[1], n)) if h0 is None else h0
    c = np.zeros((x.shape[1], n)) if c0 is None else c0
    outs = []
    for t in range(x.shape[0]):
        z = x[t] @ w_ih + b + h @ w_hh
        i, f = _sigmoid(z[:, :n]), _sigmoid(z[:, n:2 * n])
        gg, o = np.tanh(z[:, 2 * n:3 * n]), _sigmoid(z[:, 3 * n:])
        c = f * c + i * gg
        h = o * np.tanh(c)
        outs.append(h)
    out = np.stack(outs)
    return (out[:, 0], c[0]) if unb else (out, c)


def ref_lstm(x, w_ih, w_hh, b, h0=None, c0=None):
    return _ref_lstm_run(x, w_ih, w_hh, b, h0, c0)[0]


def ref_gru(x, w_ih, w_hh, b_ih, b_hh, h0=None):
    x, h0, unb = _batch(x, h0)
    n = w_hh.shape[0]
    h = np.zeros((x.shape[1], n)) if h0 is None else h0
    outs = []
    for t in range(x.shape[0]):
        gx = x[t] @ w_ih + b_ih
        gh = h @ w_hh + b_hh
        r = _sigmoid(gx[:, :n] + gh[:, :n])
        z = _sigmoid(gx[:, n:2 * n] + gh[:, n:2 * n])
        nn = np.tanh(gx[:, 2 * n:] + r * gh[:, 2 * n:])
        h = (1 - z) * nn + z * h
        outs.append(h)
    out = np.stack(outs)
    return out[:, 0] if unb else out


# ---------------------------------------------------------------- inputs
def _inputs(gates, batched=True, states=0, two_biases=False):
    """x, w_ih, w_hh, bias(es), then ``states`` initial states."""
    def make(rng):
        xs = (T, B, I) if batched else (T, I)
        ss = (B, H) if batched else (H,)
        arrs = [rng.uniform(-1.5, 1.5, xs),
                rng.uniform(-1, 1, (I, gates * H)),
                rng.uniform(-1, 1, (H, gates * H)),
                rng.uniform(-0.5, 0.5, gates * H)]
        if two_biases:
            arrs.append(rng.uniform(-0.5, 0.5, gates * H))
        arrs += [rng.uniform(-1, 1, ss) for _ in range(states)]
        return tuple(arrs)
    return make


W_IH_CONST = np.random.default_rng(7).uniform(-1, 1, (I, 4 * H))


def _t_rnn(kind, nonlinearity="tanh", states=("h0", "c0"), w_ih=None):
    """torch_build: torch.nn.RNN / LSTM / GRU run by torch.func.functional_call
    with the row's arrays as its parameters: weights transposed to
    [gates*H, I] (the same gate orders), one bias as bias_ih with bias_hh
    zero (GRU: both), initial states [1, B, H] (unbatched [1, H]), a state
    not given zero; ``states`` names the given ones in order."""
    def build(t, x, *a):
        if w_ih is not None:
            a = (t.tensor(w_ih),) + a
        w_ih_, w_hh = a[0], a[1]
        nb = 2 if kind == "gru" else 1
        biases, given = a[2:2 + nb], dict(zip(states, a[2 + nb:]))
        hsize = w_hh.shape[0]
        cls = {"rnn": t.nn.RNN, "lstm": t.nn.LSTM, "gru": t.nn.GRU}[kind]
        kw = {"nonlinearity": nonlinearity} if kind == "rnn" else {}
        module = cls(w_ih_.shape[0], hsize, **kw).double()
        params = {"weight_ih_l0": w_ih_.T, "weight_hh_l0": w_hh.T, "bias_ih_l0": biases[0],
                  "bias_hh_l0": biases[1] if kind == "gru" else t.zeros_like(biases[0])}
        shape = (1,) + tuple(x.shape[1:-1]) + (hsize,)
        hx = None
        if given:
            hx = [given[k].reshape(shape) if k in given else x.new_zeros(shape)
                  for k in (("h0", "c0") if kind == "lstm" else ("h0",))]
            hx = tuple(hx) if kind == "lstm" else hx[0]
        out, _ = t.func.functional_call(module, params, (x, hx))
        return out
    return build

CASES = [
    # RNN
    OpCase(Op.RNN, lambda g, *a: g.rnn(*a), reference=ref_rnn, inputs=_inputs(1),
           name="rnn_tanh",
           torch_build=_t_rnn("rnn")),
    OpCase(Op.RNN, lambda g, *a: g.rnn(*a), reference=ref_rnn, inputs=_inputs(1, states=1),
           name="rnn_tanh_h0",
           torch_build=_t_rnn("rnn")),
    OpCase(Op.RNN, lambda g, *a: g.rnn(*a, nonlinearity="relu"),
           reference=lambda *a: ref_rnn(*a, relu=True), inputs=_inputs(1, states=1),
           name="rnn_relu_h0",
           torch_build=_t_rnn("rnn", "relu")),
    OpCase(Op.RNN, lambda g, *a: g.rnn(*a[:4], nonlinearity="relu"),
           reference=lambda *a: ref_rnn(*a, relu=True), inputs=_inputs(1), name="rnn_relu",
           torch_build=_t_rnn("rnn", "relu")),
    OpCase(Op.RNN, lambda g, *a: g.rnn(*a), reference=ref_rnn,
           inputs=_inputs(1, batched=False, states=1), name="rnn_unbatched_h0",
           torch_build=_t_rnn("rnn")),
    OpCase(Op.RNN, lambda g, *a: g.rnn_forward(*a), reference=ref_rnn,
           inputs=_inputs(1, batched=False), name="rnn_forward_alias_unbatched",
           torch_build=_t_rnn("rnn")),
    # LSTM
    OpCase(Op.LSTM, lambda g, *a: g.lstm(*a), reference=ref_lstm, inputs=_inputs(4),
           name="lstm",
           torch_build=_t_rnn("lstm")),
    OpCase(Op.LSTM, lambda g, *a: g.lstm(*a), reference=ref_lstm, inputs=_inputs(4, states=2),
           name="lstm_h0_c0",
           torch_build=_t_rnn("lstm")),
    OpCase(Op.LSTM, lambda g, *a: g.lstm(*a), reference=ref_lstm, inputs=_inputs(4, states=1),
           name="lstm_h0_only",
           torch_build=_t_rnn("lstm")),
    OpCase(Op.LSTM, lambda g, *a: g.lstm(*a[:4], c0=a[4]),
           reference=lambda *a: ref_lstm(*a[:4], c0=a[4]), inputs=_inputs(4, states=1),
           name="lstm_c0_only",
           torch_build=_t_rnn("lstm", states=("c0",))),
    OpCase(Op.LSTM, lambda g, *a: g.lstm(*a), reference=ref_lstm,
           inputs=_inputs(4, batched=False, states=2), name="lstm_unbatched_h0_c0",
           torch_build=_t_rnn("lstm")),
    OpCase(Op.LSTM, lambda g, *a: g.lstm_forward(*a), reference=ref_lstm,
           inputs=_inputs(4, batched=False), name="lstm_forward_alias_unbatched",
           torch_build=_t_rnn("lstm")),
    OpCase(Op.LSTM, lambda g, x, w_hh, b: g.lstm(x, W_IH_CONST, w_hh, b),
           reference=lambda x, w_hh, b: ref_lstm(x, W_IH_CONST, w_hh, b),
           inputs=lambda rng: _inputs(4)(rng)[::2] + (_inputs(4)(rng)[3],),
           name="lstm_constant_w_ih_array",
           torch_build=_t_rnn("lstm", w_ih=W_IH_CONST)),
    # GRU
    OpCase(Op.GRU, lambda g, *a: g.gru(*a), reference=ref_gru,
           inputs=_inputs(3, two_biases=True), name="gru",
           torch_build=_t_rnn("gru")),
    OpCase(Op.GRU, lambda g, *a: g.gru(*a), reference=ref_gru,
           inputs=_inputs(3, two_biases=True, states=1), name="gru_h0",
           torch_build=_t_rnn("gru")),
    OpCase(Op.GRU, lambda g, *a: g.gru(*a), reference=ref_gru,
           inputs=_inputs(3, batched=False, two_biases=True, states=1), name="gru_unbatched_h0",
           torch_build=_t_rnn("gru")),
    OpCase(Op.GRU, lambda g, *a: g.gru_forward(*a), reference=ref_gru,
           inputs=_inputs(3, batched=False, two_biases=True), name="gru_forward_alias_unbatched",
           torch_build=_t_rnn("gru")),
]


# ------------------------------------------------------------ bad inputs
def _leaves(*shapes):
    return lambda g: tuple(g.variable(np.zeros(s)) for s in shapes)


LSTM_OK = [(T, B, I), (I, 4 * H), (H, 4 * H), (4 * H,)]
GRU_OK = [(T, B, I), (I, 3 * H), (H, 3 * H), (3 * H,), (3 * H,)]
RNN_OK = [(T, B, I), (I, H), (H, H), (H,)]


def _with(shapes, k, s):
    out = list(shapes)
    out[k] = s
    return out


BAD = [
    BadCase(Op.LSTM, "lstm_x_1d", _leaves(*_with(LSTM_OK, 0, (T,))),
            lambda g, *a: g.lstm(*a), yscv.ShapeError, "lstm: x"),
    BadCase(Op.LSTM, "lstm_x_4d", _leaves(*_with(LSTM_OK, 0, (T, B, I, 1))),
            lambda g, *a: g.lstm(*a), yscv.ShapeError, "lstm: x"),
    BadCase(Op.LSTM, "lstm_empty_sequence", _leaves(*_with(LSTM_OK, 0, (0, B, I))),
            lambda g, *a: g.lstm(*a), ValueError, "lstm: x has sequence length T=0"),
    BadCase(Op.LSTM, "lstm_w_ih_wrong_input_size", _leaves(*_with(LSTM_OK, 1, (I + 1, 4 * H))),
            lambda g, *a: g.lstm(*a), yscv.ShapeError, "lstm: w_ih"),
    BadCase(Op.LSTM, "lstm_w_ih_pytorch_layout", _leaves(*_with(LSTM_OK, 1, (4 * H, I))),
            lambda g, *a: g.lstm(*a), yscv.ShapeError, "lstm: w_ih"),
    BadCase(Op.LSTM, "lstm_w_hh_not_4h", _leaves(*_with(LSTM_OK, 2, (H, 3 * H))),
            lambda g, *a: g.lstm(*a), yscv.ShapeError, "lstm: w_hh"),
    BadCase(Op.LSTM, "lstm_bias_size", _leaves(*_with(LSTM_OK, 3, (H,))),
            lambda g, *a: g.lstm(*a), yscv.ShapeError, "lstm: bias"),
    BadCase(Op.LSTM, "lstm_h0_shape", _leaves(*LSTM_OK, (B + 1, H)),
            lambda g, *a: g.lstm(*a), yscv.ShapeError, "lstm: h0"),
    BadCase(Op.LSTM, "lstm_c0_shape", _leaves(*LSTM_OK, (B, H), (H,)),
            lambda g, *a: g.lstm(*a), yscv.ShapeError, "lstm: c0"),
    BadCase(Op.LSTM, "lstm_unbatched_h0_2d", _leaves((T, I), *LSTM_OK[1:], (1, H)),
            lambda g, *a: g.lstm(*a), yscv.ShapeError, "lstm: h0"),
    BadCase(Op.LSTM, "lstm_complex_x", lambda g: (np.zeros((T, B, I)) * 1j,) + _leaves(*LSTM_OK[1:])(g),
            lambda g, *a: g.lstm(*a), TypeError, "lstm: x"),
    BadCase(Op.LSTM, "lstm_forward_alias_bias", _leaves(*_with(LSTM_OK, 3, (4 * H, 1))),
            lambda g, *a: g.lstm_forward(*a), yscv.ShapeError, "lstm: bias"),
    BadCase(Op.GRU, "gru_bias_hh_size", _leaves(*_with(GRU_OK, 4, (4 * H,))),
            lambda g, *a: g.gru(*a), yscv.ShapeError, "gru: bias_hh"),
    BadCase(Op.GRU, "gru_bias_ih_size", _leaves(*_with(GRU_OK, 3, (2 * H,))),
            lambda g, *a: g.gru(*a), yscv.ShapeError, "gru: bias_ih"),
    BadCase(Op.GRU, "gru_w_hh_lstm_sized", _leaves(*_with(GRU_OK, 2, (H, 4 * H))),
            lambda g, *a: g.gru(*a), yscv.ShapeError, "gru: w_hh"),
    BadCase(Op.GRU, "gru_h0_shape", _leaves(*GRU_OK, (H,)),
            lambda g, *a: g.gru(*a), yscv.ShapeError, "gru: h0"),
    BadCase(Op.GRU, "gru_forward_alias_x", _leaves(*_with(GRU_OK, 0, (T,))),
            lambda g, *a: g.gru_forward(*a), yscv.ShapeError, "gru: x"),
    BadCase(Op.RNN, "rnn_unknown_nonlinearity", _leaves(*RNN_OK),
            lambda g, *a: g.rnn(*a, nonlinearity="sigmoid"), ValueError, "rnn: nonlinearity"),
    BadCase(Op.RNN, "rnn_nonlinearity_not_str", _leaves(*RNN_OK),
            lambda g, *a: g.rnn(*a, nonlinearity=None), ValueError, "rnn: nonlinearity"),
    BadCase(Op.RNN, "rnn_w_hh_not_square", _leaves(*_with(RNN_OK, 2, (H, H + 1))),
            lambda g, *a: g.rnn(*a), yscv.ShapeError, "rnn: w_hh"),
    BadCase(Op.RNN, "rnn_h0_shape", _leaves(*RNN_OK, (B, H + 1)),
            lambda g, *a: g.rnn(*a), yscv.ShapeError, "rnn: h0"),
    BadCase(Op.RNN, "rnn_foreign_node", lambda g: (yscv.Graph().variable(np.zeros((T, B, I))),)
            + _leaves(*RNN_OK[1:])(g), lambda g, *a: g.rnn(*a), yscv.NodeNotFoundError,
            "another graph"),
    BadCase(Op.RNN, "rnn_forward_alias_nonlinearity", _leaves(*RNN_OK),
            lambda g, *a: g.rnn_forward(*a, nonlinearity="gelu"), ValueError, "rnn: nonlinearity"),
]

test_forward, test_gradcheck, test_bad_arguments = make_op_tests(CASES, BAD)
test_second_order = make_second_order_tests(CASES)
_GRAD_ROWS = [c for c in CASES if c.check_grad]


@pytest.mark.parametrize("case", _GRAD_ROWS, ids=[c.id for c in _GRAD_ROWS])
def test_second_order_keeps_float32(case):
    check_second_order_float32(case)


def _sum_of_squares(g, nodes):
    total = g.sum(g.mul(nodes[0], nodes[0]))
    for d in nodes[1:]:
        total = g.add(total, g.sum(g.mul(d, d)))
    return total


def test_lstm_third_derivative_matches_pytorch():
    """An LSTM with initial states, differentiated three times with respect
    to every input (each order's recorded walk runs through the step-by-step
    composite of the previous one)."""
    torch = pytest.importorskip("torch")
    arrays = _inputs(4, states=2)(np.random.default_rng(22))
    g = yscv.Graph(np.float64)
    nodes = [g.variable(a) for a in arrays]
    y = g.lstm(*nodes)
    d1 = g.gradients(_sum_of_squares(g, [y]), nodes, create_graph=True)
    d2 = g.gradients(_sum_of_squares(g, d1), nodes, create_graph=True)
    d3 = g.gradients(_sum_of_squares(g, d2), nodes)
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    yt = _t_rnn("lstm")(torch, *ts)
    t1 = torch.autograd.grad((yt * yt).sum(), ts, create_graph=True)
    t2 = torch.autograd.grad(sum((d * d).sum() for d in t1), ts, create_graph=True)
    t3 = torch.autograd.grad(sum((d * d).sum() for d in t2), ts)
    for k in range(len(arrays)):
        np.testing.assert_allclose(g.value(d2[k]), t2[k].detach().numpy(), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(d3[k], t3[k].numpy(), rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("case", _GRAD_ROWS, ids=[c.id for c in _GRAD_ROWS])
def test_torch_build_is_the_rows_function(case):
    pytest.importorskip("torch")
    check_torch_build(case)


# --------------------------------------------------------- targeted tests
def test_lstm_saves_gates_and_cells_only():
    g = yscv.Graph()
    arrs = _inputs(4)(np.random.default_rng(0))
    before = g.memory()["saved"]
    g.lstm(*[g.variable(a) for a in arrs])
    assert g.memory()["saved"] - before == 4 * (T * B * 4 * H + (T + 1) * B * H)


def test_rnn_saves_nothing():
    g = yscv.Graph()
    g.rnn(*[g.variable(a) for a in _inputs(1)(np.random.default_rng(0))])
    assert g.memory()["saved"] == 0


@pytest.mark.parametrize("op", ["lstm", "gru", "rnn"])
def test_constant_input_and_state_get_no_work_but_weights_do(op):
    gates = {"lstm": 4, "gru": 3, "rnn": 1}[op]
    arrs = _inputs(gates, two_biases=(op == "gru"), states=1)(np.random.default_rng(1))
    g = yscv.Graph(np.float64)
    x = g.constant(arrs[0])
    params = [g.variable(a) for a in arrs[1:-1]]
    h0 = g.constant(arrs[-1])
    out = getattr(g, op)(x, *params, h0)
    g.backward(g.sum(out))
    assert g.grad(x) is None and g.grad(h0) is None
    for p in params:
        assert g.grad(p) is not None and np.all(np.isfinite(g.grad(p)))
        assert np.any(g.grad(p) != 0)


@pytest.mark.parametrize("op", ["lstm", "gru", "rnn"])
def test_float32_graph_keeps_float32_and_matches_float64(op):
    gates = {"lstm": 4, "gru": 3, "rnn": 1}[op]
    rng = np.random.default_rng(2)
    arrs = _inputs(gates, two_biases=(op == "gru"), states=1)(rng)
    arrs = (arrs[0] * 4,) + arrs[1:]  # saturating gates too
    res = {}
    for dt in (np.float32, np.float64):
        g = yscv.Graph(dt)
        nodes = [g.variable(a) for a in arrs]
        out = getattr(g, op)(*nodes)
        g.backward(g.sum(g.mul(out, out)))
        assert g.value(out).dtype == dt
        assert all(g.grad(n).dtype == dt for n in nodes)
        res[dt] = [g.value(out)] + [g.grad(n) for n in nodes]
    for a32, a64 in zip(res[np.float32], res[np.float64]):
        np.testing.assert_allclose(a32, a64, rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("op", ["lstm", "gru", "rnn"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nan_input_propagates(op, dtype):
    gates = {"lstm": 4, "gru": 3, "rnn": 1}[op]
    arrs = list(_inputs(gates, two_biases=(op == "gru"))(np.random.default_rng(3)))
    arrs[0] = arrs[0].copy()
    arrs[0][1, 0, 0] = np.nan
    g = yscv.Graph(dtype)
    out = g.value(getattr(g, op)(*[g.constant(a) for a in arrs]))
    assert np.all(np.isfinite(out[0])) and np.all(np.isnan(out[1, 0]))
    assert np.all(np.isfinite(out[:, 1]))


def test_lstm_extreme_inputs_saturate_without_overflow():
    for dt in (np.float32, np.float64):
        g = yscv.Graph(dt)
        arrs = _inputs(4, states=2)(np.random.default_rng(4))
        x = g.variable(arrs[0] * 1e3)
        out = g.lstm(x, *[g.variable(a) for a in arrs[1:]])
        v = g.value(out)
        assert np.all(np.isfinite(v)) and np.all(np.abs(v) <= 1)
        g.backward(g.sum(out))
        assert np.all(np.isfinite(g.grad(x)))


def test_failed_call_leaves_graph_unchanged_with_array_operands():
    g = yscv.Graph()
    x = g.variable(np.zeros((T, B, I)))
    n = len(g)
    with pytest.raises(yscv.ShapeError, match="lstm: bias"):
        g.lstm(x, np.zeros((I, 4 * H)), np.zeros((H, 4 * H)), np.zeros(3 * H))
    assert len(g) == n


# -------------------------------------------------------- PyTorch checks
def _torch_module(torch, op, arrs):
    cls = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU, "rnn": torch.nn.RNN}[op]
    m = cls(I, H).double()
    with torch.no_grad():
        m.weight_ih_l0.copy_(torch.from_numpy(arrs[1].T.copy()))
        m.weight_hh_l0.copy_(torch.from_numpy(arrs[2].T.copy()))
        m.bias_ih_l0.copy_(torch.from_numpy(arrs[3]))
        if op == "gru":
            m.bias_hh_l0.copy_(torch.from_numpy(arrs[4]))
        else:  # ours has one bias: PyTorch's b_ih + b_hh
            m.bias_hh_l0.zero_()
    return m


@pytest.mark.parametrize("op", ["lstm", "gru", "rnn"])
@pytest.mark.parametrize("batched", [True, False])
def test_matches_pytorch_outputs_and_gradients(op, batched):
    torch = pytest.importorskip("torch")
    gates = {"lstm": 4, "gru": 3, "rnn": 1}[op]
    nstate = 2 if op == "lstm" else 1
    arrs = _inputs(gates, batched=batched, states=nstate,
                   two_biases=(op == "gru"))(np.random.default_rng(5))
    nw = 5 if op == "gru" else 4
    g = yscv.Graph(np.float64)
    nodes = [g.variable(a) for a in arrs]
    out = getattr(g, op)(*nodes)
    cot = np.random.default_rng(6).standard_normal(g.value(out).shape)
    g.backward(out, grad=cot)

    m = _torch_module(torch, op, arrs)
    xt = torch.from_numpy(arrs[0].copy()).requires_grad_(True)
    states = [torch.from_numpy(s[None].copy()).requires_grad_(True) for s in arrs[nw:]]
    if op == "lstm":
        tout, _ = m(xt, tuple(states))
    else:
        tout, _ = m(xt, states[0])
    tout.backward(torch.from_numpy(cot))
    np.testing.assert_allclose(g.value(out), tout.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(g.grad(nodes[0]), xt.grad.numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(g.grad(nodes[1]), m.weight_ih_l0.grad.numpy().T, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(g.grad(nodes[2]), m.weight_hh_l0.grad.numpy().T, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(g.grad(nodes[3]), m.bias_ih_l0.grad.numpy(), rtol=1e-9, atol=1e-12)
    if op == "gru":
        np.testing.assert_allclose(g.grad(nodes[4]), m.bias_hh_l0.grad.numpy(), rtol=1e-9, atol=1e-12)
    for n, s in zip(nodes[nw:], states):
        np.testing.assert_allclose(g.grad(n), s.grad.numpy()[0], rtol=1e-9, atol=1e-12)


def test_lstm_float32_matches_pytorch_at_bench_size():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(8)
    t, b, i, h = 16, 8, 32, 64
    k = 1 / np.sqrt(h)
    x = rng.standard_normal((t, b, i)).astype(np.float32)
    w_ih = rng.uniform(-k, k, (i, 4 * h)).astype(np.float32)
    w_hh = rng.uniform(-k, k, (h, 4 * h)).astype(np.float32)
    bias = rng.uniform(-k, k, 4 * h).astype(np.float32)
    g = yscv.Graph()
    nodes = [g.variable(a) for a in (x, w_ih, w_hh, bias)]
    out = g.lstm(*nodes)
    g.backward(g.mean(g.mul(out, out)))
    m = torch.nn.LSTM(i, h)
    with torch.no_grad():
        m.weight_ih_l0.copy_(torch.from_numpy(w_ih.T.copy()))
        m.weight_hh_l0.copy_(torch.from_numpy(w_hh.T.copy()))
        m.bias_ih_l0.copy_(torch.from_numpy(bias))
        m.bias_hh_l0.zero_()
    xt = torch.from_numpy(x).requires_grad_(True)
    tout, _ = m(xt)
    (tout * tout).mean().backward()
    np.testing.assert_allclose(g.value(out), tout.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g.grad(nodes[0]), xt.grad.numpy(), rtol=1e-4, atol=1e-8)
    np.testing.assert_allclose(g.grad(nodes[2]), m.weight_hh_l0.grad.numpy().T, rtol=1e-4, atol=1e-8)


def test_backward_from_two_threads_at_once_matches_sequential():
    # the backward passes reuse per-thread scratch buffers: concurrent graphs
    # in two threads must not see each other's temporaries
    import threading

    def run(seed, results, key):
        arrs = _inputs(4, states=2)(np.random.default_rng(seed))
        arrs = tuple(np.repeat(a, 8, axis=0) if a.ndim == 3 else a for a in arrs)  # T = 24
        g = yscv.Graph(np.float64)
        nodes = [g.variable(a) for a in arrs]
        for _ in range(5):
            g.zero_grads()
            g.backward(g.sum(g.mul(g.lstm(*nodes), g.lstm(*nodes))))
        results[key] = [g.grad(n).copy() for n in nodes]

    seq, par = {}, {}
    for s in (10, 11):
        run(s, seq, s)
    threads = [threading.Thread(target=run, args=(s, par, s)) for s in (10, 11)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for s in (10, 11):
        for a, b in zip(seq[s], par[s]):
            np.testing.assert_array_equal(a, b)


# ------------------------------------------------------ batch row blocks
# The sequence kernels run the batch in blocks of rows, on two threads. The
# small OpCase sizes above use one block; these tests force several, with
# sizes that exercise every GEMM tile path (B not a multiple of 4, H not a
# multiple of the vector width).
from yscv import runtime  # noqa: E402
from yscv.compute import regions as _par  # noqa: E402
from yscv.compute import recurrent as _rec  # noqa: E402


@pytest.mark.parametrize("B_", [1, 7, 15, 16, 17, 40, 1000])
def test_row_blocks_cover_the_batch_in_tiles_of_four(B_):
    for work in (1, 10**6, 10**9):
        blocks = _rec.row_blocks(B_, work)
        assert blocks[0][0] == 0 and blocks[-1][1] == B_
        assert all(a[1] == b[0] for a, b in zip(blocks, blocks[1:]))
        assert all(lo % 4 == 0 and hi > lo for lo, hi in blocks)
        assert len(blocks) <= _par.MAX_CHUNKS
        assert blocks == _rec.row_blocks(B_, work)  # sizes only


@pytest.fixture
def small_blocks(monkeypatch):
    """Split even tiny problems into blocks of at least 4 rows."""
    monkeypatch.setattr(_rec, "BLOCK_WORK", 1)
    monkeypatch.setattr(_rec, "MIN_BLOCK_ROWS", 4)


def _block_case(op, B_, H_, states, seed=12):
    gates = {"lstm": 4, "gru": 3, "rnn": 1}[op]
    rng = np.random.default_rng(seed)
    T_, I_ = 5, 7
    k = 1 / np.sqrt(H_)
    arrs = [rng.standard_normal((T_, B_, I_)), rng.uniform(-k, k, (I_, gates * H_)),
            rng.uniform(-k, k, (H_, gates * H_)), rng.uniform(-k, k, gates * H_)]
    if op == "gru":
        arrs.append(rng.uniform(-k, k, gates * H_))
    arrs += [rng.standard_normal((B_, H_)) for _ in range(states)]
    return arrs


REFS = {"lstm": ref_lstm, "gru": ref_gru, "rnn": ref_rnn}


@pytest.mark.parametrize("op", ["lstm", "gru", "rnn"])
def test_several_blocks_match_reference_and_gradcheck(op, small_blocks):
    states = {"lstm": 2, "gru": 1, "rnn": 1}[op]
    arrs = _block_case(op, 13, 21, states)          # blocks [0, 4), [4, 8), [8, 13)
    assert len(_rec.row_blocks(13, 10**6)) == 3
    g = yscv.Graph(np.float64)
    out = getattr(g, op)(*[g.constant(a) for a in arrs])
    np.testing.assert_allclose(g.value(out), REFS[op](*arrs), rtol=1e-12, atol=1e-13)
    small = _block_case(op, 9, 5, states, seed=13)  # blocks [0, 4), [4, 9)
    assert yscv.gradcheck(lambda g, *n: g.sum(g.mul(getattr(g, op)(*n), getattr(g, op)(*n))),
                          small)


@pytest.mark.parametrize("op", ["lstm", "gru", "rnn"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_blocks_give_the_same_bits_on_one_thread_or_two(op, dtype, monkeypatch):
    states = {"lstm": 2, "gru": 1, "rnn": 1}[op]
    arrs = _block_case(op, 20, 37, states)

    def run():
        g = yscv.Graph(dtype)
        nodes = [g.variable(a) for a in arrs]
        out = getattr(g, op)(*nodes)
        g.backward(g.sum(g.mul(out, out)))
        return [g.value(out).copy()] + [g.grad(n).copy() for n in nodes]

    monkeypatch.setattr(_rec, "BLOCK_WORK", 1)
    assert len(_rec.row_blocks(20, 10**6)) == 2
    monkeypatch.setattr(runtime.threads, "_num_threads", 0 + 1)
    one = run()
    monkeypatch.setattr(runtime.threads, "_num_threads", 1 + 1)
    for _ in range(3):
        for a, b in zip(one, run()):
            np.testing.assert_array_equal(a, b)


# ------------------------------------------------ LSTM final cell state
def ref_lstm_cell(x, w_ih, w_hh, b, h0=None, c0=None):
    """The final cell state c_{T-1} of :func:`ref_lstm` ([B, H] or [H])."""
    return _ref_lstm_run(x, w_ih, w_hh, b, h0, c0)[1]


def _both_loss(g, hs, c_n):
    """A loss on both outputs with unequal weights per element."""
    wh = np.linspace(-1.0, 2.0, int(np.prod(g.value(hs).shape))).reshape(g.value(hs).shape)
    wc = np.linspace(1.5, -0.5, int(np.prod(g.value(c_n).shape))).reshape(g.value(c_n).shape)
    return g.add(g.sum(g.mul(g.mul(hs, hs), wh)), g.sum(g.mul(g.tanh(c_n), wc)))


@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("states", [0, 1, 2])
def test_lstm_return_cell_values_and_gradcheck(batched, states):
    arrs = _inputs(4, batched=batched, states=states)(np.random.default_rng(20 + states))
    for dt in (np.float32, np.float64):
        g = yscv.Graph(dt)
        hs, c_n = g.lstm(*[g.constant(a) for a in arrs], return_cell=True)
        tol = 1e-5 if dt == np.float32 else 1e-12
        np.testing.assert_allclose(g.value(hs), ref_lstm(*arrs), rtol=tol, atol=tol)
        np.testing.assert_allclose(g.value(c_n), ref_lstm_cell(*arrs), rtol=tol, atol=tol)
        assert g.value(c_n).dtype == dt and g.value(c_n).shape == ((B, H) if batched else (H,))
    assert yscv.gradcheck(lambda g, *n: _both_loss(g, *g.lstm(*n, return_cell=True)), arrs)
    # a gradient reaching c_n alone (hs unused) flows to every input as well
    def cell_only(g, *n):
        c_n = g.lstm(*n, return_cell=True)[1]
        return g.sum(g.mul(c_n, c_n))
    assert yscv.gradcheck(cell_only, arrs)


def test_lstm_return_cell_false_is_unchanged():
    arrs = _inputs(4, states=2)(np.random.default_rng(21))
    g = yscv.Graph(np.float64)
    nodes = [g.variable(a) for a in arrs]
    n = len(g)
    hs = g.lstm(*nodes)
    assert len(g) == n + 1 and g.op(hs) == Op.LSTM and g.value(hs).shape == (T, B, H)
    hs2, c_n = g.lstm(*nodes, return_cell=True)
    assert len(g) == n + 4  # the packed LSTM node and the two selections
    packed = g.inputs(hs2)[0]
    assert g.op(packed) == Op.LSTM and g.inputs(c_n) == (packed,)
    assert g.value(packed).shape == (T + 1, B, H)
    np.testing.assert_array_equal(g.value(hs2), g.value(hs))
    hs3, c3 = g.lstm_forward(*nodes, return_cell=True)  # the alias takes it too
    np.testing.assert_array_equal(g.value(c3), g.value(c_n))


def test_lstm_return_cell_several_blocks(small_blocks):
    arrs = _block_case("lstm", 13, 21, 2)
    assert len(_rec.row_blocks(13, 10**6)) == 3
    g = yscv.Graph(np.float64)
    hs, c_n = g.lstm(*[g.constant(a) for a in arrs], return_cell=True)
    np.testing.assert_allclose(g.value(c_n), ref_lstm_cell(*arrs), rtol=1e-12, atol=1e-13)
    small = _block_case("lstm", 9, 5, 2, seed=13)
    assert yscv.gradcheck(lambda g, *n: _both_loss(g, *g.lstm(*n, return_cell=True)), small)


@pytest.mark.parametrize("bad", ["yes", 1, None])
def test_lstm_return_cell_bad_argument(bad):
    g = yscv.Graph()
    nodes = [g.variable(np.zeros(s)) for s in LSTM_OK]
    n = len(g)
    with pytest.raises(TypeError, match="lstm: return_cell must be a bool"):
        g.lstm(*nodes, return_cell=bad)
    assert len(g) == n


@pytest.mark.parametrize("batched", [True, False])
def test_lstm_final_cell_matches_pytorch(batched):
    torch = pytest.importorskip("torch")
    arrs = _inputs(4, batched=batched, states=2)(np.random.default_rng(22))
    g = yscv.Graph(np.float64)
    nodes = [g.variable(a) for a in arrs]
    hs, c_n = g.lstm(*nodes, return_cell=True)
    rng = np.random.default_rng(23)
    cot_h = rng.standard_normal(g.value(hs).shape)
    cot_c = rng.standard_normal(g.value(c_n).shape)
    g.backward(g.add(g.sum(g.mul(hs, cot_h)), g.sum(g.mul(c_n, cot_c))))

    m = _torch_module(torch, "lstm", arrs)
    xt = torch.from_numpy(arrs[0].copy()).requires_grad_(True)
    states = [torch.from_numpy(s[None].copy()).requires_grad_(True) for s in arrs[4:]]
    tout, (_, tc) = m(xt, tuple(states))
    ((tout * torch.from_numpy(cot_h)).sum() + (tc[0] * torch.from_numpy(cot_c)).sum()).backward()
    np.testing.assert_allclose(g.value(c_n), tc[0].detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(g.value(hs), tout.detach().numpy(), rtol=1e-10, atol=1e-12)
    for n, want in [(nodes[0], xt.grad), (nodes[1], m.weight_ih_l0.grad.T),
                    (nodes[2], m.weight_hh_l0.grad.T), (nodes[3], m.bias_ih_l0.grad)]:
        np.testing.assert_allclose(g.grad(n), want.numpy(), rtol=1e-9, atol=1e-12)
    for n, s in zip(nodes[4:], states):
        np.testing.assert_allclose(g.grad(n), s.grad.numpy()[0], rtol=1e-9, atol=1e-12)


def test_lstm_two_chunk_truncated_bptt_matches_pytorch():
    """Chunk 2 starts from chunk 1's (h_n, c_n) as detached values; the
    weight gradients accumulate over both chunks, as in PyTorch."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(24)
    arrs = _inputs(4)(rng)
    chunks = [rng.uniform(-1.5, 1.5, (T, B, I)) for _ in range(2)]
    grads = [np.zeros_like(a) for a in arrs[1:]]
    state, losses = None, []
    for xc in chunks:  # a fresh graph per chunk: the state arrives as values
        g = yscv.Graph(np.float64)
        w = [g.variable(a) for a in arrs[1:]]
        h0, c0 = (None, None) if state is None else (g.constant(state[0]), g.constant(state[1]))
        hs, c_n = g.lstm(g.constant(xc), *w, h0, c0, return_cell=True)
        h_n = g.select(hs, 0, T - 1)
        loss = g.add(g.mean(g.mul(hs, hs)), g.mean(c_n))
        g.backward(loss)
        losses.append(float(g.value(loss)))
        for acc, n in zip(grads, w):
            acc += g.grad(n)
        state = (g.value(h_n).copy(), g.value(c_n).copy())

    m = _torch_module(torch, "lstm", (None,) + tuple(arrs[1:]))
    tstate, tlosses = None, []
    for xc in chunks:
        out, (th, tc) = m(torch.from_numpy(xc), tstate)
        loss = (out * out).mean() + tc.mean()
        loss.backward()
        tlosses.append(loss.item())
        tstate = (th.detach(), tc.detach())
    np.testing.assert_allclose(losses, tlosses, rtol=1e-12)
    np.testing.assert_allclose(state[1], tstate[1][0].numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(grads[0], m.weight_ih_l0.grad.numpy().T, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(grads[1], m.weight_hh_l0.grad.numpy().T, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(grads[2], m.bias_ih_l0.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_lstm_return_cell_inside_checkpoint_gives_the_same_gradients():
    arrs = _inputs(4, states=2)(np.random.default_rng(25))

    def run(ckpt):
        g = yscv.Graph(np.float64)
        nodes = [g.variable(a) for a in arrs]
        fn = lambda g, *n: g.lstm(*n, return_cell=True)  # noqa: E731
        hs, c_n = g.checkpoint(fn, *nodes) if ckpt else fn(g, *nodes)
        g.backward(_both_loss(g, hs, c_n))
        return [g.grad(n) for n in nodes]

    for a, b in zip(run(False), run(True)):
        np.testing.assert_array_equal(a, b)
