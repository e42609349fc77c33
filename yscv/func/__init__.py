"""Function transforms, composable as in ``torch.func`` and JAX (docs/higher_order.md).

A function is ``f(g, *args) -> NodeId`` (the form `yscv.gradcheck`
takes), or ``-> (NodeId, aux)`` with ``has_aux=True``. Every transform
returns a function callable in two forms:

* inside a graph, ``F(g, *nodes)``: the result is recorded on ``g``
  (``create_graph=True`` underneath), so transforms compose:
  ``grad(grad(f))``, ``jacfwd(jacrev(f))``;
* with arrays alone, ``F(*arrays)``: a fresh graph in the arrays' float
  dtype (float64 if any argument is float64, else float32), results as
  arrays.

Arguments are pytrees: arrays or NodeIds, or tuples, named tuples, lists and
dicts of them (nested); the gradient or Jacobian of a pytree argument has its
structure (a dict of parameters gives a dict of gradients). Integer and
boolean arrays (labels, indices) and None reach ``f`` as they are, are never
differentiated, and are a TypeError where ``argnums`` asks for them.

``argnums`` is an int (one result) or a tuple of ints (a tuple of results).
Jacobians have torch.func's shapes: ``out.shape + in.shape`` (empty ones
too). A function of the wrong arity is a TypeError naming it, raised before
anything is recorded.

Each transform differentiates with respect to its own identity node of each
differentiated argument (JAX's tracer levels): a node ``f`` closes over is
never taken for the argument, even when it is the node passed in, so inner
transforms may close over an outer transform's argument.

Forward mode (`jvp`, `jacfwd`) is the transpose of reverse mode:
the recorded vector-Jacobian product ``u -> J^T u`` is linear in ``u``, so
its own gradient against a tangent ``t`` is ``J t``. It is exact, reuses the
recorded backward rules of every op (no second rule table to keep in step),
and costs one recorded backward plus one more reverse walk over it.

A `yscv.nn.Module` becomes a function of its parameters and buffers with
`functional_call`; `stack_module_state` stacks the states of several
models (an ensemble) into one dict of ``[M, *shape]`` arrays.
"""
from __future__ import annotations

from .module_call import functional_call, stack_module_state
from .primals import hvp, jvp, vjp
from .transforms import grad, hessian, jacfwd, jacrev, value_and_grad
from .vmap import vmap

__all__ = ["grad", "value_and_grad", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "hvp",
           "functional_call", "stack_module_state", "vmap"]
