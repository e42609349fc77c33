"""Looking at a graph: ``to_dot``, ``summary`` and ``memory``."""
from __future__ import annotations

import numpy as np

from ..node import N_ATTRS, N_INPUTS, N_OP, N_RG, N_SAVED, Op


def nbytes_of(obj) -> int:
    """Bytes held by arrays inside ``obj`` (arrays, tuples, lists, dicts).

    Views count as the bytes they expose, so shared memory may be counted twice.
    """
    if obj is None:
        return 0
    if isinstance(obj, np.ndarray):
        return int(obj.nbytes)
    if isinstance(obj, (tuple, list)):
        return sum(nbytes_of(o) for o in obj)
    if isinstance(obj, dict):
        return sum(nbytes_of(o) for o in obj.values())
    return 0


class IntrospectionMixin:
    """Read-only views of the arena for debugging and memory accounting."""

    def _node_label(self, i: int) -> str:
        rec = self._nodes[i]
        op = Op(rec[N_OP])
        if op is Op.LEAF:
            return "variable" if rec[N_RG] else "constant"
        if op is Op.CUSTOM:   # a yscv.custom_op: its own name
            return f"{rec[N_ATTRS].op.name} (custom)"
        return op.name.lower()

    def _value_shape_str(self, i: int) -> str:
        v = self._values[i]
        return "released" if v is None else str(tuple(v.shape))

    def to_dot(self) -> str:
        """Graphviz source of the arena: one box per node, edges input -> node."""
        lines = ["digraph yscv {", "  rankdir=LR;", '  node [shape=box, fontname="monospace"];']
        for i in range(len(self._uids)):
            color = ', style=filled, fillcolor="#dde8ff"' if self._nodes[i][N_RG] else ""
            label = f"{i}: {self._node_label(i)}\\n{self._value_shape_str(i)}"
            lines.append(f'  n{i} [label="{label}"{color}];')
            for j in self._nodes[i][N_INPUTS]:
                lines.append(f"  n{j} -> n{i};")
        lines.append("}")
        return "\n".join(lines)

    def memory(self) -> dict:
        """Bytes held by the graph: ``values``, ``saved`` (for backward),
        ``grads`` (stored gradients), and their ``total``."""
        values = sum(nbytes_of(v) for v in self._values)
        saved = sum(nbytes_of(r[N_SAVED]) for r in self._nodes)
        grads = sum(nbytes_of(g) for g in self._grads.values())
        return {"values": values, "saved": saved, "grads": grads, "total": values + saved + grads}

    def summary(self) -> str:
        """One row per node: index, op, shape, requires_grad, bytes held
        (value + saved data + stored grad), then the totals."""
        rows = [f"{'index':>6}  {'op':<28} {'shape':<22} {'grad':<5} {'bytes':>12}"]
        for i in range(len(self._uids)):
            rec = self._nodes[i]
            held = nbytes_of(self._values[i]) + nbytes_of(rec[N_SAVED]) + nbytes_of(self._grads.get(i))
            rows.append(
                f"{i:>6}  {self._node_label(i):<28} {self._value_shape_str(i):<22} "
                f"{str(rec[N_RG]):<5} {held:>12,}"
            )
        m = self.memory()
        rows.append(
            f"{len(self._uids)} nodes; values {m['values']:,} B, saved {m['saved']:,} B, "
            f"grads {m['grads']:,} B, total {m['total']:,} B"
        )
        return "\n".join(rows)
