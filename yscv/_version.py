"""The package version (one definition: ``yscv.__version__`` and every module
that stamps a file with it read it here)."""

__version__ = "0.1.0"
