"""The neon frontend: layers, optimizers, initializers, data and training loop.

    from axgraph.frontends.neon import ax, Affine, Sequential, Rectlin, Softmax, \\
        GlorotUniform, GradientDescentMomentum, ArrayIterator, fit

Layers learn their input axes on the first call; optimizers turn a cost into
one update op, so one call of a computation is one training step. Nervana
Graph v0.4's spellings live beside axgraph's own (one implementation each):
``layer.train_outputs(x)``, Preprocess, Conv2D, Pool2D, GaussianInit,
UniformInit, ConstantInit, SequentialArrayIterator, NgraphArgparser,
make_bound_computation, make_default_callbacks, loop_train and loop_eval.
Transformer blocks are built from LayerNorm, RMSNorm and MultiHeadAttention
(causal or not, with a KeyValueCache for generating one token at a time).

Errors. Every error raised on purpose is an ``axgraph.AxgraphError``; the
ones particular to this frontend live in its modules: ``LayerError`` (a
layer configured with settings that cannot work) and ``LayerAxesError`` (an
input whose axes a layer cannot use, also an ``axgraph.IncompatibleAxesError``)
in ``axgraph.frontends.neon.layer``; ``ActivationError`` in ``.activation``;
``OptimizerError`` in ``.optimizer``; ``CallbackDataError`` in
``.callback_data``; ``PlotError`` (matplotlib missing) in ``.plots``. Each class's and function's docstring lists what it raises.

The ``>>>`` examples in these docstrings run as written after
``from axgraph.frontends.neon import *`` (the test suite runs them).
"""
from .activation import Explin, Identity, Logistic, Normalizer, Rectlin, Softmax, Tanh
from .argparser import NgraphArgparser
from .attention import KeyValueCache, MultiHeadAttention
from .axis import ar, ax
from .bound_computation import BoundComputation, make_bound_computation
from .checkpoint import Checkpoint, CheckpointCallback
from .callbacks import Callback, EarlyStopping, FitState, MetricsHistory, ProgressBar, fit
from .data import ArrayIterator, SequentialArrayIterator
from .initializers import (Constant, ConstantInit, Gaussian, GaussianInit, GlorotUniform,
                           Initializer, Kaiming, Uniform, UniformInit, fans)
from .initializers import set_seed as set_init_seed
from .layer import (BatchNorm, Bias, BiRNN, Conv2D, Convolution, Dropout, Embedding, GRU, LSTM,
                    Affine, Layer, Linear, LookupTable, Pool2D, Pooling, Preprocess, Recurrent,
                    Residual, Sequential, inference_mode_on, is_inference_mode)
from .norm_layers import LayerNorm, RMSNorm
from .plots import PlotError, plot_history
from .optimizer import (Adagrad, Adam, AdamW, ExpSchedule, GradientDescentMomentum, Optimizer,
                        PowerSchedule, RMSProp, Schedule, StepSchedule, WarmupCosineSchedule)
from .train_loop import (CallbackContainer, CallbackPhase, LossCallback, ProgressCallback,
                         RunTimerCallback, TrainCostCallback, TrainLoggerCallback, loop_eval,
                         loop_train, make_default_callbacks)

__all__ = ["Explin", "Identity", "Logistic", "Normalizer", "Rectlin", "Softmax", "Tanh",
           "NgraphArgparser", "KeyValueCache", "MultiHeadAttention", "ar", "ax",
           "BoundComputation", "make_bound_computation", "Checkpoint", "CheckpointCallback",
           "Callback", "EarlyStopping", "FitState", "MetricsHistory", "ProgressBar", "fit",
           "ArrayIterator", "SequentialArrayIterator", "Constant", "ConstantInit", "Gaussian",
           "GaussianInit", "GlorotUniform", "Initializer", "Kaiming", "Uniform", "UniformInit",
           "fans", "set_init_seed", "BatchNorm", "Bias", "BiRNN", "Conv2D", "Convolution",
           "Dropout", "GRU", "LSTM", "Affine", "Layer", "LayerNorm", "Linear", "LookupTable",
           "Pool2D", "Pooling", "Preprocess", "RMSNorm", "Recurrent", "Residual", "Sequential",
           "Embedding", "inference_mode_on", "is_inference_mode", "Adagrad", "Adam", "AdamW",
           "ExpSchedule", "GradientDescentMomentum", "Optimizer", "PowerSchedule", "RMSProp",
           "Schedule", "StepSchedule", "WarmupCosineSchedule", "PlotError", "plot_history",
           "CallbackContainer", "CallbackPhase", "LossCallback", "ProgressCallback",
           "RunTimerCallback", "TrainCostCallback", "TrainLoggerCallback", "loop_eval",
           "loop_train", "make_default_callbacks"]
