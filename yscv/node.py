"""``NodeId``, the handle to a node, and the node record's fields (``Op``,
the enum of every operation, is yscv/op.py; it is named here too).

A node is one plain tuple, its record (``Graph._nodes[i]``, fields below),
beside its value and uid: appending a node is one tuple and three list
appends, and the backward walk reads a node with one list index and an
unpack. A ``NodeId`` names one arena slot of one graph at one generation.
"""
from __future__ import annotations

import itertools

import numpy as np

from . import registry
from .node_methods import TensorMethods
from .op import ENGINE_OPS, Op  # noqa: F401  (the record's vocabulary, named here too)


#: Fields of a node record ``(op, inputs, attrs, saved, rg, needs, plain,
#: shape)``, a tuple built once at the append (only checkpointing replaces
#: one, to drop or restore its ``saved``):
#:
#: ``op`` int(Op); ``inputs`` tuple of input arena indices (empty for
#: leaves); ``attrs`` the static attributes given to forward and backward;
#: ``saved`` what forward saved for backward (None when the node does not
#: require grad, or released); ``rg`` requires_grad; ``needs`` per input,
#: whether it requires grad (the rules skip the others); ``plain`` the walk
#: need not conform the node's input gradients (``Graph._apply2``);
#: ``shape`` the value's shape (a value is only ever replaced by one of
#: the same shape), which the append compares instead of reading the
#: operands' shapes.
N_OP, N_INPUTS, N_ATTRS, N_SAVED, N_RG, N_NEEDS, N_PLAIN, N_SHAPE = range(8)


def with_saved(record: tuple, saved) -> tuple:
    """``record`` with its ``saved`` field replaced (release, recompute)."""
    return record[:N_SAVED] + (saved,) + record[N_SAVED + 1:]


_next_uid = itertools.count(1).__next__
_UFUNC = registry.UFUNC
_FORWARD = registry.FORWARD
_ndarray = np.ndarray

# Plain module constants: attribute access on an Enum class costs ~90 ns on
# Python 3.11, which matters on the per-node hot path.
_ADD, _SUB, _MUL, _DIV, _POW = Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.POW


def _binary_dunder(op: Op, name: str):
    """``NodeId.<name>`` (``a + b``, ``a * b`` ...) for ``op``: the two-NodeId
    path of `_GraphCore._apply2` written into the dunder itself, so
    ``x * w`` runs one Python frame instead of two (~50 ns less per binary
    node on the scalar chain, docs/engine.md); any other right operand goes
    to ``a.graph._apply2``. The op's ufunc form and forward are read from
    the registry per call, as ``_apply2`` does. Keep the body in step with ``_apply2`` (a test
    compares the two node for node)."""

    def dunder(a, b):
        if type(b) is not NodeId:
            return a.graph._apply2(op, a, b)
        self = a.graph
        uids = self._uids
        i = a.index
        j = b.index
        try:  # uids are process-unique: a match also proves b is self's
            stale = uids[i] != a.uid or uids[j] != b.uid
        except IndexError:
            stale = True
        if stale:
            self._index(a)
            self._index(b)
        values = self._values
        va = values[i]
        vb = values[j]
        if va is None:
            va = self._recompute_value(i)
        if vb is None:
            vb = self._recompute_value(j)
        nodes = self._nodes
        na = nodes[i]
        nb = nodes[j]
        sa = na[N_SHAPE]
        same = sa == nb[N_SHAPE]
        uf = _UFUNC[op]
        try:
            if uf is not None and (same or va.ndim == vb.ndim):
                value = uf(va, vb)
                saved = None
                plain = same and sa != ()
            else:
                value, saved = _FORWARD[op](None, va, vb)
                plain = False
        except ValueError as exc:
            raise self._binary_shape_error(op, va, vb, exc) from None
        if type(value) is not _ndarray:
            value = np.asarray(value)
        if self.detect_anomaly:
            self._check_forward_finite(op, value)
        ra = na[N_RG]
        rb = nb[N_RG]
        rg = (ra or rb) and self._grad_enabled
        k = len(uids)
        uid = _next_uid()
        nodes.append((op, (i, j), None, saved if rg else None, rg, (ra, rb), plain,
                      sa if plain else value.shape))
        values.append(value)
        uids.append(uid)
        nid = _NodeIdBuilder()
        nid.graph = self
        nid.index = k
        nid.uid = uid
        nid.__class__ = NodeId
        return nid

    dunder.__name__ = dunder.__qualname__ = name
    dunder.__doc__ = f"``{name}``: records ``{Op(op).name.lower()}`` on the owning graph."
    return dunder


class _NodeIdFields:
    """The three slots a NodeId holds (shared layout with its builder twin)."""

    __slots__ = ("graph", "index", "uid")


class NodeId(_NodeIdFields, TensorMethods):
    """Immutable, hashable handle to one node of one graph.

    Attributes:
        graph: the owning `yscv.Graph`.
        index: the node's arena position.
        uid: a process-wide unique number; a NodeId whose uid no longer matches
            the slot (the node was truncated and the index reused) is stale.

    Supports ``+ - * / ** @``, unary ``-`` and ``x[key]`` (basic slicing),
    which record nodes on the owning graph. Comparisons are not overloaded.
    ``shape`` and ``dtype`` describe the node's value (read without
    recomputing a released value). A NodeId is not a sequence: ``iter``,
    ``list(n)`` and unpacking raise ``TypeError`` (otherwise Python would
    fall back to ``n[0], n[1], ...`` and append getitem nodes).

    PyTorch's tensor methods (``loss.backward()``, ``loss.item()``,
    ``x.sum(dim=1)``, ``x.reshape(2, 3)``, ``x.T`` ...) are one call each of
    the owning graph's op (``yscv.node_methods``); any other missing name
    raises ``AttributeError`` giving the graph's spelling where there is one.
    """

    __slots__ = ()

    def __setattr__(self, name, value):
        raise AttributeError("NodeId is immutable")

    def __delattr__(self, name):
        raise AttributeError("NodeId is immutable")

    def __repr__(self) -> str:
        return f"NodeId({self.index})"

    def __hash__(self) -> int:
        return hash(self.uid)

    def __eq__(self, other) -> bool:
        return type(other) is NodeId and other.uid == self.uid

    def __ne__(self, other) -> bool:
        return not self.__eq__(other)

    def __reduce__(self):
        raise TypeError("NodeId cannot be pickled: it is only meaningful inside its Graph")

    @property
    def shape(self) -> tuple:
        """The shape of the node's value (a tuple)."""
        g = self.graph
        return g._shape(g._index(self))

    @property
    def dtype(self):
        """The dtype of the node's value (``np.dtype``; the graph's dtype)."""
        g = self.graph
        v = g._values[g._index(self)]
        return g.dtype if v is None else v.dtype

    def __iter__(self):
        raise TypeError(
            f"NodeId({self.index}) is not iterable: a node is not a sequence; index it "
            "explicitly (n[0]) or use g.value(n) for the array")

    # arithmetic records nodes on the owning graph; with a NodeId on the left
    # the binary dunders hold the graph's two-operand fast path themselves
    # (`_binary_dunder`: one frame fewer per node, the per-node hot path)
    __add__ = _binary_dunder(_ADD, "__add__")

    def __radd__(self, other):
        return self.graph._apply2(_ADD, other, self)

    __sub__ = _binary_dunder(_SUB, "__sub__")

    def __rsub__(self, other):
        return self.graph._apply2(_SUB, other, self)

    __mul__ = _binary_dunder(_MUL, "__mul__")

    def __rmul__(self, other):
        return self.graph._apply2(_MUL, other, self)

    __truediv__ = _binary_dunder(_DIV, "__truediv__")

    def __rtruediv__(self, other):
        return self.graph._apply2(_DIV, other, self)

    __pow__ = _binary_dunder(_POW, "__pow__")

    def __rpow__(self, other):
        return self.graph._apply2(_POW, other, self)

    def __matmul__(self, other):
        return self.graph.matmul(self, other)

    def __rmatmul__(self, other):
        return self.graph.matmul(other, self)

    def __neg__(self):
        return self.graph.neg(self)

    def __getitem__(self, key):
        return self.graph.getitem(self, key)

    # NumPy must not treat a NodeId as an array-like scalar and broadcast over it
    __array_ufunc__ = None


class _NodeIdBuilder(_NodeIdFields):
    """Mutable twin of NodeId: filled with plain attribute stores, then its
    ``__class__`` is switched to NodeId (cheaper than the three slot
    descriptor calls of `make_node_id`). Only the graph's node append
    (the per-node hot path, ``Graph._append`` and its inline copies) uses it,
    as ``_NodeIdBuilder()``: calling the class (no ``__init__``) measured
    ~30 ns cheaper than ``object.__new__(_NodeIdBuilder)``."""

    __slots__ = ()


_new_object = object.__new__
_set_graph = _NodeIdFields.graph.__set__
_set_index = _NodeIdFields.index.__set__
_set_uid = _NodeIdFields.uid.__set__


def make_node_id(graph, index: int, uid: int) -> NodeId:
    """A NodeId for an existing node (internal: the slots are set through
    their descriptors, bypassing the immutability guard)."""
    nid = _new_object(NodeId)
    _set_graph(nid, graph)
    _set_index(nid, index)
    _set_uid(nid, uid)
    return nid


def next_uid() -> int:
    """A fresh process-wide unique node number (thread-safe under the GIL)."""
    return _next_uid()
