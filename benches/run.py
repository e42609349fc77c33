"""Run the benchmarks side by side in one process and print ratio tables.

    python benches/run.py                 # every bench module
    python benches/run.py mlp chain       # only bench_mlp.py and bench_chain.py
    python benches/run.py --quick         # fewer rounds
    python benches/run.py --separate lstm # also time each side in its own process
    python benches/run.py --threads       # yscv alone: default threads vs one thread
    python benches/run.py mlp --separate --write-docs   # and rewrite this machine's docs rows

Ratios are yscv time / reference time (PyTorch CPU when installed): lower is
better, <= 1.0 means yscv is at least as fast. Absolute times are printed for
context only; the machines are shared and noisy.

With ``--separate`` every bench is also timed with each side alone in a fresh
interpreter (three alternating pairs of processes, medians; the yscv side
never imports PyTorch): in one process PyTorch's
OpenMP threads and NumPy's OpenBLAS threads spin against each other on two
cores, and importing PyTorch changes glibc's allocator behaviour, so the
one-process ratio can flatter or penalise either side. Both columns are
printed.

``--threads`` checks the rule that the default threads are never slower
than one: every yscv step alone in fresh interpreters, with the default
threads and after ``yscv.set_num_threads(1)`` (which also puts OpenBLAS on one
thread), three alternating pairs, medians.

``--write-docs [PATH]`` (with ``--separate``; PATH defaults to
docs/benchmarks.md) rewrites this machine family's table in that page: the
block between ``<!-- bench-table: FAMILY begin -->`` and ``... end -->``,
FAMILY being ``yscv.runtime.machine_family()`` (e.g. ``amd-epyc-avx512``).
The rows of the topics run replace that topic's rows; the rows of the other
topics are kept with their dates; other families' blocks are not touched. A
family without a block gets a new section after the last one.
"""
from __future__ import annotations

import argparse
import datetime
import importlib
import os
import pathlib
import re
import statistics
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
DOCS_PAGE = HERE.parent / "docs" / "benchmarks.md"
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from common import interleaved, time_once  # noqa: E402


def import_time(module: str, runs: int = 5) -> float:
    """Median wall time of ``import module`` in a fresh interpreter."""
    code = f"import time; t=time.perf_counter(); import {module}; print(time.perf_counter()-t)"
    out = []
    for _ in range(runs):
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True, env={**os.environ, "PYTHONPATH": str(HERE.parent)})
        out.append(float(res.stdout.strip()))
    out.sort()
    return out[len(out) // 2]


_CHILD = """
import os, sys
sys.path.insert(0, {here!r}); sys.path.insert(0, {root!r})
from common import median_time
torch = None
if {use_torch}:
    import torch
    torch.set_num_threads(os.cpu_count() or 2)
if {one_thread}:
    import yscv
    yscv.set_num_threads(1)
import importlib
b = importlib.import_module("bench_{topic}").benches(torch)[{index}]
assert b.name == {name!r}, "bench_{topic}: row {index} differs without PyTorch: " + b.name
fn = b.yscv if {side!r} == "yscv" else b.reference
fn()
fn()
print(min(median_time(fn, 3) for _ in range({rounds})))
"""


def time_alone(topic: str, index: int, name: str, side: str, use_torch: bool,
               rounds: int, one_thread: bool = False) -> float:
    """Per-call seconds of one side of bench ``index`` of ``bench_<topic>``,
    timed in a fresh interpreter that imports PyTorch only if ``use_torch``
    (and with ``yscv.set_num_threads(1)`` first if ``one_thread``)."""
    code = _CHILD.format(here=str(HERE), root=str(HERE.parent), use_torch=use_torch,
                         topic=topic, index=index, name=name, side=side, rounds=rounds,
                         one_thread=one_thread)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ, "PYTHONPATH": str(HERE.parent)})
    return float(res.stdout.strip().splitlines()[-1])


def load_torch():
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(os.cpu_count() or 2)
    return torch


# ------------------------------------------------- the docs page's tables
ROW_HEADER = "| topic | benchmark | reference | one process | **separate** | target | date |"
ROW_RULE = "|---|---|---|---:|---:|---|---|"
_BLOCK = re.compile(r"^<!-- bench-table: (?P<family>[a-z0-9-]+) (?P<edge>begin|end) -->$")
_CELL_SPLIT = re.compile(r"(?<!\\)\|")


def ratio_cell(ratio) -> str:
    return f"{ratio:.2f}x" if ratio else "-"


def target_cell(target, separate) -> str:
    """``<= 1.00x (met)``: the bench's declared target against the separate
    processes' ratio (no verdict without one; empty without a target)."""
    if not target:
        return ""
    verdict = "" if not separate else (" (met)" if separate <= target else " (not met)")
    return f"<= {target:.2f}x{verdict}"


def table_row(topic: str, name: str, reference: str, one_process, separate, target,
              date: str) -> str:
    """One row of a family table; ``|`` in a name is escaped."""
    cells = [f"`{topic}`", name, reference, ratio_cell(one_process),
             f"**{ratio_cell(separate)}**" if separate else "-",
             target_cell(target, separate), date]
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def row_topic(row: str) -> str:
    """The topic (first cell, without its backticks) of a table row."""
    cells = _CELL_SPLIT.split(row.strip())
    if len(cells) < 3:
        raise ValueError(f"write_family_table: not a table row: {row!r}")
    return cells[1].strip().strip("`")


def family_block(family: str, header: dict, rows: list) -> list:
    """The lines of a generated block: its markers, a two-column table of
    ``header`` (machine, reference, date, command), the rows' table."""
    lines = [f"<!-- bench-table: {family} begin -->", "", "| | |", "|---|---|"]
    lines += [f"| {key} | {str(val).replace('|', chr(92) + '|')} |" for key, val in header.items()]
    lines += ["", ROW_HEADER, ROW_RULE, *rows, "", f"<!-- bench-table: {family} end -->"]
    return lines


def find_blocks(lines: list, where: str = "the page") -> dict:
    """``family -> (begin index, end index)`` of the page's generated blocks;
    ValueError for a marker without its pair or a family twice."""
    blocks, open_family, start = {}, None, 0
    for i, line in enumerate(lines):
        m = _BLOCK.match(line.strip())
        if not m:
            continue
        family, edge = m["family"], m["edge"]
        if edge == "begin":
            if open_family is not None:
                raise ValueError(f"write_family_table: {where}: block {open_family!r} has no end "
                                 f"before {family!r} begins (line {i + 1})")
            if family in blocks:
                raise ValueError(f"write_family_table: {where}: two blocks for {family!r}")
            open_family, start = family, i
        else:
            if open_family != family:
                raise ValueError(f"write_family_table: {where}: end of {family!r} without its "
                                 f"begin (line {i + 1})")
            blocks[family], open_family = (start, i), None
    if open_family is not None:
        raise ValueError(f"write_family_table: {where}: block {open_family!r} has no end")
    return blocks


def block_rows(lines: list) -> list:
    """The row lines of a block's rows table (the lines after ROW_HEADER
    and ROW_RULE that start with ``|``)."""
    try:
        start = [line.strip() for line in lines].index(ROW_HEADER) + 2
    except ValueError:
        return []
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append(line.rstrip())
    return rows


def write_family_table(text: str, family: str, title: str, header: dict, topics, rows: list,
                       where: str = "the page") -> str:
    """``text`` with ``family``'s block rewritten: ``header`` on top, the
    block's rows of topics not in ``topics`` kept, those of ``topics``
    replaced by ``rows`` (lines from :func:`table_row`), sorted by topic
    (stable: a topic's rows keep their order). Other text is unchanged. A
    family without a block gets a section ``## title`` with one after the
    last block's section (before the next ``## `` heading), or at the end."""
    if not re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", family):
        raise ValueError(f"write_family_table: bad family name {family!r}")
    topics = set(topics)
    stray = sorted({row_topic(r) for r in rows} - topics)
    if stray:
        raise ValueError(f"write_family_table: rows of topics not run: {stray}")
    lines = text.split("\n")
    blocks = find_blocks(lines, where)
    if family in blocks:
        begin, end = blocks[family]
        kept = [r for r in block_rows(lines[begin:end]) if row_topic(r) not in topics]
    else:
        kept = []
    merged = sorted(kept + list(rows), key=row_topic)
    block = family_block(family, header, merged)
    if family in blocks:
        return "\n".join(lines[:begin] + block + lines[end + 1:])
    at = len(lines)
    if blocks:
        last_end = max(end for _, end in blocks.values())
        at = next((i for i in range(last_end + 1, len(lines)) if lines[i].startswith("## ")), at)
    section = [f"## {title}", "", *block, ""]
    if at == len(lines):
        tail = lines[:]
        while tail and not tail[-1]:
            tail.pop()
        return "\n".join(tail + [""] + section)
    return "\n".join(lines[:at] + section + lines[at:])


def docs_command(topics: list, quick: bool, page=None) -> str:
    """The command that regenerates the rows: no path for the default page
    (or one outside the repository), else the page's path in it."""
    where = []
    p = None if page is None else pathlib.Path(page).resolve()
    if p is not None and p != DOCS_PAGE.resolve() and p.is_relative_to(HERE.parent):
        where = [p.relative_to(HERE.parent).as_posix()]
    return " ".join(["env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benches/run.py",
                     *topics, "--separate", *(["--quick"] if quick else []), "--write-docs",
                     *where])


def docs_title(cpu: dict, cores: int) -> str:
    """A new family section's heading: CPU model, its widest ISA, cores."""
    isa = cpu["isa"].split()
    return f"{cpu['model']} ({isa[0] if isa else 'ISA unknown'}), {cores} cores"


def check_write_docs(args, ap) -> pathlib.Path:
    """The page ``--write-docs`` names, after refusing what would put a table
    in it that a user cannot reproduce (or that would break the page)."""
    path = pathlib.Path(args.write_docs)
    if not args.separate:
        ap.error("--write-docs needs --separate: the docs tables' ratio is each side alone")
    if args.no_torch or args.threads:
        ap.error("--write-docs compares with PyTorch: not with --no-torch or --threads")
    if not path.is_file():
        ap.error(f"--write-docs: no page {path}")
    try:
        find_blocks(path.read_text(encoding="utf-8").split("\n"), path.name)
    except ValueError as exc:
        ap.error(str(exc))
    for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        if os.environ.get(var):
            ap.error(f"--write-docs: {var}={os.environ[var]} forces OpenBLAS kernels a user does "
                     f"not get; run under env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE")
    return path


def write_docs(path: pathlib.Path, args, torch, topics_run: list, rows: list) -> str:
    """Rewrite this machine family's block of ``path`` with ``rows`` (the
    tuples ``main`` collects); returns the family name."""
    import yscv

    today = datetime.date.today().isoformat()
    family = yscv.runtime.machine_family()
    header = {
        "machine": f"{yscv.runtime.machine_line()}; python {sys.version.split()[0]}",
        "reference": f"PyTorch {torch.__version__}, {torch.get_num_threads()} threads",
        "date": today,
        "command": f"`{docs_command(args.topics, args.quick, path)}`",
    }
    lines = [table_row(topic, b.name, b.reference_name, ratio, alone, b.target, today)
             for topic, b, _first, _ty, _tr, ratio, alone in rows]
    text = path.read_text(encoding="utf-8")
    title = docs_title(yscv.runtime.cpu_info(), yscv.runtime.usable_cores())
    new = write_family_table(text, family, title, header,
                             topics_run, lines, path.name)
    path.write_text(new, encoding="utf-8")
    return family


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("topics", nargs="*", help="bench_<topic>.py modules to run (default: all)")
    ap.add_argument("--quick", action="store_true", help="fewer rounds (noisier)")
    ap.add_argument("--no-torch", action="store_true", help="skip the PyTorch reference")
    ap.add_argument("--separate", action="store_true",
                    help="also time each side alone in its own process")
    ap.add_argument("--threads", action="store_true",
                    help="yscv alone: default threads vs one thread (no reference)")
    ap.add_argument("--write-docs", nargs="?", const=str(DOCS_PAGE), metavar="PATH",
                    help="with --separate: rewrite this machine family's rows of the topics run "
                         "in PATH (default docs/benchmarks.md)")
    args = ap.parse_args(argv)
    docs_page = check_write_docs(args, ap) if args.write_docs else None
    if args.threads:
        return threads_table(args.topics, 3 if args.quick else 7)

    topics = args.topics or sorted(p.stem[len("bench_"):] for p in HERE.glob("bench_*.py"))
    import yscv
    print(f"machine: {yscv.runtime.machine_line()}; python {sys.version.split()[0]}")
    print(f"import yscv: {import_time('yscv') * 1e3:.0f} ms (fresh process, median of 5)")
    torch = None if args.no_torch else load_torch()
    if torch is not None:
        print(f"reference: PyTorch {torch.__version__}, {torch.get_num_threads()} threads")
    else:
        print("reference: PyTorch not installed; yscv times only")
    rounds = 3 if args.quick else 7

    if docs_page is not None and torch is None:
        ap.error("--write-docs compares with PyTorch, which is not installed")
    rows, topics_run = [], []
    for topic in topics:
        mod = importlib.import_module(f"bench_{topic}")
        if not hasattr(mod, "benches"):
            # a standalone bench (bench_scaling launches mpiexec itself)
            if args.topics:
                print(f"bench_{topic}.py runs on its own: python benches/bench_{topic}.py")
            continue
        topics_run.append(topic)
        for index, b in enumerate(mod.benches(torch)):
            first = time_once(b.yscv)  # includes Numba compilation (or cache load)
            if b.reference is not None:
                b.reference()
            ty, tr = interleaved(b.yscv, b.reference, rounds=rounds)
            ratio = ty / tr if tr else None
            alone = None
            if args.separate and b.reference is not None:
                ref_torch = b.reference_name.startswith("PyTorch")
                sy, sr = [], []
                for _ in range(3):  # alternate the fresh processes to share load changes
                    sy.append(time_alone(topic, index, b.name, "yscv", False, rounds))
                    sr.append(time_alone(topic, index, b.name, "reference", ref_torch, rounds))
                alone = statistics.median(sy) / statistics.median(sr)
            rows.append((topic, b, first, ty, tr, ratio, alone))
            r = f"{ratio:.2f}x" if ratio else "-"
            print(f"  {b.name}: yscv {ty * 1e3:.3f} ms, {b.reference_name} "
                  f"{tr * 1e3 if tr else float('nan'):.3f} ms, ratio {r}"
                  + (f", separate processes {alone:.2f}x" if alone else "")
                  + f", first call {first * 1e3:.0f} ms", flush=True)
            if b.note:
                print(f"    {b.note}", flush=True)

    print()
    sep = args.separate
    print("| benchmark | reference | yscv ms | reference ms | ratio (yscv/ref) |"
          + (" separate processes |" if sep else "") + " target | first call ms |")
    print("|---|---|---:|---:|---:|" + ("---:|" if sep else "") + "---:|---:|")
    for _topic, b, first, ty, tr, ratio, alone in rows:
        tgt = f"<= {b.target:.2f}x" if b.target else ""
        print(f"| {b.name} | {b.reference_name} | {ty * 1e3:.3f} | {tr * 1e3 if tr else float('nan'):.3f} | "
              f"{(f'{ratio:.2f}x' if ratio else '-')} |"
              + ((f" {alone:.2f}x |" if alone else " - |") if sep else "")
              + f" {tgt} | {first * 1e3:.0f} |")
    if docs_page is not None:
        family = write_docs(docs_page, args, torch, topics_run, rows)
        print(f"\nwrote the {family} rows of {', '.join(topics_run)} in {docs_page.name}")
    return 0


def threads_table(topics, rounds: int) -> int:
    """yscv's steps with the default threads vs one thread, each in fresh
    interpreters (three alternating pairs, medians); prints a table."""
    topics = topics or sorted(p.stem[len("bench_"):] for p in HERE.glob("bench_*.py"))
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores; yscv alone")
    rows = []
    for topic in topics:
        mod = importlib.import_module(f"bench_{topic}")
        if not hasattr(mod, "benches"):
            continue
        for index, b in enumerate(mod.benches(None)):
            dflt, one = [], []
            for _ in range(3):
                dflt.append(time_alone(topic, index, b.name, "yscv", False, rounds))
                one.append(time_alone(topic, index, b.name, "yscv", False, rounds, True))
            td, t1 = statistics.median(dflt), statistics.median(one)
            rows.append((b.name, td, t1))
            print(f"  {b.name}: default {td * 1e3:.3f} ms, one thread {t1 * 1e3:.3f} ms, "
                  f"{td / t1:.2f}x", flush=True)
    print()
    print("| benchmark | default threads ms | one thread ms | default / one |")
    print("|---|---:|---:|---:|")
    for name, td, t1 in rows:
        print(f"| {name} | {td * 1e3:.3f} | {t1 * 1e3:.3f} | {td / t1:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
