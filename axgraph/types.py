"""The type names Nervana Graph v0.4 programs refer to, in one place.

v0.4 code imports classes to test for them (``isinstance(op, TensorOp)``) or to
annotate. Each name here is the axgraph class with that meaning; where v0.4
had a separate base class for tensor-valued ops, axgraph's `Op` is that base
(an op without a value says so with ``is_tensor_op = False``).
"""
from __future__ import annotations

from .axes import Axes, Axis, AxisRole, DualAxis, FlattenedAxis, NameScope
from .names import NameableValue
from .op_graph.control import AssignOp, DoAllOp, SequentialOp, SetItem, ValueOfOp
from .op_graph.convolution import ConvolutionOp
from .op_graph.dot import DotOp
from .op_graph.elementwise import BinaryElementWiseOp, ElementWiseOp, UnaryElementWiseOp
from .op_graph.op import Op
from .op_graph.pooling import PoolingOp
from .op_graph.reductions import ReductionOp
from .op_graph.shape_ops import (AxesCastOp, BroadcastOp, ConcatOp, Flatten, PadOp,
                                 ReorderAxes, TensorSliceOp, Unflatten)
from .op_graph.tensors import AssignableTensorOp
from .transformers.base import Computation, Transformer

#: v0.4's base of ops with a tensor value.
TensorOp = Op
#: v0.4's name for the ops that reorder axes.
Dimshuffle = ReorderAxes
#: v0.4's name for tensor slicing.
TensorSlice = TensorSliceOp

__all__ = ["AssignOp", "AssignableTensorOp", "Axes", "AxesCastOp", "Axis", "AxisRole",
           "BinaryElementWiseOp", "BroadcastOp", "Computation", "ConcatOp", "ConvolutionOp",
           "Dimshuffle", "DoAllOp", "DotOp", "DualAxis", "ElementWiseOp", "Flatten",
           "FlattenedAxis", "NameScope", "NameableValue", "Op", "PadOp", "PoolingOp", "ReductionOp",
           "ReorderAxes", "SequentialOp", "SetItem", "TensorOp", "TensorSlice", "TensorSliceOp",
           "Transformer", "UnaryElementWiseOp", "Unflatten", "ValueOfOp"]
