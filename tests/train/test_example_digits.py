"""examples/train_digits_cnn.py with a reduced budget: real accuracy, and an
exact resume of the CNN (checkpointed blocks, batch norm, dropout, one-cycle)."""
from __future__ import annotations

import importlib.util
import os
import pathlib

import pytest

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "train_digits_cnn.py"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("train_digits_cnn", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_quick_run_reaches_accuracy_and_resumes_exactly(example, tmp_path):
    ckpt = tmp_path / "ckpt"
    args = ["--quick", "--checkpoint-dir", str(ckpt), "--checkpoint-every", "40", "--no-progress"]
    res = example.main(args)
    assert res["steps"] == 5 * 23
    assert res["test_accuracy"] >= 0.93, res["test_accuracy"]
    names = sorted(os.listdir(ckpt))
    assert names == ["ckpt-00000040.safetensors", "ckpt-00000080.safetensors", "final.safetensors"]

    # crash after step 40: drop the newer checkpoint, resume from step 40
    os.remove(ckpt / "ckpt-00000080.safetensors")
    again = example.main(args + ["--resume"])
    assert again["history"].step_losses == res["history"].step_losses
    assert again["test_accuracy"] == res["test_accuracy"]
    assert again["test_loss"] == res["test_loss"]


def test_model_uses_activation_checkpointing_when_available(example):
    import numpy as np

    import yscv

    model = example.build_model(8)
    g = yscv.Graph()
    out = model(g, g.constant(np.zeros((2, 8, 8, 1), np.float32)))
    assert g.value(out).shape == (2, 10)
    if hasattr(yscv.Graph, "checkpoint"):
        assert len(g._segments) == 2  # the two conv blocks are checkpointed segments
