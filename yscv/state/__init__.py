"""Training state on disk: `save_checkpoint` writes a model's parameters and
buffers, the optimizer's and scheduler's state, the step, the RNG and a data
loader's position to one safetensors file, atomically; `load_checkpoint`
restores them bit for bit (docs/checkpoint_format.md).

``files`` the two calls and the metadata reader, ``encoding`` the values'
encoding and checksum, ``atomic`` the write-then-rename."""
from .files import load_checkpoint, read_checkpoint_metadata, save_checkpoint

__all__ = ["save_checkpoint", "load_checkpoint", "read_checkpoint_metadata"]
