"""A layer's bias and ReLU in one pass: ``np.maximum(x + bias, 0)`` without the sum in memory.

Why: a convolution or dense layer adds its bias to the product and clamps the sum, two
NumPy passes over the layer's output (LeNet's first convolution: 2.9 MB written and
read back between them, on one thread). The schedule pairs such a ReLU with its bias
Add (`schedule.bias_relus`) and the generated code calls `bias_relu` once, at the
ReLU's step. The C kernel (epilogue.c) runs on the OpenMP threads where x and out are
row-major in the Add's dim order and the bias varies along the last dim only (a
product's output, NHWC maps); elsewhere, and without a C compiler, the two NumPy
passes run into `out`. Both round every element as the unfused ops do.
"""
from __future__ import annotations

import ctypes
import functools
from pathlib import Path
from typing import Callable, Dict

import numpy as np

from . import kernel_c

_SUFFIX: Dict[np.dtype, str] = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}


@functools.lru_cache(maxsize=None)
def _kernels() -> Dict[np.dtype, Callable[..., int]]:
    """The C kernel of each element type, found once; empty without a working compiler."""
    handle = kernel_c.optional_library(Path(__file__).with_name("epilogue.c").read_text())
    if handle is None:
        return {}
    kernels: Dict[np.dtype, Callable[..., int]] = {}
    for dtype, suffix in _SUFFIX.items():
        function = getattr(handle, f"axg_bias_relu_{suffix}")
        function.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64] * 2
        function.restype = ctypes.c_int
        kernels[dtype] = function
    return kernels


def available() -> bool:
    """Whether the C kernel runs here (tests monkeypatch this to force the NumPy passes)."""
    return bool(_kernels())


def bias_relu(x: np.ndarray, bias: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``np.maximum(x + bias, 0, out=out)``, the sum never stored apart.

    Parameters
    ----------
    x : np.ndarray
        The values the bias is added to.
    bias : np.ndarray
        Broadcastable to x's shape.
    out : np.ndarray
        x's shape and dtype; x itself or an array not overlapping x or bias.

    Returns
    -------
    np.ndarray
        `out`.
    """
    function = _kernels().get(x.dtype)
    columns = x.shape[-1] if x.ndim else 1
    if (function is not None and x.ndim and x.dtype == bias.dtype == out.dtype
            and x.shape == out.shape and bias.size == columns and bias.ndim <= x.ndim
            and (bias.ndim == 0 or bias.shape[-1] == columns)
            and x.flags.c_contiguous and out.flags.c_contiguous and bias.flags.c_contiguous
            and x.flags.aligned and out.flags.aligned and bias.flags.aligned
            and x.size > 0 and available()):
        if function(x.ctypes.data, bias.ctypes.data, out.ctypes.data, x.size // columns,
                    columns) != 0:
            raise MemoryError("epilogue.bias_relu: out of memory")
        return out
    np.add(x, bias, out=out)
    return np.maximum(out, 0, out=out)
