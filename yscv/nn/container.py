"""Containers: Sequential, ModuleList, ModuleDict."""
from __future__ import annotations

from collections import OrderedDict

from .module import Module

__all__ = ["Sequential", "ModuleList", "ModuleDict"]


class Sequential(Module):
    """Calls its children in order: ``x = child(g, x)``.

    ``Sequential(a, b, c)`` names children "0", "1", "2" (as PyTorch);
    ``Sequential(OrderedDict(name=module, ...))`` keeps the given names.
    Supports ``len``, iteration, integer indexing and slicing (a slice
    returns a new Sequential sharing the modules), and ``append``.
    """

    def __init__(self, *modules):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], OrderedDict):
            for name, m in modules[0].items():
                self.add_module(name, m)
        else:
            for i, m in enumerate(modules):
                if not isinstance(m, Module):
                    raise TypeError(f"Sequential: argument {i} is a {type(m).__name__}, not a Module")
                self.add_module(str(i), m)

    def forward(self, g, x):
        for m in self._modules.values():
            x = m(g, x)
        return x

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, idx):
        mods = list(self._modules.items())
        if isinstance(idx, slice):
            return Sequential(OrderedDict(mods[idx]))
        return mods[idx][1]

    def append(self, module: Module) -> "Sequential":
        if not isinstance(module, Module):
            raise TypeError(f"Sequential.append: expected a Module, got {type(module).__name__}")
        self.add_module(str(len(self._modules)), module)
        return self


class ModuleList(Module):
    """A list of modules registered as children "0", "1", ... (no forward)."""

    def __init__(self, modules=()):
        super().__init__()
        for m in modules:
            self.append(m)

    def append(self, module: Module) -> "ModuleList":
        if not isinstance(module, Module):
            raise TypeError(f"ModuleList.append: expected a Module, got {type(module).__name__}")
        self.add_module(str(len(self._modules)), module)
        return self

    def extend(self, modules) -> "ModuleList":
        for m in modules:
            self.append(m)
        return self

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, idx):
        mods = list(self._modules.values())
        if isinstance(idx, slice):
            return ModuleList(mods[idx])
        return mods[idx]


class ModuleDict(Module):
    """A dict of named child modules (no forward)."""

    def __init__(self, modules=None):
        super().__init__()
        for name, m in (modules or {}).items():
            self[name] = m

    def __setitem__(self, name: str, module: Module) -> None:
        self.add_module(name, module)

    def __getitem__(self, name: str) -> Module:
        return self._modules[name]

    def __contains__(self, name) -> bool:
        return name in self._modules

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()
