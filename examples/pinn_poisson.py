"""A physics-informed network solving a 2-D Poisson problem with yscv.

    python examples/pinn_poisson.py            # trains, prints the error against the exact solution
    python examples/pinn_poisson.py --quick    # small budget (tests)

The problem: -(u_xx + u_yy) = f on the unit square, u = 0 on its boundary,
with f = 2 (x (1 - x) + y (1 - y)), whose exact solution is
u* = x (1 - x) y (1 - y). The network is u(x, y) = x (1 - x) y (1 - y) N(x, y)
(the factor makes the boundary condition exact), N a tanh MLP 2-32-32-1.
The loss is the mean squared residual of the PDE at random collocation
points: it holds the Laplacian of the network with respect to its INPUTS,
obtained by differentiating the network's gradient again
(``g.gradients(..., create_graph=True)`` twice), and Adam trains the
weights through those second derivatives.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import yscv  # noqa: E402
import yscv.nn as nn  # noqa: E402
import yscv.optim as optim  # noqa: E402


def exact(p):
    x, y = p[:, :1], p[:, 1:]
    return x * (1 - x) * y * (1 - y)


def source(p):
    x, y = p[:, :1], p[:, 1:]
    return 2.0 * (x * (1 - x) + y * (1 - y))


class Solution(nn.Module):
    """u(p) = x (1 - x) y (1 - y) N(p)."""

    def __init__(self, width=32):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(2, width), nn.Tanh(), nn.Linear(width, width),
                                 nn.Tanh(), nn.Linear(width, 1))

    def forward(self, g, p):
        x = g.matmul(p, np.array([[1.0], [0.0]], dtype=g.dtype))
        y = g.matmul(p, np.array([[0.0], [1.0]], dtype=g.dtype))
        bubble = x * (1.0 - x) * y * (1.0 - y)
        return bubble * self.net(g, p)


def laplacian(g, u, p):
    """u_xx + u_yy at every point, as a recorded node of g (differentiable)."""
    (du,) = g.gradients(g.sum(u), [p], create_graph=True)          # [N, 2]: (u_x, u_y)
    total = None
    for axis in range(2):
        unit = np.zeros((2, 1), dtype=g.dtype)
        unit[axis] = 1.0
        d_axis = g.matmul(du, unit)                                 # u_x or u_y, [N, 1]
        (dd,) = g.gradients(g.sum(d_axis), [p], create_graph=True)  # its gradient in (x, y)
        term = g.matmul(dd, unit)                                   # u_xx or u_yy
        total = term if total is None else total + term
    return total


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--points", type=int, default=256)
    ap.add_argument("--quick", action="store_true", help="300 steps of 128 points")
    args = ap.parse_args(argv)
    steps, points = (300, 128) if args.quick else (args.steps, args.points)
    yscv.manual_seed(0)
    model = Solution().to(np.float64)
    opt = optim.Adam(model.parameters(), lr=3e-3)
    rng = np.random.default_rng(0)
    for step in range(steps):
        pts = rng.uniform(size=(points, 2))
        g = yscv.Graph(np.float64)
        p = g.variable(pts)
        u = model(g, p)
        residual = laplacian(g, u, p) + source(pts)
        loss = g.mean(residual * residual)
        g.backward(loss)
        opt.step()
        opt.zero_grad()
        last = float(g.value(loss))
        if step % max(1, steps // 5) == 0 or step == steps - 1:
            print(f"step {step:5d}  PDE residual {last:.3e}")
    grid = np.stack(np.meshgrid(np.linspace(0, 1, 41), np.linspace(0, 1, 41)), -1).reshape(-1, 2)
    g = yscv.Graph(np.float64)
    with g.no_grad():
        u = g.value(model(g, g.constant(grid)))
    ref = exact(grid)
    rel = float(np.linalg.norm(u - ref) / np.linalg.norm(ref))
    print(f"relative L2 error against the exact solution on a 41x41 grid: {rel:.3e}")
    return {"relative_error": rel, "final_residual": last}


if __name__ == "__main__":
    main()
