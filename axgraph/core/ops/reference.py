"""Reference NumPy functions of the elementwise ops no single ufunc computes.

Each is an op's `numpy` trait (axgraph/core/traits.py): the interpreter runs it,
and generated code calls it with `out=`. Each reads every input element before
it writes the same element of `out`, so `out` may be one of the inputs. So does
`sigmoid_denominator`, sigmoid's `numpy_denominator` trait: the faster form the
cpu backend computes sigmoid with.
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np

from ...errors import ExecutionError

_erf64 = np.vectorize(math.erf, otypes=[np.float64])


def _into(out: Optional[np.ndarray], value: np.ndarray) -> np.ndarray:
    if out is None:
        return value
    np.copyto(out, value)
    return out


def sigmoid(x: np.ndarray, out: Optional[np.ndarray] = None) -> np.ndarray:
    """1 / (1 + exp(-x)) in the stable form: e = exp(-|x|); x >= 0 ? 1/(1+e) : e/(1+e)."""
    e = np.exp(-np.abs(x))
    return _into(out, np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype))


def sigmoid_denominator(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """1 + exp(-x) into `out`, in three passes: sigmoid(x) is 1 over it. IEEE arithmetic
    gives the limits (exp overflows to inf and 1 / inf is 0) with full relative accuracy
    in the tail, so no branch is needed (the overflow is silenced by the errstate the
    backends run kernels under)."""
    np.negative(x, out=out)
    np.exp(out, out=out)
    return np.add(out, 1, out=out)


def divide(a: np.ndarray, b: np.ndarray, out: Optional[np.ndarray] = None) -> np.ndarray:
    """True division for floats; for integers, truncation toward zero (the core rule)."""
    if a.dtype.kind not in "iu":
        return np.true_divide(a, b, out=out)
    if np.any(b == 0):
        raise ExecutionError("integer division by zero")
    # floor -> truncation toward zero where the signs differ and there is a remainder
    # (found before `out`, which may be `a` or `b`, is written)
    fix = (np.remainder(a, b) != 0) & ((a < 0) != (b < 0))
    quotient = np.floor_divide(a, b, out=out)
    quotient += fix.astype(quotient.dtype)
    return quotient


def select(condition: np.ndarray, then: np.ndarray, otherwise: np.ndarray,
           out: Optional[np.ndarray] = None) -> np.ndarray:
    """condition ? then : otherwise, elementwise."""
    if out is None:
        return np.where(condition, then, otherwise)
    if np.may_share_memory(out, then) and out is not otherwise:
        return _into(out, np.where(condition, then, otherwise))
    np.copyto(out, otherwise)
    np.copyto(out, then, where=condition)
    return out


def erf(x: np.ndarray, out: Optional[np.ndarray] = None) -> np.ndarray:
    """The error function, by `math.erf` on each element in float64 (then rounded once to
    x's type): slow, and obviously right."""
    return _into(out, _erf64(x).astype(x.dtype))


def rsqrt(x: np.ndarray, out: Optional[np.ndarray] = None) -> np.ndarray:
    """1 / sqrt(x), both steps rounded as the C kernels round them (1 / sqrtf(x))."""
    one = np.ones((), x.dtype)
    if out is None:
        return np.divide(one, np.sqrt(x))
    np.sqrt(x, out=out)
    return np.divide(one, out, out=out)


__all__ = ["divide", "erf", "rsqrt", "select", "sigmoid", "sigmoid_denominator"]
