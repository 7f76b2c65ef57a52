"""The shape shared by ops of one input and a set of its dims (reductions, softmax, reverse)."""
from __future__ import annotations

from typing import Optional

from ..node import Node
from ._checks import arity, positions


class OverAxes(Node):
    """f(x) over the dims at `axes`: the shape of reductions, Softmax and Reverse.

    Parameters
    ----------
    x : Node
        The operand: any element type and shape.
    axes : int or sequence of int
        Positions of x's dims, each in [0, rank), each once; their order does not
        matter (they are kept sorted).

    Returns
    -------
    {op}
        A node of x's element type and shape.

    Raises
    ------
    ShapeError
        `axes` are not distinct positions of x's dims.
    """

    _attributes = ("axes",)

    def __init__(self, x: Node, axes, name: Optional[str] = None):
        super().__init__((x,), {"axes": axes}, name)

    def _normalize(self, attributes: dict) -> dict:
        (x,) = arity(self, 1)
        return {"axes": positions(self, attributes["axes"], x.rank)}
