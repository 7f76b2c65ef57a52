"""The table of import rules: one function per ONNX operator, declared once.

A rule takes the `Node` being imported and returns its outputs: an `Op`, or a
NumPy array for a value known at import time (shapes, folded constants), or a
tuple of them for an operator with several outputs. `RULES` is the only list of
what is supported: the importer looks rules up in it and the error for an
unknown operator lists its keys.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from ...debug_info import user_location
from ...dims import Dim, DimLike
from ... import errors
from ...errors import AxgraphValueError
from ...op_graph.op import Op

#: A value of the imported graph: an op, or an array known when the model is imported.
Value = Union[Op, np.ndarray]
Rule = Callable[["Node"], Union[Value, Tuple[Optional[Value], ...]]]

#: ONNX op_type -> the rule that imports it (filled by the import_* modules).
RULES: Dict[str, Rule] = {}


class OnnxImportError(AxgraphValueError):
    """An ONNX model that cannot be imported: the message names the node and operator."""


class UnsupportedOperatorError(OnnxImportError, errors.UnsupportedOperatorError):
    """An ONNX operator with no import rule (or an attribute value the rule refuses)."""


def rule(*op_types: str) -> Callable[[Rule], Rule]:
    """Decorator: the function imports each of `op_types`."""

    def register(function: Rule) -> Rule:
        for op_type in op_types:
            if op_type in RULES:
                raise AssertionError(f"two import rules for ONNX {op_type}")
            RULES[op_type] = function
        return function

    return register


def supported_operators() -> List[str]:
    """The ONNX operators `import_model` can import, sorted.

    Returns
    -------
    list of str
        The op_types with an import rule.
    """
    return sorted(RULES)


@dataclass
class Node:
    """One ONNX node being imported: its inputs as values, its attributes decoded."""

    proto: Any  # onnx.NodeProto
    inputs: List[Optional[Value]]
    attributes: Dict[str, Any]
    builder: Any  # importer.GraphBuilder: fresh axes, constants as ops
    opset: int
    label: str = field(default="")

    @property
    def op_type(self) -> str:
        return self.proto.op_type

    def attr(self, name: str, default: Any = None) -> Any:
        """An attribute's value (`default` if the node does not set it)."""
        return self.attributes.get(name, default)

    def has_input(self, index: int) -> bool:
        """Whether input `index` is given (ONNX leaves optional inputs out or empty)."""
        return index < len(self.inputs) and self.inputs[index] is not None

    def input(self, index: int) -> Value:
        """Input `index`, which must be given."""
        if not self.has_input(index):
            raise self.error(f"input {index} is missing")
        value = self.inputs[index]
        assert value is not None
        return value

    def op(self, index: int) -> Op:
        """Input `index` as an op (a constant becomes one, on new axes)."""
        return self.builder.as_op(self.input(index), self.proto.input[index])

    def constant(self, index: int, what: str = "") -> np.ndarray:
        """Input `index`, which must be known when the model is imported (a shape, axes)."""
        value = self.input(index)
        if not isinstance(value, np.ndarray):
            raise self.unsupported(f"input {index} ({what or self.proto.input[index]}) must be a "
                                   f"constant or an initializer, not computed at run time")
        return value

    def ints(self, index: int, attribute: str) -> Optional[Tuple[int, ...]]:
        """A list of ints given as input `index` (newer opsets) or as `attribute` (older)."""
        given = self.sizes(index, attribute)
        if given is None:
            return None
        whole = tuple(v for v in given if isinstance(v, int))
        if len(whole) != len(given):
            raise self.unsupported(f"{attribute} {list(given)} must be whole numbers, not sizes "
                                   f"known only when the model runs")
        return whole

    def sizes(self, index: int, attribute: str) -> Optional[Tuple[DimLike, ...]]:
        """Like `ints`, but symbolic sizes (read from a `Shape`) are allowed too."""
        if self.has_input(index):
            values = np.asarray(self.constant(index, attribute)).reshape(-1).tolist()
        else:
            values = self.attr(attribute)
        if values is None:
            return None
        return tuple(v if isinstance(v, Dim) else int(v) for v in values)

    def error(self, message: str) -> OnnxImportError:
        return OnnxImportError(f"ONNX {self.label}: {message}", user_location())

    def unsupported(self, message: str) -> UnsupportedOperatorError:
        return UnsupportedOperatorError(f"ONNX {self.label}: {message}", user_location())

    def refuse_attribute(self, name: str, allowed: Sequence[Any]) -> None:
        """Raise UnsupportedOperatorError if attribute `name` is set to a value not in `allowed`."""
        value = self.attributes.get(name)
        if value is not None and value not in allowed:
            raise self.unsupported(f"attribute {name}={value!r} is not supported (only "
                                   f"{', '.join(repr(v) for v in allowed)})")


def positive_axis(node: Node, axis: int, rank: int) -> int:
    """An ONNX axis attribute (negative counts from the end) as a position in 0..rank-1."""
    if not -rank <= axis < rank:
        raise node.error(f"axis {axis} is out of range for rank {rank}")
    return axis % rank
