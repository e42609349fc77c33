"""The higher-order examples at a small size: each trains through recorded
gradients (create_graph=True) and gets somewhere a broken second derivative
would not."""
from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


def _load(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_pinn_solves_poisson_through_its_laplacian():
    res = _load("pinn_poisson").main(["--quick"])
    # 300 steps of Adam on 128 points: within 3% of the exact solution (an
    # untrained network is ~100% off; a wrong Laplacian does not converge)
    assert res["relative_error"] < 0.03, res
    assert res["final_residual"] < 1e-3, res


def test_maml_meta_learns_an_initialisation_that_adapts_better():
    res = _load("maml_sine").main(["--quick"])
    assert res["meta_learned"] < 0.9 * res["baseline"], res


def test_wgan_gp_penalty_drives_the_critic_gradient_norm_towards_one():
    res = _load("wgan_gp_digits").main(["--steps", "10"])
    norms = [gn for _, gn in res["history"]]
    assert all(np.isfinite(norms))
    # the penalty (||grad_x D|| - 1)^2 pushes the norm up from its small start
    assert norms[-1] > 1.5 * norms[0], norms
