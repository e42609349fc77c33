"""What ``Module.state_dict`` / ``load_state_dict`` share with the layouts
that translate them (yscv/nn/torch_layout.py): the error they raise, the
key report, the table of named layouts, and the check that a module is
called with one graph."""
from __future__ import annotations

class StateDictError(ValueError):
    """``load_state_dict`` found missing / unexpected keys or mismatched shapes.

    Attributes:
        missing_keys: keys the module has but the state dict lacks.
        unexpected_keys: keys the state dict has but the module lacks.
        mismatched: list of ``(key, module_shape, state_shape)``.
        bad_values: list of ``(key, reason)`` for values that are not real arrays.
    """

    def __init__(self, message, missing_keys=(), unexpected_keys=(), mismatched=(), bad_values=()):
        super().__init__(message)
        self.missing_keys = list(missing_keys)
        self.unexpected_keys = list(unexpected_keys)
        self.mismatched = list(mismatched)
        self.bad_values = list(bad_values)


def key_problems(strict: bool, missing, unexpected) -> list:
    """The first lines of a `StateDictError` message: the missing and
    the unexpected keys, listed only when ``strict``."""
    problems = []
    if strict and missing:
        problems.append("missing key(s): " + ", ".join(repr(k) for k in missing))
    if strict and unexpected:
        problems.append("unexpected key(s): " + ", ".join(repr(k) for k in unexpected))
    return problems


def _check_graph(module, g) -> None:
    # Duck-typed so nn does not import the engine; catches ``layer(x)`` written
    # PyTorch-style, which would otherwise fail deep inside an op.
    if not hasattr(g, "_apply") or not hasattr(g, "param"):
        raise TypeError(
            f"{type(module).__name__}: call a layer as layer(g, x) with a yscv.Graph "
            f"first, got {type(g).__name__} as the graph")


#: state-dict layouts other than yscv's own: name -> (to_layout(module,
#: flatten_from), from_layout(module, state_dict, strict, flatten_from));
#: yscv.nn.torch_layout registers "torch" (so this module never imports it)
_STATE_LAYOUTS: dict = {}


def register_state_layout(name: str, to_layout, from_layout) -> None:
    """Make ``state_dict(layout=name)`` / ``load_state_dict(..., layout=name)``
    convert through ``to_layout`` / ``from_layout``."""
    _STATE_LAYOUTS[name] = (to_layout, from_layout)


def _check_layout(layout, fn: str, flatten_from) -> None:
    if layout != "yscv":
        raise ValueError(f"{fn}: layout must be 'yscv' or 'torch', got {layout!r}")
    if flatten_from is not None:
        raise ValueError(f"{fn}: flatten_from applies to layout='torch' only")
