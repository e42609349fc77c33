"""OpenBLAS's spinning workers and yscv's region helpers (docs/engine.md,
"Two cores"): a region stops OpenBLAS's workers when yscv's threads are
the only others, thread-count changes do not restart stopped workers, and
products keep their bits; convolutions' small im2col products run on one
OpenBLAS thread, as `gemm.dot`'s do."""
import os
import threading
import time

import numpy as np
import pytest

import yscv
from yscv import runtime
from yscv.compute import conv, gemm, regions
from yscv.runtime import blas

pytestmark = pytest.mark.skipif(
    blas._openblas() is None or blas._openblas()[3] is None,
    reason="NumPy's BLAS is not an OpenBLAS whose thread server yscv can see")


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


@pytest.fixture
def two_blas_threads():
    prev = runtime.blas_threads()
    runtime.set_blas_threads(2)
    yield
    runtime.set_blas_threads(prev if prev else 1)


def _operands():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((256, 512)).astype(np.float32),
            rng.standard_normal((512, 512)).astype(np.float32))


def test_stopped_workers_restart_at_the_next_threaded_product(two_blas_threads):
    a, b = _operands()
    first = a @ b                                   # 67M multiply-adds: two threads
    assert runtime.blas_workers_running()
    before = _threads()
    assert runtime.stop_blas_workers() is True
    assert not runtime.blas_workers_running()
    end = time.monotonic() + 2.0                    # joined; /proc may list it a moment longer
    while _threads() > before - 1 and time.monotonic() < end:
        time.sleep(0.01)
    assert _threads() == before - 1                 # the worker is gone
    assert runtime.stop_blas_workers() is False     # nothing left to stop
    np.testing.assert_array_equal(a @ b, first)     # restarted: the same bits
    assert runtime.blas_workers_running()


def test_thread_count_changes_do_not_start_stopped_workers(two_blas_threads):
    a, b = _operands()
    two = a @ b
    runtime.set_blas_threads(1)
    one = a @ b
    runtime.set_blas_threads(2)
    runtime.stop_blas_workers()
    runtime.set_blas_threads(1)                     # what a hold does
    assert runtime.blas_threads() == 1 and not runtime.blas_workers_running()
    np.testing.assert_array_equal(a @ b, one)       # one thread: no worker needed
    assert not runtime.blas_workers_running()
    runtime.set_blas_threads(2)
    assert runtime.blas_threads() == 2 and not runtime.blas_workers_running()
    np.testing.assert_array_equal(a @ b, two)
    assert runtime.blas_workers_running()


def _region(work=regions.STOP_BLAS_WORK):
    """A region of 4 chunks on the caller and a helper (a no-op kernel)
    said to do ``work`` multiply-adds."""
    S = regions.S

    def call(st):
        st[S.IN_KERNEL] = st[S.SIG]                 # as a region kernel's first step

    regions.run_region(call, 4, work)


def test_a_region_stops_spinning_workers_when_alone(monkeypatch, two_blas_threads):
    monkeypatch.setattr(runtime, "kernel_threads", lambda: 2)
    a, b = _operands()
    a @ b
    assert runtime.blas_workers_running()
    _region(regions.STOP_BLAS_WORK - 1)             # short: stopping would cost more
    _region(0)
    assert runtime.blas_workers_running()
    _region()
    assert not runtime.blas_workers_running()


def test_a_convolution_region_stops_spinning_workers(monkeypatch, two_blas_threads):
    """The direct convolution passes its multiply-adds: a 3x3 64->64
    convolution of 8x16x16 (75M) stops the workers, one of 1x8x8 (2.4M)
    does not."""
    monkeypatch.setattr(runtime, "kernel_threads", lambda: 2)
    rng = np.random.default_rng(3)
    w = rng.standard_normal((1, 3, 3, 64, 64)).astype(np.float32)
    a, b = _operands()
    for n, side, stops in ((1, 8, False), (8, 16, True)):
        x = rng.standard_normal((n, 1, side, side, 64)).astype(np.float32)
        a @ b
        conv.conv_forward(x, w, (1, 1, 1), (0, 1, 1), (1, 1, 1), 1)
        assert runtime.blas_workers_running() is not stops


def test_a_region_keeps_the_workers_of_a_program_with_threads(monkeypatch, two_blas_threads):
    """Another thread might be inside an OpenBLAS call: stopping the workers
    then could leave one never joined, so they stay."""
    monkeypatch.setattr(runtime, "kernel_threads", lambda: 2)
    done = threading.Event()
    other = threading.Thread(target=done.wait, name="user-thread", daemon=True)
    other.start()
    try:
        a, b = _operands()
        a @ b
        _region()
        assert runtime.blas_workers_running()
    finally:
        done.set()
        other.join()
    _region()
    assert not runtime.blas_workers_running()


def _recorded_holds(monkeypatch):
    seen = []
    real = runtime.hold_one_blas_thread
    monkeypatch.setattr(runtime, "hold_one_blas_thread",
                        lambda hold: seen.append(hold) or real(hold))
    return seen


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_small_im2col_products_of_a_convolution_run_on_one_thread(monkeypatch, dtype):
    """A pointwise convolution of 2^19 multiply-adds (gemm.dot's one-thread
    range) holds OpenBLAS at one thread in the forward and the backward; one
    of 2^24 does not; values as NumPy's products on one thread (two threads
    may give other last bits: OpenBLAS's second thread takes other rows)."""
    rng = np.random.default_rng(1)
    small_x = rng.standard_normal((2, 1, 16, 16, 64)).astype(dtype)     # 512 rows
    small_w = rng.standard_normal((1, 1, 1, 64, 16)).astype(dtype)
    assert gemm.one_thread_work(512 * 64 * 16)
    seen = _recorded_holds(monkeypatch)
    y = conv.conv_forward(small_x, small_w, (1, 1, 1), (0, 0, 0), (1, 1, 1), 1)
    assert seen == [True, False]
    seen.clear()
    g = rng.standard_normal(y.shape).astype(dtype)
    dx, dw, _ = conv.conv_backward(g, small_w, (1, 1, 1), (0, 0, 0), (1, 1, 1), 1, x=small_x,
                                   x_shape=small_x.shape)
    assert seen == [True, False]
    seen.clear()
    runtime.hold_one_blas_thread(True)              # the bits of one OpenBLAS thread
    try:
        want_y = np.matmul(small_x.reshape(512, 64), small_w.reshape(64, 16))
        want_dw = np.matmul(small_x.reshape(512, 64).T, g.reshape(512, 16))
        want_dx = np.matmul(g.reshape(512, 16), small_w.reshape(64, 16).T)
    finally:
        runtime.hold_one_blas_thread(False)
    np.testing.assert_array_equal(y.reshape(512, 16), want_y)
    np.testing.assert_array_equal(dw.reshape(64, 16), want_dw)
    np.testing.assert_array_equal(dx.reshape(512, 64), want_dx)
    seen.clear()
    big_x = rng.standard_normal((8, 1, 32, 32, 64)).astype(dtype)      # 8192 rows
    big_w = rng.standard_normal((1, 1, 1, 64, 64)).astype(dtype)
    assert not gemm.one_thread_work(8192 * 64 * 64)
    conv.conv_forward(big_x, big_w, (1, 1, 1), (0, 0, 0), (1, 1, 1), 1)
    assert seen == []


def test_a_resnet_block_step_keeps_its_bits(two_blas_threads):
    """A conv-bn-relu-linear step on two threads: the same loss and
    gradients whether OpenBLAS's workers are stopped or not."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((8, 16, 16, 32)).astype(np.float32)
    w1 = rng.standard_normal((3, 3, 32, 64)).astype(np.float32) * 0.1
    w2 = rng.standard_normal((16 * 16 * 64, 100)).astype(np.float32) * 0.01

    def step():
        g = yscv.Graph()
        a, b = g.variable(w1), g.variable(w2)
        h = g.relu(g.conv2d(g.constant(x), a, padding=1))
        loss = g.mean(g.square(g.matmul(g.reshape(h, (8, -1)), b)))
        g.backward(loss)
        return g.value(loss).copy(), g.grad(a).copy(), g.grad(b).copy()

    first = step()
    runtime.stop_blas_workers()
    for want, got in zip(first, step()):
        np.testing.assert_array_equal(want, got)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(32, 512, 4608), (128, 256, 2304), (7, 33, 200)])
def test_split_dot_same_bits_on_one_thread_or_two(monkeypatch, dtype, shape):
    """`gemm.split_dot` (column blocks of b over the region helpers, one
    OpenBLAS thread each) gives the same bits with yscv's kernels on one
    thread or two, into a strided output, close to NumPy's product."""
    m, k, n = shape
    rng = np.random.default_rng(4)
    a = rng.standard_normal((m, k)).astype(dtype)
    w = rng.standard_normal((n, k)).astype(dtype)
    outs = []
    for threads in (1, 2):
        monkeypatch.setattr(runtime, "kernel_threads", lambda t=threads: t)
        buf = np.full((m, n + 5), np.nan, dtype=dtype)
        gemm.split_dot(a, w.T, buf[:, :n])          # a padded row stride, as im2col's columns
        assert np.isnan(buf[:, n:]).all()
        outs.append(buf[:, :n].copy())
    np.testing.assert_array_equal(outs[0], outs[1])
    tol = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(outs[0], a @ w.T, rtol=tol, atol=tol * k)


def test_split_dot_raises_a_helpers_error(monkeypatch):
    """A block that fails (a wrong output shape) raises in the caller, and
    OpenBLAS's thread count is restored."""
    monkeypatch.setattr(runtime, "kernel_threads", lambda: 2)
    before = runtime.blas_threads()
    a = np.ones((32, 512), np.float32)
    b = np.ones((512, 4608), np.float32)
    with pytest.raises(ValueError):
        gemm.split_dot(a, b, np.empty((32, 4000), np.float32))
    assert runtime.blas_threads() == before


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_stacked_matmul_is_np_matmul_bit_for_bit(monkeypatch, dtype):
    """`gemm.stacked_matmul` (batch chunks over the region helpers when each
    element is small): np.matmul's bits, on one thread or two, for a
    transposed stack (vmap's per-sample x^T g), a contiguous one, and the
    cases it leaves to np.matmul (broadcast batch, large elements)."""
    rng = np.random.default_rng(6)
    cols = rng.standard_normal((64, 196, 72)).astype(dtype)
    g = rng.standard_normal((64, 196, 16)).astype(dtype)
    w = rng.standard_normal((64, 16, 72)).astype(dtype)
    cases = [(cols.transpose(0, 2, 1), g), (g, w), (g[:1], w),
             (rng.standard_normal((4, 128, 64)).astype(dtype),
              rng.standard_normal((4, 64, 64)).astype(dtype))]
    for threads in (1, 2):
        monkeypatch.setattr(runtime, "kernel_threads", lambda t=threads: t)
        for a, b in cases:
            np.testing.assert_array_equal(gemm.stacked_matmul(a, b), np.matmul(a, b))
