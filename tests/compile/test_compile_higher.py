"""yscv.compile with recorded backward walks inside the step: a PINN step
(the Laplacian of the output through g.gradients(create_graph=True) twice,
then backward to the parameters), backward(create_graph=True) with its
accumulated gradient nodes, yscv.func.grad / hessian, a gradient penalty
through fused ops (Op.VJP nodes), rules that build their nodes from values
(ELU); every replay bit-identical to the eager step, check=True still
catching a value-dependent branch."""
from __future__ import annotations

import numpy as np
import pytest

import yscv
from yscv import func, nn, optim
from yscv.errors import CompileError, CompileMismatchError


def _bits(a):
    return None if a is None else (a.shape, a.dtype.str, np.ascontiguousarray(a).tobytes())


def _run(make_model, make_fn, batches, compiled, dtype=np.float32, check=False):
    """Per call: the returned arrays and every Parameter.grad; an Adam step
    between calls (the replay must read the new parameter values)."""
    yscv.manual_seed(3)
    model = make_model()
    if dtype == np.float64:
        for p in model.parameters():
            p.data = p.data.astype(np.float64)
    fn = make_fn(model)
    if compiled:
        step = yscv.compile(fn, dtype=dtype, check=check)
    else:
        def step(*args):
            g = yscv.Graph(dtype=dtype)
            out = fn(g, *args)
            outs = out if isinstance(out, tuple) else (out,)
            return tuple(np.array(g.value(o)) for o in outs)
    opt = optim.Adam(model.parameters(), lr=1e-3)
    seen = []
    for batch in batches:
        out = step(*batch)
        outs = out if isinstance(out, tuple) else (out,)
        seen.append([_bits(o) for o in outs] + [_bits(p.grad) for p in model.parameters()])
        opt.step()
        opt.zero_grad()
    if compiled:
        assert step.recordings == 1
    return seen


def _check_same(make_model, make_fn, batches, dtype=np.float32):
    want = _run(make_model, make_fn, batches, False, dtype)
    got = _run(make_model, make_fn, batches, True, dtype)
    assert len(want) == len(got)
    for w, g in zip(want, got):
        assert w == g


def _mlp(act, width=64, depth=3):
    def make():
        layers, n = [], 2
        for _ in range(depth):
            layers += [nn.Linear(n, width), act()]
            n = width
        return nn.Sequential(*layers, nn.Linear(n, 1))
    return make


def _pinn(model):
    """Poisson residual: mean((u_xx + u_yy - f)^2)."""
    def step(g, xb, fb):
        x = g.variable(xb)
        u = model(g, x)
        (du,) = g.gradients(g.sum(u), [x], create_graph=True)
        lap = None
        for d in range(2):
            (dd,) = g.gradients(g.sum(du[:, d]), [x], create_graph=True)
            lap = dd[:, d] if lap is None else g.add(lap, dd[:, d])
        r = g.sub(lap, g.constant(fb))
        loss = g.mean(g.mul(r, r))
        g.backward(loss)
        return loss
    return step


def _points(n, calls, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((n, 2)).astype(dtype), rng.standard_normal(n).astype(dtype))
            for _ in range(calls)]


def test_pinn_step_tanh_2_64_64_64_1_batch_1024():
    _check_same(_mlp(nn.Tanh), _pinn, _points(1024, 3))


@pytest.mark.parametrize("act", [nn.ELU, nn.Softplus, nn.GELU])
def test_pinn_step_rules_reading_values(act):
    # ELU's recorded rule makes its mask from the input's values: the
    # replay calls that rule again with the new values
    _check_same(_mlp(act, width=16, depth=2), _pinn, _points(64, 3, seed=1))


def test_pinn_step_float64():
    _check_same(_mlp(nn.Tanh, width=16, depth=2), _pinn, _points(32, 3, np.float64, 2),
                np.float64)


def _double_backward(model):
    """A plain backward, then backward(create_graph=True) on the same
    parameters (its gradient nodes add to the stored gradient), then the
    squared norm of the input's gradient node returned."""
    def step(g, xb):
        x = g.variable(xb)
        g.backward(g.sum(g.tanh(model(g, x))))
        g.backward(g.mean(g.exp(model(g, x))), create_graph=True)
        gx = g.grad_node(x)
        return g.sum(g.mul(gx, gx)), g.mul(g.sum(gx), 2.0)
    return step


def test_backward_create_graph_accumulates_as_eager():
    rng = np.random.default_rng(4)
    batches = [(rng.standard_normal((8, 2)).astype(np.float32),) for _ in range(3)]
    _check_same(_mlp(nn.Tanh, width=8, depth=1), _double_backward, batches)


def _func_transforms(model):
    """yscv.func.grad and hessian in the graph form inside the step."""
    def f(g, x):
        return g.sum(g.tanh(model(g, x)))

    def step(g, xb):
        x = g.constant(xb)
        gx = func.grad(f)(g, x)
        h = func.hessian(lambda gg, v: gg.sum(gg.tanh(model(gg, gg.reshape(v, (1, 2))))))(
            g, x[0])
        loss = g.add(g.sum(g.mul(gx, gx)), g.sum(h))
        g.backward(loss)
        return loss, gx, h
    return step


def test_func_grad_and_hessian_inside_a_compiled_step():
    rng = np.random.default_rng(5)
    batches = [(rng.standard_normal((4, 2)).astype(np.float32),) for _ in range(3)]
    _check_same(_mlp(nn.Tanh, width=8, depth=1), _func_transforms, batches)


def _penalty(model):
    """A gradient penalty through layer_norm and log_softmax (fused ops:
    their recorded gradients are Op.VJP nodes holding the forward's data)."""
    def step(g, xb):
        x = g.variable(xb)
        h = g.layer_norm(model(g, x), eps=1e-5)
        out = g.sum(g.mul(g.log_softmax(g.mul(h, 1.5), axis=1),
                          g.constant(np.linspace(0.0, 1.0, 4, dtype=np.float32))))
        (gx,) = g.gradients(out, [x], create_graph=True)
        loss = g.add(out, g.sum(g.mul(gx, gx)))
        g.backward(loss)
        return loss
    return step


def test_gradient_penalty_through_fused_ops():
    rng = np.random.default_rng(6)
    batches = [(rng.standard_normal((5, 3)).astype(np.float32),) for _ in range(3)]

    def make():
        return nn.Linear(3, 4)
    _check_same(make, _penalty, batches)


def test_check_catches_a_value_dependent_branch_in_a_recorded_walk():
    def fn(g, xb):
        x = g.variable(xb)
        y = g.tanh(x) if g.value(x).sum() > 0 else g.exp(x)
        (gx,) = g.gradients(g.sum(y), [x], create_graph=True)
        g.backward(g.sum(g.mul(gx, gx)))
        return gx

    checked = yscv.compile(fn, check=True)
    ok = np.array([1.0, 2.0], np.float32)
    checked(ok)
    checked(ok + 0.5)   # same branch: no error
    with pytest.raises(CompileMismatchError) as err:
        checked(-ok)
    assert err.value.node is not None


def test_refused_forms_of_recorded_walks():
    def seeded(g, xb, cot):
        x = g.variable(xb)
        return g.gradients(g.tanh(x), [x], grad=cot, create_graph=True)[0]

    comp = yscv.compile(seeded)
    with pytest.raises(CompileError, match="seeded with an input array"):
        comp(np.ones(3, np.float32), np.ones(3, np.float32))
    assert len(comp.records) == 0

    def plain(g, xb):
        x = g.variable(xb)
        return g.constant(g.gradients(g.sum(g.tanh(x)), [x])[0])

    comp = yscv.compile(plain)
    with pytest.raises(CompileError, match="create_graph=True"):
        comp(np.ones(3, np.float32))
