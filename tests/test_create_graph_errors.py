"""A recorded walk (``create_graph=True``) that raises leaves no node of its
own in the graph, as a failed op leaves none."""
from __future__ import annotations

import numpy as np
import pytest

import yscv


def _singular_slogdet_graph():
    g = yscv.Graph(np.float64)
    a = g.variable(np.array([[1.0, 2.0], [2.0, 4.0]]))    # singular
    _, logabs = g.slogdet(a)
    return g, a, g.sum(logabs * 1.0)


@pytest.mark.parametrize("entry", ["backward", "gradients"])
def test_a_failed_recorded_walk_appends_nothing(entry):
    g, a, loss = _singular_slogdet_graph()
    n = len(g)
    with pytest.raises(yscv.BackwardError, match="slogdet"):
        if entry == "backward":
            g.backward(loss, create_graph=True)
        else:
            g.gradients(loss, [a], create_graph=True)
    assert len(g) == n
    assert g.grad_node(a) is None
    # the graph works on: a later op and a plain backward of something else
    y = g.sum(a * a)
    g.backward(y)
    np.testing.assert_array_equal(g.grad(a), 2 * g.value(a))


def test_a_hook_error_in_a_recorded_walk_appends_nothing():
    g = yscv.Graph(np.float64)
    x = g.variable(np.arange(3.0))
    h = g.tanh(x) * x
    g.register_hook(h, lambda grad: (_ for _ in ()).throw(RuntimeError("hook says no")))
    loss = g.sum(h)
    n = len(g)
    with pytest.raises(RuntimeError, match="hook says no"):
        g.gradients(loss, [x], create_graph=True)
    assert len(g) == n
