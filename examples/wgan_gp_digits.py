"""A Wasserstein GAN with gradient penalty (WGAN-GP) on the digits, with yscv.

    python examples/wgan_gp_digits.py            # trains, prints the critic's estimates
    python examples/wgan_gp_digits.py --quick    # small budget (tests)

The critic is two stride-2 3x3 convolutions with leaky ReLU and a linear
layer (8x8x1 -> 4x4x16 -> 2x2x32 -> 1); the generator a ReLU MLP from 16
noise values to 64 pixels in [0, 1] (sigmoid). The critic's loss is
D(fake) - D(real) + 10 (||grad_x D(x_hat)||_2 - 1)^2 at random interpolates
x_hat of real and fake images (Gulrajani et al., 2017): the penalty holds the
critic's gradient with respect to its INPUT, recorded with
``g.gradients(..., create_graph=True)``, and its own backward reaches the
critic's weights through the convolutions' recorded backward. Five critic
steps per generator step, Adam(1e-4, betas (0.5, 0.9)) as in the paper.
Printed: the critic's Wasserstein estimate D(real) - D(fake), the mean
gradient norm at the interpolates (the penalty drives it to 1), and a
sample quality figure: the mean distance from each generated image to its
nearest real image, against the same for uniform noise images.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import yscv  # noqa: E402
import yscv.nn as nn  # noqa: E402
import yscv.optim as optim  # noqa: E402

NOISE = 16


def load_digits():
    """The 1,797 8x8 digits as NHWC float32 in [0, 1] (shipped with scikit-learn)."""
    base = importlib.util.find_spec("sklearn").submodule_search_locations[0]
    data = np.loadtxt(os.path.join(base, "datasets", "data", "digits.csv.gz"), delimiter=",")
    return (data[:, :-1].reshape(-1, 8, 8, 1) / 16.0).astype(np.float32)


class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 16, 3, stride=2, padding=1)
        self.c2 = nn.Conv2d(16, 32, 3, stride=2, padding=1)
        self.out = nn.Linear(2 * 2 * 32, 1)

    def forward(self, g, x):
        h = g.leaky_relu(self.c1(g, x), 0.2)
        h = g.leaky_relu(self.c2(g, h), 0.2)
        return self.out(g, g.flatten(h))


def generator():
    return nn.Sequential(nn.Linear(NOISE, 128), nn.ReLU(), nn.Linear(128, 64), nn.Sigmoid())


def gradient_penalty(g, critic, x_hat):
    """(mean (||grad D(x_hat)|| - 1)^2, mean gradient norm): the gradient is recorded."""
    xh = g.variable(x_hat)
    (gx,) = g.gradients(g.sum(critic(g, xh)), [xh], create_graph=True)
    norms = g.sqrt(g.sum(g.reshape(gx * gx, (x_hat.shape[0], -1)), axis=1) + 1e-12)
    return g.mean((norms - 1.0) ** 2), float(np.mean(g.value(norms)))


def nearest_real_distance(samples, real):
    d = ((samples.reshape(len(samples), 1, -1) - real.reshape(1, len(real), -1)) ** 2).sum(-1)
    return float(np.sqrt(d.min(axis=1)).mean())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1500, help="generator steps")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--quick", action="store_true", help="40 generator steps")
    args = ap.parse_args(argv)
    steps = 40 if args.quick else args.steps
    real_all = load_digits()
    yscv.manual_seed(0)
    critic, gen = Critic(), generator()
    opt_c = optim.Adam(critic.parameters(), lr=1e-4, betas=(0.5, 0.9))
    opt_g = optim.Adam(gen.parameters(), lr=1e-4, betas=(0.5, 0.9))
    rng = np.random.default_rng(0)
    b = args.batch

    def fake_batch(g, n):
        z = g.constant(rng.standard_normal((n, NOISE)).astype(np.float32))
        return g.reshape(gen(g, z), (n, 8, 8, 1))

    history = []
    for step in range(steps):
        for _ in range(5):
            g = yscv.Graph()
            real = real_all[rng.integers(0, len(real_all), b)]
            with g.no_grad():
                fake = np.array(g.value(fake_batch(g, b)))
            eps = rng.uniform(size=(b, 1, 1, 1)).astype(np.float32)
            penalty, gnorm = gradient_penalty(g, critic, eps * real + (1 - eps) * fake)
            d_real = g.mean(critic(g, g.constant(real)))
            d_fake = g.mean(critic(g, g.constant(fake)))
            g.backward(d_fake - d_real + 10.0 * penalty)
            opt_c.step()
            opt_c.zero_grad()
            w_est = float(g.value(d_real)) - float(g.value(d_fake))
        g = yscv.Graph()
        loss_g = -g.mean(critic(g, fake_batch(g, b)))
        g.backward(loss_g)
        opt_g.step()
        opt_g.zero_grad()
        critic.zero_grad()          # the generator step's gradients reach the critic too
        history.append((w_est, gnorm))
        if step % max(1, steps // 5) == 0 or step == steps - 1:
            print(f"step {step:5d}  Wasserstein estimate {w_est:+.3f}  "
                  f"gradient norm at interpolates {gnorm:.3f}")
    g = yscv.Graph()
    with g.no_grad():
        samples = np.array(g.value(fake_batch(g, 200)))
    noise = rng.uniform(size=samples.shape).astype(np.float32)
    reference = real_all[:600]
    quality = nearest_real_distance(samples, reference)
    chance = nearest_real_distance(noise, reference)
    print(f"mean distance to the nearest real digit: generated {quality:.3f}, "
          f"uniform noise {chance:.3f}")
    return {"history": history, "quality": quality, "noise": chance}


if __name__ == "__main__":
    main()
