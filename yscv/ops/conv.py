"""Conv ops (forward). See yscv/registry.py for the op contract."""
from __future__ import annotations

import numpy as np

from ..node import Op
from ..registry import register_forward


class ConvOps:
    """Graph methods of the conv category."""
