"""Optimizers and learning-rate schedulers (PyTorch's update rules and API).

    opt = yscv.optim.Adam(model.parameters(), lr=1e-3)
    sched = yscv.optim.lr_scheduler.StepLR(opt, step_size=10)   # also yscv.optim.StepLR
    ...
    g.backward(loss); opt.step(); opt.zero_grad(); sched.step()
"""
from . import lr_scheduler
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .lr_scheduler import (ChainedScheduler, CosineAnnealingLR, ExponentialLR, LambdaLR, LinearLR,
                           LRScheduler, MultiStepLR, OneCycleLR, ReduceLROnPlateau, SequentialLR,
                           StepLR)
from .optimizer import Optimizer
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "lr_scheduler",
           "LRScheduler", "LambdaLR", "StepLR", "MultiStepLR", "ExponentialLR",
           "CosineAnnealingLR", "LinearLR", "OneCycleLR", "SequentialLR", "ChainedScheduler",
           "ReduceLROnPlateau"]
