"""Run the benchmarks side by side in one process and print ratio tables.

    python benches/run.py                 # every bench module
    python benches/run.py mlp chain       # only bench_mlp.py and bench_chain.py
    python benches/run.py --quick         # fewer rounds

Ratios are yscv time / reference time (PyTorch CPU when installed): lower is
better, <= 1.0 means yscv is at least as fast. Absolute times are printed for
context only; the machines are shared and noisy.
"""
from __future__ import annotations

import argparse
import importlib
import os
import pathlib
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
    args = ap.parse_args(argv)

    topics = args.topics or sorted(p.stem[len("bench_"):] for p in HERE.glob("bench_*.py"))
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores")
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
        for b in mod.benches(torch):
            first = time_once(b.yscv)  # includes Numba compilation (or cache load)
            if b.reference is not None:
                b.reference()
            ty, tr = interleaved(b.yscv, b.reference, rounds=rounds)
            ratio = ty / tr if tr else None
            rows.append((b, first, ty, tr, ratio))
            r = f"{ratio:.2f}x" if ratio else "-"
            print(f"  {b.name}: yscv {ty * 1e3:.3f} ms, {b.reference_name} "
                  f"{tr * 1e3 if tr else float('nan'):.3f} ms, ratio {r}, "
                  f"first call {first * 1e3:.0f} ms", flush=True)
            if b.note:
                print(f"    {b.note}", flush=True)

    print()
    print("| benchmark | reference | yscv ms | reference ms | ratio (yscv/ref) | target | first call ms |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for b, first, ty, tr, ratio in rows:
        tgt = f"<= {b.target:.2f}x" if b.target else ""
        print(f"| {b.name} | {b.reference_name} | {ty * 1e3:.3f} | {tr * 1e3 if tr else float('nan'):.3f} | "
              f"{(f'{ratio:.2f}x' if ratio else '-')} | {tgt} | {first * 1e3:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
