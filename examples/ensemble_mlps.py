"""An ensemble of MLPs trained as one batch: ``yscv.func.stack_module_state``
stacks the members' parameters into ``[M, *shape]`` arrays and
``yscv.func.vmap`` runs one member's forward and gradient over that axis.

    python examples/ensemble_mlps.py            # 5 MLPs on the digits, prints each accuracy
    python examples/ensemble_mlps.py --quick    # small budget (tests)

Every member sees the same batches but starts from its own initialisation;
each step is one vmapped ``value_and_grad`` of the mean cross-entropy
(``in_axes=(0, None, None)``: the parameters batched, the data shared) and
an SGD update of the stacked arrays. The members' test accuracies and the
accuracy of their averaged logits are printed.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # run from a checkout without installing
sys.path.insert(0, HERE)

import yscv  # noqa: E402
import yscv.nn as nn  # noqa: E402
from yscv import func  # noqa: E402
from train_digits_cnn import load_data  # noqa: E402


def member(seed):
    yscv.manual_seed(seed)
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--members", type=int, default=5)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.2)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    if args.quick:
        args.steps = 80
    xtr, xte, ytr, yte = load_data()
    models = [member(s) for s in range(args.members)]
    base = models[0]
    params, _ = func.stack_module_state(models)

    def loss(g, p, x, y):
        return g.cross_entropy(func.functional_call(base, p, (g, x)), y)

    step_fn = func.vmap(func.value_and_grad(loss), in_axes=(0, None, None))
    rng = np.random.default_rng(0)
    for step in range(args.steps):
        idx = rng.choice(len(xtr), size=args.batch, replace=False)
        losses, grads = step_fn(params, xtr[idx], ytr[idx])
        for k in params:
            params[k] = params[k] - args.lr * grads[k]
    logits = func.vmap(lambda g, p, x: func.functional_call(base, p, (g, x)),
                       in_axes=(0, None))(params, xte)
    accs = [float((lg.argmax(1) == yte).mean()) for lg in logits]
    mean_acc = float((logits.mean(0).argmax(1) == yte).mean())
    print("member test accuracies: " + ", ".join(f"{a:.3f}" for a in accs))
    print(f"ensemble (mean logits) test accuracy: {mean_acc:.3f}; final losses "
          + ", ".join(f"{v:.3f}" for v in np.ravel(losses)))
    return {"accuracies": accs, "ensemble": mean_acc, "losses": np.ravel(losses)}


if __name__ == "__main__":
    main()
