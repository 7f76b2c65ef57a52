"""Stacks of small matrix products (attention's per-head products) in one C call.

Why: np.matmul on a stack runs one BLAS call per product, and each costs more
to set up than a 32 x 16 x 32 product takes to compute (the transformer block's
attention heads: 32 such products took 14 us in np.matmul on one BLAS thread,
6.6 us here on one thread of AVX-512). The C kernel (batched.c) computes the
whole stack in register tiles through any strides (the heads' transposed views
are read in place), the threads splitting large stacks by whole products. It runs
where the kernels are built with AVX-512 (`MIN_VECTOR_BYTES` says why).

Why the arrays themselves go to C: addressing three arrays through
``array.ctypes.data`` and passing their shapes and strides as ctypes arguments
cost about 4 us a call, as much as the products. C reads them from NumPy's
array struct instead, at byte offsets checked here against NumPy's own answers
when the kernel loads (the layout native_step.py relies on as well); where they
differ, no kernel runs. C declines (and `matmul` runs np.matmul) where the
kernel does not apply: see batched.c. Its results differ from BLAS's only by
rounding (no fused multiply-adds, and each sum taken in k order).
"""
from __future__ import annotations

import ctypes
import functools
from pathlib import Path
from typing import Callable, Dict, Optional, Tuple

import numpy as np

from . import kernel_c, native_step

_SUFFIX: Dict[np.dtype, str] = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}
#: The kernel runs only where it is built with vectors this wide (AVX-512's). Built for
#: AVX2 (x86-64-v3) it at best matched one-thread OpenBLAS (32 x 32 x 32 products), fell
#: behind past that, and left the transformer block's training step no faster (2.03 ms
#: either way; a transposed right operand, packed element by element there: 49 us a
#: stack against BLAS's 29).
MIN_VECTOR_BYTES = 64


def array_fields() -> Optional[Tuple[int, int, int, int, int]]:
    """(data, nd, dimensions, strides, flags) byte offsets in NumPy's array struct, or
    None where they cannot be trusted (`native_step.struct_offsets` checks them)."""
    at = native_step.struct_offsets()
    return None if at is None else (at.data, at.ndim, at.dims, at.strides, at.flags)


def source() -> str:
    """The kernel's C text (batched.c)."""
    return Path(__file__).with_name("batched.c").read_text()


@functools.lru_cache(maxsize=None)
def _kernels() -> Dict[np.dtype, Callable[..., int]]:
    """The C kernel of each element type; empty without a compiler or a known layout."""
    fields = array_fields()
    if fields is None:
        return {}
    handle = kernel_c.optional_library(source())
    if handle is None:
        return {}
    width = handle.axg_batched_vector_bytes
    width.restype = ctypes.c_int64
    if width() < MIN_VECTOR_BYTES:
        return {}
    layout = handle.axg_batched_layout
    layout.argtypes = [ctypes.c_int64] * 5
    layout.restype = None
    layout(*fields)
    kernels: Dict[np.dtype, Callable[..., int]] = {}
    for dtype, suffix in _SUFFIX.items():
        function = getattr(handle, f"axg_batched_{suffix}")
        function.argtypes = [ctypes.py_object] * 3
        function.restype = ctypes.c_int
        kernels[dtype] = function
    return kernels


def available() -> bool:
    """Whether the C kernel runs here: a compiler, NumPy's struct as checked, and AVX-512
    vectors in the build (tests monkeypatch this to force np.matmul)."""
    return bool(_kernels())


def matmul(left: np.ndarray, right: np.ndarray, out: np.ndarray) -> bool:
    """out[b] = left[b] @ right[b] over the leading (batch) dims, in C where it applies.

    Parameters
    ----------
    left, right : np.ndarray
        (batch..., m, k) and (batch..., k, n) stacks of any strides.
    out : np.ndarray
        The (batch..., m, n) result.

    Returns
    -------
    bool
        Whether the kernel wrote `out` (False: nothing was written, run np.matmul).
    """
    function = _kernels().get(out.dtype)
    return (function is not None and type(left) is type(right) is type(out) is np.ndarray
            and left.dtype == out.dtype and right.dtype == out.dtype and available()
            and function(left, right, out) == 0)
