"""`ng.infer_shapes`: every op's axes with symbolic lengths, and what is left to check.

The axes of an op are known when it is built; their lengths may not be: an
axis may have a symbolic length (`ng.dim("B")`, `2*T`) or none at all. Here
the length constraints of every op of a graph (`op_rules`) go to the solver
(`solver.solve`), which works out the lengths left open, pins declared sizes
the graph fixes, and keeps what it cannot decide as checks for when data is
fed. The same report checks fed data (`ShapeReport.check`), which is how a
computation refuses a feed that breaks an inferred length, naming the lines
that inferred it and the line feeding it.
"""
from __future__ import annotations

from typing import (TYPE_CHECKING, Any, Iterable, List, Mapping, Optional, Sequence, Set, Tuple,
                    TypeVar, Union)

import numpy as np

from ..axes import Axis
from ..axis_dims import AxisDims, length_symbols
from ..debug_info import user_location
from ..dims import DimLike, free_symbols
from ..errors import AxgraphTypeError, ShapeCheckError
from ..op_graph.op import Op, upstream_ops
from .constraints import Constraint, Equal, Origin, Variable, places
from .op_rules import constraints_of
from .prover import simplify

if TYPE_CHECKING:  # the solver itself is imported when a graph is first solved
    from .solver import Residual, Solution


#: A fed op (a placeholder), as a mapping's key.
_Fed = TypeVar("_Fed", bound=Op)


class ShapeReport:
    """What `infer_shapes` found: each op's axes with their lengths, the sizes solved, and
    the checks left for when data is fed. `str(report)` is a readable listing.

    Made by `infer_shapes`, not directly.

    Parameters
    ----------
    ops : list of Op
        The ops of the graph, in the order they were made.
    sizes : AxisDims
        The length of each axis before solving (variables for lengths left open).
    constraints : list of constraints
        What the ops said about lengths.
    solution : Solution
        What the solver made of them.

    Attributes
    ----------
    ops : list of Op
        The ops of the graph, in the order they were made.
    solution : Solution
        The solver's result (bindings, bounds, residuals).
    constraints : list of constraints
        What the ops said about lengths, each with its origin.
    """

    def __init__(self, ops: List[Op], sizes: AxisDims, constraints: List[Constraint],
                 solution: Solution) -> None:
        self.ops = ops
        self.solution = solution
        self.constraints = constraints
        self._sizes = sizes

    # -- lengths -------------------------------------------------------------------------
    def length(self, axis: Axis) -> DimLike:
        """The length of `axis` as far as it is known: an int, or an expression in the
        sizes still free (declared ones, and variables named after axes left open).

        Parameters
        ----------
        axis : Axis
            Any axis (flattened, sliced, padded and dual ones too).

        Returns
        -------
        int or Dim
            Its length.
        """
        value = self.solution.value(self._sizes.dim(axis))
        return simplify(value, self.solution.bounds)

    def lengths(self, op: Op) -> Tuple[DimLike, ...]:
        """The lengths of `op`'s axes, in order.

        Parameters
        ----------
        op : Op
            An op of the graph.

        Returns
        -------
        tuple of int or Dim
            One length per axis.
        """
        return tuple(self.length(a) for a in op.axes)

    def variable(self, axis: Axis) -> DimLike:
        """The size variable that stands for an axis made without a length (or the axis's
        own length, if it has one): what fed data binds.

        Parameters
        ----------
        axis : Axis
            The axis.

        Returns
        -------
        int or Dim
            Its length before solving.
        """
        return self._sizes.dim(axis)

    @property
    def open_axes(self) -> Mapping[str, Axis]:
        """The variable standing for each axis made without a length, to that axis."""
        return {name: axis for name, (axis, _) in self._sizes.origins.items()}

    @property
    def residuals(self) -> Tuple[Residual, ...]:
        """The checks left for when data is fed (each with the lines it comes from)."""
        return self.solution.residuals

    @property
    def free(self) -> Tuple[str, ...]:
        """The size variables no constraint fixes: what fed data decides."""
        used: Set[str] = set()
        for op in self.ops:
            for length in self.lengths(op):
                used |= free_symbols(length)
        return tuple(sorted(used))

    # -- checking data -------------------------------------------------------------------------
    def check(self, feeds: Mapping[_Fed, Any], origin: Optional[Origin] = None) -> Solution:
        """Check fed data against the inferred sizes and residual checks.

        Parameters
        ----------
        feeds : mapping of Op to array or shape
            Values (or just their shapes, as tuples of ints) for placeholders.
        origin : Origin, optional
            Where the data is fed (default: the caller's line).

        Returns
        -------
        Solution
            The solution with the fed sizes: `solution.value(report.variable(axis))` is an
            axis's length.

        Raises
        ------
        ShapeCheckError
            The fed sizes break an inferred length or a residual check (or a fed value
            has the wrong rank); the message names the lines behind the constraint, the
            line feeding the data and the sizes fed.
        """
        if origin is None:
            file, line = user_location()
            origin = Origin(file, line)
        facts: List[Constraint] = []
        for op, value in feeds.items():
            shape = value if _is_shape(value) else np.shape(value)
            if len(shape) != len(op.axes):
                raise ShapeCheckError(f"{op.name} {op.axes} is fed a value of rank {len(shape)} "
                                      f"(shape {tuple(shape)}), not {len(op.axes)}",
                                      (origin.file, origin.line))
            for position, (axis, n) in enumerate(zip(op.axes, shape)):
                facts.append(Equal(self._sizes.dim(axis), int(n), Origin(
                    origin.file, origin.line, f"{op.name} fed",
                    f"its dim {position} ({axis.name}) is {int(n)}")))
        return self.solution.check_constraints(facts, (origin.file, origin.line))

    @property
    def needs_feed_checks(self) -> bool:
        """Whether fed data can break anything this report knows: an inferred or pinned
        size, a quotient or a residual check (a graph of fixed sizes has none)."""
        s = self.solution
        return bool(s.bindings or s.residuals or s.quotients or s.narrowed)

    # -- printing ---------------------------------------------------------------------------
    def size_lines(self) -> List[str]:
        """One line per size variable: its value (inferred or pinned) with the lines it
        comes from, or free with its bounds; `print(report)` shows them first.

        Returns
        -------
        list of str
            The lines, ``["(all fixed)"]`` when no size is symbolic.
        """
        solution = self.solution
        names = sorted(set(solution.bindings) | set(solution.bounds) | set(self.free))
        return [self._describe_variable(name) for name in names] or ["(all fixed)"]

    def check_lines(self) -> List[str]:
        """One line per check left for when data is fed, with the lines it comes from.

        Returns
        -------
        list of str
            The lines, ``["(none)"]`` when nothing is left to check.
        """
        solution = self.solution
        lines = [f"{r.constraint}   from {places(r.origins)}" for r in solution.residuals]
        lines += [f"{q.dividend} % ({q.divisor}) == 0 and {q}   from {places(q.origins)}"
                  for q in solution.quotients]
        return lines or ["(none)"]

    def summary_lines(self) -> List[str]:
        """`size_lines` and `check_lines` under their headings, as `print(report)` shows
        them: what `ng.format_graph` and the DOT pictures add to a graph.

        Returns
        -------
        list of str
            The lines.
        """
        return (["sizes:"] + ["  " + line for line in self.size_lines()]
                + ["checks when data is fed:"] + ["  " + line for line in self.check_lines()])

    def format_lengths(self, op: Op) -> str:
        """``N: B, H: H - 2``: each axis of `op` with its length as inferred.

        Parameters
        ----------
        op : Op
            An op of the graph.

        Returns
        -------
        str
            The axes, in order.
        """
        return ", ".join(f"{a.name}: {length}" for a, length in zip(op.axes, self.lengths(op)))

    def __str__(self) -> str:
        lines = ["sizes:"] + ["  " + line for line in self.size_lines()]
        lines.append("ops:")
        width = max((len(_place(op)) for op in self.ops), default=0)
        for op in self.ops:
            lines.append(f"  {_place(op).ljust(width)}  {op.name} ({type(op).__name__}) "
                         f"[{self.format_lengths(op)}]")
        lines.append("checks when data is fed:")
        lines.extend("  " + line for line in self.check_lines())
        return "\n".join(lines)

    def _describe_variable(self, name: str) -> str:
        solution = self.solution
        variable = solution.variables.get(name)
        what = (variable.about if variable is not None and variable.about
                else "declared size" if solution.kind(name) == "rigid" else solution.kind(name))
        if name in solution.bindings:
            verb = "inferred" if solution.kind(name) != "rigid" else "pinned"
            value = simplify(solution.bindings[name], solution.bounds)
            return (f"{name} = {value}   {verb} ({what}) from "
                    f"{places(solution.binding_origins[name])}")
        low, high = solution.bounds.get(name, (None, None))
        text = f"{name}   free ({what})"
        if name in solution.narrowed:
            shown = f"{low}.." + ("" if high == float("inf") else str(high))
            text += f", in {shown} from {places(solution.narrowed[name])}"
        return text

    def __repr__(self) -> str:
        return (f"<ShapeReport: {len(self.ops)} ops, {len(self.solution.bindings)} sizes solved, "
                f"{len(self.solution.residuals)} checks left>")


def _place(op: Op) -> str:
    return Origin(op.location[0], op.location[1]).place


def _is_shape(value: Any) -> bool:
    return isinstance(value, tuple) and all(isinstance(n, (int, np.integer)) for n in value)


def _as_ops(results: Union[Op, Iterable[Op]]) -> List[Op]:
    if isinstance(results, Op):
        return [results]
    if isinstance(results, dict):
        results = list(results.values())
    try:
        ops = list(results)
    except TypeError:
        raise AxgraphTypeError(f"infer_shapes takes an op or a collection of ops, not "
                               f"{results!r:.80}", user_location()) from None
    for op in ops:
        if not isinstance(op, Op):
            raise AxgraphTypeError(f"infer_shapes takes ops, not {op!r:.80}", user_location())
    return ops


def infer_shapes(results: Union[Op, Iterable[Op]], raise_conflicts: bool = True) -> ShapeReport:
    """Infer every length in a graph without data: each op's axes with symbolic lengths, and
    the checks left for when data is fed.

    The ops that `results` depend on (through args and control edges) each say how
    their lengths relate (a dot's paired axes are equally long, a convolution's output
    follows its geometry, ...). The solver works these out: a length left open is
    inferred where the graph fixes it, a declared size (`ng.dim`) the graph fixes is
    pinned (and checked when data is fed), and what cannot be decided without data
    becomes a check with the lines it comes from.

    Parameters
    ----------
    results : Op or iterable of Op
        The ops whose graph to analyse (a computation's results).
    raise_conflicts : bool, optional
        Raise when some lengths cannot fit whatever data is fed (default). With False,
        the report's `solution.conflicts` holds them instead.

    Returns
    -------
    ShapeReport
        Lengths by op and axis (`report.lengths(op)`), the solution, the residual
        checks; `print(report)` lists them.

    Raises
    ------
    ShapeConflictError
        Lengths that contradict each other, whatever is fed; the message names every
        user line that contributed.
    AxgraphTypeError
        `results` is not an op or a collection of ops.

    Examples
    --------
    >>> import axgraph as ng
    >>> B = ng.dim("B")
    >>> N, F = ng.make_axis(length=B, name="N"), ng.make_axis(length=4, name="F")
    >>> x = ng.placeholder([F, N])
    >>> joined = ng.concat_along_axis([x, x], N)
    >>> ng.infer_shapes(joined).lengths(joined)
    (4, Dim('2*B'))
    """
    ops = upstream_ops(_as_ops(results), include_control=True)
    ops.sort(key=lambda op: op._serial)
    sizes = AxisDims(length_symbols(a for op in ops for a in op.axes))
    constraints: List[Constraint] = []
    for op in ops:
        sizes.dims(op.axes)
        constraints.extend(constraints_of(op, sizes.dim))
    variables = []
    for name, (axis, _) in sizes.origins.items():
        location = axis.location
        variables.append(Variable(name, "flexible", Origin(location[0], location[1],
                                                           f"axis {axis.name}"), min=0,
                                  about=f"the length of axis {axis.name} made at "
                                        f"{Origin(location[0], location[1]).place}",
                                  age=axis._serial))
    from .solver import solve

    solution = solve(constraints, variables)
    if raise_conflicts:
        solution.raise_conflicts(location=user_location())
    return ShapeReport(ops, sizes, constraints, solution)


class FeedChecks:
    """The feed-time checks of a computation: built once, run on each new set of fed shapes.

    Parameters
    ----------
    ops : sequence of Op
        The computation's ops.
    """

    def __init__(self, ops: Sequence[Op]) -> None:
        self.report = infer_shapes(list(ops))

    def check(self, feeds: Mapping[_Fed, np.ndarray]) -> Solution:
        """Raise ShapeCheckError if the fed arrays break an inferred size or a check.

        Parameters
        ----------
        feeds : mapping of Op to array
            The fed values, by placeholder.

        Returns
        -------
        Solution
            The solution with the fed sizes, for `length`.
        """
        return self.report.check({op: tuple(np.shape(value)) for op, value in feeds.items()})

    def length(self, solution: Solution, axis: Axis) -> Optional[int]:
        """The length that `solution` (from `check`) gives `axis`, or None where the fed
        sizes leave it open: how a length that no fed array has, only inferred from
        others (an axis cast to a fed one, a concat's joined axis), gets its value.

        Parameters
        ----------
        solution : Solution
            What `check` returned for this call's feeds.
        axis : Axis
            Any axis of the computation.

        Returns
        -------
        int or None
            Its length.
        """
        value = solution.value(self.report.variable(axis))
        return value if isinstance(value, int) else None


def feed_checks(ops: Sequence[Op]) -> Optional[FeedChecks]:
    """The feed-time checks of a computation over `ops`, or None when there is nothing to
    check (every length is fixed).

    Parameters
    ----------
    ops : sequence of Op
        The computation's ops.

    Returns
    -------
    FeedChecks or None
        The checks.

    Raises
    ------
    ShapeConflictError
        Lengths in the graph that contradict each other whatever is fed.
    """
    if not any(not isinstance(a.length, int) for op in ops for a in op.axes):
        return None  # every length is a known int: nothing can depend on data
    checks = FeedChecks(ops)
    return checks if checks.report.needs_feed_checks else None
