"""The fit loop's progress bar: a tqdm bar per epoch, shown when someone
watches (a terminal or a Jupyter / IPython kernel) or when asked for."""
from __future__ import annotations

import sys


def in_notebook() -> bool:
    """True inside a Jupyter / IPython kernel (notebooks, VS Code, Colab):
    stdout is not a terminal there, yet a (widget) progress bar shows."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    try:
        shell = ipython.get_ipython()
    except Exception:
        return False
    return shell is not None and getattr(shell, "kernel", None) is not None


def stdout_isatty() -> bool:
    try:
        return bool(sys.stdout.isatty())
    except (AttributeError, ValueError):
        return False


def epoch_bar(progress, epoch: int, epochs: int, n_batches: int, done: int):
    """The bar of epoch ``epoch`` (``done`` batches already done), or None.

    ``progress``: None (automatic: a bar on a terminal or in a notebook),
    True (a bar also without a terminal, on stderr), False (no bar)."""
    if progress is False:
        return None
    notebook = in_notebook()
    if progress is None and not (notebook or stdout_isatty()):
        return None
    if notebook:
        from tqdm.auto import tqdm  # a widget bar when ipywidgets is installed
    else:
        from tqdm import tqdm
    return tqdm(total=n_batches, initial=done, leave=False,
                desc=f"epoch {epoch + 1}/{epochs}")
