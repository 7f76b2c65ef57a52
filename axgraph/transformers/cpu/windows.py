"""Windowed core ops (Im2Col, Col2Im, pools and their adjoints) as `out=` C kernels.

Why: the interpreter's NumPy kernels (``interpreter.columns``, ``uncolumns``,
``_pool``, ``_max_pool_backprop``, ``_avg_pool_backprop``) loop over window
offsets in Python, pad and allocate on every call. These kernels write the
caller's `out` in one pass, reading every operand through its own element
strides, so the layouts the memory planner picks (a (N, C, H, W) view of an
NHWC buffer, reversed or broadcast inputs, a transposed `out`) cost no copy.

Semantics are the reference's, to the bit:

* max pool: ``np.maximum`` folded over the window in row-major offset order
  (the first NaN wins; ties take the later value, so -0 vs +0 follows it);
  padding (the reference's -inf) is skipped: only an all-padding window
  notices, and gets -inf.
* max-pool adjoint: each delta goes to the first position in window order
  equal to the window's max; padding counts as -inf there, so an all -inf
  window whose first offset is padding sends nothing, and a window with a
  NaN sends nothing. The reference adds ``delta * hit``, so a non-finite
  delta also puts NaN (``delta * 0``) on the rest of its window; so do these.
* average pool: the sum in the input type in window order, divided by the
  number of real inputs (-0 only without padding, as the padded sum is).
* scatter-adds (col2im, both adjoints): every input element receives its
  terms in ascending window-offset order, as the reference adds them (the
  output positions are walked in reverse, which is that order for any one
  element), so even overlapping windows round identically.

Speed: the inner loops run over a "lane" dim: the positions along the last
spatial dim, or the channels where they are closer in memory (NHWC data;
for im2col/col2im, columns that keep a position's channels together, which
then stream in memory order; pools over images whose batch is innermost in
memory swap N and C, as every (n, c) plane is pooled alike, and run with the
batch as lanes). Pools compute blocks of
8 (f32) or 4 (f64) lanes in registers with GCC/clang vector extensions; the max uses the x86
max instruction (exactly np.maximum without NaN) and lanes that met a NaN
are redone one by one. Where windows tile (never overlap), the adjoints store
``0 + term`` straight into the zeroed `out` instead of read-modify-writes.
Threads (OpenMP) split the (n, c) planes, or (n, channel block) planes in
lane mode, and only past ~64K elements so that small calls do not wake the
other core; a plane's scatter-adds stay in the plane, so no two threads
write the same element. The geometry of a call is prepared once per
(op, shapes, strides) and cached.

Callers must pass an `out` that does not overlap the inputs (it is zeroed
first by the adjoints); inputs may overlap each other or be broadcast.

Without a C compiler, for dtypes other than float32/float64, for more than
three spatial dims, or for operands whose strides are not whole elements
(or unaligned), the interpreter's NumPy kernels run instead and their
result is copied into `out`.
"""
from __future__ import annotations

import ctypes
import functools
import math
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

import numpy as np

from ... import core
from ...core import interpreter
from . import kernel_c

Ints = Sequence[int]

#: The dtypes the C kernels are built for, by the suffix of their symbols.
_SUFFIX = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}
#: Spatial dims the C kernels take; fewer are padded with size-1 dims in front.
_MAX_SPATIAL = 3

#: (C type, symbol suffix, vector type, mask type, lanes per vector) of each build.
_TYPES = (
    ("float", "f32", "vf32", "vm32", "8"),
    ("double", "f64", "vf64", "vm64", "4"),
)


def source() -> str:
    """The whole C text (fixed, so the disk cache key never changes between runs):
    windows.c's shared part, then its per-type part once per element type."""
    shared, per_type = (Path(__file__).with_name("windows.c").read_text()
                        .split("/* ==== PER-TYPE ==== */\n"))
    return shared + "".join(
        per_type.replace("@T@", ctype).replace("@S@", suffix).replace("@V@", vector)
        .replace("@M@", mask).replace("@L@", lanes)
        for ctype, suffix, vector, mask, lanes in _TYPES)


@functools.lru_cache(maxsize=None)
def _library() -> Optional[ctypes.CDLL]:
    """The built kernels (compiled on first use, then from the disk cache); None without C."""
    return kernel_c.optional_library(source())


def _use_c() -> bool:
    """Whether the C kernels run (tests monkeypatch this to force the NumPy fallback)."""
    return _library() is not None


@functools.lru_cache(maxsize=None)
def _function(name: str, suffix: str):
    function = getattr(_library(), f"axg_{name}_{suffix}")
    function.argtypes = [ctypes.c_void_p] * 4
    function.restype = ctypes.c_int
    return function


# -- geometry --------------------------------------------------------------------------------

def positions(spatial: Ints, window: Ints, strides: Ints, dilation: Ints, below: Ints,
              above: Ints) -> Tuple[int, ...]:
    """Output positions per spatial dim: (S + below + above - (d*(w-1)+1)) // s + 1."""
    return tuple((n + b + a - (d * (w - 1) + 1)) // s + 1
                 for n, w, s, d, b, a in zip(spatial, window, strides, dilation, below, above))


def _check(what: str, got: Tuple[int, ...], want: Tuple[int, ...]) -> None:
    if tuple(got) != tuple(want):
        raise ValueError(f"{what} has shape {tuple(got)}, expected {tuple(want)}")


def _check_image(what: str, shape: Tuple[int, ...], window: Ints, *geometry: Ints) -> None:
    """An image must be (N, C, S...) with one S per window dim, like every geometry tuple."""
    if len(shape) != 2 + len(window) or any(len(g) != len(window) for g in geometry):
        raise ValueError(f"{what} has shape {tuple(shape)}: expected (N, C) and "
                         f"{len(window)} spatial dims, one per window dim")


Layout = Tuple[Tuple[int, ...], Tuple[int, ...]]  # an operand's (shape, byte strides)


def _element_strides(layout: Layout, itemsize: int) -> Optional[List[int]]:
    """Strides in elements; None if one is not a whole number of elements."""
    strides = layout[1]
    if any(s % itemsize for s in strides):
        return None
    return [s // itemsize for s in strides]


def _channel_lanes(layout: Layout) -> bool:
    """Whether channels are the cheaper dim to vectorize over (e.g. NHWC memory).

    The inner loops run along the lane dim; with the channel stride smaller
    than the last spatial one (a (N, C, H, W) view of an NHWC buffer) they
    read consecutive memory when the lanes are the channels.
    """
    shape, strides = layout
    return shape[1] >= 4 and abs(strides[1]) < abs(strides[-1])


def _batch_lanes(layout: Layout) -> bool:
    """Whether a pool should vectorize over the batch: its stride is the smallest.

    Pools treat every (n, c) plane alike, so the batch and channel dims may
    trade places; with images laid out batch-innermost ((C, H, W, N) buffers
    seen as (N, C, H, W)) the swapped batch then serves as the lane dim.
    """
    shape, strides = layout
    return shape[0] >= 4 and abs(strides[0]) < min(abs(strides[1]), abs(strides[-1]))


#: The pools' operands of image size (by index in (first, second, out)): where their
#: batch is innermost, the pool runs with the batch as its lanes.
_IMAGES = {"max_pool": (0,), "avg_pool": (0,), "max_pool_backprop": (0, 2),
           "avg_pool_backprop": (2,)}


def _swap_batch_and_channels(image: Tuple[int, ...], layouts: Tuple[Optional[Layout], ...]
                             ) -> Tuple[Tuple[int, ...], tuple]:
    """`image` and every operand's layout with dims 0 and 1 (N and C) exchanged."""
    def swap(values):
        return (values[1], values[0]) + tuple(values[2:])

    return swap(image), tuple(None if x is None else (swap(x[0]), swap(x[1])) for x in layouts)


def _columns_by_position(layout: Layout, nd: int) -> bool:
    """Whether columns (N, P..., C, R...) keep a position's channels (4 or more) together.

    Then im2col/col2im run with the channels as lanes, walking the positions
    in the outer loops, and the columns are read or written in memory order.
    """
    shape, strides = layout
    return shape[1 + nd] >= 4 and abs(strides[1 + nd]) < abs(strides[nd])


def _channel_blocks(batch: int, channels: int) -> int:
    """Channel blocks per image in lane mode: enough planes for the threads (small N)."""
    for blocks in range(1, channels + 1):
        if batch * blocks >= 4 or channels // blocks < 8:
            break
    while channels % blocks:
        blocks -= 1
    return blocks


def _operand(strides: List[int], kind: str, nd: int, lanes: bool, block: int) -> List[int]:
    """The C `geometry` strides of an operand: 2 plane strides, then 4 dims (or 4 + 4).

    kind "image": (N, C, S...); kind "columns": (N, P..., C, R...). Missing
    dims (stride 0) go in front. In lane mode the channel is dim 3 and a
    plane is a block of `block` channels; else a plane is one channel.
    """
    pad = [0] * (_MAX_SPATIAL - nd)
    n = strides[0]
    if kind == "image":
        c, spatial = strides[1], strides[2:]
        if lanes:
            return [n, c * block] + pad + spatial + [c]
        return [n, c, 0] + pad + spatial
    points, c, offsets = strides[1:1 + nd], strides[1 + nd], strides[2 + nd:]
    if lanes:
        return [n, c * block] + pad + points + [c] + pad + offsets + [0]
    return [n, c, 0] + pad + points + [0] + pad + offsets


@functools.lru_cache(maxsize=1024)
def _plan(name: str, columns: str, dtypes: Tuple[np.dtype, ...], image: Tuple[int, ...],
          points: Tuple[int, ...], window: Tuple[int, ...], strides: Tuple[int, ...],
          dilation: Tuple[int, ...], below: Tuple[int, ...],
          layouts: Tuple[Layout, Optional[Layout], Layout]):
    """The kernel and its `geometry` for operands laid out as `layouts`, built once.

    None means the C kernels cannot take these operands (use the fallback);
    (None, None) that there is nothing to compute (an empty `out`).
    """
    first, second, out = layouts
    suffix = _SUFFIX.get(dtypes[-1])
    nd = len(window)
    if (suffix is None or any(dtype != dtypes[-1] for dtype in dtypes)
            or not 1 <= nd <= _MAX_SPATIAL or math.prod(window) >= 2 ** 31):
        return None
    itemsize = dtypes[-1].itemsize
    element = [_element_strides(x, itemsize) if x is not None else [0] * (2 + nd)
               for x in layouts]
    if any(e is None for e in element):
        return None
    if math.prod(out[0]) == 0:
        return None, None
    batch, channels = image[0], image[1]
    if columns:
        lanes = _columns_by_position(first if columns == "first" else out, nd)
    else:
        lanes = _channel_lanes(out if name == "avg_pool_backprop" else first)
    block = channels // _channel_blocks(batch, channels) if lanes else 1
    kinds = ["columns" if columns == "first" else "image", "image",
             "columns" if columns == "out" else "image"]
    a, b, o = (_operand(e, kind, nd, lanes, block)  # type: ignore[arg-type]  # no None left
               for e, kind in zip(element, kinds))
    a, b, o = (x + [0] * (10 - len(x)) for x in (a, b, o))

    def dims(values: Ints, fill: int, lane: int) -> List[int]:
        front = [fill] * (_MAX_SPATIAL - nd) + [int(v) for v in values]
        return front + [lane] if lanes else [fill] + front

    planes = [batch * (channels // block), channels // block] if lanes else \
             [batch * channels, channels]
    fields = (planes + dims(image[2:], 1, block) + dims(points, 1, block)
              + dims(window, 1, 1) + dims(strides, 1, 1) + dims(dilation, 1, 1)
              + dims(below, 0, 0) + a + b + o)
    return _function(name, suffix), (ctypes.c_int64 * len(fields))(*fields)


def _run_c(name: str, first: np.ndarray, second: Optional[np.ndarray], out: np.ndarray,
           image: Tuple[int, ...], points: Tuple[int, ...], window: Ints, strides: Ints,
           dilation: Ints, below: Ints, columns: str = "") -> bool:
    """Run C kernel `name` if the operands allow it; False means: use the fallback.

    `image` is the (N, C, S...) shape, `points` the output positions P...;
    `columns` names the operand ("first" or "out") in (N, P..., C, R...)
    layout, if any; the others are images (N, C, S...) or pooled (N, C, P...).
    """
    if not _use_c():
        return False
    arrays = (first, out) if second is None else (first, second, out)
    if not all(x.flags.aligned for x in arrays):  # the C code reads typed pointers
        return False
    layouts = ((first.shape, first.strides),
               None if second is None else (second.shape, second.strides),
               (out.shape, out.strides))
    images = [layouts[i] for i in _IMAGES.get(name, ())] if not columns else []
    if images and all(x is not None and _batch_lanes(x) for x in images):
        image, layouts = _swap_batch_and_channels(tuple(image), layouts)
    plan = _plan(name, columns, tuple(x.dtype for x in arrays), tuple(image), tuple(points),
                 tuple(window), tuple(strides), tuple(dilation), tuple(below), layouts)
    if plan is None:
        return False
    function, geometry = plan
    if function is None:
        return True
    status = function(first.ctypes.data, None if second is None else second.ctypes.data,
                      out.ctypes.data, ctypes.addressof(geometry))
    if status != 0:
        raise MemoryError(f"windows.{name}: out of memory")
    return True


# -- the NumPy fallback ------------------------------------------------------------------------

def _reference(node: core.Node, *arrays: np.ndarray) -> np.ndarray:
    """The interpreter's kernel of `node` (its inputs are the Parameters `arrays` fill)."""
    context = interpreter.Context({}, {})
    return interpreter.find_kernel(type(node))(node, context, *arrays)


def _parameter(array: np.ndarray) -> core.Parameter:
    return core.Parameter(core.element_type(array.dtype), array.shape)


def _pool_attributes(strides: Ints, below: Ints, above: Ints) -> dict:
    return dict(strides=tuple(strides), padding_below=tuple(below), padding_above=tuple(above))


# -- the public kernels ------------------------------------------------------------------------

def im2col(x: np.ndarray, window: Ints, strides: Ints, dilation: Ints, below: Ints,
           above: Ints, out: np.ndarray) -> np.ndarray:
    """Columns of x (N, C, S...) into out (N, P..., C, R...); padding reads as 0."""
    x = np.asarray(x)
    _check_image("im2col x", x.shape, window, strides, dilation, below, above)
    points = positions(x.shape[2:], window, strides, dilation, below, above)
    _check("im2col out", out.shape, (x.shape[0],) + points + (x.shape[1],) + tuple(window))
    if not _run_c("im2col", x, None, out, x.shape, points, window, strides, dilation, below,
                  columns="out"):
        interpreter.columns(x, window, strides, dilation, below, above, points, out=out)
    return out


def col2im(cols: np.ndarray, window: Ints, strides: Ints, dilation: Ints, below: Ints,
           above: Ints, out: np.ndarray) -> np.ndarray:
    """Im2col's adjoint: cols (N, P..., C, R...) summed into out (N, C, S...), padding dropped."""
    cols = np.asarray(cols)
    _check_image("col2im out", out.shape, window, strides, dilation, below, above)
    points = positions(out.shape[2:], window, strides, dilation, below, above)
    _check("col2im columns", cols.shape,
           (out.shape[0],) + points + (out.shape[1],) + tuple(window))
    if not _run_c("col2im", cols, None, out, out.shape, points, window, strides, dilation,
                  below, columns="first"):
        interpreter.uncolumns(cols, window, strides, dilation, below, above, out.shape, out=out)
    return out


def col2im_of_product(matmul, left: np.ndarray, right: np.ndarray, matrix: np.ndarray,
                      cols: np.ndarray, window: Ints, strides: Ints, dilation: Ints,
                      below: Ints, above: Ints, out: np.ndarray, block: int) -> np.ndarray:
    """col2im(cols) where cols views `matrix` = left @ right, `block` images at a time.

    Why: the product's columns are the size of every window of every image (LeNet's
    second convolution: 8 MB); made and summed a block at a time, each block is
    still in the cache when col2im reads it. `matrix` is the product's (rows,
    columns) buffer, whose rows start with the images (cols[i] is rows
    [i * rows_per_image, (i + 1) * rows_per_image)); each block is computed into its
    first rows, so only those are written. `matmul(a, b, out=)` computes a product.

    Parameters
    ----------
    matmul : callable
        np.matmul or gemm.matmul.
    left, right : np.ndarray
        The product's operands as (rows, k) and (k, columns) matrices.
    matrix : np.ndarray
        The (rows, columns) buffer `cols` views.
    cols : np.ndarray
        `matrix` as columns (N, P..., C, R...).
    window, strides, dilation, below, above
        col2im's geometry.
    out : np.ndarray
        The image (N, C, S...) the columns are summed into.
    block : int
        Images per block.

    Returns
    -------
    np.ndarray
        `out`.
    """
    images = out.shape[0]
    per_image = left.shape[0] // max(1, images)
    for lo in range(0, images, block):
        hi = min(images, lo + block)
        matmul(left[lo * per_image:hi * per_image], right, out=matrix[:(hi - lo) * per_image])
        col2im(cols[:hi - lo], window, strides, dilation, below, above, out=out[lo:hi])
    return out


def _pool(name: str, op: type, x: np.ndarray, window: Ints, strides: Ints, below: Ints,
          above: Ints, out: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    _check_image(f"{name} x", x.shape, window, strides, below, above)
    ones = (1,) * len(window)
    points = positions(x.shape[2:], window, strides, ones, below, above)
    _check(f"{name} out", out.shape, tuple(x.shape[:2]) + points)
    if not _run_c(name, x, None, out, x.shape, points, window, strides, ones, below):
        node = op(_parameter(x), tuple(window), **_pool_attributes(strides, below, above))
        np.copyto(out, _reference(node, x))
    return out


def max_pool(x: np.ndarray, window: Ints, strides: Ints, below: Ints, above: Ints,
             out: np.ndarray) -> np.ndarray:
    """Max of each window of x (N, C, S...) into out (N, C, P...); NaN propagates."""
    return _pool("max_pool", core.MaxPool, x, window, strides, below, above, out)


def avg_pool(x: np.ndarray, window: Ints, strides: Ints, below: Ints, above: Ints,
             out: np.ndarray) -> np.ndarray:
    """Mean of each window over its real (unpadded) inputs, into out (N, C, P...)."""
    return _pool("avg_pool", core.AvgPool, x, window, strides, below, above, out)


def max_pool_backprop(x: np.ndarray, delta: np.ndarray, window: Ints, strides: Ints,
                      below: Ints, above: Ints, out: np.ndarray) -> np.ndarray:
    """MaxPool's adjoint into out (x's shape): each delta to its window's first maximum."""
    x, delta = np.asarray(x), np.asarray(delta)
    _check_image("max_pool_backprop x", x.shape, window, strides, below, above)
    ones = (1,) * len(window)
    points = positions(x.shape[2:], window, strides, ones, below, above)
    _check("max_pool_backprop delta", delta.shape, tuple(x.shape[:2]) + points)
    _check("max_pool_backprop out", out.shape, x.shape)
    if not _run_c("max_pool_backprop", x, delta, out, x.shape, points, window, strides, ones,
                  below):
        node = core.MaxPoolBackprop(_parameter(x), _parameter(delta), tuple(window),
                                    **_pool_attributes(strides, below, above))
        np.copyto(out, _reference(node, x, delta))
    return out


def avg_pool_backprop(delta: np.ndarray, window: Ints, strides: Ints, below: Ints,
                      above: Ints, out: np.ndarray) -> np.ndarray:
    """AvgPool's adjoint into out (N, C, S...): each delta shared by its window's real inputs."""
    delta = np.asarray(delta)
    _check_image("avg_pool_backprop out", out.shape, window, strides, below, above)
    ones = (1,) * len(window)
    points = positions(out.shape[2:], window, strides, ones, below, above)
    _check("avg_pool_backprop delta", delta.shape, tuple(out.shape[:2]) + points)
    if not _run_c("avg_pool_backprop", delta, None, out, out.shape, points, window, strides,
                  ones, below):
        node = core.AvgPoolBackprop(tuple(out.shape), _parameter(delta), tuple(window),
                                    **_pool_attributes(strides, below, above))
        np.copyto(out, _reference(node, delta))
    return out
