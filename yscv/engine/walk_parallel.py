"""Parallel backward: the backward rules of independent branches on threads.

``g.backward(target, workers=n)`` with ``n > 1`` comes here. The result is
the serial walk's (``Graph._walk`` in yscv/engine/walk.py) to the bit, in float32 and float64:

* Plan. One pass from the target down marks the nodes the serial walk would
  visit (reachable through inputs that require grad) and counts, for each,
  its pending contributions: one per (consumer, input slot).
* Run. A node is *ready* once every consumer has run. Ready non-leaf nodes
  wait in a heap, highest index first (the serial order, which also keeps
  memory alike); up to ``n`` threads (the caller and ``n - 1`` helpers,
  started only once two nodes are ready at the same time, so a chain never
  starts one) take a node, add its contributions up, run its hooks and its
  backward rule, and hand the input gradients to the node's inputs.
  NumPy's BLAS and the Numba kernels (``nogil``) release the GIL, so
  branches overlap where the work is.
* Fixed order. A node's contributions are added in the serial walk's order
  (consumers by decreasing index, then input slot), never in arrival order,
  so the sums are the serial sums.
* Leaves last. Leaf gradients, retained gradients, parameters' ``.grad``
  and post-accumulate hooks are applied by the caller after the threads are
  done, in decreasing index order, exactly as the serial walk does.
* Errors. The first exception in walk order wins: after node ``e`` fails,
  the threads still run the nodes above ``e`` (the serial walk would have
  run them before ``e``) and drop the ones below; the caller re-raises the
  failure of the highest node once every thread has stopped, and applies
  only the stores the serial walk would have made before failing.
* Checkpointing. Rebuilding released values takes one lock per graph;
  segments are released again once the walk is over.
* Threads of the kernels. While helpers run, yscv's region kernels run on
  the calling thread only (``runtime.hold_walk_threads``). NumPy's OpenBLAS
  keeps the serial walk's thread count: a product's bits can depend on it
  (OpenBLAS's AVX2 kernels split the result into other blocks on another
  count). Where the serial walk lowers it too (the one-thread products of
  yscv/compute/gemm.py), the change runs alone: each rule is a node of
  yscv/runtime/blas_gate.py's gate, so no product of another branch starts meanwhile.

No thread outlives the call: helpers are joined before it returns or raises.
"""
from __future__ import annotations

import heapq
import os
import statistics
import threading
import time
import weakref

import numpy as np

from .. import registry, runtime
from .namespace import ARRAY as _ARRAY
from ..node import N_INPUTS, N_NEEDS, N_OP, Op
from .schedule import Schedule, accumulate_leaf, accumulate_stored, conform, run_hooks

_LEAF = int(Op.LEAF)
_ndarray = np.ndarray

#: ``workers=None`` stays serial below this many elements in the visited
#: non-leaf values: smaller branches do not pay for the hand-offs and the
#: GIL (docs/engine.md, docs/benchmarks.md)
AUTO_MIN_ELEMENTS = 1 << 20
#: ``workers=None`` never uses more threads than this
AUTO_MAX_WORKERS = 4
#: timed runs of each walk (after one untimed warm-up of each) before
#: ``workers=None`` decides for a graph shape
AUTO_TRIAL_PAIRS = 3
#: the parallel walk is chosen only if its median time is at most this
#: fraction of the serial walk's (a 1.11x speed-up at least: noise on a
#: shared machine must not tip the choice)
AUTO_MARGIN = 0.9
#: graph shapes the process remembers a choice for (then it starts over)
AUTO_MAX_SHAPES = 256
#: a choice of the parallel walk is measured again after this many seconds
#: (the load of the machine changes; a choice of serial is kept)
AUTO_RECHECK_SECONDS = 30.0

_clock = time.perf_counter      # times a trial run
_now = time.monotonic           # when a choice was made


def check_workers(workers) -> None:
    """``workers`` is None or a positive int, else ValueError (before any work)."""
    if workers is None:
        return
    if isinstance(workers, bool) or not isinstance(workers, (int, np.integer)) or workers < 1:
        raise ValueError(f"backward: workers must be a positive int or None, got {workers!r}")


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


#: the visit plan of a walk (which nodes, how many contributions each
#: awaits): yscv/engine/schedule.py
_Plan = Schedule


class _Shape:
    """What ``workers=None`` knows about one graph shape in this process:
    the choice once made (``workers``), else the measurement so far."""

    __slots__ = ("workers", "cores", "sig", "runs", "serial", "parallel", "decided")

    def __init__(self, cores: int, sig: tuple):
        self.workers = None     # the choice once made: 1 or ``cores``
        self.cores = cores
        self.sig = sig          # (visited nodes, elements) of the first plan
        self.runs = 0           # trial runs handed out
        self.serial = []        # timed seconds of the serial walk
        self.parallel = []      # ... of the parallel walk
        self.decided = 0.0      # _now() when the parallel walk was chosen

    def next_parallel(self) -> bool:
        """Whether the next trial run is the parallel walk: serial and
        parallel alternate, serial first (its first run, like the parallel
        walk's, is an untimed warm-up)."""
        return self.runs % 2 == 1

    def record(self, parallel: bool, seconds: float, warm_up: bool) -> None:
        """A finished trial run; decides once the measurement is complete."""
        if warm_up or self.workers is not None:
            return
        (self.parallel if parallel else self.serial).append(seconds)
        if len(self.serial) == len(self.parallel):
            verdict = decide(self.serial, self.parallel)
            if verdict is not None:
                self.workers = self.cores if verdict else 1
                self.decided = _now()

    def recheck(self) -> None:
        """Measure the parallel walk against the serial one again (no
        warm-ups): it keeps the threads only if they still pay."""
        self.workers = None
        self.runs = 2
        self.serial = []
        self.parallel = []


def decide(serial: list, parallel: list):
    """The choice from alternated timings of the two walks on one graph
    shape: True (parallel), False (serial), or None (measure on).

    After ``AUTO_TRIAL_PAIRS`` pairs, parallel only if its median is at
    most ``AUTO_MARGIN`` times the serial median (medians, not one pair: a
    single run on a shared machine can be off by several times)."""
    if len(parallel) < AUTO_TRIAL_PAIRS or len(serial) < AUTO_TRIAL_PAIRS:
        return None
    return statistics.median(parallel) <= AUTO_MARGIN * statistics.median(serial)


_shapes: dict = {}              # (nodes, target, dtype) -> _Shape
_shapes_lock = threading.Lock()
_local = threading.local()      # .trial: (weakref to graph, t, shape, parallel, warm_up)


def reset_auto_choice() -> None:
    """Forget every choice and measurement of ``workers=None``."""
    with _shapes_lock:
        _shapes.clear()


def choose_workers(graph, t: int) -> int:
    """``workers=None``: serial unless measured to pay on this machine.

    Serial at once for chains, small graphs (below ``AUTO_MIN_ELEMENTS``
    elements in the visited values) and one usable core. Otherwise the
    choice is made by measurement, once per graph shape and process: the
    first backward calls of a shape (graphs with the same node count, target
    index and dtype, as a training loop builds step after step) alternate
    the serial and the parallel walk and time them (``decide``); the shape
    then keeps the faster one (serial unless parallel clearly wins). A
    choice of the parallel walk is measured again every
    ``AUTO_RECHECK_SECONDS``, and dropped once it no longer pays. The
    results are the same bits either way. A trial run returns more than one
    worker and leaves a note for `parallel_walk`, which runs and times
    the walk it names."""
    _local.trial = None
    key = (len(graph._nodes), t, graph.dtype)
    shape = _shapes.get(key)
    if shape is not None and shape.workers == 1:
        return 1   # the common answer, without a plan
    cores = min(_cores(), AUTO_MAX_WORKERS)
    if cores < 2:
        return 1
    plan = _Plan(graph, t)
    sig = (len(plan.remaining), plan.elements)
    with _shapes_lock:
        shape = _shapes.get(key)
        if shape is None:
            if len(_shapes) >= AUTO_MAX_SHAPES:
                _shapes.clear()
            verdict = None if plan.branchy and plan.elements >= AUTO_MIN_ELEMENTS else 1
            shape = _shapes[key] = _Shape(cores, sig)
            shape.workers = verdict
        elif shape.sig != sig:
            # another graph with the same key: stay on the safe side
            shape.workers = 1
        elif shape.workers is not None and shape.workers > 1 \
                and _now() - shape.decided > AUTO_RECHECK_SECONDS:
            shape.recheck()
        if shape.workers is not None:
            return shape.workers
        parallel = shape.next_parallel()
        warm_up = shape.runs < 2
        shape.runs += 1
    _local.trial = (weakref.ref(graph), t, shape, parallel, warm_up)
    return cores


def _take_trial(graph, t: int):
    """The trial note ``choose_workers`` left for this call, if any."""
    trial = getattr(_local, "trial", None)
    if trial is None:
        return None
    _local.trial = None
    if trial[0]() is not graph or trial[1] != t:
        return None
    return trial


def _fold(parts):
    """Sum contributions in the serial walk's order: ((g1 + g2) + g3) ..."""
    if len(parts) > 1:
        parts.sort(key=_order)
    acc = parts[0][2]
    for p in parts[1:]:
        acc = acc + p[2]
    return acc


def _order(part):
    return part[0], part[1]


class _Walk:
    """One parallel backward call: shared state guarded by ``cond``."""

    def __init__(self, graph, t, seed, retain_graph, borrowed, workers, plan):
        self.g = graph
        self.t = t
        self.retain_graph = retain_graph
        self.borrowed = borrowed
        self.workers = workers
        self.remaining = plan.remaining
        self.leaves = plan.leaves
        # contributions per node: [(-consumer, slot, grad), ...]
        self.parts = {t: [(0, 0, seed)]}
        self.heap = [-t]
        self.cond = threading.Condition(threading.Lock())
        self.recompute_lock = threading.Lock()
        self.active = 0
        self.idle = 0
        self.threads = []
        self.done = False
        self.err_index = -1        # highest failed node so far
        self.errors = {}           # node -> exception
        self.stores = {}           # retained non-leaf node -> its complete grad

    # ------------------------------------------------------------- threads
    def run(self) -> None:
        try:
            self._work()
        finally:
            with self.cond:
                self.done = True
                self.cond.notify_all()
            for th in self.threads:
                th.join()
            if self.threads:
                runtime.hold_walk_threads(False)

    def _start_helper(self) -> None:
        if not self.threads:
            # from here on the walk's threads are the parallelism: region
            # kernels run on one thread each, and every node counts in the
            # BLAS gate (both undone in run once the threads are joined);
            # OpenBLAS keeps the serial walk's thread count
            runtime.hold_walk_threads(True)
        th = threading.Thread(target=self._helper, name="yscv-backward", daemon=True)
        self.threads.append(th)
        th.start()

    def _helper(self) -> None:
        try:
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):   # as the caller's walk (walk.py)
                self._work()
        except BaseException as exc:  # never lose an error of a helper's own code
            with self.cond:
                self.errors.setdefault(self.t + 1, exc)
                self.err_index = self.t + 1
                self.done = True
                self.cond.notify_all()

    def _take(self):
        """Next node to run (under the lock), or None when the walk is over."""
        heap = self.heap
        while True:
            if self.done:
                return None
            while heap and -heap[0] < self.err_index:
                heapq.heappop(heap)  # below a failed node: the serial walk never got there
            if heap:
                i = -heapq.heappop(heap)
                self.active += 1
                if heap:
                    if self.idle:
                        self.cond.notify()
                    elif len(self.threads) < self.workers - 1:
                        self._start_helper()
                return i
            if self.active == 0:
                self.done = True
                self.cond.notify_all()
                return None
            self.idle += 1
            self.cond.wait()
            self.idle -= 1

    def _work(self) -> None:
        cond = self.cond
        while True:
            with cond:
                i = self._take()
            if i is None:
                return
            gated = bool(self.threads)   # a helper runs: nodes count in the BLAS gate
            if gated:
                runtime.enter_walk_node()
            try:
                out = self._node(i)
                failed = None
            except BaseException as exc:
                out = ()
                failed = exc
            finally:
                if gated:
                    runtime.leave_walk_node()
            with cond:
                self.active -= 1
                if failed is not None:
                    self.errors[i] = failed
                    if i > self.err_index:
                        self.err_index = i
                else:
                    self._hand_on(i, out)

    def _hand_on(self, i: int, out) -> None:
        """Record node i's input gradients; push inputs that became ready."""
        remaining, parts, nodes, heap = self.remaining, self.parts, self.g._nodes, self.heap
        for j, slot, gj in out:
            if gj is not None:
                lst = parts.get(j)
                if lst is None:
                    parts[j] = [(-i, slot, gj)]
                else:
                    lst.append((-i, slot, gj))
            left = remaining[j] - 1
            remaining[j] = left
            if left == 0 and nodes[j][N_OP] != _LEAF:
                heapq.heappush(heap, -j)

    # ---------------------------------------------------------------- a node
    def _node(self, i: int):
        """Run node i's hooks and backward rule; its inputs' (j, slot, grad)."""
        g = self.g
        parts = self.parts.pop(i, None)
        ins = g._nodes[i][N_INPUTS]
        needs = g._nodes[i][N_NEEDS]  # per input, its rg
        if parts is None:  # every consumer returned None for it: nothing flows
            return [(j, s, None) for s, j in enumerate(ins) if needs[s]]
        gi = _fold(parts)
        if type(gi) is not _ndarray:
            gi = np.asarray(gi)
        if g._hooks and i in g._hooks:
            gi = run_hooks(g, i, gi)
        retained = g._retained and i in g._retained
        if retained:
            if self.borrowed and not gi.flags.writeable:
                gi = gi.copy()
            self.stores[i] = gi
        if g._has_released:
            self._recompute(i)
        values = g._values
        in_vals = tuple([values[j] for j in ins])
        op, _, attrs, saved, _, needs, _, _ = g._nodes[i]  # after any recompute
        grads = registry.BACKWARD[op](_ARRAY, gi, in_vals, values[i], attrs, saved, needs)
        out = []
        for s, (j, gj, vj) in enumerate(zip(ins, grads, in_vals)):
            if not needs[s]:
                continue
            if gj is not None:  # the one conform step (yscv/engine/schedule.py)
                gj = conform(g, gj, vj.shape, op, i, j)
            out.append((j, s, gj))
        if not self.retain_graph:
            g._release(i)
        return out

    def _recompute(self, i: int) -> None:
        """Rebuild node i's released values under the graph's lock. A node
        waiting for the lock leaves the BLAS gate meanwhile: the thread
        holding it may need to run alone (yscv/runtime/blas_gate.py)."""
        if not self.threads:
            with self.recompute_lock:
                self.g._prepare_node_for_backward(i)
            return
        runtime.leave_walk_node()
        try:
            with self.recompute_lock:
                runtime.enter_walk_node()
                try:
                    self.g._prepare_node_for_backward(i)
                finally:
                    runtime.leave_walk_node()
        finally:
            runtime.enter_walk_node()

    # ---------------------------------------------------------- the stores
    def finish(self) -> None:
        """Leaves, retained grads and segment releases, in serial order; then
        the error of the highest failed node, if any."""
        g = self.g
        err = self.err_index
        stores = self.stores
        order = sorted(set(self.leaves) | set(stores), reverse=True)
        hooks = g._hooks
        try:
            for i in order:
                if i < err:
                    break
                if i in stores:  # a retained node: its grad was complete before its rule ran
                    accumulate_stored(g, i, stores[i])
                    continue
                parts = self.parts.get(i)
                if not parts:
                    continue
                gi = _fold(parts)
                if type(gi) is not _ndarray:
                    gi = np.asarray(gi)
                if hooks and i in hooks:
                    gi = run_hooks(g, i, gi)
                if self.borrowed and not gi.flags.writeable:
                    gi = gi.copy()
                accumulate_leaf(g, i, gi)
        finally:
            seg_starts = g._segment_starts
            if seg_starts:
                low = err + 1 if err >= 0 else 0
                for start in sorted(seg_starts):
                    if low <= start <= self.t + 1:
                        for seg in seg_starts[start]:
                            g._release_segment(seg)
        if err >= 0:
            raise self.errors[err]


def parallel_walk(graph, t: int, seed, retain_graph: bool, borrowed: bool,
                  workers: int) -> None:
    """Backward from node ``t`` seeded with ``seed`` on up to ``workers``
    threads; bit-identical to ``graph._walk`` (see the module docstring).
    A trial run of ``workers=None`` (`choose_workers`) runs the walk
    its note names, serial or parallel, and reports the time it took."""
    trial = _take_trial(graph, t)
    if trial is not None:
        _, _, shape, parallel, warm_up = trial
        start = _clock()
        if parallel:
            _parallel_walk(graph, t, seed, retain_graph, borrowed, workers)
        else:
            graph._walk(t, seed, retain_graph, borrowed)
        seconds = _clock() - start
        with _shapes_lock:
            shape.record(parallel, seconds, warm_up)
        return
    _parallel_walk(graph, t, seed, retain_graph, borrowed, workers)


def _parallel_walk(graph, t: int, seed, retain_graph: bool, borrowed: bool,
                   workers: int) -> None:
    plan = _Plan(graph, t)
    if not plan.branchy:  # one path: never two nodes ready at once
        graph._walk(t, seed, retain_graph, borrowed)
        return
    walk = _Walk(graph, t, seed, retain_graph, borrowed, workers, plan)
    walk.run()
    walk.finish()
