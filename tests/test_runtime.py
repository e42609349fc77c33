"""Process-wide settings (yscv/runtime.py): one module reads the environment."""
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

import yscv
from yscv import runtime
from yscv.compute import gemm, regions

ROOT = pathlib.Path(yscv.__file__).resolve().parent


def test_only_runtime_reads_the_environment():
    offenders = []
    for path in ROOT.rglob("*.py"):
        text = path.read_text()
        if re.search(r"os\.environ|os\.getenv|getenv\(", text) and path.name != "runtime.py":
            offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []


@pytest.mark.parametrize("bad", [0, -2, 1.5, "2", True, None])
def test_set_num_threads_rejects_bad_counts(bad):
    before = runtime.get_num_threads()
    with pytest.raises(ValueError, match="set_num_threads"):
        yscv.set_num_threads(bad)
    assert runtime.get_num_threads() == before


def test_set_num_threads_sizes_the_region_pool_and_blas(monkeypatch):
    monkeypatch.setattr(runtime, "_num_threads", runtime._num_threads)
    monkeypatch.setattr(runtime, "_threads_from_user", runtime._threads_from_user)
    blas_before = runtime.blas_threads()
    try:
        yscv.set_num_threads(1)
        assert yscv.get_num_threads() == 1 and regions.workers() == 0
        if blas_before is not None:
            assert runtime.blas_threads() == 1
        yscv.set_num_threads(3)
        assert regions.workers() == 2
        yscv.set_num_threads(64)
        assert regions.workers() == regions.MAX_CHUNKS - 1
    finally:
        if blas_before is not None:
            runtime.set_blas_threads(blas_before)


def test_layer_norm_same_bits_for_any_thread_count(monkeypatch):
    x = np.random.default_rng(0).standard_normal((2048, 256)).astype(np.float32)

    def run():
        g = yscv.Graph()
        v = g.variable(x)
        y = g.layer_norm(v)
        g.backward(g.mean(y * y))
        return g.value(y).copy(), g.grad(v).copy()

    out = {}
    for n in (1, 2, 4):
        monkeypatch.setattr(runtime, "_num_threads", n)
        out[n] = run()
    for n in (2, 4):
        assert all(np.array_equal(a, b) for a, b in zip(out[n], out[1]))


def test_gemm_policy(monkeypatch):
    with pytest.raises(ValueError, match="set_gemm"):
        runtime.set_gemm("fast")
    monkeypatch.setattr(runtime, "_gemm", runtime.get_gemm())
    runtime.set_gemm("auto")
    assert not gemm.tiles_enabled()      # the default is NumPy's BLAS
    runtime.set_gemm("blas")
    assert not gemm.tiles_enabled()
    runtime.set_gemm("tiles")
    assert gemm.tiles_enabled()


def test_environment_is_read_once_at_import():
    code = ("import os; os.environ['YSCV_NUM_THREADS'] = '1'; import yscv; "
            "os.environ['YSCV_NUM_THREADS'] = '3'; print(yscv.get_num_threads())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "1"


def test_launcher_world_size_defaults_to_one():
    assert runtime.launcher_world_size() >= 1


def test_small_products_run_on_one_blas_thread(monkeypatch):
    """gemm.dot runs products of BLAS_THREADED up to SMALL_WORK multiply-adds
    with OpenBLAS at one thread and restores the count; smaller and larger
    ones leave it alone."""
    seen = []
    monkeypatch.setattr(runtime, "blas_threads", lambda: 2)
    monkeypatch.setattr(runtime, "set_blas_threads", lambda n: seen.append(n) or True)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((32, 2048)), rng.standard_normal((2048, 10))
    assert gemm.BLAS_THREADED <= 32 * 2048 * 10 < gemm.SMALL_WORK
    np.testing.assert_array_equal(gemm.dot(a, b), np.dot(a, b))
    assert seen == [1, 2]
    seen.clear()
    tiny = rng.standard_normal((32, 64))     # OpenBLAS runs it on one thread anyway
    np.testing.assert_array_equal(gemm.dot(tiny, tiny.T), np.dot(tiny, tiny.T))
    assert seen == []
    big = rng.standard_normal((256, 256))
    assert 256 ** 3 >= gemm.SMALL_WORK
    np.testing.assert_array_equal(gemm.dot(big, big), np.dot(big, big))
    assert seen == []
