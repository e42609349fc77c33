"""Bounded collectives: wait for a non-blocking MPI request with a deadline,
and on a timeout find out which ranks did not arrive.

Every collective of `yscv.distributed` is started non-blocking
(``Iallreduce``, ``Ibcast``, ``Iallgather``, ``Ibarrier``) and completed by
`Watch.wait`, which polls ``Test``:

- first it spins for a tenth of the timeout (at most ``SPIN_S``), yielding
  the core between tests (``sched_yield``: on a loaded machine the rank it
  waits for gets to run, as MPICH's blocking wait allows); a collective
  whose ranks arrive within that time completes here, as fast as the
  blocking call;
- then it sleeps between tests (50 µs doubling up to 1 ms: a rank waiting for
  a slower one leaves the core to it) and answers the arrival queries of
  other ranks (below);
- at the deadline (``dist.init(timeout=...)``) it asks every other rank,
  with point-to-point messages on a duplicate of ``COMM_WORLD`` (never on the
  stuck collective), which collective it is waiting in. A rank waiting in a
  collective answers within a millisecond; a rank that exited, crashed or
  is still computing elsewhere does not answer within ``grace`` seconds and
  is named as missing. Then `yscv.DistributedError` is raised.

The failed collective's request is never completed, so the world is left
unusable: later collectives raise at once, and the job should end (an
uncaught error does: ``python -m mpi4py`` aborts every rank).
"""
from __future__ import annotations

import os
import time

import numpy as np

from ..errors import DistributedError

SPIN_S = 1.0           # spin up to this long (a tenth of the timeout) before sleeping
_MAX_SLEEP = 1e-3
_QUERY, _ANSWER = 7301, 7302
_yield = getattr(os, "sched_yield", lambda: time.sleep(0))
_MSG = 96              # bytes: int64 asked-about seq, int64 own seq, then the name (utf-8)


def _message(seq_asked: int, seq_own: int, name: str) -> np.ndarray:
    buf = np.zeros(_MSG, dtype=np.uint8)
    buf[:16] = np.frombuffer(np.array([seq_asked, seq_own], dtype="<i8").tobytes(), np.uint8)
    raw = name.encode("utf-8", "replace")[:_MSG - 16]
    buf[16:16 + len(raw)] = np.frombuffer(raw, dtype=np.uint8)
    return buf


def _decode(buf: np.ndarray):
    asked, own = np.frombuffer(buf[:16].tobytes(), dtype="<i8").tolist()
    name = buf[16:].tobytes().rstrip(b"\0").decode("utf-8", "replace")
    return int(asked), int(own), name


class Watch:
    """The deadline machinery of one world (built by ``dist.init``)."""

    def __init__(self, MPI, ctl, rank: int, size: int):
        self.MPI, self.ctl, self.rank, self.size = MPI, ctl, rank, size
        self._sends = []   # (request, buffer): kept alive until complete
        self.broken = None  # the message of the error that broke the world

    # ------------------------------------------------------------ waiting
    def wait(self, req, name: str, seq: int, timeout) -> None:
        """Complete ``req`` (collective ``name``, this rank's number ``seq``)
        or raise `DistributedError` after ``timeout`` seconds."""
        if timeout is None:
            req.Wait()
            return
        if req.Test():
            return
        now = time.perf_counter()
        deadline = now + timeout
        spin_until = now + min(SPIN_S, timeout / 10)
        while time.perf_counter() < spin_until:
            if req.Test():
                return
            _yield()   # a loaded machine: let the rank we wait for run
        delay = 5e-5
        heard: dict = {}   # ranks that asked us meanwhile: they wait too
        while True:
            if req.Test():
                return
            self._answer_queries(name, seq, heard)
            now = time.perf_counter()
            if now >= deadline:
                break
            time.sleep(min(delay, deadline - now))
            delay = min(2 * delay, _MAX_SLEEP)
        self._fail(name, seq, timeout, heard)

    def _send(self, buf: np.ndarray, dest: int, tag: int) -> None:
        self._sends = [(r, b) for r, b in self._sends if not r.Test()]
        self._sends.append((self.ctl.Isend(buf, dest=dest, tag=tag), buf))

    def _answer_queries(self, name: str, seq: int, heard=None) -> None:
        """Answer every pending "where are you?" with (their seq, my seq, my
        collective); a query is itself news that its sender is waiting
        (recorded in ``heard``: rank -> (its seq, its collective))."""
        MPI = self.MPI
        status = MPI.Status()
        while self.ctl.Iprobe(source=MPI.ANY_SOURCE, tag=_QUERY, status=status):
            src = status.Get_source()
            buf = np.empty(_MSG, dtype=np.uint8)
            self.ctl.Recv(buf, source=src, tag=_QUERY)
            asked, own, their = _decode(buf)
            if heard is not None:
                heard[src] = (own, their)
            self._send(_message(asked, seq, name), src, _ANSWER)

    # ------------------------------------------------------------ failing
    def _fail(self, name: str, seq: int, timeout: float, heard: dict) -> None:
        heard = self._who_is_waiting(name, seq, min(1.0, max(0.1, timeout / 10)), heard)
        others = [r for r in range(self.size) if r != self.rank]
        missing = [r for r in others if heard.get(r) != (seq, name)]
        elsewhere = [f"rank {r} is waiting in {heard[r][1]} (its collective #{heard[r][0]})"
                     for r in missing if r in heard]
        where = ("; " + "; ".join(elsewhere)) if elsewhere else ""
        message = (f"{name}: rank {self.rank} waited {timeout:g} s (dist.init(timeout="
                   f"{timeout:g})) in its collective #{seq}, and rank(s) {missing} of "
                   f"{self.size} did not arrive{where}. A rank that exited, crashed, or ran "
                   "fewer batches or other collectives than the others causes this (give "
                   "every rank the same number of steps: DistributedSampler pads the data "
                   "to that end). The world is unusable now: end the job.")
        self.broken = message
        raise DistributedError(message, collective=name, missing_ranks=missing,
                               rank=self.rank, op=name)

    def _who_is_waiting(self, name: str, seq: int, grace: float, heard: dict) -> dict:
        """Ask every other rank where it waits; ``heard`` ({rank: (its seq, its
        collective)}) completed with those that answer (or ask) within
        ``grace`` seconds."""
        for r in range(self.size):
            if r != self.rank:
                self._send(_message(seq, seq, name), r, _QUERY)
        heard = dict(heard)
        MPI = self.MPI
        status = MPI.Status()
        end = time.perf_counter() + grace
        while len(heard) < self.size - 1 and time.perf_counter() < end:
            self._answer_queries(name, seq, heard)
            while self.ctl.Iprobe(source=MPI.ANY_SOURCE, tag=_ANSWER, status=status):
                src = status.Get_source()
                buf = np.empty(_MSG, dtype=np.uint8)
                self.ctl.Recv(buf, source=src, tag=_ANSWER)
                asked, own, their = _decode(buf)
                if asked == seq:   # not a late answer to an older query
                    heard[src] = (own, their)
            time.sleep(1e-3)
        return heard

    def check_usable(self, name: str) -> None:
        if self.broken is not None:
            raise DistributedError(f"{name}: this world is unusable since an earlier collective "
                                   f"failed ({self.broken.split('. ')[0]})", collective=name,
                                   rank=self.rank, op=name)
