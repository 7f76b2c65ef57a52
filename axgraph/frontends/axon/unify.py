"""Unifying Axon types: their structure here, their shapes and sizes in the shared solver.

Types, function types, tuples and element types unify structurally (an occurs check
included), as Hindley-Milner does; where two tensor types meet, their shapes are one,
and that, like every other condition on sizes, is told to the shared shape solver
(`axgraph.shapes.solver`) through `SharedChecks`. Reading a type back resolves its
variables through both.
"""
from __future__ import annotations

from typing import Dict, List, Sequence, Set, Tuple

from ...dims import Dim, DimLike, free_symbols
from .printing import Namer, format_type
from .shared import SharedChecks
from .conditions import NO_BLAME, Blame, Conflict, Constraint, ShapeEq, TypeEq, rename_constraint
from .errors import Cause
from .types import (DType, DTypeVar, Fresh, FunctionType, Shape, ShapeVar, TensorType, TupleType,
                    Type, TypeVar, Var, shape_vars, type_vars)


class Unifier:
    """A store of type bindings over a shared solver of sizes, told conditions one by one.

    Parameters
    ----------
    fresh : Fresh
        The supply of variables (their hints, which sizes are marked `#`).
    causes : sequence of Cause, optional
        The positions a blame set's numbers stand for.
    file : str, optional
        The program's name, for the solver's origins.
    """

    def __init__(self, fresh: Fresh, causes: Sequence[Cause] = (), file: str = "<axon>"):
        self.fresh = fresh
        self.types: Dict[TypeVar, Tuple[Type, Blame]] = {}
        self.dtypes: Dict[DTypeVar, Tuple[DType, Blame]] = {}
        self.checks = SharedChecks(causes, file, fresh)
        #: Blame a free variable carries wherever it is used (see `links`).
        self.var_blame = self.checks.var_blame

    def make_rigid(self, name: str, blame: Blame) -> None:
        """Mark size variable `name` rigid (a `forall`): never bound to a size or to another
        size; a condition that would is a Conflict naming `blame` too."""
        self.checks.make_universal(name, blame)

    def add(self, *constraints: Constraint) -> None:
        """Unify the types of each `TypeEq` now (a Conflict if their structure differs);
        tell the solver every other condition."""
        for constraint in constraints:
            if isinstance(constraint, TypeEq):
                self.unify(constraint.left, constraint.right, constraint.blame)
            else:
                self.checks.add(constraint)

    def solve(self) -> None:
        """Raise the first condition on sizes refuted so far (in the order of positions)."""
        conflicts = self.checks.conflicts()
        if conflicts:
            first = conflicts[0]
            raise Conflict("shape", self.checks.message(first), self.checks.blame(first))

    # -- structure ----------------------------------------------------------------------------------
    def unify(self, left: Type, right: Type, blame: Blame) -> None:
        """Make `left` and `right` one type."""
        (left, lb), (right, rb) = self._head(left), self._head(right)
        blame = blame | lb | rb
        if left == right:
            return
        for var, other in ((left, right), (right, left)):
            if isinstance(var, TypeVar):
                resolved = self.resolve(other)
                if var in type_vars(resolved):
                    namer = Namer(self.fresh.hints, [resolved])
                    raise Conflict("type", f"a type would contain itself: {namer.type_var(var)} = "
                                           f"{format_type(resolved, namer)}", blame)
                self.types[var] = (other, blame)
                return
        if isinstance(left, TensorType) and isinstance(right, TensorType):
            self._unify_dtypes(left.dtype, right.dtype, blame)
            self.checks.add(ShapeEq(left.shape, right.shape, blame))
            return
        if isinstance(left, FunctionType) and isinstance(right, FunctionType):
            self.unify(left.arg, right.arg, blame)
            self.unify(left.result, right.result, blame)
            return
        if isinstance(left, TupleType) and isinstance(right, TupleType) \
                and len(left.items) == len(right.items):
            for a, b in zip(left.items, right.items):
                self.unify(a, b, blame)
            return
        left, right = self.resolve(left), self.resolve(right)
        namer = Namer(self.fresh.hints, [left, right])
        kinds = {type(left), type(right)}
        what = ("a tensor is used as a function" if kinds == {TensorType, FunctionType} else
                "a tuple is used as a tensor" if kinds == {TensorType, TupleType} else
                "a tuple is used as a function" if kinds == {TupleType, FunctionType} else
                "tuples of different lengths" if kinds == {TupleType} else "types differ")
        raise Conflict("type", f"{what}: {format_type(left, namer)} vs "
                               f"{format_type(right, namer)}", blame)

    def _unify_dtypes(self, left: DType, right: DType, blame: Blame) -> None:
        (left, lb), (right, rb) = self._dtype_head(left), self._dtype_head(right)
        if left == right:
            return
        for var, other in ((left, right), (right, left)):
            if isinstance(var, DTypeVar):
                self.dtypes[var] = (other, blame | lb | rb)
                return
        raise Conflict("type", f"element types differ: {left} vs {right}", blame | lb | rb)

    def _head(self, t: Type) -> Tuple[Type, Blame]:
        blame = NO_BLAME
        while isinstance(t, TypeVar) and t in self.types:
            t, more = self.types[t]
            blame = blame | more
        if isinstance(t, TypeVar):
            blame = blame | self.var_blame.get(t, NO_BLAME)
        return t, blame

    def _dtype_head(self, dtype: DType) -> Tuple[DType, Blame]:
        blame = NO_BLAME
        while isinstance(dtype, DTypeVar) and dtype in self.dtypes:
            dtype, more = self.dtypes[dtype]
            blame = blame | more
        if isinstance(dtype, DTypeVar):
            blame = blame | self.var_blame.get(dtype, NO_BLAME)
        return dtype, blame

    # -- generalization ---------------------------------------------------------------------------
    def take_residuals(self, variables: Set[Var]) -> List[Constraint]:
        """Remove and return the undecided conditions that mention any of `variables`: they
        go with a generalized type scheme, checked at each use."""
        names = [var for var in variables if isinstance(var, str)]
        names += [f"s{var.id}" for var in variables if isinstance(var, ShapeVar)]
        return self.checks.take_residuals(names)

    def residuals(self) -> List[Constraint]:
        """The conditions on sizes neither proved nor refuted: checks for run time."""
        return self.checks.residuals()

    def links(self, variables: Set[Var]) -> Dict[Var, Blame]:
        """For each variable, the blame of the bindings that put it where it stands: what a
        generalized function's copies of it inherit at each use."""
        found: Dict[Var, Blame] = {v: self.var_blame.get(v, NO_BLAME) for v in variables}
        solution = self.checks.solver.solution
        for name, value in solution.bindings.items():
            blame = self.checks.positions(solution.binding_origins.get(name, ()))
            for symbol in free_symbols(value) & variables:
                found[symbol] = found[symbol] | blame
        for name, shape in solution.shapes.items():
            blame = self.checks.positions(solution.shape_origins.get(name, ()))
            for var in set(shape_vars(self.checks.from_shared_shape(shape))) & variables:
                found[var] = found[var] | blame
        for bound, blame in self.types.values():
            for var in set(type_vars(bound)) & variables:
                found[var] = found[var] | blame
        for dtype, blame in self.dtypes.values():
            if dtype in variables:
                found[dtype] = found[dtype] | blame
        return found

    # -- reading back -------------------------------------------------------------------------------
    def resolve_dim(self, dim: DimLike) -> DimLike:
        """`dim` with every size the solver decided replaced."""
        return self.checks.solver.solution.value(dim)

    def resolve_shape(self, shape: Shape) -> Shape:
        """`shape` with its shape variables expanded and its sizes resolved."""
        solved = self.checks.solver.solution.shape(self.checks.to_shared_shape(shape))
        return self.checks.from_shared_shape(solved)

    def resolve_dtype(self, dtype: DType) -> DType:
        """An element type under the bindings."""
        return self._dtype_head(dtype)[0]

    def resolve_constraint(self, c: Constraint) -> Constraint:
        """A condition with its terms resolved."""
        def resolve(term):
            if isinstance(term, tuple):
                return self.resolve_shape(term)
            if isinstance(term, (int, Dim)):
                return self.resolve_dim(term)
            return self.resolve(term)
        return rename_constraint(c, resolve)

    def resolve(self, t: Type) -> Type:
        """`t` with every bound variable replaced."""
        t = self._head(t)[0]
        if isinstance(t, TensorType):
            return TensorType(self.resolve_dtype(t.dtype), self.resolve_shape(t.shape))
        if isinstance(t, FunctionType):
            return FunctionType(self.resolve(t.arg), self.resolve(t.result))
        if isinstance(t, TupleType):
            return TupleType(tuple(self.resolve(item) for item in t.items))
        return t
