"""What a record watches besides the graph: yscv.random's draws and
Python writes to ``Parameter.data`` / ``Parameter.grad`` while ``fn`` runs
(yscv/compile/record.py)."""
from __future__ import annotations

from .. import random as _random


class DrawWatch:
    """yscv.random's draw functions, noting each draw, for the record."""

    def __init__(self, g, record):
        self.g = g
        self.record = record
        self.saved = None

    def __enter__(self):
        self.saved = (_random.draw_seed, _random.draw)
        seed_fn, draw_fn = self.saved
        g, actions = self.g, self.record.actions

        def draw_seed():
            s = seed_fn()
            actions.append(("seed", len(g._uids), s))
            return s

        def draw(fn):
            a = draw_fn(fn)
            actions.append(("draw", len(g._uids), fn))
            return a

        _random.draw_seed = draw_seed
        _random.draw = draw
        return self

    def __exit__(self, *exc):
        _random.draw_seed, _random.draw = self.saved
        return False


class ParamWatch:
    """Writes to ``Parameter.data`` / ``Parameter.grad`` from Python while
    ``fn`` runs (an optimizer step, ``zero_grad`` inside it): noted, then
    refused by `finish`. The backward's own writes are allowed."""

    def __init__(self, rec):
        self.rec = rec
        self.saved = None

    def __enter__(self):
        from ..nn.parameter import Parameter
        self.cls = Parameter
        self.saved = {n: Parameter.__dict__[n] for n in ("data", "grad")}
        rec = self.rec
        for n, slot in self.saved.items():
            def setter(p, v, slot=slot, n=n):
                if not (n == "grad" and rec.in_backward):
                    rec.param_writes.append(n)
                slot.__set__(p, v)
            setattr(Parameter, n, property(slot.__get__, setter, slot.__delete__))
        return self

    def __exit__(self, *exc):
        for n, slot in self.saved.items():
            setattr(self.cls, n, slot)
        return False
