"""The table of TensorFlow import rules: one function per TF op type, declared once.

A rule takes the `Node` being imported and returns its outputs: an `Op`, a NumPy
array (a value known at import time), or a tuple of them for an op with several
outputs. `RULES` is the only list of what is supported: the importer looks rules
up in it, and the error for an op without one lists its keys.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import numpy as np

from ...axes import Axes, Axis, make_axis
from ...debug_info import user_location
from ... import errors
from ...errors import AxgraphValueError
from ...op_graph.op import Op
from ...op_graph.tensors import constant

#: A value of the imported graph: an op, or an array known when the graph is imported.
Value = Union[Op, np.ndarray]
Rule = Callable[["Node"], Union[Value, Tuple[Value, ...]]]
#: The branches of v1 control flow a value lives in: (predicate, taken) pairs, all holding
#: where TF computes it (an empty tuple: always).
Context = Tuple[Tuple[Op, bool], ...]

#: TF op type -> the rule that imports it (filled by the ops_* modules).
RULES: Dict[str, Rule] = {}


class TFImportError(AxgraphValueError):
    """A TensorFlow graph that cannot be imported: the message names the node and its op."""


class UnsupportedOpError(TFImportError, errors.UnsupportedOperatorError):
    """A TensorFlow op type with no import rule (or an attribute value the rule refuses)."""


def rule(*op_types: str) -> Callable[[Rule], Rule]:
    """Decorator: the function imports each of `op_types`."""

    def register(function: Rule) -> Rule:
        for op_type in op_types:
            if op_type in RULES:
                raise AssertionError(f"two import rules for TF {op_type}")
            RULES[op_type] = function
        return function

    return register


def supported_ops() -> List[str]:
    """The TensorFlow op types `TFImporter` can import, sorted.

    Returns
    -------
    list of str
        The op types with an import rule.
    """
    return sorted(RULES)


class GraphBuilder:
    """What the rules share while one graph is imported: new axes, arrays as constants."""

    def __init__(self) -> None:
        self._counter = itertools.count()
        self._constant_ops: Dict[int, Tuple[np.ndarray, Op]] = {}

    def unique_name(self, hint: str) -> str:
        """`hint` made an identifier and numbered: a name no other axis of the graph has."""
        return f"{_identifier(hint)}_{next(self._counter)}"

    def new_axis(self, length: int, hint: str) -> Axis:
        """A new axis of `length`, named after `hint` and numbered."""
        return make_axis(length=int(length), name=self.unique_name(hint))

    def as_op(self, value: Value, hint: str) -> Op:
        """`value` as an op: an array becomes a constant on new axes (once per array)."""
        if isinstance(value, Op):
            return value
        known = self._constant_ops.get(id(value))
        if known is not None:
            return known[1]
        axes = Axes([self.new_axis(int(n), f"{hint}_d{i}") for i, n in enumerate(value.shape)])
        op = constant(value, axes, dtype=value.dtype, name=_identifier(hint))
        self._constant_ops[id(value)] = (value, op)  # (the array is kept alive with its id)
        return op


@dataclass
class Node:
    """One TF op being imported: its inputs as values, TF's own view of it (`tf_op`)."""

    tf_op: Any  # tf.Operation in the importer's own copy of the graph
    inputs: List[Value]
    control_inputs: List[Op]
    builder: GraphBuilder
    #: a variable's initial value, where its initializer assigns one known at import time
    initial_value: Optional[np.ndarray] = None
    #: the branch of v1 control flow (``tf.cond``) the node is in: (predicate, taken) pairs
    #: that all hold when it runs in TF (see ops_control)
    context: "Context" = ()
    #: the branch of each input
    input_contexts: List["Context"] = field(default_factory=list)
    #: for a sparse step: whether TF's optimizer de-duplicated its indices (the importer
    #: took the Unique out: a repeated index is then the optimizer's, see deduplication)
    deduplicated: bool = False

    @property
    def hint(self) -> str:
        """The op's name as an identifier: new axes and constants are named after it."""
        return _identifier(self.tf_op.name)

    @property
    def op_type(self) -> str:
        return self.tf_op.type

    @property
    def name(self) -> str:
        return self.tf_op.name

    def attr(self, name: str, default: Any = None) -> Any:
        """An attribute's value (`default` if the op has no such attribute)."""
        try:
            value = self.tf_op.get_attr(name)
        except ValueError:
            return default
        return value.decode() if isinstance(value, bytes) else value

    def input(self, index: int) -> Value:
        if index >= len(self.inputs):
            raise self.error(f"input {index} is missing")
        return self.inputs[index]

    def op(self, index: int) -> Op:
        """Input `index` as an op (an array becomes a constant on new axes)."""
        return self.builder.as_op(self.input(index), f"{self.hint}_in{index}")

    def constant(self, index: int, what: str) -> np.ndarray:
        """Input `index`, which must be known when the graph is imported (a shape, axes)."""
        value = self.input(index)
        if not isinstance(value, np.ndarray):
            raise self.unsupported(f"input {index} ({what}) must be known when the graph is "
                                   f"imported (a constant, or computed from shapes)")
        return value

    def out_shape(self, index: int = 0) -> List[int]:
        """TensorFlow's static shape of output `index` (every dimension known)."""
        shape = self.tf_op.outputs[index].shape
        if shape.rank is None or not shape.is_fully_defined():
            raise self.unsupported(f"output {index} has shape {shape}: TF must know every "
                                   f"dimension (give the placeholders full shapes, or "
                                   f"import_graph_def(..., shapes={{name: shape}}))")
        return [int(n) for n in shape.as_list()]

    def new_axis(self, length: int, hint: str = "") -> Axis:
        return self.builder.new_axis(length, hint or self.hint)

    def error(self, message: str) -> TFImportError:
        return TFImportError(f"TF {self.label}: {message}", user_location())

    def unsupported(self, message: str) -> UnsupportedOpError:
        return UnsupportedOpError(f"TF {self.label}: {message}", user_location())

    @property
    def label(self) -> str:
        return f"{self.op_type} node {self.name!r}"


def _identifier(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name) or "value"


def position(node: Node, axis: int, rank: int) -> int:
    """A TF dimension index (negative counts from the end) as a position in 0..rank-1."""
    if not -rank <= axis < rank:
        raise node.error(f"dimension {axis} is out of range for rank {rank}")
    return axis % rank


def positions(node: Node, index: int, rank: int, what: str) -> List[int]:
    """Input `index` (an int or a list of ints) as positions, sorted and distinct."""
    values = np.asarray(node.constant(index, what)).reshape(-1).tolist()
    return sorted({position(node, int(v), rank) for v in values})
