"""Axon's size conditions decided by the shared shape solver (`axgraph.shapes.solver`).

Axon tells its conditions on sizes (equal dims and shapes, bounds, divisibility, a
reshape's element count, a broadcast, a dim marked `#`) in its own terms: blame sets of
source positions, shape variables by number, size variables with display names. This
adapter turns them into the shared solver's constraints, each position into an `Origin`
(which keeps the Axon line and column), and a refuted constraint back into an Axon
message (`dims differ: 2 vs 3`) and the positions behind it.
"""
from __future__ import annotations

from typing import Dict, Iterable, List, Mapping, Sequence, Set

from ...dims import Dim, DimLike, free_symbols, subs
from ...shapes import constraints as shared
from ...shapes.solver import Conflict as SharedConflict
from ...shapes.solver import Solver as SharedSolver
from .errors import Cause
from .printing import Namer, format_dim, format_shape
from .solver import (AtLeast, Blame, Broadcast, Constraint, DimEq, Divides, OneOrEqual, SameSize,
                     ShapeEq, constraint_terms, rename_constraint)
from .types import Shape, ShapeVar


class SharedChecks:
    """Axon conditions on sizes, checked by one shared `Solver`.

    Parameters
    ----------
    causes : sequence of Cause
        The positions a blame set's numbers stand for (`Inferencer.origins`).
    file : str
        The program's name, for the origins (`<axon>` when it has none).
    hints : mapping of str to str
        The display hint of each internal size variable, for messages.
    """

    def __init__(self, causes: Sequence[Cause], file: str, hints: Mapping[str, str]):
        self._causes = causes
        self._file = file
        self._hints = hints
        self._positions: Dict[shared.Origin, int] = {}
        self._what: Dict[object, str] = {}
        self._shape_vars: Dict[str, ShapeVar] = {}
        self._pending: List[Constraint] = []

    def add(self, constraint: Constraint) -> None:
        """Queue an Axon condition (a dim, shape, bound, divisibility, reshape, broadcast or
        `#` condition) to be checked by `conflicts`."""
        self._pending.append(constraint)

    def conflicts(self) -> List[SharedConflict]:
        """Solve every condition queued; the conflicts found, in the order of their positions.

        Every size variable is one to solve for (the conditions are on sizes still open,
        whose values some fit and some do not).
        """
        variables: Set[str] = set()
        for constraint in self._pending:
            for term in constraint_terms(constraint):
                for item in (term if isinstance(term, tuple) else (term,)):
                    if isinstance(item, (int, Dim)):
                        variables |= free_symbols(item)
        solver = SharedSolver(shared.Variable(name, "flexible") for name in sorted(variables))
        for constraint in self._pending:
            origins = [self._origin(index) for index in sorted(constraint.blame)]
            if not origins:
                origins = [shared.Origin(self._file, 0, "the sizes given")]
            translated = self._translate(constraint, origins[0])
            solver.add(translated, origins[1:])
        return list(solver.conflicts)

    def blame(self, conflict: SharedConflict) -> Blame:
        """The Axon positions behind a conflict (the numbers of its blame set)."""
        return frozenset(self._positions[o] for o in conflict.origins if o in self._positions)

    def message(self, conflict: SharedConflict) -> str:
        """A conflict in Axon's words, with Axon's display names."""
        namer = Namer(self._hints)
        operands = conflict.operands

        def dim(value: object) -> str:
            return format_dim(value, namer)  # type: ignore[arg-type]

        def shape(value: object) -> str:
            return format_shape(self._axon_shape(value), namer)  # type: ignore[arg-type]

        what = self._what.get(conflict.constraint, "")
        if conflict.kind in ("mismatch", "apart"):
            return f"dims differ: {dim(operands[0])} vs {dim(operands[1])}"
        if conflict.kind == "one_or_equal":
            return (f"dims differ: {dim(operands[0])} vs {dim(operands[1])} (a dim marked `#` "
                    f"broadcasts only where it is 1)")
        if conflict.kind == "at_least":
            return f"{what or 'a size is too small'}: {dim(operands[0])} < {dim(operands[1])}"
        if conflict.kind == "divides":
            return (f"{what or 'a size must divide exactly'}: {dim(operands[0])} does not "
                    f"divide {dim(operands[1])}")
        if conflict.kind == "rank":
            return f"ranks differ: {shape(operands[0])} vs {shape(operands[1])}"
        if conflict.kind == "domain":
            name, value, least, most = operands
            size = namer.size(str(name))
            if value < 1:  # type: ignore[operator]
                return f"size {size} would be {value}; sizes are at least 1"
            if value < least:  # type: ignore[operator]
                return f"size {size} is too small: {value} < {least}"
            return f"size {size} is too large: {value} > {most}"
        if conflict.kind == "fraction":
            return (f"{namer.size(str(operands[0]))} would have to be {operands[1]}, not a "
                    f"whole number")
        return conflict.message

    # -- translation ---------------------------------------------------------------------------------
    def _origin(self, index: int) -> shared.Origin:
        span, why = self._causes[index]
        origin = shared.Origin(self._file, span.line, why, f"position {index}", span.column)
        self._positions[origin] = index
        return origin

    def _shape(self, shape: Shape) -> shared.Shape:
        items: List[shared.ShapeItem] = []
        for item in shape:
            if isinstance(item, ShapeVar):
                name = f"s{item.id}"
                self._shape_vars[name] = item
                items.append(shared.ShapeVar(name))
            else:
                items.append(item)
        return tuple(items)

    def _axon_shape(self, shape: Iterable[shared.ShapeItem]) -> Shape:
        return tuple(self._shape_vars[item.name] if isinstance(item, shared.ShapeVar) else item
                     for item in shape)

    def _translate(self, c: Constraint, origin: shared.Origin) -> shared.Constraint:
        result: shared.Constraint
        if isinstance(c, DimEq):
            result = shared.Equal(c.left, c.right, origin)
        elif isinstance(c, AtLeast):
            result = shared.AtLeast(c.value, c.least, origin)
            self._what[result] = c.what
        elif isinstance(c, Divides):
            result = shared.Divides(c.divisor, c.value, origin)
            self._what[result] = c.what
        elif isinstance(c, OneOrEqual):
            result = shared.OneOrEqual(c.dim, c.other, origin)
        elif isinstance(c, ShapeEq):
            result = shared.SameShape(self._shape(c.left), self._shape(c.right), origin)
        elif isinstance(c, SameSize):
            result = shared.SameSize(self._shape(c.left), self._shape(c.right), origin)
        elif isinstance(c, Broadcast):
            result = shared.Broadcast(self._shape(c.left), self._shape(c.right),
                                      self._shape(c.out), origin)
        else:
            raise TypeError(f"not a condition on sizes: {c!r}")
        return result


def substituted(c: Constraint, values: Mapping[str, DimLike]) -> Constraint:
    """An Axon condition with sizes replaced by their values."""
    def rename(term):
        if isinstance(term, tuple):
            return tuple(item if isinstance(item, ShapeVar) else subs(item, values)
                         for item in term)
        return subs(term, values)
    return rename_constraint(c, rename)
