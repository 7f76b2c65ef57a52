"""Splits along a dim of symbolic size in `torch.export` programs: pieces whose sizes are
inputs' `torch.export.Dim`s, each a `PieceOp` (`..pieces`) on that input's axis."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, List, Optional

import torch

from ...axes import Axis
from ..pieces import PieceOp
from .errors import TorchBridgeError, node_location, node_source
from .registry import op_name

if TYPE_CHECKING:
    from .exported import Importer


def symbolic_pieces(importer: Importer, node: Any, x: Any, dim: int) -> Optional[tuple]:
    """The pieces of a split along `dim` of x when a piece's size is symbolic (None when
    every size is an int: plain slices take them); each symbolic size must be an input's
    `torch.export.Dim`, whose axis the piece takes."""
    sizes = [value.shape[dim] for value in node.meta["val"]]
    if all(isinstance(size, int) for size in sizes):
        return None
    pieces: List[Any] = []
    taken: List[Axis] = list(x.axes)
    for index, size in enumerate(sizes):
        if isinstance(size, int):
            axis = importer.axis(f"{node.name}_{index}", size)
        else:
            expression = size.node.expr if isinstance(size, torch.SymInt) else size
            axis = importer.symbol_axis(expression) if expression.is_Symbol else None
            if axis is None or axis in taken:
                raise TorchBridgeError(
                    f"{op_name(node.target)} ({node_source(node) or node.name}) into a piece "
                    f"of symbolic size {expression}, which is not the size of an input's "
                    f"torch.export.Dim (or is already an axis of the tensor split)",
                    node_location(node))
        pieces.append(PieceOp(x, x.axes[dim], [p.axes[dim] for p in pieces], axis))
        taken.append(axis)
    return tuple(pieces)


__all__ = ["symbolic_pieces"]
