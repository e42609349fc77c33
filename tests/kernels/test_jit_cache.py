"""The kernel cache is stamped with every file of yscv/kernels, so a kernel
that inlines a helper from another kernel module never runs stale code; and
the cyclic GC is paused while a kernel made by ``jit`` compiles."""
from __future__ import annotations

import contextlib
import gc
import shutil

import numba
import numpy as np
import pytest
from numba.core import event
from numba.core.errors import TypingError

from yscv.kernels import _jit


def test_stamp_changes_when_any_kernel_file_changes(tmp_path, monkeypatch):
    for f in ("_jit.py", "recurrent.py", "norm.py"):
        shutil.copy(f"{_jit.KERNELS_DIR}/{f}", tmp_path / f)
    monkeypatch.setattr(_jit, "KERNELS_DIR", str(tmp_path))
    before = _jit.package_stamp()
    assert _jit.package_stamp() == before          # memoised, stable
    with open(tmp_path / "norm.py", "a") as fh:      # a file other than the kernel's own
        fh.write("\n# edited\n")
    assert _jit.package_stamp() != before
    (tmp_path / "new_helper.py").write_text("X = 1\n")
    changed = _jit.package_stamp()
    (tmp_path / "new_helper.py").unlink()
    assert _jit.package_stamp() not in (changed,)


def test_kernels_use_the_package_stamp():
    from yscv.kernels import gemm

    gemm.transpose_into(np.zeros((2, 3)), np.zeros((3, 2)))
    locator = gemm.transpose_into._cache._impl._locator
    assert locator.get_source_stamp() == _jit.package_stamp()


def test_uncached_jit_has_no_cache():
    fn = _jit.jit(cache=False)(lambda x: x + 1)
    assert fn(1) == 2
    assert type(fn._cache).__name__ == "NullCache"


def test_region_kernel_compiles_in_a_process_that_loads_others_from_the_cache(tmp_path):
    """Region kernels iterate the chunk generators of kernels/sync.py. A
    generator loaded from the on-disk cache has no implementation registered
    in the process, so a kernel compiled afterwards failed (KeyError in
    Numba's get_generator_impl); the generators are therefore never cached."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    forward = ("import numpy as np, yscv; g = yscv.Graph(); "
               "y = g.layer_norm(g.variable(np.ones((2048, 256)))); print('ok')")
    both = ("import numpy as np, yscv; g = yscv.Graph(); x = g.variable(np.ones((2048, 256))); "
            "y = g.layer_norm(x); g.backward(g.mean(y * y)); print('ok')")
    for code in (forward, both):
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, timeout=600)
        assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


# ------------------------------------------------ read-only installations
_PROBE = ("import warnings, numpy as np\n"
          "warnings.simplefilter('always')\n"
          "from yscv.kernels import gemm\n"
          "out = np.zeros((3, 2))\n"
          "gemm.transpose_into(np.arange(6.0).reshape(2, 3), out)\n"
          "assert (out == np.arange(6.0).reshape(2, 3).T).all()\n"
          "print(sum(gemm.transpose_into.stats.cache_hits.values()),"
          " sum(gemm.transpose_into.stats.cache_misses.values()))\n")


def _package_copy(tmp_path):
    """A copy of the yscv package whose ``__pycache__`` folders cannot be
    created (each is a plain file: unwritable even for root, who ignores
    file modes), as in a read-only installation."""
    import os
    import shutil

    src = os.path.dirname(_jit.KERNELS_DIR)
    dst = tmp_path / "site" / "yscv"
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "*.nbi", "*.nbc"))
    for d, _, _ in os.walk(dst):
        with open(os.path.join(d, "__pycache__"), "w") as fh:
            fh.write("not a directory\n")
    return dst.parent


def _probe(site, **env):
    import os
    import subprocess
    import sys

    e = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "PYTHONPATH")}
    e.update(PYTHONPATH=str(site), PYTHONDONTWRITEBYTECODE="1", **env)
    out = subprocess.run([sys.executable, "-c", _PROBE], env=e, capture_output=True, text=True,
                         timeout=600, cwd=str(site))
    assert out.returncode == 0, out.stderr[-3000:]
    hits, misses = map(int, out.stdout.split())
    return hits, misses, out.stderr


def test_read_only_package_caches_in_the_per_user_directory(tmp_path):
    site = _package_copy(tmp_path)
    xdg = tmp_path / "xdg"
    assert _probe(site, XDG_CACHE_HOME=str(xdg))[:2] == (0, 1)      # compiled, written
    cached = [p.name for p in (xdg / "yscv" / "numba").rglob("*") if p.suffix in (".nbi", ".nbc")]
    assert any(n.startswith("gemm.transpose_into") and n.endswith(".nbi") for n in cached)
    assert any(n.endswith(".nbc") for n in cached)
    assert _probe(site, XDG_CACHE_HOME=str(xdg))[:2] == (1, 0)      # loaded by a new process
    assert not any(p.suffix in (".nbi", ".nbc") for p in site.rglob("*"))


def test_no_writable_cache_compiles_and_warns_once(tmp_path):
    site = _package_copy(tmp_path)
    blocked = tmp_path / "a_file"
    blocked.write_text("")
    # XDG_CACHE_HOME and HOME below a plain file: no per-user directory either
    hits, misses, err = _probe(site, XDG_CACHE_HOME=str(blocked / "xdg"), HOME=str(blocked))
    assert (hits, misses) == (0, 1)
    assert err.count("no writable kernel cache") == 1, err[-3000:]


def test_kernel_cache_dir_follows_xdg_then_home(monkeypatch):
    from yscv import runtime

    monkeypatch.setitem(runtime._ENV, "XDG_CACHE_HOME", "/x/cache")
    assert runtime.kernel_cache_dir() == "/x/cache/yscv/numba"
    monkeypatch.setitem(runtime._ENV, "XDG_CACHE_HOME", "relative")    # not absolute: ignored
    monkeypatch.setitem(runtime._ENV, "HOME", "/home/u")
    assert runtime.kernel_cache_dir() == "/home/u/.cache/yscv/numba"


# ---------------------------------------------- the GC paused while compiling
@contextlib.contextmanager
def _gc_states():
    """Yields a list of ``(function name, gc.isenabled())`` noted at the start
    of every compile meanwhile (a listener registered after the module's own)."""
    seen = []

    class Listener(event.Listener):
        def on_start(self, ev):
            seen.append((ev.data["dispatcher"].py_func.__name__, gc.isenabled()))

        def on_end(self, ev):
            pass

    listener = Listener()
    event.register("numba:compile", listener)
    try:
        yield seen
    finally:
        event.unregister("numba:compile", listener)


def test_gc_is_paused_while_a_kernel_compiles_and_resumes_after():
    assert _jit._GC_PAUSE is not None and gc.isenabled()

    @_jit.jit(cache=False)
    def inner_sum(a):
        return a.sum()

    @_jit.jit(cache=False)
    def outer_kernel(a):
        return inner_sum(a) * 2.0

    @numba.njit(cache=False)
    def not_a_kernel(a):
        return a[0] + 1.0

    with _gc_states() as states:
        assert outer_kernel(np.ones(4)) == 8.0
        assert gc.isenabled()
        assert not_a_kernel(np.ones(2)) == 2.0
    seen = dict(states)
    assert seen["outer_kernel"] is False and seen["inner_sum"] is False  # nested too
    assert seen["not_a_kernel"] is True        # a function not made by jit: untouched
    assert gc.isenabled()
    assert _jit._GC_PAUSE.depth == 0 and not _jit._GC_PAUSE.paused


def test_gc_left_disabled_and_resumed_after_a_failed_compile():
    @_jit.jit(cache=False)
    def untypable(a):
        return a + "text"

    with pytest.raises(TypingError):
        untypable(np.ones(2))
    assert gc.isenabled()                      # resumed though the compile raised
    assert _jit._GC_PAUSE.depth == 0

    @_jit.jit(cache=False)
    def plus_one(a):
        return a + 1.0

    gc.disable()
    try:
        assert plus_one(1.0) == 2.0
        assert not gc.isenabled()              # the caller's choice is kept
    finally:
        gc.enable()
