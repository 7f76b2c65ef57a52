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
from .conditions import (AtLeast, Blame, Broadcast, Conflict, Constraint, DimEq, Divides,
                         OneOrEqual, SameSize, ShapeEq, constraint_terms, constraint_vars,
                         rename_constraint)
from .errors import Cause
from .printing import Namer, format_dim, format_shape
from .types import Fresh, Shape, ShapeVar, is_internal


class SharedChecks:
    """Axon conditions on sizes, told one by one to a shared `Solver`.

    Each size variable is declared when a condition first mentions it: one the inference
    made is a length to solve for (flexible), one the user named is a size of the
    program (rigid: pinned only where nothing else will do); of two of a kind the newer
    is eliminated, so the older name stays; either may be 1 where it was marked `#`.

    Parameters
    ----------
    causes : sequence of Cause
        The positions a blame set's numbers stand for (`Inferencer.origins`).
    file : str
        The program's name, for the origins (`<axon>` when it has none).
    fresh : Fresh
        The supply of variables: their display hints, and which are marked `#`.
    """

    def __init__(self, causes: Sequence[Cause], file: str, fresh: Fresh):
        self._causes = causes
        self._file = file
        self._fresh = fresh
        self._positions: Dict[shared.Origin, int] = {}
        self._what: Dict[object, str] = {}
        self._shape_vars: Dict[str, ShapeVar] = {}
        self._declared: Set[str] = set()
        self._broadcasting: Set[str] = set()  # those declared to the solver as marked `#`
        self.solver = SharedSolver()
        #: Blame a variable carries wherever it is used: how a generalized function linked
        #: its copies (a size by name, a shape variable).
        self.var_blame: Dict[object, Blame] = {}
        #: Sizes a `forall` made rigid, with the blame of the `forall`.
        self.rigid: Dict[str, Blame] = {}

    def make_universal(self, name: str, blame: Blame) -> None:
        """Declare size `name` rigid (`forall`): the solver never binds it; a Conflict
        if what is known already makes it a size or another size."""
        self.rigid[name] = self.rigid.get(name, frozenset()) | blame
        if name not in self._declared:
            self._declared.add(name)
            self.solver.declare(shared.Variable(name, "universal"))
            return
        solution = self.solver.solution
        if name in solution.bindings:
            value = solution.bindings[name]
            raise Conflict("shape", f"size {Namer(self._fresh.hints).size(name)} is rigid "
                                    f"(`forall`), but would be "
                                    f"{format_dim(value, Namer(self._fresh.hints))}",
                           blame | self.positions(solution.binding_origins.get(name, ())))
        self.solver.make_universal(name)

    def add(self, constraint: Constraint) -> None:
        """Tell the solver an Axon condition (a dim, shape, bound, divisibility, reshape,
        broadcast or `#` condition)."""
        for term in constraint_terms(constraint):
            for item in (term if isinstance(term, tuple) else (term,)):
                if isinstance(item, (int, Dim)):
                    for name in sorted(free_symbols(item)):
                        self._declare(name)
        blame = constraint.blame
        for var in constraint_vars(constraint):
            blame = blame | self.var_blame.get(var, frozenset())
        origins = [self._origin(index) for index in sorted(blame)]
        if not origins:
            origins = [shared.Origin(self._file, 0, "the sizes given")]
        self.solver.add(self._translate(constraint, origins[0]), origins[1:])

    def _declare(self, name: str) -> None:
        """Declare a size variable the first time it is met; mark it where it was marked
        `#` since (a size may be marked after it was used)."""
        marked = name in self._fresh.marked
        if name not in self._declared:
            self._declared.add(name)
            self.solver.declare(shared.Variable(
                name, "flexible" if is_internal(name) else "rigid",
                age=int(name[1:]) if is_internal(name) else len(self._declared),
                broadcasts=marked))
        elif marked and name not in self._broadcasting:
            self.solver.mark_broadcasts(name)
        if marked:
            self._broadcasting.add(name)

    def conflicts(self) -> List[SharedConflict]:
        """The conditions refuted so far, in the order of their positions."""
        return sorted(self.solver.conflicts, key=lambda c: sorted(self.blame(c)))

    def blame(self, conflict: SharedConflict) -> Blame:
        """The Axon positions behind a conflict (the numbers of its blame set, and the
        `forall` of a rigid size it involves)."""
        found = self.positions(conflict.origins)
        if conflict.kind == "universal":
            name, value = conflict.operands
            for size in {str(name)} | free_symbols(value):  # type: ignore[arg-type]
                found = found | self.rigid.get(size, frozenset())
        return found

    def positions(self, origins: Iterable[shared.Origin]) -> Blame:
        """The Axon positions some origins stand for."""
        return frozenset(self._positions[o] for o in origins if o in self._positions)

    def residuals(self) -> List[Constraint]:
        """The conditions neither proved nor refuted, as Axon conditions."""
        return [self.from_shared(r.constraint, r.origins) for r in self.solver.residuals]

    def take_residuals(self, names: Iterable[str]) -> List[Constraint]:
        """Remove and return the undecided conditions on some size variables and shape
        variables (in the solver's names): they go with a generalized type."""
        return [self.from_shared(r.constraint, r.origins)
                for r in self.solver.take_residuals(names)]

    def from_shared(self, c: shared.Constraint, origins: Iterable[shared.Origin]) -> Constraint:
        """A shared constraint as the Axon condition it stands for, blamed on the positions
        of `origins`."""
        blame = self.positions(origins)
        if isinstance(c, shared.Equal):
            return DimEq(c.left, c.right, blame)
        if isinstance(c, shared.AtLeast):
            what = ""
            if isinstance(c.value, Dim) and c.value.is_symbol:
                what = f"size {Namer(self._fresh.hints).size(c.value.name)} is too small"
            return AtLeast(c.value, c.bound, blame, self._what.get(c, what))
        if isinstance(c, shared.Divides):
            assert isinstance(c.divisor, int)  # Axon divides by literal sizes only
            return Divides(c.divisor, c.dividend, blame, self._what.get(c, ""))
        if isinstance(c, shared.OneOrEqual):
            return OneOrEqual(c.dim, c.other, blame)
        if isinstance(c, shared.SameShape):
            return ShapeEq(self.from_shared_shape(c.left), self.from_shared_shape(c.right), blame)
        if isinstance(c, shared.SameSize):
            return SameSize(self.from_shared_shape(c.left), self.from_shared_shape(c.right), blame)
        assert isinstance(c, shared.Broadcast)
        return Broadcast(self.from_shared_shape(c.left), self.from_shared_shape(c.right),
                         self.from_shared_shape(c.out), blame)

    def message(self, conflict: SharedConflict) -> str:
        """A conflict in Axon's words, with Axon's display names."""
        namer = Namer(self._fresh.hints)
        operands = conflict.operands

        def dim(value: object) -> str:
            return format_dim(value, namer)  # type: ignore[arg-type]

        def shape(value: object) -> str:
            return format_shape(self.from_shared_shape(value), namer)  # type: ignore[arg-type]

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
            name, value, least, most, bounded_by = operands
            size = namer.size(str(name))
            if isinstance(bounded_by, shared.AtLeast) and self._what.get(bounded_by):
                # the inequality that bounded the size fails: word it as that check
                solution = self.solver.solution
                values: Dict[str, DimLike] = {str(name): value}  # type: ignore[dict-item]
                return (f"{self._what[bounded_by]}: "
                        f"{dim(subs(solution.value(bounded_by.value), values))} < "
                        f"{dim(subs(solution.value(bounded_by.bound), values))}")
            if value < 1:  # type: ignore[operator]
                return f"size {size} would be {value}; sizes are at least 1"
            if value < least:  # type: ignore[operator]
                return f"size {size} is too small: {value} < {least}"
            return f"size {size} is too large: {value} > {most}"
        if conflict.kind == "universal":
            return (f"size {namer.size(str(operands[0]))} is rigid (`forall`), but would be "
                    f"{dim(operands[1])}")
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

    def to_shared_shape(self, shape: Shape) -> shared.Shape:
        """An Axon shape in the shared solver's terms (shape variable `*b` #4 as `*s4`)."""
        items: List[shared.ShapeItem] = []
        for item in shape:
            if isinstance(item, ShapeVar):
                name = f"s{item.id}"
                self._shape_vars[name] = item
                items.append(shared.ShapeVar(name))
            else:
                items.append(item)
        return tuple(items)

    def from_shared_shape(self, shape: Iterable[shared.ShapeItem]) -> Shape:
        """A shape from the shared solver in Axon's terms."""
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
            result = shared.SameShape(self.to_shared_shape(c.left),
                                      self.to_shared_shape(c.right), origin)
        elif isinstance(c, SameSize):
            result = shared.SameSize(self.to_shared_shape(c.left),
                                     self.to_shared_shape(c.right), origin)
        elif isinstance(c, Broadcast):
            result = shared.Broadcast(self.to_shared_shape(c.left), self.to_shared_shape(c.right),
                                      self.to_shared_shape(c.out), origin)
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
