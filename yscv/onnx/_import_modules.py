"""The sub-modules of an imported ONNX model and what may replace them.

An initializer named ``fc.weight`` is parameter ``weight`` of a child
container ``fc`` (``Container``). The ONNX nodes read such parameters
directly, so a container is not a module the forward calls; but when ONE
node is the only reader of everything a container holds and that node is a
layer (Gemm -> a Linear, Conv -> a Conv2d, BatchNormalization -> a
BatchNorm2d, ...: ``LAYER_SLOTS``), the node and the container are one
layer call (a ``Call``). Assigning any module there (``m.fc =
nn.Linear(128, 10)``) makes the forward call that module on the node's data
input instead of running the node.

Every other assignment that would take something the forward reads out of
the module tree (a container several nodes read, a parent of containers,
``None``) is refused at assignment by ``Guard``, with a message that
says how to cut the graph instead (``yscv.onnx.load(..., outputs=[...])``).
A Parameter assigned over an imported one is honoured: the forward reads
parameters by their path at each call.
"""
from __future__ import annotations

import numpy as np

from ..nn.module import Module
from ..nn.parameter import Parameter

__all__ = ["Container", "Guard", "Call", "GuardedMixin", "LAYER_SLOTS", "find_calls"]

_ABSENT = object()

#: operator -> (parameter slots, which must all be the layer's, and whether
#: the layer takes its input channel-last, as yscv's conv and norm layers do)
LAYER_SLOTS = {
    "Gemm": ((1, 2), False),
    "MatMul": ((1,), False),
    "Conv": ((1, 2), True),
    "ConvTranspose": ((1, 2), True),
    "BatchNormalization": ((1, 2, 3, 4), True),
    "InstanceNormalization": ((1, 2), True),
    "LayerNormalization": ((1, 2), False),
}


class Call:
    """One layer call: the ONNX node ``index`` (and, for MatMul + Add, the
    Add ``tail``) that the imported container at ``path`` stands for.
    ``output`` is the value name the call produces."""

    __slots__ = ("index", "path", "original", "channel_last", "tail", "output")

    def __init__(self, index, path, original, channel_last, tail, output):
        self.index, self.path, self.original = index, path, original
        self.channel_last, self.tail, self.output = channel_last, tail, output

    def current(self, root):
        """The module now at ``path`` (the original container, or a replacement)."""
        mod = root
        for p in self.path:
            mod = mod._modules.get(p)
            if mod is None:
                return None
        return mod


class Guard:
    """What the forward reads, shared by the root module and its containers.

    ``calls``: path -> ``Call``; ``params`` / ``buffers``: paths of the
    imported parameters and buffers; ``readers``: path of every container,
    parameter and buffer the forward reads -> [(node description, its data
    input)], the nodes that read it. Inactive while the module is built."""

    def __init__(self):
        self.active = False
        self.calls, self.params, self.buffers, self.readers = {}, set(), set(), {}
        self.by_index = {}             # node index -> Call

    def check(self, path: tuple, value) -> None:
        """Raise if putting ``value`` at ``path`` (None: deleting) would take
        something the forward reads out of the module tree."""
        if not self.active or path not in self.readers:
            return
        if path in self.calls and isinstance(value, Module):
            return
        if path in self.params and isinstance(value, Parameter):
            return
        if path in self.buffers and isinstance(value, np.ndarray):
            return
        raise TypeError(self._refusal(path, value))

    def _refusal(self, path, value) -> str:
        dotted = ".".join(path)
        what = "delete" if value is None else f"assign {type(value).__name__} to"
        readers = self.readers[path]
        shown = ", ".join(w for w, _ in readers[:3]) + (", ..." if len(readers) > 3 else "")
        if path in self.params or path in self.buffers:
            kind = "Parameter" if path in self.params else "ndarray"
            return (f"OnnxModule: cannot {what} {dotted!r}: the forward reads it "
                    f"({shown}); assign a {kind} of the shape it needs")
        if path in self.calls:
            return (f"OnnxModule: cannot {what} {dotted!r}: the forward calls it in place of "
                    f"{shown}; assign a module to replace it (nn.Identity() passes the "
                    "input through)")
        first = next((inp for _, inp in readers if inp), None)
        hint = (f" (the data input of its first reader is {first!r})" if first else "")
        calls = ", ".join(repr(".".join(p)) for p in sorted(self.calls)) or "none"
        return (f"OnnxModule: cannot {what} {dotted!r}: ONNX nodes read its parameters "
                f"directly ({shown}), so the forward would not call a module put there. "
                "To put a new head on the model, cut the graph where the head's input is "
                "computed: yscv.onnx.load(src, outputs=[tensor name])" + hint +
                ", then call your module on the model's output. Sub-modules the forward "
                f"calls, which can be replaced by any module: {calls}")


class GuardedMixin:
    """``__setattr__``, ``__delattr__``, ``add_module`` and
    ``register_parameter`` that first ask the shared ``Guard``; and
    indexing by child name or number (``m.features[0]``: children named by
    numbers, as PyTorch's Sequential writes them, ``features.0.weight``)."""

    def __setattr__(self, name, value):
        d = self.__dict__
        if "_guard" in d and d.get(name, _ABSENT) is not value:  # re-assigning: no change
            d["_guard"].check(d["_path"] + (name,), value)
        super().__setattr__(name, value)

    def __delattr__(self, name):
        d = self.__dict__
        if "_guard" in d:
            d["_guard"].check(d["_path"] + (name,), None)
        super().__delattr__(name)

    def add_module(self, name: str, module) -> None:
        self.__dict__["_guard"].check(self.__dict__["_path"] + (name,), module)
        super().add_module(name, module)

    def register_parameter(self, name: str, param) -> None:
        self.__dict__["_guard"].check(self.__dict__["_path"] + (name,), param)
        super().register_parameter(name, param)

    def _index_key(self, key) -> str:
        if isinstance(key, str):
            if key in self._modules:
                return key
        elif isinstance(key, (int, np.integer)) and not isinstance(key, bool):
            if key >= 0 and str(int(key)) in self._modules:
                return str(int(key))
        else:
            raise TypeError(f"{self._name()}[{key!r}]: index with an int or a child's name, "
                            f"got {type(key).__name__}")
        raise IndexError(f"{self._name()}[{key!r}]: no such child; children: "
                         f"{list(self._modules)}")

    def _name(self) -> str:
        return ".".join(self._path) or "OnnxModule"

    def __getitem__(self, key):
        return self._modules[self._index_key(key)]

    def __setitem__(self, key, module):
        setattr(self, self._index_key(key), module)


class Container(GuardedMixin, Module):
    """A sub-module that holds imported parameters and buffers (and child
    containers). Children named by numbers are also reached by index:
    ``m.features[0]``, ``m.features[0] = layer``. The numbers are the
    file's: only children holding parameters exist (a ReLU has none), so
    there are no negative indices."""

    def __init__(self, path: tuple, guard: Guard):
        super().__init__()
        self.__dict__["_path"] = tuple(path)
        self.__dict__["_guard"] = guard

    def extra_repr(self) -> str:
        held = [f"{k}: {tuple(p.shape)}" for k, p in self._parameters.items() if p is not None]
        held += [f"{k}: {tuple(b.shape)}" for k, b in self._buffers.items() if b is not None]
        return ", ".join(held)


def _only_reader(name, node, consumers, graph_outputs) -> bool:
    return name not in graph_outputs and all(n is node for n, _ in consumers.get(name, ()))


def find_calls(nodes, consumers, graph_outputs, owner) -> dict:
    """path -> ``Call`` for every node that is one layer call: it reads
    only initializers (at its ``LAYER_SLOTS``) of one container, that
    container holds nothing else, nothing else reads them, and its attributes
    say nothing a layer would not (Gemm: no transA, alpha = beta = 1;
    LayerNormalization: the last axis; no extra outputs in use).
    ``owner(node, slot)``: the module holding the initializer the node reads
    at ``slot`` (None when it reads no imported parameter or buffer there)."""
    calls = {}
    for node in nodes:
        spec = LAYER_SLOTS.get(node.op)
        if spec is None or not _plain(node, consumers, graph_outputs):
            continue
        slots, channel_last = spec
        present = [s for s in slots if s < len(node.inputs) and node.inputs[s]]
        found = {id(owner(node, s)): owner(node, s) for s in present}
        if len(found) != 1 or None in found.values():
            continue
        (held_by,) = found.values()
        if not isinstance(held_by, Container) or held_by._modules:
            continue
        tail, output, held = None, node.outputs[0], len({node.inputs[s] for s in present})
        if node.op == "MatMul":
            tail, output, extra = _bias_add(node, consumers, graph_outputs, held_by, owner)
            held += extra
        if len(held_by._parameters) + len(held_by._buffers) != held:
            continue
        if not all(_only_reader(node.inputs[s], node, consumers, graph_outputs) for s in present):
            continue
        calls[held_by._path] = Call(node.index, held_by._path, held_by, channel_last, tail,
                                    output)
    return calls


def _plain(node, consumers, graph_outputs) -> bool:
    at = node.attrs
    if any(o and (o in consumers or o in graph_outputs) for o in node.outputs[1:]):
        return False
    if node.op == "Gemm":
        return (not at.get("transA", 0) and float(at.get("alpha", 1.0)) == 1.0
                and float(at.get("beta", 1.0)) == 1.0)
    if node.op == "LayerNormalization":
        return int(at.get("axis", -1)) == -1
    return True


def _bias_add(matmul, consumers, graph_outputs, held_by, owner):
    """MatMul followed by an Add of a bias held by the same container (a
    Linear as yscv.onnx.export writes it): (the Add node, its output, 1);
    else (None, the MatMul's output, 0)."""
    out = matmul.outputs[0]
    readers = consumers.get(out, [])
    if out in graph_outputs or len(readers) != 1 or readers[0][0].op != "Add":
        return None, out, 0
    add, slot = readers[0]
    if len(add.inputs) != 2 or owner(add, 1 - slot) is not held_by \
            or not _only_reader(add.inputs[1 - slot], add, consumers, graph_outputs):
        return None, out, 0
    return add.index, add.outputs[0], 1
