"""The region helper pool (yscv/compute/regions.py) across ``fork`` and at
interpreter exit: a child forked while another thread holds one of the
pool's locks must neither hang in a region nor in the exit hook, and the
exit hook never blocks forever on a lock it cannot take."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import yscv.compute.regions as par

# A script, run in a fresh interpreter so that the forked child can exit
# *normally* (sys.exit runs the atexit hooks, where the hang was; os._exit
# would skip them). The parent makes its pool and compiles the kernel, a
# thread takes the lock named on the command line and holds it across
# os.fork(); the parent then releases it. The child runs a layer norm big
# enough to be split into regions, checks it against NumPy and exits. The
# parent waits for the child with a deadline and kills it on timeout.
_SCRIPT = textwrap.dedent("""
    import os, sys, threading, time
    import numpy as np
    import yscv
    import yscv.compute.regions as par

    which, deadline = sys.argv[1], float(sys.argv[2])
    x = np.random.default_rng(0).standard_normal((1024, 1024)).astype(np.float32)

    def layer_norm():
        g = yscv.Graph()
        return g.value(g.layer_norm(g.constant(x)))

    def reference():
        x64 = x.astype(np.float64)
        m = x64.mean(-1, keepdims=True)
        return (x64 - m) / np.sqrt(x64.var(-1, keepdims=True) + 1e-5)

    layer_norm()                                  # the parent's pool exists, kernel compiled
    pool = par._pool
    assert pool is not None and par.workers() >= 1, (pool, par.workers())
    lock = {"cond": pool.cond, "lock": pool.lock, "pool_lock": par._pool_lock}[which]
    held, release = threading.Event(), threading.Event()

    def holder():
        with lock:
            held.set()
            release.wait()

    t = threading.Thread(target=holder)
    t.start()
    held.wait()
    pid = os.fork()                               # the lock is held at this moment
    if pid == 0:
        ok = par._pool is None                    # the parent's pool is not the child's
        y = layer_norm()                          # a region: a new pool with new helpers
        ok = ok and par._pool is not None and par._pool is not pool
        ok = ok and np.allclose(y, reference(), rtol=1e-4, atol=1e-4)
        sys.exit(0 if ok else 2)                  # normal exit: the atexit hooks run
    release.set()
    t.join()
    end = time.monotonic() + deadline
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            print("child exit", os.waitstatus_to_exitcode(status))
            break
        if time.monotonic() > end:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            print("child TIMEOUT")
            break
        time.sleep(0.02)
""")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
@pytest.mark.parametrize("which", ["cond", "lock", "pool_lock"])
def test_fork_while_a_thread_holds_a_pool_lock(which):
    env = {**os.environ, "YSCV_NUM_THREADS": "2"}     # a pool with one helper on any machine
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
        + [p for p in [os.environ.get("PYTHONPATH")] if p])
    out = subprocess.run([sys.executable, "-c", _SCRIPT, which, "30"], env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "child exit 0", (out.stdout, out.stderr)


def _close_with_condition_held(pool) -> float:
    """``pool.close()`` while another thread holds the pool's condition;
    then the condition is released and every helper must stop. Returns the
    seconds ``close()`` took."""
    held, release = threading.Event(), threading.Event()

    def holder():
        with pool.cond:
            held.set()
            release.wait()

    t = threading.Thread(target=holder)
    t.start()
    held.wait()
    try:
        t0 = time.monotonic()
        pool.close()
        took = time.monotonic() - t0
    finally:
        release.set()
        t.join()
    for h in pool.threads:                       # once the lock is free they see `closing`
        h.join(timeout=10.0)
        assert not h.is_alive()
    return took


def test_close_never_blocks_on_a_lock_held_elsewhere(monkeypatch):
    """The exit hook gives up on the condition after a timeout (another
    thread holds it) instead of waiting forever; the helpers still stop."""
    monkeypatch.setattr(par, "CLOSE_TIMEOUT", 0.2)
    pool = par._Pool(1)
    assert _close_with_condition_held(pool) < 5.0
    assert pool.closing and pool.state[par.S.EXIT] == 1


def test_close_stops_a_helper_asleep_while_the_lock_is_held_elsewhere(monkeypatch):
    """A helper already asleep on the condition when close() cannot take it
    (so no notify reaches it) still stops: it wakes on its own within the
    timeout and sees ``closing``."""
    monkeypatch.setattr(par, "CLOSE_TIMEOUT", 0.2)
    pool = par._Pool(1)
    t0 = time.monotonic()
    while pool.sleeping == 0:                    # the helper has spun out and sleeps
        assert time.monotonic() - t0 < 10.0
        time.sleep(0.01)
    _close_with_condition_held(pool)


def test_close_in_a_forked_child_skips_the_parents_helpers(monkeypatch):
    """A pool made by another process (the parent, before fork) is not
    closed by this one: its threads do not exist here and its locks may be
    held forever."""
    pool = par._Pool(0)
    pool.cond.acquire()                          # as if held by a thread that is gone
    monkeypatch.setattr(pool, "pid", pool.pid + 1)
    try:
        t0 = time.monotonic()
        pool.close()
        assert time.monotonic() - t0 < 1.0
    finally:
        pool.cond.release()
