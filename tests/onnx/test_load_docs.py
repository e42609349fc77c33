"""docs/onnx.md, section "Importing and fine-tuning": its Python blocks run
top to bottom in one namespace, and print what the page says they print."""
import contextlib
import io
import os
import re

import pytest

pytest.importorskip("onnx")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PAGE = os.path.join(ROOT, "docs", "onnx.md")


def section():
    with open(PAGE, encoding="utf-8") as f:
        page = f.read()
    m = re.search(r"^## Importing and fine-tuning\n(.*?)(?=^## |\Z)", page, re.S | re.M)
    assert m is not None
    return m.group(1)


def test_import_section_blocks_run_and_print_what_they_say(tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", section(), re.S)
    assert len(blocks) >= 3
    monkeypatch.chdir(tmp_path)
    namespace = {}
    ran = 0
    for block in blocks:
        if block.startswith("# not run:"):
            continue
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(block, PAGE, "exec"), namespace)
        ran += 1
        # each "# expected" comment line right after a print is what it printed
        lines = block.splitlines()
        expected = []
        for i, line in enumerate(lines):
            if line.startswith("print(") and i + 1 < len(lines) and lines[i + 1].startswith("# "):
                j, text = i + 1, []
                while j < len(lines) and lines[j].startswith("# "):
                    text.append(lines[j][2:].strip())
                    j += 1
                expected.append(" ".join(text))
        printed = " ".join(out.getvalue().split())
        for text in expected:
            assert " ".join(text.split()) in printed, (text, printed)
    assert ran >= 2
    assert (tmp_path / "tiny.onnx").exists() and (tmp_path / "tiny.ckpt").exists()


def test_supported_operator_list_is_the_handler_table():
    from yscv.onnx._import_table import HANDLERS
    m = re.search(r"Supported operators: (.*?)Anything else", section(), re.S)
    listed = set(re.findall(r"\b([A-Z][A-Za-z0-9]+)\b", re.sub(r"\(.*?\)", "", m.group(1), flags=re.S)))
    ops = {op.split(":")[-1] for op in HANDLERS if not op.startswith("_")}   # domain:op
    assert ops - listed == set(), "handlers missing from the docs list"
    assert listed - ops == set(), "docs list operators without a handler"
