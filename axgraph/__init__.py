"""axgraph: tensor programs over named axes (`import axgraph as ng`).

This module is the public namespace and only re-exports; each name lives in
the module of its concept (see docs/architecture.md).
"""
from typing import TYPE_CHECKING

from .autodiff import deriv
from .dims import dim
from .axes import (Axes, Axis, AxisRole, DualAxis, FlattenedAxis, NameScope, PaddedAxis,
                   SlicedAxis, axis, get_current_name_scope, make_axes, make_axis,
                   make_axis_role, make_name_scope, name_scope, with_name_scope)
from .errors import (AmbiguousAxesError, AxesError, AxgraphError, AxgraphTypeError,
                     AxgraphValueError, AxisLengthError, DTypeError, DuplicateAxisError,
                     ExecutionError, FeedError, GraphError, IncompatibleAxesError, LayoutError,
                     NotDifferentiableError, OutOfMemoryError, SerializationError,
                     ShapeCheckError, ShapeConflictError, ShapeError, TransformerClosedError,
                     UnmatchedAxesError, UnsupportedOperatorError)
from .op_graph.control import (AssignOp, SetItem, assign, doall, sequential, set_item, value_of)
from .op_graph.convolution import convolution, deconvolution, spatial_axis
from .op_graph.debug import PrintOp
from .op_graph.dot import dot
from .op_graph.einsum import einsum
from .op_graph.fills import fill, init_tensor
from .op_graph.lookup import lookuptable
from .op_graph import elementwise as _elementwise
from .op_graph.elementwise import *  # noqa: F401,F403 - ng.exp, ng.add, ...: elementwise.__all__
# (after elementwise's: nn's sigmoid also records its logits, for cross_entropy_binary)
from .op_graph.nn import (causal_mask, cross_entropy_binary, cross_entropy_binary_inner,
                          cross_entropy_multi, dropout, log_softmax, moments, one_hot, sigmoid,
                          softmax, squared_L2)
from .op_graph.activations import gelu, silu, softplus
from .op_graph.normalization import layer_norm, rms_norm
from .op_graph.op import Op
from .op_graph.pooling import pooling
from .op_graph.printing import format_graph
from .op_graph.random import normal, set_random_seed, uniform
from .op_graph.reductions import (argmax, argmin, batch_size, max, mean, min, prod, sum,
                                  tensor_size, variance)
from .op_graph.shape_ops import (axes_with_order, broadcast, cast_axes, concat_along_axis,
                                 dimshuffle, expand_dims, flatten, flatten_at, pad, rename,
                                 slice_along_axis, stack, tensor_slice, unflatten)
from .op_graph.tensors import (AssignableTensorOp, as_op, as_ops, constant, constant_storage,
                               constant_value, is_constant, is_constant_scalar, persistent_tensor,
                               placeholder, temporary, variable)
from .tensor_description import TensorDescription, reduce_strides

if TYPE_CHECKING:  # imported on first use (module __getattr__ below)
    from .shapes.inference import ShapeReport, infer_shapes
from .transformers import make_transformer, transformer_choices
from .transformers.nptransform import NumPyTransformer

__version__ = "0.1.0"

__all__ = ["deriv", "Axes", "Axis", "AxisRole", "DualAxis", "FlattenedAxis", "NameScope",
           "PaddedAxis", "SlicedAxis", "axis", "get_current_name_scope", "make_axes", "make_axis",
           "make_axis_role", "make_name_scope", "name_scope", "with_name_scope", "AmbiguousAxesError",
           "AxesError",
           "AxgraphError", "AxgraphTypeError", "AxgraphValueError", "AxisLengthError",
           "DTypeError", "DuplicateAxisError", "ExecutionError", "FeedError", "GraphError",
           "IncompatibleAxesError", "LayoutError", "NotDifferentiableError", "OutOfMemoryError",
           "UnsupportedOperatorError",
           "SerializationError",
           "ShapeError", "TransformerClosedError", "UnmatchedAxesError", "AssignOp", "SetItem",
           "assign", "doall", "sequential", "set_item", "value_of", "convolution", "deconvolution",
           "spatial_axis", "PrintOp", "dot", "einsum", "fill", "init_tensor", "lookuptable",
           "cross_entropy_binary", "cross_entropy_binary_inner", "cross_entropy_multi", "dropout",
           "moments", "one_hot", "sigmoid", "softmax", "squared_L2", "causal_mask", "log_softmax",
           "gelu", "silu", "softplus", "layer_norm", "rms_norm", "Op", "as_op", "as_ops",
           "pooling", "normal", "set_random_seed", "uniform", "argmax", "argmin", "batch_size",
           "max", "mean", "min", "prod", "sum", "tensor_size", "variance", "axes_with_order",
           "broadcast", "cast_axes", "concat_along_axis", "dimshuffle", "expand_dims", "flatten",
           "flatten_at", "pad", "rename", "slice_along_axis", "stack", "tensor_slice", "unflatten",
           "AssignableTensorOp", "constant", "constant_storage", "constant_value", "is_constant",
           "is_constant_scalar", "persistent_tensor", "placeholder", "temporary", "variable",
           "TensorDescription", "reduce_strides", "make_transformer", "transformer_choices",
           "NumPyTransformer", "format_graph", "dim", "infer_shapes", "ShapeReport",
           "ShapeCheckError", "ShapeConflictError"]
# the function of every elementwise op, from its declaration (sigmoid is nn's, listed above)
__all__ += [name for name in _elementwise.__all__ if name not in __all__]


def __getattr__(name: str):
    # The strict core IR and the test helpers (`ng.testing`, as in Nervana Graph) are
    # imported on first use, so `import axgraph` stays light.
    if name in ("core", "testing"):
        import importlib

        return importlib.import_module(f".{name}", __name__)
    # shape inference (its constraints and op rules) too: the ops only need the prover
    if name in ("ShapeReport", "infer_shapes"):
        from .shapes import inference

        return getattr(inference, name)
    # Nervana Graph v0.4's `ng.make_tf_importer()`: TensorFlow is imported with a graph
    if name == "make_tf_importer":
        from .frontends.tensorflow import TFImporter

        return TFImporter
    raise AttributeError(f"module 'axgraph' has no attribute {name!r}")
