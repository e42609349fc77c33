"""Indexing ops (forward). See yscv/registry.py for the op contract."""
from __future__ import annotations

import numpy as np

from ..node import Op
from ..registry import register_forward


class IndexingOps:
    """Graph methods of the indexing category."""
