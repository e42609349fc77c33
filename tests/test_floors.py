"""The floors of docs/architecture.md, checked on the source: every module's
imports (parsed with ``ast``, including imports inside functions) against the
rules of what may import what.

Rules checked here (each holds today; keep it so):

- ``compute`` (the drivers) never imports ``ops``, ``backward`` or the graph;
- ``batching`` (vmap's rules) imports neither ``ops``, ``backward`` nor the
  graph, and neither imports it (the rules call the graph they are given);
- ``kernels`` import nothing of yscv outside ``yscv.kernels`` but the ground
  floor's settings (``yscv.runtime``: the kernel cache directory);
- ``nn`` and ``optim`` use no private name of the graph floor, neither
  imported nor as an attribute of a graph (``g._leaf``, ``g.__dict__``): they
  bind state through public Graph methods (``g.param``, ``g.buffer``);
- ``onnx`` (yscv.onnx, the exporter) is on the top floor with ``train``: no
  other yscv module imports it, and the ``onnx`` / ``onnxruntime`` packages
  are imported only inside functions (``import yscv`` never needs them);
- inside ``yscv.onnx`` no two modules import each other, directly or round a
  circle: the exporter's forms and the importer's handlers register in the
  tables of the bottom modules (``_registry``, ``_import_registry``), which
  import no other module of the package, and the importer's runner reaches
  no handler module.
"""
from __future__ import annotations

import ast
from pathlib import Path

import yscv

ROOT = Path(yscv.__file__).resolve().parent

#: the graph floor: storage, walk, leaves, checkpointing and their mixins
#: the graph floor: the engine package (yscv/engine/) and its modules
GRAPH_FLOOR = {"yscv.engine"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path):
    """(imported module, name or None, line) for every import of the file;
    ``from a import b`` gives ("a", "b") (b may be a submodule of a)."""
    mod = module_name(path)
    package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, None, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            for alias in node.names:
                yield target, alias.name, node.lineno


def floor(name: str):
    """The floor of module ``name`` (None outside yscv or unclassified)."""
    if name in GRAPH_FLOOR or name.startswith("yscv.engine."):
        return "graph"
    parts = name.split(".")
    if parts[0] != "yscv" or len(parts) < 2:
        return None
    if parts[1] in ("ops", "backward", "batching", "compute", "kernels", "nn", "optim", "onnx"):
        return parts[1]
    return None


def _targets(target: str, name):
    """The modules an import may reach: ``a`` and, for ``from a import b``, ``a.b``."""
    yield target
    if name is not None and name != "*":
        yield f"{target}.{name}"


def private_graph_attributes(path: Path):
    """(line, name) of ``g._x`` / ``graph._x`` attribute uses, and of
    ``g.__dict__`` (by convention a Graph is named ``g`` or ``graph``)."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in ("g", "graph") and node.attr.startswith("_")):
            yield node.lineno, node.attr


def violations(rules) -> list:
    """Every import that breaks one of ``rules`` (a set of rule names):
    "siblings", "compute", "kernels", "nn-public"."""
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        mod = module_name(path)
        here = floor(mod)
        for target, name, line in imports(path):
            where = f"{path.relative_to(ROOT.parent)}:{line} imports {target}"
            floors = {floor(t) for t in _targets(target, name)}
            if "siblings" in rules and {here} | floors >= {"ops", "backward"}:
                found.append(f"{where} (ops and backward are siblings)")
            if "batching" in rules and (
                    (here == "batching" and floors & {"ops", "backward", "graph"})
                    or (here in ("ops", "backward") and "batching" in floors)):
                found.append(f"{where} (batching rules, ops and backward are siblings; "
                             "the rules build from the graph they are given)")
            if "compute" in rules and here == "compute" and floors & {"ops", "backward", "graph"}:
                found.append(f"{where} (compute is below ops, backward and the graph)")
            if ("kernels" in rules and here == "kernels" and target.split(".")[0] == "yscv"
                    and not all(t in ("yscv.kernels", "yscv.runtime")
                                or t.startswith(("yscv.kernels.", "yscv.runtime."))
                                for t in _targets(target, name))):
                found.append(f"{where} (kernels import only yscv.kernels and yscv.runtime)")
            if "onnx" in rules and here != "onnx" and "onnx" in floors:
                found.append(f"{where} (yscv.onnx is on the top floor)")
            if ("nn-public" in rules and here in ("nn", "optim") and floor(target) == "graph"
                    and name and name.startswith("_")):
                found.append(f"{where} (nn/optim use public Graph names only)")
        if "nn-public" in rules and here in ("nn", "optim"):
            for line, attr in private_graph_attributes(path):
                found.append(f"{path.relative_to(ROOT.parent)}:{line} reads a graph's {attr} "
                             "(nn/optim use public Graph names only)")
    return list(dict.fromkeys(found))  # one line per import statement and rule


def test_import_parser_resolves_relative_imports():
    rows = set(imports(ROOT / "engine" / "graph.py"))
    assert any(t == "yscv.engine.walk" and n == "WalkMixin" for t, n, _ in rows)
    assert any(t == "yscv" and n == "backward" for t, n, _ in rows)
    assert floor("yscv.ops.conv") == "ops" and floor("yscv.engine.walk") == "graph"
    assert floor("yscv.runtime") is None


def test_floors_hold():
    assert violations({"compute", "kernels", "nn-public"}) == []


def module_level_imports(path: Path):
    """(module, line) of the imports a module runs when it is imported (not
    those inside functions)."""
    def walk(body):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if isinstance(node, ast.Import):
                for alias in node.names:
                    yield alias.name, node.lineno
            elif isinstance(node, ast.ImportFrom) and not node.level:
                yield node.module, node.lineno
            for field in ("body", "orelse", "finalbody", "handlers"):
                yield from walk(getattr(node, field, []) or [])
    yield from walk(ast.parse(path.read_text(), str(path)).body)


def test_onnx_on_the_top_floor_and_imported_lazily():
    assert violations({"onnx"}) == []
    eager = [f"{p.relative_to(ROOT.parent)}:{line} imports {mod}"
             for p in sorted(ROOT.rglob("*.py")) for mod, line in module_level_imports(p)
             if mod.split(".")[0] in ("onnx", "onnxruntime")]
    assert eager == []


def test_ops_and_backward_are_siblings():
    assert violations({"siblings"}) == []


def test_batching_rules_are_a_sibling_of_ops_and_backward():
    assert violations({"batching"}) == []


def onnx_import_graph() -> dict:
    """yscv.onnx module -> the yscv.onnx modules it imports (inside functions
    too); ``from . import m`` is an import of the module ``m``."""
    paths = {module_name(p): p for p in sorted((ROOT / "onnx").glob("*.py"))}
    edges = {}
    for mod, path in paths.items():
        edges[mod] = set()
        for target, name, _ in imports(path):
            sub = f"{target}.{name}"
            hit = sub if sub in paths else target if target in paths else None
            if hit is not None and hit != mod:
                edges[mod].add(hit)
    return edges


def find_circle(edges: dict):
    """One import circle of ``edges`` as a list of modules, or None."""
    state, stack = {}, []

    def visit(mod):
        state[mod] = "open"
        stack.append(mod)
        for nxt in sorted(edges.get(mod, ())):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                circle = visit(nxt)
                if circle:
                    return circle
        state[mod] = "done"
        stack.pop()
        return None

    for mod in sorted(edges):
        if mod not in state:
            circle = visit(mod)
            if circle:
                return circle
    return None


def _reach(edges: dict, mod: str) -> set:
    seen, todo = set(), [mod]
    while todo:
        for nxt in edges.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_circle_finder_finds_a_circle():
    assert find_circle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_circle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_onnx_package_has_no_import_circle():
    edges = onnx_import_graph()
    assert "yscv.onnx._import_table" in edges["yscv.onnx._import_plan"]  # the parser sees them
    assert find_circle(edges) is None, " -> ".join(find_circle(edges))


def test_onnx_registries_at_the_bottom_and_runner_without_handlers():
    edges = onnx_import_graph()
    for bottom in ("yscv.onnx._registry", "yscv.onnx._import_registry"):
        assert edges[bottom] == set(), (bottom, edges[bottom])
    handler_modules = {
        module_name(p) for p in (ROOT / "onnx").glob("*.py")
        if any(t == "yscv.onnx._import_registry" and n == "handler" for t, n, _ in imports(p))}
    assert {"yscv.onnx._import_ops", "yscv.onnx._import_nn"} <= handler_modules
    assert _reach(edges, "yscv.onnx._import_run") & handler_modules == set()
    assert handler_modules <= edges["yscv.onnx._import_table"]  # the table registers them all
