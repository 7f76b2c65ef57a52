"""The shape solver: constraints in, a `Solution` out.

`solve(constraints, variables)` runs a worklist to a fixed point. Each step
substitutes what is known into one constraint and then either uses it up
(it is proved, it binds a variable, it splits a shape) or defers it:

* **shapes** are unified by rank: equal items are matched from both ends,
  a lone shape variable is bound to the rest (occurs check), and a
  constraint whose ranks are still open waits;
* **equations** that are linear in one variable are solved (checking that
  the solution is a whole number and within the variable's domain); a
  variable times a symbolic size (`A*D == L`) is solved by exact division,
  or else becomes a quotient, `A = L/D`, with the residual check that D
  divides L; an equation in a floor of one variable (`(H + 3)//4 == 16`)
  bounds that variable, binding it only where one value fits; several
  linear equations together are solved by Gaussian elimination when the
  worklist stalls; any other equation is deferred, never guessed;
* **inequalities and divisibility** are decided by the prover
  (`axgraph.shapes.prover`); an inequality in one variable narrows that
  variable's bounds, which later decisions use.

Every constraint ends *proved* (dropped), *refuted* (a `Conflict`) or
*unknown* (a `Residual`, checked once sizes are known). Each derived fact
carries the union of the origins of the constraints it came from (its blame
set), so a conflict names every contributing line. Constraints are taken in
a canonical order, so the result depends only on the set of constraints,
never on the order they were listed in.
"""
from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Dict, FrozenSet, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

from ..dims import (Atom, Dim, DimLike, _atoms, atom_domain, exact_quotient, free_symbols,
                    from_terms, linear_in_one, subs)
from ..errors import ShapeCheckError, ShapeConflictError
from .constraints import (AtLeast, Broadcast, Constraint, Divides, Equal, OneOrEqual, Origin,
                          SameShape, SameSize, Shape, ShapeItem, ShapeVar, Variable,
                          format_shape, places)
from .monotone import least_solution, non_decreasing
from .prover import Verdict, interval, prove_divides, prove_nonnegative

Blame = FrozenSet[Origin]
_NO_BLAME: Blame = frozenset()


#: What a `Conflict` found, with the `operands` each kind carries (values as known then).
CONFLICT_KINDS = {
    "mismatch": "two dims that must be equal are not: (left, right)",
    "apart": "two dims that must be equal never are, whatever the sizes: (left, right)",
    "domain": "a size would lie outside its domain: (name, value, least, most, the constraint "
              "that set the bound it breaks, or None: its declared domain)",
    "fraction": "a size would have to be a fraction: (name, value as a Fraction)",
    "no_whole_solution": "a linear equation has no whole-number solution: (difference,)",
    "floor": "a floor would have to be a fraction: (difference,)",
    "bounds": "bounds leave a size no value: (name, (least, most) asked, (least, most) known)",
    "at_least": "an inequality fails: (value, bound)",
    "divides": "a size is not a multiple of another: (divisor, dividend)",
    "rank": "two shapes that must be one differ in rank: (left, right)",
    "cycle": "a shape would contain itself: (shape variable name, shape)",
    "system": "linear equations together have no (whole) solution: (name, value) or ()",
    "one_or_equal": "a size that may be 1 is neither 1 nor the size it faces: (dim, other)",
    "universal": "a size that holds for every value would be one: (name, value)",
}


@dataclass(frozen=True)
class Conflict:
    """A constraint the solver refuted, with every origin that led to it.

    Parameters
    ----------
    message : str
        What cannot hold, and the values and lines that say so.
    origins : frozenset of Origin
        Every origin that contributed (the blame set).
    constraint : Equal, AtLeast, Divides, SameShape, SameSize, OneOrEqual or Broadcast
        The constraint refuted, as it was given.
    kind : str
        What was found, one of `CONFLICT_KINDS`: a front end words its own message from
        it and `operands` (the message is the solver's wording).
    operands : tuple
        The values the kind names (see `CONFLICT_KINDS`), as known when it was found.
    """

    message: str
    origins: Blame
    constraint: Constraint
    kind: str
    operands: Tuple[object, ...]

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class Residual:
    """A constraint the solver could neither prove nor refute: checked once sizes are known.

    Parameters
    ----------
    constraint : Equal, AtLeast, Divides, SameShape, SameSize, OneOrEqual or Broadcast
        The constraint with what the solver knows substituted in.
    origins : frozenset of Origin
        Every origin it depends on.
    """

    constraint: Constraint
    origins: Blame

    def __str__(self) -> str:
        return f"{self.constraint}   from {places(self.origins)}"


@dataclass(frozen=True)
class Quotient:
    """A variable that is a whole quotient: `name = dividend / divisor` once they are known,
    provided the divisor divides the dividend (a residual `Divides` checks it).

    Parameters
    ----------
    name : str
        The variable.
    dividend, divisor : int or Dim
        Its definition.
    origins : frozenset of Origin
        Where the equation it solves came from.
    """

    name: str
    dividend: DimLike
    divisor: DimLike
    origins: Blame

    def __str__(self) -> str:
        return f"{self.name} = ({self.dividend})/({self.divisor})"


_CONSTRAINT_TYPES = (Equal, AtLeast, Divides, SameShape, Broadcast, SameSize, OneOrEqual)


class _Work:
    """A constraint in the worklist, with its blame set (its own origin and those of every
    fact substituted into it)."""

    __slots__ = ("constraint", "blame", "key")
    _serials = itertools.count()

    def __init__(self, constraint: Constraint, blame: Blame) -> None:
        self.constraint = constraint
        self.blame = blame | {constraint.origin}
        self.key = next(self._serials)

    def copy(self) -> "_Work":
        """The same work (same key), to change apart from this one."""
        other = _Work.__new__(_Work)
        other.constraint, other.blame, other.key = self.constraint, self.blame, self.key
        return other


#: What a step did: used the constraint up, or kept it (with or without progress).
_DONE, _KEPT, _NARROWED = "done", "kept", "narrowed"

#: Which variable an equation eliminates first: one to infer before one the user declared.
_KIND_RANK = {"flexible": 0, "derived": 1, "rigid": 2, "universal": 3}


class Solution:
    """What the solver found: bindings, residual checks and conflicts.

    Made by `solve` (and `Solution.check`), not directly.

    Parameters
    ----------
    solver : _Solver
        The state of a finished solve, which the solution keeps (to check facts against
        it later) and nothing else changes.
    residuals : sequence of Residual
        The constraints left undecided.
    conflicts : sequence of Conflict
        The constraints refuted.

    Attributes
    ----------
    bindings : dict of str to int or Dim
        The value (or expression in the remaining variables) each solved size
        variable must have.
    binding_origins : dict of str to frozenset of Origin
        Where each binding came from.
    shapes : dict of str to tuple
        The shape each solved shape variable stands for.
    bounds : dict of str to (int, number)
        The lowest and highest value each unsolved variable may take (math.inf: none).
    quotients : tuple of Quotient
        Variables defined as exact quotients by symbolic sizes.
    residuals : tuple of Residual
        Constraints left to check once sizes are known.
    conflicts : tuple of Conflict
        Constraints refuted: the sizes cannot fit whatever is fed.
    variables : dict of str to Variable
        The variables the solver was told about (and those it met, as rigid).
    """

    def __init__(self, solver: "_Solver", residuals: Sequence[Residual],
                 conflicts: Sequence[Conflict]) -> None:
        self._state = solver
        self.bindings: Dict[str, DimLike] = dict(solver.bindings)
        self.binding_origins: Dict[str, Blame] = dict(solver.why)
        self.shapes: Dict[str, Shape] = dict(solver.shapes)
        self.shape_origins: Dict[str, Blame] = dict(solver.shape_why)
        self.bounds: Dict[str, Tuple[int, float]] = {
            name: bound for name, bound in solver.bounds.items() if name not in solver.bindings}
        self.quotients: Tuple[Quotient, ...] = tuple(solver.quotients.values())
        #: The unsolved variables whose bounds constraints narrowed, to the origins that did.
        self.narrowed: Dict[str, Blame] = {}
        for (name, _), (_, blame) in solver.bound_source.items():
            if name in self.bounds:
                self.narrowed[name] = self.narrowed.get(name, _NO_BLAME) | blame
        self.residuals: Tuple[Residual, ...] = tuple(residuals)
        self.conflicts: Tuple[Conflict, ...] = tuple(conflicts)
        self.variables: Dict[str, Variable] = dict(solver.variables)

    @property
    def ok(self) -> bool:
        """Whether no constraint was refuted."""
        return not self.conflicts

    def kind(self, name: str) -> str:
        """The kind of variable `name` ("rigid" unless the solver was told otherwise)."""
        variable = self.variables.get(name)
        return variable.kind if variable is not None else "rigid"

    @property
    def inferred(self) -> Dict[str, DimLike]:
        """Bindings of flexible and derived variables: lengths the solver worked out."""
        return {n: v for n, v in self.bindings.items() if self.kind(n) != "rigid"}

    @property
    def pinned(self) -> Dict[str, DimLike]:
        """Bindings of rigid variables: sizes the user declared free that the graph fixes
        (each is checked when data is fed)."""
        return {n: v for n, v in self.bindings.items() if self.kind(n) == "rigid"}

    def value(self, dim: DimLike) -> DimLike:
        """`dim` with every solved variable replaced by its binding.

        Parameters
        ----------
        dim : int or Dim
            An expression over the variables.

        Returns
        -------
        int or Dim
            The expression in the unsolved variables only.
        """
        return subs(dim, self.bindings)

    def shape(self, shape: Sequence[ShapeItem]) -> Shape:
        """`shape` with solved shape variables expanded and solved dims substituted.

        Parameters
        ----------
        shape : sequence of (int, Dim or ShapeVar)
            A shape.

        Returns
        -------
        tuple
            The shape as far as it is known.
        """
        expanded = _expand(tuple(shape), self.shapes)
        return tuple(item if isinstance(item, ShapeVar) else self.value(item)
                     for item in expanded)

    def raise_conflicts(self, error_class: type = ShapeConflictError,
                        location: Optional[Tuple[str, int]] = None) -> None:
        """Raise `error_class` listing every conflict, if there is one.

        Parameters
        ----------
        error_class : type, optional
            ShapeConflictError (default) or ShapeCheckError.
        location : (str, int), optional
            The user's line to show as the error's location.

        Raises
        ------
        ShapeConflictError or ShapeCheckError
            Some constraint was refuted; the message names every line behind it.
        """
        if not self.conflicts:
            return
        if len(self.conflicts) == 1:
            message = f"sizes do not fit: {self.conflicts[0].message}"
        else:
            message = "sizes do not fit:\n" + "\n".join(f"  - {c.message}" for c in self.conflicts)
        quoted = sorted({o for c in self.conflicts for o in c.origins if o.excerpt})
        message += "".join(f"\n  {o.place}: {o.what}\n{o.excerpt}" for o in quoted)
        raise error_class(message, location, conflicts=self.conflicts)

    def constraints(self) -> List[Tuple[Constraint, Blame]]:
        """Everything this solution still asks of the sizes, as constraints with their blame
        sets: each binding as an equation, each residual, each quotient's definition.

        Returns
        -------
        list of (constraint, frozenset of Origin)
            What a later solve (with the sizes fed) must check again.
        """
        result: List[Tuple[Constraint, Blame]] = []
        for name in sorted(self.bindings):
            blame = self.binding_origins.get(name, _NO_BLAME)
            result.append((Equal(Dim(name), self.bindings[name], _primary(blame)), blame))
        for name in sorted(self.shapes):
            blame = self.shape_origins.get(name, _NO_BLAME)
            result.append((SameShape((ShapeVar(name),), self.shapes[name], _primary(blame)),
                           blame))
        for quotient in self.quotients:
            result.append((Equal(Dim(quotient.name) * quotient.divisor, quotient.dividend,
                                 _primary(quotient.origins)), quotient.origins))
        result.extend((residual.constraint, residual.origins) for residual in self.residuals)
        return result

    def check(self, values: Mapping[str, int], origin: Origin,
              location: Optional[Tuple[str, int]] = None) -> "Solution":
        """Check this solution against sizes now known: the solve again, with each value given
        as an equation from `origin`, raising ShapeCheckError on any conflict.

        Parameters
        ----------
        values : mapping of str to int
            Values of some variables (from data fed).
        origin : Origin
            Where the values come from (the line feeding the data).
        location : (str, int), optional
            The line to show as the error's location (default: `origin`'s).

        Returns
        -------
        Solution
            The solution with those values: its bindings give every size they decide.

        Raises
        ------
        ShapeCheckError
            A value breaks a binding or a residual check; the message names the lines
            behind the constraint, `origin` and the values.
        """
        facts = [Equal(Dim(name), value, origin) for name, value in sorted(values.items())]
        return self.check_constraints(facts, location or (origin.file, origin.line))

    def check_constraints(self, facts: Iterable[Constraint],
                          location: Optional[Tuple[str, int]] = None) -> "Solution":
        """`check` for facts given as constraints (each with its own origin).

        Parameters
        ----------
        facts : iterable of constraints
            New facts (usually `Equal(length, value, origin)` for each size fed).
        location : (str, int), optional
            The line to show as the error's location.

        Returns
        -------
        Solution
            The solution with the facts.

        Raises
        ------
        ShapeCheckError
            A fact breaks this solution.
        """
        state = self._state.copy()  # the solve goes on from where it stopped, facts added
        state.conflicts = []
        state.advance([_work(fact) for fact in facts])
        solution = state.finish()
        solution.raise_conflicts(ShapeCheckError, location)
        return solution

    def __str__(self) -> str:
        lines = []
        for title, entries in (("inferred", self.inferred), ("pinned", self.pinned)):
            for name in sorted(entries):
                lines.append(f"{title} {name} = {entries[name]}   from "
                             f"{places(self.binding_origins.get(name, ()))}")
        for name in sorted(self.shapes):
            lines.append(f"shape *{name} = {format_shape(self.shapes[name])}   from "
                         f"{places(self.shape_origins.get(name, ()))}")
        lines.extend(f"quotient {q}   from {places(q.origins)}" for q in self.quotients)
        for name in sorted(self.narrowed):
            low, high = self.bounds[name]
            lines.append(f"bounds {name} in {_span(low, high)}   from "
                         f"{places(self.narrowed[name])}")
        lines.extend(f"check {residual}" for residual in self.residuals)
        lines.extend(f"conflict: {conflict}" for conflict in self.conflicts)
        return "\n".join(lines) if lines else "(nothing to solve)"


def solve(constraints: Iterable[Constraint], variables: Iterable[Variable] = ()) -> Solution:
    """Solve shape constraints: bindings, residual checks and conflicts, with origins.

    Parameters
    ----------
    constraints : iterable of Equal, AtLeast, Divides, SameShape, SameSize, OneOrEqual or Broadcast
        The constraints, each with its origin.
    variables : iterable of Variable, optional
        How to treat some size variables (kind, domain, where declared); any other
        variable is rigid, with the domain its Dim declares (default >= 1).

    Returns
    -------
    Solution
        The result; its `conflicts` are the constraints refuted (`raise_conflicts`
        raises them), its `residuals` those left for run time.

    Raises
    ------
    AxgraphTypeError
        An item is not a constraint.

    Examples
    --------
    >>> import axgraph as ng
    >>> from axgraph.shapes import Equal, Origin, solve
    >>> N, M = ng.dim("N"), ng.dim("M")
    >>> here = Origin("model.py", 3)
    >>> solution = solve([Equal(N + M, 5, here), Equal(N - M, 1, here)])
    >>> solution.bindings == {"M": 2, "N": 3}
    True
    """
    return Solver(variables).add_all(constraints)._settle().finish()  # the state is its own


class Solver:
    """The shape solver, told constraints one at a time: its `solution` is always the fixed
    point of everything added so far.

    A front end that generates constraints as it walks a program adds them as it goes and
    reads the verdict whenever it needs one; `fork` copies the state to try something (a
    let-bound function's body) without touching the original, and `take_residuals` hands
    the undecided checks on some variables over to whoever generalises them. Each batch
    of constraints added between two readings is taken in canonical order, and the
    verdicts (conflict or not, which sizes fit) do not depend on how constraints were split
    into batches or ordered (only the wording of a conflict may name another first).
    Broadcasts are decided afresh at each reading, on what is known by then, and for good
    only by `take_residuals`.

    Parameters
    ----------
    variables : iterable of Variable, optional
        How to treat some size variables; any other is rigid, with the domain its Dim
        declares. More can be declared with `declare`.

    Examples
    --------
    >>> import axgraph as ng
    >>> from axgraph.shapes import Equal, Origin, Solver
    >>> N, M = ng.dim("N"), ng.dim("M")
    >>> solver = Solver()
    >>> solver.add(Equal(N + M, 5, Origin("model.py", 3))).solution.bindings
    {'M': Dim('-N + 5')}
    >>> solver.add(Equal(N - M, 1, Origin("model.py", 4))).solution.bindings == {"M": 2, "N": 3}
    True
    """

    def __init__(self, variables: Iterable[Variable] = ()) -> None:
        self._state = _Solver({})
        self._new: List[_Work] = []
        self._solution: Optional[Solution] = None
        for variable in variables:
            self.declare(variable)

    def declare(self, variable: Variable) -> "Solver":
        """Describe one size variable (its kind and domain).

        Parameters
        ----------
        variable : Variable
            The description.

        Returns
        -------
        Solver
            This solver, to chain calls.

        Raises
        ------
        AxgraphTypeError
            `variable` is not a Variable.
        AxgraphValueError
            A constraint added already mentions the variable: its kind and domain
            decide how those were solved, so they come first.
        """
        from ..debug_info import user_location
        if not isinstance(variable, Variable):
            from ..errors import AxgraphTypeError
            raise AxgraphTypeError(f"declare takes a Variable, not {variable!r:.80}",
                                   user_location())
        if self._state.mentions_variable(variable.name) or any(
                variable.name in _variables_of(work.constraint) for work in self._new):
            from ..errors import AxgraphValueError
            raise AxgraphValueError(f"declare variable {variable.name} before adding a "
                                    f"constraint that mentions it", user_location())
        self._state.declare(variable)
        self._solution = None
        return self

    def make_universal(self, name: str) -> "Solver":
        """Make size variable `name` universal from now on, although constraints mention it
        already (a `forall` met after the size was used): nothing may bind it any more. That
        only takes choices away, so it is sound while no constraint binds it.

        Parameters
        ----------
        name : str
            The size variable.

        Returns
        -------
        Solver
            This solver, to chain calls.

        Raises
        ------
        AxgraphValueError
            A constraint added already binds the variable.
        """
        state = self._settle()
        if name in state.bindings:
            from ..debug_info import user_location
            from ..errors import AxgraphValueError
            raise AxgraphValueError(f"variable {name} is bound already ({name} = "
                                    f"{state.bindings[name]}): it cannot be made universal",
                                    user_location())
        old = state.variables.get(name)
        state.variables[name] = (dataclasses.replace(old, kind="universal") if old is not None
                                 else Variable(name, "universal"))
        self._solution = None
        return self

    def mark_broadcasts(self, name: str) -> "Solver":
        """Let size variable `name` be 1 and broadcast from now on (`Variable.broadcasts`),
        although constraints mention it already (Axon's `#n` met after n was used).
        Broadcasts are decided afresh at each reading, so every one not yet handed over by
        `take_residuals` sees the mark.

        Parameters
        ----------
        name : str
            The size variable.

        Returns
        -------
        Solver
            This solver, to chain calls.
        """
        state = self._settle()
        old = state.variables.get(name)
        state.variables[name] = (dataclasses.replace(old, broadcasts=True) if old is not None
                                 else Variable(name, broadcasts=True))
        self._solution = None
        return self

    def add(self, constraint: Constraint, blame: Iterable[Origin] = ()) -> "Solver":
        """Add one constraint.

        Parameters
        ----------
        constraint : Equal, AtLeast, Divides, SameShape, SameSize, OneOrEqual or Broadcast
            The constraint, with its origin.
        blame : iterable of Origin, optional
            More origins it depends on (a generalised function's constraint copied to a
            use of it: the use), named with its own in any conflict.

        Returns
        -------
        Solver
            This solver, to chain calls.

        Raises
        ------
        AxgraphTypeError
            `constraint` is not a constraint.
        """
        self._new.append(_work(constraint, blame))
        self._solution = None
        return self

    def add_all(self, constraints: Iterable[Constraint]) -> "Solver":
        """`add` each of `constraints` (one batch, taken in canonical order).

        Parameters
        ----------
        constraints : iterable of Equal, AtLeast, Divides, SameShape, SameSize, OneOrEqual or Broadcast
            The constraints.

        Returns
        -------
        Solver
            This solver, to chain calls.

        Raises
        ------
        AxgraphTypeError
            An item is not a constraint.
        """
        for constraint in constraints:
            self.add(constraint)
        return self

    def _settle(self) -> _Solver:
        if self._new:
            works, self._new = self._new, []
            self._state.advance(works)
        return self._state

    @property
    def solution(self) -> Solution:
        """The `Solution` of every constraint added so far (worked to a fixed point now)."""
        if self._solution is None:  # the solution keeps a copy: later additions do not touch it
            self._solution = self._settle().copy().finish()
        return self._solution

    @property
    def ok(self) -> bool:
        """Whether no constraint added so far was refuted."""
        return self.solution.ok

    @property
    def conflicts(self) -> Tuple[Conflict, ...]:
        """The constraints refuted so far, each with every origin behind it."""
        return self.solution.conflicts

    @property
    def residuals(self) -> Tuple[Residual, ...]:
        """The constraints neither proved nor refuted so far."""
        return self.solution.residuals

    def fork(self) -> "Solver":
        """An independent copy: constraints added to one are not seen by the other.

        Returns
        -------
        Solver
            The copy, with the same bindings, bounds, conflicts and pending constraints.
        """
        other = Solver.__new__(Solver)
        other._state = self._settle().copy()
        other._new = []
        other._solution = self._solution
        return other

    def take_residuals(self, names: Iterable[str]) -> List[Residual]:
        """Decide what can be decided (broadcasts included, for good), then remove and
        return the undecided constraints that mention any of the size or shape variables
        `names`: a front end that generalises those variables keeps them with the
        generalised type, to check again at each use.

        Parameters
        ----------
        names : iterable of str
            Size variables and shape variables (by name).

        Returns
        -------
        list of Residual
            The constraints taken, with what is known substituted in, sorted by origin.
        """
        wanted = set(names)
        state = self._settle()
        state.advance([], broadcasts=True)
        taken: List[Tuple[_Work, Residual]] = []
        kept: List[Tuple[_Work, Residual]] = []
        for work in state.pending:
            residual = state._residual(work)
            mentioned = _variables_of(work.constraint) | _variables_of(residual.constraint)
            (taken if mentioned & wanted else kept).append((work, residual))
        state.pending = [work for work, _ in kept]
        self._solution = None
        return sorted((residual for _, residual in taken),
                      key=lambda r: (sorted(r.origins), str(r.constraint)))


_quotient_serials = itertools.count(1)


def quotient(dividend: DimLike, divisor: DimLike, origin: Origin
             ) -> Tuple[Dim, List[Constraint], Variable]:
    """A fresh size variable for `dividend / divisor` when the divisor is symbolic, with
    what the solver needs to know about it.

    `L // D` is not an expression for a symbolic D (it may not divide); a front end
    that needs one (a reshape into rows of D) takes this variable instead, gives the
    solver the constraints and the variable, and gets back the quotient `q = L/D` with
    the residual check that D divides L.

    Parameters
    ----------
    dividend, divisor : int or Dim
        The two sizes.
    origin : Origin
        Where the division is asked for.

    Returns
    -------
    (Dim, list of constraints, Variable)
        The variable q; the constraint `divisor * q == dividend` (from which the solver
        derives the quotient and its divisibility check); q's description (derived, >= 0).
    """
    name = f"q{next(_quotient_serials)}"
    variable = Variable(name, "derived", origin, min=0, about=f"({dividend})/({divisor})")
    q = Dim(name)
    return q, [Equal(divisor * q, dividend, origin)], variable


def _work(constraint: Constraint, blame: Iterable[Origin] = ()) -> _Work:
    """A constraint as a work item, after checking it is one."""
    if not isinstance(constraint, _CONSTRAINT_TYPES):
        from ..debug_info import user_location
        from ..errors import AxgraphTypeError
        names = ", ".join(kind.__name__ for kind in _CONSTRAINT_TYPES)
        raise AxgraphTypeError(f"solve takes constraints ({names}), not {constraint!r:.80}",
                               user_location())
    return _Work(constraint, frozenset(blame))


def _primary(blame: Blame) -> Origin:
    return min(blame) if blame else Origin("<solver>", 0)


def _canonical_key(work: _Work) -> tuple:
    c = work.constraint
    return (type(c).__name__, str(c), c.origin, tuple(sorted(work.blame)))


def _expand(shape: Shape, bindings: Mapping[str, Shape]) -> Shape:
    """`shape` with bound shape variables replaced (bindings are in solved form)."""
    if not any(isinstance(item, ShapeVar) and item.name in bindings for item in shape):
        return shape
    result: List[ShapeItem] = []
    for item in shape:
        if isinstance(item, ShapeVar) and item.name in bindings:
            result.extend(bindings[item.name])
        else:
            result.append(item)
    return tuple(result)


def _shape_vars(shape: Shape) -> List[str]:
    return [item.name for item in shape if isinstance(item, ShapeVar)]


class _Solver:
    """The state of one solve: bindings, bounds, shape bindings, quotients, conflicts."""

    def __init__(self, variables: Mapping[str, Variable]) -> None:
        self.variables: Dict[str, Variable] = dict(variables)
        self.bindings: Dict[str, DimLike] = {}
        self.why: Dict[str, Blame] = {}
        #: Which bindings mention a variable (to keep bindings in solved form).
        self.mentions: Dict[str, Set[str]] = {}
        #: Lowest and highest value of unsolved variables, narrowed by inequalities.
        self.bounds: Dict[str, Tuple[int, float]] = {}
        #: (name, 0 for the lowest / 1 for the highest) -> (key of the work that set it, blame).
        self.bound_source: Dict[Tuple[str, int], Tuple[int, Blame]] = {}
        #: The same keys -> the constraint that set that bound (as it was given).
        self.bound_constraint: Dict[Tuple[str, int], Constraint] = {}
        self.shapes: Dict[str, Shape] = {}
        self.shape_why: Dict[str, Blame] = {}
        self.quotients: Dict[str, Quotient] = {}
        self.conflicts: List[Conflict] = []
        self.atoms: Dict[str, Atom] = {}
        self.new_work: List[_Work] = []
        #: What elimination already derived or reported, so it is not derived again.
        self.eliminated: Set[str] = set()
        #: The constraints deferred at the last fixed point, retried with each new one.
        self.pending: List[_Work] = []
        for variable in variables.values():
            self.declare(variable)

    # -- the loop ---------------------------------------------------------------------------
    def declare(self, variable: Variable) -> None:
        """Tell the solver how to treat a variable (before any constraint mentions it)."""
        self.variables[variable.name] = variable
        self.bounds[variable.name] = (variable.min, variable.max)

    def mentions_variable(self, name: str) -> bool:
        """Whether some constraint already given mentions the size variable `name`."""
        return name in self.atoms or name in self.bindings

    def advance(self, works: List[_Work], broadcasts: bool = False) -> None:
        """Work `works`, with the constraints still deferred, to a fixed point; with
        `broadcasts`, decide the broadcasts too, one at a time when nothing else moves.

        New works are taken in canonical order, so a batch of constraints gives the same
        result whatever order it was listed in. Deciding a broadcast commits to what is
        known then (a size not yet known to be 1 is paired, not broadcast), so only a
        state that is final (or that a front end generalizes) decides them.
        """
        works = sorted(works, key=_canonical_key)
        for work in works:
            self._note_atoms(work.constraint)
        queue, deferred = self.pending + works, []
        while True:
            progress = False
            for work in queue:
                outcome = self._step(work)
                if outcome != _DONE:
                    deferred.append(work)
                progress = progress or outcome != _KEPT
                if self.new_work:
                    deferred.extend(self.new_work)
                    self.new_work = []
                    progress = True
            if progress:
                queue, deferred = deferred, []
                continue
            derived = self._eliminate(deferred)
            if derived or self.new_work:
                queue, deferred = deferred + derived + self.new_work, []
                self.new_work = []
                continue
            decided = self._decide_a_broadcast(deferred) if broadcasts else None
            if decided is not None:
                queue = [work for work in deferred if work is not decided] + self.new_work
                deferred, self.new_work = [], []
                continue
            break
        self.pending = deferred

    def residuals(self) -> List[Residual]:
        """The deferred constraints at the fixed point, as residual checks (each once)."""
        residuals, seen = [], set()
        for work in self.pending:
            residual = self._final(work)
            if residual is not None and (str(residual.constraint), residual.origins) not in seen:
                seen.add((str(residual.constraint), residual.origins))
                residuals.append(residual)
        residuals.sort(key=lambda r: (sorted(r.origins), str(r.constraint)))
        return residuals

    def finish(self) -> Solution:
        """The solution: the fixed point, broadcasts decided. The state belongs to it."""
        self.advance([], broadcasts=True)
        conflicts = sorted(self.conflicts, key=lambda c: (sorted(c.origins), c.message))
        return Solution(self, self.residuals(), conflicts)

    def copy(self) -> "_Solver":
        """An independent copy of this state: what one changes, the other does not see."""
        other = _Solver.__new__(_Solver)
        other.variables = dict(self.variables)
        other.bindings = dict(self.bindings)
        other.why = dict(self.why)
        other.mentions = {name: set(users) for name, users in self.mentions.items()}
        other.bounds = dict(self.bounds)
        other.bound_source = dict(self.bound_source)
        other.bound_constraint = dict(self.bound_constraint)
        other.shapes = dict(self.shapes)
        other.shape_why = dict(self.shape_why)
        other.quotients = dict(self.quotients)
        other.conflicts = list(self.conflicts)
        other.atoms = dict(self.atoms)
        other.new_work = [work.copy() for work in self.new_work]
        other.eliminated = set(self.eliminated)
        other.pending = [work.copy() for work in self.pending]
        return other

    def _note_atoms(self, constraint: Constraint) -> None:
        for value in _dims_of(constraint):
            if isinstance(value, Dim):
                for atom in _atoms(value._terms):
                    if atom[0] == "v":
                        self.atoms.setdefault(atom[1], atom)

    def _step(self, work: _Work) -> str:
        constraint = work.constraint
        if isinstance(constraint, Equal):
            return self._equal(work)
        if isinstance(constraint, AtLeast):
            return self._at_least(work)
        if isinstance(constraint, Divides):
            return self._divides(work)
        if isinstance(constraint, Broadcast):
            return _KEPT  # decided last, by _decide_a_broadcast
        if isinstance(constraint, SameSize):
            return self._same_size(work)
        if isinstance(constraint, OneOrEqual):
            return self._one_or_equal(work)
        return self._same_shape(work)

    # -- facts ------------------------------------------------------------------------------
    def _kind(self, name: str) -> str:
        variable = self.variables.get(name)
        return variable.kind if variable is not None else "rigid"

    def _bounds_of(self, name: str) -> Tuple[int, float]:
        found = self.bounds.get(name)
        if found is None:
            atom = self.atoms.get(name, ("v", name))
            found = self.bounds[name] = atom_domain(atom)
        return found

    def _prover_bounds(self, value: DimLike) -> Dict[str, Tuple[int, float]]:
        return {name: self._bounds_of(name) for name in free_symbols(value)}

    def _bound_blame(self, value: DimLike) -> Blame:
        blame: Set[Origin] = set()
        for name in free_symbols(value):
            for side in (0, 1):
                source = self.bound_source.get((name, side))
                if source is not None:
                    blame |= source[1]
        return frozenset(blame)

    def _is_bound_source(self, work: _Work) -> bool:
        """Whether `work` set the bound of a variable still unsolved (once a variable is
        bound, the inequality that bounded it is an ordinary check on its value)."""
        return any(key == work.key for (name, _), (key, _) in self.bound_source.items()
                   if name not in self.bindings)

    def _subst(self, value: DimLike) -> Tuple[DimLike, Blame]:
        names = free_symbols(value) & self.bindings.keys()
        if not names:
            return value, _NO_BLAME
        blame: Set[Origin] = set()
        for name in names:
            blame |= self.why[name]
        return subs(value, self.bindings), frozenset(blame)

    def _push(self, constraint: Constraint, blame: Blame) -> None:
        self._note_atoms(constraint)
        self.new_work.append(_Work(constraint, blame))

    def _conflict(self, work: _Work, message: str, blame: Blame, kind: str,
                  operands: Tuple[object, ...]) -> str:
        blame = blame | work.blame
        missing = [o for o in sorted(blame) if str(o) not in message]
        if missing:
            message += f" (also from {places(missing)})"
        self.conflicts.append(Conflict(message, blame, work.constraint, kind, operands))
        return _DONE

    def _bind(self, name: str, value: DimLike, blame: Blame, work: _Work) -> str:
        if self._kind(name) == "universal":
            return self._conflict(work, f"{name} holds for every size, but {name} = {value} "
                                        f"from {places(blame)}", blame, "universal", (name, value))
        low, high = self._bounds_of(name)
        bound_blame = self._bound_blame(Dim(name))
        if isinstance(value, int):
            if not low <= value <= high:
                bounded_by = self.bound_constraint.get((name, 0 if value < low else 1))
                return self._conflict(work, self._domain_message(name, value, blame, low, high),
                                      blame | bound_blame, "domain",
                                      (name, value, low, high, bounded_by))
        else:
            origin = work.constraint.origin
            if low > -math.inf:
                self._push(AtLeast(value, low, origin), blame | bound_blame)
            if high < math.inf:
                self._push(AtLeast(int(high), value, origin), blame | bound_blame)
        for other in self.mentions.pop(name, set()):
            if other in self.bindings:
                self.bindings[other] = subs(self.bindings[other], {name: value})
                self.why[other] = self.why[other] | blame
                for symbol in free_symbols(self.bindings[other]):
                    self.mentions.setdefault(symbol, set()).add(other)
        self.bindings[name] = value
        self.why[name] = blame
        if self._may_be_one(Dim(name)) and isinstance(value, Dim) and value.is_symbol \
                and not self._may_be_one(value):  # the same size: it may still be 1
            self.variables[value.name] = dataclasses.replace(
                self.variables.get(value.name) or Variable(value.name), broadcasts=True)
        for symbol in free_symbols(value):
            self.mentions.setdefault(symbol, set()).add(name)
        quotient = self.quotients.pop(name, None)
        if quotient is not None:
            self._push(Equal(value * quotient.divisor, quotient.dividend, origin=_primary(
                quotient.origins)), quotient.origins | blame)
        # a quotient whose dividend or divisor this binding changes is solved again (it may
        # now divide exactly): what a batch with the binding already known would find
        for stale in [q for q in self.quotients.values()
                      if name in free_symbols(q.dividend) | free_symbols(q.divisor)]:
            del self.quotients[stale.name]
            self._push(Equal(Dim(stale.name) * stale.divisor, stale.dividend,
                             origin=_primary(stale.origins)), stale.origins)
        return _DONE

    def _domain_message(self, name: str, value: int, blame: Blame, low: float,
                        high: float) -> str:
        variable = self.variables.get(name)
        sources = [source[1] for side in (0, 1)
                   for source in [self.bound_source.get((name, side))] if source is not None]
        if sources:
            where = "from " + places(frozenset().union(*sources))
        elif variable is not None and variable.origin is not None:
            where = f"declared at {variable.origin.place}"
        else:
            where = "its domain"
        limit = f">= {low}" if value < low else f"<= {int(high)}"
        if value < 0 and low <= 0 and not sources:
            return f"{name} = {value} from {places(blame)}, but a size is never negative"
        return f"{name} = {value} from {places(blame)}, but {name} must be {limit} ({where})"

    def _narrow(self, name: str, low: float, high: float, work: _Work, blame: Blame) -> str:
        """Intersect `name`'s bounds with [low, high]; binds it when one value is left."""
        old_low, old_high = self._bounds_of(name)
        new_low, new_high = max(old_low, low), min(old_high, high)
        if (new_low, new_high) == (old_low, old_high):
            return _KEPT
        if new_low > new_high:
            other = self._bound_blame(Dim(name))
            return self._conflict(
                work, f"{work.constraint} from {work.constraint.origin} needs {name} in "
                      f"{_span(low, high)}, but {name} is in {_span(old_low, old_high)} "
                      f"from {places(other) if other else 'its domain'}", blame | other,
                "bounds", (name, (low, high), (old_low, old_high)))
        self.bounds[name] = (int(new_low), new_high if math.isinf(new_high) else int(new_high))
        if new_low != old_low:
            self.bound_source[(name, 0)] = (work.key, blame)
            self.bound_constraint[(name, 0)] = work.constraint
        if new_high != old_high:
            self.bound_source[(name, 1)] = (work.key, blame)
            self.bound_constraint[(name, 1)] = work.constraint
        if new_low == new_high:
            self._bind(name, int(new_low), blame | self._bound_blame(Dim(name)), work)
        return _NARROWED

    # -- equations ------------------------------------------------------------------------------
    def _equal(self, work: _Work) -> str:
        constraint = work.constraint
        assert isinstance(constraint, Equal)
        left, left_blame = self._subst(constraint.left)
        right, right_blame = self._subst(constraint.right)
        blame = work.blame | left_blame | right_blame
        difference = left - right
        if isinstance(difference, int):
            if difference:
                return self._conflict(work, self._mismatch(constraint, left, right, left_blame,
                                                           right_blame), blame,
                                      "mismatch", (left, right))
            return _DONE
        # a length to infer first, even by a quotient, before pinning a declared size
        outcome = self._solve_linear(difference, blame, work, flexible_only=True)
        if outcome is None:
            outcome = self._solve_symbolic_coefficient(difference, blame, work)
        if outcome is None:
            outcome = self._solve_linear(difference, blame, work, flexible_only=False)
        if outcome is None:
            outcome = self._solve_by_floor(difference, blame, work)
        if outcome is None:  # only a universal size is left to solve for: a conflict
            outcome = self._solve_linear(difference, blame, work, flexible_only=False,
                                         universal=True)
        if outcome is not None:
            return outcome
        narrowed = self._floor_equation(difference, blame, work)
        if narrowed is not None and narrowed != _KEPT:
            return narrowed
        low, high = interval(difference, self._prover_bounds(difference))
        if low > 0 or high < 0:
            other = self._bound_blame(difference)
            return self._conflict(work, f"{constraint} from {constraint.origin} cannot hold: "
                                        f"{left} - ({right}) lies in {_span(low, high)}"
                                        + self._given(difference, left_blame | right_blame),
                                  blame | other, "apart", (left, right))
        return _KEPT

    def _mismatch(self, constraint: Equal, left: DimLike, right: DimLike, left_blame: Blame,
                  right_blame: Blame) -> str:
        origin = constraint.origin
        a, b = constraint.left, constraint.right
        a_literal, b_literal = not free_symbols(a), not free_symbols(b)
        if left_blame and b_literal:
            return f"{a} = {left} from {places(left_blame)}, but {a} = {b} from {origin}"
        if right_blame and a_literal:
            return f"{b} = {right} from {places(right_blame)}, but {b} = {a} from {origin}"
        if left_blame and right_blame:
            return (f"{a} = {left} from {places(left_blame)}, but {b} = {right} from "
                    f"{places(right_blame)}, via {origin}")
        if left_blame or right_blame:
            known = left_blame | right_blame
            return (f"{a} == {b} from {origin} cannot hold: it is {left} == {right} given "
                    f"{self._values(constraint, known)}")
        return f"{a} == {b} cannot hold, from {origin}"

    def _values(self, constraint: Constraint, blame: Blame) -> str:
        names = sorted(set().union(*(free_symbols(d) for d in _dims_of(constraint)))
                       & self.bindings.keys())
        return ", ".join(f"{n} = {self.bindings[n]} from {places(self.why[n])}" for n in names)

    def _given(self, value: DimLike, used: Blame) -> str:
        parts = []
        for name in sorted(free_symbols(value)):
            low, high = self._bounds_of(name)
            blame = self._bound_blame(Dim(name))
            if blame:
                parts.append(f"{name} in {_span(low, high)} from {places(blame)}")
        if used:
            parts.append(f"values from {places(used)}")
        return f" (given {'; '.join(parts)})" if parts else ""

    def _candidates(self, difference: Dim) -> List[Tuple[tuple, str, int, DimLike]]:
        """Variables the equation `difference == 0` is linear in, with their coefficient and
        the rest, best first: flexible before derived before rigid, unit coefficients first."""
        found = []
        counts: Dict[str, int] = {}
        for atom in _atoms(difference._terms):
            if atom[0] == "v":
                counts[atom[1]] = counts.get(atom[1], 0) + 1
        for monomial, coeff in difference._terms:
            if len(monomial) == 1 and monomial[0][0] == "v" and counts[monomial[0][1]] == 1:
                name = monomial[0][1]
                rest = difference - coeff * Dim._from_terms((((monomial[0],), 1),))
                variable = self.variables.get(name)
                age = variable.age if variable is not None else 0
                rank = (_KIND_RANK[self._kind(name)], abs(coeff) != 1, name in self.quotients,
                        -age)
                found.append((rank, name, coeff, rest))
        found.sort(key=lambda c: (c[0], c[1]))
        return found

    def _solve_linear(self, difference: Dim, blame: Blame, work: _Work,
                      flexible_only: bool, universal: bool = False) -> Optional[str]:
        candidates = self._candidates(difference)
        if not universal:
            candidates = [c for c in candidates if self._kind(c[1]) != "universal"]
        for _, name, coeff, rest in candidates:
            if flexible_only and self._kind(name) != "flexible":
                continue
            value = exact_quotient(-rest, coeff) if isinstance(rest, Dim) else (
                -rest // coeff if rest % coeff == 0 else None)
            if value is not None:
                return self._bind(name, value, blame, work)
        if flexible_only:
            return None
        if len(candidates) == 1 and isinstance(candidates[0][3], int):
            _, name, coeff, rest = candidates[0]
            assert isinstance(rest, int)
            constraint = work.constraint
            return self._conflict(work, f"{name} would have to be {Fraction(-rest, coeff)}, not a "
                                        f"whole number: {constraint} from {constraint.origin}"
                                        + self._given(difference, blame - {constraint.origin}),
                                  blame, "fraction", (name, Fraction(-rest, coeff)))
        if _is_linear(difference):
            g = 0
            constant = 0
            for monomial, coeff in difference._terms:
                if monomial == ():
                    constant = coeff
                else:
                    g = math.gcd(g, coeff)
            if constant % g:
                constraint = work.constraint
                return self._conflict(work, f"{constraint} from {constraint.origin} has no "
                                            f"whole-number solution ({difference} == 0)", blame,
                                      "no_whole_solution", (difference,))
        return None

    def _solve_by_floor(self, difference: Dim, blame: Blame, work: _Work) -> Optional[str]:
        """`c*v + R == 0` for a flexible v where c does not divide R: v = (-R)//c, with the
        check that c divides -R (`2*K == 3*M` gives `K = M + M//2` and `3*M % 2 == 0`)."""
        for _, name, coeff, rest in self._candidates(difference):
            if self._kind(name) != "flexible" or not isinstance(rest, Dim):
                continue
            numerator = -rest if coeff > 0 else rest
            value = numerator // abs(coeff)
            self._push(Divides(abs(coeff), numerator, work.constraint.origin), blame)
            return self._bind(name, value, blame, work)
        return None

    def _solve_symbolic_coefficient(self, difference: Dim, blame: Blame,
                                    work: _Work) -> Optional[str]:
        """`v*C + R == 0` for a flexible (or derived) v and a symbolic C free of flexible
        variables: v = -R/C, by exact division or as a quotient with a divisibility check."""
        for name in sorted(free_symbols(difference)):
            if self._kind(name) in ("rigid", "universal") or name in self.quotients:
                continue
            split = _split_linear(difference, name)
            if split is None:
                continue
            coefficient, rest = split
            if isinstance(coefficient, int) or any(
                    self._kind(n) == "flexible" for n in free_symbols(coefficient)):
                continue
            dividend: DimLike = -rest
            if isinstance(coefficient, Dim) and min(coefficient._terms)[1] < 0:
                coefficient, dividend = -coefficient, -dividend  # D divides L, not -D -L
            value = exact_quotient(dividend, coefficient)
            if value is not None:
                return self._bind(name, value, blame, work)
            self.quotients[name] = Quotient(name, dividend, coefficient, blame)
            self._push(Divides(coefficient, dividend, work.constraint.origin), blame)
            return _DONE
        return None

    def _floor_equation(self, difference: Dim, blame: Blame, work: _Work) -> Optional[str]:
        """`c*floor((a*v + b)/k) + r == 0`: the floor is -r/c, so v lies in a range of k/a
        values; bound v (bind it if one value fits)."""
        found = _single_floor(difference)
        if found is None:
            return None
        coeff, rest, name, a, b, k = found
        if rest % coeff:
            constraint = work.constraint
            return self._conflict(work, f"{constraint} from {constraint.origin} cannot hold: "
                                        f"the floor would be {-rest}/{coeff}", blame,
                                  "floor", (difference,))
        t = -rest // coeff
        low, high = _linear_range(a, b, k * t, k * t + k - 1)
        return self._narrow(name, low, high, work, blame)

    # -- inequalities and divisibility ------------------------------------------------------------
    def _at_least(self, work: _Work) -> str:
        constraint = work.constraint
        assert isinstance(constraint, AtLeast)
        value, value_blame = self._subst(constraint.value)
        bound, bound_blame = self._subst(constraint.bound)
        blame = work.blame | value_blame | bound_blame
        difference = value - bound
        verdict = prove_nonnegative(difference, self._prover_bounds(difference))
        if verdict is Verdict.PROVED:
            return _KEPT if self._is_bound_source(work) else _DONE
        if verdict is Verdict.REFUTED:
            return self._refuted_at_least(work, value, bound, difference,
                                          value_blame | bound_blame)
        return self._narrow_by_inequality(difference, blame, work)

    def _refuted_at_least(self, work: _Work, value: DimLike, bound: DimLike,
                          difference: DimLike, used: Blame) -> str:
        constraint = work.constraint
        assert isinstance(constraint, AtLeast)
        other = self._bound_blame(difference)
        text = f"{constraint} from {constraint.origin} cannot hold"
        if used or isinstance(difference, int):
            text += f": it is {value} >= {bound}"
        if used:
            text += f" given {self._values(constraint, used)}"
        text += self._given(difference, _NO_BLAME) if other else ""
        return self._conflict(work, text, work.blame | used | other, "at_least", (value, bound))

    def _narrow_by_inequality(self, difference: DimLike, blame: Blame, work: _Work) -> str:
        if not isinstance(difference, Dim):
            return _KEPT
        linear = linear_in_one(difference)
        if linear is not None:
            name, coeff, rest = linear
            # coeff*v + rest >= 0
            if coeff > 0:
                return self._narrow(name, math.ceil(Fraction(-rest, coeff)), math.inf, work, blame)
            return self._narrow(name, -math.inf, math.floor(Fraction(rest, -coeff)), work, blame)
        found = _single_floor(difference)
        if found is not None:
            coeff, rest, name, a, b, k = found
            # coeff*floor((a*v + b)/k) + rest >= 0
            if coeff > 0:
                t = math.ceil(Fraction(-rest, coeff))
                low, high = _linear_range(a, b, k * t, math.inf)
            else:
                t = math.floor(Fraction(rest, -coeff))
                low, high = _linear_range(a, b, -math.inf, k * t + k - 1)
            return self._narrow(name, low, high, work, blame)
        names = free_symbols(difference)
        if len(names) == 1:  # nested floors of one size: the least value that fits
            name = next(iter(names))
            start = self._bounds_of(name)[0]
            if non_decreasing(difference, name) and not math.isinf(start):
                least = least_solution(difference, name, int(start))
                if least is not None:
                    return self._narrow(name, least, math.inf, work, blame)
        return _KEPT

    def _divides(self, work: _Work) -> str:
        constraint = work.constraint
        assert isinstance(constraint, Divides)
        divisor, divisor_blame = self._subst(constraint.divisor)
        dividend, dividend_blame = self._subst(constraint.dividend)
        verdict = prove_divides(divisor, dividend)
        if verdict is Verdict.PROVED:
            return _DONE
        if verdict is Verdict.REFUTED:
            used = divisor_blame | dividend_blame
            text = f"{constraint.dividend} is not a multiple of {constraint.divisor}, from " \
                   f"{constraint.origin}"
            if used:
                text += f": it is {dividend} and {divisor} given {self._values(constraint, used)}"
            return self._conflict(work, text, used, "divides", (divisor, dividend))
        return _KEPT

    # -- shapes -----------------------------------------------------------------------------------
    def _same_shape(self, work: _Work) -> str:
        constraint = work.constraint
        assert isinstance(constraint, SameShape)
        used: Set[Origin] = set()
        for name in set(_shape_vars(constraint.left) + _shape_vars(constraint.right)):
            if name in self.shapes:
                used |= self.shape_why[name]
        left = list(_expand(constraint.left, self.shapes))
        right = list(_expand(constraint.right, self.shapes))
        blame = work.blame | frozenset(used)
        origin = constraint.origin
        for end in (0, -1):
            while left and right:
                a, b = left[end], right[end]
                if isinstance(a, ShapeVar) or isinstance(b, ShapeVar):
                    if a == b:
                        left.pop(end)
                        right.pop(end)
                        continue
                    break
                left.pop(end)
                right.pop(end)
                self._push(Equal(a, b, origin), blame)
        left_vars, right_vars = _shape_vars(tuple(left)), _shape_vars(tuple(right))
        if not left_vars and not right_vars:
            if left or right:
                return self._conflict(work, self._rank_message(constraint, used), blame, "rank",
                                      self._whole_shapes(constraint))
            return _DONE
        for side, other in ((left, right), (right, left)):
            if len(side) == 1 and isinstance(side[0], ShapeVar):
                return self._bind_shape(side[0].name, tuple(other), blame, work)
        for side, other, side_vars in ((left, right, left_vars), (right, left, right_vars)):
            if not _shape_vars(tuple(other)) and len(side) - len(side_vars) > len(other):
                return self._conflict(work, self._rank_message(constraint, used), blame, "rank",
                                      self._whole_shapes(constraint))
            if not _shape_vars(tuple(other)) and len(side_vars) == len(side):
                # only variables left, the other side all dims: each empty if it is empty
                if not other:
                    for name in side_vars:
                        self._bind_shape(name, (), blame, work)
                    return _DONE
        if self.new_work:
            work.constraint = SameShape(tuple(left), tuple(right), origin)
            work.blame = blame
            return _NARROWED
        return _KEPT

    def _whole_shapes(self, constraint: SameShape) -> Tuple[Shape, Shape]:
        """Both sides of a shape equation as known now, every known dim substituted."""
        def known(shape: Shape) -> Shape:
            return tuple(item if isinstance(item, ShapeVar) else self._subst(item)[0]
                         for item in _expand(shape, self.shapes))
        return known(constraint.left), known(constraint.right)

    def _rank_message(self, constraint: SameShape, used: Set[Origin]) -> str:
        left = _expand(constraint.left, self.shapes)
        right = _expand(constraint.right, self.shapes)
        text = (f"{format_shape(constraint.left)} == {format_shape(constraint.right)} from "
                f"{constraint.origin} cannot hold: ranks differ")
        if used:
            text += (f" (they are {format_shape(left)} and {format_shape(right)} given "
                     f"{places(used)})")
        return text

    def _bind_shape(self, name: str, shape: Shape, blame: Blame, work: _Work) -> str:
        if ShapeVar(name) in shape:
            return self._conflict(work, f"shape variable *{name} would have to contain itself: "
                                        f"*{name} == {format_shape(shape)} from "
                                        f"{work.constraint.origin}", blame, "cycle", (name, shape))
        for other in list(self.shapes):
            if ShapeVar(name) in self.shapes[other]:
                self.shapes[other] = _expand(self.shapes[other], {name: shape})
                self.shape_why[other] = self.shape_why[other] | blame
        self.shapes[name] = shape
        self.shape_why[name] = blame
        return _DONE

    def _same_size(self, work: _Work) -> str:
        """Equal products once both sides hold the same shape variables (they cancel)."""
        constraint = work.constraint
        assert isinstance(constraint, SameSize)
        used: Set[Origin] = set()
        for name in _shape_vars(constraint.left + constraint.right):
            used |= self.shape_why.get(name, _NO_BLAME)
        left = _expand(constraint.left, self.shapes)
        right = _expand(constraint.right, self.shapes)
        if sorted(_shape_vars(left)) != sorted(_shape_vars(right)):
            return _KEPT  # which dims a shape variable holds is not known yet
        self._push(Equal(_product(left), _product(right), constraint.origin),
                   work.blame | frozenset(used))
        return _DONE

    def _one_or_equal(self, work: _Work) -> str:
        """Proved when the dim is 1 or the other, refuted when both are known and it is
        neither; else a check (it is never turned into an equation: the sizes decide)."""
        constraint = work.constraint
        assert isinstance(constraint, OneOrEqual)
        dim, dim_blame = self._subst(constraint.dim)
        other, other_blame = self._subst(constraint.other)
        blame = work.blame | dim_blame | other_blame
        if dim == 1 or dim - other == 0:
            return _DONE
        if isinstance(dim, int) and isinstance(other, int):
            return self._conflict(work, f"{constraint} from {constraint.origin} cannot hold: "
                                        f"it is {dim} and {other}"
                                        + self._given(constraint.dim - constraint.other,
                                                      dim_blame | other_blame),
                                  blame, "one_or_equal", (dim, other))
        return _KEPT

    # -- broadcasting ------------------------------------------------------------------------------
    def _decide_a_broadcast(self, deferred: List[_Work]) -> Optional[_Work]:
        """Decide the first broadcast (in canonical order) whose dims can be paired; the
        work decided, or None when none can be."""
        broadcasts = sorted((w for w in deferred if isinstance(w.constraint, Broadcast)),
                            key=_canonical_key)
        for work in broadcasts:
            if self._broadcast(work):
                return work
        return None

    def _broadcast(self, work: _Work) -> bool:
        """Pair the dims of a broadcast from the right: a literal 1 takes the other dim, a
        size that may be 1 (`Variable.broadcasts`) facing one that may not takes the other
        with the check it is 1 or the other, any other pair is an equation; a shape
        variable ends the pairing where both sides have the same rest, else the broadcast
        waits. Whether it was decided."""
        constraint = work.constraint
        assert isinstance(constraint, Broadcast)
        used: Set[Origin] = set()
        for name in _shape_vars(constraint.left + constraint.right):
            used |= self.shape_why.get(name, _NO_BLAME)
        left = list(_expand(constraint.left, self.shapes))
        right = list(_expand(constraint.right, self.shapes))
        blame = work.blame | frozenset(used)
        tail: List[ShapeItem] = []
        equations: List[Tuple[DimLike, DimLike]] = []
        checks: List[OneOrEqual] = []
        while left and right:
            a, b = left[-1], right[-1]
            if isinstance(a, ShapeVar) or isinstance(b, ShapeVar):
                if a == b:  # a shape broadcasts with itself
                    tail.insert(0, left.pop())
                    right.pop()
                    continue
                if left == right:
                    break  # the same rest on both sides
                return False  # where each side's dims stand is not known yet
            left.pop()
            right.pop()
            marks = (self._may_be_one(a), self._may_be_one(b))  # of the sizes, not their values
            a, a_blame = self._subst(a)
            b, b_blame = self._subst(b)
            blame = blame | a_blame | b_blame
            if a == 1:
                tail.insert(0, b)
            elif b == 1:
                tail.insert(0, a)
            elif marks[0] != marks[1]:
                one, other = (a, b) if marks[0] else (b, a)
                checks.append(OneOrEqual(one, other, constraint.origin))
                tail.insert(0, other)
            else:
                equations.append((a, b))
                tail.insert(0, a)
        for a, b in equations:
            self._push(Equal(a, b, constraint.origin), blame)
        for check in checks:
            self._push(check, blame)
        rest = left or right
        self._push(SameShape(constraint.out, tuple(rest + tail), constraint.origin), blame)
        return True

    def _may_be_one(self, dim: DimLike) -> bool:
        """Whether `dim` is a size variable that may be 1 and broadcast."""
        if not isinstance(dim, Dim) or not dim.is_symbol:
            return False
        variable = self.variables.get(dim.name)
        return variable is not None and variable.broadcasts

    # -- several equations at once -----------------------------------------------------------------
    def _eliminate(self, deferred: List[_Work]) -> List[_Work]:
        """Gaussian elimination over the deferred equations that are linear: each variable it
        pins down becomes an equation of its own, blamed on every row that was combined."""
        rows: List[Tuple[Dict[str, Fraction], Fraction, Blame, Origin]] = []
        for work in deferred:
            constraint = work.constraint
            if not isinstance(constraint, Equal):
                continue
            left, left_blame = self._subst(constraint.left)
            right, right_blame = self._subst(constraint.right)
            difference = left - right
            if not isinstance(difference, Dim) or not _is_linear(difference):
                continue
            coefficients: Dict[str, Fraction] = {}
            constant = Fraction(0)
            for monomial, coeff in difference._terms:
                if monomial == ():
                    constant = Fraction(coeff)
                else:
                    coefficients[monomial[0][1]] = Fraction(coeff)
            rows.append((coefficients, constant, work.blame | left_blame | right_blame,
                         constraint.origin))
        if len(rows) < 2:
            return []
        reduced = _row_reduce(rows)
        derived = []
        for coefficients, constant, blame, origin in reduced:
            signature = f"{sorted(coefficients.items())} {constant} {sorted(blame)}"
            if signature in self.eliminated:
                continue
            self.eliminated.add(signature)
            if not coefficients:
                if constant:
                    fake = _Work(Equal(0, 0, origin), blame)
                    self._conflict(fake, f"the equations from {places(blame)} together have no "
                                         f"solution", blame, "system", ())
                    return []
                continue
            if len(coefficients) == 1:
                (name, pivot), = coefficients.items()
                if name in self.bindings:
                    continue
                solved = -constant / pivot
                if solved.denominator != 1:
                    fake = _Work(Equal(0, 0, origin), blame)
                    self._conflict(fake, f"the equations from {places(blame)} together make "
                                         f"{name} = {solved}, not a whole number", blame,
                                   "system", (name, solved))
                    return []
                derived.append(_Work(Equal(Dim(name), int(solved), origin), blame))
        return derived

    # -- the end --------------------------------------------------------------------------------
    def _final(self, work: _Work) -> Optional[Residual]:
        """Decide a deferred constraint with everything known at the end: None when it is
        proved or refuted (a conflict), else the residual. An inequality kept only because
        it set a bound is dropped once the bounded variable is bound (nothing is left in it
        to check)."""
        outcome = self._step(work)
        self.new_work = []  # at the fixed point a step adds nothing new
        if outcome == _DONE:
            return None
        residual = self._residual(work)
        return residual if _variables_of(residual.constraint) else None

    def _residual(self, work: _Work) -> Residual:
        constraint = work.constraint
        used: Set[Origin] = set()
        substituted: Constraint
        if isinstance(constraint, (SameShape, Broadcast, SameSize)):
            left = _expand(constraint.left, self.shapes)
            right = _expand(constraint.right, self.shapes)
            if isinstance(constraint, Broadcast):
                substituted = Broadcast(left, right, _expand(constraint.out, self.shapes),
                                        constraint.origin)
            else:
                substituted = type(constraint)(left, right, constraint.origin)
            for name in _shape_vars(_shapes_of(constraint)):
                used |= self.shape_why.get(name, _NO_BLAME)
        else:
            sides = []
            for value in _dims_of(constraint):
                value, blame = self._subst(value)
                used |= blame
                sides.append(value)
            if isinstance(constraint, Equal):
                substituted = Equal(sides[0], sides[1], constraint.origin)
            elif isinstance(constraint, AtLeast):
                substituted = self._as_bound(work, AtLeast(sides[0], sides[1], constraint.origin))
            elif isinstance(constraint, OneOrEqual):
                substituted = OneOrEqual(sides[0], sides[1], constraint.origin)
            else:
                substituted = Divides(sides[0], sides[1], constraint.origin)
        return Residual(substituted, work.blame | frozenset(used))

    def _as_bound(self, work: _Work, check: AtLeast) -> AtLeast:
        """`check` in its strongest form: an inequality in one variable that set that
        variable's bound says exactly the bound (`H - 4 >= 1` is `H >= 5`), so that is
        what it reports."""
        names = free_symbols(check.value - check.bound)
        if len(names) != 1:
            return check
        name = next(iter(names))
        low, high = self._bounds_of(name)
        if self.bound_source.get((name, 0), (None,))[0] == work.key:
            return AtLeast(Dim(name), low, check.origin)
        if self.bound_source.get((name, 1), (None,))[0] == work.key and not math.isinf(high):
            return AtLeast(int(high), Dim(name), check.origin)
        return check


# -- helpers on expressions ------------------------------------------------------------------------

def _dims_of(constraint: Constraint) -> Tuple[DimLike, ...]:
    if isinstance(constraint, Equal):
        return (constraint.left, constraint.right)
    if isinstance(constraint, AtLeast):
        return (constraint.value, constraint.bound)
    if isinstance(constraint, Divides):
        return (constraint.divisor, constraint.dividend)
    if isinstance(constraint, OneOrEqual):
        return (constraint.dim, constraint.other)
    return tuple(item for item in _shapes_of(constraint) if not isinstance(item, ShapeVar))


def _shapes_of(constraint: Constraint) -> Shape:
    """The items of the shapes a constraint relates, one after the other."""
    if isinstance(constraint, Broadcast):
        return constraint.left + constraint.right + constraint.out
    if isinstance(constraint, (SameShape, SameSize)):
        return constraint.left + constraint.right
    return ()


def _variables_of(constraint: Constraint) -> Set[str]:
    """The names of the size and shape variables a constraint mentions."""
    found: Set[str] = set().union(*(free_symbols(d) for d in _dims_of(constraint)))
    found.update(_shape_vars(_shapes_of(constraint)))
    return found


def _product(shape: Shape) -> DimLike:
    """The product of a shape's dims (its shape variables left out)."""
    total: DimLike = 1
    for item in shape:
        if not isinstance(item, ShapeVar):
            total = total * item
    return total


def _span(low: object, high: object) -> str:
    def show(x: object) -> str:
        return "inf" if x == math.inf else "-inf" if x == -math.inf else str(x)
    return f"{show(low)}..{show(high)}"


def _is_linear(value: Dim) -> bool:
    return all(m == () or (len(m) == 1 and m[0][0] == "v") for m, _ in value._terms)


def _single_floor(value: Dim) -> Optional[Tuple[int, int, str, int, int, int]]:
    """(c, r, v, a, b, k) when value == c*floor((a*v + b)/k) + r, else None."""
    coeff, rest, floor = 0, 0, None
    for monomial, c in value._terms:
        if monomial == ():
            rest = c
        elif len(monomial) == 1 and monomial[0][0] == "f" and floor is None:
            floor, coeff = monomial[0], c
        else:
            return None
    if floor is None:
        return None
    inner = linear_in_one(Dim._from_terms(floor[1]))
    if inner is None:
        return None
    name, a, b = inner
    return coeff, rest, name, a, b, floor[2]


def _linear_range(a: int, b: int, low: float, high: float) -> Tuple[float, float]:
    """The v with low <= a*v + b <= high (a != 0), as a range of whole numbers."""
    if a < 0:
        a, b, low, high = -a, -b, -high, -low
    lowest = -math.inf if low == -math.inf else math.ceil(Fraction(int(low) - b, a))
    highest = math.inf if high == math.inf else math.floor(Fraction(int(high) - b, a))
    return lowest, highest


def _split_linear(value: Dim, name: str) -> Optional[Tuple[DimLike, DimLike]]:
    """(C, R) with value == name*C + R, name neither in C, R nor inside an atom; else None."""
    atom = ("v", name)
    coefficient: Dict[tuple, int] = {}
    rest: Dict[tuple, int] = {}
    for monomial, coeff in value._terms:
        matching = [a for a in monomial if a[0] == "v" and a[1] == name]
        if len(matching) > 1:
            return None
        if any(a[0] != "v" and name in free_symbols(Dim._from_terms(((((a,)), 1),)))
               for a in monomial):
            return None
        if matching:
            reduced = list(monomial)
            reduced.remove(matching[0])
            coefficient[tuple(reduced)] = coeff
        else:
            rest[monomial] = coeff
    del atom
    if not coefficient:
        return None
    return from_terms(coefficient.items()), from_terms(rest.items())


def _row_reduce(rows: List[Tuple[Dict[str, Fraction], Fraction, Blame, Origin]]
                ) -> List[Tuple[Dict[str, Fraction], Fraction, Blame, Origin]]:
    """Reduced row echelon form over the rationals; each row keeps the union of the blame
    sets of the rows combined into it."""
    rows = [(dict(c), k, b, o) for c, k, b, o in rows]
    variables = sorted(set().union(*(c.keys() for c, _, _, _ in rows)))
    pivot_row = 0
    for name in variables:
        chosen = next((i for i in range(pivot_row, len(rows)) if rows[i][0].get(name)), None)
        if chosen is None:
            continue
        rows[pivot_row], rows[chosen] = rows[chosen], rows[pivot_row]
        coefficients, constant, blame, origin = rows[pivot_row]
        scale = coefficients[name]
        coefficients = {n: c / scale for n, c in coefficients.items()}
        constant = constant / scale
        rows[pivot_row] = (coefficients, constant, blame, origin)
        for i, (other, other_constant, other_blame, other_origin) in enumerate(rows):
            factor = other.get(name)
            if i == pivot_row or not factor:
                continue
            combined = dict(other)
            for n, c in coefficients.items():
                value = combined.get(n, Fraction(0)) - factor * c
                if value:
                    combined[n] = value
                else:
                    combined.pop(n, None)
            rows[i] = (combined, other_constant - factor * constant, other_blame | blame,
                       other_origin)
        pivot_row += 1
    return rows
