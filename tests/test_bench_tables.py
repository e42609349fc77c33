"""benches/run.py --write-docs: the family tables of docs/benchmarks.md.

No benchmark runs here: the block writer is given rows, on a copy of the
page; main() is only called with arguments it refuses before timing.
"""
from __future__ import annotations

import argparse
import importlib.util
import pathlib
import re
import sys
import types

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "benchmarks.md"
FAMILY_NAME = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")
HEADER = {"machine": "Test CPU [avx2], 2 cores; NumPy 2.4",
          "reference": "PyTorch 2.13.0, 2 threads", "date": "2026-12-01", "command": "`python benches/run.py chain --separate --write-docs`"}


@pytest.fixture(scope="module")
def run():
    """benches/run.py as a module (it puts benches/ on sys.path to import
    its neighbours; the path is restored afterwards)."""
    saved_path, had_common = list(sys.path), "common" in sys.modules
    spec = importlib.util.spec_from_file_location("bench_run_under_test",
                                                  ROOT / "benches" / "run.py")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = saved_path
        if not had_common:
            sys.modules.pop("common", None)
    return module


def blocks_of(run, text):
    lines = text.split("\n")
    return {family: lines[b:e + 1] for family, (b, e) in run.find_blocks(lines).items()}


def outside(run, text, family):
    """The page's lines outside ``family``'s block."""
    lines = text.split("\n")
    b, e = run.find_blocks(lines)[family]
    return lines[:b] + lines[e + 1:]


def test_cells_ratio_target_and_verdict(run):
    assert run.table_row("mlp", "MLP a|b", "PyTorch", 0.7412, 0.8049, 1.0, "2026-12-01") == \
        "| `mlp` | MLP a\\|b | PyTorch | 0.74x | **0.80x** | <= 1.00x (met) | 2026-12-01 |"
    assert run.target_cell(1 / 1.4, 1.13) == "<= 0.71x (not met)"
    assert run.target_cell(0.5, 0.5) == "<= 0.50x (met)"
    assert run.target_cell(1.0, None) == "<= 1.00x"
    assert run.target_cell(None, 0.3) == ""
    row = run.table_row("ctc", "ctc", "PyTorch", None, None, None, "2026-12-01")
    assert row == "| `ctc` | ctc | PyTorch | - | - |  | 2026-12-01 |"
    assert run.row_topic(row) == "ctc"


def test_the_page_has_well_formed_family_tables(run):
    """Every block of docs/benchmarks.md: a family name, the header, rows of
    seven cells whose topic is a bench module, each with its date."""
    text = PAGE.read_text(encoding="utf-8")
    blocks = blocks_of(run, text)
    assert {"intel-xeon-avx512", "amd-epyc-avx512"} <= set(blocks)
    for family, lines in blocks.items():
        assert FAMILY_NAME.fullmatch(family)
        for key in ("machine", "reference", "date", "command"):
            assert any(line.startswith(f"| {key} | ") for line in lines), (family, key)
        rows = run.block_rows(lines)
        assert rows, family
        for row in rows:
            cells = [c.strip() for c in run._CELL_SPLIT.split(row)[1:-1]]
            assert len(cells) == 7, row
            assert (ROOT / "benches" / f"bench_{run.row_topic(row)}.py").is_file(), row
            assert re.fullmatch(r"\d{4}-\d\d-\d\d", cells[6]), row
            assert cells[4].startswith("**") and cells[4].endswith("**"), row
        topics = [run.row_topic(r) for r in rows]
        assert topics == sorted(topics), family


def test_rows_of_the_topics_run_are_replaced_the_rest_kept(run, tmp_path):
    page = tmp_path / "benchmarks.md"
    page.write_text(PAGE.read_text(encoding="utf-8"), encoding="utf-8")
    before = page.read_text(encoding="utf-8")
    old_rows = run.block_rows(blocks_of(run, before)["amd-epyc-avx512"])
    new = [run.table_row("chain", "scalar chain, 2,001 ops fwd+bwd", "PyTorch", 0.52, 0.47, 0.5,
                         "2026-12-01"),
           run.table_row("ctc", "ctc_loss fwd+bwd T=50 N=8 C=20 S=12", "PyTorch", 0.8, 0.9, None,
                         "2026-12-01")]
    after = run.write_family_table(before, "amd-epyc-avx512", "unused", HEADER,
                                   ["chain", "ctc"], new)
    page.write_text(after, encoding="utf-8")

    rows = run.block_rows(blocks_of(run, after)["amd-epyc-avx512"])
    assert [r for r in rows if run.row_topic(r) in ("chain", "ctc")] == new
    assert [r for r in rows if run.row_topic(r) not in ("chain", "ctc")] == \
        [r for r in old_rows if run.row_topic(r) not in ("chain", "ctc")]
    assert [run.row_topic(r) for r in rows] == sorted(run.row_topic(r) for r in rows)
    block = "\n".join(blocks_of(run, after)["amd-epyc-avx512"])
    for key, val in HEADER.items():
        assert f"| {key} | {val} |" in block
    # the other family's block and all text outside the block are unchanged
    assert blocks_of(run, after)["intel-xeon-avx512"] == blocks_of(run, before)["intel-xeon-avx512"]
    assert outside(run, after, "amd-epyc-avx512") == outside(run, before, "amd-epyc-avx512")
    # idempotent
    again = run.write_family_table(after, "amd-epyc-avx512", "unused", HEADER,
                                   ["chain", "ctc"], new)
    assert again == after
    # a topic run with no rows left drops its old rows
    fewer = run.write_family_table(after, "amd-epyc-avx512", "unused", HEADER, ["ctc"], [])
    assert "`ctc`" not in "\n".join(blocks_of(run, fewer)["amd-epyc-avx512"])
    assert "`chain`" in "\n".join(blocks_of(run, fewer)["amd-epyc-avx512"])


def test_a_new_family_gets_a_section_after_the_last_table(run):
    before = PAGE.read_text(encoding="utf-8")
    row = run.table_row("mlp", "MLP", "PyTorch", 1.1, 1.2, 1.0, "2026-12-01")
    after = run.write_family_table(before, "arm-neoverse-v1-sve", "Neoverse-V1 (sve), 2 cores",
                                   HEADER, ["mlp"], [row])
    lines = after.split("\n")
    blocks = run.find_blocks(lines)
    assert list(blocks) == ["intel-xeon-avx512", "amd-epyc-avx512", "arm-neoverse-v1-sve"]
    begin, end = blocks["arm-neoverse-v1-sve"]
    assert lines[begin - 2] == "## Neoverse-V1 (sve), 2 cores"
    # after the AMD section's hand-written notes, before the next section
    assert lines[end + 2] == "## Derivatives of derivatives"
    assert run.block_rows(lines[begin:end]) == [row]
    assert "\n".join(lines[:begin - 2] + lines[end + 2:]) == before
    assert run.write_family_table(after, "arm-neoverse-v1-sve", "other title", HEADER,
                                  ["mlp"], [row]) == after


def test_a_page_without_tables_gets_one_at_its_end(run):
    row = run.table_row("mlp", "MLP", "PyTorch", 1.1, 1.2, 1.0, "2026-12-01")
    after = run.write_family_table("# Benchmarks\n\nText.\n", "intel-core-avx2", "Core (avx2)",
                                   HEADER, ["mlp"], [row])
    assert after.startswith("# Benchmarks\n\nText.\n\n## Core (avx2)\n\n<!-- bench-table: "
                            "intel-core-avx2 begin -->\n")
    assert after.endswith("<!-- bench-table: intel-core-avx2 end -->\n")


@pytest.mark.parametrize("text, message", [
    ("<!-- bench-table: a begin -->\n", "'a' has no end"),
    ("<!-- bench-table: a begin -->\n<!-- bench-table: b begin -->\n", "'a' has no end"),
    ("<!-- bench-table: a end -->\n", "end of 'a' without its begin"),
    ("<!-- bench-table: a begin -->\n<!-- bench-table: a end -->\n"
     "<!-- bench-table: a begin -->\n<!-- bench-table: a end -->\n", "two blocks for 'a'"),
])
def test_broken_markers_raise_and_name_the_family(run, text, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        run.write_family_table(text, "a", "A", HEADER, [], [])


def test_bad_family_or_rows_of_topics_not_run_raise(run):
    row = run.table_row("mlp", "MLP", "PyTorch", 1.1, 1.2, 1.0, "2026-12-01")
    with pytest.raises(ValueError, match="rows of topics not run: \\['mlp'\\]"):
        run.write_family_table("", "a", "A", HEADER, ["chain"], [row])
    with pytest.raises(ValueError, match="bad family name 'A B'"):
        run.write_family_table("", "A B", "A", HEADER, ["mlp"], [row])


def test_write_docs_writes_this_machine_family_without_paths(run, tmp_path):
    """write_docs with main's row tuples (a stand-in bench and torch): the
    block of machine_family(), the machine line, a command with no path."""
    import yscv

    page = tmp_path / "benchmarks.md"
    page.write_text(PAGE.read_text(encoding="utf-8"), encoding="utf-8")
    bench = types.SimpleNamespace(name="scalar chain, 2,001 ops fwd+bwd", reference_name="PyTorch",
                                  target=0.5)
    torch = types.SimpleNamespace(__version__="2.13.0", get_num_threads=lambda: 2)
    args = argparse.Namespace(topics=["chain"], quick=True)
    rows = [("chain", bench, 0.01, 1e-3, 2e-3, 0.5, 0.45)]  # main's tuples
    family = run.write_docs(page, args, torch, ["chain"], rows)
    assert family == yscv.runtime.machine_family()
    block = "\n".join(blocks_of(run, page.read_text(encoding="utf-8"))[family])
    assert f"| machine | {yscv.runtime.machine_line()}; python " in block
    assert ("| command | `env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benches/run.py chain "
            "--separate --quick --write-docs` |") in block
    assert "| `chain` | scalar chain, 2,001 ops fwd+bwd | PyTorch | 0.50x | **0.45x** | " \
           "<= 0.50x (met) |" in block
    for path in {str(ROOT), str(tmp_path), str(pathlib.Path.home())}:
        assert path not in block


@pytest.mark.parametrize("argv, message", [
    (["chain", "--write-docs", "{page}"], "needs --separate"),
    (["chain", "--separate", "--no-torch", "--write-docs", "{page}"], "not with --no-torch"),
    (["chain", "--separate", "--write-docs", "{missing}"], "no page"),
    (["chain", "--separate", "--write-docs", "{broken}"], "'x' has no end"),
])
def test_write_docs_refuses_before_timing(run, tmp_path, capsys, argv, message):
    page, broken = tmp_path / "page.md", tmp_path / "broken.md"
    page.write_text("# B\n", encoding="utf-8")
    broken.write_text("<!-- bench-table: x begin -->\n", encoding="utf-8")
    argv = [a.format(page=page, broken=broken, missing=tmp_path / "none.md") for a in argv]
    with pytest.raises(SystemExit) as exc:
        run.main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--write-docs" in err or "write_family_table" in err
    assert message in err
    assert page.read_text(encoding="utf-8") == "# B\n"
