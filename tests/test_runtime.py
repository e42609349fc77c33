"""Process-wide settings (yscv/runtime/): one module reads the environment."""
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
        if re.search(r"os\.environ|os\.getenv|getenv\(", text) and path.relative_to(ROOT).as_posix() != "runtime/environment.py":
            offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []


@pytest.mark.parametrize("bad", [0, -2, 1.5, "2", True, None])
def test_set_num_threads_rejects_bad_counts(bad):
    before = runtime.get_num_threads()
    with pytest.raises(ValueError, match="set_num_threads"):
        yscv.set_num_threads(bad)
    assert runtime.get_num_threads() == before


def test_set_num_threads_sizes_the_region_pool_and_blas(monkeypatch):
    from yscv.runtime import threads

    monkeypatch.setattr(threads, "_num_threads", threads._num_threads)
    monkeypatch.setattr(threads, "_threads_from_user", threads._threads_from_user)
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
        monkeypatch.setattr(runtime.threads, "_num_threads", n)
        out[n] = run()
    for n in (2, 4):
        assert all(np.array_equal(a, b) for a, b in zip(out[n], out[1]))


def test_gemm_policy(monkeypatch):
    with pytest.raises(ValueError, match="set_gemm"):
        runtime.set_gemm("fast")
    monkeypatch.setattr(runtime.gemm, "_gemm", runtime.get_gemm())
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
    for where in (runtime, runtime.threads):   # the API and the holds' own calls
        monkeypatch.setattr(where, "blas_threads", lambda: 2)
        monkeypatch.setattr(where, "set_blas_threads", lambda n: seen.append(n) or True)
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


# ------------------------------------------------- set_flush_denormal (FTZ/DAZ)
import threading  # noqa: E402
import time  # noqa: E402

SUB32 = np.float32(1e-39)          # a subnormal float32


@pytest.fixture
def flush_off_after():
    yield
    runtime.set_flush_denormal(False)


def _flushed() -> bool:
    """Whether the calling thread flushes: a subnormal times one reads as 0."""
    return float(np.multiply(np.array([SUB32]), np.float32(1.0))[0]) == 0.0


def test_flush_denormal_is_off_by_default():
    assert runtime.flush_denormal() is False
    assert not _flushed()
    assert float(SUB32 * np.float32(1.0)) > 0.0
    m = runtime.mxcsr()
    assert m is None or m & 0x8040 == 0


def test_set_flush_denormal_rejects_non_bools():
    for bad in (1, 0, "yes", None):
        with pytest.raises(TypeError, match="set_flush_denormal"):
            runtime.set_flush_denormal(bad)
    assert runtime.flush_denormal() is False


@pytest.mark.skipif(runtime.mxcsr() is None, reason="FTZ/DAZ is x86-64 Linux only")
def test_flush_denormal_reaches_caller_new_threads_and_openblas(flush_off_after):
    """On: the caller, a thread started afterwards and OpenBLAS's (restarted)
    worker threads flush; off: none does. A threaded product of a subnormal
    matrix is 0 exactly where every participating thread has DAZ."""
    prev = runtime.blas_threads()
    runtime.set_blas_threads(2)
    try:
        a = np.full((512, 512), SUB32, dtype=np.float32)
        b = np.ones((512, 512), dtype=np.float32)
        assert (a @ b).min() > 0                     # starts OpenBLAS's workers
        assert yscv.set_flush_denormal(True) is True
        assert runtime.flush_denormal() is True
        assert runtime.mxcsr() & 0x8040 == 0x8040
        assert _flushed()
        seen = []
        t = threading.Thread(target=lambda: seen.append(_flushed()))
        t.start()
        t.join()
        assert seen == [True]
        np.testing.assert_array_equal(a @ b, 0.0)    # every row, whichever thread
        assert runtime.set_flush_denormal(False) is True
        assert runtime.mxcsr() & 0x8040 == 0
        assert not _flushed()
        assert (a @ b).min() > 0
    finally:
        runtime.set_blas_threads(prev if prev else 1)


@pytest.mark.skipif(runtime.mxcsr() is None, reason="FTZ/DAZ is x86-64 Linux only")
def test_flush_denormal_reaches_region_helpers(monkeypatch, flush_off_after):
    """yscv's helper threads (made before the switch) apply the setting at
    their next region, on and off again."""
    monkeypatch.setattr(runtime, "kernel_threads", lambda: 2)
    S = regions.S

    def helper_states():
        seen = {}
        me = threading.get_ident()

        def call(st):
            if threading.get_ident() != me:
                seen["helper"] = _flushed()
                return
            st[S.IN_KERNEL] = st[S.SIG]             # as a region kernel's first step
            end = time.monotonic() + 5.0
            while "helper" not in seen and time.monotonic() < end:
                time.sleep(0.001)

        regions.run_region(call, 4)
        return seen.get("helper")

    assert helper_states() is False                  # the pool exists before the switch
    runtime.set_flush_denormal(True)
    assert helper_states() is True
    runtime.set_flush_denormal(False)
    assert helper_states() is False


@pytest.mark.skipif(runtime.mxcsr() is None, reason="FTZ/DAZ is x86-64 Linux only")
def test_flush_denormal_in_a_graph_and_the_parallel_backward(flush_off_after):
    """A subnormal value and gradient flush to 0 in forward and in a
    parallel backward's threads (started per call, after the switch);
    without the switch both stay subnormal."""
    def run():
        g = yscv.Graph()
        x = g.variable(np.full((64, 64), 1.0, dtype=np.float32))
        s = np.full((64, 64), 1e-20, dtype=np.float32)   # 1e-20 * 1e-20: subnormal
        branches = [g.tanh(x * s) * s for _ in range(4)]  # forks: helper threads start
        y = branches[0] + branches[1] + branches[2] + branches[3]
        g.backward(y, grad=np.ones((64, 64), dtype=np.float32), workers=2)
        return g.value(y), g.grad(x)

    y0, gx0 = run()
    assert y0.min() > 0 and gx0.min() > 0 and gx0.max() < 1.2e-38    # subnormal
    runtime.set_flush_denormal(True)
    y1, gx1 = run()
    np.testing.assert_array_equal(y1, 0.0)
    np.testing.assert_array_equal(gx1, 0.0)


def test_check_same_bits_on_threads_fails_when_a_result_depends_on_threads():
    """yscv.testing.check_same_bits_on_threads restores the setting and
    catches a result that changes with the thread count."""
    from yscv.testing import check_same_bits_on_threads

    before = yscv.get_num_threads()
    check_same_bits_on_threads(lambda: [np.arange(3.0)])
    with pytest.raises(AssertionError, match="output 0"):
        check_same_bits_on_threads(lambda: [np.full(2, float(yscv.get_num_threads()))])
    assert yscv.get_num_threads() == before


def test_machine_line_names_cpu_blas_kernels_and_threads(monkeypatch):
    """The line every benchmark table carries: CPU model and ISA, cores, the
    BLAS and the kernels it runs (and a forcing OPENBLAS_CORETYPE), threads."""
    from yscv import runtime

    monkeypatch.setitem(runtime._ENV, "OPENBLAS_CORETYPE", "")
    line = runtime.machine_line()
    cpu, blas = runtime.cpu_info(), runtime.blas_info()
    assert line.startswith(cpu["model"]) and f"{runtime.usable_cores()} cores" in line
    assert f"yscv {runtime.get_num_threads()} threads" in line and "forced" not in line
    if blas["config"]:
        assert blas["config"].split()[0] in line and f"{blas['core']} kernels" in line
    monkeypatch.setitem(runtime._ENV, "OPENBLAS_CORETYPE", "Haswell")
    assert "(forced by OPENBLAS_CORETYPE=Haswell)" in runtime.machine_line()


def _cpuinfo(*processors):
    """A /proc/cpuinfo text: one block of ``key: value`` lines per processor."""
    return "\n\n".join("\n".join(f"{k}\t: {v}" for k, v in fields.items())
                       for fields in processors) + "\n\n"


_EPYC = {"processor": "0", "vendor_id": "AuthenticAMD", "cpu family": "25", "model": "17",
         "model name": "AMD EPYC", "flags": "fpu sse4_2 avx fma avx2 avx512f avx512_bf16"}
_ARM_FEATURES = "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics cpuid asimdrdm lrcpc dcpop"


@pytest.mark.parametrize("fields, family", [
    (_EPYC, "amd-epyc-avx512"),
    ({"vendor_id": "AuthenticAMD", "model name": "AMD EPYC 7R13 Processor",
      "flags": "avx avx2 fma"}, "amd-epyc-avx2"),
    ({"vendor_id": "AuthenticAMD", "model name": "AMD Ryzen 9 5950X 16-Core Processor",
      "flags": "sse4_2 avx avx2 fma"}, "amd-ryzen-avx2"),
    ({"vendor_id": "GenuineIntel", "model name": "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz",
      "flags": "sse4_2 avx avx2 avx512f avx512bw"}, "intel-xeon-avx512"),
    ({"vendor_id": "GenuineIntel", "model name": "Intel(R) Core(TM) i7-9700K CPU @ 3.60GHz",
      "flags": "sse4_2 avx avx2 fma"}, "intel-core-avx2"),
    ({"vendor_id": "GenuineIntel", "model name": "11th Gen Intel(R) Core(TM) i7-1165G7 @ 2.80GHz",
      "flags": "avx2 avx512f"}, "intel-core-avx512"),
    ({"vendor_id": "GenuineIntel", "model name": "QEMU Virtual CPU version 2.5+",
      "flags": "fpu sse sse2 sse4_1 sse4_2"}, "intel-cpu-sse4"),
    ({"processor": "0", "Features": _ARM_FEATURES, "CPU implementer": "0x41",
      "CPU architecture": "8", "CPU part": "0xd0c"}, "arm-neoverse-n1-neon"),
    ({"processor": "0", "Features": _ARM_FEATURES + " sve", "CPU implementer": "0x41",
      "CPU part": "0xd40"}, "arm-neoverse-v1-sve"),
    ({"processor": "0", "Features": _ARM_FEATURES, "CPU implementer": "0xc0",
      "CPU part": "0xac3"}, "ampere-part-ac3-neon"),
])
def test_machine_family_from_cpuinfo(fields, family):
    """Vendor, model family and SIMD level: the key of a benchmark table."""
    assert runtime.machine_family(_cpuinfo(fields)) == family
    # only the first processor counts (later ones repeat it; here they differ)
    other = {**fields, "vendor_id": "GenuineIntel", "model name": "Intel Celeron",
             "flags": "sse2", "Features": "fp", "CPU part": "0xd08"}
    assert runtime.machine_family(_cpuinfo(fields, other)) == family


def test_machine_family_without_cpuinfo_names_the_platform():
    import platform

    family = runtime.machine_family("")
    assert family == re.sub(r"[^a-z0-9]+", "-",
                            f"{platform.system()}-{platform.machine()}".lower()).strip("-")
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", family)


def test_machine_family_reads_proc_cpuinfo_by_default():
    path = pathlib.Path("/proc/cpuinfo")
    text = path.read_text(errors="replace") if path.is_file() else ""
    family = runtime.machine_family()
    assert family == runtime.machine_family(text)
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", family)


_THREADS_REPORT = (
    "import json, sys, yscv, threadpoolctl\n"
    "from yscv import runtime\n"
    "from yscv.compute import regions\n"
    "if sys.argv[1] != '-': yscv.set_num_threads(int(sys.argv[1]))\n"
    "blas = sorted((i['internal_api'], i['num_threads']) "
    "for i in threadpoolctl.threadpool_info() if i['user_api'] == 'blas')\n"
    "print(json.dumps([yscv.get_num_threads(), regions.workers(), runtime.blas_threads(), "
    "runtime.threads_set_by_user(), blas]))\n")


def _threads_report(arg, **env):
    import json
    import os

    full = {k: v for k, v in os.environ.items()
            if k not in ("YSCV_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    full.update(env, PYTHONPATH=str(ROOT.parent))
    out = subprocess.run([sys.executable, "-c", _THREADS_REPORT, arg], capture_output=True,
                         text=True, env=full, timeout=120, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


@pytest.mark.parametrize("n", [1, 2])
def test_yscv_num_threads_at_import_is_set_num_threads(n):
    """YSCV_NUM_THREADS=n has exactly the effect of set_num_threads(n): yscv's
    threads, its region helpers and NumPy's OpenBLAS threads (as threadpoolctl
    reports them), where the variable used to leave OpenBLAS at its default
    (a user saw 466 ms per step with the variable against 42 ms with the call)."""
    by_env = _threads_report("-", YSCV_NUM_THREADS=str(n))
    by_call = _threads_report(str(n))
    assert by_env == by_call
    assert by_env[0] == n and by_env[3] is True
    if by_env[2] is not None:                 # NumPy ships OpenBLAS
        assert by_env[2] == n and all(k == n for _, k in by_env[4])
