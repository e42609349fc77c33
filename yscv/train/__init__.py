"""The fit loop: `Trainer` / `fit`, callbacks and `History`.

    history = yscv.train.fit(model, "cross_entropy", opt, (X, y), epochs=10, batch_size=64,
                             val_data=(Xv, yv), checkpoint_dir="runs/a", checkpoint_every=100)
"""
from .callbacks import Callback, EarlyStopping, ModelCheckpoint, latest_checkpoint, list_checkpoints
from .history import History
from .trainer import Trainer, accuracy, fit

__all__ = ["Trainer", "fit", "History", "Callback", "ModelCheckpoint", "EarlyStopping",
           "accuracy", "latest_checkpoint", "list_checkpoints"]
