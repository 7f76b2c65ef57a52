"""Questions about `axgraph.dims` expressions that the shape solver asks.

`axgraph.dims` keeps every size expression in one canonical polynomial form (integer
coefficients over size variables and floors by positive ints). The solver needs more
of it than the shared prover (`axgraph.shapes.prover`, which decides `e >= 0`,
equality and divisibility) answers, written here over that form: the ways an equation
`e == 0` can be solved for one variable (`linear_solutions`), the equation with
positive factors divided out (`cancel`), and the least value of one variable that
makes a non-decreasing expression non-negative (`least_solution`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import reduce
from typing import Dict, List, Optional

from ...dims import Dim, DimLike, free_symbols, from_terms

def terms(dim: DimLike):
    """The canonical (monomial, coefficient) pairs of a dim; an int is one constant term.

    A monomial is a tuple of atoms: ("v", name) for a size variable, ("f", terms, k) for
    floor(terms / k): the canonical form of `axgraph.dims`, built back by `from_terms`.
    """
    if isinstance(dim, Dim):
        return dim._terms  # the canonical form is the one thing this module reads
    return (((), dim),) if dim else ()


def cancel(dim: DimLike) -> DimLike:
    """`dim` divided by the gcd of its coefficients and by every size variable that is a
    factor of all its terms: `e == 0` holds exactly when the result is 0, because sizes
    are at least 1 (`B*784 - 28*B*k` becomes `28 - k`)."""
    pairs = terms(dim)
    if not pairs:
        return 0
    divisor = reduce(math.gcd, (abs(c) for _, c in pairs))
    common: Optional[Dict] = None
    for monomial, _ in pairs:
        counts: Dict = {}
        for atom in monomial:
            if atom[0] == "v":
                counts[atom] = counts.get(atom, 0) + 1
        common = counts if common is None else {a: min(n, counts.get(a, 0)) for a, n in common.items()}
    common = {a: n for a, n in (common or {}).items() if n}
    if divisor == 1 and not common:
        return dim
    reduced = []
    for monomial, coeff in pairs:
        remaining = dict(common)
        kept = []
        for atom in monomial:
            if remaining.get(atom):
                remaining[atom] -= 1
            else:
                kept.append(atom)
        reduced.append((tuple(kept), coeff // divisor))
    return from_terms(reduced)


@dataclass(frozen=True)
class Solution:
    """`name == value` solves `e == 0`; `exact` is False when value is a floor whose
    division must leave no remainder (`divisor` must divide `numerator`)."""

    name: str
    value: DimLike
    exact: bool
    divisor: int
    numerator: DimLike


def linear_solutions(dim: DimLike) -> List[Solution]:
    """Each way `dim == 0` solves for a variable that occurs once, alone, in one term.

    `c*v + rest == 0` with `v` nowhere in `rest` gives `v == -rest / c`: exact when `c`
    divides every coefficient of `rest`, else `(-rest) // c` with the remainder left to
    check. An int `rest` that `c` does not divide has no whole solution; its Solution
    has exact False and an int numerator, for the caller to report.
    """
    pairs = terms(dim)
    found = []
    for monomial, coeff in pairs:
        if len(monomial) != 1 or monomial[0][0] != "v":
            continue
        name = monomial[0][1]
        rest_pairs = [(m, c) for m, c in pairs if m != monomial]
        rest = from_terms(rest_pairs)
        if name in free_symbols(rest):
            continue
        if coeff < 0:
            coeff, rest = -coeff, -rest
        numerator = -rest
        exact = all(c % coeff == 0 for _, c in rest_pairs)
        value = numerator // coeff if exact or isinstance(numerator, Dim) else numerator
        found.append(Solution(name, value, exact, coeff, numerator))
    return found


def non_decreasing(dim: DimLike, name: str) -> bool:
    """Whether `dim` never decreases as size variable `name` grows (a sufficient test:
    `name` occurs only alone or in floors of such terms, with positive coefficients)."""
    return _non_decreasing_terms(terms(dim), name)


def _non_decreasing_terms(pairs, name: str) -> bool:
    for monomial, coeff in pairs:
        if not monomial:
            continue
        if len(monomial) != 1 or coeff < 0:
            return False
        atom = monomial[0]
        if atom[0] == "v":
            if atom[1] != name:
                return False
        elif not _non_decreasing_terms(atom[1], name):
            return False
    return True


def least_solution(dim: DimLike, name: str, start: int, limit: int = 1 << 62) -> Optional[int]:
    """The least value >= `start` of `name` making the non-decreasing `dim` >= 0, if any."""
    def value(x: int) -> int:
        return int(Dim.evaluate(dim, {name: x})) if isinstance(dim, Dim) else dim

    if value(start) >= 0:
        return start
    low, high = start, max(start, 1) * 2
    while value(high) < 0:
        if high > limit:
            return None
        low, high = high, high * 2
    while high - low > 1:
        middle = (low + high) // 2
        if value(middle) >= 0:
            high = middle
        else:
            low = middle
    return high
