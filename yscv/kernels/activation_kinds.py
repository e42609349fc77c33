"""The ``kind`` codes of the fused activation kernels
(`yscv.kernels.activation.unary_forward` / ``unary_backward``).

A module of its own, without numba, so that the op modules can import the
codes at ``import yscv`` time (kernel modules are imported lazily).
"""
SIGMOID = 0
TANH = 1
GELU_ERF = 2
GELU_TANH = 3
GELU_SIGMOID = 4
SILU = 5
MISH = 6
SOFTPLUS = 7
#: backward only: erf-GELU's derivative with Phi(x) read from the forward's
#: output as y / x (no erf per element; yscv/kernels/activation.py)
GELU_ERF_FROM_OUTPUT = 8
