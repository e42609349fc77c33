"""Run the benchmarks side by side in one process and print ratio tables.

    python benches/run.py                 # every bench module
    python benches/run.py mlp chain       # only bench_mlp.py and bench_chain.py
    python benches/run.py --quick         # fewer rounds
    python benches/run.py --separate lstm # also time each side in its own process
    python benches/run.py --threads       # yscv alone: default threads vs one thread

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
"""
from __future__ import annotations

import argparse
import importlib
import os
import pathlib
import statistics
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("topics", nargs="*", help="bench_<topic>.py modules to run (default: all)")
    ap.add_argument("--quick", action="store_true", help="fewer rounds (noisier)")
    ap.add_argument("--no-torch", action="store_true", help="skip the PyTorch reference")
    ap.add_argument("--separate", action="store_true",
                    help="also time each side alone in its own process")
    ap.add_argument("--threads", action="store_true",
                    help="yscv alone: default threads vs one thread (no reference)")
    args = ap.parse_args(argv)
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

    rows = []
    for topic in topics:
        mod = importlib.import_module(f"bench_{topic}")
        if not hasattr(mod, "benches"):
            # a standalone bench (bench_scaling launches mpiexec itself)
            if args.topics:
                print(f"bench_{topic}.py runs on its own: python benches/bench_{topic}.py")
            continue
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
            rows.append((b, first, ty, tr, ratio, alone))
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
    for b, first, ty, tr, ratio, alone in rows:
        tgt = f"<= {b.target:.2f}x" if b.target else ""
        print(f"| {b.name} | {b.reference_name} | {ty * 1e3:.3f} | {tr * 1e3 if tr else float('nan'):.3f} | "
              f"{(f'{ratio:.2f}x' if ratio else '-')} |"
              + ((f" {alone:.2f}x |" if alone else " - |") if sep else "")
              + f" {tgt} | {first * 1e3:.0f} |")
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
