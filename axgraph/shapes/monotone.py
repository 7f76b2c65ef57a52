"""The least size that satisfies a check which only gets easier as the size grows.

A stack of windowed ops leaves checks such as `((H - 3)//2 - 2)//2 + 1 >= 1` on one
size variable. Each side only grows with `H`, so the check holds exactly from some
least `H` on, and all of them together say one thing: `H` is at least the largest
of those least values. The solvers use this to merge such checks into one bound per
variable (one run-time check `H >= 14`, not one per layer) and to decide the others
against that bound.
"""
from __future__ import annotations

from typing import Optional

from ..dims import Dim, DimLike, Terms


def non_decreasing(value: DimLike, name: str) -> bool:
    """Whether `value` never decreases as size variable `name` grows, and depends on no other.

    A sufficient test on the canonical form: every term is a constant, `name` alone
    with a positive coefficient, or a positive multiple of a floor, max or min whose
    arguments pass the same test.

    Parameters
    ----------
    value : int or Dim
        The expression.
    name : str
        The size variable.

    Returns
    -------
    bool
        True when the test shows `value` non-decreasing in `name` (an int is).
    """
    return not isinstance(value, Dim) or _non_decreasing_terms(value._terms, name)


def _non_decreasing_terms(terms: Terms, name: str) -> bool:
    for monomial, coeff in terms:
        if not monomial:
            continue
        if len(monomial) != 1 or coeff < 0:
            return False
        atom = monomial[0]
        if atom[0] == "v":
            if atom[1] != name:
                return False
        elif atom[0] == "f":
            if not _non_decreasing_terms(atom[1], name):
                return False
        elif not all(_non_decreasing_terms(argument, name) for argument in atom[1]):
            return False  # max or min: non-decreasing when each argument is
    return True


def least_solution(value: DimLike, name: str, start: int, limit: int = 1 << 62) -> Optional[int]:
    """The least whole `name >= start` with `value >= 0`, for a non-decreasing `value`.

    Doubling finds a value that satisfies the check, bisection the least one; the
    caller makes sure `value` passes `non_decreasing`, so the answer is exact.

    Parameters
    ----------
    value : int or Dim
        An expression in `name` alone that never decreases as `name` grows.
    name : str
        The size variable.
    start : int
        The least value `name` may take already.
    limit : int, optional
        Where to give up: no value up to it satisfies the check.

    Returns
    -------
    int or None
        The least solution, or None when there is none below `limit`.
    """
    def at(x: int) -> int:
        return value.evaluate({name: x}) if isinstance(value, Dim) else value

    if at(start) >= 0:
        return start
    low, high = start, max(start, 1) * 2
    while at(high) < 0:
        if high > limit:
            return None
        low, high = high, high * 2
    while high - low > 1:
        middle = (low + high) // 2
        if at(middle) >= 0:
            high = middle
        else:
            low = middle
    return high
