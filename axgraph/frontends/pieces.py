"""Pieces of a tensor along an axis whose bounds are known only when the program runs.

A slice of the axes graph takes int bounds. An importer splitting a dim of symbolic size
(``torch.cat([x, y]).split([x.shape[0], y.shape[0]])`` with a batch Dim on each input)
takes each piece as a `PieceOp`: the run of x along one axis that starts after the
lengths of the pieces before it and is as long as the piece's own axis (an input's
axis, its length bound by that input's feed). It lowers to a core slice with symbolic
bounds; the numpy transformer reads the lengths bound. Its derivative is a
`PieceAdjointOp`: the piece's delta in its place, zeros before and after it.
"""
from __future__ import annotations

from typing import Any, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from ..autodiff import adjoint
from ..axes import Axes, Axis
from ..errors import IncompatibleAxesError
from ..lowering.rules import rule as lowering_rule
from ..op_graph.op import Op
from ..op_graph.tensors import as_op
from ..shapes import op_rules
from ..shapes.constraints import AtLeast, Constraint, Origin
from ..transformers import reference_kernels


class PlacedPieceOp(Op):
    """The base of the ops on one tensor with a piece's place: `axis`, the axes `before`
    it, and the piece's own axis `piece` (abstract: `PieceOp`, `PieceAdjointOp`).

    Parameters
    ----------
    x : Op
        The tensor the op takes.
    axis : Axis
        The axis the piece lies along.
    before : sequence of Axis
        The axes of the pieces before this one: their lengths together are its start.
    piece : Axis
        The piece's own axis.
    name : str, optional
        A name for the result (automatic if None).
    """

    attributes = ("axis", "before", "piece")
    axis: Axis
    before: Tuple[Axis, ...]
    piece: Axis
    dtype_of_arg = 0

    def __init__(self, x: Any, axis: Axis, before: Sequence[Axis], piece: Axis,
                 name: Optional[str] = None):
        super().__init__(as_op(x), axis=axis, before=tuple(before), piece=piece, name=name)

    def end(self, length_of: Any) -> Any:
        """Where the piece ends along `axis`: its length and those before it, summed."""
        end: Any = length_of(self.piece)
        for axis in self.before:
            end = end + length_of(axis)
        return end


class PieceOp(PlacedPieceOp):
    """x's run along `axis` after the lengths of the axes `before`, as long as `piece`.

    Parameters
    ----------
    x : Op
        The tensor split.
    axis : Axis
        The axis of x split.
    before : sequence of Axis
        The axes of the pieces before this one: their lengths together are its start.
    piece : Axis
        The piece's own axis, in place of `axis`; its length is the piece's.
    name : str, optional
        A name for the result (automatic if None).

    Raises
    ------
    IncompatibleAxesError
        If `axis` is not an axis of x, or `piece` already is one.
    """

    def infer_axes(self) -> Axes:
        x = self.args[0]
        if self.axis not in x.axes:
            raise IncompatibleAxesError(f"piece: {self.axis.name} is not an axis of {x.name} "
                                        f"{x.axes}", self.location)
        if self.piece in x.axes:
            raise IncompatibleAxesError(f"piece: {self.piece.name} is already an axis of "
                                        f"{x.name} {x.axes}", self.location)
        return Axes([self.piece if a == self.axis else a for a in x.axes])


@op_rules.rule(PieceOp, says="the pieces before and this one lie inside the axis split")
def _piece_lengths(op: Op, length_of: Any) -> Iterator[Constraint]:
    assert isinstance(op, PieceOp)
    yield AtLeast(length_of(op.axis), op.end(length_of),
                  Origin.of(op.location, "piece", f"takes {op.piece.name} of {op.axis.name}"))


def _position(op: PieceOp) -> int:
    return list(op.args[0].axes).index(op.axis)


@reference_kernels.kernel(PieceOp)
def _piece_kernel(op: PieceOp, ctx: Any, x: np.ndarray) -> np.ndarray:
    start = sum(ctx.lengths(op.before, op))
    index = [slice(None)] * x.ndim
    index[_position(op)] = slice(start, start + ctx.length(op.piece, op))
    return x[tuple(index)]


@lowering_rule(PieceOp)
def _lower_piece(ctx: Any, op: PieceOp, x: Any) -> Any:
    from ..core.ops.shape import Slice

    position = _position(op)
    start: Any = 0
    for dim in ctx.dims(op.before):
        start = start + dim
    lower: List[Any] = [0] * x.rank
    upper: List[Any] = list(x.shape)
    lower[position] = start
    upper[position] = start + ctx.dims([op.piece])[0]
    return ctx.reshape(Slice(x, lower, upper), ctx.dims(op.axes))


class PieceAdjointOp(PlacedPieceOp):
    """Zeros on x's axes, with `delta` (a piece of them, as `PieceOp` takes it) in its place.

    Parameters
    ----------
    x : Op
        The piece's values (its delta), on its axes (`piece` in place of `axis`).
    axis : Axis
        The axis of the result the piece lies along.
    before : sequence of Axis
        The axes of the pieces before this one: their lengths together are its start.
    piece : Axis
        The piece's own axis, replaced by `axis`.
    name : str, optional
        A name for the result (automatic if None).

    Raises
    ------
    IncompatibleAxesError
        If `piece` is not an axis of x, or `axis` already is one.
    """

    def infer_axes(self) -> Axes:
        delta = self.args[0]
        if self.piece not in delta.axes or self.axis in delta.axes:
            raise IncompatibleAxesError(f"piece adjoint: {delta.name} {delta.axes} must have "
                                        f"{self.piece.name} and not {self.axis.name}",
                                        self.location)
        return Axes([self.axis if a == self.piece else a for a in delta.axes])


@op_rules.rule(PieceAdjointOp, says="the piece and those before it lie inside the result")
def _piece_adjoint_lengths(op: Op, length_of: Any) -> Iterator[Constraint]:
    assert isinstance(op, PieceAdjointOp)
    yield AtLeast(length_of(op.axis), op.end(length_of),
                  Origin.of(op.location, "piece adjoint",
                            f"places {op.piece.name} in {op.axis.name}"))


@reference_kernels.kernel(PieceAdjointOp)
def _piece_adjoint_kernel(op: PieceAdjointOp, ctx: Any, delta: np.ndarray) -> np.ndarray:
    result = np.zeros(ctx.lengths(op.axes, op), dtype=op.dtype)
    start = sum(ctx.lengths(op.before, op))
    index = [slice(None)] * delta.ndim
    index[list(op.axes).index(op.axis)] = slice(start, start + delta.shape[
        list(op.args[0].axes).index(op.piece)])
    result[tuple(index)] = delta
    return result


@lowering_rule(PieceAdjointOp)
def _lower_piece_adjoint(ctx: Any, op: PieceAdjointOp, delta: Any) -> Any:
    from ..core.ops.shape import Concat
    from ..dims import definitely_equal

    position = list(op.axes).index(op.axis)
    dims = list(ctx.dims(op.axes))
    start: Any = 0
    for dim in ctx.dims(op.before):
        start = start + dim
    after = dims[position] - start - ctx.dims([op.piece])[0]
    parts = []
    for length in (start, None, after):
        if length is None:
            parts.append(delta)
        elif not definitely_equal(length, 0):
            shape = list(dims)
            shape[position] = length
            parts.append(ctx.constant(0, op.dtype, shape))
    return Concat(parts, position) if len(parts) > 1 else parts[0]


@adjoint(PieceOp)
def _piece_derivative(op: Op, delta: Op) -> List[Op]:
    assert isinstance(op, PieceOp)
    return [PieceAdjointOp(delta, op.axis, op.before, op.piece)]


@adjoint(PieceAdjointOp)
def _piece_adjoint_derivative(op: Op, delta: Op) -> List[Op]:
    assert isinstance(op, PieceAdjointOp)
    return [PieceOp(delta, op.axis, op.before, op.piece)]


__all__ = ["PieceAdjointOp", "PieceOp"]
