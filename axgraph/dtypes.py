"""Element types of the axes graph: NumPy dtypes, float32 by default."""
from __future__ import annotations

import numpy as np

from .debug_info import user_location
from .errors import DTypeError

DEFAULT_DTYPE = np.dtype(np.float32)
INDEX_DTYPE = np.dtype(np.int32)
BOOL_DTYPE = np.dtype(np.bool_)


def as_dtype(dtype, default=DEFAULT_DTYPE) -> np.dtype:
    """A NumPy dtype from anything NumPy accepts; None gives `default`."""
    if dtype is None:
        return np.dtype(default)
    try:
        result = np.dtype(dtype)
    except TypeError as error:
        raise DTypeError(f"{dtype!r} is not an element type: {error}", user_location()) from None
    if result.kind not in "biuf":
        raise DTypeError(f"element type {result} is not supported (bool, ints and floats are)",
                         user_location())
    return result


def float_dtype_for(dtype: np.dtype) -> np.dtype:
    """The float type a transcendental function of `dtype` returns."""
    return dtype if dtype.kind == "f" else DEFAULT_DTYPE


def can_feed(value_dtype: np.dtype, target: np.dtype) -> bool:
    """Whether fed data of `value_dtype` may be converted to `target`: NumPy's
    `same_kind` casting (float64 into float32 and ints into floats are fine,
    floats into ints are not). The values must also fit; see
    `transformers.base.unfit_values`.
    """
    return np.can_cast(value_dtype, target, casting="same_kind")
