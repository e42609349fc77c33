"""What the README and the user guide state about the project agrees with the
project: the operation count, the extras' contents, how to install from the
checkout, and a first example whose output does not depend on luck."""
from __future__ import annotations

import contextlib
import io
import pathlib
import re

import numpy as np
import pytest

from test_docs import python_blocks

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def read(path: pathlib.Path) -> str:
    return path.read_text(encoding="utf-8")


def extra(name: str) -> list:
    """Distribution names in pyproject.toml's optional dependency ``name``."""
    text = read(ROOT / "pyproject.toml")
    m = re.search(rf"^{name}\s*=\s*\[(.*?)\]", text, re.MULTILINE | re.DOTALL)
    assert m, f"pyproject.toml has no extra {name!r}"
    return [re.split(r"[<>=!~\[ ;]", spec, maxsplit=1)[0]
            for spec in re.findall(r'"([^"]+)"', m.group(1))]


def test_operation_count_is_the_op_enum_and_said_alike():
    from yscv.node import ENGINE_OPS, Op

    n = len(Op) - len(ENGINE_OPS)  # a leaf, VJP and CUSTOM are not operations
    for path in (README, DOCS / "index.md"):
        said = re.findall(r"\b((?:[Aa]bout )?\d+) operations\b", read(path))
        assert said == [str(n)], f"{path.name} says {said} operations; yscv.node.Op has {n}"


def test_test_extra_is_listed_as_pyproject_has_it():
    packages = extra("test")
    assert {"pytest", "onnx", "onnxruntime", "matplotlib"} <= set(packages)
    readme = re.search(r"The `test` extra brings(.*?)\.\s", read(README), re.DOTALL)
    guide = re.search(r"`test`\s+adds(.*?);", read(DOCS / "getting_started.md"), re.DOTALL)
    for where, m in (("README.md", readme), ("docs/getting_started.md", guide)):
        assert m, f"{where} no longer says what the test extra brings"
        said = m.group(1)
        missing = [p for p in packages if not re.search(rf"\b{re.escape(p)}\b", said)]
        assert missing == [], f"{where}: the test extra's {missing} are not named"


def test_install_commands_are_from_the_checkout():
    """yscv is not a published package: ``pip install "yscv[...]"`` would
    fetch nothing (or something else); the pages say ``pip install -e``."""
    pages = [README, *sorted(DOCS.rglob("*.md")), *sorted((ROOT / "yscv").rglob("*.py"))]
    bad = [f"{p.relative_to(ROOT)}:{i}" for p in pages
           for i, line in enumerate(read(p).splitlines(), 1)
           if re.search(r"""pip install ["']?yscv\b""", line)]
    assert bad == []


def test_first_gradient_is_seeded_and_nonzero():
    """Getting started's first block prints the same nonzero gradient
    whatever NumPy's global generator holds (an unseeded w made the ReLU
    block a whole column, or all of it, in some runs)."""
    first_line, source = python_blocks(DOCS / "getting_started.md")[0][0]
    assert "print(g.grad(w))" in source
    grads = []
    for global_seed in range(8):
        np.random.seed(global_seed)
        namespace = {"__name__": "__main__"}
        with contextlib.redirect_stdout(io.StringIO()) as out:
            exec(compile(source, f"getting_started.md line {first_line}", "exec"), namespace)
        grad = namespace["g"].grad(namespace["w"])
        assert grad.shape == (3, 2) and np.all(grad != 0), (global_seed, grad)
        assert out.getvalue().strip() == str(grad)
        grads.append(grad)
    for grad in grads[1:]:
        np.testing.assert_array_equal(grad, grads[0])
    np.testing.assert_array_equal(grads[0], np.full((3, 2), 0.5, np.float32))
