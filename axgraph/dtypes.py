"""Element types of the axes graph, and the rules that type every op's result.

The rules are NumPy's (docs/dtypes.md has the table), stated once here; the
axes ops derive their types from them and every transformer computes in the
types they give, so all transformers agree on values and dtypes. Two
deliberate departures, both because float32 is this project's float:

* a float made from bools or integers (`sqrt`, `exp`, `/`, `mean`, ...) is
  float32, where NumPy gives float16, float32 or float64 by the width;
* a Python float meeting an integer tensor gives float32 (NumPy: float64).

bfloat16 (from the optional ml_dtypes, which JAX ships with) is a float like
the others: NumPy reports its kind as "V", so every kind test here goes
through `kind_of`, and `promote` states its promotions (NumPy has none for
most pairs) by the rule NumPy uses for float16: the narrowest float that
holds both operands exactly.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Optional, Tuple, Union

import numpy as np

from .debug_info import user_location
from .errors import DTypeError

DEFAULT_DTYPE = np.dtype(np.float32)
#: NumPy's default integer: sums of bools and narrow ints, a Python int meeting a bool.
DEFAULT_INT_DTYPE = np.dtype(np.int64)
INDEX_DTYPE = np.dtype(np.int32)
BOOL_DTYPE = np.dtype(np.bool_)

_KIND_RANK = {"b": 0, "u": 1, "i": 1, "f": 2}
_DEFAULT_OF_KIND = {"b": BOOL_DTYPE, "u": DEFAULT_INT_DTYPE, "i": DEFAULT_INT_DTYPE,
                    "f": DEFAULT_DTYPE}


#: The names that mean bfloat16 wherever a dtype is accepted.
BFLOAT16_NAMES = ("bfloat16", "bf16")


def bfloat16() -> np.dtype:
    """The bfloat16 dtype of ml_dtypes, imported on first use.

    Returns
    -------
    numpy.dtype
        `numpy.dtype(ml_dtypes.bfloat16)`.

    Raises
    ------
    DTypeError
        ml_dtypes is not installed.
    """
    try:
        ml_dtypes = importlib.import_module("ml_dtypes")
    except ImportError:
        raise DTypeError("bfloat16 needs the optional package ml_dtypes: pip install ml_dtypes "
                         "(it comes with JAX: pip install 'axgraph[jax]')",
                         user_location()) from None
    return np.dtype(ml_dtypes.bfloat16)


def is_bfloat16(dtype: np.dtype) -> bool:
    """Whether `dtype` is bfloat16 (asked by name, without importing ml_dtypes).

    Parameters
    ----------
    dtype : numpy.dtype
        Any dtype.

    Returns
    -------
    bool
        True for `ml_dtypes.bfloat16`.
    """
    return dtype.name == "bfloat16"


def kind_of(dtype: np.dtype) -> str:
    """NumPy's kind letter, with bfloat16 a float ("f") where NumPy says "V".

    Parameters
    ----------
    dtype : numpy.dtype
        Any dtype.

    Returns
    -------
    str
        "b", "i", "u", "f" for the element types (others: NumPy's letter).
    """
    return "f" if is_bfloat16(dtype) else dtype.kind


def as_dtype(dtype, default=DEFAULT_DTYPE) -> np.dtype:
    """A NumPy dtype from anything NumPy accepts, or "bfloat16"; None gives `default`."""
    if dtype is None:
        return np.dtype(default)
    if isinstance(dtype, str) and dtype in BFLOAT16_NAMES:
        return bfloat16()
    try:
        result = np.dtype(dtype)
    except TypeError as error:
        raise DTypeError(f"{dtype!r} is not an element type: {error}", user_location()) from None
    if kind_of(result) not in "biuf":
        raise DTypeError(f"element type {result} is not supported (bool, ints, floats and "
                         f"bfloat16 are)",
                         user_location())
    return result


def promote(x: np.dtype, y: np.dtype, x_weak: bool = False, y_weak: bool = False) -> np.dtype:
    """The type two operands are computed in: `np.result_type`, with Python numbers weak.

    A Python number (weak) takes the tensor's type unless it is of a higher
    kind, then the default type of its kind: `int8 + 1` is int8, `int8 + 1.5`
    float32, `bool + 1` int64. Two Python numbers give the default type of
    the higher kind.
    """
    if not (x_weak or y_weak):
        return result_type(x, y)
    if x_weak and y_weak:
        return _DEFAULT_OF_KIND[max(kind_of(x), kind_of(y), key=_KIND_RANK.__getitem__)]
    tensor, number = (y, x) if x_weak else (x, y)
    if _KIND_RANK[kind_of(number)] <= _KIND_RANK[kind_of(tensor)]:
        return tensor
    return _DEFAULT_OF_KIND[kind_of(number)]


def result_type(x: np.dtype, y: np.dtype) -> np.dtype:
    """NumPy's common type of two tensor types, bfloat16 included.

    bfloat16 meets bfloat16, bool, int8 and uint8 as bfloat16 (its 8-bit
    significand holds them exactly), float16 and 16-bit integers as float32,
    wider integers as float64, and a wider float as that float: float16's rule
    with float16 and bfloat16 (neither holds the other) meeting in float32.

    Parameters
    ----------
    x, y : numpy.dtype
        The operands' element types.

    Returns
    -------
    numpy.dtype
        The type both are converted to: `np.result_type` where neither is bfloat16.
    """
    x_bf16, y_bf16 = is_bfloat16(x), is_bfloat16(y)
    if not (x_bf16 or y_bf16):
        return np.result_type(x, y)
    if x_bf16 and y_bf16:
        return x
    bf16, other = (x, y) if x_bf16 else (y, x)
    if other == np.float16:
        return DEFAULT_DTYPE
    common = np.result_type(np.float16, other)
    return bf16 if common == np.float16 else common


def float_dtype_for(dtype: np.dtype) -> np.dtype:
    """The float type a float-valued function of `dtype` returns: floats keep theirs."""
    return dtype if kind_of(dtype) == "f" else DEFAULT_DTYPE


def accumulator_dtype(dtype: np.dtype) -> np.dtype:
    """The type of a sum or product of `dtype` values, as `np.sum` gives it: bools and
    integers narrower than 64 bits widen to int64 (unsigned ones to uint64)."""
    if dtype.kind == "b" or (dtype.kind == "i" and dtype.itemsize < 8):
        return DEFAULT_INT_DTYPE
    if dtype.kind == "u" and dtype.itemsize < 8:
        return np.dtype(np.uint64)
    return dtype


#: What booleans mean to an elementwise op (`ElementRule.booleans`).
LOGICAL = "logical"


@dataclass(frozen=True)
class ElementRule:
    """How an elementwise op types its result from its operands' common type.

    result: "same" (the common type), "float" (floats keep their type,
        bools and integers become DEFAULT_DTYPE) or "bool" (comparisons).
    booleans: what boolean operands mean. LOGICAL: they stay booleans and the
        op keeps NumPy's logical meaning (add is or, multiply and minimum are
        and, maximum is or; abs and floor are the identity); a dtype: they
        are converted to it first (NumPy squares and powers booleans as
        int8); None: refused, as NumPy refuses `-b` and `b - b`.
    """

    result: str = "same"
    booleans: Union[str, np.dtype, None] = LOGICAL

    def types(self, common: np.dtype, dtype=None, what: str = "this op"
              ) -> Tuple[np.dtype, np.dtype]:
        """(operand type, result type) for operands of `common` type.

        `dtype` is the caller's explicit result type: the operands are then
        computed in it (NumPy's `dtype=`). DTypeError for refused booleans or
        a non-float `dtype` for a float-valued op; `what` names the op and
        its operands in the message.
        """
        if dtype is not None:
            operand = as_dtype(dtype)
            if self.result == "float" and kind_of(operand) != "f":
                raise DTypeError(f"{what}: the result is a float; dtype={operand} is not a "
                                 f"float type")
        elif self.result == "float":
            operand = float_dtype_for(common)
        else:
            operand = common
        if operand.kind == "b" and self.booleans != LOGICAL:
            if self.booleans is None:
                raise DTypeError(f"{what}: not defined for booleans (NumPy refuses it too); "
                                 f"pass dtype= (an integer type) to compute with 0 and 1")
            if dtype is not None:
                raise DTypeError(f"{what}: dtype=bool is not possible: booleans are computed "
                                 f"as {np.dtype(self.booleans)}")
            operand = np.dtype(self.booleans)
        result = BOOL_DTYPE if self.result == "bool" else operand
        return operand, result


#: The element rules of the elementwise ops: NumPy's meaning of each op for each type.
#: The common type, booleans kept (add is or, multiply is and).
SAME = ElementRule()
#: Floats keep their type; bools and integers give float32 (exp, sqrt, true division).
FLOAT = ElementRule(result="float")
#: Booleans whatever the operands (comparisons).
COMPARISON = ElementRule(result="bool")
#: Booleans refused, as NumPy refuses `-b` and `b - b`.
NO_BOOLEANS = ElementRule(booleans=None)
#: Booleans computed as int8, as NumPy squares and powers them.
BOOLEANS_AS_INT8 = ElementRule(booleans=np.dtype(np.int8))


def cast(array: np.ndarray, dtype, copy: bool = True) -> np.ndarray:
    """`array.astype(dtype)` without NumPy's overflow warning: float64 values beyond
    float32's (or bfloat16's) range round to +-inf, as IEEE arithmetic (and every
    backend) has them."""
    if array.dtype == dtype:
        return array.copy() if copy else array
    with np.errstate(over="ignore"):
        return array.astype(dtype)


def can_feed(value_dtype: np.dtype, target: np.dtype) -> bool:
    """Whether fed data of `value_dtype` may be converted to `target`: NumPy's
    `same_kind` casting (float64 into float32 and ints into floats are fine,
    floats into ints are not). The values must also fit; see
    `transformers.base.unfit_values`.
    """
    return np.can_cast(_numpy_stand_in(value_dtype), _numpy_stand_in(target), casting="same_kind")


def _numpy_stand_in(dtype: np.dtype) -> np.dtype:
    """float16 for bfloat16 (both narrow floats), for NumPy's casting tables."""
    return np.dtype(np.float16) if is_bfloat16(dtype) else dtype


def unfit_values(array: np.ndarray, converted: np.ndarray) -> Optional[str]:
    """A description of a value of `array` that its conversion did not keep, or None.

    Narrowing ints must not wrap (2**40 + 5 into int32 is not 5), and finite
    floats must not become infinite; rounding a float to fewer digits is fine.

    Parameters
    ----------
    array : numpy.ndarray
        The values given (fed data, a value written into a variable).
    converted : numpy.ndarray
        `array` converted to the target type.

    Returns
    -------
    str or None
        The first value lost and why, or None when every value was kept.
    """
    if array.size == 0 or np.can_cast(array.dtype, converted.dtype, casting="safe"):
        return None
    if kind_of(converted.dtype) in "iu":
        info = np.iinfo(converted.dtype)
        low, high = array.min(), array.max()
        if low < info.min or high > info.max:
            bad = low if low < info.min else high
            return f"{bad} (outside {info.min}..{info.max})"
        return None
    overflowed = np.isinf(converted) & np.isfinite(array)
    if overflowed.any():
        return f"{array[overflowed].flat[0]} (beyond the largest {converted.dtype} value)"
    return None
