"""Large matrix products of the cpu backend: its own kernel where it beats BLAS, else
BLAS in fixed parts that the worker threads share.

Why the kernel: the OpenBLAS that NumPy loads may run its AVX2 (Haswell) kernels on a CPU
with full-width AVX-512 units (``OPENBLAS_CORETYPE=Haswell``, or a CPU its
build does not know), which halves the multiply-adds per cycle. The
convolutions' products (LeNet's second conv: 4096 x 500 x 50, three per
step) measured 2.2 ms there against 1.2 ms for OpenBLAS's AVX-512 kernel; this
kernel (gemm.c) is blocked for the caches like those and reads its operands
through any strides, so transposed views need no copy either. And it runs on the
OpenMP team, where BLAS runs on one thread inside a step (below): on AVX2 builds
(``AXGRAPH_MARCH=x86-64-v3``, or an AVX2 machine) the 784-512-512-10 MLP's
training step took 2.2x eager PyTorch's time with BLAS in parts, 1.2x with the
kernel.

It runs where the kernels are built with AVX-512 or with AVX2 and FMA (the same
bits from both), for float32 products of at least `MIN_MULTIPLY_ADDS` (small
products stay with BLAS, whose call costs less), and where every operand's strides
are whole, aligned elements.

Why the parts: OpenBLAS runs on one thread inside a step (parallel.py: its spinning
workers held the core the OpenMP kernels waited for), so a large product the kernel
does not take (float64, short sums, builds without AVX2) is cut into `PARTS` blocks of
rows (of columns where the rows are few), one BLAS call each, which the pool's workers
share. The cut depends on the shape alone, so the values do not depend on the thread
count. Elsewhere `matmul` is ``np.matmul``. Results differ from one BLAS call's only by
the rounding of a different summation order.
"""
from __future__ import annotations

import ctypes
import functools
from pathlib import Path
from typing import Any, List, Optional, Tuple

import numpy as np

from . import blas_threads, kernel_c, parallel

#: Products with fewer multiply-adds than this go to BLAS. From about a million the kernel
#: is ahead even on one thread (an attention block's projections, 256 x 64 x 192: 38 us
#: against OpenBLAS's Haswell kernels' 53, both on one thread), and it shares the OpenMP
#: team where BLAS runs on one thread inside a step.
MIN_MULTIPLY_ADDS = 1 << 20
#: Nor do products summing fewer terms (each register tile is stored after its k
#: loop: short loops spend their time storing), or with fewer (rows x columns) than
#: a few tiles (8 x 32 each; edges are computed padded).
MIN_DEPTH, MIN_OUTPUT = 32, 1 << 10
#: BLAS products of at least PARTS_MIN_MULTIPLY_ADDS are cut into up to this many blocks of
#: rows (or, where the rows are too few, of columns) of at least PART_MIN each.
PARTS, PART_MIN, PARTS_MIN_MULTIPLY_ADDS = 4, 32, 1 << 22


@functools.lru_cache(maxsize=None)
def _kernel() -> Optional[ctypes._CFuncPtr]:  # type: ignore[name-defined]
    """The C kernel, or None without a compiler or without AVX-512 or AVX2 in the build."""
    handle = kernel_c.optional_library(Path(__file__).with_name("gemm.c").read_text())
    if handle is None or not handle.axg_gemm_available():
        return None
    function = handle.axg_gemm_f32
    operand: List[Any] = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
    function.argtypes = [ctypes.c_int64] * 3 + operand * 4 + [ctypes.c_int]
    function.restype = ctypes.c_int
    return function


def available() -> bool:
    """Whether the kernel runs here (an AVX-512 or AVX2 build; tests monkeypatch this to
    force BLAS)."""
    return _kernel() is not None


def suits(m: int, k: int, n: int, dtype) -> bool:
    """Whether an (m, k) x (k, n) product of `dtype` runs in the kernel here."""
    return (np.dtype(dtype) == np.float32 and m * n * k >= MIN_MULTIPLY_ADDS
            and k >= MIN_DEPTH and m * n >= MIN_OUTPUT and available())


def parts(m: int, k: int, n: int, dtype) -> Optional[List[Tuple[slice, slice]]]:
    """The (rows, columns) of the output whose BLAS calls an (m, k) x (k, n) product of
    `dtype` is cut into (blocks of rows, or of columns where the rows are too few: a
    weight gradient's few output rows), or None where it is one call."""
    if np.dtype(dtype) not in (np.float32, np.float64) or m * n * k < PARTS_MIN_MULTIPLY_ADDS:
        return None
    for length, along_rows in ((m, True), (n, False)):
        count = min(PARTS, length // PART_MIN)
        if count >= 2:
            cuts = [length * i // count for i in range(count + 1)]
            blocks = [slice(lo, hi) for lo, hi in zip(cuts[:-1], cuts[1:])]
            return [(block, slice(None)) if along_rows else (slice(None), block)
                    for block in blocks]
    return None


def takes(m: int, k: int, n: int, dtype) -> bool:
    """Whether `matmul` computes an (m, k) x (k, n) product of `dtype` otherwise than one
    np.matmul call (in the kernel, or in parts)."""
    return suits(m, k, n, dtype) or parts(m, k, n, dtype) is not None


def _in_parts(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> np.ndarray:
    """np.matmul(a, b, out=out) as the BLAS calls of `parts`, shared by the workers."""
    same = a.dtype == b.dtype == out.dtype
    ranges = parts(a.shape[0], a.shape[1], b.shape[1], a.dtype) if same else None
    if ranges is None:
        return np.matmul(a, b, out=out)

    def product(worker: int, first: int, last: int) -> None:
        for rows, columns in ranges[first:last]:
            np.matmul(a[rows], b[:, columns], out=out[rows, columns])

    # each call on one BLAS thread (a step runs BLAS so already; a lone call may not):
    # OpenBLAS's threads would round some products otherwise
    with blas_threads.single_threaded():
        parallel.share(product, len(ranges))
    return out


def _strides(x: np.ndarray) -> Optional[Tuple[int, int]]:
    """x's 2 strides in elements, or None where they are not whole, aligned elements."""
    rows, columns = x.strides
    size = x.itemsize
    if rows % size or columns % size or not x.flags.aligned:
        return None
    return rows // size, columns // size


def _broadcast_strides(x: np.ndarray, shape: Tuple[int, int]) -> Optional[Tuple[int, int]]:
    """The strides in elements of x broadcast to the 2-d `shape` (0 along a dim of length
    1: a bias row), or None where it does not broadcast so or its strides are not whole
    elements."""
    if x.ndim != 2 or any(have not in (1, want) for have, want in zip(x.shape, shape)):
        return None
    strides = _strides(x)
    if strides is None:
        return None
    rows, columns = strides
    return (0 if x.shape[0] == 1 else rows), (0 if x.shape[1] == 1 else columns)


def matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray,
           addend: Optional[np.ndarray] = None, relu: bool = False) -> np.ndarray:
    """a (m, k) @ b (k, n) into out (m, n), as np.matmul(a, b, out=out); plus `addend`
    where given, as np.add(product, addend, out=out) after it; then, with `relu`, as
    np.maximum(out, 0, out=out).

    Why the addend and the ReLU: a dense layer's bias and activation, applied as the
    kernel stores its last block of sums, save a pass over the output each (every
    element rounded as the separate ops round it; a NaN or -0.0 kept as np.maximum
    keeps it).

    Parameters
    ----------
    a, b : np.ndarray
        2-d operands of any strides.
    out : np.ndarray
        The (m, n) result, not overlapping `a`, `b` or `addend`.
    addend : np.ndarray, optional
        A term of out's dtype that broadcasts to (m, n) (a bias row: (1, n)), any strides.
    relu : bool
        Whether out gets max(x, 0) of each element (after the addend).

    Returns
    -------
    np.ndarray
        `out`.
    """
    m, k = a.shape
    n = b.shape[1]
    dtype = a.dtype
    if b.shape[0] != k or out.shape != (m, n):
        return np.matmul(a, b, out=out)  # (NumPy's error)
    kernel = dtype == b.dtype == out.dtype and suits(m, k, n, dtype) and \
        (addend is None or addend.dtype == dtype)
    ars, bs, cs = (_strides(a), _strides(b), _strides(out)) if kernel else (None, None, None)
    ts = (0, 0) if addend is None else _broadcast_strides(addend, (m, n))
    if ars is None or bs is None or cs is None or ts is None:
        _in_parts(a, b, out)
        if addend is not None:
            np.add(out, addend, out=out)
        return np.maximum(out, out.dtype.type(0), out=out) if relu else out
    address = kernel_c.address
    if _kernel()(m, n, k, address(a), *ars, address(b), *bs,  # type: ignore[misc]
                 address(out), *cs, None if addend is None else address(addend), *ts,
                 int(relu)) != 0:
        raise MemoryError("gemm.matmul: out of memory")
    return out
