"""Worker processes for `yscv.data.DataLoader` (``num_workers > 0``).

Channels:

- tasks: one task queue shared by the workers, holding ``(batch_number,
  indices)`` pickled by the main process itself (a key that does not pickle
  raises there, instead of being dropped by the queue's feeder thread); at
  most ``prefetch`` tasks ahead of the batch the main process waits for.
- results: one pipe per worker, written by the worker's own thread: a small
  header ``(batch_number, kind)`` then the payload, which the worker pickled
  itself. A batch that does not pickle, or an exception, is therefore caught
  in the worker and sent as a description (its type pickled when it can be,
  its qualified name, message and formatted traceback), never dropped.

The main process hands batches out in batch-number order (results that
arrive early wait in a dict), so the batches and their order are those of
``num_workers=0``.

No hang: the main process waits on the pipes and the workers' sentinels
with a timeout, and (``timeout > 0``) gives up on a batch that has not
arrived within ``timeout`` seconds of starting to wait for it. A worker that died (killed, crashed, ``os._exit``) raises
`WorkerError` naming it and the batch waited for. A
pipe's write end lives only in its worker, so a worker that dies part-way
through a message gives end-of-file, not a read that blocks for ever.
Workers poll the task queue with a timeout and exit when their parent is gone.
"""
from __future__ import annotations

import io
import multiprocessing
import pickle
import queue
import signal
import struct
import time
import traceback
from multiprocessing import connection as _connection
from multiprocessing.reduction import ForkingPickler

import numpy as np

from .. import runtime as _runtime
from ..errors import WorkerError

__all__ = ["WorkerPool", "WorkerError", "pack_job"]

_POLL = 0.1
_HEADER = struct.Struct("<qB")     # batch number (-1: start-up), kind
_OK, _RAISED, _UNPICKLABLE, _START_FAILED = range(4)


def _dumps(obj) -> memoryview:
    return ForkingPickler.dumps(obj)  # the pickler multiprocessing's queues use


def _describe(exc: BaseException) -> tuple:
    """A picklable description of ``exc``: (pickled type or None, type name,
    message, formatted traceback)."""
    cls = type(exc)
    name = cls.__qualname__
    if cls.__module__ != "builtins":
        name = f"{cls.__module__}.{name}"
    try:
        type_blob = bytes(_dumps(cls))
    except Exception:  # a class defined inside a function, ...
        type_blob = None
    try:
        text = str(exc)
    except Exception:
        text = f"<{name} whose str() failed>"
    return type_blob, name, text, traceback.format_exc()


def _send(conn, b: int, kind: int, payload) -> None:
    conn.send_bytes(_HEADER.pack(b, kind))
    conn.send_bytes(payload)


def _worker_loop(worker_id, job, task_q, conn):
    # Ctrl-C reaches the whole process group: the main process raises
    # KeyboardInterrupt and stops the workers; they need not print tracebacks.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = multiprocessing.parent_process()
    try:
        try:
            dataset, fetch = pickle.loads(job) if isinstance(job, (bytes, bytearray)) else job
        except Exception as exc:  # a class or function not importable here
            _send(conn, -1, _START_FAILED, _dumps(_describe(exc)))
            return
        del job
        while True:
            try:
                task = task_q.get(timeout=_POLL)
            except queue.Empty:
                if parent is not None and not parent.is_alive():
                    return  # nobody will read the results
                continue
            if task is None:
                return
            b, indices = pickle.loads(task)
            try:
                batch = fetch(dataset, indices)
            except Exception as exc:
                kind, payload = _RAISED, _dumps(_describe(exc))
            else:
                try:
                    kind, payload = _OK, _dumps(batch)
                except Exception as exc:
                    kind, payload = _UNPICKLABLE, _dumps(_describe(exc))
                del batch
            _send(conn, b, kind, payload)
            del payload
    except (BrokenPipeError, ConnectionResetError):  # the main process stopped reading
        return
    finally:
        conn.close()


def pack_job(ctx, dataset, fetch, collate_fn, num_workers):
    """What the workers get to rebuild ``(dataset, fetch)``: the objects
    themselves under "fork" (inherited), else their pickle, made here so that
    an unpicklable dataset or collate_fn raises TypeError at once, saying
    which and how to fix it."""
    method = ctx.get_start_method()
    if method == "fork":
        return dataset, fetch
    try:
        buf = io.BytesIO()
        ForkingPickler(buf).dump((dataset, fetch))
        return buf.getvalue()
    except Exception as exc:
        try:
            _dumps(dataset)
            culprit = f"the collate_fn {getattr(collate_fn, '__qualname__', collate_fn)!r}"
        except Exception:
            culprit = f"the dataset (a {type(dataset).__qualname__})"
        raise TypeError(
            f"DataLoader: with num_workers={num_workers} the worker processes start with the "
            f"{method!r} method, which sends them the dataset and collate_fn by pickling, and "
            f"{culprit} does not pickle ({type(exc).__name__}: {exc}). Define dataset classes "
            f"and collate functions at the top level of a module (not lambdas, nor functions "
            f"or classes defined inside a function), keep unpicklable things (open files, "
            f"locks, connections) out of the dataset or open them lazily in __getitem__, or "
            f"load in the main process with num_workers=0.") from exc


def _samples(indices) -> str:
    shown = [int(i) if isinstance(i, (int, np.integer)) else i for i in list(indices)[:8]]
    return str(shown + ["..."] if len(indices) > 8 else shown)


def _error(b, indices, w, kind, blob):
    """The exception to raise in the main process for a failed batch."""
    try:
        type_blob, name, text, tb = pickle.loads(blob)
    except Exception as exc:
        return WorkerError(f"DataLoader: the error report of worker {w} for batch {b} could "
                           f"not be read ({type(exc).__name__}: {exc})", worker=w, batch=b)
    if kind == _START_FAILED:
        return WorkerError(
            f"DataLoader: worker {w} could not rebuild the dataset and collate_fn it was sent "
            f"({name}: {text}). Their classes and functions must be importable by name in a "
            f"new process: define them in a module, or at the top level of the script (which "
            f"needs an `if __name__ == \"__main__\":` guard), not in an interactive interpreter or "
            f"inside a function.\nTraceback in the worker:\n{tb}", worker=w, original_type=name)
    where = f"batch {b} (samples {_samples(indices)})"
    if kind == _UNPICKLABLE:
        return WorkerError(
            f"DataLoader: worker {w} could not send {where} to the main process: the batch "
            f"does not pickle ({name}: {text}). With num_workers > 0 a batch must be "
            f"picklable: arrays, numbers, strings and tuples / lists / dicts of them, not "
            f"lambdas, objects of local classes, open files or locks.\nTraceback in the "
            f"worker:\n{tb}", worker=w, batch=b, original_type=name)
    msg = (f"DataLoader: worker {w} raised {name} while loading {where}: {text}\n"
           f"Original traceback in the worker:\n{tb}")
    exc = None
    if type_blob is not None:  # the same type when it can be rebuilt (as PyTorch)
        try:
            exc_type = pickle.loads(type_blob)
            if isinstance(exc_type, type) and issubclass(exc_type, Exception):
                exc = exc_type(msg)
        except Exception:
            exc = None
    return exc if exc is not None else WorkerError(msg, worker=w, batch=b, original_type=name)


_STARTUP_HINT = ("A worker started with \"forkserver\" or \"spawn\" imports the main script "
                 "first: the script must guard its main code with `if __name__ == "
                 "\"__main__\":`, and code read from stdin cannot start workers that way "
                 "(multiprocessing_context=\"fork\" can, if no other thread runs NumPy).")


def _exit_text(p) -> str:
    code = p.exitcode
    text = f"exit code {code}"
    if code is not None and code < 0:
        try:
            text += f" (killed by {signal.Signals(-code).name})"
        except ValueError:
            pass
    return text


class WorkerPool:
    """``num_workers`` processes loading the batches of one epoch.

    ``job`` is `pack_job`'s result. ``batches`` is the list of index
    lists of the batches still to load; their numbers start at ``first``
    (the epoch's batch number, used in error messages). ``timeout`` is the
    seconds to wait for one batch (0 or infinity: for ever; PyTorch's
    ``DataLoader(timeout=)``). Iterate ``results()`` to get them in order;
    call ``shutdown()`` (always, in a ``finally``) to stop the workers.
    """

    def __init__(self, ctx, num_workers, job, batches, first, prefetch, timeout=0.0):
        if getattr(multiprocessing.current_process(), "_inheriting", False):
            # this process is itself a new worker importing an unguarded main
            # script: fail before any queue exists (a queue's semaphores left by
            # a failed start made multiprocessing's resource tracker warn)
            raise WorkerError(
                f"DataLoader: this process is a worker that is still importing the main "
                f"script, and the script starts {num_workers} workers of its own. "
                f"{_STARTUP_HINT}")
        self.batches = batches
        self.first = first
        self.prefetch = max(1, prefetch)
        self.timeout = float(timeout)
        self.workers = []
        self.conns = []
        self._eof = set()   # workers whose pipe reached end-of-file
        if ctx.get_start_method() == "forkserver":
            _runtime.add_forkserver_preload("numpy", "yscv.data")
        self.task_q = ctx.Queue()
        try:
            for w in range(num_workers):
                reader, writer = ctx.Pipe(duplex=False)
                p = ctx.Process(target=_worker_loop, daemon=True, name=f"yscv-data-worker-{w}",
                                args=(w, job, self.task_q, writer))
                self.workers.append(p)
                self.conns.append(reader)
                try:
                    p.start()
                except OSError as exc:  # e.g. the new process died while being sent its job
                    raise WorkerError(
                        f"DataLoader: worker {w} could not be started with the "
                        f"{ctx.get_start_method()!r} method ({type(exc).__name__}: {exc}); its "
                        f"traceback, if any, is on stderr. {_STARTUP_HINT}", worker=w) from exc
                finally:
                    writer.close()  # the write end lives in the worker only
        except BaseException:
            self.shutdown()
            raise

    # ------------------------------------------------------------ receiving
    def _drain(self, w, ready) -> None:
        """Read every message worker ``w`` has sent so far into ``ready``."""
        conn = self.conns[w]
        try:
            while w not in self._eof and conn.poll(0):
                b, kind = _HEADER.unpack(conn.recv_bytes())
                payload = conn.recv_bytes()
                if kind == _START_FAILED:
                    raise _error(None, (), w, kind, payload)
                ready[b] = (w, kind, payload)
        except (EOFError, OSError):  # the worker is gone (perhaps part-way through a message)
            self._eof.add(w)

    def _wait(self, ready, b, poll=_POLL) -> None:
        """Wait (at most ``poll`` seconds) for results; raise if a worker is
        gone and batch ``b`` has not arrived."""
        live = [c for w, c in enumerate(self.conns) if w not in self._eof]
        hit = set(_connection.wait(live + [p.sentinel for p in self.workers], timeout=poll))
        for w, c in enumerate(self.conns):
            if c in hit:
                self._drain(w, ready)
        if b in ready:
            return
        for w, p in enumerate(self.workers):
            if w in self._eof or p.exitcode is not None:
                self._drain(w, ready)  # what it sent before it died
                if b in ready:
                    return
                p.join(timeout=1)
                hint = "killed, crashed, or os._exit in the dataset?"
                if p.exitcode == 1:  # Python's exit code for an uncaught exception
                    hint = f"its traceback is on stderr. {_STARTUP_HINT}"
                raise WorkerError(f"DataLoader: worker {w} (pid {p.pid}) exited unexpectedly "
                                  f"with {_exit_text(p)} while batch {b} was loading ({hint})",
                                  worker=w, batch=b)

    def _task(self, k) -> bytes:
        b = self.first + k
        try:
            return pickle.dumps((b, self.batches[k]))
        except Exception as exc:
            raise TypeError(f"DataLoader: the keys of batch {b} do not pickle ({exc}); with "
                            f"num_workers > 0 the sampler's keys must be picklable") from exc

    def results(self):
        """Yield the collated batches in order."""
        sent = 0
        ready = {}
        for k in range(len(self.batches)):
            while sent < len(self.batches) and sent < k + self.prefetch:
                self.task_q.put(self._task(sent))
                sent += 1
            b = self.first + k
            deadline = None
            if 0 < self.timeout < float("inf"):
                deadline = time.monotonic() + self.timeout
            while b not in ready:
                poll = _POLL
                if deadline is not None:
                    poll = deadline - time.monotonic()
                    if poll <= 0:
                        raise self._timed_out(k)
                    poll = min(poll, _POLL)
                self._wait(ready, b, poll)
            w, kind, payload = ready.pop(b)
            if kind != _OK:  # raised when due, so earlier batches are handed out first
                raise _error(b, self.batches[k], w, kind, payload)
            try:
                batch = pickle.loads(payload)
            except Exception as exc:
                raise WorkerError(f"DataLoader: batch {b} (samples "
                                  f"{_samples(self.batches[k])}) from worker {w} could not be "
                                  f"unpickled in the main process ({type(exc).__name__}: "
                                  f"{exc})", worker=w, batch=b) from exc
            del payload
            yield batch

    def _timed_out(self, k) -> WorkerError:
        b = self.first + k
        return WorkerError(
            f"DataLoader timed out after {self.timeout} seconds waiting for batch {b} "
            f"(samples {_samples(self.batches[k])}) from the worker processes (timeout="
            f"{self.timeout}); a __getitem__ or collate_fn that blocks, or loading slower "
            f"than the timeout allows? The workers are stopped.", batch=b)

    # ------------------------------------------------------------ stopping
    def shutdown(self):
        """Stop every worker (sentinels, then terminate, then kill the
        stragglers), join them and release the pipes and the queue; safe to
        call twice."""
        workers, self.workers = self.workers, []
        conns, self.conns = self.conns, []
        if workers:
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
            started = [p for p in workers if p.pid is not None]
            # read (and drop) results so that workers blocked on a full pipe can exit
            for _ in range(20):
                alive = [p for p in started if p.exitcode is None]
                if not alive:
                    break
                open_conns = [c for c in conns if not c.closed]
                for c in _connection.wait(open_conns + [p.sentinel for p in alive],
                                          timeout=0.05):
                    if c in open_conns:
                        try:
                            c.recv_bytes()
                        except (EOFError, OSError):
                            c.close()
            for p in started:
                if p.exitcode is None:
                    p.terminate()
                p.join(timeout=5)
                if p.exitcode is None:
                    p.kill()
                    p.join(timeout=5)
        for c in conns:
            c.close()
        q = getattr(self, "task_q", None)
        if q is not None:
            q.cancel_join_thread()
            q.close()
