"""Data-parallel weak scaling: samples per second of ``mpiexec -n 2`` over one process.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benches/bench_scaling.py
    python benches/bench_scaling.py --quick          # fewer steps and rounds
    python benches/bench_scaling.py --models mlp     # one model

Each configuration runs in fresh processes; one training step is forward,
backward (DistributedDataParallel: one fused allreduce of the gradients when
the world is larger than one) and an SGD update. The per-rank batch is the
same everywhere (weak scaling), so two ranks process twice the samples per
step. Configurations, alternated round by round so they share the noise:

    1p x 1t   one process, one thread (YSCV_NUM_THREADS=1, OPENBLAS_NUM_THREADS=1)
    1p x 2t   one process using both cores (the defaults)
    2r x 1t   mpiexec -n 2, one thread per rank (the defaults under mpiexec)
    2r x 2t   mpiexec -n 2, two threads per rank (YSCV_NUM_THREADS=2, OPENBLAS_NUM_THREADS=2)

Models: the MLP 784-512-512-10 (ReLU, batch 128) and the anchor CNN
(32x32x3, batch 32: conv3x3 3->16 + ReLU, max-pool 2, conv3x3 16->32 + ReLU,
max-pool 2, linear, cross-entropy). Speed-ups are samples/s over ``1p x 1t``
(the target for ``2r x 1t`` on two cores is >= 1.7x). Results in
docs/benchmarks.md ("Scaling out").
"""
from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve()
ROOT = HERE.parent.parent
MPIEXEC = pathlib.Path(sys.executable).parent / "mpiexec"

CONFIGS = {
    "1p x 1t": (1, {"YSCV_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}),
    "1p x 2t": (1, {}),
    "2r x 1t": (2, {}),
    "2r x 2t": (2, {"YSCV_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": "2"}),
}


# ------------------------------------------------------------------ worker
def _model(name):
    import yscv.nn as nn

    if name == "mlp":
        return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                             nn.Linear(512, 10)), (128, 784)
    return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(8 * 8 * 32, 10)), (32, 32, 32, 3)


def worker(name: str, steps: int, warmup: int) -> None:
    import numpy as np

    import yscv
    import yscv.distributed as dist
    import yscv.optim as optim

    dist.init()
    r, w = dist.rank(), dist.world_size()
    yscv.manual_seed(0)
    net, shape = _model(name)
    model = dist.DistributedDataParallel(net)
    opt = optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    rng = np.random.default_rng(r)
    x = rng.standard_normal(shape).astype(np.float32)
    y = rng.integers(0, 10, shape[0])
    g = yscv.Graph()
    k = model.bind(g)

    def step():
        g.truncate(k)
        g.backward(g.cross_entropy(model(g, g.constant(x)), y))
        opt.step()
        opt.zero_grad()
        g.zero_grads()

    for _ in range(warmup):
        step()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    dist.barrier()
    dt = time.perf_counter() - t0
    if r == 0:
        print(f"RESULT {w * shape[0] * steps / dt:.3f} {dist.threads_per_rank()}", flush=True)


# ------------------------------------------------------------------ driver
def run_config(label: str, model: str, steps: int, warmup: int) -> float:
    ranks, extra = CONFIGS[label]
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "YSCV_NUM_THREADS",
                        "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    env.update(extra)
    env["PYTHONPATH"] = str(ROOT)
    cmd = [sys.executable, str(HERE), "--worker", model, "--steps", str(steps),
           "--warmup", str(warmup)]
    if ranks > 1:
        cmd = [str(MPIEXEC), "-n", str(ranks), sys.executable, "-m", "mpi4py", *cmd[1:]]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(f"{label} {model} failed:\n{out.stderr}")
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT")][0]
    return float(line.split()[1])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--worker", choices=("mlp", "cnn"))
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--models", nargs="*", default=["mlp", "cnn"])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    if args.worker:
        worker(args.worker, args.steps, args.warmup)
        return
    if args.quick:
        args.steps, args.rounds = 20, 3
    print(f"weak scaling, {os.cpu_count()} cores, {args.rounds} rounds of {args.steps} steps "
          "(median samples/s); speed-up over 1p x 1t")
    for model in args.models:
        samples = {label: [] for label in CONFIGS}
        loads = []
        for _ in range(args.rounds):
            loads.append(os.getloadavg()[0])   # other jobs on the machine skew the round
            for label in CONFIGS:
                samples[label].append(run_config(label, model, args.steps, args.warmup))
        base = statistics.median(samples["1p x 1t"])
        print(f"\n{model}:")
        print(f"  {'config':<10}{'samples/s':>12}{'speed-up':>10}   all rounds")
        for label, vals in samples.items():
            med = statistics.median(vals)
            print(f"  {label:<10}{med:>12.1f}{med / base:>9.2f}x   "
                  + " ".join(f"{v:.0f}" for v in vals))
        print(f"  {'load':<32}   " + " ".join(f"{v:.1f}" for v in loads)
              + "   (1-min load average at the start of each round)")
        per_round = [samples["2r x 1t"][i] / samples["1p x 1t"][i] for i in range(args.rounds)]
        print("  2r x 1t / 1p x 1t per round: " + " ".join(f"{v:.2f}" for v in per_round))


if __name__ == "__main__":
    main()
