"""The kernel cache is stamped with every file of yscv/kernels, so a kernel
that inlines a helper from another kernel module never runs stale code."""
from __future__ import annotations

import shutil

import numpy as np

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
