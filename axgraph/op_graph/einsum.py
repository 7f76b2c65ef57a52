"""einsum over named axes: products and sums of tensors, said by the axes of the result.

With named axes an einsum needs no letters to line dimensions up: an axis is the same
axis in every operand. What remains to say is which axes the result keeps, and in which
order. `einsum` takes that either as Axis objects or as a spec string that names each
operand's axes (a check that the operands are what the caller thinks) and the result's.

Each axis then plays one part: kept in the result and held by several operands, a batch
axis; held by several but not kept, contracted; held by one operand only and not kept,
summed over; kept and held by one, a free axis. The work is `dot(reduction_axes=...)`
(a batched matrix product) between operands, left to right, and `sum` / `axes_with_order`
around it: no op of its own.
"""
from __future__ import annotations

from typing import Dict, List, Sequence, Union

from ..axes import Axes, Axis
from ..debug_info import user_location
from ..errors import (AxesError, AxgraphTypeError, AxgraphValueError, DuplicateAxisError,
                      UnmatchedAxesError)
from .dot import dot
from .op import Op
from .reductions import sum as reduce_sum
from .shape_ops import axes_with_order
from .tensors import as_op

Spec = Union[str, Sequence[Axis], Axes]


def einsum(spec: Spec, *operands) -> Op:
    """Products of the operands summed over the axes the result does not keep.

    The result's axes say everything: an axis several operands hold is a batch
    axis if the result keeps it and is contracted if not; an axis one operand
    holds is summed over unless the result keeps it. So contraction, batched
    products, outer products, sums over an axis and transposes are all one call.
    Operands combine left to right, two at a time, as batched matrix products
    (`dot` with `reduction_axes`); an axis is summed as soon as no later operand
    and not the result needs it.

    Parameters
    ----------
    spec : str, or sequence of Axis
        Either the result's axes, in order, as Axis objects (each an axis of
        some operand), or a string ``"d t, d k -> t k"``: one comma-separated term
        per operand naming each of its axes once, in any order, by name (names
        separated by spaces; an exact match first, else one ignoring case), then
        ``->`` and the result's axes by name. A name means one axis throughout.
    *operands : Op
        The tensors, at least one.

    Returns
    -------
    Op
        The result, with exactly the axes asked for, in that order.

    Raises
    ------
    AxgraphValueError
        The spec string has no single ``->``, or not one term per operand; no operand.
    AxgraphTypeError
        `spec` is neither a string nor a sequence of Axis; an operand is not a tensor.
    UnmatchedAxesError
        A name matches no axis of its operand, a term leaves an axis out, or a result
        axis is no operand's.
    AxesError
        A name matches two axes of its operand, or means different axes in two terms.
    DuplicateAxisError
        A term or the result names an axis twice.

    Examples
    --------
    >>> import numpy as np
    >>> import axgraph as ng
    >>> D, T, K = ng.make_axis(2, name="D"), ng.make_axis(3, name="T"), ng.make_axis(3, name="K")
    >>> q, k = ng.placeholder([D, T]), ng.placeholder([K, D])
    >>> scores = ng.einsum("d t, k d -> t k", q, k)
    >>> scores.axes
    Axes(T: 3, K: 3)
    >>> ng.einsum([T, K], q, k).axes
    Axes(T: 3, K: 3)
    >>> with ng.make_transformer() as t:
    ...     s = t.computation(scores, q, k)(np.ones((2, 3)), np.ones((3, 2)))
    >>> s.tolist()
    [[2.0, 2.0, 2.0], [2.0, 2.0, 2.0], [2.0, 2.0, 2.0]]
    """
    if not operands:
        raise AxgraphValueError("einsum needs at least one operand", user_location())
    ops = [as_op(x) for x in operands]
    if isinstance(spec, str):
        out = _resolve_spec(spec, ops)
    elif isinstance(spec, Axes) or (isinstance(spec, (list, tuple))
                                    and all(isinstance(a, Axis) for a in spec)):
        out = list(spec)
        _check_result_axes(out, ops)
    else:
        raise AxgraphTypeError(f"einsum: spec must be a string such as 'd t, d k -> t k' or "
                               f"a sequence of Axis, not {spec!r:.60}", user_location())
    return _contract(ops, out)


def _contract(ops: List[Op], out: List[Axis]) -> Op:
    """The operands multiplied left to right, each axis summed once nothing later needs it."""
    current = ops[0]
    for position, other in enumerate(ops[1:], start=1):
        needed = _union(out, *(later.axes for later in ops[position + 1:]))
        current = _sum_unneeded(current, _union(needed, other.axes))
        other = _sum_unneeded(other, _union(needed, current.axes))
        contracted = [a for a in current.axes if a in other.axes and a not in needed]
        current = dot(current, other, reduction_axes=contracted)
    current = _sum_unneeded(current, Axes(out))
    return current if list(current.axes) == list(out) else axes_with_order(current, out)


def _union(*groups: Sequence[Axis]) -> Axes:
    """The axes of every group, each once, in the order first met."""
    found: List[Axis] = []
    for group in groups:
        found.extend(a for a in group if not any(a is b for b in found))
    return Axes(found)


def _sum_unneeded(x: Op, keep: Axes) -> Op:
    unneeded = [a for a in x.axes if a not in keep]
    return reduce_sum(x, reduction_axes=unneeded) if unneeded else x


def _check_result_axes(out: List[Axis], ops: List[Op]) -> None:
    seen: Dict[int, Axis] = {}
    for axis in out:
        if id(axis) in seen:
            raise DuplicateAxisError(f"einsum: the result names {axis.name} twice",
                                     user_location())
        seen[id(axis)] = axis
        if not any(axis in x.axes for x in ops):
            raise UnmatchedAxesError(
                f"einsum: result axis {axis.name} is not an axis of any operand "
                f"({'; '.join(str(x.axes) for x in ops)})", user_location())


def _resolve_spec(spec: str, ops: List[Op]) -> List[Axis]:
    """The result's axes of a spec string, after checking every term against its operand."""
    if spec.count("->") != 1:
        raise AxgraphValueError(f"einsum: spec {spec!r} needs one '->' between the operands' "
                                f"axes and the result's", user_location())
    inputs, output = spec.split("->")
    terms = inputs.split(",")
    if len(terms) != len(ops):
        raise AxgraphValueError(f"einsum: spec {spec!r} has {len(terms)} term(s) for "
                                f"{len(ops)} operand(s)", user_location())
    meaning: Dict[str, Axis] = {}
    for position, (term, x) in enumerate(zip(terms, ops)):
        named: List[Axis] = []
        for word in term.split():
            axis = _axis_named(word, x, position, spec)
            if axis in named:
                raise DuplicateAxisError(f"einsum: term {term.strip()!r} of {spec!r} names "
                                         f"{axis.name} of operand {position} twice",
                                         user_location())
            earlier = meaning.setdefault(word, axis)
            if earlier is not axis:
                raise AxesError(f"einsum: {word!r} in {spec!r} means two different axes: "
                                f"{_described(earlier)} and, in operand {position}, "
                                f"{_described(axis)}; rename one (ng.rename)", user_location())
            named.append(axis)
        left_out = [a for a in x.axes if a not in named]
        if left_out:
            raise UnmatchedAxesError(
                f"einsum: term {term.strip()!r} of {spec!r} leaves out "
                f"{', '.join(a.name for a in left_out)} of operand {position} {x.axes}",
                user_location())
    out = []
    for word in output.split():
        if word not in meaning:
            raise UnmatchedAxesError(f"einsum: result axis {word!r} of {spec!r} is named by "
                                     f"no operand's term", user_location())
        out.append(meaning[word])
    _check_result_axes(out, ops)
    return out


def _described(axis: Axis) -> str:
    path, line = axis.location
    return f"{axis.name}: {axis.length} made at {path}:{line}"


def _axis_named(word: str, x: Op, position: int, spec: str) -> Axis:
    """The one axis of x called `word` (exactly, else ignoring case)."""
    matches = [a for a in x.axes if a.name == word] or \
              [a for a in x.axes if a.name.lower() == word.lower()]
    if not matches:
        raise UnmatchedAxesError(f"einsum: {word!r} in {spec!r} names no axis of operand "
                                 f"{position} {x.axes}", user_location())
    if len(matches) > 1:
        raise AxesError(f"einsum: {word!r} in {spec!r} could be any of "
                        f"{', '.join(repr(a) for a in matches)} of operand {position}: "
                        f"name it exactly", user_location())
    return matches[0]
