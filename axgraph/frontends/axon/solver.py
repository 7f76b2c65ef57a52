"""Solving shape constraints to a fixed point, remembering who asked for what.

The interface is small on purpose: `Solver.add(constraint, ...)`, `Solver.solve()`,
then read the solution with `resolve` and the undecided constraints with `residuals`.
Constraints carry a *blame set*, the ids of the source positions that produced them;
every binding the solver makes records the union of the blame sets it used, and a
contradiction raises `Conflict` with the union of both sides' sets, so an error can
name every sub-expression that contributed, not just the last one.

Each step either makes progress (a binding, a split, a dropped constraint) or defers
its constraint, which is retried only after some binding happened:

* types and element types unify structurally (occurs check included);
* shapes (tuples of dims and spliced `ShapeVar`s) match dims from both ends, then bind a
  lone shape variable to what is left; several shape variables against each other wait
  until a rank is known;
* a dim equation is canonicalised (`axgraph.dims`), positive factors are divided out,
  and it is solved for one variable when it is linear in it: exactly when the division
  leaves no remainder, else as a floor with a divisibility check left over; a
  non-linear equation waits, never guessed;
* `AtLeast` and `Divides` are proved (dropped), refuted (a Conflict), or wait;
* `Broadcast` is decided last, once nothing else makes progress: only the literal 1
  broadcasts, any other pair of dims is unified.

What waits when nothing more can be done is a residual: a check for run time.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Dict, FrozenSet, Iterable, List, Optional, Set, Tuple, Union

from ...dims import Dim, DimLike, free_symbols, subs
from ...shapes.monotone import least_solution, non_decreasing
from ...shapes.prover import Verdict, prove_at_least, prove_divides, prove_equal, prove_nonnegative
from . import dimalg
from .printing import Namer, format_dim, format_shape, format_type
from .types import (DType, DTypeVar, Elem, Fresh, FunctionType, Shape, ShapeVar, TensorType,
                    TupleType, Type, TypeVar, Var, is_internal, shape_vars, type_vars)

Blame = FrozenSet[int]
NO_BLAME: Blame = frozenset()
#: The bounds of a size variable nothing has narrowed: every size is at least 1.
UNBOUNDED: Tuple[int, float] = (1, math.inf)


@dataclass(frozen=True)
class TypeEq:
    """Two types are one."""

    left: Type
    right: Type
    blame: Blame = NO_BLAME


@dataclass(frozen=True)
class ShapeEq:
    """Two shapes are one."""

    left: Shape
    right: Shape
    blame: Blame = NO_BLAME


@dataclass(frozen=True)
class DimEq:
    """Two dims are equal."""

    left: DimLike
    right: DimLike
    blame: Blame = NO_BLAME


@dataclass(frozen=True)
class AtLeast:
    """`value >= least`; `what` says, for an error, what the bound means."""

    value: DimLike
    least: DimLike
    blame: Blame = NO_BLAME
    what: str = ""


@dataclass(frozen=True)
class Divides:
    """`divisor` divides `value` exactly."""

    divisor: int
    value: DimLike
    blame: Blame = NO_BLAME
    what: str = ""


@dataclass(frozen=True)
class SameSize:
    """Two shapes hold as many elements (a reshape)."""

    left: Shape
    right: Shape
    blame: Blame = NO_BLAME


@dataclass(frozen=True)
class Broadcast:
    """`out` is the broadcast of `left` and `right`, aligned at their last dims."""

    left: Shape
    right: Shape
    out: Shape
    blame: Blame = NO_BLAME


@dataclass(frozen=True)
class OneOrEqual:
    """`dim` is 1 or equal to `other`: a dim marked `#` broadcast against `other`."""

    dim: DimLike
    other: DimLike
    blame: Blame = NO_BLAME


Constraint = Union[TypeEq, ShapeEq, DimEq, AtLeast, Divides, SameSize, Broadcast, OneOrEqual]


class Conflict(Exception):
    """Constraints that cannot all hold: `kind` is "type" or "shape", `blame` every
    position that contributed."""

    def __init__(self, kind: str, message: str, blame: Blame):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.blame = blame


@dataclass
class _Deferred:
    constraint: Constraint
    version: int = field(default=0)


class Solver:
    """A store of bindings, solved to a fixed point as constraints are added.

    Parameters
    ----------
    fresh : Fresh
        The supply of variables (for the hints of size variables, when printing).
    """

    def __init__(self, fresh: Fresh):
        self.fresh = fresh
        self.types: Dict[TypeVar, Tuple[Type, Blame]] = {}
        self.dtypes: Dict[DTypeVar, Tuple[DType, Blame]] = {}
        self.shapes: Dict[ShapeVar, Tuple[Shape, Blame]] = {}
        self.dims: Dict[str, Tuple[DimLike, Blame]] = {}
        self._users: Dict[str, Set[str]] = {}  # size variable -> bound names mentioning it
        self.queue: List[Constraint] = []
        self.deferred: List[_Deferred] = []
        self.broadcasts: List[Broadcast] = []
        self.version = 0
        # lower bounds of size variables, each from a residual check kept in bound_checks
        self.bounds: Dict[str, Tuple[int, float]] = {}
        # blame carried by a free variable: how a generalized function linked its copies
        self.var_blame: Dict[object, Blame] = {}
        self.bound_checks: Dict[str, AtLeast] = {}
        # size variables a `forall` made rigid, with the blame of the `forall`
        self.rigid: Dict[str, Blame] = {}

    # -- the interface ----------------------------------------------------------------------------
    def make_rigid(self, name: str, blame: Blame) -> None:
        """Mark size variable `name` rigid (a `forall`): an equation is solved for any other
        variable first, and one that would make it a particular size, or another size's
        value, is a Conflict naming `blame` too."""
        if name in self.dims:
            value, bound = self.dims[name]
            raise self._rigid_conflict(name, value, bound | blame)
        self.rigid[name] = self.rigid.get(name, NO_BLAME) | blame

    def add(self, *constraints: Constraint) -> None:
        """Queue constraints; `solve` works them off."""
        self.queue.extend(constraints)

    def solve(self) -> None:
        """Work to a fixed point; raises Conflict at the first contradiction."""
        while True:
            self._drain()
            stale = [d for d in self.deferred if d.version < self.version]
            if stale:
                self.deferred = [d for d in self.deferred if d.version >= self.version]
                self.queue.extend(d.constraint for d in stale)
                continue
            if not self._decide_a_broadcast() and not self._tighten():
                return

    def residuals(self) -> List[Constraint]:
        """The constraints that could not be decided, resolved by the current bindings."""
        pending = ([d.constraint for d in self.deferred] + list(self.broadcasts)
                   + [self.bound_checks[name] for name in sorted(self.bound_checks)])
        return self._strongest([self.resolve_constraint(c) for c in pending])

    def _strongest(self, constraints: List[Constraint]) -> List[Constraint]:
        """The constraints less each `AtLeast` that another one implies (its slack is
        provably at least the other's), so a check is reported once, in its strongest form."""
        checks = [c for c in constraints if isinstance(c, AtLeast)]
        slack = {id(c): c.value - c.least for c in checks}
        dropped = set()
        for c in checks:
            for other in checks:
                if other is c or id(other) in dropped:
                    continue
                margin = slack[id(c)] - slack[id(other)]
                if prove_nonnegative(margin, self.bounds) is Verdict.PROVED and (
                        margin != 0 or sorted(other.blame) < sorted(c.blame)):
                    dropped.add(id(c))
                    break
        return [c for c in constraints if id(c) not in dropped]

    def take_residuals(self, variables: Set[Var]) -> List[Constraint]:
        """Remove and return (resolved) the undecided constraints that mention any of
        `variables`: they go with a generalized type scheme, checked at each use."""
        taken: List[Constraint] = []
        kept_deferred: List[_Deferred] = []
        for item in self.deferred:
            resolved = self.resolve_constraint(item.constraint)
            if constraint_vars(resolved) & variables:
                taken.append(resolved)
            else:
                kept_deferred.append(item)
        kept_broadcasts = []
        for constraint in self.broadcasts:
            resolved = self.resolve_constraint(constraint)
            if constraint_vars(resolved) & variables:
                taken.append(resolved)
            else:
                kept_broadcasts.append(constraint)
        for name in sorted(self.bound_checks):
            if name in variables:
                taken.append(self.bound_checks.pop(name))
                del self.bounds[name]
        self.deferred, self.broadcasts = kept_deferred, kept_broadcasts
        return self._strongest(taken)

    def links(self, variables: Set[Var]) -> Dict[Var, Blame]:
        """For each variable, the blame of the bindings that put it where it stands: what a
        generalized function's copies of it inherit at each use."""
        found: Dict[Var, Blame] = {v: self.var_blame.get(v, NO_BLAME) for v in variables}
        for value, blame in self.dims.values():
            for symbol in free_symbols(value) & variables:
                found[symbol] = found[symbol] | blame
        for _, (shape, blame) in self.shapes.items():
            for var in set(shape_vars(shape)) & variables:
                found[var] = found[var] | blame
        for _, (bound, blame) in self.types.items():
            for var in set(type_vars(bound)) & variables:
                found[var] = found[var] | blame
        for _, (dtype, blame) in self.dtypes.items():
            if dtype in variables:
                found[dtype] = found[dtype] | blame
        return found

    # -- resolution -------------------------------------------------------------------------------
    def resolve_dim(self, dim: DimLike) -> Tuple[DimLike, Blame]:
        """`dim` under the bindings, and the blame of the bindings used."""
        if isinstance(dim, int):
            return dim, NO_BLAME
        used = [name for name in free_symbols(dim) if name in self.dims]
        blame = frozenset().union(*(self.dims[name][1] for name in used)) if used else NO_BLAME
        if used:
            dim = subs(dim, {name: self.dims[name][0] for name in used})
        if self.var_blame:
            blame = blame.union(*(self.var_blame.get(name, NO_BLAME) for name in free_symbols(dim)))
        return dim, blame

    def expand(self, shape: Shape) -> Tuple[List[Tuple[Elem, Blame]], Blame]:
        """The shape's items under the bindings, each with its blame, and the blame of
        the shape variables spliced in (which decide where each item stands)."""
        items: List[Tuple[Elem, Blame]] = []
        splices: Blame = NO_BLAME
        for elem in shape:
            if isinstance(elem, ShapeVar):
                bound = self._shape_binding(elem)
                if bound is None:
                    items.append((elem, self.var_blame.get(elem, NO_BLAME)))
                else:
                    inner, blame = bound
                    splices = splices | blame
                    for item in inner:
                        if isinstance(item, ShapeVar):
                            items.append((item, self.var_blame.get(item, NO_BLAME)))
                        else:
                            items.append(self.resolve_dim(item))
            else:
                items.append(self.resolve_dim(elem))
        return items, splices

    def _shape_binding(self, var: ShapeVar) -> Optional[Tuple[Shape, Blame]]:
        """The fully resolved shape bound to `var` (compressing the chain), or None."""
        if var not in self.shapes:
            return None
        shape, blame = self.shapes[var]
        if any(isinstance(e, ShapeVar) and e in self.shapes for e in shape):
            items, splices = self.expand(shape)
            shape = tuple(e for e, _ in items)
            blame = blame | splices
            self.shapes[var] = (shape, blame)
        return shape, blame

    def resolve_shape(self, shape: Shape) -> Tuple[Shape, Blame]:
        """`shape` under the bindings, and the blame of every binding used."""
        items, splices = self.expand(shape)
        blame = splices.union(*(b for _, b in items)) if items else splices
        return tuple(e for e, _ in items), blame

    def resolve_dtype(self, dtype: DType) -> Tuple[DType, Blame]:
        """An element type under the bindings."""
        blame = NO_BLAME
        while isinstance(dtype, DTypeVar) and dtype in self.dtypes:
            dtype, more = self.dtypes[dtype]
            blame = blame | more
        if isinstance(dtype, DTypeVar):
            blame = blame | self.var_blame.get(dtype, NO_BLAME)
        return dtype, blame

    def resolve_with_blame(self, t: Type) -> Tuple[Type, Blame]:
        """`t` with every bound variable replaced, and the blame of the bindings used."""
        if isinstance(t, TypeVar):
            if t not in self.types:
                return t, self.var_blame.get(t, NO_BLAME)
            bound, blame = self.types[t]
            resolved, inner = self.resolve_with_blame(bound)
            self.types[t] = (resolved, blame | inner)
            return resolved, blame | inner
        if isinstance(t, TensorType):
            dtype, dtype_blame = self.resolve_dtype(t.dtype)
            shape, shape_blame = self.resolve_shape(t.shape)
            return TensorType(dtype, shape), dtype_blame | shape_blame
        if isinstance(t, FunctionType):
            arg, arg_blame = self.resolve_with_blame(t.arg)
            result, result_blame = self.resolve_with_blame(t.result)
            return FunctionType(arg, result), arg_blame | result_blame
        if isinstance(t, TupleType):
            pairs = [self.resolve_with_blame(item) for item in t.items]
            return TupleType(tuple(p[0] for p in pairs)), frozenset().union(*(p[1] for p in pairs))
        raise TypeError(f"not a type: {t!r}")

    def resolve(self, t: Type) -> Type:
        """`t` with every bound variable replaced."""
        return self.resolve_with_blame(t)[0]

    def resolve_constraint(self, c: Constraint) -> Constraint:
        """A constraint with its terms resolved and the blame of the bindings added."""
        if isinstance(c, TypeEq):
            (t1, b1), (t2, b2) = self.resolve_with_blame(c.left), self.resolve_with_blame(c.right)
            return TypeEq(t1, t2, c.blame | b1 | b2)
        if isinstance(c, (ShapeEq, SameSize)):
            (s1, b1), (s2, b2) = self.resolve_shape(c.left), self.resolve_shape(c.right)
            return replace(c, left=s1, right=s2, blame=c.blame | b1 | b2)
        if isinstance(c, DimEq):
            (d1, b1), (d2, b2) = self.resolve_dim(c.left), self.resolve_dim(c.right)
            return DimEq(d1, d2, c.blame | b1 | b2)
        if isinstance(c, AtLeast):
            (d1, b1), (d2, b2) = self.resolve_dim(c.value), self.resolve_dim(c.least)
            return replace(c, value=d1, least=d2, blame=c.blame | b1 | b2)
        if isinstance(c, Divides):
            d1, b1 = self.resolve_dim(c.value)
            return replace(c, value=d1, blame=c.blame | b1)
        if isinstance(c, OneOrEqual):
            (d1, b1), (d2, b2) = self.resolve_dim(c.dim), self.resolve_dim(c.other)
            return OneOrEqual(d1, d2, c.blame | b1 | b2)
        (s1, b1), (s2, b2) = self.resolve_shape(c.left), self.resolve_shape(c.right)
        out, b3 = self.resolve_shape(c.out)
        return Broadcast(s1, s2, out, c.blame | b1 | b2 | b3)

    # -- the fixed point --------------------------------------------------------------------------
    def _drain(self) -> None:
        while self.queue:
            constraint = self.queue.pop()
            if isinstance(constraint, Broadcast):
                self.broadcasts.append(constraint)
            elif not self._step(constraint):
                self.deferred.append(_Deferred(constraint, self.version))

    def _decide_a_broadcast(self) -> bool:
        """Decide the first broadcast (in blame order) that can be; whether one was."""
        for constraint in sorted(self.broadcasts, key=lambda b: sorted(b.blame)):
            if self._broadcast(constraint):
                self.broadcasts.remove(constraint)
                return True
        return False

    def _step(self, c: Constraint) -> bool:
        """Work on one constraint: True when done with it, False to defer it."""
        if isinstance(c, TypeEq):
            return self._type_eq(c)
        if isinstance(c, ShapeEq):
            return self._shape_eq(c)
        if isinstance(c, DimEq):
            return self._dim_eq(c)
        if isinstance(c, AtLeast):
            return self._at_least(c)
        if isinstance(c, Divides):
            return self._divides(c)
        if isinstance(c, SameSize):
            return self._same_size(c)
        if isinstance(c, OneOrEqual):
            return self._one_or_equal(c)
        raise TypeError(f"not a constraint: {c!r}")

    def _namer(self, *terms: Type) -> Namer:
        return Namer(self.fresh.hints, terms)

    # -- types --------------------------------------------------------------------------------------
    def _head(self, t: Type) -> Tuple[Type, Blame]:
        blame = NO_BLAME
        while isinstance(t, TypeVar) and t in self.types:
            t, more = self.types[t]
            blame = blame | more
        if isinstance(t, TypeVar):
            blame = blame | self.var_blame.get(t, NO_BLAME)
        return t, blame

    def _type_eq(self, c: TypeEq) -> bool:
        (left, lb), (right, rb) = self._head(c.left), self._head(c.right)
        blame = c.blame | lb | rb
        if left == right:
            return True
        for var, other in ((left, right), (right, left)):
            if isinstance(var, TypeVar):
                resolved, more = self.resolve_with_blame(other)
                if var in type_vars(resolved):
                    namer = self._namer(resolved)
                    raise Conflict("type", f"a type would contain itself: {namer.type_var(var)} = "
                                           f"{format_type(resolved, namer)}", blame | more)
                self.types[var] = (other, blame)
                self.version += 1
                return True
        if isinstance(left, TensorType) and isinstance(right, TensorType):
            self._dtype_eq(left.dtype, right.dtype, blame)
            self.queue.append(ShapeEq(left.shape, right.shape, blame))
            return True
        if isinstance(left, FunctionType) and isinstance(right, FunctionType):
            self.queue.append(TypeEq(left.result, right.result, blame))
            self.queue.append(TypeEq(left.arg, right.arg, blame))
            return True
        if isinstance(left, TupleType) and isinstance(right, TupleType) \
                and len(left.items) == len(right.items):
            self.queue.extend(TypeEq(a, b, blame) for a, b in zip(left.items, right.items))
            return True
        (left, lb2), (right, rb2) = self.resolve_with_blame(left), self.resolve_with_blame(right)
        namer = self._namer(left, right)
        kinds = {type(left), type(right)}
        what = ("a tensor is used as a function" if kinds == {TensorType, FunctionType} else
                "a tuple is used as a tensor" if kinds == {TensorType, TupleType} else
                "a tuple is used as a function" if kinds == {TupleType, FunctionType} else
                "tuples of different lengths" if kinds == {TupleType} else "types differ")
        raise Conflict("type", f"{what}: {format_type(left, namer)} vs "
                               f"{format_type(right, namer)}", blame | lb2 | rb2)

    def _dtype_eq(self, left: DType, right: DType, blame: Blame) -> None:
        (left, lb), (right, rb) = self.resolve_dtype(left), self.resolve_dtype(right)
        blame = blame | lb | rb
        if left == right:
            return
        for var, other in ((left, right), (right, left)):
            if isinstance(var, DTypeVar):
                self.dtypes[var] = (other, blame)
                self.version += 1
                return
        raise Conflict("type", f"element types differ: {left} vs {right}", blame)

    # -- shapes -------------------------------------------------------------------------------------
    def _shape_eq(self, c: ShapeEq) -> bool:
        (left, splices_l), (right, splices_r) = self.expand(c.left), self.expand(c.right)
        blame = c.blame | splices_l | splices_r
        whole = (tuple(e for e, _ in left), tuple(e for e, _ in right))
        # match dims pairwise from the front, then from the back
        while left and right and not isinstance(left[0][0], ShapeVar) \
                and not isinstance(right[0][0], ShapeVar):
            (a, ab), (b, bb) = left.pop(0), right.pop(0)
            self.queue.append(DimEq(_as_dim(a), _as_dim(b), blame | ab | bb))
        while left and right and not isinstance(left[-1][0], ShapeVar) \
                and not isinstance(right[-1][0], ShapeVar):
            (a, ab), (b, bb) = left.pop(), right.pop()
            self.queue.append(DimEq(_as_dim(a), _as_dim(b), blame | ab | bb))
        rest_l, rest_r = tuple(e for e, _ in left), tuple(e for e, _ in right)
        item_blame = blame.union(*(b for _, b in left + right)) if left or right else blame
        if rest_l == rest_r:
            return True
        for var_side, other in ((rest_l, rest_r), (rest_r, rest_l)):
            if len(var_side) == 1 and isinstance(var_side[0], ShapeVar):
                self._bind_shape(var_side[0], other, item_blame, whole)
                return True
            if not var_side:
                variables = [e for e in other if isinstance(e, ShapeVar)]
                if len(variables) == len(other):
                    for var in variables:
                        self._bind_shape(var, (), item_blame, whole)
                    return True
                self._rank_conflict(whole, item_blame)
        if not any(isinstance(e, ShapeVar) for e in rest_l + rest_r):
            self._rank_conflict(whole, item_blame)
        self.deferred.append(_Deferred(ShapeEq(rest_l, rest_r, item_blame), self.version))
        return True

    def _rank_conflict(self, whole: Tuple[Shape, Shape], blame: Blame):
        namer = self._namer(TensorType("f32", whole[0]), TensorType("f32", whole[1]))
        raise Conflict("shape", f"ranks differ: {format_shape(whole[0], namer)} vs "
                                f"{format_shape(whole[1], namer)}", blame)

    def _bind_shape(self, var: ShapeVar, shape: Shape, blame: Blame,
                    whole: Tuple[Shape, Shape]) -> None:
        if var in shape:
            namer = self._namer(TensorType("f32", whole[0]), TensorType("f32", whole[1]))
            raise Conflict("shape", f"a shape would contain itself: {format_shape(whole[0], namer)}"
                                    f" vs {format_shape(whole[1], namer)}", blame)
        self.shapes[var] = (shape, blame)
        self.version += 1

    def _same_size(self, c: SameSize) -> bool:
        (left, lb), (right, rb) = self.resolve_shape(c.left), self.resolve_shape(c.right)
        blame = c.blame | lb | rb
        left_vars = sorted((e for e in left if isinstance(e, ShapeVar)), key=lambda v: v.id)
        right_vars = sorted((e for e in right if isinstance(e, ShapeVar)), key=lambda v: v.id)
        if left_vars != right_vars:
            return False  # which dims a shape variable holds is not known yet
        self.queue.append(DimEq(_product(left), _product(right), blame))
        return True

    # -- dims -----------------------------------------------------------------------------------------
    def _dim_eq(self, c: DimEq) -> bool:
        (left, lb), (right, rb) = self.resolve_dim(c.left), self.resolve_dim(c.right)
        blame = c.blame | lb | rb
        difference = dimalg.cancel(left - right)
        if isinstance(difference, int):
            if difference == 0:
                return True
            raise self._differ(left, right, blame)
        bare: Dict[str, DimLike] = {}
        for side, other in ((left, right), (right, left)):
            if isinstance(side, Dim) and side.is_symbol and side.name not in free_symbols(other) \
                    and side.name not in self.rigid:
                bare[side.name] = other
        if bare:  # a variable standing alone is bound to the other side, which keeps its names
            name = min(bare, key=_variable_order)
            self._bind_dim(name, bare[name], blame)
            return True
        solutions = dimalg.linear_solutions(difference)
        if not solutions:
            if prove_equal(difference, 0, self.bounds) is Verdict.REFUTED:
                raise self._differ(left, right, blame)  # never zero for any sizes
            return False  # not linear in any one variable: wait for more bindings
        best = min(solutions, key=lambda s: (s.name in self.rigid,) + _elimination_order(s))
        if not best.exact and isinstance(best.numerator, int):
            namer = self._namer()
            raise Conflict("shape", f"dims differ: {format_dim(left, namer)} vs "
                                    f"{format_dim(right, namer)}: {namer.size(best.name)} would "
                                    f"have to be {best.numerator}/{best.divisor}, not a whole "
                                    f"number", blame)
        self._bind_dim(best.name, best.value, blame)
        if not best.exact:
            self.queue.append(Divides(best.divisor, best.numerator, blame))
        return True

    def _differ(self, left: DimLike, right: DimLike, blame: Blame) -> Conflict:
        namer = self._namer()
        return Conflict("shape", f"dims differ: {format_dim(left, namer)} vs "
                                 f"{format_dim(right, namer)}", blame)

    def _rigid_conflict(self, name: str, value: DimLike, blame: Blame) -> Conflict:
        """`name` would be `value`; the blame names every `forall` involved."""
        for other in free_symbols(value) & self.rigid.keys():
            blame = blame | self.rigid[other]
        namer = self._namer()
        return Conflict("shape", f"size {namer.size(name)} is rigid (`forall`), but would be "
                                 f"{format_dim(value, namer)}", blame)

    def _bind_dim(self, name: str, value: DimLike, blame: Blame) -> None:
        if name in self.rigid:
            raise self._rigid_conflict(name, value, blame | self.rigid[name])
        if isinstance(value, int) and value < 1:
            namer = self._namer()
            raise Conflict("shape", f"size {namer.size(name)} would be {value}; sizes are at "
                                    f"least 1", blame)
        self.dims[name] = (value, blame)
        self.version += 1
        if name in self.fresh.marked and isinstance(value, Dim) and value.is_symbol:
            self.fresh.marked.add(value.name)  # the same size: it may still be 1
        if name in self.bound_checks:  # its bound is now a check on what it is bound to
            self.queue.append(self.bound_checks.pop(name))
            del self.bounds[name]
        for user in self._users.pop(name, ()):
            old, old_blame = self.dims[user]
            new = subs(old, {name: value})
            self.dims[user] = (new, old_blame | blame)
            for symbol in free_symbols(new):
                self._users.setdefault(symbol, set()).add(user)
        for symbol in free_symbols(value):
            self._users.setdefault(symbol, set()).add(name)
        if not isinstance(value, int):
            namer = self._namer()
            self.queue.append(AtLeast(value, 1, blame, f"size {namer.size(name)} = "
                                                       f"{format_dim(value, namer)} must be at least 1"))

    def _one_or_equal(self, c: OneOrEqual) -> bool:
        (dim, db), (other, ob) = self.resolve_dim(c.dim), self.resolve_dim(c.other)
        if dim == 1 or dimalg.cancel(dim - other) == 0:
            return True
        if isinstance(dim, int) and isinstance(other, int):
            namer = self._namer()
            raise Conflict("shape", f"dims differ: {format_dim(dim, namer)} vs "
                                    f"{format_dim(other, namer)} (a dim marked `#` broadcasts "
                                    f"only where it is 1)", c.blame | db | ob)
        return False

    def _at_least(self, c: AtLeast) -> bool:
        (value, vb), (least, lb) = self.resolve_dim(c.value), self.resolve_dim(c.least)
        verdict = prove_at_least(value, least, self.bounds)
        if verdict is Verdict.UNKNOWN:
            return False
        if verdict is Verdict.REFUTED:
            namer = self._namer()
            detail = c.what or "a size is too small"
            raise Conflict("shape", f"{detail}: {format_dim(value, namer)} < "
                                    f"{format_dim(least, namer)}", c.blame | vb | lb)
        return True

    def _divides(self, c: Divides) -> bool:
        value, vb = self.resolve_dim(c.value)
        verdict = prove_divides(c.divisor, value)
        if verdict is Verdict.PROVED:
            return True
        if verdict is Verdict.REFUTED:
            namer = self._namer()
            detail = c.what or "a size must divide exactly"
            raise Conflict("shape", f"{detail}: {c.divisor} does not divide "
                                    f"{format_dim(value, namer)}", c.blame | vb)
        return False

    # -- bounds ----------------------------------------------------------------------------------------
    def _tighten(self) -> bool:
        """Turn the checks `f(v) >= 0` on one size variable (f non-decreasing) into one lower
        bound per variable, the largest; whether a bound rose.

        The bound is kept as a check of its own (reported, never proved from itself), and
        every other check is retried with it: a stack of convolutions leaves `H >= 14`,
        not one check per layer.
        """
        best: Dict[str, Tuple[int, Blame]] = {}
        for item in self.deferred:
            c = item.constraint
            if not isinstance(c, AtLeast):
                continue
            (value, vb), (least, lb) = self.resolve_dim(c.value), self.resolve_dim(c.least)
            difference = value - least
            names = free_symbols(difference)
            if len(names) != 1:
                continue
            name = next(iter(names))
            if not non_decreasing(difference, name):
                continue
            start = self.bounds.get(name, UNBOUNDED)[0]
            low = least_solution(difference, name, int(start))
            if low is None:
                continue
            blame = c.blame | vb | lb
            if name not in best or low > best[name][0]:
                best[name] = (low, blame)
            elif low == best[name][0]:
                best[name] = (low, best[name][1] | blame)
        risen = False
        for name, (low, blame) in sorted(best.items()):
            if low > self.bounds.get(name, UNBOUNDED)[0]:
                self.bounds[name] = (low, math.inf)
                namer = self._namer()
                self.bound_checks[name] = AtLeast(Dim(name), low, blame,
                                                  f"size {namer.size(name)} is too small")
                risen = True
        if risen:
            self.version += 1
        return risen

    # -- broadcasting -------------------------------------------------------------------------------
    def _broadcast(self, c: Broadcast) -> bool:
        (left, lsp), (right, rsp) = self.expand(c.left), self.expand(c.right)
        blame = c.blame | lsp | rsp
        tail: List[Elem] = []
        equations = []
        i, j = len(left) - 1, len(right) - 1
        while i >= 0 and j >= 0:
            (a, ab), (b, bb) = left[i], right[j]
            if isinstance(a, ShapeVar) and a == b:
                tail.insert(0, a)  # a shape broadcasts with itself
                i, j = i - 1, j - 1
                continue
            if isinstance(a, ShapeVar) or isinstance(b, ShapeVar):
                if [e for e, _ in left[:i + 1]] == [e for e, _ in right[:j + 1]]:
                    break  # the same prefix on both sides
                return False  # where each side's dims stand is not known yet
            blame = blame | ab | bb
            if isinstance(a, int) and a == 1:
                tail.insert(0, b)
            elif isinstance(b, int) and b == 1:
                tail.insert(0, a)
            elif self._marked(a) != self._marked(b):  # one may be 1: the other is the result
                marked, other = (a, b) if self._marked(a) else (b, a)
                self.queue.append(OneOrEqual(_as_dim(marked), _as_dim(other), blame))
                tail.insert(0, other)
            else:
                equations.append(DimEq(_as_dim(a), _as_dim(b), blame))
                tail.insert(0, a)
            i, j = i - 1, j - 1
        prefix = [e for e, _ in (left[:i + 1] if i >= 0 else right[:j + 1])]
        self.queue.extend(equations)
        self.queue.append(ShapeEq(c.out, tuple(prefix + tail), blame))
        return True


    def _marked(self, elem: Elem) -> bool:
        """Whether `elem` is a size variable marked `#` (it may be 1)."""
        return isinstance(elem, Dim) and elem.is_symbol and elem.name in self.fresh.marked


def _as_dim(elem: Elem) -> DimLike:
    """A shape item known to be a dim (the caller checked it is no shape variable)."""
    assert not isinstance(elem, ShapeVar)
    return elem


def _product(shape: Shape) -> DimLike:
    total: DimLike = 1
    for elem in shape:
        if not isinstance(elem, ShapeVar):
            total = total * elem
    return total


def _elimination_order(solution: dimalg.Solution):
    """Which variable an equation is solved for: an exact solution first, then as
    `_variable_order` says."""
    return (not solution.exact,) + _variable_order(solution.name)


def _variable_order(name: str):
    """Which of two variables is eliminated: one the inference made (the user's names
    stay), then the newest (the oldest name stays)."""
    internal = is_internal(name)
    age = -int(name[1:]) if internal else 0
    return (not internal, age, _reversed_name(name))


def _reversed_name(name: str) -> Tuple[int, ...]:
    return tuple(-ord(ch) for ch in name) + (1,)


def constraint_vars(c: Constraint) -> FrozenSet[Var]:
    """Every variable a constraint mentions."""
    found: Set[Var] = set()
    for term in constraint_terms(c):
        if isinstance(term, tuple):
            found.update(shape_vars(term))
        elif isinstance(term, (int, Dim)):
            found.update(free_symbols(term))
        else:
            found.update(type_vars(term))
    return frozenset(found)


Term = Union[Type, Shape, DimLike]


def constraint_terms(c: Constraint) -> Iterable[Term]:
    """The types, shapes or dims a constraint relates."""
    if isinstance(c, (TypeEq, ShapeEq, DimEq, SameSize)):
        return (c.left, c.right)
    if isinstance(c, AtLeast):
        return (c.value, c.least)
    if isinstance(c, Divides):
        return (c.value,)
    if isinstance(c, Broadcast):
        return (c.left, c.right, c.out)
    if isinstance(c, OneOrEqual):
        return (c.dim, c.other)
    raise TypeError(f"not a constraint: {c!r}")


def rename_constraint(c: Constraint, rename) -> Constraint:
    """A constraint with `rename` (a function on types, shapes and dims) applied to its terms."""
    if isinstance(c, (TypeEq, ShapeEq, DimEq, SameSize)):
        return replace(c, left=rename(c.left), right=rename(c.right))
    if isinstance(c, AtLeast):
        return replace(c, value=rename(c.value), least=rename(c.least))
    if isinstance(c, Divides):
        return replace(c, value=rename(c.value))
    if isinstance(c, Broadcast):
        return replace(c, left=rename(c.left), right=rename(c.right), out=rename(c.out))
    if isinstance(c, OneOrEqual):
        return replace(c, dim=rename(c.dim), other=rename(c.other))
    raise TypeError(f"not a constraint: {c!r}")


def with_blame(c: Constraint, blame: Blame) -> Constraint:
    """A constraint with `blame` added to its own."""
    return replace(c, blame=c.blame | blame)
