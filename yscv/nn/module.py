"""``Module``: the base class of layers (parameters, buffers, sub-modules, state).

A module is called with the graph first: ``y = layer(g, x)`` runs
``layer.forward(g, x)``, which binds its parameters into ``g`` (``g.param``:
once per graph, no copy) and appends the ops. Attributes are registered as
in PyTorch: assigning a `Parameter` registers a parameter, assigning
a ``Module`` registers a child, `register_buffer` registers a buffer
(an ndarray that is state but not trained, e.g. batch-norm running stats).
"""
from __future__ import annotations

import weakref
from collections import OrderedDict, namedtuple

import numpy as np

from ._binding import bind_buffer, bind_param
from .parameter import Parameter, cast_problem
from .state_dict import (_STATE_LAYOUTS, StateDictError, _check_graph, _check_layout,  # noqa: F401
                         key_problems)

__all__ = ["Module", "StateDictError", "IncompatibleKeys", "RemovableHandle"]

IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


def _register(module, table: str, name: str, value) -> None:
    """``value`` under ``name`` in ``module``'s ``table`` ("_parameters" or
    "_modules"), dropped from its other tables, and set as the attribute."""
    d = module.__dict__
    for key in ("_parameters", "_buffers", "_modules"):
        if key != table:
            d[key].pop(name, None)
    d[table][name] = value
    object.__setattr__(module, name, value)


class RemovableHandle:
    """What ``register_forward_hook`` / ``register_forward_pre_hook`` return:
    ``handle.remove()`` unregisters the hook (again: no effect); usable as a
    context manager that removes the hook on exit (PyTorch's handle)."""

    _next_id = 0

    def __init__(self, hooks: dict):
        self.id = RemovableHandle._next_id
        RemovableHandle._next_id += 1
        self._hooks = weakref.ref(hooks)

    def remove(self) -> None:
        hooks = self._hooks()
        if hooks is not None:
            hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def _add_hook(module, table: str, hook, prepend: bool, fn: str) -> RemovableHandle:
    if not callable(hook):
        raise TypeError(f"{type(module).__name__}.{fn}: hook must be callable, "
                        f"got {type(hook).__name__}")
    if not isinstance(prepend, (bool, np.bool_)):
        raise TypeError(f"{type(module).__name__}.{fn}: prepend must be a bool, got {prepend!r}")
    hooks = module.__dict__.get(table)
    if hooks is None:
        hooks = module.__dict__[table] = OrderedDict()
    handle = RemovableHandle(hooks)
    hooks[handle.id] = hook
    if prepend:
        hooks.move_to_end(handle.id, last=False)
    return handle


class Module:
    """Base class: subclasses define ``__init__`` (create parameters) and
    ``forward(g, *inputs) -> NodeId``.

    ``training`` (True after construction) selects the behaviour of dropout and
    batch norm; `train` / `eval` set it recursively.
    """

    def __init__(self):
        d = self.__dict__
        d["_parameters"] = OrderedDict()
        d["_buffers"] = OrderedDict()
        d["_non_persistent"] = set()
        d["_modules"] = OrderedDict()
        d["_forward_pre_hooks"] = OrderedDict()
        d["_forward_hooks"] = OrderedDict()
        d["training"] = True

    # ------------------------------------------------------------ registry
    def __setattr__(self, name, value):
        d = self.__dict__
        if "_parameters" not in d:
            raise AttributeError(
                f"{type(self).__name__}: call super().__init__() before assigning attributes")
        params, bufs, mods = d["_parameters"], d["_buffers"], d["_modules"]
        if isinstance(value, Parameter):
            _register(self, "_parameters", name, value)
            return
        if isinstance(value, Module):
            _register(self, "_modules", name, value)
            return
        if name in params:
            if value is not None:
                raise TypeError(
                    f"{type(self).__name__}.{name} is a parameter; assign a Parameter or None, "
                    f"got {type(value).__name__}")
            params[name] = None
        elif name in bufs:
            if value is not None and not isinstance(value, np.ndarray):
                raise TypeError(
                    f"{type(self).__name__}.{name} is a buffer; assign an ndarray or None, "
                    f"got {type(value).__name__}")
            bufs[name] = value
        elif name in mods:
            if value is not None:
                raise TypeError(
                    f"{type(self).__name__}.{name} is a sub-module; assign a Module or None, "
                    f"got {type(value).__name__}")
            mods[name] = None
        object.__setattr__(self, name, value)

    def __delattr__(self, name):
        for key in ("_parameters", "_buffers", "_modules"):
            self.__dict__[key].pop(name, None)
        self.__dict__["_non_persistent"].discard(name)
        object.__delattr__(self, name)

    def register_buffer(self, name: str, array, persistent: bool = True) -> None:
        """Register an ndarray (or None) as state that is not trained.

        Persistent buffers appear in `state_dict`. The array is kept as
        is (no copy); layers update it in place.
        """
        if not isinstance(name, str) or not name or "." in name:
            raise ValueError(f"register_buffer: bad buffer name {name!r}")
        if name in self._parameters or name in self._modules:
            raise KeyError(f"register_buffer: {name!r} is already a parameter or sub-module")
        if array is not None and not isinstance(array, np.ndarray):
            raise TypeError(f"register_buffer: {name!r} must be an ndarray or None, "
                            f"got {type(array).__name__}")
        self._buffers[name] = array
        if persistent:
            self._non_persistent.discard(name)
        else:
            self._non_persistent.add(name)
        object.__setattr__(self, name, array)

    def register_parameter(self, name: str, param) -> None:
        """Register a Parameter (or None) under ``name``."""
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"register_parameter: {name!r} must be a Parameter or None")
        _register(self, "_parameters", name, param)

    def add_module(self, name: str, module) -> None:
        """Register a child module (or None) under ``name``."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"add_module: {name!r} must be a Module or None")
        _register(self, "_modules", name, module)

    # ------------------------------------------------------------- calling
    def __call__(self, g, *args, **kwargs):
        _check_graph(self, g)
        d = self.__dict__
        pre, post = d.get("_forward_pre_hooks"), d.get("_forward_hooks")
        if pre:
            for hook in list(pre.values()):
                new = hook(self, g, args)
                if new is not None:
                    args = new if isinstance(new, tuple) else (new,)
        out = self.forward(g, *args, **kwargs)
        if post:
            for hook in list(post.values()):
                new = hook(self, g, args, out)
                if new is not None:
                    out = new
        return out

    def register_forward_pre_hook(self, hook, *, prepend: bool = False) -> RemovableHandle:
        """Call ``hook(module, g, args)`` before every ``forward``, as PyTorch's
        (with the graph passed along). ``args`` is the tuple of positional
        inputs after ``g`` (keyword arguments are not passed to hooks); a
        hook returning something other than None replaces them (a
        non-tuple is wrapped in a 1-tuple), and later hooks and ``forward``
        see the replacement. Hooks run in registration order (``prepend=True``
        puts this one first). Returns a handle whose ``remove()`` unregisters it."""
        return _add_hook(self, "_forward_pre_hooks", hook, prepend, "register_forward_pre_hook")

    def register_forward_hook(self, hook, *, prepend: bool = False) -> RemovableHandle:
        """Call ``hook(module, g, args, output)`` after every ``forward``, as
        PyTorch's (with the graph passed along); ``args`` are the inputs
        ``forward`` received (after any pre-hook replaced them). A hook
        returning something other than None replaces the output, which later
        hooks and the caller see. Hooks run in registration order
        (``prepend=True`` puts this one first). Returns a handle whose
        ``remove()`` unregisters it."""
        return _add_hook(self, "_forward_hooks", hook, prepend, "register_forward_hook")

    def forward(self, g, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} does not define forward(g, ...)")

    def param(self, g, name: str):
        """Bind parameter ``name`` of this module into ``g`` (NodeId)."""
        return bind_param(g, self._parameters[name])

    def buffer(self, g, name: str):
        """Bind buffer ``name`` of this module into ``g`` as a constant view leaf."""
        return bind_buffer(g, self._buffers[name], f"{type(self).__name__}.{name}")

    def bind(self, g) -> int:
        """Bind every parameter and buffer into ``g`` now; returns ``len(g)``.

        Use it to reuse one graph across steps: ``k = model.bind(g)`` once,
        then ``g.truncate(k)`` at the start of each step keeps the bound
        leaves (parameters first, per-step nodes after).
        """
        for p in self.parameters():
            bind_param(g, p)
        for name, b in self.named_buffers():
            if b.dtype.kind == "f":  # counters such as num_batches_tracked stay outside
                bind_buffer(g, b, name)
        return len(g)

    # ----------------------------------------------------------- traversal
    def named_modules(self, prefix: str = "", memo=None):
        """(name, module) for this module and every descendant, each once."""
        if memo is None:
            memo = set()
        if id(self) in memo:
            return
        memo.add(id(self))
        yield prefix, self
        for name, child in self._modules.items():
            if child is None:
                continue
            yield from child.named_modules(f"{prefix}.{name}" if prefix else name, memo)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        for name, child in self._modules.items():
            if child is not None:
                yield name, child

    def children(self):
        for _, child in self.named_children():
            yield child

    def _module_paths(self, prefix: str = "", _ancestors=None):
        """(path, module) for EVERY path that reaches a module: one shared by
        two parents appears under both (PyTorch's state-dict traversal);
        a module that contains itself is not followed into again."""
        if _ancestors is None:
            _ancestors = set()
        _ancestors.add(id(self))
        yield prefix, self
        for name, child in self._modules.items():
            if child is not None and id(child) not in _ancestors:
                yield from child._module_paths(f"{prefix}.{name}" if prefix else name,
                                               _ancestors)
        _ancestors.discard(id(self))

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True):
        """(dotted name, Parameter), each parameter once (a shared one under
        its first name), as PyTorch; ``remove_duplicate=False`` yields every
        name, like the keys of `state_dict`."""
        if not remove_duplicate:
            mods = self._module_paths(prefix) if recurse else [(prefix, self)]
            for mname, m in mods:
                for name, p in m._parameters.items():
                    if p is not None:
                        yield (f"{mname}.{name}" if mname else name), p
            return
        seen = set()
        mods = self.named_modules(prefix) if recurse else [(prefix, self)]
        for mname, m in mods:
            for name, p in m._parameters.items():
                if p is None or id(p) in seen:
                    continue
                seen.add(id(p))
                yield (f"{mname}.{name}" if mname else name), p

    def parameters(self, recurse: bool = True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True, persistent_only: bool = False):
        seen = set()
        mods = self.named_modules(prefix) if recurse else [(prefix, self)]
        for mname, m in mods:
            for name, b in m._buffers.items():
                if b is None or id(b) in seen:
                    continue
                if persistent_only and name in m._non_persistent:
                    continue
                seen.add(id(b))
                yield (f"{mname}.{name}" if mname else name), b

    def buffers(self, recurse: bool = True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def num_parameters(self, trainable_only: bool = False) -> int:
        return sum(p.size for p in self.parameters() if p.requires_grad or not trainable_only)

    def apply(self, fn):
        """Call ``fn(module)`` on every descendant and self, children first
        (recursively, each child's subtree before the next child), then
        returns self, as PyTorch (e.g. ``model.apply(init_weights)``)."""
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    # ---------------------------------------------------------------- modes
    def train(self, mode: bool = True):
        """Set training mode on self and every descendant; returns self."""
        for m in self.modules():
            m.__dict__["training"] = bool(mode)
        return self

    def eval(self):
        """``train(False)``: dropout is the identity, batch norm uses running stats."""
        return self.train(False)

    def zero_grad(self) -> None:
        """Every parameter's ``grad`` back to None."""
        for p in self.parameters():
            p.grad = None

    def requires_grad_(self, requires_grad: bool = True):
        """Freeze (False) or unfreeze every parameter; returns self."""
        for p in self.parameters():
            p.requires_grad = bool(requires_grad)
        return self

    def to(self, dtype):
        """Convert every parameter and floating buffer to ``dtype`` (float32/float64).

        Arrays are replaced, so graphs that bound them before are detached;
        optimizers must be created after the conversion.
        """
        dt = np.dtype(dtype)
        if dt not in (np.dtype(np.float32), np.dtype(np.float64)):
            raise TypeError(f"to: dtype must be float32 or float64, got {dt}")
        for m in self.modules():
            for p in m._parameters.values():
                if p is not None and p.data.dtype != dt:
                    p.data = p.data.astype(dt)
                    p.grad = None
            for name, b in list(m._buffers.items()):
                if b is not None and b.dtype.kind == "f" and b.dtype != dt:
                    m._buffers[name] = b.astype(dt)
                    object.__setattr__(m, name, m._buffers[name])
        return self

    # ---------------------------------------------------------- state dicts
    def _state_items(self):
        """(key, array) for parameters then persistent buffers, module by
        module, one key per path: a parameter (or module) shared by two
        parents appears under both paths, as in PyTorch."""
        for mname, m in self._module_paths():
            pre = f"{mname}." if mname else ""
            for name, p in m._parameters.items():
                if p is not None:
                    yield pre + name, p.data
            for name, b in m._buffers.items():
                if b is not None and name not in m._non_persistent:
                    yield pre + name, b

    def state_dict(self, layout: str = "yscv", flatten_from=None) -> "OrderedDict[str, np.ndarray]":
        """Name -> COPY of every parameter and persistent buffer (PyTorch key names).

        A parameter shared by two modules appears under both paths, and both
        keys hold the same copy (PyTorch's keys; its tensors share storage).
        ``layout="torch"`` gives PyTorch's layouts instead (the state dict of
        the equivalent torch module, NumPy arrays; see
        `yscv.nn.torch_layout`, which also explains ``flatten_from``).
        """
        if layout in _STATE_LAYOUTS:
            return _STATE_LAYOUTS[layout][0](self, flatten_from)
        _check_layout(layout, "state_dict", flatten_from)
        copies = {}
        out = OrderedDict()
        for k, v in self._state_items():
            c = copies.get(id(v))
            if c is None:
                c = copies[id(v)] = v.copy()
            out[k] = c
        return out

    def check_state_dict(self, state_dict, strict: bool = True) -> IncompatibleKeys:
        """Validate ``state_dict`` against this module without changing anything.

        Raises `StateDictError` listing every problem: missing and
        unexpected keys (when ``strict``), shape mismatches and values that
        are not real-number arrays (always). Returns the incompatible keys.
        """
        own = OrderedDict(self._state_items())
        if not hasattr(state_dict, "keys"):
            raise TypeError(
                f"load_state_dict: expected a mapping of name -> array, got {type(state_dict).__name__}")
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        mismatched, bad = [], []
        for k, target in own.items():
            if k not in state_dict:
                continue
            v = state_dict[k]
            if isinstance(v, Parameter):
                v = v.data
            if not isinstance(v, np.ndarray):
                try:
                    v = np.asarray(v)
                except Exception:
                    bad.append((k, f"not an array ({type(v).__name__})"))
                    continue
            if v.dtype.kind not in "fiub":
                bad.append((k, f"dtype {v.dtype} is not a real number type"))
            elif v.shape != target.shape:
                mismatched.append((k, target.shape, v.shape))
            else:
                why = cast_problem(v, target.dtype)
                if why is not None:
                    bad.append((k, why))
        problems = key_problems(strict, missing, unexpected)
        for k, mine, theirs in mismatched:
            problems.append(f"size mismatch for {k!r}: the state dict has shape {theirs}, "
                            f"the model has {mine}")
        for k, why in bad:
            problems.append(f"bad value for {k!r}: {why}")
        if problems:
            raise StateDictError(
                f"load_state_dict: error(s) loading the state dict into {type(self).__name__} "
                "(nothing was loaded):\n  " + "\n  ".join(problems),
                missing, unexpected, mismatched, bad)
        return IncompatibleKeys(missing, unexpected)

    def load_state_dict(self, state_dict, strict: bool = True, layout: str = "yscv",
                        flatten_from=None) -> IncompatibleKeys:
        """Copy arrays from ``state_dict`` into the parameters and buffers IN PLACE.

        Everything is validated first (`check_state_dict`): on any error
        nothing is modified. Values are cast to each target's dtype. With
        ``strict=False`` missing and unexpected keys are allowed and returned.
        A parameter shared by two modules has a key per path; each is copied
        in module order, so the last one wins (as in PyTorch).

        ``layout="torch"`` reads a state dict in PyTorch's names and layouts
        (the equivalent torch module's ``state_dict()``, tensors or arrays;
        e.g. loaded with ``safetensors.numpy.load_file``); see
        `yscv.nn.torch_layout` and ``flatten_from`` there.
        """
        if layout in _STATE_LAYOUTS:
            state_dict = _STATE_LAYOUTS[layout][1](self, state_dict, strict, flatten_from)
        else:
            _check_layout(layout, "load_state_dict", flatten_from)
        result = self.check_state_dict(state_dict, strict)
        for k, target in self._state_items():
            if k in state_dict:
                v = state_dict[k]
                if isinstance(v, Parameter):
                    v = v.data
                np.copyto(target, np.asarray(v), casting="unsafe")
        return result

    # ---------------------------------------------------------------- repr
    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        lines = []
        for name, child in self._modules.items():
            body = repr(child).replace("\n", "\n  ")
            lines.append(f"  ({name}): {body}")
        head = f"{type(self).__name__}({self.extra_repr()}"
        if not lines:
            return head + ")"
        return head + "\n" + "\n".join(lines) + "\n)"
