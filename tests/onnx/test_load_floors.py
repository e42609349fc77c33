"""The importer's place in the floors (docs/architecture.md): yscv.onnx is
on the top floor (nothing else in yscv imports it), imports the ``onnx``
package only inside functions, and records through public Graph methods."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import yscv

ROOT = Path(yscv.__file__).resolve().parent
IMPORTER = sorted([ROOT / "onnx" / "load.py", *(ROOT / "onnx").glob("_import_*.py")])


def _imported_modules(path: Path, top_level_only: bool):
    tree = ast.parse(path.read_text(), str(path))
    if top_level_only:
        nodes = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
                 and not any(isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef))
                             for p in _parents(tree, n))]
    else:
        nodes = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    for n in nodes:
        if isinstance(n, ast.Import):
            yield from (a.name for a in n.names)
        elif n.level == 0:
            yield n.module
        else:  # relative: resolve against the file's package
            pkg = path.relative_to(ROOT.parent).with_suffix("").parts[:-1]
            base = list(pkg[:len(pkg) - n.level + 1])
            yield ".".join(base + ([n.module] if n.module else []))


def _parents(tree, target):
    stack = [(tree, [])]
    while stack:
        node, chain = stack.pop()
        if node is target:
            return chain
        for child in ast.iter_child_nodes(node):
            stack.append((child, chain + [node]))
    return []


def test_nothing_below_imports_yscv_onnx():
    bad = [f"{p.relative_to(ROOT.parent)} imports {m}"
           for p in sorted(ROOT.rglob("*.py")) if "onnx" not in p.relative_to(ROOT).parts
           for m in _imported_modules(p, False) if m and m.startswith("yscv.onnx")]
    assert bad == []


def test_importer_imports_onnx_lazily_and_uses_public_graph_names():
    eager = [f"{p.name} imports {m}" for p in IMPORTER for m in _imported_modules(p, True)
             if m and m.split(".")[0] in ("onnx", "onnxruntime")]
    assert eager == []
    private = []
    for p in IMPORTER:
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") \
                    and not node.attr.startswith("__"):
                v = node.value
                name = v.id if isinstance(v, ast.Name) else getattr(v, "attr", None)
                if name in ("g", "graph"):
                    private.append(f"{p.name}:{node.lineno} {name}.{node.attr}")
    assert private == []


def test_import_yscv_onnx_does_not_import_onnx():
    code = "import sys, yscv.onnx; print('onnx' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=ROOT.parent)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
