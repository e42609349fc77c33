"""Worker processes for :class:`yscv.data.DataLoader` (``num_workers > 0``).

The main process puts ``(batch_number, indices)`` tasks on one shared task
queue, at most ``prefetch`` ahead of the batch it is waiting for; workers
fetch and collate and put ``(batch_number, worker_id, ok, payload)`` on one
result queue. The main process hands batches out in batch-number order
(results that arrive early wait in a dict), so the batches and their order
are those of ``num_workers=0``.

No hang: the main process waits with a timeout and checks that every worker
is alive; a worker that died raises RuntimeError naming it and the batch.
Workers poll their queue with a timeout and exit when the parent is gone.
"""
from __future__ import annotations

import os
import queue
import traceback

import numpy as np

__all__ = ["WorkerPool"]

_POLL = 0.1


def _worker_loop(worker_id, dataset, fetch, task_q, result_q, parent_pid):
    while True:
        try:
            task = task_q.get(timeout=_POLL)
        except queue.Empty:
            if os.getppid() != parent_pid:  # parent gone: nobody will read results
                return
            continue
        if task is None:
            return
        b, indices = task
        try:
            result_q.put((b, worker_id, True, fetch(dataset, indices)))
        except Exception as exc:  # reported to the main process, which re-raises
            payload = (type(exc), str(exc), traceback.format_exc())
            try:
                result_q.put((b, worker_id, False, payload))
            except Exception:  # the exception type does not pickle
                result_q.put((b, worker_id, False, (None, str(exc), traceback.format_exc())))


class WorkerError(RuntimeError):
    """A worker's exception whose own type could not be rebuilt."""


def _reraise(b, indices, worker_id, payload):
    exc_type, text, tb = payload
    shown = [int(i) if isinstance(i, (int, np.integer)) else i for i in list(indices)[:8]]
    shown += ["..."] if len(indices) > 8 else []
    msg = (f"DataLoader: worker {worker_id} raised while loading batch {b} (samples "
           f"{shown}): {text}\nOriginal traceback in the worker:\n{tb}")
    exc = None
    if exc_type is not None:
        try:
            exc = exc_type(msg)
        except Exception:
            exc = None
    if exc is None or not isinstance(exc, BaseException):
        exc = WorkerError(msg)
    raise exc


class WorkerPool:
    """``num_workers`` processes loading the batches of one epoch.

    ``batches`` is the list of index lists of the batches still to load;
    their numbers start at ``first`` (the epoch's batch number, used in error
    messages). Iterate :meth:`results` to get them in order; call
    :meth:`shutdown` (always, in a ``finally``) to stop the workers.
    """

    def __init__(self, ctx, num_workers, dataset, fetch, batches, first, prefetch):
        self.batches = batches
        self.first = first
        self.prefetch = max(1, prefetch)
        self.task_q = ctx.Queue()
        self.result_q = ctx.Queue()
        self.workers = []
        parent = os.getpid()
        for w in range(num_workers):
            p = ctx.Process(target=_worker_loop, daemon=True, name=f"yscv-data-worker-{w}",
                            args=(w, dataset, fetch, self.task_q, self.result_q, parent))
            self.workers.append(p)
        try:
            for p in self.workers:
                p.start()
        except BaseException:  # e.g. an unpicklable dataset under "spawn"
            self.shutdown()
            raise

    def _check_alive(self, b):
        for w, p in enumerate(self.workers):
            if not p.is_alive():
                raise RuntimeError(f"DataLoader: worker {w} (pid {p.pid}) exited unexpectedly "
                                   f"with exit code {p.exitcode} while batch {b} was loading")

    def results(self):
        """Yield the collated batches in order."""
        sent = 0
        ready = {}
        for k in range(len(self.batches)):
            while sent < len(self.batches) and sent < k + self.prefetch:
                self.task_q.put((self.first + sent, self.batches[sent]))
                sent += 1
            b = self.first + k
            while b not in ready:
                try:
                    rb, w, ok, payload = self.result_q.get(timeout=_POLL)
                except queue.Empty:
                    self._check_alive(b)
                    continue
                ready[rb] = (w, ok, payload)
            w, ok, payload = ready.pop(b)
            if not ok:  # raised when due, so earlier batches are handed out first
                _reraise(b, self.batches[k], w, payload)
            yield payload

    def shutdown(self):
        """Stop every worker (sentinels, then terminate stragglers) and
        release the queues; safe to call twice."""
        workers, self.workers = self.workers, []
        if not workers:
            return
        try:  # tasks not yet taken are not worth loading
            while True:
                self.task_q.get_nowait()
        except (queue.Empty, OSError, EOFError, ValueError):
            pass
        for _ in workers:
            try:
                self.task_q.put(None)
            except Exception:
                break
        # drain results so that workers blocked on a full pipe can flush and exit
        for _ in range(20):
            if not any(p.is_alive() for p in workers):
                break
            try:
                while True:
                    self.result_q.get(timeout=0.05)
            except (queue.Empty, OSError, EOFError, ValueError):
                pass
        for p in workers:
            if p.pid is None:  # never started
                continue
            if p.is_alive():
                p.terminate()
            p.join(timeout=5)
        for q in (self.task_q, self.result_q):
            q.cancel_join_thread()
            q.close()
