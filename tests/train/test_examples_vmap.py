"""The vmap examples at a small size: DP-SGD on the digits with a CNN
(per-sample gradients, clipped and noised) learns, and a vmapped ensemble of
five MLPs trains every member."""
from __future__ import annotations

import importlib.util
import pathlib
import sys

import numpy as np

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


def _load(name):
    sys.path.insert(0, str(EXAMPLES))
    try:
        spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path.remove(str(EXAMPLES))


def test_dp_sgd_learns_with_clipped_noised_per_sample_gradients():
    res = _load("dp_sgd_digits").main(["--quick"])
    norms = res["first_norms"]
    assert norms.shape == (64,) and np.all(norms > 0) and np.ptp(norms) > 0
    assert res["accuracy"] > 0.3, res  # 10 classes: chance is 0.1


def test_an_ensemble_of_five_mlps_trains_as_one_vmapped_step():
    res = _load("ensemble_mlps").main(["--quick"])
    assert len(res["accuracies"]) == 5
    assert min(res["accuracies"]) > 0.7, res
    assert len(set(np.round(res["losses"], 6))) == 5  # five different members


def test_per_sample_gradient_norms_are_larger_for_misclassified_images():
    res = _load("per_sample_grad_norms").main(["--quick"])
    norms, right = res["norms"], res["right"]
    assert norms.shape == right.shape and np.all(np.isfinite(norms))
    assert right.mean() > 0.7 and (~right).any()
    assert np.median(norms[~right]) > 2 * np.median(norms[right])
