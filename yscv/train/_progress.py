"""The fit loop's progress bar: a tqdm bar per epoch, shown when someone
watches (a terminal or a Jupyter / IPython kernel) or when asked for.

The bar is drawn on stderr, and only when stderr is a terminal (or in a
notebook): a bar redraws itself with carriage returns, which fill a
redirected stderr (a log file, a pipe) with hundreds of partial lines. There
the fit loop's one line per epoch (on stdout) is the whole progress report.

While yscv's kernels compile (the first steps of a first run, before the
kernel cache is filled) the bar says "compiling kernels" where it would show
the remaining time, and the seconds spent compiling do not enter its rate:
a compile-bound first step would otherwise predict minutes for an epoch that
takes seconds."""
from __future__ import annotations

import sys

from .. import kernels

_COMPILING_FORMAT = ("{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}, compiling kernels"
                     "{postfix}]")


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


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def stdout_isatty() -> bool:
    """True when stdout is a terminal."""
    return _isatty(sys.stdout)


def stderr_isatty() -> bool:
    """True when stderr, where the bar is drawn, is a terminal."""
    return _isatty(sys.stderr)


def epoch_bar(progress, epoch: int, epochs: int, n_batches: int, done: int):
    """The bar of epoch ``epoch`` (``done`` batches already done), or None.

    Args:
        progress: None (automatic: a bar when stdout and stderr are
            terminals, or in a notebook), True (a bar whenever stderr is a
            terminal, also when stdout is redirected), False (no bar).
        epoch: 0-based epoch index; the bar says ``epoch + 1``/``epochs``.
        epochs: number of epochs of the run.
        n_batches: batches in the epoch (the bar's total).
        done: batches of the epoch already done (a resumed epoch).

    Returns:
        An EpochBar, or None: no bar is drawn into a stderr that is not a
        terminal (outside a notebook), whatever ``progress`` says."""
    if progress is False:
        return None
    notebook = in_notebook()
    if not notebook:
        if not stderr_isatty():
            return None
        if progress is None and not stdout_isatty():
            return None
    if notebook:
        from tqdm.auto import tqdm  # a widget bar when ipywidgets is installed
    else:
        from tqdm import tqdm
    return EpochBar(tqdm(total=n_batches, initial=done, leave=False,
                         desc=f"epoch {epoch + 1}/{epochs}"))


class EpochBar:
    """A tqdm bar that says when kernels compile instead of predicting.

    ``step(loss)`` after each optimizer step, ``close()`` at the end. From
    the moment a kernel starts compiling until a step runs without
    compiling, the bar shows "compiling kernels" in place of the remaining
    time. A step that compiled is counted but not timed: tqdm's rate (and
    so its prediction) comes from the steps that did not compile."""

    def __init__(self, bar):
        self.bar = bar
        self.plain_format = bar.bar_format
        self.compiled_this_step = False
        self._watch = kernels.watch_compiles(self._on_compile)
        self._watch.__enter__()

    def _on_compile(self, started: bool) -> None:
        if started:
            self.compiled_this_step = True
            if self.bar.bar_format != _COMPILING_FORMAT:
                self.bar.bar_format = _COMPILING_FORMAT
                self.bar.refresh()

    def step(self, loss: float) -> None:
        bar = self.bar
        if self.compiled_this_step:
            self.compiled_this_step = False
            bar.n += 1
            bar.last_print_n, bar.last_print_t = bar.n, bar._time()   # the next interval starts now
        else:
            if bar.bar_format == _COMPILING_FORMAT:
                bar.bar_format = self.plain_format
            bar.update(1)
        bar.set_postfix(loss=f"{loss:.4f}")

    def close(self) -> None:
        self._watch.__exit__(None, None, None)
        self.bar.close()
