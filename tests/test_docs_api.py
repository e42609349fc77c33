"""The API reference (docs/api.md, rendered by mkdocstrings) lists Graph's op
methods by category, hides Graph's implementation bases, and the docstrings
it renders are Markdown (no Sphinx roles) that say what the code does, not
where a requirement came from."""
from __future__ import annotations

import ast
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
API = ROOT / "docs" / "api.md"
ROLE = re.compile(r":(?:py:)?(?:meth|class|func|attr|mod|data|exc|obj|const|ref):`")
PROCESS_WORDS = re.compile(r"SPEC section|SPEC §|SPEC \d|[Ss]eed[- ]alias|[Ss]eed[- ]compatible|"
                           r"seed name|[Ss]eed aliases")


def docstrings(path: pathlib.Path):
    """(line, text) of every docstring of a module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            text = ast.get_docstring(node, clean=False)
            if text:
                yield (node.body[0].lineno, text)


def sources(exclude=()):
    for path in sorted((ROOT / "yscv").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if not rel.startswith(tuple(exclude)):
            yield rel, path


def test_every_ops_category_has_a_block_in_the_api_page():
    from yscv.ops import OP_MIXINS

    text = API.read_text(encoding="utf-8")
    blocks = re.findall(r"^::: (yscv\.ops\.\w+\.\w+)\s*$", text, re.MULTILINE)
    want = [f"{cls.__module__}.{cls.__qualname__}" for cls in OP_MIXINS]
    assert blocks == want


def test_graph_bases_are_hidden():
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert re.search(r"^\s+show_bases:\s*false\s*$", config, re.MULTILINE)


def test_docstrings_have_no_sphinx_roles():
    """The Numba kernels (yscv/kernels/*, not in the reference) aside."""
    found = [f"{rel}:{line}" for rel, path in sources(exclude=("yscv/kernels/",))
             for line, text in docstrings(path) if ROLE.search(text)]
    assert found == []


def test_docstrings_and_pages_say_what_not_where_from():
    found = [f"{rel}:{line}" for rel, path in sources()
             for line, text in docstrings(path) if PROCESS_WORDS.search(text)]
    for page in sorted((ROOT / "docs").rglob("*.md")):
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            if PROCESS_WORDS.search(line):
                found.append(f"{page.relative_to(ROOT).as_posix()}:{number}")
    assert found == []
