"""The core op set, one module per family; `CORE_OPS` lists every concrete op."""
from __future__ import annotations

from typing import Tuple, Type

from ..node import Node
from . import elementwise
from .elementwise import *  # noqa: F401,F403 - every elementwise op (elementwise.OPS)
from .elementwise import BinaryElementwise, Comparison, UnaryElementwise
from .fused import Fused
from .leaves import Constant, DimValue, Parameter, RandomNormal, RandomUniform
from .nn import (AvgPool, AvgPoolBackprop, Col2Im, Convolution, ConvolutionBackpropData,
                 ConvolutionBackpropFilters, Gather, Im2Col, MaxPool, MaxPoolBackprop, OneHot,
                 ScatterAdd)
from .reduction import (ArgMax, ArgMin, Dot, IndexReduction, LogSoftmax, LogSoftmaxBackprop, Max,
                        Min, Prod, Reduction, Softmax, SoftmaxBackprop, Sum)
from .shape import Broadcast, Concat, Pad, Reshape, Reverse, Slice, Transpose

CORE_OPS: Tuple[Type[Node], ...] = (
    # leaves
    Parameter, Constant, DimValue, RandomUniform, RandomNormal,
    # elementwise, as their module defines them
    *elementwise.OPS,
    # data movement
    Broadcast, Reshape, Transpose, Slice, Reverse, Concat, Pad,
    # contraction and reductions
    Dot, Sum, Prod, Max, Min, ArgMax, ArgMin, Softmax, LogSoftmax, SoftmaxBackprop,
    LogSoftmaxBackprop,
    # windows and indexing
    Convolution, ConvolutionBackpropData, ConvolutionBackpropFilters, Im2Col, Col2Im,
    MaxPool, AvgPool, MaxPoolBackprop, AvgPoolBackprop,
    Gather, ScatterAdd, OneHot,
    # scheduling: a group of the above run as one kernel (made by a fusion pass)
    Fused,
)

__all__ = [op.__name__ for op in CORE_OPS] + [
    "BinaryElementwise", "Comparison", "IndexReduction", "Reduction", "UnaryElementwise", "CORE_OPS"]
