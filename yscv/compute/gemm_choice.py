"""The GEMM chosen by measurement: per shape class, the fastest way this
machine computes a 2-d product, timed once and remembered on disk.

A ``*shape`` ``class*`` is the operands' dtype and layouts (``n``: C-contiguous,
``t``: the transpose of a C-contiguous array, ``g``: anything else), the
sizes ``M, K, N`` rounded up to powers of two, and NumPy's BLAS thread
count. On the first product of a class, `choose` times the
*candidates* below on operands of the product's own shapes and layouts
(random numbers, not the user's: all-zero data would hide rounding
differences), three interleaved rounds each, and keeps the fastest; a
candidate must beat the default by `MARGIN` to replace it, so
timing noise keeps the default. The choice is written to a small JSON file
beside the kernel cache (`choices_path`), under a key naming the CPU
model, its vector extensions, NumPy's BLAS and its kernels, NumPy and
yscv; later processes on the same machine read it instead of measuring.

Candidates (``name: what it runs``):

* ``blas``: ``np.dot`` on NumPy's BLAS threads;
* ``blas1``: ``np.dot`` on one BLAS thread;
* ``contig`` / ``contig1``: a transposed operand copied to C order first,
  then ``np.dot`` on the BLAS threads / on one thread (skinny products such
  as ``g @ w.T`` with ten columns: BLAS packs a transposed narrow operand
  slowly);
* ``tiles``: yscv's register-blocked float32 tiles (yscv/compute/gemm.py).

Which are timed depends on the policy (`yscv.runtime.set_gemm`):

* ``"auto"`` (the default) times the layouts (``blas`` against ``contig``,
  or their one-thread forms), keeping the fixed rule's thread count, and
  only candidates whose result has the same bits as the default's on the
  calibration operands (the same summation order): results never depend on
  what was measured.
* ``"fastest"`` times every candidate, both thread counts and the tiles
  included (compiled on first use), and may pick one that rounds
  differently (last bits: OpenBLAS's one-thread kernels sum some shapes in
  another order, the tiles always do), like
  ``torch.backends.cudnn.benchmark``; results then depend on the machine
  and on the measurement, within the tolerances of docs/ops/linalg.md.
  Which thread count wins depends on the load when it is measured.

The default candidate is ``blas``, except for products of
`BLAS_THREADED` up to
`SMALL_WORK` multiply-adds, where it is ``blas1``
and only one-thread candidates run: a woken OpenBLAS worker spins on the
second core for up to ~0.1 s and slows the kernels that follow (a cost a
product timed alone does not show; docs/ops/conv.md).
"""
from __future__ import annotations

import math
import os
import threading
import time

import numpy as np

from .. import runtime

#: a candidate replaces the default only if at least this much faster
MARGIN = 0.10
#: interleaved timing rounds per candidate (the minimum counts)
ROUNDS = 3
#: each timed call is repeated until it has run at least this long (seconds)
MIN_SECONDS = 2e-4
#: the choices file (one per cache directory; one section per machine key)
FILENAME = "yscv-gemm-choices.json"
_FORMAT = 1

_lock = threading.RLock()
_choices: dict | None = None      # class key -> candidate name, for this machine
_machine: str | None = None
_stats = {"calibrated": 0, "seconds": 0.0}
_fast: dict = {}                  # (shapes, strides, dtype, tier, threads, policy) -> function
_FAST_MAX = 4096


# ------------------------------------------------------------ candidates
def _one_thread(fn):
    """``fn`` with NumPy's OpenBLAS held at one thread (a counted hold: two
    threads doing this at once never restore the count under each other)."""
    def run(a, b):
        runtime.hold_one_blas_thread(True)
        try:
            return fn(a, b)
        finally:
            runtime.hold_one_blas_thread(False)
    return run


def _contig(a, b):
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)
    if not b.flags.c_contiguous:
        b = np.ascontiguousarray(b)
    return np.dot(a, b)


#: name -> function(a, b) computing a @ b; yscv/compute/gemm.py adds
#: ``"tiles"`` (its tile driver) with `register`
CANDIDATES = {
    "blas": np.dot,
    "blas1": _one_thread(np.dot),
    "contig": _contig,
    "contig1": _one_thread(_contig),
}


def register(name: str, fn) -> None:
    """Add a candidate (the module that owns its driver registers it, so
    this module imports none of them)."""
    CANDIDATES[name] = fn


# ------------------------------------------------------------- classes
def _layout(m: np.ndarray) -> str:
    if m.flags.c_contiguous:
        return "n"
    if m.T.flags.c_contiguous:
        return "t"
    return "g"


def _bucket(n: int) -> int:
    return max(0, (n - 1).bit_length())   # ceil(log2 n)


def class_key(a: np.ndarray, b: np.ndarray, one_thread_tier: bool) -> str:
    """The shape class of ``a @ b`` (see the module docstring)."""
    M, K = a.shape
    N = b.shape[1]
    return (f"{a.dtype.char}{_layout(a)}{_layout(b)} {_bucket(M)},{_bucket(K)},{_bucket(N)} "
            f"b{runtime.blas_threads() or 0}{'s' if one_thread_tier else ''}")


def _candidates(a, b, one_thread_tier: bool, policy: str) -> list:
    """Candidate names for this product, the default first. ``"auto"``
    varies the layout only: the BLAS thread count stays the fixed rule's,
    because which count wins depends on what else runs on the cores (a
    measurement taken under load would pin one thread for good)."""
    transposed = not (a.flags.c_contiguous and b.flags.c_contiguous)
    one = one_thread_tier and (runtime.blas_threads() or 1) > 1
    names = ["blas1", "contig1"] if one else ["blas", "contig"]
    if not transposed:
        names.pop()
    if policy == "fastest":
        if not one_thread_tier and (runtime.blas_threads() or 1) > 1:
            names += ["blas1", "contig1"] if transposed else ["blas1"]
        if a.dtype == np.float32 and b.dtype == np.float32:
            names.append("tiles")
    return names


# ------------------------------------------------------------ the file
def machine_key() -> str:
    """What a choice is valid for: CPU model and ISA, NumPy's BLAS and the
    kernels it runs, NumPy and yscv versions."""
    global _machine
    if _machine is None:
        from .._version import __version__
        cpu, blas = runtime.cpu_info(), runtime.blas_info()
        config = " ".join(blas["config"].split()[:2]) or "BLAS unknown"
        _machine = (f"{cpu['model']} [{cpu['isa']}]; {config} {blas['core']}; "
                    f"NumPy {np.__version__}; yscv {__version__}")
    return _machine


def choices_path() -> str | None:
    """The choices file beside the kernel cache: in ``NUMBA_CACHE_DIR`` when
    set, else ``yscv/kernels/__pycache__``, else the per-user
    `yscv.runtime.kernel_cache_dir`; the first whose folder exists or
    can be made and is writable. None when none is (choices then last for
    the process only)."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    places = [runtime.env("NUMBA_CACHE_DIR"), os.path.join(here, "kernels", "__pycache__"),
              runtime.kernel_cache_dir()]
    for d in places:
        if not d:
            continue
        try:
            os.makedirs(d, exist_ok=True)
        except OSError:
            continue
        if os.access(d, os.W_OK):
            return os.path.join(d, FILENAME)
    return None


def _read_file(path) -> dict:
    import json

    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("format") != _FORMAT:
        return {}
    machines = data.get("machines")
    return machines if isinstance(machines, dict) else {}


def _load() -> dict:
    global _choices
    if _choices is None:
        path = choices_path()
        section = _read_file(path).get(machine_key(), {}) if path else {}
        _choices = {k: v for k, v in section.items() if v in CANDIDATES}
    return _choices


def _save(key: str, name: str) -> None:
    """Add one choice to the file (read, merge, write to a temporary file,
    rename: concurrent processes never see half a file; a lost race loses
    at most the other process's newest choice, which it measures again)."""
    import json
    import tempfile

    path = choices_path()
    if path is None:
        return
    machines = _read_file(path)
    section = machines.setdefault(machine_key(), {})
    section[key] = name
    try:
        fd, tmp = tempfile.mkstemp(prefix=".gemm-", dir=os.path.dirname(path))
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"format": _FORMAT, "machines": machines}, f, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except (OSError, UnboundLocalError):
            pass


# ------------------------------------------------------------ measuring
def _operands(a, b):
    """Random operands with the shapes, dtypes and layouts of ``a`` and ``b``."""
    rng = np.random.default_rng(0)

    def like(m):
        if m.flags.c_contiguous:
            return rng.standard_normal(m.shape).astype(m.dtype)
        if m.T.flags.c_contiguous:
            return rng.standard_normal(m.shape[::-1]).astype(m.dtype).T
        big = rng.standard_normal((m.shape[0], 2 * m.shape[1])).astype(m.dtype)
        return big[:, ::2]
    return like(a), like(b)


def _time(fn, a, b, reps: int) -> float:
    t = time.perf_counter()
    for _ in range(reps):
        fn(a, b)
    return (time.perf_counter() - t) / reps


def calibrate(a, b, names: list) -> tuple:
    """``(name, seconds per call of each timed candidate)``: the fastest of
    ``names`` on operands shaped like ``a @ b`` (the first name is the
    default; the ``"auto"`` rule drops candidates whose bits differ from
    the default's before timing, see the module docstring)."""
    x, y = _operands(a, b)
    fns = {n: CANDIDATES[n] for n in names}
    ref = fns[names[0]](x, y)
    if runtime.get_gemm() != "fastest":
        fns = {n: f for n, f in fns.items() if n == names[0] or np.array_equal(f(x, y), ref)}
    t0 = time.perf_counter()
    fns[names[0]](x, y)
    once = max(time.perf_counter() - t0, 1e-7)
    reps = max(1, min(50, math.ceil(MIN_SECONDS / once)))
    best = dict.fromkeys(fns, math.inf)
    for _ in range(ROUNDS):
        for n, f in fns.items():
            best[n] = min(best[n], _time(f, x, y, reps))
    default = names[0]
    winner = min(best, key=best.get)
    if best[winner] > (1.0 - MARGIN) * best[default]:
        winner = default
    return winner, best


def choose(a: np.ndarray, b: np.ndarray, one_thread_tier: bool):
    """The candidate function for ``a @ b`` under the measured policies,
    calibrating its shape class on first use. Exact shapes and strides seen
    before are answered from a memo (~0.5 us instead of the class key's ~2)."""
    policy = runtime.get_gemm()
    fast = (a.shape, a.strides, b.shape, b.strides, a.dtype.num, one_thread_tier,
            runtime.blas_threads(), policy)
    fn = _fast.get(fast)
    if fn is not None:
        return fn
    fn = CANDIDATES[_choose_name(a, b, one_thread_tier, policy)]
    if len(_fast) >= _FAST_MAX:
        _fast.clear()
    _fast[fast] = fn
    return fn


def _choose_name(a, b, one_thread_tier: bool, policy: str) -> str:
    key = class_key(a, b, one_thread_tier)
    if policy == "fastest":
        key += " f"
    choices = _choices
    name = None if choices is None else choices.get(key)
    if name is None:
        # inside a parallel backward, alone first and the lock second: a
        # one-thread candidate runs alone (runtime.hold_one_blas_thread), and
        # another branch waiting here for the lock would wait for it forever
        alone = runtime.begin_alone()
        try:
            with _lock:  # the file is read under the lock too: every thread sees one dict
                choices = _load()
                name = choices.get(key)
                if name is None:
                    names = _candidates(a, b, one_thread_tier, policy)
                    if len(names) == 1:          # nothing to measure
                        name = choices[key] = names[0]
                    else:
                        t = time.perf_counter()
                        name, _ = calibrate(a, b, names)
                        _stats["calibrated"] += 1
                        _stats["seconds"] += time.perf_counter() - t
                        choices[key] = name
                        _save(key, name)
        finally:
            if alone:
                runtime.end_alone()
    return name


def choices() -> dict:
    """This machine's choices so far: ``{shape class: candidate}`` (read
    from the file on first use; see the module docstring for the keys)."""
    with _lock:
        return dict(_load())


def calibration_stats() -> tuple:
    """``(classes, seconds)`` this process calibrated (0 when every class
    came from the file)."""
    return _stats["calibrated"], _stats["seconds"]


def forget() -> None:
    """Drop this process's choices (the file stays; they are read again)."""
    global _choices
    with _lock:
        _choices = None
        _fast.clear()
