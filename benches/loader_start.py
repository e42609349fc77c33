"""DataLoader worker start-up: the time from ``iter(loader)`` to the first
batch with ``num_workers=2``, per start method, each in a fresh interpreter.

    python benches/loader_start.py                  # default forkserver spawn fork, 5 rounds
    python benches/loader_start.py spawn --rounds 3

Each child builds a loader over a per-sample dataset defined in this file
(64 samples of 32 float32 values, batch 8) and runs three epochs; it prints
the first-batch latency of epoch 1 (which, with forkserver, includes
starting the forkserver) and the median of epochs 2-3 (workers forked from
a running forkserver). Rounds alternate the methods; medians are printed.
``default`` is ``multiprocessing_context=None``. The children import the
yscv of this checkout (its root goes first on ``PYTHONPATH``).
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]


class Samples:
    """A per-sample dataset (no TensorDataset fast path)."""

    def __len__(self):
        return 64

    def __getitem__(self, i):
        return np.full(32, i, dtype=np.float32), i


def child(method: str) -> None:
    from yscv.data import DataLoader
    loader = DataLoader(Samples(), batch_size=8, num_workers=2,
                        multiprocessing_context=None if method == "default" else method)
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        it = iter(loader)
        next(it)
        times.append(time.perf_counter() - t0)
        for _ in it:
            pass
    print(json.dumps({"first": times[0], "later": statistics.median(times[1:])}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("methods", nargs="*", default=["default", "forkserver", "spawn", "fork"])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    got = {m: {"first": [], "later": []} for m in args.methods}
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    for _ in range(args.rounds):
        for m in args.methods:
            out = subprocess.run([sys.executable, __file__, "--child", m], capture_output=True,
                                 text=True, check=True, timeout=300, env=env).stdout
            rep = json.loads(out.strip().splitlines()[-1])
            for k in ("first", "later"):
                got[m][k].append(rep[k])
    print(f"{'method':<12}{'epoch 1 (ms)':>16}{'epochs 2-3 (ms)':>18}   min-max epoch 1")
    for m, d in got.items():
        print(f"{m:<12}{1e3 * statistics.median(d['first']):>16.0f}"
              f"{1e3 * statistics.median(d['later']):>18.0f}   "
              f"{1e3 * min(d['first']):.0f}-{1e3 * max(d['first']):.0f}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child(sys.argv[2])
    else:
        main()
