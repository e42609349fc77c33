"""Train the README job's CNN, export it to ONNX, and run the test split in
ONNX Runtime: both accuracies are printed (they are equal).

    python examples/export_digits_onnx.py                 # the README job, then ONNX
    python examples/export_digits_onnx.py --quick         # small budget (tests)
    python examples/export_digits_onnx.py --out cnn.onnx  # where the file goes

Needs the ``onnx`` and ``onnxruntime`` packages (``pip install -e
".[examples,onnx]" onnxruntime``). The exported model takes NHWC images
``[batch, 8, 8, 1]`` (any batch size) and returns the 10 logits, as the
yscv model does.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))  # run from a checkout without installing

import yscv  # noqa: E402
import yscv.optim as optim  # noqa: E402
from yscv.onnx import export  # noqa: E402
from yscv.train import Trainer  # noqa: E402
from train_digits_cnn import build_model, load_data  # noqa: E402


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--epochs", type=int, default=12)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=4e-3, help="peak learning rate (one-cycle)")
    ap.add_argument("--width", type=int, default=32, help="channels of the first conv")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="the ONNX file (default: a temporary one)")
    ap.add_argument("--quick", action="store_true", help="small budget: 2 epochs, width 8")
    return ap.parse_args(argv)


def train(args, xtr, ytr):
    """The README job's training (train_digits_cnn.py) without checkpoints."""
    yscv.manual_seed(args.seed)
    model = build_model(args.width)
    opt = optim.Adam(model.parameters(), lr=args.lr)
    steps = -(-len(xtr) // args.batch_size)
    sched = optim.OneCycleLR(opt, max_lr=args.lr, epochs=args.epochs, steps_per_epoch=steps,
                             pct_start=0.25)
    trainer = Trainer(model, "cross_entropy", opt, sched, seed=args.seed, progress=False)
    trainer.fit((xtr, ytr), epochs=args.epochs, batch_size=args.batch_size)
    return model, trainer


def main(argv=None) -> dict:
    import onnxruntime as ort

    args = parse_args(argv)
    if args.quick:
        args.epochs, args.width = min(args.epochs, 2), 8
    xtr, xte, ytr, yte = load_data(args.seed)
    model, trainer = train(args, xtr, ytr)
    yscv_acc = trainer.evaluate((xte, yte))["accuracy"]

    with tempfile.TemporaryDirectory() as tmp:
        path = args.out or os.path.join(tmp, "digits_cnn.onnx")
        export(model, xte[:2], path, input_names=["image"], output_names=["logits"],
               dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}})
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        logits = sess.run(None, {"image": xte})[0]   # the whole test split, one batch
        size = os.path.getsize(path)
    onnx_acc = float(np.mean(np.argmax(logits, axis=1) == yte))
    yscv_logits = trainer.predict(xte)
    gap = float(np.max(np.abs(logits - yscv_logits)))
    print(f"test accuracy: yscv {yscv_acc:.4f}, ONNX Runtime {onnx_acc:.4f} "
          f"({len(yte)} images; largest logit difference {gap:.1e}; file {size} bytes)")
    return {"yscv_accuracy": yscv_acc, "onnx_accuracy": onnx_acc, "max_logit_diff": gap,
            "same_predictions": bool(np.array_equal(np.argmax(logits, 1),
                                                    np.argmax(yscv_logits, 1)))}


if __name__ == "__main__":
    main()
