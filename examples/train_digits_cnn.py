"""Train a small CNN on scikit-learn's digits (8x8 grey images, NHWC) with yscv.

    python examples/train_digits_cnn.py                  # trains, prints the test accuracy
    python examples/train_digits_cnn.py --resume         # continue from the newest checkpoint
    python examples/train_digits_cnn.py --quick          # small budget (tests)
    mpiexec -n 2 python -m mpi4py examples/train_digits_cnn.py   # data-parallel, 2 ranks

The model: two convolution blocks (conv 3x3, batch norm, ReLU), the second
ending with 2x2 max pooling, run as activation-checkpointed segments
(``g.checkpoint``: their activations are released after the forward pass
and recomputed during backward), then dropout, flatten, a hidden linear
layer with dropout, and the 10-way classifier. Adam with a one-cycle
learning-rate schedule, cross-entropy loss, batches of 64.

Checkpoints go to ``--checkpoint-dir`` every ``--checkpoint-every`` steps
(the last 3 kept); ``--resume`` continues the run exactly where the newest
checkpoint left it (same batches, same dropout masks, same losses). The
default folder is ``runs/digits_cnn`` for one process and
``runs/digits_cnn_mpi<N>`` for a world of N processes (``mpiexec -n N``),
whose runs take other steps (each epoch is shared out over the ranks) and
so must not overwrite or resume the single-process one.
The held-out 20% of the images is the fit loop's validation data: the
per-epoch lines call its figures ``val_loss`` and ``val_accuracy``, the
last line prints the test accuracy on it. The learning curves (``loss``,
``val_loss``, ``accuracy``, ``val_accuracy`` per epoch, named as in those
lines) and its confusion matrix are drawn with matplotlib into
``<checkpoint-dir>/curves.png`` (``--plot PATH`` elsewhere, ``--plot ""``
not at all; without matplotlib a one-line notice says so).
``--no-progress`` drops the per-epoch output (the bar and the epoch lines)
and keeps the final accuracy line.
The data ships with scikit-learn (read without importing it): nothing is downloaded.
Time, kernel count and accuracy on the machines measured: docs/benchmarks.md,
"The main job".
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # run from a checkout without installing

import yscv  # noqa: E402
import yscv.distributed as dist  # noqa: E402  (a world of one without mpiexec)
import yscv.nn as nn  # noqa: E402
import yscv.optim as optim  # noqa: E402
from yscv.train import Trainer  # noqa: E402


class CheckpointedBlock(nn.Module):
    """Runs ``body`` as one activation-checkpointed segment while training
    (when the engine has ``Graph.checkpoint``), plainly otherwise."""

    def __init__(self, *layers):
        super().__init__()
        self.body = nn.Sequential(*layers)

    def forward(self, g, x):
        if self.training and hasattr(type(g), "checkpoint"):
            return g.checkpoint(self.body, x)
        return self.body(g, x)


def build_model(width: int = 32) -> nn.Module:
    return nn.Sequential(
        CheckpointedBlock(nn.Conv2d(1, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU()),
        CheckpointedBlock(nn.Conv2d(width, 2 * width, 3, padding=1), nn.BatchNorm2d(2 * width),
                          nn.ReLU(), nn.MaxPool2d(2)),
        nn.Dropout(0.25),
        nn.Flatten(),                                   # [N, 4*4*2w] in (H, W, C) order
        nn.Linear(4 * 4 * 2 * width, 128), nn.ReLU(), nn.Dropout(0.3),
        nn.Linear(128, 10),
    )


def load_data(seed: int = 0):
    """Digits as NHWC float32 in [0, 1]: 80% train / 20% test, stratified.

    The 1,797 images ship with scikit-learn (``sklearn/datasets/data/
    digits.csv.gz``: 64 pixels and the label per row); they are read
    directly, and split by :func:`stratified_split`, scikit-learn's
    ``train_test_split(..., stratify=y)``: the same split, without importing
    scikit-learn and SciPy (0.6 s of start-up)."""
    import importlib.util

    sklearn_dir = importlib.util.find_spec("sklearn").submodule_search_locations[0]
    data = np.loadtxt(os.path.join(sklearn_dir, "datasets", "data", "digits.csv.gz"),
                      delimiter=",")
    x = (data[:, :-1].reshape(-1, 8, 8, 1) / 16.0).astype(np.float32)
    y = data[:, -1].astype(np.int64)
    train, test = stratified_split(y, test_size=0.2, seed=seed)
    return x[train], x[test], y[train], y[test]


def stratified_split(y, test_size: float, seed: int):
    """(train indices, test indices) of scikit-learn's
    ``train_test_split(..., test_size=test_size, random_state=seed,
    stratify=y)`` (its StratifiedShuffleSplit, step for step, with the same
    random draws): each class contributes in proportion to its size, the
    remainders going to the classes with the largest fractional parts (ties
    drawn at random), then each class and both sets are shuffled."""
    rng = np.random.RandomState(seed)
    n_test = int(np.ceil(test_size * len(y)))
    classes, y_idx, counts = np.unique(y, return_inverse=True, return_counts=True)
    members = np.split(np.argsort(y_idx, kind="stable"), np.cumsum(counts)[:-1])

    def share(counts, n_draws):        # sklearn.utils.extmath._approximate_mode
        exact = counts / counts.sum() * n_draws
        take = np.floor(exact)
        need = int(n_draws - take.sum())
        for value in np.sort(np.unique(exact - take))[::-1]:
            if need <= 0:
                break
            (tied,) = np.where(exact - take == value)
            add = rng.choice(tied, size=min(len(tied), need), replace=False)
            take[add] += 1
            need -= len(add)
        return take.astype(int)

    n_train_c = share(counts, len(y) - n_test)
    n_test_c = share(counts - n_train_c, n_test)
    train, test = [], []
    for i in range(len(classes)):
        shuffled = members[i].take(rng.permutation(counts[i]), mode="clip")
        train.extend(shuffled[:n_train_c[i]])
        test.extend(shuffled[n_train_c[i]:n_train_c[i] + n_test_c[i]])
    return rng.permutation(train), rng.permutation(test)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--epochs", type=int, default=12)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=4e-3, help="peak learning rate (one-cycle)")
    ap.add_argument("--width", type=int, default=32, help="channels of the first conv")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--checkpoint-dir", default=None,
                    help="default runs/digits_cnn, or runs/digits_cnn_mpi<N> under mpiexec -n N")
    ap.add_argument("--checkpoint-every", type=int, default=50, help="steps between checkpoints")
    ap.add_argument("--resume", action="store_true", help="continue from the newest checkpoint")
    ap.add_argument("--quick", action="store_true", help="small budget: 5 epochs, width 16")
    ap.add_argument("--no-progress", action="store_true",
                    help="print nothing per epoch (the final accuracy line is still printed)")
    ap.add_argument("--plot", default=None,
                    help='PNG of the learning curves and confusion matrix '
                         '(default <checkpoint-dir>/curves.png; "" for none)')
    return ap.parse_args(argv)


def default_checkpoint_dir(world_size: int) -> str:
    """``runs/digits_cnn`` for one process, ``runs/digits_cnn_mpi<N>`` for a
    world of N: a data-parallel run takes 1/N of the steps per epoch, so its
    checkpoints are another run's and live in their own folder."""
    if world_size == 1:
        return os.path.join("runs", "digits_cnn")
    return os.path.join("runs", f"digits_cnn_mpi{world_size}")


def confusion_matrix(y_true, y_pred, n_classes: int = 10) -> np.ndarray:
    """Counts [true class, predicted class]."""
    counts = np.zeros((n_classes, n_classes), np.int64)
    np.add.at(counts, (y_true, y_pred), 1)
    return counts


def plot_run(history, confusion, path: str):
    """Loss and accuracy per epoch (training and validation) and the
    validation data's confusion matrix, side by side, as a PNG at ``path``;
    returns the path, or None (after a one-line notice) when matplotlib is
    not installed."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print('no plot: matplotlib is not installed (pip install -e ".[examples]")')
        return None
    fig = draw_run(plt, history, confusion)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def draw_run(plt, history, confusion):
    """The figure of ``plot_run``: each curve is labelled with its History
    column (``loss`` / ``val_loss``, ``accuracy`` / ``val_accuracy``), the
    names the per-epoch lines print."""
    epochs = [r["epoch"] + 1 for r in history.epochs]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.4))
    for ax, key, title in ((axes[0], "loss", "cross-entropy loss"),
                           (axes[1], "accuracy", "accuracy")):
        ax.plot(epochs, history[key], marker="o", label=key)
        ax.plot(epochs, history["val_" + key], marker="o", label="val_" + key)
        ax.set_xlabel("epoch")
        ax.set_title(title)
        ax.grid(alpha=0.3)
        ax.legend()
    ax = axes[2]
    ax.imshow(confusion, cmap="Blues")
    for (i, j), n in np.ndenumerate(confusion):
        if n:
            ax.text(j, i, str(n), ha="center", va="center", fontsize=8,
                    color="white" if n > confusion.max() / 2 else "black")
    ax.set_xticks(range(10))
    ax.set_yticks(range(10))
    ax.set_xlabel("predicted digit")
    ax.set_ylabel("true digit")
    ax.set_title(f"val data: {np.trace(confusion)} of {confusion.sum()} right")
    # fixed margins: tight_layout() drew the whole figure once more to measure it
    fig.subplots_adjust(left=0.04, right=0.99, bottom=0.11, top=0.93, wspace=0.17)
    return fig


def main(argv=None) -> dict:
    args = parse_args(argv)
    if args.quick:
        args.epochs, args.width = min(args.epochs, 5), 16
    if args.checkpoint_dir is None:
        args.checkpoint_dir = default_checkpoint_dir(dist.world_size())
    t0 = time.perf_counter()
    xtr, xte, ytr, yte = load_data(args.seed)
    yscv.manual_seed(args.seed)  # initialisation and dropout masks
    model = build_model(args.width)
    opt = optim.Adam(model.parameters(), lr=args.lr)
    # data-parallel (mpiexec): each rank takes 1/world of the samples, batch_size per rank
    per_rank = -(-len(xtr) // dist.world_size())
    steps_per_epoch = -(-per_rank // args.batch_size)
    sched = optim.OneCycleLR(opt, max_lr=args.lr, epochs=args.epochs,
                             steps_per_epoch=steps_per_epoch, pct_start=0.25)
    trainer = Trainer(model, "cross_entropy", opt, sched, seed=args.seed,
                      checkpoint_dir=args.checkpoint_dir, checkpoint_every=args.checkpoint_every,
                      keep_last=3, progress=not args.no_progress)
    rank0 = dist.rank() == 0             # [distributed] rank 0 prints
    if rank0 and not args.no_progress:
        print(f"digits: {len(xtr)} train / {len(xte)} test images 8x8x1; "
              f"{model.num_parameters()} parameters; {args.epochs} epochs of {steps_per_epoch} steps")
    history = trainer.fit((xtr, ytr), epochs=args.epochs, batch_size=args.batch_size,
                          val_data=(xte, yte), resume=args.resume)
    test = trainer.evaluate((xte, yte))
    confusion = confusion_matrix(yte, trainer.predict(xte).argmax(axis=1))
    elapsed = time.perf_counter() - t0
    path = trainer.save_checkpoint(os.path.join(args.checkpoint_dir, "final.safetensors"))
    n_compiled, compile_seconds = yscv.kernels.compile_stats()
    if rank0:  # the result: printed with --no-progress too
        timing = f"{elapsed:.1f} s"
        if n_compiled:  # a first run (empty kernel cache); later runs load them from disk
            timing += f", {compile_seconds:.1f} s of it compiling {n_compiled} kernels"
        print(f"test accuracy {test['accuracy']:.4f}  test loss {test['loss']:.4f}  "
              f"({timing}; final checkpoint {path})")
    plot = None
    if dist.rank() == 0 and args.plot != "":
        plot = plot_run(history, confusion,
                        args.plot or os.path.join(args.checkpoint_dir, "curves.png"))
        if plot:
            print(f"learning curves and confusion matrix: {plot}")
    return {"test_accuracy": test["accuracy"], "test_loss": test["loss"], "seconds": elapsed,
            "history": history, "steps": trainer.global_step, "confusion": confusion,
            "plot": plot, "kernels_compiled": n_compiled}


if __name__ == "__main__":
    main()
