"""scaled_dot_product_attention: NumPy reference for every option, float64
gradcheck, bad arguments, fully masked rows, PyTorch cross-checks."""
import numpy as np
import pytest

import yscv
from yscv import Op
from yscv.testing import (BadCase, OpCase, check_second_order_float32, check_torch_build,
                          make_op_tests, make_second_order_tests)


def ref_sdpa(q, k, v, mask=None, causal=False, scale=None):
    """Plain NumPy: masked scores set to -inf, rows with nothing allowed -> 0.
    A floating mask is added to the scaled scores; its -inf entries block."""
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    s = np.matmul(q, np.swapaxes(k, -1, -2)) * scale
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    s = np.broadcast_to(s, lead + s.shape[-2:])
    sq, sk = s.shape[-2:]
    allow = np.ones(s.shape, dtype=bool)
    if mask is not None and np.asarray(mask).dtype.kind == "f":
        s = s + mask
        allow &= np.asarray(mask) != -np.inf
    elif mask is not None:
        allow &= mask
    if causal:
        allow &= np.arange(sk)[None, :] <= np.arange(sq)[:, None]
    out = np.zeros(lead + (sq, v.shape[-1]))
    vb = np.broadcast_to(v, lead + v.shape[-2:])
    for idx in np.ndindex(*lead):
        for i in range(sq):
            a = allow[idx][i]
            if not a.any():
                continue
            row = s[idx][i][a]
            w = np.exp(row - row.max())
            w /= w.sum()
            out[idx][i] = w @ vb[idx][a]
    return out


def _qkv(qs, ks, vs):
    return lambda rng: (rng.standard_normal(qs), rng.standard_normal(ks), rng.standard_normal(vs))


MASK = np.random.default_rng(11).random((2, 4, 5)) > 0.35
MASK[0, 1, :] = True
MASK_ROW_EMPTY = MASK.copy()
MASK_ROW_EMPTY[1, 2, :] = False                  # query 2 of batch 1 attends nothing
MASK_KEYS = np.array([True, True, False, True, False])   # [Sk], broadcast over queries
MASK_HEADS = np.random.default_rng(12).random((2, 1, 3, 3)) > 0.3  # broadcast over heads
# floating (additive) masks: finite values and -inf (blocks), PyTorch's attn_mask semantics
FMASK = np.where(MASK, np.random.default_rng(13).standard_normal(MASK.shape), -np.inf)
FMASK_ROW_EMPTY = np.where(MASK_ROW_EMPTY, FMASK, -np.inf)   # query 2 of batch 1: all -inf
FMASK_KEYS = np.array([0.5, -1.0, -np.inf, 2.0, 0.0])        # [Sk], broadcast over queries
# with causal=True, MASK leaves query 0 of batch 0 nothing to attend (a zero
# row here, NaN in PyTorch): the same masks with key 0 open for every query
# are the rows compared with PyTorch
MASK_KEY0 = MASK.copy()
MASK_KEY0[..., 0] = True
FMASK_KEY0 = FMASK.copy()
FMASK_KEY0[..., 0] = 0.25


def _t_sdpa(mask=None, causal=False, scale=None):
    """torch_build: F.scaled_dot_product_attention on its math backend (the
    CPU flash kernel, which PyTorch picks for 4-d inputs, has no double
    backward). PyTorch refuses attn_mask with is_causal, so a causal row with
    a mask gives it the merged mask."""
    def build(t, q, k, v):
        from torch.nn.attention import SDPBackend, sdpa_kernel

        m = mask
        if causal and m is not None:
            sq, sk = q.shape[-2], k.shape[-2]
            tril = np.tril(np.ones((sq, sk), dtype=bool))
            m = m & tril if m.dtype == np.bool_ else np.where(tril, m, -np.inf)
        with sdpa_kernel(SDPBackend.MATH):
            return t.nn.functional.scaled_dot_product_attention(
                q, k, v, attn_mask=None if m is None else t.tensor(m),
                is_causal=causal and m is None, scale=scale)
    return build


def _case(name, build, shapes, ref, **kw):
    return OpCase(Op.SCALED_DOT_PRODUCT_ATTENTION, build, reference=ref, inputs=_qkv(*shapes),
                  name=name, **kw)


S = (2, 4, 3), (2, 5, 3), (2, 5, 2)        # Sq=4 != Sk=5, D=3, Dv=2

CASES = [
    _case("sdpa_no_mask", lambda g, q, k, v: g.scaled_dot_product_attention(q, k, v),
          ((2, 4, 3), (2, 4, 3), (2, 4, 2)), ref_sdpa,
          torch_build=_t_sdpa()),
    _case("sdpa_sq_ne_sk", lambda g, q, k, v: g.scaled_dot_product_attention(q, k, v), S, ref_sdpa,
          torch_build=_t_sdpa()),
    _case("sdpa_bool_mask", lambda g, q, k, v: g.scaled_dot_product_attention(q, k, v, mask=MASK),
          S, lambda q, k, v: ref_sdpa(q, k, v, mask=MASK),
          torch_build=_t_sdpa(MASK)),
    _case("sdpa_mask_broadcast_keys",
          lambda g, q, k, v: g.scaled_dot_product_attention(q, k, v, mask=MASK_KEYS),
          S, lambda q, k, v: ref_sdpa(q, k, v, mask=MASK_KEYS),
          torch_build=_t_sdpa(MASK_KEYS)),
    _case("sdpa_causal_square",
          lambda g, q, k, v: g.scaled_dot_product_attention(q, k, v, causal=True),
          ((2, 4, 3), (2, 4, 3), (2, 4, 2)), lambda q, k, v: ref_sdpa(q, k, v, causal=True),
          torch_build=_t_sdpa(causal=True)),
    _case("sdpa_causal_sq_lt_sk",
          lambda g, q, k, v: g.scaled_dot_product_attention(q, k, v, causal=True),
          S, lambda q, k, v: ref_sdpa(q, k, v, causal=True),
          torch_build=_t_sdpa(causal=True)),
    _case("sdpa_causal_sq_gt_sk",
          lambda g, q, k, v: g.scaled_dot_product_attention(q, k, v, causal=True),
          ((2, 5, 3), (2, 3, 3), (2, 3, 2)), lambda q, k, v: ref_sdpa(q, k, v, causal=True),
          torch_build=_t_sdpa(causal=True)),
    _case("sdpa_causal_and_mask",
          lambda g, q, k, v: g.scaled_dot_product_attention(q, k, v, mask=MASK, causal=True),
          S, lambda q, k, v: ref_sdpa(q, k, v, mask=MASK, causal=True)),
    _case("sdpa_explicit_scale",
          lambda g, q, k, v: g.scaled_dot_product_attention(q, k, v, scale=0.7),
          S, lambda q, k, v: ref_sdpa(q, k, v, scale=0.7),
          torch_build=_t_sdpa(scale=0.7)),
    _case("sdpa_head_axis_and_head_broadcast_mask",
          lambda g, q, k, v: g.scaled_dot_product_attention(q, k, v, mask=MASK_HEADS),
          ((2, 2, 3, 2), (2, 2, 3, 2), (2, 2, 3, 2)),
          lambda q, k, v: ref_sdpa(q, k, v, mask=MASK_HEADS),
          torch_build=_t_sdpa(MASK_HEADS)),
    _case("sdpa_kv_shared_across_heads",
          lambda g, q, k, v: g.scaled_dot_product_attention(q, k, v),
          ((2, 2, 3, 2), (2, 1, 4, 2), (1, 4, 3)), ref_sdpa,
          torch_build=_t_sdpa()),
    _case("sdpa_2d_no_lead", lambda g, q, k, v: g.scaled_dot_product_attention(q, k, v),
          ((4, 3), (6, 3), (6, 5)), ref_sdpa,
          torch_build=_t_sdpa()),
    _case("sdpa_float_mask",
          lambda g, q, k, v: g.scaled_dot_product_attention(q, k, v, mask=FMASK),
          S, lambda q, k, v: ref_sdpa(q, k, v, mask=FMASK),
          torch_build=_t_sdpa(FMASK)),
    _case("sdpa_float_mask_broadcast_keys",
          lambda g, q, k, v: g.scaled_dot_product_attention(q, k, v, mask=FMASK_KEYS),
          S, lambda q, k, v: ref_sdpa(q, k, v, mask=FMASK_KEYS),
          torch_build=_t_sdpa(FMASK_KEYS)),
    _case("sdpa_float_mask_and_causal",
          lambda g, q, k, v: g.scaled_dot_product_attention(q, k, v, mask=FMASK, causal=True),
          S, lambda q, k, v: ref_sdpa(q, k, v, mask=FMASK, causal=True)),
    _case("sdpa_float_mask_fully_masked_row",
          lambda g, q, k, v: g.scaled_dot_product_attention(q, k, v, mask=FMASK_ROW_EMPTY),
          S, lambda q, k, v: ref_sdpa(q, k, v, mask=FMASK_ROW_EMPTY)),
    _case("sdpa_float_mask_explicit_scale",
          lambda g, q, k, v: g.scaled_dot_product_attention(q, k, v, mask=FMASK, scale=0.4),
          S, lambda q, k, v: ref_sdpa(q, k, v, mask=FMASK, scale=0.4),
          torch_build=_t_sdpa(FMASK, scale=0.4)),
    _case("sdpa_fully_masked_row",
          lambda g, q, k, v: g.scaled_dot_product_attention(q, k, v, mask=MASK_ROW_EMPTY),
          S, lambda q, k, v: ref_sdpa(q, k, v, mask=MASK_ROW_EMPTY)),
    # (the four rows above without torch_build have a row with nothing to
    # attend: zero here, NaN in PyTorch; gradgradcheck still runs on them)
    _case("sdpa_causal_and_mask_every_row_attends",
          lambda g, q, k, v: g.scaled_dot_product_attention(q, k, v, mask=MASK_KEY0, causal=True),
          S, lambda q, k, v: ref_sdpa(q, k, v, mask=MASK_KEY0, causal=True),
          torch_build=_t_sdpa(MASK_KEY0, causal=True)),
    _case("sdpa_float_mask_and_causal_every_row_attends",
          lambda g, q, k, v: g.scaled_dot_product_attention(q, k, v, mask=FMASK_KEY0, causal=True),
          S, lambda q, k, v: ref_sdpa(q, k, v, mask=FMASK_KEY0, causal=True),
          torch_build=_t_sdpa(FMASK_KEY0, causal=True)),
]


def _leaves(*shapes):
    return lambda g: tuple(g.variable(np.zeros(s)) for s in shapes)


OK = ((2, 4, 3), (2, 5, 3), (2, 5, 2))
_SDPA = Op.SCALED_DOT_PRODUCT_ATTENTION
_NAME = "scaled_dot_product_attention"
BAD = [
    BadCase(_SDPA, "sdpa_q_1d", _leaves((3,), (5, 3), (5, 2)),
            lambda g, *a: g.scaled_dot_product_attention(*a), yscv.ShapeError, f"{_NAME}: q must"),
    BadCase(_SDPA, "sdpa_depth_mismatch", _leaves((2, 4, 3), (2, 5, 4), (2, 5, 2)),
            lambda g, *a: g.scaled_dot_product_attention(*a), yscv.ShapeError, "same depth D"),
    BadCase(_SDPA, "sdpa_kv_length_mismatch", _leaves((2, 4, 3), (2, 5, 3), (2, 6, 2)),
            lambda g, *a: g.scaled_dot_product_attention(*a), yscv.ShapeError, "same length Sk"),
    BadCase(_SDPA, "sdpa_lead_not_broadcastable", _leaves((2, 4, 3), (3, 5, 3), (3, 5, 2)),
            lambda g, *a: g.scaled_dot_product_attention(*a), yscv.ShapeError, "do not broadcast"),
    BadCase(_SDPA, "sdpa_mask_int", _leaves(*OK),
            lambda g, *a: g.scaled_dot_product_attention(*a, mask=np.ones((4, 5), np.int64)),
            TypeError, f"{_NAME}: mask must be a boolean array .* or a floating array .* int64"),
    BadCase(_SDPA, "sdpa_mask_complex", _leaves(*OK),
            lambda g, *a: g.scaled_dot_product_attention(*a, mask=np.zeros((4, 5), complex)),
            TypeError, f"{_NAME}: mask must be .*complex128"),
    BadCase(_SDPA, "sdpa_float_mask_not_broadcastable", _leaves(*OK),
            lambda g, *a: g.scaled_dot_product_attention(*a, mask=np.zeros((5, 4))),
            yscv.ShapeError, f"{_NAME}: mask of shape"),
    BadCase(_SDPA, "sdpa_mask_not_broadcastable", _leaves(*OK),
            lambda g, *a: g.scaled_dot_product_attention(*a, mask=np.ones((5, 4), bool)),
            yscv.ShapeError, f"{_NAME}: mask of shape"),
    BadCase(_SDPA, "sdpa_mask_would_enlarge_output", _leaves(*OK),
            lambda g, *a: g.scaled_dot_product_attention(*a, mask=np.ones((3, 2, 4, 5), bool)),
            yscv.ShapeError, "mask of shape"),
    BadCase(_SDPA, "sdpa_causal_not_bool", _leaves(*OK),
            lambda g, *a: g.scaled_dot_product_attention(*a, causal="yes"), TypeError, "causal"),
    BadCase(_SDPA, "sdpa_scale_not_number", _leaves(*OK),
            lambda g, *a: g.scaled_dot_product_attention(*a, scale="0.5"), TypeError, "scale"),
    BadCase(_SDPA, "sdpa_scale_not_finite", _leaves(*OK),
            lambda g, *a: g.scaled_dot_product_attention(*a, scale=float("inf")), ValueError, "scale"),
    BadCase(_SDPA, "sdpa_v_complex", lambda g: _leaves((2, 4, 3), (2, 5, 3))(g) + (np.zeros((2, 5, 2)) * 1j,),
            lambda g, *a: g.scaled_dot_product_attention(*a), TypeError, f"{_NAME}: v"),
]

test_forward, test_gradcheck, test_bad_arguments = make_op_tests(CASES, BAD)
test_second_order = make_second_order_tests(CASES)
_GRAD_ROWS = [c for c in CASES if c.check_grad]
_TORCH_ROWS = [c for c in CASES if c.torch_build is not None]


@pytest.mark.parametrize("case", _GRAD_ROWS, ids=[c.id for c in _GRAD_ROWS])
def test_second_order_keeps_float32(case):
    check_second_order_float32(case)


@pytest.mark.parametrize("case", _TORCH_ROWS, ids=[c.id for c in _TORCH_ROWS])
def test_torch_build_is_the_rows_function(case):
    pytest.importorskip("torch")
    check_torch_build(case)


# --------------------------------------------------------- targeted tests
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mask, seed", [(MASK_ROW_EMPTY, 0), (FMASK_ROW_EMPTY, 30)],
                         ids=["bool_all_false", "float_all_minus_inf"])
def test_fully_masked_row_gives_zeros_and_zero_gradients(dtype, mask, seed):
    """A row with nothing to attend (all False, or all -inf in a float mask)."""
    rng = np.random.default_rng(seed)
    q, k, v = rng.standard_normal((2, 4, 3)), rng.standard_normal((2, 5, 3)), rng.standard_normal((2, 5, 2))
    g = yscv.Graph(dtype)
    qn, kn, vn = g.variable(q), g.variable(k), g.variable(v)
    out = g.scaled_dot_product_attention(qn, kn, vn, mask=mask)
    val = g.value(out)
    assert val.dtype == dtype and np.all(np.isfinite(val))
    np.testing.assert_array_equal(val[1, 2], 0.0)
    cot = np.zeros(val.shape)
    cot[1, 2] = 1.0  # only the empty row receives gradient
    g.backward(out, grad=cot)
    for n in (qn, kn, vn):
        np.testing.assert_array_equal(g.grad(n), 0.0)


def test_no_key_at_all_gives_zeros():
    g = yscv.Graph(np.float64)
    q = g.variable(np.ones((3, 2)))
    out = g.scaled_dot_product_attention(q, g.variable(np.ones((0, 2))), g.variable(np.ones((0, 4))))
    np.testing.assert_array_equal(g.value(out), np.zeros((3, 4)))


def test_masked_keys_get_no_gradient():
    rng = np.random.default_rng(1)
    g = yscv.Graph(np.float64)
    q, k, v = (g.variable(rng.standard_normal(s)) for s in ((4, 3), (5, 3), (5, 2)))
    mask = np.array([True, False, True, True, False])
    g.backward(g.sum(g.scaled_dot_product_attention(q, k, v, mask=mask)))
    np.testing.assert_array_equal(g.grad(k)[~mask], 0.0)
    np.testing.assert_array_equal(g.grad(v)[~mask], 0.0)
    assert np.all(g.grad(v)[mask] != 0)


def test_saves_probabilities_only():
    g = yscv.Graph()
    q, k, v = (g.variable(np.zeros(s)) for s in ((2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 5)))
    g.scaled_dot_product_attention(q, k, v)
    assert g.memory()["saved"] == 4 * 2 * 3 * 4 * 6


def test_mask_is_copied_at_build_time():
    rng = np.random.default_rng(2)
    q, k, v = rng.standard_normal((4, 3)), rng.standard_normal((5, 3)), rng.standard_normal((5, 2))
    mask = np.ones((4, 5), bool)
    g = yscv.Graph(np.float64)
    out = g.scaled_dot_product_attention(g.variable(q), g.variable(k), g.variable(v), mask=mask)
    mask[:] = False
    np.testing.assert_allclose(g.value(out), ref_sdpa(q, k, v), rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nan_score_propagates(dtype):
    q = np.ones((3, 2))
    q[1, 0] = np.nan
    g = yscv.Graph(dtype)
    out = g.value(g.scaled_dot_product_attention(g.constant(q), g.constant(np.ones((4, 2))),
                                                 g.constant(np.ones((4, 2)))))
    assert np.all(np.isnan(out[1])) and np.all(np.isfinite(out[[0, 2]]))


def test_large_scores_are_stable_in_float32():
    rng = np.random.default_rng(3)
    q, k, v = rng.standard_normal((8, 16)) * 30, rng.standard_normal((8, 16)) * 30, rng.standard_normal((8, 4))
    g = yscv.Graph(np.float32)
    out = g.scaled_dot_product_attention(g.variable(q), g.variable(k), g.variable(v))
    np.testing.assert_allclose(g.value(out), ref_sdpa(q, k, v), rtol=1e-3, atol=1e-4)


# -------------------------------------------------------- PyTorch checks
@pytest.mark.parametrize("kw", [
    {}, {"mask": True}, {"causal": True}, {"scale": 0.3}, {"causal": True, "sq": 3},
    {"causal": True, "sq": 7},
], ids=["plain", "mask", "causal", "scale", "causal_sq_lt_sk", "causal_sq_gt_sk"])
def test_matches_pytorch(kw):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    rng = np.random.default_rng(4)
    sq = kw.get("sq", 5)
    q = rng.standard_normal((2, 3, sq, 4))
    k = rng.standard_normal((2, 3, 5, 4))
    v = rng.standard_normal((2, 3, 5, 6))
    mask = rng.random((2, 1, sq, 5)) > 0.3 if kw.get("mask") else None
    if mask is not None:
        mask[..., 0] = True  # PyTorch gives NaN for empty rows; keep rows non-empty
    g = yscv.Graph(np.float64)
    nodes = [g.variable(a) for a in (q, k, v)]
    out = g.scaled_dot_product_attention(*nodes, mask=mask, causal=kw.get("causal", False),
                                         scale=kw.get("scale"))
    cot = rng.standard_normal(g.value(out).shape)
    g.backward(out, grad=cot)
    ts = [torch.from_numpy(a.copy()).requires_grad_(True) for a in (q, k, v)]
    tout = F.scaled_dot_product_attention(
        *ts, attn_mask=None if mask is None else torch.from_numpy(mask),
        is_causal=kw.get("causal", False), scale=kw.get("scale"))
    tout.backward(torch.from_numpy(cot))
    np.testing.assert_allclose(g.value(out), tout.detach().numpy(), rtol=1e-9, atol=1e-12)
    for n, t in zip(nodes, ts):
        np.testing.assert_allclose(g.grad(n), t.grad.numpy(), rtol=1e-8, atol=1e-11)


def test_float32_matches_pytorch_at_transformer_size():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal((2, 4, 64, 32)).astype(np.float32) for _ in range(3))
    g = yscv.Graph()
    nodes = [g.variable(a) for a in (q, k, v)]
    out = g.scaled_dot_product_attention(*nodes, causal=True)
    cot = rng.standard_normal(g.value(out).shape).astype(np.float32)
    g.backward(out, grad=cot)
    ts = [torch.from_numpy(a).requires_grad_(True) for a in (q, k, v)]
    tout = F.scaled_dot_product_attention(*ts, is_causal=True)
    tout.backward(torch.from_numpy(cot))
    np.testing.assert_allclose(g.value(out), tout.detach().numpy(), rtol=1e-4, atol=1e-5)
    for n, t in zip(nodes, ts):
        np.testing.assert_allclose(g.grad(n), t.grad.numpy(), rtol=1e-3, atol=1e-4)


def test_backward_from_two_threads_at_once_matches_sequential():
    import threading

    def run(seed, results):
        rng = np.random.default_rng(seed)
        arrs = [rng.standard_normal(s) for s in ((4, 2, 16, 8), (4, 2, 16, 8), (4, 2, 16, 8))]
        g = yscv.Graph(np.float64)
        nodes = [g.variable(a) for a in arrs]
        for _ in range(20):
            g.zero_grads()
            out = g.scaled_dot_product_attention(*nodes, causal=True)
            g.backward(g.sum(g.mul(out, out)))
        results[seed] = [g.grad(n).copy() for n in nodes]

    seq, par = {}, {}
    for s in (20, 21):
        run(s, seq)
    threads = [threading.Thread(target=run, args=(s, par)) for s in (20, 21)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for s in (20, 21):
        for a, b in zip(seq[s], par[s]):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_row_max_finds_the_peak_at_every_position_and_row_length(dtype):
    """The softmax subtracts each row's max (taken over eight running lanes
    plus a tail): a peak of 2000 at any key position j of rows of any causal
    length would overflow exp if the max missed it."""
    sk = 21                                   # rows of length 1..21: every tail length
    k = np.eye(sk)                            # score[i, j] = scale * q[i, j]
    v = np.random.default_rng(5).standard_normal((sk, 3))
    for peak in range(sk):
        q = np.zeros((sk, sk))
        q[:, peak] = 2000.0
        g = yscv.Graph(dtype)
        out = g.value(g.scaled_dot_product_attention(
            g.constant(q), g.constant(k), g.constant(v), causal=True, scale=1.0))
        assert np.all(np.isfinite(out))
        np.testing.assert_allclose(out, ref_sdpa(q, k, v, causal=True, scale=1.0),
                                   rtol=1e-5, atol=1e-6)


# ------------------------------------------------ floating (additive) masks
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("sq", [3, 5, 7])
def test_float_triu_minus_inf_mask_equals_causal(dtype, sq):
    """PyTorch's additive causal mask (-inf above the diagonal) gives what
    causal=True gives: it is not inverted (the issue-12 defect)."""
    rng = np.random.default_rng(31)
    q, k, v = rng.standard_normal((2, sq, 4)), rng.standard_normal((2, 5, 4)), rng.standard_normal((2, 5, 3))
    cot = rng.standard_normal((2, sq, 3))
    tri = np.triu(np.full((sq, 5), -np.inf), 1)
    res = []
    for kw in ({"mask": tri}, {"causal": True}):
        g = yscv.Graph(dtype)
        nodes = [g.variable(a) for a in (q, k, v)]
        out = g.scaled_dot_product_attention(*nodes, **kw)
        g.backward(out, grad=cot)
        res.append([g.value(out)] + [g.grad(n) for n in nodes])
    tol = 1e-6 if dtype == np.float32 else 1e-13
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def test_float_minus_inf_blocks_a_nan_score_like_false():
    """-inf in a floating mask blocks the key whatever its score, exactly as
    a False boolean entry (which also hides a NaN score)."""
    k = np.ones((4, 2))
    k[2] = np.nan
    v = np.arange(8.0).reshape(4, 2)
    q = np.ones((3, 2))
    fm = np.array([0.0, 0.0, -np.inf, 0.0])
    g = yscv.Graph(np.float64)
    a = g.value(g.scaled_dot_product_attention(g.constant(q), g.constant(k), g.constant(v), mask=fm))
    b = g.value(g.scaled_dot_product_attention(g.constant(q), g.constant(k), g.constant(v),
                                               mask=fm == 0))
    assert np.all(np.isfinite(a))
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("bad", [np.inf, np.nan])
def test_float_mask_plus_inf_or_nan_entry_gives_nan_row_as_pytorch(bad):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(32)
    q, k, v = rng.standard_normal((3, 2)), rng.standard_normal((4, 2)), rng.standard_normal((4, 2))
    fm = np.zeros((3, 4))
    fm[1, 2] = bad
    g = yscv.Graph(np.float64)
    out = g.value(g.scaled_dot_product_attention(g.constant(q), g.constant(k), g.constant(v), mask=fm))
    t = torch.nn.functional.scaled_dot_product_attention(
        *(torch.from_numpy(a) for a in (q, k, v)), attn_mask=torch.from_numpy(fm)).numpy()
    np.testing.assert_array_equal(np.isnan(out), np.isnan(t))
    assert np.all(np.isnan(out[1]))
    np.testing.assert_allclose(out[[0, 2]], t[[0, 2]], rtol=1e-12)


def test_float_mask_is_copied_and_converted_to_the_graph_dtype():
    rng = np.random.default_rng(33)
    q, k, v = rng.standard_normal((4, 3)), rng.standard_normal((5, 3)), rng.standard_normal((5, 2))
    fm = rng.standard_normal((4, 5))
    want = ref_sdpa(q, k, v, mask=fm.copy())
    g = yscv.Graph(np.float32)
    out = g.scaled_dot_product_attention(g.variable(q), g.variable(k), g.variable(v), mask=fm)
    fm[:] = -np.inf
    assert g.value(out).dtype == np.float32
    np.testing.assert_allclose(g.value(out), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", ["float", "float_heads", "float_and_causal", "float32"])
def test_float_mask_matches_pytorch(case):
    """Values and all three gradients against F.scaled_dot_product_attention
    with a floating attn_mask (PyTorch refuses attn_mask with is_causal, so
    the causal case gives torch the merged mask)."""
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    dtype = np.float32 if case == "float32" else np.float64
    rng = np.random.default_rng(34)
    q = rng.standard_normal((2, 3, 5, 4)).astype(dtype)
    k = rng.standard_normal((2, 3, 6, 4)).astype(dtype)
    v = rng.standard_normal((2, 3, 6, 3)).astype(dtype)
    mshape = (2, 1, 5, 6) if case == "float_heads" else (2, 3, 5, 6)
    fm = rng.standard_normal(mshape).astype(dtype)
    fm[rng.random(mshape) > 0.7] = -np.inf
    fm[..., 0] = 0.0  # PyTorch gives NaN for rows with nothing to attend
    causal = case == "float_and_causal"
    g = yscv.Graph(dtype)
    nodes = [g.variable(a) for a in (q, k, v)]
    out = g.scaled_dot_product_attention(*nodes, mask=fm, causal=causal)
    cot = rng.standard_normal(g.value(out).shape).astype(dtype)
    g.backward(out, grad=cot)
    tmask = fm + np.triu(np.full((5, 6), -np.inf, dtype), 1) if causal else fm
    ts = [torch.from_numpy(a.copy()).requires_grad_(True) for a in (q, k, v)]
    tout = F.scaled_dot_product_attention(*ts, attn_mask=torch.from_numpy(tmask))
    tout.backward(torch.from_numpy(cot))
    rtol, atol = (1e-9, 1e-12) if dtype == np.float64 else (1e-4, 1e-5)
    np.testing.assert_allclose(g.value(out), tout.detach().numpy(), rtol=rtol, atol=atol)
    for n, t in zip(nodes, ts):
        np.testing.assert_allclose(g.grad(n), t.grad.numpy(), rtol=rtol * 10, atol=atol * 10)


def _split_heads_block(dtype=np.float32, seed=7):
    """q, k, v split from [B*S, heads*D] rows by reshape + transpose (the
    transformer layout), their SDPA, and the heads merged back."""
    B, S, H, D = 2, 5, 3, 4
    rng = np.random.default_rng(seed)
    g = yscv.Graph(dtype)
    rows = [g.variable(rng.standard_normal((B * S, H * D))) for _ in range(3)]
    q, k, v = (g.transpose(g.reshape(r, (B, S, H, D)), (0, 2, 1, 3)) for r in rows)
    out = g.scaled_dot_product_attention(q, k, v)
    merged = g.reshape(g.transpose(out, (0, 2, 1, 3)), (B * S, H * D))
    return g, rows, (q, k, v), out, merged


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_output_and_gradients_follow_the_split_heads_layout(dtype):
    """Heads split by a transpose: the output is laid out as q, so merging
    the heads again is a view of it; each gradient has its input's layout,
    so the split's backward is a view too. Values as the C-ordered product."""
    g, rows, qkv, out, merged = _split_heads_block(dtype)
    vo = g.value(out)
    assert vo.strides == g.value(qkv[0]).strides
    assert not vo.flags.c_contiguous
    assert np.shares_memory(g.value(merged), vo)
    vals = [np.asarray(g.value(n)) for n in qkv]
    np.testing.assert_array_equal(vo, ref_sdpa_c(*vals))
    grads = g.gradients(g.sum(g.mul(merged, merged)), list(qkv))
    for gr, n in zip(grads, qkv):
        assert gr.strides == g.value(n).strides
    # the same numbers as C-ordered inputs give (same products, same bits)
    g2 = yscv.Graph(dtype)
    c = [g2.variable(np.ascontiguousarray(a)) for a in vals]
    o2 = g2.scaled_dot_product_attention(*c)
    np.testing.assert_array_equal(g2.value(o2), vo)
    assert g2.value(o2).flags.c_contiguous
    for gr, gr2 in zip(grads, g2.gradients(g2.sum(g2.mul(o2, o2)), c)):
        np.testing.assert_array_equal(gr, gr2)


def ref_sdpa_c(q, k, v):
    """The op's own arithmetic on C-ordered copies (a bit-exact reference)."""
    g = yscv.Graph(q.dtype)
    return np.asarray(g.value(g.scaled_dot_product_attention(
        *(np.ascontiguousarray(a) for a in (q, k, v)))))


def test_broadcast_or_gappy_inputs_give_c_ordered_results():
    """A layout is followed only for a dense permutation of the result's
    own shape: a broadcast k (one head for all), another Dv, or an array
    with gaps (a strided slice) give C order."""
    from yscv.compute.attention import empty_like_layout
    rng = np.random.default_rng(3)
    g = yscv.Graph(np.float64)
    q = g.transpose(g.variable(rng.standard_normal((2, 5, 3, 8))), (0, 2, 1, 3))
    k = g.variable(rng.standard_normal((2, 1, 5, 8)))
    v4 = g.variable(rng.standard_normal((2, 3, 5, 4)))
    assert g.value(g.scaled_dot_product_attention(q, q, v4)).flags.c_contiguous
    out = g.scaled_dot_product_attention(q, k, k)
    assert g.value(out).strides == g.value(q).strides
    dq, dk = g.gradients(g.sum(g.mul(out, out)), [q, k])
    assert dq.strides == g.value(q).strides and dk.flags.c_contiguous
    gappy = rng.standard_normal((2, 5, 3, 16))[..., ::2].transpose(0, 2, 1, 3)
    assert empty_like_layout(gappy, gappy.shape, np.float64).flags.c_contiguous
    flipped = rng.standard_normal((2, 5, 3, 8))[:, ::-1].transpose(0, 2, 1, 3)
    assert empty_like_layout(flipped, flipped.shape, np.float64).flags.c_contiguous
    dense = np.empty((2, 5, 3, 8)).transpose(2, 0, 3, 1)
    assert empty_like_layout(dense, dense.shape, np.float32).strides == \
        tuple(s // 2 for s in dense.strides)
