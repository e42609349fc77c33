"""examples/transformer_lm.py with its --quick budget: the causal
character-level transformer learns (the loss falls well below a uniform
guess) and writes a sample from its prompt."""
from __future__ import annotations

import importlib.util
import pathlib

import numpy as np

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "transformer_lm.py"


def test_quick_run_loss_falls_and_samples(capsys):
    spec = importlib.util.spec_from_file_location("transformer_lm", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    res = mod.main(["--quick"])
    losses = res["losses"]
    assert len(losses) == 60
    uniform = np.log(res["vocab"])
    first, last = np.mean(losses[:5]), np.mean(losses[-10:])
    assert first > uniform - 0.3, (first, uniform)  # starts near a uniform guess
    assert last < uniform - 0.9, (last, uniform)    # and learns the character statistics
    assert last < first - 1.0, (first, last)
    assert res["sample"].startswith("Alice was ") and len(res["sample"]) == len("Alice was ") + 40
    out = capsys.readouterr().out
    assert "sample:" in out and "step   60" in out
