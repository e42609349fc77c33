"""OpenBLAS's thread count, changed only while no other backward node runs.

Why. OpenBLAS's thread count is one number for the whole process, read by
each product when it starts, and the bits of a product can depend on it:
with OpenBLAS's AVX2 (Haswell) kernels a float32 ``64x256 @ 256x256`` gives
other last bits on one thread than on two (the threads split the result
into other blocks, and the kernels' edge blocks sum in another order;
AVX-512 kernels happen not to). The parallel backward
(yscv/engine/walk_parallel.py) therefore leaves the count as the serial walk has
it, and the only change of it during a walk, the one-thread hold of the
products below ``SMALL_WORK`` (yscv/compute/gemm.py,
``runtime.hold_one_blas_thread``), must not overlap a product of another
branch: that product would start on one thread where the serial walk runs
it on the count.

How. While a parallel walk has helper threads (`BlasGate.open`),
every backward rule it runs is a *node* (`BlasGate.enter` /
`BlasGate.leave`), and a hold that lowers the count from inside a node
is *exclusive* (`BlasGate.begin_exclusive`): it waits until no other
node runs, and nodes wait to start until it is over. Two nodes asking at
once take turns (each gives up its own place while it waits, so neither
waits for the other). Outside a walk, or on a thread that runs no node,
every call here returns at once and nothing is serialized.
"""
from __future__ import annotations

import threading

__all__ = ["BlasGate", "GATE"]


class BlasGate:
    """Counts the walk nodes running now and lets one of them at a time run
    alone (see the module docstring)."""

    def __init__(self):
        self._cond = threading.Condition(threading.Lock())
        self._walks = 0          # parallel walks with helpers, now
        self._running = 0        # nodes running now, outside the exclusive one
        self._owner = None       # the thread running alone, or None
        self._depth = 0          # its nested exclusive sections
        self._local = threading.local()   # .nodes: nodes this thread is inside

    def open(self, on: bool) -> None:
        """A parallel walk starts (``True``) or stops (``False``) using threads."""
        with self._cond:
            self._walks += 1 if on else -1

    def enter(self) -> None:
        """The calling thread starts a node (waits while one runs alone)."""
        with self._cond:
            while self._owner is not None:
                self._cond.wait()
            self._running += 1
        self._local.nodes = getattr(self._local, "nodes", 0) + 1

    def leave(self) -> None:
        """The calling thread's node is done."""
        self._local.nodes -= 1
        with self._cond:
            self._running -= 1
            self._cond.notify_all()

    def in_node(self) -> bool:
        """Whether the calling thread runs a node of a walk using threads now."""
        return bool(self._walks) and getattr(self._local, "nodes", 0) > 0

    def begin_exclusive(self) -> bool:
        """From inside a node: wait until no other node runs, then run alone
        until `end_exclusive`; True. Outside a node (or with no walk
        using threads): False at once, nothing to end."""
        if not self.in_node():
            return False
        me = threading.get_ident()
        with self._cond:
            if self._owner == me:
                self._depth += 1
                return True
            self._running -= 1          # give up this node's place while waiting
            self._cond.notify_all()
            while self._owner is not None or self._running > 0:
                self._cond.wait()
            self._owner, self._depth = me, 1
        return True

    def end_exclusive(self) -> None:
        """End the calling thread's exclusive section (one level of it)."""
        with self._cond:
            self._depth -= 1
            if self._depth == 0:
                self._owner = None
                self._running += 1      # back in its own node
                self._cond.notify_all()


#: the process's gate (OpenBLAS's count is the process's)
GATE = BlasGate()
