"""Cold start: wall time of whole training programs from an empty and from a
warm Numba kernel cache, each run in a fresh interpreter.

    python benches/cold_start.py                     # cnn lstm transformer, 3 rounds
    python benches/cold_start.py cnn --rounds 5
    python benches/cold_start.py --warmup-first      # cold runs after `python -m yscv.warmup`

Programs: ``cnn`` is the README's main job (``examples/train_digits_cnn.py``,
12 epochs), ``lstm`` and ``transformer`` are the small programs of
benches/cold_programs.py. A *cold* run points ``NUMBA_CACHE_DIR`` at a new
empty directory (so every kernel compiles on first use), the *warm* run
repeats the program with the cache that run filled. Rounds alternate the
programs; medians (and min-max) are printed, with the number of kernels
(``.nbi`` index files) and compiled signatures (``.nbc`` files) the cold run
left in its cache (with ``--warmup-first``, the warmup's as well). Run it as the benchmarks are run
(``env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE``; docs/benchmarks.md).
"""
from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent

PROGRAMS = {
    "cnn": lambda tmp: [str(ROOT / "examples" / "train_digits_cnn.py"), "--no-progress",
                        "--checkpoint-dir", os.path.join(tmp, "ck")],
    "lstm": lambda tmp: [str(HERE / "cold_programs.py"), "lstm"],
    "transformer": lambda tmp: [str(HERE / "cold_programs.py"), "transformer"],
}


def timed_run(argv: list, cache_dir: str, cwd: str) -> float:
    """Wall seconds of ``python argv`` with ``NUMBA_CACHE_DIR=cache_dir``."""
    env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, *argv], env=env, cwd=cwd, capture_output=True,
                          text=True)
    wall = time.perf_counter() - t0
    if proc.returncode:
        sys.stderr.write(proc.stdout + proc.stderr)
        raise SystemExit(f"{argv} failed with exit code {proc.returncode}")
    return wall


def cache_counts(cache_dir: str) -> tuple:
    """(kernels, signatures): ``.nbi`` and ``.nbc`` files under ``cache_dir``."""
    nbi = nbc = 0
    for _, _, files in os.walk(cache_dir):
        nbi += sum(f.endswith(".nbi") for f in files)
        nbc += sum(f.endswith(".nbc") for f in files)
    return nbi, nbc


def warm_up(cache_dir: str, cwd: str) -> float:
    """Wall seconds of ``python -m yscv.warmup`` into ``cache_dir``."""
    return timed_run(["-m", "yscv.warmup", "--quiet"], cache_dir, cwd)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("programs", nargs="*", help=f"some of {list(PROGRAMS)} (default: all)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup-first", action="store_true",
                    help="run `python -m yscv.warmup` into the empty cache before each cold run "
                         "(its time is reported separately)")
    args = ap.parse_args(argv)
    args.programs = args.programs or list(PROGRAMS)
    for p in args.programs:
        if p not in PROGRAMS:
            ap.error(f"unknown program {p!r}; choose from {list(PROGRAMS)}")
    res = {p: {"cold": [], "warm": [], "warmup": [], "counts": None} for p in args.programs}
    for r in range(args.rounds):
        for p in args.programs:
            tmp = tempfile.mkdtemp(prefix="yscv-cold-")
            try:
                cache = os.path.join(tmp, "numba")
                os.mkdir(cache)
                if args.warmup_first:
                    res[p]["warmup"].append(warm_up(cache, tmp))
                cold = timed_run(PROGRAMS[p](tmp), cache, tmp)
                res[p]["counts"] = cache_counts(cache)
                warm = timed_run(PROGRAMS[p](tmp), cache, tmp)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            res[p]["cold"].append(cold)
            res[p]["warm"].append(warm)
            print(f"round {r + 1}: {p:12s} cold {cold:6.2f} s  warm {warm:6.2f} s", flush=True)

    def fmt(xs):
        return f"{statistics.median(xs):6.2f} ({min(xs):.2f}-{max(xs):.2f})"

    cold_label = "cold after warmup s" if args.warmup_first else "cold s"
    print(f"\n{'program':12s} {cold_label:>22s} {'warm s':>22s} {'kernels':>8s} {'signatures':>10s}")
    for p, d in res.items():
        k, s = d["counts"]
        print(f"{p:12s} {fmt(d['cold']):>22s} {fmt(d['warm']):>22s} {k:8d} {s:10d}")
        if d["warmup"]:
            print(f"{'':12s} python -m yscv.warmup: {fmt(d['warmup'])} s")


if __name__ == "__main__":
    main()
