"""Deciding `e >= 0` for a symbolic dim: proved, refuted or unknown, never an exception.

Equality of dims is structural (`2*N == N + N`), and `bool(dim)` is an error,
so a question such as "is this convolution's output at least 1 long?" needs a
decision procedure of its own. This one bounds an expression from the
variables' domains (every size variable is >= 1 unless declared otherwise,
or tightened by the solver) by interval arithmetic, helped by two exact
rewrites that keep correlations interval arithmetic loses:

* a floor `⌊p/k⌋` lies between `(p - k + 1)/k` and `p/k`, so `N - N//2` is
  bounded below by `N/2`;
* an expression `v*C + R` whose coefficient `C` of a variable `v` is
  non-negative is smallest at `v`'s lowest value (`N*M - N >= 0` at `M = 1`).

A question it cannot decide is UNKNOWN: the solver keeps it as a run-time
check instead of guessing.
"""
from __future__ import annotations

import enum
import math
from fractions import Fraction
from typing import Dict, Mapping, Optional, Tuple, Union

from ..dims import (Atom, Dim, DimLike, Monomial, Terms, _as_dim_like, atom_domain, dim_max,
                    dim_min, exact_quotient)

Number = Union[int, Fraction, float]  # float only for ±inf
#: The lowest and highest value of a variable, by name (math.inf: unbounded).
Bounds = Mapping[str, Tuple[Number, Number]]
Interval = Tuple[Number, Number]


class Verdict(enum.Enum):
    """The answer to a question about dims: PROVED, REFUTED or UNKNOWN."""

    PROVED = "proved"
    REFUTED = "refuted"
    UNKNOWN = "unknown"

    def __str__(self) -> str:
        return self.value


def interval(value: DimLike, bounds: Optional[Bounds] = None) -> Interval:
    """The lowest and highest values `value` can take (math.inf where unbounded).

    Parameters
    ----------
    value : int or Dim
        The expression.
    bounds : mapping of str to (number, number), optional
        Tighter bounds for some variables, by name; the others range over their
        declared domain (default: 1 and up).

    Returns
    -------
    (number, number)
        A lower and an upper bound (ints, or ±math.inf); every value of `value`
        under the bounds lies between them.

    Raises
    ------
    AxgraphTypeError
        `value` is not an int or a Dim.
    """
    value = _as_dim_like(value)
    bounds = bounds or {}
    if isinstance(value, int):
        return value, value
    low, high = _interval_of_terms(_fractional(value._terms), bounds)
    low = max(low, _linear_lower(value, bounds))
    high = min(high, _linear_upper(value, bounds))
    # a dim is a whole number: its bounds are too
    return (low if math.isinf(low) else math.ceil(low),
            high if math.isinf(high) else math.floor(high))


def prove_nonnegative(value: DimLike, bounds: Optional[Bounds] = None) -> Verdict:
    """Whether `value >= 0` for every value of its variables within `bounds`.

    Parameters
    ----------
    value : int or Dim
        The expression.
    bounds : mapping of str to (number, number), optional
        As for `interval`.

    Returns
    -------
    Verdict
        PROVED (always >= 0), REFUTED (always < 0) or UNKNOWN.

    Raises
    ------
    AxgraphTypeError
        `value` is not an int or a Dim.
    """
    low, high = interval(value, bounds)
    if low >= 0:
        return Verdict.PROVED
    if high < 0:
        return Verdict.REFUTED
    return Verdict.UNKNOWN


def prove_at_least(value: DimLike, bound: DimLike, bounds: Optional[Bounds] = None) -> Verdict:
    """Whether `value >= bound` always holds (see `prove_nonnegative`).

    Parameters
    ----------
    value, bound : int or Dim
        The two sides.
    bounds : mapping of str to (number, number), optional
        As for `interval`.

    Returns
    -------
    Verdict
        PROVED, REFUTED or UNKNOWN.
    """
    return prove_nonnegative(_as_dim_like(value) - _as_dim_like(bound), bounds)


def prove_equal(left: DimLike, right: DimLike, bounds: Optional[Bounds] = None) -> Verdict:
    """Whether `left == right` always holds: PROVED when they are the same expression,
    REFUTED when one is provably larger, else UNKNOWN (they may be equal for some values).

    Parameters
    ----------
    left, right : int or Dim
        The two sides.
    bounds : mapping of str to (number, number), optional
        As for `interval`.

    Returns
    -------
    Verdict
        PROVED, REFUTED or UNKNOWN.
    """
    difference = _as_dim_like(left) - _as_dim_like(right)
    if isinstance(difference, int):
        return Verdict.PROVED if difference == 0 else Verdict.REFUTED
    low, high = interval(difference, bounds)
    return Verdict.REFUTED if low > 0 or high < 0 else Verdict.UNKNOWN


def prove_divides(divisor: DimLike, dividend: DimLike) -> Verdict:
    """Whether `divisor` divides `dividend` exactly for every value of their variables.

    An int divisor is decided from the coefficients: every non-constant term of the
    dividend that is a multiple of it leaves the constant's remainder (`2*N + 1` is
    refuted by 2, `4*N + 2` proved by 2); a symbolic divisor is proved when it is an
    exact factor (`N*M` by `N`), else left open.

    Parameters
    ----------
    divisor, dividend : int or Dim
        The two dims.

    Returns
    -------
    Verdict
        PROVED (always divides), REFUTED (never does) or UNKNOWN.

    Raises
    ------
    AxgraphTypeError
        A side is not an int or a Dim.
    """
    divisor, dividend = _as_dim_like(divisor), _as_dim_like(dividend)
    if isinstance(divisor, int):
        if divisor == 0:
            if isinstance(dividend, int):
                return Verdict.PROVED if dividend == 0 else Verdict.REFUTED
            return Verdict.UNKNOWN
        if isinstance(dividend, int):
            return Verdict.PROVED if dividend % divisor == 0 else Verdict.REFUTED
        # every non-constant term is a multiple of g, so the dividend is the constant mod g
        g = abs(divisor)
        constant = 0
        for monomial, coeff in dividend._terms:
            if monomial == ():
                constant = coeff
            else:
                g = math.gcd(g, coeff)
        if constant % g:
            return Verdict.REFUTED
        if g == abs(divisor):
            return Verdict.PROVED
        return Verdict.UNKNOWN
    return Verdict.PROVED if exact_quotient(dividend, divisor) is not None else Verdict.UNKNOWN


def provably_different(a: Optional[DimLike], b: Optional[DimLike]) -> bool:
    """Whether two lengths (None: not known) certainly differ: what an op refuses at once,
    leaving every length that might still be equal to the solver.

    Parameters
    ----------
    a, b : int, Dim or None
        The lengths.

    Returns
    -------
    bool
        True only when both are given and `prove_equal` refutes their equality.
    """
    return a is not None and b is not None and prove_equal(a, b) is Verdict.REFUTED


def provably_below(value: Optional[DimLike], bound: int) -> bool:
    """Whether a length (None: not known) is certainly below `bound`.

    Parameters
    ----------
    value : int, Dim or None
        The length.
    bound : int
        The least it should be.

    Returns
    -------
    bool
        True only when `value >= bound` is refuted.
    """
    return value is not None and prove_at_least(value, bound) is Verdict.REFUTED


def simplify(value: DimLike, bounds: Optional[Bounds] = None) -> DimLike:
    """`value` with each max or min decided where the bounds tell which argument wins:
    `max(N - 1, 0)` is `N - 1` for N >= 1. The result equals `value` for every value of
    the variables within the bounds (not outside them).

    Parameters
    ----------
    value : int or Dim
        The expression.
    bounds : mapping of str to (number, number), optional
        As for `interval`.

    Returns
    -------
    int or Dim
        The simpler expression.
    """
    value = _as_dim_like(value)
    if isinstance(value, int):
        return value
    bounds = bounds or {}
    total: DimLike = 0
    for monomial, coeff in value._terms:
        product: DimLike = coeff
        for atom in monomial:
            product = product * _simplified_atom(atom, bounds)
        total = total + product
    return total


def _simplified_atom(atom: Atom, bounds: Bounds) -> DimLike:
    if atom[0] == "v":
        return Dim._from_terms((((atom,), 1),))
    if atom[0] == "f":
        return simplify(Dim._from_terms(atom[1]) if atom[1] else 0, bounds) // atom[2]
    args = [simplify(Dim._from_terms(terms) if terms else 0, bounds) for terms in atom[1]]
    sign = 1 if atom[0] == "max" else -1
    for candidate in args:
        if all(prove_nonnegative(sign * (candidate - other), bounds) is Verdict.PROVED
               for other in args if other is not candidate):
            return candidate
    return dim_max(*args) if atom[0] == "max" else dim_min(*args)


def variable_bounds(atom: Atom, bounds: Bounds) -> Interval:
    """The bounds of a variable atom: the solver's, else its declared domain."""
    return bounds.get(atom[1], atom_domain(atom))


# -- interval arithmetic ---------------------------------------------------------------

FracTerms = Dict[Monomial, Fraction]


def _fractional(terms: Terms) -> FracTerms:
    return {m: Fraction(c) for m, c in terms}


def _times(a: Number, b: Number) -> Number:
    """a * b where 0 times an infinite bound is 0 (a size of 0 times anything is 0)."""
    return 0 if a == 0 or b == 0 else a * b


def _product(x: Interval, y: Interval) -> Interval:
    corners = [_times(a, b) for a in x for b in y]
    return min(corners), max(corners)


def _floor_div(value: Number, k: int) -> Number:
    return value if math.isinf(value) else math.floor(Fraction(value) / k)


def _interval_of_atom(atom: Atom, bounds: Bounds) -> Interval:
    kind = atom[0]
    if kind == "v":
        return variable_bounds(atom, bounds)
    if kind == "f":
        low, high = _interval_of_terms(_fractional(atom[1]), bounds)
        return _floor_div(low, atom[2]), _floor_div(high, atom[2])
    parts = [_interval_of_terms(_fractional(terms), bounds) for terms in atom[1]]
    pick = max if kind == "max" else min
    return pick(p[0] for p in parts), pick(p[1] for p in parts)


def _interval_of_terms(terms: FracTerms, bounds: Bounds) -> Interval:
    low: Number = 0
    high: Number = 0
    for monomial, coeff in terms.items():
        part: Interval = (1, 1)
        for atom in monomial:
            part = _product(part, _interval_of_atom(atom, bounds))
        part = _product(part, (coeff, coeff))
        low, high = low + part[0], high + part[1]
    return low, high


# -- bounds that keep correlations -----------------------------------------------------------

def _without_floors(terms: Terms, lower: bool) -> FracTerms:
    """A polynomial with fractional coefficients that is <= (lower) or >= (upper) `terms` for
    every value: each floor atom standing alone in a monomial is replaced by its bound."""
    result: FracTerms = {}

    def add(monomial: Monomial, coeff: Fraction) -> None:
        total = result.get(monomial, Fraction(0)) + coeff
        if total:
            result[monomial] = total
        else:
            result.pop(monomial, None)

    for monomial, coeff in terms:
        if len(monomial) == 1 and monomial[0][0] == "f":
            _, inner, k = monomial[0]
            # c*floor(p/k) >= c*(p - k + 1)/k when c > 0 (p at its lowest), c*p/k when c < 0
            want_low_inner = (coeff > 0) == lower
            for m, c in _without_floors(inner, want_low_inner).items():
                add(m, Fraction(coeff) * c / k)
            if want_low_inner:
                add((), Fraction(coeff) * (1 - k) / k)
        else:
            add(monomial, Fraction(coeff))
    return result


def _linear_lower(value: Dim, bounds: Bounds) -> Number:
    terms = _without_floors(value._terms, lower=True)
    return _extreme_by_monotonicity(terms, bounds, lower=True)


def _linear_upper(value: Dim, bounds: Bounds) -> Number:
    terms = _without_floors(value._terms, lower=False)
    return _extreme_by_monotonicity(terms, bounds, lower=False)


def _extreme_by_monotonicity(terms: FracTerms, bounds: Bounds, lower: bool) -> Number:
    """The lowest (highest) value of `terms`: each variable whose coefficient has one sign
    moves to the end of its range that makes the whole smaller (larger), one at a time;
    what is left is bounded by intervals."""
    for _ in range(len(terms) + 1):
        variable = _monotone_variable(terms, bounds, lower)
        if variable is None:
            break
        atom, value = variable
        terms = _substitute(terms, atom, value)
    low, high = _interval_of_terms(terms, bounds)
    return low if lower else high


def _monotone_variable(terms: FracTerms, bounds: Bounds, lower: bool
                       ) -> Optional[Tuple[Atom, Fraction]]:
    """A variable occurring only to the first power and outside atoms, whose coefficient
    polynomial has one sign, with the (finite) end of its range to put in."""
    candidates = sorted({atom for monomial in terms for atom in monomial if atom[0] == "v"})
    for atom in candidates:
        coefficient: FracTerms = {}
        linear = True
        for monomial, coeff in terms.items():
            count = monomial.count(atom)
            if count > 1:
                linear = False
                break
            if count == 1:
                rest = list(monomial)
                rest.remove(atom)
                coefficient[tuple(rest)] = coeff
        if not linear or not coefficient or _inside_an_atom(terms, atom):
            continue
        low, high = _interval_of_terms(coefficient, bounds)
        var_low, var_high = variable_bounds(atom, bounds)
        if low >= 0:
            end = var_low if lower else var_high
        elif high <= 0:
            end = var_high if lower else var_low
        else:
            continue
        if not math.isinf(end):
            return atom, Fraction(end)
    return None


def _inside_an_atom(terms: FracTerms, variable: Atom) -> bool:
    for monomial in terms:
        for atom in monomial:
            if atom[0] == "f" and _mentions(atom[1], variable):
                return True
            if atom[0] in ("max", "min") and any(_mentions(t, variable) for t in atom[1]):
                return True
    return False


def _mentions(terms: Terms, variable: Atom) -> bool:
    for monomial, _ in terms:
        for atom in monomial:
            if atom == variable:
                return True
            if atom[0] == "f" and _mentions(atom[1], variable):
                return True
            if atom[0] in ("max", "min") and any(_mentions(t, variable) for t in atom[1]):
                return True
    return False


def _substitute(terms: FracTerms, variable: Atom, value: Fraction) -> FracTerms:
    result: FracTerms = {}
    for monomial, coeff in terms.items():
        if variable in monomial:
            rest = list(monomial)
            rest.remove(variable)
            monomial, coeff = tuple(rest), coeff * value
        total = result.get(monomial, Fraction(0)) + coeff
        if total:
            result[monomial] = total
        else:
            result.pop(monomial, None)
    return result
