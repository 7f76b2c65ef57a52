"""The neon frontend: layers, optimizers, initializers, data and training loop.

    from axgraph.frontends.neon import ax, Affine, Sequential, Rectlin, Softmax, \\
        GlorotUniform, GradientDescentMomentum, ArrayIterator, fit

Layers learn their input axes on the first call; optimizers turn a cost into
one update op, so one call of a computation is one training step.
"""
from .activation import Explin, Identity, Logistic, Rectlin, Softmax, Tanh
from .axis import ar, ax
from .callbacks import Callback, EarlyStopping, FitState, MetricsHistory, ProgressBar, fit
from .data import ArrayIterator
from .initializers import Constant, Gaussian, GlorotUniform, Initializer, Kaiming, Uniform, fans
from .initializers import set_seed as set_init_seed
from .layer import (BatchNorm, Bias, BiRNN, Convolution, Dropout, GRU, LSTM, Affine, Layer,
                    Linear, LookupTable, Pooling, Recurrent, Sequential, inference_mode_on,
                    is_inference_mode)
from .optimizer import (Adagrad, Adam, ExpSchedule, GradientDescentMomentum, Optimizer,
                        PowerSchedule, RMSProp, Schedule, StepSchedule)

__all__ = ["Explin", "Identity", "Logistic", "Rectlin", "Softmax", "Tanh", "ar", "ax", "Callback",
           "EarlyStopping", "FitState", "MetricsHistory", "ProgressBar", "fit", "ArrayIterator",
           "Constant", "Gaussian", "GlorotUniform", "Initializer", "Kaiming", "Uniform", "fans",
           "set_init_seed", "BatchNorm", "Bias", "BiRNN", "Convolution", "Dropout", "GRU", "LSTM",
           "Affine", "Layer", "Linear", "LookupTable", "Pooling", "Recurrent", "Sequential",
           "inference_mode_on", "is_inference_mode", "Adagrad", "Adam", "ExpSchedule",
           "GradientDescentMomentum", "Optimizer", "PowerSchedule", "RMSProp", "Schedule",
           "StepSchedule"]
