"""``import yscv`` is cheap: it compiles nothing and does not import numba."""
import subprocess
import sys


def _run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_import_does_not_load_numba():
    assert _run("import sys, yscv; print('numba' in sys.modules)") == "False"


def test_import_time_is_small():
    """The import's CPU time (all threads of the process), best of three:
    unlike wall time it does not grow when other processes hold the cores
    (a loaded host measured 0.6 s of wall time for an import that takes 0.2 s quiet)."""
    code = ("import time; t = time.process_time(); import yscv; "
            "print(time.process_time() - t)")
    best = min(float(_run(code)) for _ in range(3))
    assert best < 0.6, f"import yscv took {best:.3f} s of CPU time (~0.3 s on a quiet host)"


def test_every_public_name_resolves():
    """``from yscv import *`` works: each name of ``yscv.__all__`` (every
    error class included) is an attribute of the package."""
    import yscv

    missing = [name for name in yscv.__all__ if not hasattr(yscv, name)]
    assert missing == []
