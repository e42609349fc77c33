"""The GEMM policy for 2-d matrix products (``YSCV_GEMM``, `set_gemm`)."""
from __future__ import annotations

from .environment import _ENV

_GEMM_POLICIES = ("auto", "fastest", "tiles", "blas")

def get_gemm() -> str:
    """The GEMM policy: "auto", "fastest", "tiles" or "blas" (see the module
    docstring)."""
    return _gemm


def set_gemm(policy: str) -> None:
    """Set the GEMM policy for 2-d matrix products (matmul and its
    gradients):

    * ``"auto"`` (default): per shape class, the fastest of the ways that
      give the same bits as NumPy's BLAS, measured once on this machine and
      cached beside the kernel cache (yscv/compute/gemm_choice.py);
    * ``"fastest"``: the same measurement over every way, yscv's GEMM tiles
      included, which may round differently (last bits);
    * ``"tiles"``: yscv's tiles for float32 products of at least 2^18
      multiply-adds, unmeasured;
    * ``"blas"``: NumPy's BLAS by a fixed rule, unmeasured.
    """
    global _gemm
    if policy not in _GEMM_POLICIES:
        raise ValueError(f"set_gemm: policy must be one of {_GEMM_POLICIES}, got {policy!r}")
    _gemm = policy


def _gemm_from_env() -> str:
    raw = _ENV["YSCV_GEMM"]
    policy = {"0": "blas", "1": "tiles", "": "auto"}.get(raw, raw)
    if policy in _GEMM_POLICIES:
        return policy
    import warnings

    warnings.warn(f"YSCV_GEMM={raw!r} is not a GEMM policy {_GEMM_POLICIES} (or 0 / 1); "
                  "ignored", RuntimeWarning, stacklevel=3)
    return "auto"


_gemm = _gemm_from_env()
