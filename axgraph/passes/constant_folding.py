"""Constant folding: evaluate at compile time what depends on Constants alone.

A node whose inputs are all Constants is run through the interpreter's own
kernel (so folding can never disagree with execution) and replaced by a
Constant holding the value. Rules that keep this safe and cheap:

* never fold a random draw, a DimValue or a Parameter (they have no inputs,
  and their values are not known now), nor a host call (a print: running it
  now would print at compile time, and folding it would drop it);
* elementwise ops over *uniform* Constants (one value filling a shape) are
  computed on that one value and give a uniform Constant, whatever the
  shape: no array is materialized, and symbolic shapes fold too;
* anything else folds only when its shape is static and neither its result
  nor any input has more than `max_elements` elements, so a graph does not
  balloon with huge literal arrays;
* an op the kernel refuses (integer division by zero, an index out of range)
  is left for run time, where it raises at the user's line as it should.

A folded result whose elements are all equal is stored as a uniform fill.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from ..core.function import Function
from ..core.host import HostCall
from ..core.interpreter import Context, find_kernel
from ..core.node import Node, at_location
from ..core.ops import Constant
from ..core.traits import is_elementwise
from ..errors import AxgraphError
from .manager import Pass
from .pattern import uniform_value

DEFAULT_MAX_ELEMENTS = 1 << 16
_NO_BINDINGS = Context({}, {})


def _numeric_kind(dtype: np.dtype) -> bool:
    return dtype.kind in "biuf"


def _run_kernel(node: Node, values: Sequence[np.ndarray]) -> Optional[np.ndarray]:
    """The node's value from its inputs' values, or None if the kernel refuses."""
    try:
        kernel = find_kernel(type(node))
    except AxgraphError:
        return None  # not an op the interpreter runs (an un-lowered bridge op)
    try:
        with np.errstate(all="ignore"):
            return np.asarray(kernel(node, _NO_BINDINGS, *values))
    except (AxgraphError, ArithmeticError, ValueError, IndexError, TypeError):
        return None


def _compress(value: np.ndarray) -> np.ndarray:
    """A 0-d array when every element is bitwise equal (a fill), else `value`."""
    if value.ndim == 0 or value.size == 0:
        return value
    flat = np.ascontiguousarray(value).reshape(-1)
    raw = flat.view(np.uint8).reshape(flat.size, flat.dtype.itemsize)
    return flat[0:1].reshape(()) if bool(np.all(raw == raw[0])) else value


class ConstantFolding(Pass):
    """Replace nodes computed from Constants alone by Constants (module docstring)."""

    name = "constant-folding"

    def __init__(self, max_elements: int = DEFAULT_MAX_ELEMENTS):
        self.max_elements = max_elements

    def fold(self, node: Node) -> Optional[Constant]:
        """The Constant `node` evaluates to, or None when it must not be folded."""
        if not node.inputs or not all(isinstance(i, Constant) for i in node.inputs):
            return None
        if isinstance(node, HostCall):
            return None
        if not _numeric_kind(node.element_type.dtype):
            return None
        if is_elementwise(type(node)):
            fills = [uniform_value(i) for i in node.inputs]
            if all(f is not None for f in fills):
                value = _run_kernel(node, fills)  # type: ignore[arg-type]  # all are arrays
                return self._constant(node, value) if value is not None else None
        if not node.shape.is_static or not self._small(node.shape):
            return None
        if not all(i.shape.is_static and self._small(i.shape) for i in node.inputs):
            return None
        values = [np.broadcast_to(i.attributes["value"], tuple(i.shape)) for i in node.inputs]
        value = _run_kernel(node, values)
        return None if value is None else self._constant(node, _compress(value))

    def _small(self, shape) -> bool:
        return shape.size <= self.max_elements

    @staticmethod
    def _constant(node: Node, value: np.ndarray) -> Optional[Constant]:
        if value.dtype != node.element_type.dtype:
            return None
        if value.ndim and tuple(value.shape) != tuple(node.shape):
            return None
        name = node.name if node.has_user_name else None
        with at_location(node.location):
            return Constant(node.element_type, node.shape, np.array(value), name=name)

    def run(self, function: Function) -> Function:
        rebuilt: dict[Node, Node] = {}
        changed = False
        for node in function.nodes:
            current = node.with_inputs([rebuilt[i] for i in node.inputs])
            folded = self.fold(current)
            if folded is not None:
                current = folded
            rebuilt[node] = current
            changed = changed or current is not node
        if not changed:
            return function
        return Function([rebuilt[r] for r in function.results],
                        [rebuilt[p] for p in function.parameters], function.name)


__all__ = ["ConstantFolding", "DEFAULT_MAX_ELEMENTS"]
