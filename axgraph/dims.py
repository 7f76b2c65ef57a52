"""Symbolic dimension expressions: `N`, `2*N + 1`, `(N - 1)//2`, `max(N, 3)`.

A dim is either a plain non-negative `int` or a `Dim`: a polynomial with int
coefficients over *atoms*, where an atom is a named size variable, a
floor-division of a polynomial by a positive int, or the max or min of
polynomials. Every expression is kept in one canonical form (nested tuples,
sorted), so structurally equal expressions compare and hash equal, and an
expression with no variables left collapses to a plain `int`: `N - N` is `0`,
never a `Dim`. The canonical form holds for every integer value of the
variables (it never assumes a sign), so it never changes what an expression
evaluates to; deciding inequalities under the variables' domains is the
prover's job (`axgraph.shapes.prover`).

`unify` is the kernel of the shape solver: it binds a bare size variable (or
solves a linear equation in one variable) and fails with a clear message on a
mismatch. `solve` runs it to a fixpoint over a list of equations.
"""
from __future__ import annotations

import ast
import math
from typing import (Callable, Dict, FrozenSet, Iterable, List, Mapping, Optional, Sequence, Tuple,
                    TypeVar, Union, cast)

from .debug_info import user_location
from .errors import AxgraphTypeError, AxgraphValueError, ShapeError

# Canonical form, as plain tuples so that ==, hash and ordering come for free:
#   atom     = ("v", name)                        a variable of the default domain (>= 1)
#            | ("v", name, lo, hi)                 a variable declared lo <= it (<= hi; None: no cap)
#            | ("f", terms, k)                     floor(terms / k), k > 1
#            | ("max", (terms, ...)) | ("min", (terms, ...))   of >= 2 distinct polynomials
#   monomial = tuple of atoms, sorted, with repeats (() is the constant monomial)
#   terms    = tuple of (monomial, coeff), sorted by monomial, coeff != 0
Atom = tuple
Monomial = Tuple[Atom, ...]
Terms = Tuple[Tuple[Monomial, int], ...]

DimLike = Union[int, "Dim"]


def _canonical(collected: Dict[Monomial, int]) -> Terms:
    return tuple(sorted((m, c) for m, c in collected.items() if c != 0))


def from_terms(terms: Iterable[Tuple[Monomial, int]]) -> DimLike:
    """The dim whose canonical terms are `terms`, for code that reads the canonical form.

    A solver that splits an expression into its terms (the coefficient of a variable,
    the rest) builds the parts back here, without redoing the arithmetic.

    Parameters
    ----------
    terms : iterable of (monomial, int)
        Distinct monomials (tuples of atoms, as a Dim's terms hold them) and their
        coefficients; zero coefficients are dropped.

    Returns
    -------
    int or Dim
        An int when no variable is left, else the Dim.
    """
    return _make(dict(terms))


def _make(collected: Dict[Monomial, int]) -> DimLike:
    """An int when no variable is left, else a Dim."""
    terms = _canonical(collected)
    if not terms:
        return 0
    if len(terms) == 1 and terms[0][0] == ():
        return terms[0][1]
    return Dim._from_terms(terms)


def _terms_of(value: DimLike) -> Terms:
    if isinstance(value, Dim):
        return value._terms
    return (((), value),) if value else ()


def _as_dim_like(value, what: str = "dim") -> DimLike:
    """An int or a Dim from anything usable as one (np.integer included); else TypeError."""
    result = _operand(value)
    if result is None:
        raise AxgraphTypeError(f"a {what} must be an int or a Dim expression, not {value!r}", user_location())
    return result


def _add(a: Terms, b: Terms, sign: int = 1) -> Dict[Monomial, int]:
    collected: Dict[Monomial, int] = dict(a)
    for m, c in b:
        collected[m] = collected.get(m, 0) + sign * c
    return collected


def _mul(a: Terms, b: Terms) -> Dict[Monomial, int]:
    collected: Dict[Monomial, int] = {}
    for ma, ca in a:
        for mb, cb in b:
            m = tuple(sorted(ma + mb))
            collected[m] = collected.get(m, 0) + ca * cb
    return collected


def _floordiv(a: Terms, k: int) -> DimLike:
    """floor(a / k) for k > 0: whole multiples of k come out exactly, the rest stays an atom.

    With integer-valued variables, floor((k*q + r) / k) = q + floor(r / k), so
    splitting each coefficient as k*(c // k) + c % k is exact and canonical.
    """
    if k == 1:
        return _make(dict(a))
    quotient: Dict[Monomial, int] = {}
    remainder: Dict[Monomial, int] = {}
    for m, c in a:
        quotient[m] = c // k
        remainder[m] = c % k
    rest = _make(remainder)
    if isinstance(rest, int):
        quotient[()] = quotient.get((), 0) + rest // k
        return _make(quotient)
    return _make(_add(_canonical(quotient), _terms_of(_floor_of_remainder(rest._terms, k))))


def _floor_of_remainder(terms: Terms, k: int) -> DimLike:
    """floor(terms / k) where every coefficient of `terms` is in 0..k-1 (a remainder).

    Two rewrites keep one form for one value, both exact for every integer value
    of the variables:

    * a common factor g of k and of every non-constant coefficient comes out:
      floor((g*r + c) / (g*k')) = floor((r + c // g) / k');
    * a floor of a floor collapses: floor((floor(p/m) + c) / k) = floor((p + c*m) / (m*k)),
      so stacked strided convolutions give `(H + 3)//4`, not `((H + 1)//2 + 1)//2`.
    """
    g = k
    for monomial, c in terms:
        if monomial != ():
            g = math.gcd(g, c)
    if g > 1:
        reduced = {m: (c // g if m != () else c // g) for m, c in terms}
        return _floordiv(_canonical(reduced), k // g)
    variable_terms = [(m, c) for m, c in terms if m != ()]
    if len(variable_terms) == 1:
        (monomial, coeff), = variable_terms
        if coeff == 1 and len(monomial) == 1 and monomial[0][0] == "f":
            _, inner, m = monomial[0]
            constant = dict(terms).get((), 0)
            return _floordiv(_canonical(_add(inner, (((), constant * m),))), m * k)
    return Dim._from_terms(((((("f", terms, k)),), 1),))


def _extremum(kind: str, args: Sequence[DimLike]) -> DimLike:
    """max or min (`kind`) of dims, canonical: nested ones flattened, a dim that differs from
    another by a constant dropped for the other, ints folded; one dim left is that dim."""
    flat: List[DimLike] = []
    for arg in args:
        arg = _as_dim_like(arg, f"argument of {kind}")
        atom = _lone_atom(arg)
        if atom is not None and atom[0] == kind:
            flat.extend(_make(dict(terms)) for terms in atom[1])
        else:
            flat.append(arg)
    if not flat:
        raise AxgraphTypeError(f"{kind} of no dims", user_location())
    kept: List[DimLike] = []
    for candidate in flat:
        for i, other in enumerate(kept):
            difference = candidate - other
            if isinstance(difference, int):
                if (difference > 0) == (kind == "max") and difference != 0:
                    kept[i] = candidate
                break
        else:
            kept.append(candidate)
    if len(kept) == 1:
        return kept[0]
    atom = (kind, tuple(sorted(_terms_of(d) for d in kept)))
    return Dim._from_terms((((atom,), 1),))


def _lone_atom(value: DimLike) -> Optional[Atom]:
    """The atom of a dim that is exactly one atom (coefficient 1), else None."""
    if isinstance(value, Dim) and len(value._terms) == 1:
        (monomial, coeff), = value._terms
        if coeff == 1 and len(monomial) == 1:
            return monomial[0]
    return None


def dim_max(*args: DimLike) -> DimLike:
    """The largest of dims, symbolic where it cannot be told: `dim_max(N, 3)` is `max(N, 3)`.

    Parameters
    ----------
    *args : int or Dim
        At least one dim.

    Returns
    -------
    int or Dim
        An int when every argument is one, the one argument that dominates the
        others by a constant (`dim_max(N, N + 2)` is `N + 2`), else a max atom.

    Raises
    ------
    AxgraphTypeError
        No argument, or one that is not an int or a Dim.
    """
    return _extremum("max", args)


def dim_min(*args: DimLike) -> DimLike:
    """The smallest of dims, symbolic where it cannot be told: `dim_min(N, M)`.

    Parameters
    ----------
    *args : int or Dim
        At least one dim.

    Returns
    -------
    int or Dim
        As `dim_max`, for the smallest.

    Raises
    ------
    AxgraphTypeError
        No argument, or one that is not an int or a Dim.
    """
    return _extremum("min", args)


def slice_length(length: DimLike, picked: slice) -> DimLike:
    """How many positions `picked` takes from an axis of `length`, as Python slices count
    them (`len(range(n)[picked])`), symbolic when `length` is: `slice_length(N, slice(1, 3))`
    is `max(min(N, 3) - min(N, 1), 0)` (2 once N >= 3).

    Parameters
    ----------
    length : int or Dim
        The length sliced (>= 0).
    picked : slice
        A slice of ints (or None bounds); its step must not be 0.

    Returns
    -------
    int or Dim
        The number of positions taken: an int when `length` is one.

    Raises
    ------
    AxgraphValueError
        The step is 0.
    """
    if isinstance(length, int):
        return len(range(*picked.indices(length)))
    step = 1 if picked.step is None else int(picked.step)
    if step == 0:
        raise AxgraphValueError("a slice step cannot be 0", user_location())

    def bound(index: Optional[int], default: DimLike, lowest: int, highest: DimLike) -> DimLike:
        if index is None:
            return default
        if index < 0:
            return dim_max(length + index, lowest)
        return dim_min(index, highest)

    if step > 0:
        start = bound(picked.start, 0, 0, length)
        stop = bound(picked.stop, length, 0, length)
        return dim_max((stop - start + step - 1) // step, 0)
    start = bound(picked.start, length - 1, -1, length - 1)
    stop = bound(picked.stop, -1, -1, length - 1)
    return dim_max((start - stop - step - 1) // -step, 0)


def _monomial_order(monomial: Monomial) -> tuple:
    """A monomial order (graded, then lexicographic on the atoms, largest first)."""
    return (len(monomial), tuple(sorted(monomial, reverse=True)))


def _monomial_quotient(monomial: Monomial, divisor: Monomial) -> Optional[Monomial]:
    """monomial / divisor as a monomial, or None when divisor's atoms are not all in it."""
    left = list(monomial)
    for atom in divisor:
        if atom not in left:
            return None
        left.remove(atom)
    return tuple(left)


def exact_quotient(a: DimLike, b: DimLike) -> Optional[DimLike]:
    """`a / b` when it is a polynomial with int coefficients (`B*T*D / (B*D)` is `T`), else
    None.

    Polynomial division by the leading term: when b divides a exactly, the division
    finds the quotient; any remainder means it does not (for these values of the
    atoms; `N*N // N` is `N`, `(N + 1) // N` is None).

    Parameters
    ----------
    a, b : int or Dim
        The dividend and the divisor (a zero divisor gives None).

    Returns
    -------
    int, Dim or None
        The exact quotient, or None.

    Raises
    ------
    AxgraphTypeError
        An argument is not an int or a Dim.
    """
    a, b = _as_dim_like(a), _as_dim_like(b)
    if isinstance(b, int):
        if b == 0 or any(c % b for _, c in _terms_of(a)):
            return None
        return _make({m: c // b for m, c in _terms_of(a)})
    lead_monomial, lead_coeff = max(b._terms, key=lambda term: _monomial_order(term[0]))
    remainder: Dict[Monomial, int] = dict(_terms_of(a))
    quotient: Dict[Monomial, int] = {}
    while remainder:
        monomial, coeff = max(remainder.items(), key=lambda term: _monomial_order(term[0]))
        factor = _monomial_quotient(monomial, lead_monomial)
        if factor is None or coeff % lead_coeff:
            return None
        step = coeff // lead_coeff
        quotient[factor] = quotient.get(factor, 0) + step
        for divisor_monomial, divisor_coeff in b._terms:
            product = tuple(sorted(factor + divisor_monomial))
            left = remainder.get(product, 0) - step * divisor_coeff
            if left:
                remainder[product] = left
            else:
                remainder.pop(product, None)
    return _make(quotient)


class Dim:
    """A symbolic dim: `Dim("N")` is the size variable N; build the rest with + - * // %.

    Expressions are polynomials with int coefficients over size variables and
    floor divisions by positive ints, kept in one canonical form: equality is
    structural, so `2*N + N == 3*N` holds and `2*N != N`, and an expression with
    no variable left is a plain int (`N - N` is 0). `bool(dim)` is an error:
    whether a symbolic dim is zero is not known until it is bound. Immutable and
    hashable.

    Parameters
    ----------
    name : str
        The size variable's name, a Python identifier.

    Raises
    ------
    AxgraphValueError
        `name` is not a string that is an identifier.

    Examples
    --------
    >>> from axgraph import core
    >>> N = core.Dim("N")
    >>> 2 * N + 1, (2 * N + 1) // 2, (2 * N + 1).evaluate({"N": 3})
    (Dim('2*N + 1'), Dim('N'), 7)
    """

    __slots__ = ("_terms", "_hash")
    _terms: Terms
    _hash: int

    def __init__(self, name: str):
        if not isinstance(name, str) or not name.isidentifier():
            raise AxgraphValueError(f"a size variable needs an identifier name, not {name!r}", user_location())
        object.__setattr__(self, "_terms", (((("v", name),), 1),))
        object.__setattr__(self, "_hash", hash(self._terms))

    @classmethod
    def _from_terms(cls, terms: Terms) -> "Dim":
        dim = object.__new__(cls)
        object.__setattr__(dim, "_terms", terms)
        object.__setattr__(dim, "_hash", hash(terms))
        return dim

    def __setattr__(self, name, value):
        raise AttributeError("Dim expressions are immutable")

    # -- arithmetic ---------------------------------------------------------------
    def __add__(self, other) -> DimLike:
        other = _operand(other)
        return NotImplemented if other is None else _make(_add(self._terms, _terms_of(other)))

    __radd__ = __add__

    def __sub__(self, other) -> DimLike:
        other = _operand(other)
        return NotImplemented if other is None else _make(_add(self._terms, _terms_of(other), -1))

    def __rsub__(self, other) -> DimLike:
        other = _operand(other)
        return NotImplemented if other is None else _make(_add(_terms_of(other), self._terms, -1))

    def __neg__(self) -> DimLike:
        return _make({m: -c for m, c in self._terms})

    def __pos__(self) -> "Dim":
        return self

    def __mul__(self, other) -> DimLike:
        other = _operand(other)
        return NotImplemented if other is None else _make(_mul(self._terms, _terms_of(other)))

    __rmul__ = __mul__

    def __floordiv__(self, other) -> DimLike:
        if isinstance(other, Dim):
            return _exact_or_error(self, other)
        if isinstance(other, bool) or not hasattr(other, "__index__"):
            raise AxgraphTypeError(f"a Dim can only be floor-divided by a positive int, not {other!r}", user_location())
        k = int(other.__index__())
        if k <= 0:
            raise AxgraphValueError(f"a Dim can only be floor-divided by a positive int, not {k}", user_location())
        return _floordiv(self._terms, k)

    def __rfloordiv__(self, other) -> DimLike:
        dividend = _operand(other)
        if dividend is None:
            return NotImplemented
        return _exact_or_error(dividend, self)

    def __mod__(self, other) -> DimLike:
        if isinstance(other, Dim):
            _exact_or_error(self, other)
            return 0
        return self - (self // other) * int(other)

    # -- comparison -----------------------------------------------------------------
    def __eq__(self, other) -> bool:
        if isinstance(other, Dim):
            return self._terms == other._terms
        if isinstance(other, bool):
            return False
        if hasattr(other, "__index__"):
            return False  # a Dim always has a variable; constants are ints
        return NotImplemented

    def __ne__(self, other) -> bool:
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    def __hash__(self) -> int:
        return self._hash

    def __bool__(self) -> bool:
        raise AxgraphTypeError(f"the truth of symbolic dim {self} is unknown until it is bound", user_location())

    # -- inspection -------------------------------------------------------------------
    @property
    def free_symbols(self) -> FrozenSet[str]:
        """Names of the size variables this expression uses."""
        return frozenset(_symbols(self._terms))

    @property
    def is_symbol(self) -> bool:
        """Whether this is a bare size variable such as `N`."""
        return len(self._terms) == 1 and self._terms[0][1] == 1 and len(self._terms[0][0]) == 1 \
            and self._terms[0][0][0][0] == "v"

    @property
    def name(self) -> str:
        """The variable's name (only for a bare size variable)."""
        if not self.is_symbol:
            raise AttributeError(f"{self} is an expression, not a size variable")
        return self._terms[0][0][0][1]

    @property
    def domain(self) -> Tuple[int, Optional[int]]:
        """(min, max) values a bare size variable may take; max is None when unbounded."""
        if not self.is_symbol:
            raise AttributeError(f"{self} is an expression, not a size variable")
        low, high = atom_domain(self._terms[0][0][0])
        return low, (None if high == math.inf else int(high))

    def subs(self, bindings: Mapping[str, DimLike]) -> DimLike:
        """This expression with the bound variables replaced (by ints or other dims).

        Parameters
        ----------
        bindings : mapping of str to int or Dim
            Values (or other expressions) for some size variables, by name.

        Returns
        -------
        int or Dim
            An int when no variable is left, else a Dim.

        Raises
        ------
        AxgraphTypeError
            A binding is neither an int nor a Dim.
        """
        return _subs_terms(self._terms, bindings)

    def evaluate(self, bindings: Mapping[str, DimLike]) -> int:
        """The int value under `bindings`.

        Parameters
        ----------
        bindings : mapping of str to int or Dim
            A value for every size variable of the expression, by name.

        Returns
        -------
        int
            The value.

        Raises
        ------
        ShapeError
            A size variable is left unbound; the message names it.
        """
        value = self.subs(bindings)
        if isinstance(value, Dim):
            missing = ", ".join(sorted(value.free_symbols))
            raise ShapeError(f"cannot evaluate dim {self}: size variable(s) {missing} not bound")
        return value

    def __repr__(self) -> str:
        return f"Dim({str(self)!r})"

    def __str__(self) -> str:
        return _format_terms(self._terms)

    def __reduce__(self):
        if _has_declared_domain(self._terms):  # the printed form does not carry domains
            return (_rebuild, (self._terms,))
        return (parse, (str(self),))


def _rebuild(terms: Terms) -> "Dim":
    """A Dim from its canonical terms (unpickling one whose variables declare domains)."""
    return Dim._from_terms(terms)


def _exact_or_error(dividend: DimLike, divisor: "Dim") -> DimLike:
    quotient = exact_quotient(dividend, divisor)
    if quotient is None:
        raise AxgraphTypeError(
            f"{dividend} // {divisor}: a dim divides by a positive int, or by a dim it is an "
            f"exact multiple of (B*T // T is B); that a symbolic size divides another is a "
            f"constraint to state (axgraph.shapes.Divides), not an expression", user_location())
    return quotient


def _has_declared_domain(terms: Terms) -> bool:
    return any(atom[0] == "v" and len(atom) > 2 for atom in _atoms(terms))


def _atoms(terms: Terms) -> Iterable[Atom]:
    """Every atom of `terms`, nested ones included."""
    for monomial, _ in terms:
        for atom in monomial:
            yield atom
            if atom[0] == "f":
                yield from _atoms(atom[1])
            elif atom[0] in ("max", "min"):
                for inner in atom[1]:
                    yield from _atoms(inner)


def _operand(value) -> Optional[DimLike]:
    if isinstance(value, Dim):
        return value
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        return None
    return int(value.__index__())


def _symbols(terms: Terms) -> Iterable[str]:
    return (atom[1] for atom in _atoms(terms) if atom[0] == "v")


def _subs_atom(atom: Atom, bindings: Mapping[str, DimLike]) -> DimLike:
    if atom[0] == "v":
        if atom[1] in bindings:
            return _as_dim_like(bindings[atom[1]], f"binding of {atom[1]}")
        return Dim._from_terms((((atom,), 1),))
    if atom[0] == "f":
        return _subs_terms(atom[1], bindings) // atom[2]
    return _extremum(atom[0], [_subs_terms(terms, bindings) for terms in atom[1]])


def _subs_terms(terms: Terms, bindings: Mapping[str, DimLike]) -> DimLike:
    total: DimLike = 0
    for monomial, coeff in terms:
        product: DimLike = coeff
        for atom in monomial:
            product = product * _subs_atom(atom, bindings)
        total = total + product
    return total


def _format_atom(atom: Atom, wrap: bool) -> str:
    if atom[0] == "v":
        return atom[1]
    if atom[0] in ("max", "min"):
        # variables first, constants last, as in a sum: max(N, 3)
        shown = sorted(atom[1], key=lambda terms: (all(m == () for m, _ in terms), terms))
        return f"{atom[0]}({', '.join(_format_terms(terms) if terms else '0' for terms in shown)})"
    inner = _format_terms(atom[1])
    text = f"({inner})//{atom[2]}" if " " in inner else f"{inner}//{atom[2]}"
    return f"({text})" if wrap else text


def _format_monomial(monomial: Monomial, coeff: int, negated: bool = False) -> str:
    # a floor-division atom next to other factors (or after a unary minus) needs
    # parentheses: * and // bind equally, so "2*(N + 1)//2" would parse differently
    wrap = negated or coeff != 1 or len(monomial) > 1
    factors = [_format_atom(a, wrap) for a in monomial]
    if coeff != 1 or not factors:
        factors.insert(0, str(coeff))
    return "*".join(factors)


def _format_terms(terms: Terms) -> str:
    # variables first, the constant last: "2*N + 1", "N - 1"
    ordered = sorted(terms, key=lambda t: (t[0] == (), any(a[0] == "f" for a in t[0]), t[0]))
    text = ""
    for i, (monomial, coeff) in enumerate(ordered):
        if i == 0:
            text = (_format_monomial(monomial, coeff) if coeff >= 0
                    else "-" + _format_monomial(monomial, -coeff, negated=True))
        else:
            sign = " + " if coeff > 0 else " - "
            text += sign + _format_monomial(monomial, abs(coeff))
    return text


# -- helpers usable on ints and Dims alike ----------------------------------------------

def free_symbols(value: DimLike) -> FrozenSet[str]:
    """Size variables of a dim (none for an int)."""
    return value.free_symbols if isinstance(value, Dim) else frozenset()


def subs(value: DimLike, bindings: Mapping[str, DimLike]) -> DimLike:
    """`value` with bound variables replaced; ints come back unchanged."""
    return value.subs(bindings) if isinstance(value, Dim) else value


def evaluate(value: DimLike, bindings: Mapping[str, DimLike]) -> int:
    """The int value of a dim under `bindings` (ShapeError if a variable is unbound)."""
    return value.evaluate(bindings) if isinstance(value, Dim) else value


def is_static(value: DimLike) -> bool:
    """Whether the dim is a plain int."""
    return not isinstance(value, Dim)


_Default = TypeVar("_Default")


def known(value: DimLike, default: _Default) -> Union[int, _Default]:
    """The int value of a dim, or `default` when it is symbolic.

    How a pass or lowering rule asks a question about a size that may not be
    known until data is fed: `known(d, 1) == 0` ("is it certainly empty?"),
    `known(d, -1) >= 0`. The caller picks the default that keeps its decision
    safe for every value the size could take.
    """
    return value if isinstance(value, int) else default


def definitely_equal(a: DimLike, b: DimLike) -> bool:
    """Whether `a == b` for every binding of the size variables (`N - 1 + 1` is `N`).

    False means "not proved": `N` and `M` may still turn out equal at run time.
    """
    difference = _as_dim_like(a) - _as_dim_like(b)
    return isinstance(difference, int) and difference == 0


def symbols(names: str) -> Tuple[Dim, ...]:
    """Several size variables at once: `N, M = symbols("N M")`.

    Parameters
    ----------
    names : str
        Identifiers separated by spaces or commas.

    Returns
    -------
    tuple of Dim
        One size variable per name, in order.

    Raises
    ------
    AxgraphValueError
        A name is not an identifier.
    """
    return tuple(Dim(name) for name in names.replace(",", " ").split())


#: The domain of a size variable not declared otherwise: every value >= 1, no cap.
DEFAULT_DOMAIN: Tuple[int, float] = (1, math.inf)


def dim(name: str, min: int = 1, max: Optional[int] = None) -> Dim:
    """A size variable: a length that is not known until data is fed (`B = ng.dim("B")`).

    Give it to an axis (`ng.make_axis(length=B)`) or build expressions from it
    (`2 * B`, `B // 2 + 1`). Its value is bound when data is fed; until then
    `ng.infer_shapes` reasons about it symbolically, assuming only its domain:
    every value from `min` up (to `max`, if given). A variable of the default
    domain (>= 1) is the same as `core.Dim(name)`.

    Parameters
    ----------
    name : str
        The variable's name, a Python identifier.
    min : int, optional
        The smallest value it may take (default 1; 0 allows empty tensors).
    max : int, optional
        The largest value it may take (default: no limit).

    Returns
    -------
    Dim
        The size variable.

    Raises
    ------
    AxgraphValueError
        `name` is not an identifier, `min` is negative or `max` is below `min`.
    AxgraphTypeError
        `min` or `max` is not an int.

    Examples
    --------
    >>> import axgraph as ng
    >>> B = ng.dim("B")
    >>> 2 * B + 1, ng.dim("K", min=0, max=8).domain
    (Dim('2*B + 1'), (0, 8))
    """
    variable = Dim(name)
    for value, what in ((min, "min"), (max, "max")):
        if value is not None and (isinstance(value, bool) or not hasattr(value, "__index__")):
            raise AxgraphTypeError(f"dim {name}: {what} must be an int, not {value!r}",
                                   user_location())
    low = int(min.__index__())
    high = math.inf if max is None else int(max.__index__())
    if low < 0 or high < low:
        raise AxgraphValueError(f"dim {name}: the domain {low}..{max} is empty or negative; sizes "
                                f"are >= 0", user_location())
    if (low, high) == DEFAULT_DOMAIN:
        return variable
    return Dim._from_terms((((("v", name, low, high),), 1),))


def atom_domain(atom: Atom) -> Tuple[int, float]:
    """(lowest, highest) value of a variable atom; highest is math.inf when unbounded."""
    return DEFAULT_DOMAIN if len(atom) == 2 else (atom[2], atom[3])


_BINARY = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
           ast.Mult: lambda a, b: a * b, ast.FloorDiv: lambda a, b: a // b,
           ast.Mod: lambda a, b: a % b}


def parse(text: str) -> DimLike:
    """A dim from its printed form: `parse("2*N + 1")`, the inverse of `str(dim)`.

    Parameters
    ----------
    text : str
        An expression of ints and names with + - * // %, max(...), min(...) and
        parentheses.

    Returns
    -------
    int or Dim
        The expression's value: an int when it has no variable.

    Raises
    ------
    AxgraphValueError
        `text` is not such an expression.
    """
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        raise AxgraphValueError(f"cannot parse dim expression {text!r}", user_location()) from None

    def walk(node) -> DimLike:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.Name):
            return Dim(node.id)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            value = walk(node.operand)
            return -value if isinstance(node.op, ast.USub) else value
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            return _BINARY[type(node.op)](walk(node.left), walk(node.right))
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("max", "min") and node.args and not node.keywords):
            return _extremum(node.func.id, [walk(arg) for arg in node.args])
        raise AxgraphValueError(f"cannot parse dim expression {text!r}: unsupported {ast.dump(node)}", user_location())

    return walk(tree)


# -- unification ---------------------------------------------------------------------------

Bindings = Dict[str, DimLike]


def linear_in_one(diff: Dim) -> Optional[Tuple[str, int, int]]:
    """(name, c, r) when diff == c*name + r for one size variable, else None (the shape
    unification here and the shape solver both solve such equations for the name)."""
    coeff, name, rest = 0, None, 0
    for monomial, c in diff._terms:
        if monomial == ():
            rest = c
        elif len(monomial) == 1 and monomial[0][0] == "v" and name is None:
            name, coeff = monomial[0][1], c
        else:
            return None
    return (name, coeff, rest) if name is not None else None


def _bind(bindings: Bindings, name: str, value: DimLike) -> Bindings:
    """bindings plus name := value, kept in solved form (no bound name on any right side)."""
    if isinstance(value, int) and value < 0:
        raise ShapeError(f"size variable {name} would be {value}; sizes are never negative")
    solved = {k: subs(v, {name: value}) for k, v in bindings.items()}
    solved[name] = value
    return solved


#: What an equation is about, for its error message: text, or a function making it (so
#: that a call binding many dims formats a message only when one is raised).
What = Union[str, Callable[[], str]]


def unify(a: DimLike, b: DimLike, bindings: Optional[Mapping[str, DimLike]] = None,
          what: What = "") -> Optional[Bindings]:
    """Make dims `a` and `b` equal: new bindings, or None if not decidable yet.

    Under the current `bindings`: equal dims need nothing; a bare variable on
    either side is bound to the other side (occurs check); an equation linear
    in a single variable (`2*N + 1 == 7`) is solved when its solution is a
    whole number. A contradiction raises ShapeError (prefixed by `what`).
    None means no information could be gained yet (e.g. `N + M == 5`); a
    solver keeps such equations and retries them after other bindings.
    """
    bindings = dict(bindings or {})
    left, right = subs(_as_dim_like(a), bindings), subs(_as_dim_like(b), bindings)

    def mismatch(detail: str = "") -> ShapeError:
        used = sorted((free_symbols(a) | free_symbols(b)) & set(bindings))
        values = ", ".join(f"{name} = {bindings[name]}" for name in used)
        shown = f"{a} vs {b}" + (f" (with {values})" if values else "")
        text = what() if callable(what) else what
        return ShapeError(f"{text + ': ' if text else ''}dims differ: {shown}{detail}")

    diff = left - right
    if isinstance(diff, int):
        if diff == 0:
            return bindings
        raise mismatch()
    for var, other in ((left, right), (right, left)):
        if isinstance(var, Dim) and var.is_symbol and var.name not in free_symbols(other):
            try:
                return _bind(bindings, var.name, other)
            except ShapeError as error:
                raise mismatch(f": {error.message}") from None
    linear = linear_in_one(diff)
    if linear is not None:
        name, coeff, rest = linear
        if rest % coeff != 0:
            raise mismatch(f": {name} would have to be {-rest}/{coeff}, not a whole number")
        try:
            return _bind(bindings, name, -rest // coeff)
        except ShapeError as error:
            raise mismatch(f": {error.message}") from None
    return None


Equation = Tuple[DimLike, DimLike, What]


def solve(equations: Sequence[Equation], bindings: Optional[Mapping[str, DimLike]] = None
          ) -> Tuple[Bindings, List[Equation]]:
    """Unify every (a, b, what) to a fixpoint: (bindings, equations still undecided)."""
    bindings = dict(bindings or {})
    pending = list(equations)
    progress = True
    while pending and progress:
        progress, later = False, []
        for a, b, what in pending:
            result = unify(a, b, bindings, what)
            if result is None:
                later.append((a, b, what))
            else:
                progress = progress or result != bindings
                bindings = result
        progress = progress or len(later) < len(pending)
        pending = later
    return bindings, pending


def bind_shapes(expected: Sequence[Sequence[DimLike]], actual: Sequence[Sequence[int]],
                describe: Callable[[int], str]) -> Dict[str, int]:
    """The values of the size variables that make each expected shape the actual one.

    The one routine that binds sizes from data, for core Functions
    (`Function.bind`) and for the axes graph's placeholders alike. Dims that
    are equal already need nothing; every other pair is an equation, solved to
    a fixpoint (`2*N + 1 == 7` gives N = 3). A rank that differs, two values
    for one variable, or an equation the shapes cannot decide raises
    ShapeError naming `describe(i)` (the owner of the i-th shape), the dim and
    both values.
    """
    equations: List[Equation] = []
    for index, (shape, values) in enumerate(zip(expected, actual)):
        if len(shape) != len(values):
            raise ShapeError(f"{describe(index)}: rank {len(values)}, not {len(shape)}")
        for position, (dim, value) in enumerate(zip(shape, values)):
            if isinstance(dim, int) and dim == value:
                continue  # a known dim that fits: nothing to solve or report
            equations.append((dim, value, _dim_of(describe, index, position)))
    if not equations:
        return {}
    bindings, pending = solve(equations)
    if pending:
        left, right, what = pending[0]
        text = what() if callable(what) else what
        raise ShapeError(f"{text}: cannot determine {left} == {right} from the shapes given")
    return cast(Dict[str, int], bindings)  # solved against int dims: every value is an int


def _dim_of(describe: Callable[[int], str], index: int, position: int) -> Callable[[], str]:
    """What an equation of `bind_shapes` is about, formatted only for an error."""
    return lambda: f"{describe(index)}: dim {position}"
