"""docs/onnx.md: its op table is the one the export table renders, and its
Python blocks run top to bottom in one namespace."""
import os
import re

import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from yscv.onnx._optable import markdown_table  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PAGE = os.path.join(ROOT, "docs", "onnx.md")


def read_page():
    with open(PAGE, encoding="utf-8") as f:
        return f.read()


def test_docs_op_table_is_the_export_table():
    page = read_page()
    m = re.search(r"<!-- op-table: .*? -->\n(.*?)\n<!-- end op-table -->", page, re.S)
    assert m is not None
    assert m.group(1) == markdown_table()


def test_docs_python_blocks_run(tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", read_page(), re.S)
    assert len(blocks) >= 2
    monkeypatch.chdir(tmp_path)
    namespace = {}
    for block in blocks:
        if block.startswith("# not run:"):
            continue
        exec(compile(block, PAGE, "exec"), namespace)
    assert (tmp_path / "cnn.onnx").exists() and (tmp_path / "deform.onnx").exists()
