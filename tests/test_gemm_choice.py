"""The GEMM chosen by measurement (yscv/compute/gemm_choice.py): shape
classes, the candidates each policy times, the margin, the choices file
beside the kernel cache, and results."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import yscv
from yscv import runtime
from yscv.compute import gemm, gemm_choice

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """Choices go to an empty folder; this process's table starts empty."""
    monkeypatch.setitem(runtime._ENV, "NUMBA_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(gemm_choice, "_choices", None)
    monkeypatch.setattr(gemm_choice, "_fast", {})
    monkeypatch.setattr(gemm_choice, "_stats", {"calibrated": 0, "seconds": 0.0})
    monkeypatch.setattr(runtime.gemm, "_gemm", "auto")
    return tmp_path


def _operand(rng, shape, layout, dtype=np.float32):
    if layout == "n":
        return rng.standard_normal(shape).astype(dtype)
    return rng.standard_normal(shape[::-1]).astype(dtype).T      # the transpose of a C array


FORMS = [((128, 784), (784, 512), "nn"), ((128, 512), (512, 512), "nt"),
         ((512, 128), (128, 512), "tn"), ((128, 10), (10, 512), "nt"),
         ((512, 128), (128, 10), "tn"), ((64, 2048), (2048, 10), "nn")]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("sa,sb,layout", FORMS)
def test_auto_gives_blas_bits(cache, sa, sb, layout, dtype):
    """Under "auto" every product has the bits of the fixed BLAS rule
    ("blas"), whatever the measurement chose."""
    rng = np.random.default_rng(0)
    a, b = _operand(rng, sa, layout[0], dtype), _operand(rng, sb, layout[1], dtype)
    got = gemm.dot(a, b)
    runtime.set_gemm("blas")
    want = gemm.dot(a, b)
    assert got.dtype == dtype and np.array_equal(got, want)
    np.testing.assert_allclose(got, np.dot(a.astype(np.float64), b.astype(np.float64)),
                               rtol=1e-4 if dtype == np.float32 else 1e-12, atol=1e-3)


def test_class_key_names_layouts_sizes_and_threads(cache):
    rng = np.random.default_rng(0)
    a, b = _operand(rng, (128, 10), "n"), _operand(rng, (10, 512), "t")
    key = gemm_choice.class_key(a, b, True)
    assert key.startswith("fnt 7,4,9 b") and key.endswith("s")
    assert gemm_choice.class_key(a.astype(np.float64), b, False).startswith("dnt 7,4,9 b")
    # sizes are rounded up to powers of two: 100 and 128 rows share a class
    a100 = _operand(rng, (100, 10), "n")
    assert gemm_choice.class_key(a100, b, True) == key


def test_candidates_per_policy(cache, monkeypatch):
    monkeypatch.setattr(runtime, "blas_threads", lambda: 2)
    rng = np.random.default_rng(0)
    c, t = _operand(rng, (128, 512), "n"), _operand(rng, (512, 512), "t")
    assert gemm_choice._candidates(c, c.T.copy(), False, "auto") == ["blas"]
    assert gemm_choice._candidates(c, t, False, "auto") == ["blas", "contig"]
    assert gemm_choice._candidates(c, t, True, "auto") == ["blas1", "contig1"]
    assert gemm_choice._candidates(c, t, False, "fastest") == [
        "blas", "contig", "blas1", "contig1", "tiles"]
    assert "tiles" not in gemm_choice._candidates(c.astype(np.float64), t.astype(np.float64),
                                                  False, "fastest")
    monkeypatch.setattr(runtime, "blas_threads", lambda: 1)
    assert gemm_choice._candidates(c, t, True, "auto") == ["blas", "contig"]


def _fake_times(monkeypatch, seconds: dict):
    """Candidates that compute np.dot, each 'taking' the given seconds."""
    fns = {}
    for name, _ in seconds.items():
        def f(a, b, name=name):
            return np.dot(a, b)
        fns[name] = f
    monkeypatch.setattr(gemm_choice, "CANDIDATES", fns)
    times = {fns[n]: s for n, s in seconds.items()}
    monkeypatch.setattr(gemm_choice, "_time", lambda fn, a, b, reps: times[fn])


def test_calibrate_takes_the_fastest_beyond_the_margin(cache, monkeypatch):
    rng = np.random.default_rng(0)
    a, b = _operand(rng, (64, 64), "n"), _operand(rng, (64, 64), "t")
    _fake_times(monkeypatch, {"blas": 1.0, "contig": 0.5})
    assert gemm_choice.calibrate(a, b, ["blas", "contig"])[0] == "contig"
    _fake_times(monkeypatch, {"blas": 1.0, "contig": 0.95})     # within the margin: default
    assert gemm_choice.calibrate(a, b, ["blas", "contig"])[0] == "blas"
    _fake_times(monkeypatch, {"blas": 1.0, "contig": 2.0})
    assert gemm_choice.calibrate(a, b, ["blas", "contig"])[0] == "blas"


def test_auto_never_takes_a_candidate_with_other_bits(cache, monkeypatch):
    """A faster candidate that rounds differently is dropped by "auto" and
    taken by "fastest"."""
    rng = np.random.default_rng(0)
    a, b = _operand(rng, (64, 64), "n"), _operand(rng, (64, 64), "t")
    _fake_times(monkeypatch, {"blas": 1.0, "tiles": 0.1})
    other = lambda x, y: np.dot(x, y) * np.float32(1 + 2 ** -20)   # noqa: E731
    gemm_choice.CANDIDATES["tiles"] = other
    monkeypatch.setattr(gemm_choice, "_time", lambda fn, a, b, reps: 0.1 if fn is other else 1.0)
    assert gemm_choice.calibrate(a, b, ["blas", "tiles"])[0] == "blas"
    runtime.set_gemm("fastest")
    assert gemm_choice.calibrate(a, b, ["blas", "tiles"])[0] == "tiles"


def test_choices_are_written_beside_the_kernel_cache_and_read_back(cache):
    rng = np.random.default_rng(0)
    a, b = _operand(rng, (128, 512), "n"), _operand(rng, (512, 512), "t")
    gemm.dot(a, b)
    path = cache / gemm_choice.FILENAME
    assert gemm_choice.choices_path() == str(path)
    data = json.loads(path.read_text())
    section = data["machines"][gemm_choice.machine_key()]
    key = gemm_choice.class_key(a, b, False)
    assert section[key] in ("blas", "contig")
    assert gemm_choice.calibration_stats()[0] == 1
    # a second process reads the file and measures nothing
    code = ("import numpy as np, yscv; from yscv.compute import gemm, gemm_choice; "
            "r = np.random.default_rng(0); a = r.standard_normal((128, 512)).astype(np.float32); "
            "b = r.standard_normal((512, 512)).astype(np.float32).T; gemm.dot(a, b); "
            "print(gemm_choice.calibration_stats()[0], gemm_choice.choices()["
            f"{key!r}])")
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache), PYTHONPATH=ROOT, YSCV_GEMM="auto")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120, check=True)
    assert out.stdout.split() == ["0", section[key]]


def test_choices_of_another_machine_or_a_bad_file_are_ignored(cache):
    path = cache / gemm_choice.FILENAME
    rng = np.random.default_rng(0)
    a, b = _operand(rng, (128, 512), "n"), _operand(rng, (512, 512), "t")
    key = gemm_choice.class_key(a, b, False)
    path.write_text(json.dumps({"format": 1, "machines": {"another CPU": {key: "contig"}}}))
    assert gemm_choice.choices() == {}
    gemm.dot(a, b)
    data = json.loads(path.read_text())
    assert data["machines"]["another CPU"] == {key: "contig"}       # kept
    assert key in data["machines"][gemm_choice.machine_key()]
    gemm_choice.forget()
    path.write_text("{ not json")
    assert gemm_choice.choices() == {}                               # no exception
    path.write_text(json.dumps({"format": 1, "machines": {gemm_choice.machine_key(): {
        key: "no such candidate"}}}))
    gemm_choice.forget()
    assert gemm_choice.choices() == {}


def test_one_calibration_per_class_across_threads(cache):
    rng = np.random.default_rng(0)
    a, b = _operand(rng, (128, 512), "n"), _operand(rng, (512, 512), "t")
    want = np.dot(a, b)
    out = []
    threads = [threading.Thread(target=lambda: out.append(gemm.dot(a, b))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(out) == 4 and all(np.array_equal(o, want) for o in out)
    assert gemm_choice.calibration_stats()[0] == 1


def test_fastest_with_tiles_is_within_float32_rounding(cache):
    yscv.set_gemm("fastest")
    assert yscv.get_gemm() == "fastest"
    rng = np.random.default_rng(1)
    for sa, sb, layout in FORMS[:4]:
        a, b = _operand(rng, sa, layout[0]), _operand(rng, sb, layout[1])
        got = gemm.dot(a, b)
        want = np.dot(a.astype(np.float64), b.astype(np.float64))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-4 * np.sqrt(sa[1]))
        assert gemm_choice.choices()[gemm_choice.class_key(
            a, b, a.shape[0] * sa[1] * sb[1] < gemm.SMALL_WORK) + " f"] in gemm_choice.CANDIDATES


def test_tiles_dot_matches_numpy():
    rng = np.random.default_rng(2)
    for sa, sb, layout in FORMS:
        a, b = _operand(rng, sa, layout[0]), _operand(rng, sb, layout[1])
        np.testing.assert_allclose(gemm.tiles_dot(a, b), np.dot(a, b), rtol=1e-4, atol=1e-3)
    a64 = rng.standard_normal((4, 3))
    assert np.array_equal(gemm.tiles_dot(a64, a64.T), np.dot(a64, a64.T))   # not float32: np.dot


def test_policy_names_and_environment():
    with pytest.raises(ValueError, match="set_gemm.*'quick'"):
        yscv.set_gemm("quick")
    code = "import yscv; print(yscv.get_gemm())"
    for value, want in (("fastest", "fastest"), ("0", "blas"), ("1", "tiles"), ("", "auto"),
                        ("nonsense", "auto")):
        env = dict(os.environ, YSCV_GEMM=value, PYTHONPATH=ROOT)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, timeout=60, check=True)
        assert out.stdout.strip() == want, value
        assert ("YSCV_GEMM='nonsense' is not a GEMM policy" in out.stderr) == (value == "nonsense")
