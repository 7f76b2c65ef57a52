"""Ops that combine elements: Dot, Sum/Prod/Max/Min, ArgMax/ArgMin, Softmax."""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

from ...errors import DTypeError, ShapeError
from ..node import Node
from ..types import ElementType, Shape, i64
from .over_axes import OverAxes
from ._checks import arity, element_type_attr, positions, require_kind, same_element_type


class Dot(Node):
    """General contraction: dim contract_a[k] of a pairs with dim contract_b[k] of b.

    Paired dims must be equal; they are summed over. The result has a's
    uncontracted dims in order, then b's (as numpy.tensordot). Without
    explicit pairs, a's last dim contracts with b's first (a matrix product);
    with a scalar operand nothing contracts.
    """

    _attributes = ("contract_a", "contract_b")

    def __init__(self, a: Node, b: Node, contract_a: Optional[Sequence[int]] = None,
                 contract_b: Optional[Sequence[int]] = None, name: Optional[str] = None):
        super().__init__((a, b), {"contract_a": contract_a, "contract_b": contract_b}, name)

    def _normalize(self, attributes: dict) -> dict:
        a, b = arity(self, 2)
        contract_a, contract_b = attributes["contract_a"], attributes["contract_b"]
        if contract_a is None and contract_b is None:
            contract_a, contract_b = ((a.rank - 1,), (0,)) if a.rank and b.rank else ((), ())
        elif contract_a is None or contract_b is None:
            raise self._fail(ShapeError, "give both contract_a and contract_b, or neither")
        contract_a = positions(self, contract_a, a.rank, "contract_a", ordered=True)
        contract_b = positions(self, contract_b, b.rank, "contract_b", ordered=True)
        if len(contract_a) != len(contract_b):
            raise self._fail(ShapeError, f"contract_a {contract_a} and contract_b {contract_b} "
                             f"must pair up dims one to one")
        return {"contract_a": contract_a, "contract_b": contract_b}

    def _infer(self) -> Tuple[ElementType, Shape]:
        a, b = self.inputs
        et = same_element_type(self, (a, b))
        require_kind(self, a, "numeric")
        contract_a, contract_b = self.attributes["contract_a"], self.attributes["contract_b"]
        for i, j in zip(contract_a, contract_b):
            if a.shape[i] != b.shape[j]:
                raise self._fail(ShapeError, f"contracted dims differ: dim {i} of {a.name} "
                                 f"{a.shape} is {a.shape[i]}, dim {j} of {b.name} {b.shape} "
                                 f"is {b.shape[j]}")
        shape = [d for i, d in enumerate(a.shape) if i not in contract_a]
        shape += [d for j, d in enumerate(b.shape) if j not in contract_b]
        return et, Shape(shape)


class Reduction(OverAxes):
    """x combined over the dims at `axes`, which disappear from the result."""

    def _infer(self) -> Tuple[ElementType, Shape]:
        (x,) = self.inputs
        require_kind(self, x, "numeric")
        axes = self.attributes["axes"]
        return x.element_type, Shape(d for i, d in enumerate(x.shape) if i not in axes)


class Sum(Reduction):
    """Sum over `axes` (0 over an empty dim)."""


class Prod(Reduction):
    """Product over `axes` (1 over an empty dim)."""


class Max(Reduction):
    """Maximum over `axes` (an error over an empty dim)."""


class Min(Reduction):
    """Minimum over `axes` (an error over an empty dim)."""


class IndexReduction(Node):
    """The position of the extreme element over `axes` (at least one).

    With several axes the index counts row-major over those dims, in the
    order given, as if they were flattened into one. Ties go to the first.
    """

    _attributes = ("axes", "index_element_type")
    _hidden = frozenset({"index_element_type"})

    def __init__(self, x: Node, axes, index_element_type=i64, name: Optional[str] = None):
        super().__init__((x,), {"axes": axes, "index_element_type": index_element_type}, name)

    def _normalize(self, attributes: dict) -> dict:
        (x,) = arity(self, 1)
        axes = positions(self, attributes["axes"], x.rank, ordered=True)
        if not axes:
            raise self._fail(ShapeError, "needs at least one axis")
        return {"axes": axes,
                "index_element_type": element_type_attr(self, attributes["index_element_type"])}

    def _infer(self) -> Tuple[ElementType, Shape]:
        (x,) = self.inputs
        require_kind(self, x, "numeric")
        et = self.attributes["index_element_type"]
        if not et.is_integral:
            raise self._fail(DTypeError, f"index element type must be an integer type, not {et}")
        axes = self.attributes["axes"]
        return et, Shape(d for i, d in enumerate(x.shape) if i not in axes)


class ArgMax(IndexReduction):
    """Index of the maximum over `axes`."""


class ArgMin(IndexReduction):
    """Index of the minimum over `axes`."""


class Softmax(OverAxes):
    """exp(x) normalized to sum 1 over `axes` (computed stably)."""

    def _normalize(self, attributes: dict) -> dict:
        normalized = super()._normalize(attributes)
        if not normalized["axes"]:
            raise self._fail(ShapeError, "needs at least one axis")
        return normalized

    def _infer(self) -> Tuple[ElementType, Shape]:
        (x,) = self.inputs
        require_kind(self, x, "float")
        return x.element_type, x.shape
