"""Launch a script under ``mpiexec -n N python -m mpi4py`` (the venv's mpiexec,
next to sys.executable) with a timeout; used by the tests in this folder."""
from __future__ import annotations

import importlib.util
import os
import re
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPTS = pathlib.Path(__file__).resolve().parent / "scripts"
MPIEXEC = pathlib.Path(sys.executable).parent / "mpiexec"
EXAMPLE_TIMEOUT = 240.0
HAVE_MPI4PY = importlib.util.find_spec("mpi4py") is not None   # never imported here (torch)

needs_mpi = pytest.mark.skipif(
    not HAVE_MPI4PY, reason='mpi4py is not installed (pip install -e ".[mpi]"); the '
                            'multi-process tests need it')


def mpiexec(script, n: int, *args, timeout: float = 120.0, env=None) -> subprocess.CompletedProcess:
    """Run ``script`` (a name in scripts/ or a path) on ``n`` ranks; returns the
    finished process (stdout/stderr as text). Fails the test on a timeout."""
    if not MPIEXEC.exists():
        pytest.fail(f"mpi4py is installed but {MPIEXEC} is missing: install the mpich wheel "
                    '(pip install -e ".[mpi]")')
    path = pathlib.Path(script)
    if not path.is_absolute():
        path = SCRIPTS / script
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = str(ROOT) + os.pathsep + full_env.get("PYTHONPATH", "")
    full_env.setdefault("PYTHONUNBUFFERED", "1")
    full_env.update(env or {})
    cmd = [str(MPIEXEC), "-n", str(n), sys.executable, "-m", "mpi4py", str(path),
           *map(str, args)]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              env=full_env, cwd=str(ROOT))
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{' '.join(cmd)} did not finish in {timeout} s (a hang?)\n"
                    f"stdout: {exc.stdout}\nstderr: {exc.stderr}")


def ok(proc: subprocess.CompletedProcess) -> str:
    """stdout of a run that must have succeeded (its output in the failure message)."""
    assert proc.returncode == 0, (f"exit {proc.returncode}\nstdout:\n{proc.stdout}\n"
                                  f"stderr:\n{proc.stderr}")
    return proc.stdout


def tagged(out: str, tag: str) -> list:
    """The ``tag word word ...`` records in ``out``, as "word word ..." strings,
    sorted. Found by pattern, not by line: the ranks' lines can interleave in
    mpiexec's output (a print is two writes: the text, then the newline)."""
    return sorted(" ".join(w for w in m if w) for m in re.findall(
        tag + r" (\d+) (\d+|[A-Za-z]+)(?: (True|False))?", out))
