"""Table-driven op tests that user suites (and ours) can call from pytest.

A test module lists ``OpCase`` rows (forward reference + gradcheck) and
``BadCase`` rows (bad arguments), then turns them into pytest tests::

    from yscv.testing import OpCase, BadCase, make_op_tests
    CASES = [OpCase(Op.RELU, lambda g, x: g.relu(x), [(3, 4)], np_relu, name="relu")]
    BAD = [BadCase(Op.RELU, "not a node", lambda g: ("x",), lambda g, x: g.relu(x), TypeError)]
    test_forward, test_gradcheck, test_bad_arguments = make_op_tests(CASES, BAD)
    test_second_order = make_second_order_tests(CASES)

The second-order column (docs/higher_order.md) runs `gradgradcheck` on every
row with ``check_grad2`` and, where the row gives ``torch_build``, compares
the recorded second derivatives with PyTorch's double backward in float64.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Optional, Sequence

import numpy as np

from . import runtime
from .gradcheck import gradcheck, gradgradcheck
from .node import Op

__all__ = ["OpCase", "BadCase", "make_op_tests", "make_second_order_tests", "check_forward",
           "check_gradcheck", "check_gradgradcheck", "check_torch_build", "check_torch_second_order",
           "followed_by_square", "check_bad_arguments", "check_same_bits_on_threads", "gradcheck", "gradgradcheck"]


@dataclasses.dataclass
class OpCase:
    """One op with one set of options.

    Attributes:
        op: the Op recorded on the node ``build`` returns: ``check_forward``
            asserts ``g.op(build(g, *nodes)) == op`` (for a composite build,
            the op of its last node).
        build: ``build(g, *nodes) -> NodeId`` applies the op to variables.
        shapes: shapes of the differentiable inputs (drawn uniform in
            [low, high)), unless ``inputs`` is given.
        reference: NumPy forward ``reference(*float64 arrays) -> array``.
        name: test id.
        low, high: the input domain (keep away from kinks and poles).
        inputs: ``inputs(rng) -> tuple of arrays`` overriding shapes/domain.
        eps, atol, rtol: gradcheck settings.
        fwd_rtol32, fwd_atol32: float32 forward tolerance (float64 uses 1e-10).
        check_grad: False only for rows whose output does not depend smoothly
            on the inputs (documented in the row's name).
        check_grad2: run `gradgradcheck` on the row (False only where
            the first derivative is not smooth at the row's inputs, e.g. a
            kink a finite difference straddles; say why in ``grad2_why``).
        torch_build: ``torch_build(torch, *tensors) -> tensor``, the same op in
            PyTorch: the second-order column then also compares the recorded
            second derivatives with ``torch.autograd.grad(create_graph=True)``.
    """

    op: Op
    build: Callable
    shapes: Sequence = ()
    reference: Optional[Callable] = None
    name: str = ""
    low: float = -2.0
    high: float = 2.0
    inputs: Optional[Callable] = None
    eps: float = 1e-6
    atol: float = 1e-5
    rtol: float = 1e-3
    fwd_rtol32: float = 1e-4
    fwd_atol32: float = 1e-5
    check_grad: bool = True
    seed: int = 0
    check_grad2: bool = True
    grad2_why: str = ""
    torch_build: Optional[Callable] = None

    def arrays(self) -> tuple:
        rng = np.random.default_rng(self.seed)
        if self.inputs is not None:
            return tuple(np.asarray(a, dtype=np.float64) for a in self.inputs(rng))
        return tuple(rng.uniform(self.low, self.high, size=s) for s in self.shapes)

    @property
    def id(self) -> str:
        return self.name or self.op.name.lower()


@dataclasses.dataclass
class BadCase:
    """A call that must raise before anything is appended.

    Attributes:
        op: the Op whose bad argument this row covers (a label: the call
            raises before any node is recorded, so no op is checked).
        name: test id.
        setup: ``setup(g) -> tuple`` creates leaves, returns the call's args.
        call: ``call(g, *args)`` the failing op call.
        raises: the exception type expected.
        match: a substring the message must contain (e.g. the op name).
    """

    op: Op
    name: str
    setup: Callable
    call: Callable
    raises: type = ValueError
    match: str = ""

    @property
    def id(self) -> str:
        return self.name


def check_forward(case: OpCase) -> None:
    """The op's value equals the NumPy reference in float32 and float64, and
    keeps the graph dtype (no silent promotion)."""
    from .engine.graph import Graph

    arrays = case.arrays()
    if case.reference is None:
        raise AssertionError(f"{case.id}: OpCase has no NumPy reference")
    expected = np.asarray(case.reference(*arrays))
    for dtype, rtol, atol in ((np.float64, 1e-10, 1e-10),
                              (np.float32, case.fwd_rtol32, case.fwd_atol32)):
        g = Graph(dtype=dtype)
        nodes = [g.variable(a) for a in arrays]
        out = case.build(g, *nodes)
        got = g.value(out)
        assert got.dtype == np.dtype(dtype), f"{case.id}: {dtype.__name__} graph gave {got.dtype}"
        assert got.shape == expected.shape, f"{case.id}: shape {got.shape} != {expected.shape}"
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol,
                                   err_msg=f"{case.id} ({np.dtype(dtype).name})")
        assert g.op(out) == case.op, f"{case.id}: recorded {g.op(out)!r}, expected {case.op!r}"


def check_gradcheck(case: OpCase) -> None:
    """float64 gradcheck with a random cotangent."""
    if not case.check_grad:
        return
    gradcheck(case.build, case.arrays(), eps=case.eps, atol=case.atol, rtol=case.rtol,
              seed=case.seed)


def check_gradgradcheck(case: OpCase) -> None:
    """float64 second derivatives against finite differences of the first."""
    if not (case.check_grad and case.check_grad2):
        return
    gradgradcheck(case.build, case.arrays(), eps=case.eps, atol=case.atol, rtol=case.rtol,
                  seed=case.seed)


def _second_order(case: OpCase, arrays, u, vs):
    """yscv's recorded (first, second) derivatives of the row: the
    gradients with cotangent ``u``, then the gradients of
    ``sum_k <grad_k, v_k>`` with respect to the inputs."""
    from .engine.graph import Graph

    g = Graph(dtype=np.float64)
    nodes = [g.variable(a) for a in arrays]
    out = case.build(g, *nodes)
    firsts = g.gradients(out, nodes, grad=u, create_graph=True)
    total = None
    for d, v in zip(firsts, vs):
        term = g.sum(g.mul(d, v))
        total = term if total is None else g.add(total, term)
    seconds = g.gradients(total, nodes) if g.requires_grad(total) else \
        tuple(np.zeros_like(a) for a in arrays)
    return [g.value(d) for d in firsts], list(seconds)


def followed_by_square(case: OpCase) -> OpCase:
    """The row with its op followed by a square (name ``<id>_squared``): the
    recorded backward then meets a cotangent that depends on the inputs
    (2 y u), so a second derivative runs through the rule's own recorded
    graph (a linear op's is 0 alone)."""
    return dataclasses.replace(
        case, name=case.id + "_squared",
        build=lambda g, *xs: (lambda y: g.mul(y, y))(case.build(g, *xs)),
        torch_build=lambda t, *xs: case.torch_build(t, *xs) ** 2)


def check_torch_build(case: OpCase, rtol: float = 1e-10, atol: float = 1e-12) -> None:
    """The row's PyTorch twin (``case.torch_build``, the function the
    PyTorch cross-checks differentiate) computes the row's NumPy reference
    on the row's float64 inputs."""
    import torch

    arrays = case.arrays()
    got = case.torch_build(torch, *(torch.tensor(a) for a in arrays)).detach().numpy()
    np.testing.assert_allclose(got, case.reference(*arrays), rtol=rtol, atol=atol,
                               err_msg=f"{case.id}: torch_build vs the NumPy reference")


def check_torch_second_order(case: OpCase, rtol: float = 1e-7, atol: float = 1e-9) -> None:
    """The recorded first and second derivatives equal PyTorch's double
    backward (``torch.autograd.grad(..., create_graph=True)``) in float64."""
    if case.torch_build is None or not case.check_grad:
        return
    import torch

    arrays = case.arrays()
    rng = np.random.default_rng(case.seed + 7)
    ts = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays]
    tout = case.torch_build(torch, *ts)
    u = rng.standard_normal(tuple(tout.shape))
    vs = [rng.standard_normal(a.shape) for a in arrays]
    firsts, seconds = _second_order(case, arrays, u, vs)
    tf = torch.autograd.grad(tout, ts, grad_outputs=torch.tensor(u), create_graph=True,
                             allow_unused=True)
    total = sum((d * torch.tensor(v)).sum() for d, v in zip(tf, vs) if d is not None)
    if isinstance(total, torch.Tensor) and total.requires_grad:
        tsec = torch.autograd.grad(total, ts, allow_unused=True)
    else:
        tsec = [None] * len(ts)
    for k, (mine, theirs) in enumerate(zip(firsts, tf)):
        ref = np.zeros_like(arrays[k]) if theirs is None else theirs.detach().numpy(force=True)
        np.testing.assert_allclose(mine, ref, rtol=rtol, atol=atol,
                                   err_msg=f"{case.id}: first derivative of input {k} vs PyTorch")
    for k, (mine, theirs) in enumerate(zip(seconds, tsec)):
        ref = np.zeros_like(arrays[k]) if theirs is None else theirs.detach().numpy(force=True)
        np.testing.assert_allclose(mine, ref, rtol=rtol, atol=atol,
                                   err_msg=f"{case.id}: second derivative of input {k} vs PyTorch")


def check_second_order_float32(case: OpCase) -> None:
    """In a float32 graph the recorded first derivatives and the second
    derivatives through them are float32 (no float64 constant of a
    recorded rule promotes them), finite, and close to float64's."""
    if not case.check_grad:
        return
    arrays = case.arrays()
    rng = np.random.default_rng(case.seed + 7)
    u = None
    results = {}
    for dtype in (np.float64, np.float32):
        from .engine.graph import Graph

        g = Graph(dtype=dtype)
        nodes = [g.variable(a) for a in arrays]
        out = case.build(g, *nodes)
        if u is None:
            u = rng.standard_normal(g.value(out).shape)
        firsts = g.gradients(out, nodes, grad=u, create_graph=True)
        total = None
        for d in firsts:
            term = g.sum(g.mul(d, d))
            total = term if total is None else g.add(total, term)
        seconds = list(g.gradients(total, nodes)) if g.requires_grad(total) else []
        results[dtype] = [g.value(d) for d in firsts] + seconds
    for k, (a64, a32) in enumerate(zip(results[np.float64], results[np.float32])):
        assert a32.dtype == np.float32, f"{case.id}: result {k} is {a32.dtype} in a float32 graph"
        scale = max(1.0, float(np.max(np.abs(a64)))) if a64.size else 1.0
        np.testing.assert_allclose(a32, a64, rtol=1e-3, atol=1e-3 * scale,
                                   err_msg=f"{case.id}: float32 result {k} vs float64")


def check_bad_arguments(case: BadCase) -> None:
    """The call raises the expected error naming the problem, graph unchanged."""
    import pytest

    from .engine.graph import Graph

    for dtype in (np.float32,):
        g = Graph(dtype=dtype)
        args = case.setup(g)
        before = len(g)
        with pytest.raises(case.raises, match=case.match or None):
            case.call(g, *args)
        assert len(g) == before, f"{case.id}: failed call appended {len(g) - before} node(s)"


def check_same_bits_on_threads(run: Callable[[], Sequence[np.ndarray]]) -> None:
    """Call ``run`` (it builds a graph and returns arrays: values,
    gradients) with yscv on one thread, then on two (OpenBLAS's threads
    untouched), restore the setting, and assert every array is bit for bit
    the same: work splits that depend on the sizes only, never the threads."""
    before = runtime.get_num_threads()
    try:
        runtime.set_num_threads(1, blas=False)
        one = [np.array(a, copy=True) for a in run()]
        runtime.set_num_threads(2, blas=False)
        two = [np.array(a, copy=True) for a in run()]
    finally:
        runtime.set_num_threads(before, blas=False)
    assert len(one) == len(two)
    for i, (a, b) in enumerate(zip(one, two)):
        assert a.dtype == b.dtype and a.shape == b.shape, f"output {i}: {a.dtype}{a.shape} vs {b.dtype}{b.shape}"
        assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), f"output {i} differs between one thread and two"


def make_op_tests(cases: Sequence[OpCase], bad: Sequence[BadCase] = ()):
    """pytest test functions parametrized over the rows; assign them to
    module-level names.

    Returns ``(test_forward, test_gradcheck, test_bad_arguments)`` when
    ``bad`` has rows, ``(test_forward, test_gradcheck)`` without them (no
    test over an empty parameter set, which pytest would report as skipped).
    """
    import pytest

    @pytest.mark.parametrize("case", list(cases), ids=[c.id for c in cases])
    def test_forward(case):
        check_forward(case)

    grad_cases = [c for c in cases if c.check_grad]

    @pytest.mark.parametrize("case", grad_cases, ids=[c.id for c in grad_cases])
    def test_gradcheck(case):
        check_gradcheck(case)

    bad = list(bad)
    if not bad:
        return test_forward, test_gradcheck

    @pytest.mark.parametrize("case", bad, ids=[c.id for c in bad])
    def test_bad_arguments(case):
        check_bad_arguments(case)

    return test_forward, test_gradcheck, test_bad_arguments


def make_second_order_tests(cases: Sequence[OpCase]):
    """The second-order column: a pytest test parametrized over the rows that
    runs `check_gradgradcheck` and, for rows with ``torch_build``,
    `check_torch_second_order` (skipped without PyTorch). The test's
    ``second_order_rows`` attribute lists the rows it runs."""
    import pytest

    rows = [c for c in cases if c.check_grad]

    @pytest.mark.parametrize("case", rows, ids=[c.id for c in rows])
    def test_second_order(case):
        check_gradgradcheck(case)
        if case.torch_build is not None:
            pytest.importorskip("torch")
            check_torch_second_order(case)

    test_second_order.second_order_rows = rows   # what tests/ops/test_op_coverage.py counts
    return test_second_order
