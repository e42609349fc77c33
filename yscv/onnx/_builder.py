"""The export context: ONNX tensor names for arena nodes, node emission,
initializers, layout transposes and batch-aware shape tensors.

One `Builder` exists per export. The mapping functions of
`yscv.onnx._optable` call its helpers; nothing here knows any Op.

Shapes: the model is recorded once on the example inputs (trace 0) and, for
each symbol of ``dynamic_axes``, once more with that symbol's axes doubled.
An axis of a node whose size differs between traces depends on the symbol;
reshape targets spell such entries as ``0`` (copy the input's axis), ``-1``
(infer) or a product of the graph inputs' dynamic sizes (Shape/Gather/Mul),
so one file serves every batch size.
"""
from __future__ import annotations

import math

import numpy as np

INT64_MAX = np.iinfo(np.int64).max
INT64_MIN = np.iinfo(np.int64).min


class Symbol:
    """A free axis size: its name, the graph input and axis holding it, and
    its size in trace 0 (doubled in the symbol's own trace)."""

    def __init__(self, name: str, input_pos: int, axis: int, size: int, trace: int):
        self.name = name
        self.input_pos = input_pos
        self.axis = axis
        self.size = size
        self.trace = trace


class Builder:
    """Collects ONNX nodes and initializers for one export.

    Args:
        onnx: the ``onnx`` module (imported lazily by the caller).
        traces: the recorded graphs; ``traces[0]`` is the one exported.
        opset: the default-domain opset of the file.
        inputs: arena index -> graph input name (the example inputs).
        int_inputs: (graph input name, int64 example array) pairs: index
            attributes equal to one of them read the graph input instead.
        leaf_names: arena index -> initializer name (parameters, buffers).
        symbols: the `Symbol` s of ``dynamic_axes``.
        input_order: the graph input names in the order of the example inputs.
    """

    def __init__(self, onnx, traces, opset, inputs, int_inputs, leaf_names, symbols,
                 input_order):
        from onnx import helper, numpy_helper

        self.onnx = onnx
        self.helper = helper
        self.numpy_helper = numpy_helper
        self.g = traces[0]
        self.traces = traces
        self.opset = opset
        self.dtype = self.g.dtype
        self.nodes: list = []
        self.initializers: list = []
        self._names = dict(inputs)
        self._graph_inputs = set(inputs)
        self._int_inputs = list(int_inputs)
        self._leaf_names = dict(leaf_names)
        self._used_names: set = set(self._names.values()) | set(self._leaf_names.values())
        self._const_cache: dict = {}
        self._counter = 0
        self.symbols = list(symbols)
        self._input_by_pos = {pos: name for pos, name in enumerate(input_order)}

    # --------------------------------------------------------------- names
    def fresh(self, hint: str = "t", exact: bool = False) -> str:
        """An unused tensor name: ``hint`` itself when ``exact`` and free, else
        ``hint_<k>``."""
        if exact and hint not in self._used_names:
            self._used_names.add(hint)
            return hint
        while True:
            self._counter += 1
            name = f"{hint}_{self._counter}"
            if name not in self._used_names:
                self._used_names.add(name)
                return name

    def emit(self, op_type: str, inputs, outputs: int = 1, hint: str = None, domain=None,
             **attrs):
        """Append one ONNX node; returns its output name (a list if outputs > 1).
        ``inputs`` may hold "" for an omitted optional input."""
        outs = [self.fresh(hint or op_type.lower()) for _ in range(outputs)]
        attrs = {k: v for k, v in attrs.items() if v is not None}
        node = self.helper.make_node(op_type, list(inputs), outs,
                                     name=f"{op_type}_{len(self.nodes)}", domain=domain, **attrs)
        self.nodes.append(node)
        return outs[0] if outputs == 1 else outs

    # ---------------------------------------------------------- constants
    def const(self, array, hint: str = "const", exact: bool = False,
              initializer: bool = False) -> str:
        """A tensor holding ``array`` (its own dtype): a ``Constant`` node, or
        with ``initializer`` (the model's parameters and buffers) an
        initializer, which is what an importer trains (yscv.onnx.load makes
        float initializers Parameters, Constant nodes constants). Small
        constants are shared; ``exact``: named ``hint`` itself when free."""
        a = np.ascontiguousarray(array)
        key = None
        if a.size <= 64 and not initializer:
            key = (a.dtype.str, a.shape, a.tobytes())
            name = self._const_cache.get(key)
            if name is not None:
                return name
        name = self.fresh(hint, exact)
        tensor = self.numpy_helper.from_array(a, name)
        if initializer:
            self.initializers.append(tensor)
        else:
            self.nodes.append(self.helper.make_node("Constant", [], [name], value=tensor,
                                                    name=f"Constant_{len(self.nodes)}"))
        if key is not None and not exact:
            self._const_cache[key] = name
        return name

    def ints(self, values) -> str:
        """A 1-D int64 initializer."""
        return self.const(np.asarray(list(values), dtype=np.int64), "ints")

    def scalar(self, v, dtype=None) -> str:
        """A 0-d initializer of the graph dtype (or ``dtype``)."""
        return self.const(np.asarray(v, dtype=dtype or self.dtype), "scalar")

    def index_tensor(self, arr: np.ndarray, hint: str = "index") -> str:
        """An integer index attribute: the graph input it equals (an integer
        example input, so the exported model takes indices as input), else an
        int64 initializer."""
        for name, ex in self._int_inputs:
            if ex.shape == arr.shape and np.array_equal(ex, arr):
                return name
        return self.const(np.asarray(arr, dtype=np.int64), hint)

    # ------------------------------------------------------------- nodes
    def tensor(self, idx: int) -> str:
        """The tensor name of arena node ``idx`` (a leaf becomes an initializer,
        or a Constant node when it is no parameter or buffer, on first use)."""
        name = self._names.get(idx)
        if name is None:
            if self.g._ops[idx] != 0:
                raise RuntimeError(f"node {idx} used before it was exported")
            value = np.asarray(self.g._values[idx])
            if idx in self._leaf_names:        # a parameter or buffer: its own name
                name = self._leaf_names[idx]
                self.initializers.append(self.numpy_helper.from_array(
                    np.ascontiguousarray(value), name))
            else:                              # any other constant of the model
                name = self.const(value, f"const{idx}")
            self._names[idx] = name
        return name

    def set_tensor(self, idx: int, name: str) -> None:
        self._names[idx] = name

    def leaf_value(self, idx: int):
        """The value of ``idx`` if it is a leaf that is not a graph input, else None
        (weights in yscv's layout are re-laid out in NumPy when this is known)."""
        if self.g._ops[idx] == 0 and idx not in self._graph_inputs:
            return np.asarray(self.g._values[idx])
        return None

    def leaf_name(self, idx: int, suffix: str) -> str:
        base = self._leaf_names.get(idx) or f"const{idx}"
        return f"{base}.{suffix}"

    def weight(self, idx: int, relayout, ops, hint: str):
        """Tensor of arena node ``idx`` in ONNX's layout: ``relayout(array)``
        as an initializer when ``idx`` is a leaf, else ``ops(name)`` (the same
        re-layout as ONNX nodes)."""
        v = self.leaf_value(idx)
        if v is not None:
            return self.const(relayout(v), self.leaf_name(idx, hint), exact=True,
                              initializer=idx in self._leaf_names)
        return ops(self.tensor(idx))

    # ----------------------------------------------------------- shapes
    def shape(self, idx: int, trace: int = 0) -> tuple:
        return tuple(self.traces[trace]._shape(idx))

    def rank(self, idx: int) -> int:
        return len(self.shape(idx))

    def fixed_axes(self, idx: int, axes, op: str, index: int) -> None:
        """ValueError unless ``axes`` of node ``idx`` are the same size in
        every trace (an op whose ONNX form bakes those sizes in)."""
        free = self.dynamic_axes_of(idx) & set(axes)
        if free:
            raise ValueError(
                f"export: {op} (node {index}) needs fixed sizes on axes {sorted(free)} of "
                f"its input, which dynamic_axes makes free")

    def dynamic_axes_of(self, idx: int) -> set:
        """Axes of node ``idx`` whose size changes with a dynamic-axes symbol."""
        base = self.shape(idx)
        out = set()
        for t in range(1, len(self.traces)):
            s = self.shape(idx, t)
            out |= {k for k, (a, b) in enumerate(zip(base, s)) if a != b}
        return out

    def target_shape(self, idx: int, in_idx: int, op: str, expand: bool = False) -> str:
        """An int64 shape tensor for node ``idx`` (output shape) computed from
        ``in_idx``: Reshape semantics (0 copies, one -1 inferred) or, with
        ``expand``, Expand semantics (1 keeps the input's axis)."""
        out = self.shape(idx)
        ins = self.shape(in_idx)
        lead = len(out) - len(ins) if expand else 0
        traces = range(len(self.traces))
        dyn = self.dynamic_axes_of(idx)
        entries = []
        pending = []
        for k, v in enumerate(out):
            j = k - lead
            same = 0 <= j < len(ins) and all(
                self.shape(in_idx, t)[j] == self.shape(idx, t)[k] for t in traces)
            if expand and same:
                entries.append(1)
            elif k not in dyn:
                entries.append(v)
            elif not expand and same and j == k:
                entries.append(0)
            else:
                entries.append(None)
                pending.append(k)
        if not pending:
            return self.ints(entries)
        if len(pending) == 1 and not expand:
            entries[pending[0]] = -1
            return self.ints(entries)
        parts = []
        for k, e in enumerate(entries):
            parts.append(self.ints([e]) if e is not None else self._monomial(idx, k, op))
        return self.emit("Concat", parts, axis=0)

    def _monomial(self, idx: int, k: int, op: str) -> str:
        """Axis ``k`` of node ``idx`` as ``c * prod(symbol ** e)``, from the graph
        inputs' runtime shapes; ValueError when the size is no such product."""
        v0 = self.shape(idx)[k]
        factors = []
        denom = 1
        for sym in self.symbols:
            v = self.shape(idx, sym.trace)[k]
            if v == v0:
                continue
            e = round(math.log2(v / v0)) if v0 and v > v0 else -1
            if e < 1 or v != v0 * 2 ** e:
                raise ValueError(
                    f"export: {op} (node {idx}): axis {k} of its shape ({v0} at the example "
                    f"sizes) is not a multiple of a power of the dynamic axis "
                    f"{sym.name!r}; export without that dynamic axis")
            factors += [sym] * e
            denom *= sym.size ** e
        if v0 % denom:
            raise ValueError(
                f"export: {op} (node {idx}): axis {k} of size {v0} is not a multiple of "
                f"the dynamic sizes it depends on; export without dynamic_axes")
        term = None
        for sym in factors:
            shp = self.emit("Shape", [self._input_by_pos[sym.input_pos]])
            d = self.emit("Gather", [shp, self.ints([sym.axis])], axis=0)
            term = d if term is None else self.emit("Mul", [term, d])
        c = v0 // denom
        if c != 1:
            term = self.emit("Mul", [term, self.ints([c])])
        return term

    # ----------------------------------------------------------- helpers
    def reduce(self, op_type: str, x: str, axes, keepdims: bool) -> str:
        """A ``Reduce*`` node: ``axes`` None reduces all; axes are an input from
        opset 18 (ReduceSum: 13), an attribute before."""
        if axes is not None and len(axes) == 0:
            return self.emit("Identity", [x])
        keep = int(bool(keepdims))
        if axes is None:
            return self.emit(op_type, [x], keepdims=keep)
        if op_type == "ReduceSum" or self.opset >= 18:
            return self.emit(op_type, [x, self.ints(axes)], keepdims=keep)
        return self.emit(op_type, [x], axes=list(axes), keepdims=keep)

    def to_channels_first(self, x: str, rank: int) -> str:
        """[N, ..., C] -> [N, C, ...] (folded away where transposes cancel)."""
        if rank <= 2:
            return x
        return self.emit("Transpose", [x], perm=[0, rank - 1, *range(1, rank - 1)])

    def to_channels_last(self, x: str, rank: int) -> str:
        """[N, C, ...] -> [N, ..., C]."""
        if rank <= 2:
            return x
        return self.emit("Transpose", [x], perm=[0, *range(2, rank), 1])

    @property
    def exact_float_attributes(self) -> bool:
        """Float attributes are float32 in ONNX: exact for float32 models only."""
        return self.dtype == np.float32

    @property
    def elem_type(self) -> int:
        return self.helper.np_dtype_to_tensor_dtype(self.dtype)
