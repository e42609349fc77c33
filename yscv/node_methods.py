"""The tensor methods a PyTorch user types on a ``NodeId``: ``loss.backward()``,
``loss.item()``, ``x.sum(dim=1)``, ``x.reshape(2, 3)``, ``x.T`` ...

Each method is one call of the owning graph's op (``x.sum(dim=1)`` is
``x.graph.sum(x, dim=1)``), so it records the same node, with the same
validation and errors, as the Graph method. The methods reach the graph
through ``self.graph``, as the arithmetic dunders do: the graph never holds
a NodeId, so no reference cycle is made. The names, defaults and argument
meanings are PyTorch's (``dim``, ``keepdim``, ``start_dim``); where PyTorch's
default differs from the Graph method's, the method takes PyTorch's and says
so (``var`` is unbiased, ``flatten`` starts at axis 0).

A name a NodeId does not have raises ``AttributeError``; when the graph has
an op of that name the message gives its spelling, ``g.<name>(node, ...)``.
"""
from __future__ import annotations


# PyTorch tensor methods whose yscv op has another name (for the AttributeError)
_OTHER_SPELLING = {"amax": "max", "amin": "min", "mm": "matmul", "bmm": "matmul",
                   "t": "transpose", "swapaxes": "transpose", "swapdims": "transpose",
                   "clip": "clamp", "negative": "neg", "absolute": "abs", "multiply": "mul",
                   "divide": "div", "true_divide": "div", "subtract": "sub"}


def _dims(dims: tuple, what: str) -> tuple:
    """``reshape(2, 3)`` and ``reshape((2, 3))`` alike: the one tuple."""
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        return tuple(dims[0])
    if not dims:
        raise TypeError(f"{what}: give the sizes, as {what}(2, 3) or {what}((2, 3))")
    return dims


class TensorMethods:
    """Mixin of ``yscv.node.NodeId``: PyTorch's tensor methods as calls
    of the owning graph's ops (module docstring). No state of its own."""

    __slots__ = ()

    # ---------------------------------------------------------- the graph
    def backward(self, grad=None, retain_graph: bool = True, workers=1,
                 create_graph: bool = False) -> None:
        """``g.backward(self, grad, ...)``: accumulate d(self)/d(leaf) into the
        leaves (``grad=None``: self must hold one element)."""
        self.graph.backward(self, grad, retain_graph=retain_graph, workers=workers,
                            create_graph=create_graph)

    @property
    def grad(self):
        """``g.grad(self)``: the stored gradient (a leaf's, or a retained
        node's) as an array, or None."""
        return self.graph.grad(self)

    @property
    def requires_grad(self) -> bool:
        """``g.requires_grad(self)``."""
        return self.graph.requires_grad(self)

    def numpy(self):
        """``g.value(self)``: the node's value, a read-only array (not a copy)."""
        return self.graph.value(self)

    def item(self) -> float:
        """The value of a one-element node as a Python number (``float``)."""
        v = self.graph.value(self)
        if v.size != 1:
            raise ValueError(f"item: NodeId({self.index}) has shape {v.shape} "
                             f"({v.size} elements); only a one-element node converts to a number")
        return v.item()

    def detach(self):
        """A constant leaf holding a copy of the value (``g.constant(g.value(self))``):
        gradients do not flow through it."""
        g = self.graph
        return g.constant(g.value(self))

    @property
    def ndim(self) -> int:
        """The number of axes of the value."""
        return len(self.shape)

    def dim(self) -> int:
        """The number of axes of the value (``torch.Tensor.dim``)."""
        return len(self.shape)

    def size(self, dim=None):
        """The shape (a tuple), or the size of axis ``dim``."""
        shape = self.shape
        return shape if dim is None else shape[dim]

    def numel(self) -> int:
        """The number of elements of the value."""
        n = 1
        for s in self.shape:
            n *= s
        return n

    # --------------------------------------------------------- reductions
    def sum(self, dim=None, keepdim=False):
        """``g.sum(self, dim, keepdim)``; ``dim`` None reduces every axis."""
        return self.graph.sum(self, dim, keepdim)

    def sum_to_size(self, *size):
        """``g.sum_to(self, size)`` (``size`` as ints or one tuple)."""
        if len(size) == 1 and not isinstance(size[0], int):
            size = size[0]
        return self.graph.sum_to(self, size)

    def mean(self, dim=None, keepdim=False):
        """``g.mean(self, dim, keepdim)``."""
        return self.graph.mean(self, dim, keepdim)

    def max(self, dim=None, keepdim=False):
        """``g.max(self, dim, keepdim)``, the values only (``torch.amax``);
        ``g.argmax(self, dim)`` gives the indices."""
        return self.graph.max(self, dim, keepdim)

    def min(self, dim=None, keepdim=False):
        """``g.min(self, dim, keepdim)``, the values only (``torch.amin``);
        ``g.argmin(self, dim)`` gives the indices."""
        return self.graph.min(self, dim, keepdim)

    def var(self, dim=None, keepdim=False, correction=1):
        """``g.var(self, dim, keepdim, correction=correction)``; unbiased by
        default, as ``torch.Tensor.var`` (``g.var``'s default is ``ddof=0``)."""
        return self.graph.var(self, dim, keepdim, correction=correction)

    def std(self, dim=None, keepdim=False, correction=1):
        """``g.std(self, dim, correction, keepdim)`` (unbiased by default)."""
        return self.graph.std(self, dim, correction, keepdim)

    def prod(self, dim=None, keepdim=False):
        """``g.prod(self, dim, keepdim)``."""
        return self.graph.prod(self, dim, keepdim)

    def logsumexp(self, dim, keepdim=False):
        """``g.logsumexp(self, dim, keepdim)``."""
        return self.graph.logsumexp(self, dim, keepdim)

    def norm(self, p=2, dim=None, keepdim=False):
        """``g.norm(self, p, dim, keepdim)`` (a vector norm)."""
        return self.graph.norm(self, p, dim, keepdim)

    def argmax(self, dim=None, keepdim=False):
        """``g.argmax(self, dim, keepdim)``: an int64 array, not a node."""
        return self.graph.argmax(self, dim, keepdim)

    def argmin(self, dim=None, keepdim=False):
        """``g.argmin(self, dim, keepdim)``: an int64 array, not a node."""
        return self.graph.argmin(self, dim, keepdim)

    def cumsum(self, dim):
        """``g.cumsum(self, dim)``."""
        return self.graph.cumsum(self, dim)

    # -------------------------------------------------------------- shape
    def reshape(self, *shape):
        """``g.reshape(self, shape)``: ``x.reshape(2, -1)`` or ``x.reshape((2, -1))``."""
        return self.graph.reshape(self, _dims(shape, "reshape"))

    def view(self, *shape):
        """``g.reshape(self, shape)`` (values are never shared with the input
        node, so a view and a reshape are the same node)."""
        return self.graph.reshape(self, _dims(shape, "view"))

    @property
    def T(self):
        """``g.transpose(self)``: the axes reversed."""
        return self.graph.transpose(self)

    def transpose(self, dim0, dim1):
        """Swap axes ``dim0`` and ``dim1``: ``g.transpose(self, perm)`` with
        the permutation that swaps them."""
        nd = len(self.shape)
        perm = list(range(nd))
        for d in (dim0, dim1):
            if isinstance(d, bool) or not isinstance(d, int) or not -nd <= d < nd:
                raise ValueError(f"transpose: dim {d!r} is out of range for a {nd}-d node")
        a, b = dim0 % nd, dim1 % nd
        perm[a], perm[b] = perm[b], perm[a]
        return self.graph.transpose(self, tuple(perm))

    def permute(self, *dims):
        """``g.transpose(self, dims)``: ``x.permute(0, 2, 1)`` or ``x.permute((0, 2, 1))``."""
        return self.graph.transpose(self, _dims(dims, "permute"))

    def flatten(self, start_dim=0, end_dim=-1):
        """``g.flatten(self, start_dim, end_dim)``; starts at axis 0 by default,
        as ``torch.Tensor.flatten`` (``g.flatten`` keeps the batch axis)."""
        return self.graph.flatten(self, start_dim, end_dim)

    def unsqueeze(self, dim):
        """``g.unsqueeze(self, dim)``."""
        return self.graph.unsqueeze(self, dim)

    def squeeze(self, dim=None):
        """``g.squeeze(self, dim)`` (None: every size-1 axis)."""
        return self.graph.squeeze(self, dim)

    # -------------------------------------------------------- elementwise
    def exp(self):
        """``g.exp(self)``."""
        return self.graph.exp(self)

    def log(self):
        """``g.log(self)``."""
        return self.graph.log(self)

    def sqrt(self):
        """``g.sqrt(self)``."""
        return self.graph.sqrt(self)

    def abs(self):
        """``g.abs(self)``."""
        return self.graph.abs(self)

    def tanh(self):
        """``g.tanh(self)``."""
        return self.graph.tanh(self)

    def sigmoid(self):
        """``g.sigmoid(self)``."""
        return self.graph.sigmoid(self)

    def relu(self):
        """``g.relu(self)``."""
        return self.graph.relu(self)

    def softmax(self, dim):
        """``g.softmax(self, axis=dim)``."""
        return self.graph.softmax(self, dim)

    def log_softmax(self, dim):
        """``g.log_softmax(self, axis=dim)``."""
        return self.graph.log_softmax(self, dim)

    def pow(self, exponent):
        """``g.pow(self, exponent)``."""
        return self.graph.pow(self, exponent)

    def matmul(self, other):
        """``g.matmul(self, other)``."""
        return self.graph.matmul(self, other)

    def clamp(self, min=None, max=None):
        """``g.clamp(self, min, max)``."""
        return self.graph.clamp(self, min, max)

    # ------------------------------------------------------ anything else
    def __getattr__(self, name):
        # only reached when the ordinary lookup failed (no cost to the above)
        if name.startswith("__"):
            raise AttributeError(f"'NodeId' object has no attribute {name!r}")
        hint = ""
        try:
            graph = object.__getattribute__(self, "graph")
        except AttributeError:
            graph = None
        spelled = _OTHER_SPELLING.get(name, name)
        if graph is not None and not name.startswith("_") \
                and callable(getattr(type(graph), spelled, None)):
            hint = f"; the graph has it: g.{spelled}(node, ...)"
        raise AttributeError(f"'NodeId' object has no attribute {name!r}{hint}")
