"""The core op set, one module per family; `CORE_OPS` lists every concrete op."""
from __future__ import annotations

from .elementwise import (Abs, Add, And, BinaryElementwise, Comparison, Convert, Cos, Divide,
                          Equal, Erf, Exp, Floor, Greater, GreaterEq, Less, LessEq, Log, Maximum,
                          Minimum, Multiply, Negative, Not, NotEqual, Or, Power, Rsqrt, Select,
                          Sigmoid, Sign, Sin, Sqrt, Subtract, Tan, Tanh, UnaryElementwise)
from .fused import Fused
from .leaves import Constant, DimValue, Parameter, RandomNormal, RandomUniform
from .nn import (AvgPool, AvgPoolBackprop, Col2Im, Convolution, ConvolutionBackpropData,
                 ConvolutionBackpropFilters, Gather, Im2Col, MaxPool, MaxPoolBackprop, OneHot,
                 ScatterAdd)
from .reduction import (ArgMax, ArgMin, Dot, IndexReduction, Max, Min, Prod, Reduction, Softmax,
                        Sum)
from .shape import Broadcast, Concat, Pad, Reshape, Reverse, Slice, Transpose

CORE_OPS = (
    # leaves
    Parameter, Constant, DimValue, RandomUniform, RandomNormal,
    # elementwise
    Negative, Abs, Sign, Sqrt, Exp, Log, Tanh, Sigmoid, Sin, Cos, Floor, Erf, Tan, Rsqrt, Not,
    Add, Subtract, Multiply, Divide, Power, Maximum, Minimum,
    Equal, NotEqual, Less, LessEq, Greater, GreaterEq, And, Or,
    Select, Convert,
    # data movement
    Broadcast, Reshape, Transpose, Slice, Reverse, Concat, Pad,
    # contraction and reductions
    Dot, Sum, Prod, Max, Min, ArgMax, ArgMin, Softmax,
    # windows and indexing
    Convolution, ConvolutionBackpropData, ConvolutionBackpropFilters, Im2Col, Col2Im,
    MaxPool, AvgPool, MaxPoolBackprop, AvgPoolBackprop,
    Gather, ScatterAdd, OneHot,
    # scheduling: a group of the above run as one kernel (made by a fusion pass)
    Fused,
)

__all__ = [op.__name__ for op in CORE_OPS] + [
    "BinaryElementwise", "Comparison", "IndexReduction", "Reduction", "UnaryElementwise", "CORE_OPS"]
