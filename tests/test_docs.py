"""Every ```python block of the user guide runs.

For each page under docs/ (and README.md) the ```python fenced blocks are
extracted in order and run top to bottom in one fresh namespace, in a
subprocess per page (a timeout bounds it) whose working directory is a
temporary folder, so files the examples write do not litter. A block whose
first line is ``# not run: <reason>`` is skipped; the reason is required.
Signature listings belong in ```text fences, not python ones.
"""
from __future__ import annotations

import ast
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"]
PAGE_TIMEOUT = 180.0
# Imported by some pages, installed by no extra of the README's test command:
# a page that imports one of them is skipped when it is missing.
OPTIONAL_MODULES = ("torch", "onnx", "onnxruntime")

FENCE_OPEN = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})\s*(?P<lang>[\w+-]*)")
NOT_RUN = re.compile(r"^#\s*not run\b\s*:?\s*(?P<reason>.*)$", re.IGNORECASE)

# Runs the blocks given on stdin (JSON: page name and [line, source] pairs) in
# one namespace; on failure prints where and exits 1.
RUNNER = r"""
import json, sys, traceback
page, blocks = json.load(sys.stdin)
namespace = {"__name__": "__main__"}
for number, (line, source) in enumerate(blocks, 1):
    code = compile(source, f"{page}, python block {number} (line {line})", "exec")
    try:
        exec(code, namespace)
    except BaseException:
        traceback.print_exc()
        print(f"DOCS FAILURE: {page}, python block {number} (line {line})", file=sys.stderr)
        sys.exit(1)
"""


def fenced_blocks(text: str):
    """(language, first line number, source) of every fenced block, in order;
    the fence's indentation (admonitions, lists) is removed from the body."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = FENCE_OPEN.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang = m["indent"], m["fence"], m["lang"].lower()
        close = re.compile(r"^" + re.escape(indent) + re.escape(fence[0]) + "{" + str(len(fence))
                           + r",}\s*$")
        body, j = [], i + 1
        while j < len(lines) and not close.match(lines[j]):
            line = lines[j]
            body.append(line[len(indent):] if line.startswith(indent) else line.lstrip())
            j += 1
        yield lang, i + 2, "\n".join(body) + "\n"
        i = j + 1


def python_blocks(path: pathlib.Path):
    """[(line, source)] of the page's python blocks that run, and the problems
    found while reading them (a ``# not run`` without a reason)."""
    runnable, problems = [], []
    for lang, line, source in fenced_blocks(path.read_text(encoding="utf-8")):
        if lang not in ("python", "py", "python3"):
            continue
        first = source.lstrip("\n").split("\n", 1)[0].strip()
        skipped = NOT_RUN.match(first)
        if skipped:
            if not skipped["reason"].strip():
                problems.append(f"line {line}: '# not run:' needs a reason")
            continue
        runnable.append((line, source))
    return runnable, problems


def imported_modules(blocks) -> set:
    """Top-level names of the modules the blocks import."""
    names = set()
    for _, source in blocks:
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module.split(".")[0])
    return names


def page_id(path: pathlib.Path) -> str:
    try:
        return path.relative_to(ROOT).as_posix()
    except ValueError:
        return path.name


def test_fence_parser_reads_indented_blocks_and_not_run_reasons(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("text\n\n```python\nx = 1\n```\n\n!!! note\n    ```python\n    y = x + 1\n"
                    "    ```\n\n```text\nf(a, b) -> c\n```\n\n```python\n# not run: needs MPI\n"
                    "boom()\n```\n\n```python\n# not run\nboom()\n```\n")
    blocks, problems = python_blocks(page)
    assert [src for _, src in blocks] == ["x = 1\n", "y = x + 1\n"]
    assert [line for line, _ in blocks] == [4, 9]
    assert problems == ["line 22: '# not run:' needs a reason"]


def test_optional_imports_are_found(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("```python\nimport numpy as np, torch\nfrom onnx.helper import x\n"
                    "from . import y\n```\n")
    assert imported_modules(python_blocks(page)[0]) == {"numpy", "torch", "onnx"}


def run_page(path: pathlib.Path, workdir: pathlib.Path) -> subprocess.CompletedProcess:
    blocks, problems = python_blocks(path)
    assert not problems, f"{page_id(path)}: " + "; ".join(problems)
    for name in sorted(imported_modules(blocks) & set(OPTIONAL_MODULES)):
        pytest.importorskip(name, reason=f"{page_id(path)} imports {name}, which is not installed")
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["MPLBACKEND"] = "Agg"
    try:
        return subprocess.run([sys.executable, "-c", RUNNER], input=json.dumps([page_id(path), blocks]),
                              cwd=workdir, env=env, capture_output=True, text=True,
                              timeout=PAGE_TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{page_id(path)}: its python blocks did not finish within {PAGE_TIMEOUT:.0f} s")


@pytest.mark.parametrize("path", PAGES, ids=page_id)
def test_page_python_blocks_run_in_order(path, tmp_path):
    done = run_page(path, tmp_path)
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-25:])
        pytest.fail(f"{page_id(path)}: a python block failed\n{tail}", pytrace=False)


def test_runner_reports_page_block_and_error(tmp_path):
    page = tmp_path / "broken.md"
    page.write_text("```python\na = 1\n```\n\n```python\nprint(a + batches)\n```\n")
    done = run_page(page, tmp_path)
    assert done.returncode == 1
    assert "NameError: name 'batches' is not defined" in done.stderr
    assert "python block 2 (line 6)" in done.stderr


def site_assets(config_text: str, key: str) -> list:
    """The entries of the top-level list ``key:`` of mkdocs.yml (text only, so
    no YAML parser is needed)."""
    entries, inside = [], False
    for line in config_text.splitlines():
        if re.match(rf"^{key}:\s*$", line):
            inside = True
        elif inside and re.match(r"^\s+-\s+", line):
            entries.append(re.sub(r"^\s+-\s+", "", line).strip().strip("'\""))
        elif inside and line.strip() and not line.startswith((" ", "#")):
            inside = False
    return entries


def test_site_loads_no_script_or_style_from_the_network():
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    scripts = site_assets(config, "extra_javascript")
    assert "mathjax/es5/tex-mml-chtml.js" in scripts
    remote = [s for key in ("extra_javascript", "extra_css") for s in site_assets(config, key)
              if re.match(r"^(https?:)?//", s)]
    assert remote == [], f"mkdocs.yml loads {remote} from the network: formulas need it offline"
    assert "docs/_hooks/mathjax_offline.py" in site_assets(config, "hooks")


def test_mathjax_hook_ships_the_script_and_its_fonts(tmp_path):
    pytest.importorskip("mkdocs", reason="the docs extra is not installed")
    try:
        import importlib.metadata
        importlib.metadata.distribution("django-static-mathjax")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("django-static-mathjax (docs extra) is not installed")
    import importlib.util

    from mkdocs.structure.files import Files
    spec = importlib.util.spec_from_file_location("mathjax_offline",
                                                  ROOT / "docs" / "_hooks" / "mathjax_offline.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    files = hook.on_files(Files([]), {"site_dir": str(tmp_path), "use_directory_urls": True})
    shipped = {f.dest_uri: f.abs_src_path for f in files}
    assert pathlib.Path(shipped["mathjax/es5/tex-mml-chtml.js"]).stat().st_size > 100_000
    assert "mathjax/LICENSE" in shipped
    fonts = [uri for uri in shipped if uri.startswith("mathjax/es5/output/chtml/fonts/woff-v2/")]
    assert "mathjax/es5/output/chtml/fonts/woff-v2/MathJax_Main-Regular.woff" in fonts
    assert len(fonts) > 20
    assert not any(uri.startswith("mathjax/es5/output/svg") for uri in shipped)
