"""Backward side of every op, one module per category.

Importing this package registers every backward function in
`yscv.registry.BACKWARD`. A backward returns one gradient (or None) per
input and never touches the graph: the walk in graph.py unbroadcasts, checks
shapes and dtypes, and accumulates.
"""
from . import (  # noqa: F401
    elementwise,
    activation,
    reduce,
    linalg,
    shape,
    indexing,
    conv,
    pool,
    norm,
    recurrent,
    attention,
    loss,
    loss_functional,
    loss_ctc,
    custom,
)
