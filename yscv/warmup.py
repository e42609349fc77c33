"""Compile the kernels of typical training runs into the kernel cache, once.

    python -m yscv.warmup                          # float32: cnn, mlp, rnn, transformer
    python -m yscv.warmup --dtype float32 float64  # both dtypes
    python -m yscv.warmup --only cnn rnn           # some categories
    python -m yscv.warmup --gemm 128x784x512       # also measure these products' GEMM choice

yscv compiles each Numba kernel on its first call and caches it on disk
(docs/engine.md, "Compiled kernels on disk"), so a user's first program
pays the compilation of every kernel it uses (seconds) and later programs
load them in milliseconds. An installation that prefers to pay once, up
front (a container image, a cluster node before ``mpiexec``, CI), runs this
module: it trains a few steps of small models through the public API
(``yscv.nn``, ``yscv.optim``, ``yscv.train.Trainer``, evaluation included),
so exactly the kernels and signatures real runs use get compiled. It
changes no state a later program sees except the cache; the cache goes where
kernels would be cached anyway (``NUMBA_CACHE_DIR``, the package's
``__pycache__``, or the per-user `yscv.runtime.kernel_cache_dir`).

Categories: ``cnn`` (Conv2d, BatchNorm2d, ReLU, max and average pooling,
dropout, Linear, cross-entropy; Adam; the Winograd 3x3 kernels of larger
images), ``mlp`` (Linear, GELU, Tanh,
Sigmoid, dropout; cross-entropy and MSE; SGD with momentum, AdamW-style
weight decay), ``rnn`` (LSTM, GRU, RNN; Adam), ``transformer`` (Embedding,
LayerNorm, MultiHeadAttention with a causal mask, GELU; Adam).

The GEMM choice of each shape class of matrix products is measured on first
use and cached beside the kernels (yscv/compute/gemm_choice.py); the
programs above measure theirs, ``--gemm MxKxN ...`` measures a model's own
products (each with its two gradient products) up front.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from . import nn, optim
from .train import Trainer

__all__ = ["warmup", "CATEGORIES"]


class _Tokens(nn.Module):
    """tokens [B, S] -> Embedding -> pre-norm causal attention block -> mean -> 4 logits."""

    def __init__(self, dtype, d=32, heads=4, vocab=50):
        super().__init__()
        self.embed = nn.Embedding(vocab, d, dtype=dtype)
        self.norm1 = nn.LayerNorm(d, dtype=dtype)
        self.attn = nn.MultiHeadAttention(d, heads, dtype=dtype)
        self.norm2 = nn.LayerNorm(d, dtype=dtype)
        self.ff = nn.Sequential(nn.Linear(d, 2 * d, dtype=dtype), nn.GELU(),
                                nn.Linear(2 * d, d, dtype=dtype))
        self.head = nn.Linear(d, 4, dtype=dtype)

    def forward(self, g, tokens):
        x = self.embed(g, tokens)
        x = g.add(x, self.attn(g, self.norm1(g, x), causal=True))
        x = g.add(x, self.ff(g, self.norm2(g, x)))
        return self.head(g, g.mean(x, axis=1))


class _Sequence(nn.Module):
    """x [B, T, I] -> LSTM, GRU, RNN in turn (batch-first) -> last step -> 4 logits."""

    def __init__(self, dtype, inputs=8, hidden=32):
        super().__init__()
        self.lstm = nn.LSTM(inputs, hidden, batch_first=True, dtype=dtype)
        self.gru = nn.GRU(hidden, hidden, batch_first=True, dtype=dtype)
        self.rnn = nn.RNN(hidden, hidden, batch_first=True, dtype=dtype)
        self.head = nn.Linear(hidden, 4, dtype=dtype)

    def forward(self, g, x):
        x, _ = self.lstm(g, x)
        x, _ = self.gru(g, x)
        _, h_n = self.rnn(g, x)
        return self.head(g, g.select(h_n, 0, 0))


def _cnn(dtype):
    model = nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1, dtype=dtype), nn.BatchNorm2d(16, dtype=dtype), nn.ReLU(),
        nn.Conv2d(16, 32, 3, padding=1, dtype=dtype), nn.BatchNorm2d(32, dtype=dtype), nn.ReLU(),
        nn.MaxPool2d(2), nn.Dropout(0.25), nn.Conv2d(32, 64, 3, padding=1, dtype=dtype),
        nn.ReLU(), nn.AvgPool2d(2), nn.Flatten(), nn.Linear(2 * 2 * 64, 10, dtype=dtype))
    x = np.random.default_rng(0).random((128, 8, 8, 1)).astype(dtype)
    return model, x, np.arange(128) % 10, "cross_entropy", optim.Adam


def _mlp(dtype):
    model = nn.Sequential(
        nn.Linear(64, 128, dtype=dtype), nn.GELU(), nn.Dropout(0.1),
        nn.Linear(128, 64, dtype=dtype), nn.Tanh(), nn.Linear(64, 10, dtype=dtype),
        nn.Sigmoid())
    x = np.random.default_rng(0).standard_normal((128, 64)).astype(dtype)
    return model, x, np.arange(128) % 10, "cross_entropy", _sgd


def _mlp_regression(dtype):
    model = nn.Sequential(nn.Linear(64, 32, dtype=dtype), nn.ReLU(), nn.Linear(32, 1, dtype=dtype))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((128, 64)).astype(dtype)
    return model, x, rng.standard_normal((128, 1)).astype(dtype), "mse", optim.Adam


def _rnn(dtype):
    x = np.random.default_rng(0).standard_normal((64, 12, 8)).astype(dtype)
    return _Sequence(dtype), x, np.arange(64) % 4, "cross_entropy", optim.Adam


def _transformer(dtype):
    tokens = np.random.default_rng(0).integers(0, 50, (64, 16))
    return _Tokens(dtype), tokens, np.arange(64) % 4, "cross_entropy", optim.Adam


def _sgd(params):
    return optim.SGD(params, lr=1e-2, momentum=0.9, weight_decay=1e-4)


#: category -> the programs it runs (each: a model, inputs, targets, loss, optimizer)
CATEGORIES = {"cnn": (_cnn,), "mlp": (_mlp, _mlp_regression), "rnn": (_rnn,),
              "transformer": (_transformer,)}


def _train(program, dtype) -> None:
    """Two training steps (batch 32 and a smaller last batch), then evaluation."""
    model, x, y, loss, make_opt = program(dtype)
    opt = make_opt(model.parameters())
    trainer = Trainer(model, loss, opt, metrics=(), progress=False)
    n = len(x) // 2 + 8                       # a full batch of 32 ... and a ragged one
    trainer.fit((x[:n], y[:n]), epochs=1, batch_size=n - 8)
    trainer.evaluate((x[n:], y[n:]), batch_size=32)


def _region_pool() -> None:
    """The helper-thread pool's own kernels (yscv/compute/regions.py): the
    small models above never split a call over two threads, large ones do."""
    from .compute import regions

    regions.run_region(lambda st: None, 2)


def _large_norms(dtype, category: str) -> None:
    """The normalisations' region tier (yscv/compute/norm.py): the small
    models above run the row kernels directly, inputs of two grains or more
    (large batches or images) the region kernels; forward, backward and
    evaluation of batch norm (``cnn``) or layer norm (``transformer``)."""
    from .engine.graph import Graph

    g = Graph(dtype)
    if category == "cnn":
        shape = (4, 32, 32, 256)                 # 2**20 values: two grains
        x = g.variable(np.ones(shape, dtype))
        c = shape[-1]
        stats = (g.constant(np.zeros(c, dtype)), g.constant(np.ones(c, dtype)))
        gamma, beta = g.variable(np.ones(c, dtype)), g.variable(np.zeros(c, dtype))
        g.backward(g.sum(g.batch_norm(x, gamma, beta, *stats, training=True)))
        g.batch_norm(x, gamma, beta, *stats, training=False)
    elif category == "transformer":
        x = g.variable(np.ones((4096, 128), dtype))   # 2**19 values: two grains
        g.backward(g.sum(g.layer_norm(x, g.variable(np.ones(128, dtype)))))


def _large_convs(dtype) -> None:
    """The Winograd kernels of 3x3 convolutions (yscv/compute/conv_winograd.py):
    the small ``cnn`` model's 8x8 images stay on the direct tiles, images of
    16x16 and more with 32+ channels take Winograd for the forward and the
    data gradient; 64 channels run its 6 x 4-vector tiles, 32 its 8-row ones."""
    from .engine.graph import Graph

    g = Graph(dtype)
    x = g.variable(np.ones((2, 16, 16, 32), dtype))
    h = g.conv2d(x, g.variable(np.ones((3, 3, 32, 64), dtype)), g.variable(np.ones(64, dtype)),
                 padding=1)
    g.backward(g.sum(g.conv2d(h, g.variable(np.ones((3, 3, 64, 32), dtype)), padding=1)))


def _large_cross_entropy(dtype) -> None:
    """Cross-entropy's fused kernels (yscv/compute/loss.py): the models above
    have small logits, which run as NumPy operations; [512, 10] logits
    (more than ``NUMPY_MAX_ELEMENTS``) run the kernels, forward and backward."""
    from .engine.graph import Graph

    g = Graph(dtype)
    x = g.variable(np.zeros((512, 10), dtype))
    g.backward(g.cross_entropy(x, np.arange(512) % 10))


def _gemm_shapes(shapes, kinds) -> int:
    """Measure the GEMM choice (yscv/compute/gemm_choice.py) of each product
    ``[M, K] @ [K, N]`` in ``shapes`` and of its two gradient products
    (``g @ b.T`` and ``a.T @ g``), for each dtype; returns how many shape
    classes were measured (those already in the choices file are not)."""
    from .compute import gemm, gemm_choice

    before = gemm_choice.calibration_stats()[0]
    for dt in kinds:
        for M, K, N in shapes:
            a = np.ones((M, K), dtype=dt)
            b = np.ones((K, N), dtype=dt)
            g = np.ones((M, N), dtype=dt)
            gemm.dot(a, b)
            gemm.dot(g, b.T)      # the input gradient
            gemm.dot(a.T, g)      # the weight gradient
    return gemm_choice.calibration_stats()[0] - before


def parse_gemm_shape(text: str) -> tuple:
    """``"128x784x512"`` -> ``(128, 784, 512)`` (M, K, N of ``[M, K] @ [K, N]``)."""
    parts = text.lower().split("x")
    try:
        dims = tuple(int(p) for p in parts)
    except ValueError:
        dims = ()
    if len(dims) != 3 or min(dims) < 1:
        raise ValueError(f"warmup: a GEMM shape is MxKxN with three positive integers, "
                         f"got {text!r}")
    return dims


def warmup(categories=None, dtypes=("float32",), verbose: bool = False, gemm=()) -> dict:
    """Compile (or load from the cache) the kernels of ``categories`` (names
    of `CATEGORIES`, default all) for each of ``dtypes``, and measure
    the GEMM choice of the products ``gemm`` (``(M, K, N)`` tuples, with
    their gradient products); returns the seconds each ``(category, dtype)``
    took (and ``("gemm", "")``)."""
    categories = list(CATEGORIES) if categories is None else list(categories)
    gemm = [parse_gemm_shape(s) if isinstance(s, str) else tuple(s) for s in gemm]
    for c in categories:
        if c not in CATEGORIES:
            raise ValueError(f"warmup: unknown category {c!r}; choose from {list(CATEGORIES)}")
    kinds = []
    for d in dtypes:
        dt = np.dtype(d)
        if dt not in (np.float32, np.float64):
            raise ValueError(f"warmup: dtype must be float32 or float64, got {d!r}")
        kinds.append(dt.type)
    seconds = {}
    _region_pool()
    for dt in kinds:
        for c in categories:
            t0 = time.perf_counter()
            for program in CATEGORIES[c]:
                _train(program, dt)
            _large_norms(dt, c)
            if c == "cnn":
                _large_convs(dt)
            if c == categories[0]:
                _large_cross_entropy(dt)
            seconds[c, np.dtype(dt).name] = time.perf_counter() - t0
            if verbose:
                print(f"yscv.warmup: {c:12s} {np.dtype(dt).name:8s} "
                      f"{seconds[c, np.dtype(dt).name]:6.2f} s", flush=True)
    if gemm:
        t0 = time.perf_counter()
        measured = _gemm_shapes(gemm, kinds)
        seconds["gemm", ""] = time.perf_counter() - t0
        if verbose:
            print(f"yscv.warmup: GEMM choices measured for {measured} shape classes "
                  f"{seconds['gemm', '']:6.2f} s", flush=True)
    return seconds


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m yscv.warmup",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--dtype", nargs="+", default=["float32"], metavar="DTYPE",
                    help="float32 (default) and/or float64")
    ap.add_argument("--only", nargs="+", default=None, metavar="CATEGORY",
                    help=f"some of {', '.join(CATEGORIES)} (default: all)")
    ap.add_argument("--gemm", nargs="+", default=(), metavar="MxKxN",
                    help="also measure the GEMM choice of these products [M, K] @ [K, N] "
                         "and their gradient products (e.g. 128x784x512)")
    ap.add_argument("--quiet", action="store_true", help="print nothing")
    args = ap.parse_args(argv)
    try:
        seconds = warmup(args.only, args.dtype, verbose=not args.quiet, gemm=args.gemm)
    except ValueError as e:
        ap.error(str(e))
    if not args.quiet:
        print(f"yscv.warmup: done in {sum(seconds.values()):.1f} s")


if __name__ == "__main__":
    main()
