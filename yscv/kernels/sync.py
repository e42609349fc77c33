"""Atomic counters and polite spin-waits: the kernel side of the two-core
*regions* of yscv/compute/regions.py.

A region runs one kernel call on each participating thread (the caller and
the pool's helpers); every participant claims chunk indices from a shared
counter (:func:`region_claim`; a region kernel loops
``for c in region_chunks(st, n)``) until none is left, so a late or absent
helper only means that the caller claims more chunks. The protocol is built
so that no thread ever sleeps on the GIL while another holds it: on these
virtual machines an idle vCPU halts at once, and waking a sleeping thread
costs more than most regions' work did with a Python thread pool
(docs/engine.md, "Two cores").

``state`` is one int64 array shared by a pool, one counter per 64-byte
cache line (``state[field]``, fields below). All accesses are sequentially
consistent atomics.

- ``SIG``: the number of the region last published by the caller.
- ``OPEN``: the number of the region helpers may still join (0: closed).
- ``IN_KERNEL``: the number of the region whose caller is inside its
  kernel: the GIL is free, so a helper taking it does not wait.
- ``BUSY``: helpers that left :func:`region_step` (``OP_WAIT``) for a region and have not
  come back (they are in Python or in the kernel).
- ``NEXT``: the next chunk to claim in the current region.
- ``EXIT``: set at interpreter exit: helpers stop waiting (they must not be
  running compiled code when the interpreter tears Numba down).
- ``DONE``, ``NEXT2``, ``TOKEN``, ``READY``: for regions with two phases
  (yscv/kernels/norm_regions.py): chunks of the first phase done, the next
  chunk of the second phase, the one-participant step between them
  (:func:`take_token`, :func:`set_ready`, :func:`wait_ready`).

Spinning is polite: ``pause`` each round and ``sched_yield()`` every 32
rounds, so another runnable thread on the core (an OpenBLAS worker, say) gets
it at once; libgomp's spinning workers, which do not yield, made a transformer
block several times slower (docs/engine.md).
"""
from __future__ import annotations

import platform
import sys

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.imputils import RefType, iternext_impl
from numba.extending import intrinsic, lower_builtin, models, register_model

from ._jit import jit

SIG, OPEN, IN_KERNEL, BUSY, NEXT, DONE, NEXT2, TOKEN, READY, EXIT = (
    0, 8, 16, 24, 32, 40, 48, 56, 64, 72)
#: int64 elements of a state array
STATE_LEN = 80

_X86 = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686", "x86")
_I64 = ir.IntType(64)


def _int64_slot(a, i, v=types.int64) -> bool:
    """``a[i]`` (and a value ``v``) that the atomics below accept."""
    return (isinstance(a, types.Array) and a.dtype == types.int64 and a.layout == "C"
            and isinstance(i, types.Integer) and isinstance(v, types.Integer))


def _slot(context, builder, sig, args):
    arr = context.make_array(sig.args[0])(context, builder, args[0])
    idx = context.cast(builder, args[1], sig.args[1], types.intp)
    return builder.gep(arr.data, [idx], inbounds=True)


def _value(context, builder, sig, args):
    return context.cast(builder, args[2], sig.args[2], types.int64)


@intrinsic
def atomic_add(typingctx, a, i, v):
    """``old = a[i]; a[i] += v`` atomically (sequentially consistent); returns old."""
    if not _int64_slot(a, i, v):
        return None

    def codegen(context, builder, sig, args):
        return builder.atomic_rmw("add", _slot(context, builder, sig, args),
                                  _value(context, builder, sig, args), "seq_cst")
    return types.int64(a, i, v), codegen


@intrinsic
def atomic_load(typingctx, a, i):
    """``a[i]``, an atomic (sequentially consistent) load."""
    if not _int64_slot(a, i):
        return None

    def codegen(context, builder, sig, args):
        return builder.load_atomic(_slot(context, builder, sig, args), "seq_cst", 8)
    return types.int64(a, i), codegen


@intrinsic
def atomic_store(typingctx, a, i, v):
    """``a[i] = v``, an atomic (sequentially consistent) store."""
    if not _int64_slot(a, i, v):
        return None

    def codegen(context, builder, sig, args):
        builder.store_atomic(_value(context, builder, sig, args),
                             _slot(context, builder, sig, args), "seq_cst", 8)
        return context.get_dummy_value()
    return types.none(a, i, v), codegen


def _call_external(builder, name, ret):
    fn = builder.module.globals.get(name)
    if fn is None:
        fn = ir.Function(builder.module, ir.FunctionType(ret, []), name)
    return builder.call(fn, [])


@intrinsic
def cpu_relax(typingctx):
    """The spin-wait hint (x86 ``pause``; nothing elsewhere)."""
    def codegen(context, builder, sig, args):
        if _X86:
            _call_external(builder, "llvm.x86.sse2.pause", ir.VoidType())
        return context.get_dummy_value()
    return types.none(), codegen


@intrinsic
def yield_cpu(typingctx):
    """Let another runnable thread have this core (``sched_yield``;
    ``SwitchToThread`` on Windows)."""
    def codegen(context, builder, sig, args):
        if sys.platform == "win32":
            _call_external(builder, "SwitchToThread", ir.IntType(32))
        else:
            _call_external(builder, "sched_yield", ir.IntType(32))
        return context.get_dummy_value()
    return types.none(), codegen


@jit(inline="always")
def _relax(n):
    if n & 31 == 31:
        yield_cpu()
    else:
        cpu_relax()


# ----------------------------------------------------------- kernel side
@jit(inline="always")
def region_enter(st):
    """First statement of a region kernel: mark the caller as inside it."""
    atomic_store(st, IN_KERNEL, atomic_load(st, SIG))


@jit(inline="always")
def region_claim(st):
    """The next chunk index of the region (>= the chunk count: none left)."""
    return atomic_add(st, NEXT, 1)


class ChunksType(types.SimpleIteratorType):
    """Numba type of :func:`region_chunks` / :func:`phase2_chunks`: a
    pointer to the region's shared chunk counter and the chunk count. Each
    step claims the next index (one atomic add), so the iterator itself holds
    no state to update. Not a generator: Numba never caches generators on
    disk, so a generator was compiled again in every process that compiled
    a region kernel (one more dispatcher on a cold start), and a generator
    call is more for each region kernel to compile (docs/engine.md, "Cold
    start")."""

    def __init__(self):
        super().__init__("region_chunks", types.int64)


CHUNKS = ChunksType()


@register_model(ChunksType)
class _ChunksModel(models.StructModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, [("counter", types.CPointer(types.int64)),
                                        ("count", types.int64)])


@lower_builtin("getiter", ChunksType)
def _chunks_getiter(context, builder, sig, args):
    return args[0]


@lower_builtin("iternext", ChunksType)
@iternext_impl(RefType.UNTRACKED)
def _chunks_iternext(context, builder, sig, args, result):
    it = cgutils.create_struct_proxy(CHUNKS)(context, builder, value=args[0])
    c = builder.atomic_rmw("add", it.counter, ir.Constant(_I64, 1), "seq_cst")
    result.set_valid(builder.icmp_signed("<", c, it.count))
    result.yield_(c)


def _chunks_intrinsic(field: int, enter: bool, doc: str):
    """An intrinsic ``(st, n) -> ChunksType`` over the counter ``st[field]``;
    with ``enter`` it first marks the caller as inside the region (as
    :func:`region_enter`)."""

    def make(typingctx, st, n):
        if not _int64_slot(st, n):
            return None

        def codegen(context, builder, sig, args):
            arr = context.make_array(sig.args[0])(context, builder, args[0])

            def slot(k):
                return builder.gep(arr.data, [ir.Constant(_I64, k)], inbounds=True)

            if enter:
                builder.store_atomic(builder.load_atomic(slot(SIG), "seq_cst", 8),
                                     slot(IN_KERNEL), "seq_cst", 8)
            it = cgutils.create_struct_proxy(CHUNKS)(context, builder)
            it.counter = slot(field)
            it.count = context.cast(builder, args[1], sig.args[1], types.int64)
            return it._getvalue()

        return CHUNKS(st, n), codegen

    make.__name__ = make.__qualname__ = "region_chunks" if enter else "phase2_chunks"
    make.__doc__ = doc
    return intrinsic(make)


region_chunks = _chunks_intrinsic(NEXT, True, """``region_chunks(st, n)``: the chunk
    indices below ``n`` this participant claims, in a ``for`` loop; creating
    it marks the caller as inside the region (:func:`region_enter`). A region
    kernel is ``for c in region_chunks(st, n): <chunk c>``.""")


# Two-phase regions: every participant claims first-phase chunks (region_claim),
# marking each done (phase_done); then waits until all are done (wait_phase:
# only claimed chunks, which running participants finish, are waited for);
# one participant (take_token) does the work between the phases and calls
# set_ready, the others wait_ready; then all claim second-phase chunks.
@jit(inline="always")
def phase_done(st):
    atomic_add(st, DONE, 1)


@jit
def wait_phase(st, n):
    """Wait until ``n`` first-phase chunks are done."""
    k = 0
    while atomic_load(st, DONE) < n:
        _relax(k)
        k += 1


@jit(inline="always")
def take_token(st):
    """True for exactly one participant of the region."""
    return atomic_add(st, TOKEN, 1) == 0


@jit(inline="always")
def set_ready(st):
    atomic_store(st, READY, 1)


@jit
def wait_ready(st):
    k = 0
    while atomic_load(st, READY) == 0:
        _relax(k)
        k += 1


phase2_chunks = _chunks_intrinsic(NEXT2, False, """``phase2_chunks(st, n)``: the
    second-phase chunk indices below ``n`` this participant claims.""")


# ----------------------------------------------------- caller and helpers
#: the three steps of :func:`region_step`
OP_OPEN, OP_CLOSE, OP_WAIT, OP_CLAIM = 0, 1, 2, 3


@jit
def region_step(st, op, a, was_busy, rounds):
    """The caller's and the helpers' side of a region, one kernel for the
    three steps (one first-call compile instead of three; each kernel costs
    ~0.04 s at least on a cold start, docs/engine.md "Cold start"). Returns
    ``(newest region seen, joined)`` (``(a, False)`` for the caller's steps).

    ``op`` :data:`OP_OPEN` -- caller: publish region ``a`` (> every earlier
    one); no helper is busy with an earlier region (the caller's last close).

    :data:`OP_CLOSE` -- caller, after its own kernel call: no helper may join
    any more; wait until every helper that joined has come back to
    :data:`OP_WAIT` (so its chunks are done and it holds no GIL).

    :data:`OP_WAIT` -- helper: wait (at most ``rounds`` spin rounds) for a
    region newer than ``a`` (the last one it saw) whose caller is inside its
    kernel, and join it; a region already closed when the helper gets to it
    is seen but not joined. ``was_busy``: this helper joined the previous
    region (it is counted in ``BUSY`` until it is back here, after its kernel
    call and the Python around it).

    :data:`OP_CLAIM` -- any participant of a region whose chunks are Python
    calls of GIL-free work (`regions.run_chunks`): mark the caller as inside
    (as :func:`region_enter`) and claim the next chunk; returns ``(chunk,
    False)``."""
    if op == OP_CLAIM:
        atomic_store(st, IN_KERNEL, atomic_load(st, SIG))
        return atomic_add(st, NEXT, 1), False
    if op == OP_OPEN:
        atomic_store(st, NEXT, 0)
        atomic_store(st, DONE, 0)
        atomic_store(st, NEXT2, 0)
        atomic_store(st, TOKEN, 0)
        atomic_store(st, READY, 0)
        atomic_store(st, OPEN, a)
        atomic_store(st, SIG, a)
        return a, False
    if op == OP_CLOSE:
        atomic_store(st, OPEN, 0)
        n = 0
        while atomic_load(st, BUSY) != 0:
            _relax(n)
            n += 1
        return a, False
    last = a
    if was_busy:
        atomic_add(st, BUSY, -1)
    n = 0
    while n < rounds and atomic_load(st, EXIT) == 0:
        sig = atomic_load(st, SIG)
        if sig != last and atomic_load(st, IN_KERNEL) == sig:
            atomic_add(st, BUSY, 1)
            if atomic_load(st, OPEN) == sig:
                return sig, True
            atomic_add(st, BUSY, -1)   # closed already: the caller did every chunk
            last = sig
        _relax(n)
        n += 1
    return last, False
