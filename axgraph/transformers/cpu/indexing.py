"""Gather and ScatterAdd (an embedding and its gradient) into `out`s of any dense layout.

Gather: the memory planner may lay a gather's buffer out transposed (when its one
reader is a Transpose, which is then a row-major view: the char transformer's
token embedding, read as (D, T, N) by everything after it). `np.take` into such
a strided `out` buffers and scatters element by element (~0.8 ms for 2048 rows
of 128); taking from the table's dims permuted alike into the `out` seen in its
memory order writes it in one sequential pass.

ScatterAdd: NumPy's `np.add.at`, which the reference's kernel uses, adds one element
at a time through a generic indexed loop: for the char transformer's token
embedding (2048 rows of 128 floats into a 103-row table) it took ~1.8 ms a step,
about 3% of the whole training step; this loop takes a few tens of microseconds.

Semantics are the reference's, to the bit: `out` starts as a copy of `inputs`,
and every element of it receives its updates in ascending index-position order
(the order `np.add.at` adds them in), whichever loop order runs. The indices are
checked first, with the reference's error.

The loop reads `updates` in place through its strides (a transposed view of a
planned buffer costs no copy): lanes (the dims beside the indexed one) innermost
when they are the shorter jump in memory, else the index positions innermost.
Operands whose dims cannot be merged into one run of index positions and one
of lanes, element types other than float32/float64, or a machine without a C
compiler take the reference's kernel.
"""
from __future__ import annotations

import ctypes
import functools
from typing import Optional, Sequence, Tuple

import numpy as np

from ...core import interpreter
from . import kernel_c
from .group import memory_order

#: The element types built, by the suffix of their symbols.
_SUFFIX = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}

_PER_TYPE = r"""
int axg_scatter_add_@S@(int64_t n, int64_t lanes, const int64_t* index, const @T@* updates,
                        int64_t step, int64_t lane_step, @T@* out, int64_t row_step,
                        int64_t out_lane_step)
{
    /* every out element gets its terms in ascending position order in both loop orders */
    if (lane_step < 0 ? -lane_step <= (step < 0 ? -step : step)
                      : lane_step <= (step < 0 ? -step : step)) {
        for (int64_t i = 0; i < n; ++i) {
            @T@* const row = out + index[i] * row_step;
            const @T@* const from = updates + i * step;
            for (int64_t m = 0; m < lanes; ++m) row[m * out_lane_step] += from[m * lane_step];
        }
    } else {
        for (int64_t m = 0; m < lanes; ++m) {
            @T@* const column = out + m * out_lane_step;
            const @T@* const from = updates + m * lane_step;
            for (int64_t i = 0; i < n; ++i) column[index[i] * row_step] += from[i * step];
        }
    }
    return 0;
}
"""


def source() -> str:
    """The whole C text (fixed, so its disk-cache key never changes between runs)."""
    return "#include <stdint.h>\n" + "".join(
        _PER_TYPE.replace("@T@", ctype).replace("@S@", suffix)
        for ctype, suffix in (("float", "f32"), ("double", "f64")))


@functools.lru_cache(maxsize=None)
def _library() -> Optional[ctypes.CDLL]:
    """The built loops (compiled on first use, then from the disk cache); None without C."""
    return kernel_c.optional_library(source())


@functools.lru_cache(maxsize=None)
def _function(suffix: str):
    function = getattr(_library(), f"axg_scatter_add_{suffix}")
    function.argtypes = [ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p,
                         ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64,
                         ctypes.c_int64]
    function.restype = ctypes.c_int
    return function


def gather(params: np.ndarray, indices: np.ndarray, axis: int, out: np.ndarray) -> np.ndarray:
    """`out` = the slices of params along `axis` picked by indices (the reference's
    `interpreter.gather`), written in `out`'s memory order where the index dims lie
    together in it (else by `np.take` into `out` as it is)."""
    order = memory_order(out)
    k = indices.ndim
    if order is None or out.flags.c_contiguous:
        return interpreter.gather(params, indices, axis, out=out)
    first = order.index(axis) if k else -1
    if k == 0 or tuple(order[first:first + k]) != tuple(range(axis, axis + k)):
        return interpreter.gather(params, indices, axis, out=out)
    # each out dim in memory order, as the params dim it comes from (the index dims: axis)
    picked = [d if d < axis else axis if d < axis + k else d - k + 1
              for d in order[:first] + order[first + k - 1:]]
    interpreter.check_indices(indices, params.shape[axis], "indices")
    # mode="clip" cannot clip after the check; it only spares np.take a buffered copy
    np.take(params.transpose(picked), indices, axis=picked.index(axis),
            out=out.transpose(order), mode="clip")
    return out


def merged(shape: Sequence[int], strides: Sequence[int], itemsize: int
           ) -> Optional[Tuple[int, int]]:
    """(length, element stride) of `shape`'s dims walked in row-major order as one run,
    or None when they do not form one (or a stride is not whole elements)."""
    length, stride = 1, 0
    for n, s in zip(shape, strides):
        if n == 1:
            continue
        if s % itemsize:
            return None
        if length == 1:
            length, stride = n, s // itemsize
        elif stride == n * (s // itemsize):
            length, stride = length * n, s // itemsize
        else:
            return None
    return length, stride


def scatter_add(inputs: np.ndarray, indices: np.ndarray, updates: np.ndarray, axis: int,
                out: np.ndarray) -> np.ndarray:
    """`out` = inputs with each update added at its index along `axis` (repeats accumulate):
    the reference's `interpreter.scatter_add`, run as a C loop where the operands allow."""
    dtype = out.dtype
    if (dtype not in _SUFFIX or updates.dtype != dtype or inputs.dtype != dtype
            or updates.size == 0 or _library() is None or np.may_share_memory(updates, out)):
        return interpreter.scatter_add(inputs, indices, updates, axis, out=out)
    k = indices.ndim
    target = np.moveaxis(out, axis, 0)
    moved = np.moveaxis(updates, list(range(axis, axis + k)), list(range(k)))
    item = dtype.itemsize
    rows = merged(target.shape[:1], target.strides[:1], item)
    lanes = merged(target.shape[1:], target.strides[1:], item)
    positions = merged(moved.shape[:k], moved.strides[:k], item)
    lanes_in = merged(moved.shape[k:], moved.strides[k:], item)
    if None in (rows, lanes, positions, lanes_in) or out.ctypes.data % item or \
            updates.ctypes.data % item:
        return interpreter.scatter_add(inputs, indices, updates, axis, out=out)
    interpreter.check_indices(indices, out.shape[axis], "indices")
    np.copyto(out, inputs)
    index = np.ascontiguousarray(indices, dtype=np.int64).reshape(-1)
    assert rows is not None and lanes is not None and positions is not None \
        and lanes_in is not None  # checked above
    _function(_SUFFIX[dtype])(positions[0], lanes[0], index.ctypes.data, moved.ctypes.data,
                              positions[1], lanes_in[1], target.ctypes.data, rows[1],
                              lanes[1])
    return out
