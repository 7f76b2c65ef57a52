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
The two ways of folding are the pass's rules, `fold-fills` and `fold-arrays`.
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

import numpy as np

from ..core.host import HostCall
from ..core.interpreter import Context, find_kernel
from ..core.node import Node
from ..core.ops import Constant
from ..core.traits import is_elementwise
from ..core.tensor_types import Shape
from ..dtypes import kind_of
from ..errors import AxgraphError
from .manager import RulePass
from .pattern import Any, Match, Predicate, RewriteRule, uniform_fill, uniform_value

DEFAULT_MAX_ELEMENTS = 1 << 16
_NO_BINDINGS = Context({}, {})


def _numeric_kind(dtype: np.dtype) -> bool:
    return kind_of(dtype) in "biuf"


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


def _foldable(node: Node) -> bool:
    """Every input a Constant, and nothing that must wait for run time (module docstring)."""
    return (bool(node.inputs) and all(isinstance(i, Constant) for i in node.inputs)
            and not isinstance(node, HostCall) and _numeric_kind(node.element_type.dtype))


def _over_fills(node: Node) -> bool:
    """An elementwise op over uniform Constants: computed on one value, whatever the shape."""
    return (_foldable(node) and is_elementwise(type(node))
            and all(uniform_value(i) is not None for i in node.inputs))


def _small_arrays(max_elements: int) -> Predicate:
    """Any other foldable node whose result and inputs have static shapes of at most
    `max_elements` elements."""
    def small(shape: Shape) -> bool:
        size = shape.size
        return shape.is_static and isinstance(size, int) and size <= max_elements

    def test(node: Node) -> bool:
        return _foldable(node) and not _over_fills(node) and all(
            small(n.shape) for n in (node,) + node.inputs)

    return test


def _constant(node: Node, value: np.ndarray) -> Optional[Constant]:
    """`value` as a Constant standing for `node` (None if the kernel's result does not fit)."""
    if value.dtype != node.element_type.dtype:
        return None
    if value.ndim and tuple(value.shape) != tuple(node.shape):
        return None
    name = node.name if node.has_user_name else None
    return Constant(node.element_type, node.shape, np.array(value), name=name)


def _fold_fills(match: Match) -> Optional[Constant]:
    node = match.root
    fills = [uniform_value(i) for i in node.inputs]
    value = _run_kernel(node, fills)  # type: ignore[arg-type]  # the predicate saw no None
    return None if value is None else _constant(node, value)


def _fold_arrays(match: Match) -> Optional[Constant]:
    node = match.root
    values = [np.broadcast_to(i.attributes["value"], tuple(i.shape)) for i in node.inputs]
    value = _run_kernel(node, values)
    if value is None:
        return None
    fill = uniform_fill(value)  # stored as one value when every element is equal
    return _constant(node, value if fill is None else fill)


def rules(max_elements: int = DEFAULT_MAX_ELEMENTS) -> Tuple[RewriteRule, ...]:
    """The rule table: fills fold at any size, other values up to `max_elements`."""
    return (RewriteRule(Any(predicate=_over_fills), _fold_fills, "fold-fills"),
            RewriteRule(Any(predicate=_small_arrays(max_elements)), _fold_arrays,
                        "fold-arrays"))


class ConstantFolding(RulePass):
    """Replace nodes computed from Constants alone by Constants (module docstring)."""

    name = "constant-folding"
    one_sweep = True  # a folded Constant has no inputs: no rule applies to it again

    def __init__(self, max_elements: int = DEFAULT_MAX_ELEMENTS):
        super().__init__(rules(max_elements))
        self.max_elements = max_elements


__all__ = ["ConstantFolding", "DEFAULT_MAX_ELEMENTS", "rules"]
