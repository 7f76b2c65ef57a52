"""Symbolic dimension expressions: `N`, `2*N + 1`, `(N - 1)//2`.

A dim is either a plain non-negative `int` or a `Dim`: a polynomial with int
coefficients over *atoms*, where an atom is a named size variable or a
floor-division of a polynomial by a positive int. Every expression is kept in
one canonical form (nested tuples, sorted), so structurally equal expressions
compare and hash equal, and an expression with no variables left collapses to
a plain `int`: `N - N` is `0`, never a `Dim`.

`unify` is the kernel of the shape solver: it binds a bare size variable (or
solves a linear equation in one variable) and fails with a clear message on a
mismatch. `solve` runs it to a fixpoint over a list of equations.
"""
from __future__ import annotations

import ast
from typing import (Callable, Dict, FrozenSet, Iterable, List, Mapping, Optional, Sequence, Tuple,
                    TypeVar, Union, cast)

from .debug_info import user_location
from .errors import AxgraphTypeError, AxgraphValueError, ShapeError

# Canonical form, as plain tuples so that ==, hash and ordering come for free:
#   atom     = ("v", name) | ("f", terms, k)       variable | floor(terms / k)
#   monomial = tuple of atoms, sorted, with repeats (() is the constant monomial)
#   terms    = tuple of (monomial, coeff), sorted by monomial, coeff != 0
Atom = tuple
Monomial = Tuple[Atom, ...]
Terms = Tuple[Tuple[Monomial, int], ...]

DimLike = Union[int, "Dim"]


def _canonical(collected: Dict[Monomial, int]) -> Terms:
    return tuple(sorted((m, c) for m, c in collected.items() if c != 0))


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
    quotient: Dict[Monomial, int] = {}
    remainder: Dict[Monomial, int] = {}
    for m, c in a:
        quotient[m] = c // k
        remainder[m] = c % k
    rest = _make(remainder)
    if isinstance(rest, int):
        quotient[()] = quotient.get((), 0) + rest // k
    else:
        atom = ("f", rest._terms, k)
        quotient[(atom,)] = quotient.get((atom,), 0) + 1
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
        if isinstance(other, Dim) or isinstance(other, bool) or not hasattr(other, "__index__"):
            raise AxgraphTypeError(f"a Dim can only be floor-divided by a positive int, not {other!r}", user_location())
        k = int(other.__index__())
        if k <= 0:
            raise AxgraphValueError(f"a Dim can only be floor-divided by a positive int, not {k}", user_location())
        return _floordiv(self._terms, k)

    def __mod__(self, other) -> DimLike:
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
        return (parse, (str(self),))


def _operand(value) -> Optional[DimLike]:
    if isinstance(value, Dim):
        return value
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        return None
    return int(value.__index__())


def _symbols(terms: Terms) -> Iterable[str]:
    for monomial, _ in terms:
        for atom in monomial:
            if atom[0] == "v":
                yield atom[1]
            else:
                yield from _symbols(atom[1])


def _subs_atom(atom: Atom, bindings: Mapping[str, DimLike]) -> DimLike:
    if atom[0] == "v":
        if atom[1] in bindings:
            return _as_dim_like(bindings[atom[1]], f"binding of {atom[1]}")
        return Dim(atom[1])
    return _subs_terms(atom[1], bindings) // atom[2]


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


_BINARY = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
           ast.Mult: lambda a, b: a * b, ast.FloorDiv: lambda a, b: a // b,
           ast.Mod: lambda a, b: a % b}


def parse(text: str) -> DimLike:
    """A dim from its printed form: `parse("2*N + 1")`, the inverse of `str(dim)`.

    Parameters
    ----------
    text : str
        An expression of ints and names with + - * // % and parentheses.

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
        raise AxgraphValueError(f"cannot parse dim expression {text!r}: unsupported {ast.dump(node)}", user_location())

    return walk(tree)


# -- unification ---------------------------------------------------------------------------

Bindings = Dict[str, DimLike]


def _linear_in_one(diff: Dim) -> Optional[Tuple[str, int, int]]:
    """(name, c, r) when diff == c*name + r, else None."""
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
    linear = _linear_in_one(diff)
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
