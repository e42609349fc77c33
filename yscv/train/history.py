"""``History``: per-step and per-epoch training records; CSV / JSON / PNG output."""
from __future__ import annotations

import csv
import json
import math
import os

__all__ = ["History"]


class History:
    """What a fit loop recorded.

    Attributes:
        steps: one dict per optimizer step: ``step`` (1-based global count),
            ``epoch`` (0-based), ``loss``, ``lr``.
        epochs: one dict per epoch: ``epoch``, ``loss`` (mean training loss),
            the training metrics, ``val_loss`` and ``val_<metric>`` when
            validating, ``lr`` and ``time`` (seconds).

    ``history["val_loss"]`` lists one epoch column (Keras-style);
    `step_losses` lists every step's loss.
    """

    def __init__(self, steps=None, epochs=None):
        self.steps = list(steps or [])
        self.epochs = list(epochs or [])

    # -------------------------------------------------------------- logging
    def log_step(self, step: int, epoch: int, loss: float, lr) -> None:
        self.steps.append({"step": int(step), "epoch": int(epoch), "loss": float(loss),
                           "lr": None if lr is None else float(lr)})

    def log_epoch(self, record: dict) -> None:
        self.epochs.append(dict(record))

    # ------------------------------------------------------------- reading
    @property
    def step_losses(self) -> list:
        return [r["loss"] for r in self.steps]

    def __getitem__(self, key: str) -> list:
        if not any(key in r for r in self.epochs):
            raise KeyError(f"History: no epoch column {key!r}; have {self.columns()}")
        return [r.get(key) for r in self.epochs]

    def columns(self) -> list:
        cols = []
        for r in self.epochs:
            for k in r:
                if k not in cols:
                    cols.append(k)
        return cols

    def __len__(self) -> int:
        return len(self.epochs)

    def __repr__(self) -> str:
        return f"History({len(self.epochs)} epochs, {len(self.steps)} steps, columns={self.columns()})"

    # ------------------------------------------------------ serialisation
    def to_dict(self) -> dict:
        return {"steps": [dict(r) for r in self.steps], "epochs": [dict(r) for r in self.epochs]}

    @classmethod
    def from_dict(cls, d: dict) -> "History":
        return cls(d.get("steps", []), d.get("epochs", []))

    def save_json(self, path) -> str:
        """Write ``{"steps": [...], "epochs": [...]}`` as JSON; returns the path."""
        path = os.fspath(path)
        with open(path, "w") as f:
            json.dump(self.to_dict(), f, indent=1)
        return path

    @classmethod
    def load_json(cls, path) -> "History":
        with open(os.fspath(path)) as f:
            return cls.from_dict(json.load(f))

    def save_csv(self, path, which: str = "epochs") -> str:
        """Write the epoch table (``which="epochs"``) or the step table
        (``which="steps"``) as CSV with a header row; returns the path."""
        if which not in ("epochs", "steps"):
            raise ValueError(f"History.save_csv: which must be 'epochs' or 'steps', got {which!r}")
        rows = self.epochs if which == "epochs" else self.steps
        cols = self.columns() if which == "epochs" else ["step", "epoch", "loss", "lr"]
        path = os.fspath(path)
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=cols)
            w.writeheader()
            for r in rows:
                w.writerow({k: r.get(k, "") for k in cols})
        return path

    def plot(self, path, metrics=None) -> str:
        """Plot to a PNG: step losses (light) and epoch curves of ``metrics``
        (default: every numeric epoch column but ``epoch``/``lr``/``time``).

        Needs matplotlib (imported here, Agg backend); raises ImportError
        with an install hint when it is missing.
        """
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            raise ImportError("History.plot needs matplotlib: pip install matplotlib "
                              "(or save_csv / save_json and plot elsewhere)") from None
        if metrics is None:
            metrics = [c for c in self.columns() if c not in ("epoch", "lr", "time")
                       and all(isinstance(r.get(c), (int, float)) for r in self.epochs)]
        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        ax = axes[0]
        if self.steps:
            ax.plot([r["step"] for r in self.steps], self.step_losses, lw=0.7, alpha=0.6,
                    label="step loss")
        ax.set_xlabel("step")
        ax.set_ylabel("loss")
        ax.legend()
        ax = axes[1]
        epochs = [r["epoch"] + 1 for r in self.epochs]
        for m in metrics:
            vals = [r.get(m) for r in self.epochs]
            if all(isinstance(v, (int, float)) and math.isfinite(v) for v in vals):
                ax.plot(epochs, vals, marker="o", label=m)
        ax.set_xlabel("epoch")
        ax.legend()
        fig.tight_layout()
        path = os.fspath(path)
        fig.savefig(path, dpi=100)
        plt.close(fig)
        return path
