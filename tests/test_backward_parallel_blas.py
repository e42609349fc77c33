"""Parallel backward and OpenBLAS's thread count: the bits of a product can
depend on the count (OpenBLAS's AVX2 kernels), so the walk keeps the serial
walk's count, and a one-thread hold inside a rule runs alone
(yscv/runtime/blas_gate.py)."""
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import yscv
from yscv import runtime
from yscv.runtime.blas_gate import BlasGate

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The towers graph of benches/bench_backward_parallel.py (large products on
# OpenBLAS's threads, conv), plus branches whose products are in
# yscv/compute/gemm.py's one-thread tier, next to branches with large ones;
# the GEMM choices start empty, so shape classes are calibrated inside the
# parallel walk too. Prints the number of leaf gradients that differ from
# workers=1, over several runs of each graph.
_SCRIPT = r"""
import numpy as np
import yscv
from yscv import runtime
from yscv.compute import gemm_choice
gemm_choice.choices_path = lambda: None     # no file: calibrate in this process
gemm_choice.forget()
runtime.set_blas_threads(2)
import sys
sys.path.insert(0, "tests")
from test_backward_parallel import _towers_bench_graph

def mixed(seed):
    rng = np.random.default_rng(seed)
    g = yscv.Graph()
    x = g.constant(rng.standard_normal((64, 256)).astype(np.float32))
    outs, leaves = [], []
    for k in range(6):
        n = 256 if k % 2 else 96        # 64x256x96: the one-thread tier
        w = g.variable(rng.standard_normal((256, n)).astype(np.float32) / 16.0)
        w2 = g.variable(rng.standard_normal((n, 256)).astype(np.float32) / 16.0)
        leaves += [w, w2]
        outs.append(g.mean(g.tanh(g.matmul(g.tanh(g.matmul(x, w)), w2))))
    total = outs[0]
    for o in outs[1:]:
        total = total + o
    return g, total, leaves

def grads(build, workers):
    g, total, leaves = build()
    g.backward(total, workers=workers)
    return [g.grad(n).copy() for n in leaves]

def compare(build):
    got = [grads(build, 2) for _ in range(3)]    # first: calibrations inside the walk
    ref = grads(build, 1)
    return (sum(sum(not np.array_equal(a, b) for a, b in zip(run, ref)) for run in got),
            3 * len(ref))

bad = total = 0
for build in (_towers_bench_graph, lambda: mixed(0)):
    b, t = compare(build)
    bad, total = bad + b, total + t
# a one-thread product that lasts: another branch's product would start
# while OpenBLAS is at one thread, unless the hold runs alone
import time
real_hold = runtime.hold_one_blas_thread
def slow_hold(hold):
    real_hold(hold)
    if hold:
        time.sleep(0.005)
runtime.hold_one_blas_thread = slow_hold
b, t = compare(lambda: mixed(1))
print(runtime.blas_info()["core"], bad, total, b, t)
"""


def _run(extra_env):
    env = dict(os.environ, PYTHONPATH=ROOT, **extra_env)
    out = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True,
                         env=env, cwd=ROOT, timeout=600, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.split()


@pytest.mark.skipif(runtime.blas_threads() is None, reason="NumPy's BLAS is not OpenBLAS")
@pytest.mark.parametrize("coretype", ["", "Haswell"])
def test_workers_2_equals_workers_1_bitwise_on_openblas_kernel_families(coretype):
    """With OpenBLAS's AVX2 (Haswell) kernels a float32 product gives other
    bits on one thread than on two; the parallel walk used to hold OpenBLAS
    at one thread and 40-48 of the towers graph's 56 leaf gradients differed
    from workers=1. The last graph makes each one-thread hold last longer,
    so a product of another branch would start within it unless the hold
    runs alone. The kernels are forced in a child process only (this
    process's and CI's BLAS stay as they are)."""
    if coretype and "avx2" not in runtime.cpu_info()["isa"].split():
        pytest.skip("the Haswell kernels need AVX2")
    core, *counts = _run({"OPENBLAS_CORETYPE": coretype} if coretype else {})
    if coretype:
        assert core == coretype
    assert [int(c) for c in counts] == [0, 3 * (56 + 12), 0, 3 * 12]


def test_walk_keeps_openblas_count_and_runs_regions_on_one_thread():
    before = (runtime.kernel_threads(), runtime.blas_threads())
    seen = []
    g = yscv.Graph()
    rng = np.random.default_rng(5)
    x = g.constant(rng.standard_normal((16, 32)))
    outs = []
    for _ in range(4):
        w = g.variable(rng.standard_normal((32, 32)) * 0.1)
        h = g.mean(g.tanh(g.matmul(x, w)))
        g.register_hook(h, lambda gr: seen.append((runtime.kernel_threads(),
                                                   runtime.blas_threads())))
        outs.append(h)
    g.backward(outs[0] + outs[1] + outs[2] + outs[3], workers=2)
    assert len(seen) == 4
    assert all(k == 1 for k, _ in seen)                 # region kernels on one thread
    assert all(b == before[1] for _, b in seen)         # OpenBLAS as in the serial walk
    assert (runtime.kernel_threads(), runtime.blas_threads()) == before
    g.zero_grads()
    g.backward(outs[0] + outs[1], workers=1)   # serial: nothing changes
    assert (runtime.kernel_threads(), runtime.blas_threads()) == before


def test_gate_runs_an_exclusive_section_alone_and_turns_come_in_order():
    gate = BlasGate()
    gate.open(True)
    seen, lock = [], threading.Lock()
    working = [0]          # threads inside a node and outside any wait of the gate

    def work(seconds):
        with lock:
            working[0] += 1
        time.sleep(seconds)
        with lock:
            working[0] -= 1

    def node(k, alone):
        gate.enter()
        try:
            work(0.01)
            if alone:
                assert gate.begin_exclusive()
                try:
                    with lock:
                        seen.append((k, working[0]))
                    time.sleep(0.02)
                finally:
                    gate.end_exclusive()
            work(0.01)
        finally:
            gate.leave()

    threads = [threading.Thread(target=node, args=(k, k % 2 == 0)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=20)
    assert not any(t.is_alive() for t in threads)       # three asking at once take turns
    assert sorted(k for k, _ in seen) == [0, 2, 4]
    assert all(w == 0 for _, w in seen)                 # nothing else ran meanwhile
    assert gate._running == 0 and gate._owner is None
    gate.open(False)


def test_gate_outside_a_node_returns_at_once():
    gate = BlasGate()
    gate.open(True)
    assert gate.begin_exclusive() is False
    gate.open(False)
