"""The shape shared by ops of one input and a set of its dims (reductions, softmax, reverse)."""
from __future__ import annotations

from typing import Optional

from ..node import Node
from ._checks import arity, positions


class OverAxes(Node):
    """f(x) over the dims at `axes`: positions in x, checked and put in canonical form."""

    _attributes = ("axes",)

    def __init__(self, x: Node, axes, name: Optional[str] = None):
        super().__init__((x,), {"axes": axes}, name)

    def _normalize(self, attributes: dict) -> dict:
        (x,) = arity(self, 1)
        return {"axes": positions(self, attributes["axes"], x.rank)}
