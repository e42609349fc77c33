"""yscv.testing and yscv.gradcheck: what OpCase.op means, what make_op_tests
returns, and gradcheck messages with plain numbers and argument names."""
from __future__ import annotations

import re

import numpy as np
import pytest

import yscv
from yscv import Op
from yscv.testing import BadCase, OpCase, check_forward, make_op_tests


def _detached(g, x, w):  # the constant copy of w hides one path from backward
    return g.mul(x, g.mul(w, g.constant(g.value(w))))


def test_gradcheck_message_names_the_argument_and_prints_plain_numbers():
    x, w = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    with pytest.raises(yscv.GradcheckError) as info:
        yscv.gradcheck(_detached, [x, w])
    msg = str(info.value)
    assert "np.float64" not in msg
    m = re.fullmatch(r"gradcheck: input 1 \('w'\) element \((\d+),\): analytic (\S+) vs numeric "
                     r"(\S+) \(atol=1e-05, rtol=0\.001\)", msg)
    assert m, msg
    assert float(m.group(2)) == pytest.approx(info.value.got)
    assert float(m.group(3)) == pytest.approx(info.value.expected)


def test_gradcheck_message_without_names_gives_the_position():
    with pytest.raises(yscv.GradcheckError, match=r"^gradcheck: input 0 element \(\d+,\): "
                       r"analytic -?[0-9.e-]+ vs numeric -?[0-9.e-]+ "):
        yscv.gradcheck(lambda g, *xs: g.mul(xs[0], g.constant(g.value(xs[0]))),
                       [np.array([1.0, 2.0])])


def test_gradgradcheck_message_names_the_argument():
    # the constant copy of u hides d/du of the first derivative 2 x u
    with pytest.raises(yscv.GradcheckError) as info:
        yscv.gradgradcheck(lambda g, x, u: g.mul(g.mul(x, x), g.constant(g.value(u))),
                           [np.array([1.0, 2.0]), np.array([0.5, 1.5])])
    msg = str(info.value)
    assert "np.float64" not in msg
    assert re.search(r"gradcheck: input 1 \('u'\) element \(\d+,\): analytic -?[0-9.e-]+ vs "
                     r"numeric", msg), msg


def test_opcase_op_is_the_recorded_op_that_check_forward_asserts():
    assert "check_forward" in OpCase.__doc__ and "build" in OpCase.__doc__
    row = OpCase(Op.EXP, lambda g, x: g.exp(x), [(2, 3)], np.exp, name="exp")
    check_forward(row)
    wrong = OpCase(Op.EXP, lambda g, x: g.mul(g.exp(x), 1.0), [(2, 3)], np.exp, name="exp_then_mul")
    with pytest.raises(AssertionError, match=r"exp_then_mul: recorded <Op\.MUL: 12>, expected "
                                             r"<Op\.EXP: 17>"):
        check_forward(wrong)


def test_make_op_tests_returns_what_the_caller_unpacks():
    rows = [OpCase(Op.EXP, lambda g, x: g.exp(x), [(2,)], np.exp, name="exp")]
    two = make_op_tests(rows)
    assert [f.__name__ for f in two] == ["test_forward", "test_gradcheck"]
    bad = [BadCase(Op.EXP, "not a node", lambda g: ("x",), lambda g, x: g.exp(x), TypeError)]
    three = make_op_tests(rows, bad)
    assert [f.__name__ for f in three] == ["test_forward", "test_gradcheck", "test_bad_arguments"]
