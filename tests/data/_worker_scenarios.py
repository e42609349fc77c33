"""Worker failures that used to hang the DataLoader, each run in this script
(a process of its own, started by tests/data/test_workers.py with a timeout,
so that a regression fails instead of hanging the test run).

    python tests/data/_worker_scenarios.py NAME [NAME ...]

prints one JSON line per scenario: the error raised (type, bases, message,
WorkerError fields), the worker processes left behind after it, and whether
the loader then iterates again with the batches of ``num_workers=0``.
A scenario that hangs dumps the threads' stacks and exits (faulthandler).
"""
from __future__ import annotations

import faulthandler
import json
import multiprocessing
import os
import signal
import sys
import threading
import time
import types

import numpy as np

from _datasets import BlockedAt, LambdaAt, LocalErrorAt, SlowDataset, SquareDataset, keep_samples
from yscv.data import DataLoader, TensorDataset

SCENARIO_TIMEOUT = 60


def _children_left() -> int:
    deadline = time.monotonic() + 5
    while multiprocessing.active_children() and time.monotonic() < deadline:
        time.sleep(0.05)
    return len(multiprocessing.active_children())


def _flat(batches):
    def flat(batch):
        if isinstance(batch, np.ndarray):
            return batch.tolist()
        return [flat(b) for b in batch] if isinstance(batch, (list, tuple)) else batch
    return [flat(b) for b in batches]


def _same_epochs(dataset, epochs, **kw):
    """The loader with 2 workers, then ``num_workers=0``, give the same batches."""
    par = DataLoader(dataset, num_workers=2, **kw)
    ser = DataLoader(dataset, **kw)
    return [_flat(par) for _ in range(epochs)] == [_flat(ser) for _ in range(epochs)]


def _error_report(loader, run):
    """Run ``run(loader)`` (expected to raise); describe the error and what is left."""
    try:
        out = run(loader)
    except Exception as exc:  # the report below checks its type
        report = {"type": type(exc).__name__,
                  "bases": [c.__name__ for c in type(exc).__mro__],
                  "message": str(exc),
                  "worker": getattr(exc, "worker", None), "batch": getattr(exc, "batch", None),
                  "original_type": getattr(exc, "original_type", None)}
    else:
        report = {"type": None, "result": repr(out)[:200]}
    report["children"] = _children_left()
    return report


def unpicklable_sample():
    ds = LambdaAt(12, at=5)
    loader = DataLoader(ds, batch_size=2, num_workers=2, collate_fn=keep_samples)
    got = []

    def run(loader):
        for batch in loader:
            got.append([int(s[1]) for s in batch])
    report = _error_report(loader, run)
    report["before"] = got
    ds.at = None  # the loader iterates again (the next epoch), as without workers
    report["again"] = [[int(s[1]) for s in b] for b in loader] == [[2 * k, 2 * k + 1]
                                                                   for k in range(6)]
    return report


def local_exception():
    ds = LocalErrorAt(12, at=7)
    loader = DataLoader(ds, batch_size=3, num_workers=2)
    report = _error_report(loader, list)
    ds.at = None  # the same loader iterates again, as without workers
    report["again"] = _flat(loader) == _flat(DataLoader(ds, batch_size=3))
    return report


def killed_worker():
    ds = SlowDataset(60, 0.01)
    loader = DataLoader(ds, batch_size=2, num_workers=2)

    def run(loader):
        for k, _ in enumerate(loader):
            if k == 2:
                os.kill(multiprocessing.active_children()[0].pid, signal.SIGKILL)
    report = _error_report(loader, run)
    report["again"] = _flat(loader) == _flat(DataLoader(ds, batch_size=2))
    return report


def unimportable_dataset():
    # a class the main process finds (in sys.modules) but a new process cannot import
    module = types.ModuleType("yscv_test_phantom")
    phantom = type("Phantom", (SquareDataset,), {"__module__": module.__name__})
    module.Phantom = phantom
    sys.modules[module.__name__] = module
    loader = DataLoader(phantom(10), batch_size=2, num_workers=2)
    return _error_report(loader, list)


def unpicklable_key():
    keys = [0, 1, 2, lambda: 3]
    loader = DataLoader(SquareDataset(10), batch_size=2, sampler=keys, num_workers=2)
    return _error_report(loader, list)


def openblas_thread():
    """A thread runs large matrix products on OpenBLAS's threads while the
    loader starts its workers, epoch after epoch: no deadlock, and BLAS still
    works in the main process afterwards."""
    stop = threading.Event()
    done = [0]
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((700, 700)), rng.standard_normal((700, 700))

    def products():
        while not stop.is_set():
            a @ b
            done[0] += 1
    thread = threading.Thread(target=products, daemon=True)
    thread.start()
    while done[0] == 0:
        time.sleep(0.01)
    ds = TensorDataset(np.arange(96, dtype=np.float64).reshape(48, 2), np.arange(48))
    same = _same_epochs(ds, 4, batch_size=6, shuffle=True, seed=1)
    before = done[0]
    deadline = time.monotonic() + 20
    while done[0] < before + 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    stop.set()
    thread.join(timeout=20)
    c = a[:64, :64] @ b[:64, :64]
    return {"same": same, "products_after": done[0] - before, "thread_alive": thread.is_alive(),
            "blas_ok": bool(np.allclose(c, np.einsum("ij,jk->ik", a[:64, :64], b[:64, :64]))),
            "children": _children_left()}


def blocked_getitem():
    """``__getitem__`` of sample 5 never returns: with ``timeout=1`` the batch
    holding it raises after about a second (the batches before it are handed
    out), the workers are stopped; a dataset that blocks on every sample times
    out at its first batch. Without the sample that blocks the loader iterates
    again."""
    ds = BlockedAt(12, at=5)
    loader = DataLoader(ds, batch_size=2, num_workers=2, timeout=1)
    before = []

    def run(loader):
        for batch in loader:
            before.append(batch.tolist())
    start = time.monotonic()
    report = _error_report(loader, run)
    report["seconds"] = time.monotonic() - start
    report["before"] = before
    every = _error_report(DataLoader(BlockedAt(4), batch_size=2, num_workers=1, timeout=0.5),
                          list)
    report["every"] = [every["type"], every["message"], every["batch"], every["children"]]
    ds.at = -1  # no sample blocks now
    report["again"] = _flat(loader) == _flat(DataLoader(BlockedAt(12, at=-1), batch_size=2))
    return report


SCENARIOS = {f.__name__: f for f in (unpicklable_sample, local_exception, killed_worker,
                                     unimportable_dataset, unpicklable_key, openblas_thread,
                                     blocked_getitem)}

if __name__ == "__main__":
    for name in sys.argv[1:]:
        faulthandler.dump_traceback_later(SCENARIO_TIMEOUT, exit=True)
        report = SCENARIOS[name]()
        faulthandler.cancel_dump_traceback_later()
        print(json.dumps({"scenario": name, **report}), flush=True)
