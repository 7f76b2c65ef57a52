"""Questions about `axgraph.dims` expressions that the shape solver asks.

`axgraph.dims` keeps every size expression in one canonical polynomial form (integer
coefficients over size variables and floors by positive ints). The shared
`axgraph.shapes` modules decide `e >= 0`, equality and divisibility (`prover`) and
find the least size satisfying a monotone check (`monotone`); what is left here,
written over that form, is how Axon's solver rewrites an equation `e == 0`: with
positive factors divided out (`cancel`), and each way it solves for one variable
(`linear_solutions`).
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
