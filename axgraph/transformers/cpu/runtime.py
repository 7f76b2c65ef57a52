"""Kernels the generated code calls where NumPy has no single `out=` function.

Each writes its result into a caller-given, planned buffer `out`, so a
compiled computation allocates nothing per call for these ops.
"""
from __future__ import annotations

import functools
from typing import Callable, Sequence

import numpy as np

from ... import core
from ...dtypes import kind_of
from ...errors import ExecutionError
from ...op_table import OpTable
from . import batched, blas_threads, parallel
# The indexing ops' out= kernels, called by the generated code as rt.<name>.
from .indexing import gather, scatter_add  # noqa: F401


@functools.lru_cache(maxsize=None)
def reciprocal_of(denominator: Callable) -> Callable:
    """The function writing 1 / denominator(*inputs) into `out`, for an op whose value is
    that (its `numpy_denominator` trait: sigmoid's 1 + exp(-x), four passes in all)."""

    def reciprocal(*inputs: np.ndarray, out: np.ndarray) -> np.ndarray:
        denominator(*inputs, out=out)
        # np.reciprocal is several times slower on float32
        return np.divide(1, out, out=out)

    reciprocal.__name__ = f"reciprocal_of_{getattr(denominator, '__name__', 'denominator')}"
    return reciprocal


#: erf(x) = x + x r(x^2) for |x| < 1, r of degree 12 (coefficients from z^0 up): fitted here
#: to erf(x)/x - 1 (least squares in 50-digit arithmetic, reweighted towards minimax),
#: 1.7e-18 relative in exact arithmetic. r is at most 0.16 in magnitude, so its rounding
#: errors shrink before the final addition.
_ERF_SMALL = tuple(float.fromhex(c) for c in (
    "0x1.06eba8214db69p-3", "-0x1.812746b0379e6p-2", "0x1.ce2f21a042b00p-4",
    "-0x1.b82ce312844eap-6", "0x1.565bcd0dae560p-8", "-0x1.c02db3da09abep-11",
    "0x1.f9a321e50d58ep-14", "-0x1.f4d1e695a224ep-17", "0x1.b9df68bb59d9bp-20",
    "-0x1.5f21db4817983p-23", "0x1.f7dc701a94156p-27", "-0x1.3929fddd26382p-30",
    "0x1.07a67e826c4a7p-34"))
#: erfc(x) e^(x^2) = P(x) / Q(x) for 1 <= x <= 6, both of degree 8, fitted likewise: 2.9e-19
#: relative. Every coefficient is positive, so evaluating them cancels nothing.
_ERFC_P = tuple(float.fromhex(c) for c in (
    "0x1.ffffffe710b19p-1", "0x1.cbcb685d5cbc6p+0", "0x1.98ee83503af1ep+0",
    "0x1.c239c44fb2b98p-1", "0x1.47d3890c420d0p-2", "0x1.3b6e14f409a0fp-4",
    "0x1.764fe941e77e2p-7", "0x1.b0ade8511b7b6p-11", "0x1.8fd1f729bcac4p-40"))
_ERFC_Q = tuple(float.fromhex(c) for c in (
    "0x1.0000000000000p+0", "0x1.76546e6a981e6p+1", "0x1.f2da115a695dap+1",
    "0x1.8d68acf2d1933p+1", "0x1.a04a594288790p+0", "0x1.27b60086c454bp-1",
    "0x1.190a676dcc9fep-3", "0x1.4bb9b5471a514p-6", "0x1.7f73bda6f1ae1p-10"))
#: From here on erf rounds to 1 in float64 (erfc(5.93) < 2^-54): larger |x| is clamped.
_ERF_ONE = 6.0
#: Elements computed at a time: the float64 temporaries stay in the L2 cache.
_ERF_BLOCK = 8192


def _polynomial(coefficients, z: np.ndarray) -> np.ndarray:
    """sum(c[k] z^k) by Horner's rule, in a fresh array."""
    value = np.full_like(z, coefficients[-1])
    for c in coefficients[-2::-1]:
        value *= z
        value += c
    return value


def _erf64(x: np.ndarray) -> np.ndarray:
    """erf of a 1-d float64 array, in a fresh array."""
    result = np.empty_like(x)
    a = np.abs(x)
    small = a < 1.0
    if small.any():
        near = x[small]
        z = np.square(near)
        r = _polynomial(_ERF_SMALL, z)
        r *= near
        r += near
        result[small] = r
    large = ~small
    if large.any():
        far = np.minimum(a[large], _ERF_ONE)  # NaN stays NaN
        complement = _polynomial(_ERFC_P, far)
        complement /= _polynomial(_ERFC_Q, far)
        np.square(far, out=far)
        np.negative(far, out=far)
        complement *= np.exp(far, out=far)
        np.subtract(1.0, complement, out=complement)
        result[large] = np.copysign(complement, x[large], out=complement)
    return result


def erf(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """The error function of float x into out, vectorized: NumPy has none, and the
    reference's math.erf per element took 140 ms per million float64 (this: about 25).

    Below |x| = 1 an odd polynomial, above it 1 - e^(-x^2) P(x)/Q(x) (the method of
    W. J. Cody, with coefficients fitted here), computed in float64 whatever x's type
    and rounded once into out: within 1 ulp of math.erf in float64 (measured over
    [-7, 7], tests/test_erf_numpy.py), and within 0.5 ulp of it in float32. Exact ±0,
    ±1 from |x| = 6 on and at ±inf, NaN for NaN. `out` may be x itself, and x may
    broadcast to out's shape, as a ufunc's input does (a program passes a Broadcast as
    a view of fewer elements: each is computed once per place it lands).
    """
    flat = np.ravel(x if x.shape == out.shape else np.broadcast_to(x, out.shape))
    target = out.reshape(-1) if out.flags.c_contiguous else np.empty(out.size, out.dtype)
    for start in range(0, flat.size, _ERF_BLOCK):
        stop = min(start + _ERF_BLOCK, flat.size)
        target[start:stop] = _erf64(flat[start:stop].astype(np.float64))
    if target.base is not out and target is not out:
        np.copyto(out, target.reshape(out.shape))
    return out


def convert(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """x cast into out's element type."""
    np.copyto(out, x, casting="unsafe")
    return out


#: Elementwise ops the cpu backend computes with a function of its own (`f(x, out)`)
#: instead of the op's reference (its `numpy` trait): the generated programs call it as
#: rt.<name>, the blocked-NumPy kernels by reference. Erf is vectorized here (the
#: reference's math.erf per element is the slow, obviously right one); a Convert's type
#: is its `out`'s.
OWN_FUNCTIONS: OpTable[Callable] = OpTable("cpu runtime function",
                                           {core.Convert: convert, core.Erf: erf})


def copy(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """x's elements in row-major order written into out (a Reshape that must copy)."""
    np.copyto(out.reshape(x.shape), x)
    return out


def pad(x: np.ndarray, below: Sequence[int], interior: Sequence[int], value,
        out: np.ndarray) -> np.ndarray:
    """x surrounded by (and interleaved with) `value`, written into out."""
    out.fill(value)
    region = tuple(slice(lo, lo + (n - 1) * (gap + 1) + 1 if n else lo, gap + 1)
                   for lo, gap, n in zip(below, interior, x.shape))
    out[region] = x
    return out


def arg_reduce(x: np.ndarray, axes: Sequence[int], pick_max: bool, out: np.ndarray) -> np.ndarray:
    """Index of the extreme over `axes`, counted row-major over them in the order given."""
    kept = [i for i in range(x.ndim) if i not in axes]
    moved = np.transpose(x, kept + list(axes))
    flat = moved.reshape(moved.shape[:len(kept)] + (-1,))
    index = np.argmax(flat, axis=-1) if pick_max else np.argmin(flat, axis=-1)
    np.copyto(out, index, casting="unsafe")
    return out


def softmax(x: np.ndarray, axes: Sequence[int], out: np.ndarray) -> np.ndarray:
    """exp(x - max) / sum, over `axes`, computed in out."""
    axes = tuple(axes)
    np.subtract(x, np.max(x, axis=axes, keepdims=True), out=out)
    np.exp(out, out=out)
    out /= np.sum(out, axis=axes, keepdims=True)
    return out


def one_hot_positions(count: int, axis: int, rank: int) -> np.ndarray:
    """0..count-1 along `axis` of a rank-`rank` array (what one_hot compares against)."""
    return np.arange(count).reshape([-1 if i == axis else 1 for i in range(rank)])


def one_hot(x: np.ndarray, positions: np.ndarray, expanded: Sequence[int],
            out: np.ndarray) -> np.ndarray:
    """out[..., i, ...] = (x == i) along the axis `positions` runs on (x viewed with the
    `expanded` shape: a 1 there); values outside [0, n) or not whole raise."""
    if x.size:
        if kind_of(x.dtype) == "f" and not np.all(np.isfinite(x) & (x == np.round(x))):
            raise ExecutionError("one-hot values must be whole numbers")
        low, high = x.min(), x.max()
        if low < 0 or high >= positions.size:
            raise ExecutionError(f"one-hot values must lie in [0, {positions.size}); got "
                                 f"{low}..{high}")
    np.equal(x.reshape(expanded), positions, out=out, casting="unsafe")
    return out


#: Stacks of products with fewer multiply-adds than this run on the calling thread: handing
#: part of the stack to a pool thread costs tens of microseconds (an attention layer's
#: per-head products at T 32 take about that in all).
BATCHED_SPLIT_MIN = 1 << 20


def batched_matmul(left: np.ndarray, right: np.ndarray, out: np.ndarray) -> np.ndarray:
    """np.matmul over stacks (batch..., m, k) x (batch..., k, n) into `out`.

    Small products run in batched.py's C kernel. Where it declines, np.matmul: the first
    batch dim split over the worker threads (stacks of at least `BATCHED_SPLIT_MIN`
    multiply-adds), each product on one BLAS thread (blas_threads says why). Either way
    the split is by whole products, so the values do not depend on the thread count."""
    if batched.matmul(left, right, out):
        return out

    def product(worker: int, lo: int, hi: int) -> None:
        np.matmul(left[lo:hi], right[lo:hi], out=out[lo:hi])

    with blas_threads.single_threaded():
        if out.size * left.shape[-1] < BATCHED_SPLIT_MIN:
            return np.matmul(left, right, out=out)
        parallel.share(product, out.shape[0])
    return out
