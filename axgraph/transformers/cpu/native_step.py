"""A small program's whole step as one generated C function: one native call per step.

Why: a dispatch-bound step (the 64-32-10 MLP, batch 32) spends its time in the
per-op cost of the generated Python (about 0.8 us per NumPy call, ~45 calls),
not in arithmetic. Here every node of such a program becomes a loop nest in
one C function over the same planned arena, called once per step through
ctypes. Only small programs qualify (every node at most `MAX_ELEMENTS`
elements, every matrix product at most `MAX_MACS` multiply-adds): larger ones
are faster on BLAS and the threaded fused kernels, which the generated Python
calls. A program with any node this module cannot write in C (see
`unsupported`) stays Python.

Which programs: by default those whose calls update stored values in place
(the caller donates arrays: a training step, called thousands of times), from
their first call; `native=True` every qualifying program, `native=False` none
(backend options). The choice is made once per program, before it first runs,
never after some calls: the C step rounds differently from NumPy in the last
bits (its own exp, its own products and sums), and a computation must give the
same bits for the same arguments at every call (a finite-difference gradient
check compares calls). One-off computations keep the Python and pay no compile.

The call path costs about a microsecond: the arguments and results go to C as
one tuple of arrays, and C reads each array's data pointer and flags from
NumPy's array struct (`PyArrayObject_fields`, whose layout NumPy's compiled
extensions all rely on). The offsets are checked against NumPy's own answers
for sample arrays when this module loads (`struct_offsets`); if they differ
(another Python or NumPy build), no program runs natively.

What C checks before it writes anything: every argument an exact NumPy array of
the program's dtype (its descr object, by identity) and shape, C-contiguous and
aligned, every result writeable as well, and the values of one-hot inputs
(whole numbers in range). When a check fails the step returns a status and the
Python program runs instead, which converts or raises exactly as before. The
arithmetic is the fused kernels' own (each op's C expression trait, the own
float math), in IEEE semantics; float sums accumulate in double where the
reduced axes are innermost in memory, and in order into the output otherwise
(NumPy's order for those).

Matrix products C = A B run in register tiles (`tile_source`): 8 rows of C (6
without AVX-512's 32 vector registers) by two vectors of columns, the 16 (12)
sums vector locals that stay in registers, each element of A broadcast into a
multiply-add with a vector of B's row. B is read in place where its rows are
contiguous (its last columns that do not fill a vector copied, zero-padded, one
vector a row), else first packed into rows of whole vectors (a transposed B in
blocks transposed in registers); A is read and C written through their strides.
Each element of C is one sum over k in order from 0, by fused multiply-adds where
the target has them (FMA, AVX-512), else by one multiply and one add per term:
the same in every tile, lane and tail, so the values depend neither on the tiling
nor on the vector width. Fused because a tile is bound by multiply-add throughput
(unfused terms take twice the instructions) and a fused term rounds once, as
BLAS's do; since -ffp-contract=off keeps a vector `a * b + c` apart, the fused
instruction is asked for by its intrinsic.
"""
from __future__ import annotations

import ctypes
import functools
import math
import platform
from typing import TYPE_CHECKING, Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from ... import core
from ...core.node import Node
from ...core.traits import is_elementwise
from ...debug_info import user_location
from ...errors import AxgraphTypeError
from ...tensor_description import TensorDescription
from . import kernel_c, own_math
from .kernel_c import CTYPES, VALUE_CTYPES, EXPRESSIONS, CTerms, c_literal

if TYPE_CHECKING:
    from .codegen import Program

#: The largest node (elements) a native step computes: above it, NumPy's and the fused
#: kernels' threaded loops win.
MAX_ELEMENTS = 1 << 15
#: The largest matrix product (multiply-adds) a native step computes with its own loops:
#: above it, BLAS wins.
MAX_MACS = 1 << 18
#: The most bytes a matrix product keeps on the C stack (its right operand packed into
#: rows of whole vectors, or the last columns of it that do not fill a vector): well
#: within any thread's stack.
STACK_BYTES = 1 << 16
#: The C function's name.
ENTRY = "axgraph_step"
#: The C function taking the arrays' data pointers, unchecked (parameters, then results).
POINTERS_ENTRY = "axgraph_step_pointers"
#: Element types a native step computes (integers only read: one-hot inputs, converts).
COMPUTED = ("f32", "f64", "boolean")
#: Rows of a product's result one register tile computes (8 where AVX-512 has 32 vector
#: registers, else 6 of 16), by TILE_VECTORS vectors of columns: 16 or 12 sums in registers,
#: with registers left for B's vectors and A's broadcast element. Measured on the small
#: net's steps among 4 to 12 rows by 1 to 4 vectors: with AVX-512, 8 x 2 took 0.8 the time
#: of 4 x 2; with AVX2, 8 rows spill and 6 x 2 was fastest.
TILE_ROWS_AVX512, TILE_ROWS = 8, 6
TILE_VECTORS = 2
#: The widest vector the C may use (AVX-512): what a packed operand is padded to at most.
WIDEST_VECTOR_BYTES = 64
#: What every product's tiles share: the vector width (as batched.c picks it), the fused
#: multiply-add instructions where the target has them, and whether a transposed operand
#: is packed in blocks transposed in registers (gcc's shuffles of 32-byte vectors on AVX
#: targets: 6x faster than element by element for the MLP's 64 x 32 weight, measured).
TILES_HEAD = ["/* Inlined always, so the constants of the call specialize the code. */",
              "#define AXGRAPH_INLINE __attribute__((always_inline))",
              "#if defined(__AVX512F__)", "#define AXGRAPH_VECTOR_BYTES 64",
              "#elif defined(__AVX__)", "#define AXGRAPH_VECTOR_BYTES 32", "#else",
              "#define AXGRAPH_VECTOR_BYTES 16", "#endif",
              "#if defined(__AVX512F__)", f"#define AXGRAPH_TILE_ROWS {TILE_ROWS_AVX512}",
              "#else", f"#define AXGRAPH_TILE_ROWS {TILE_ROWS}", "#endif",
              "#if defined(__AVX512F__) || (defined(__AVX__) && defined(__FMA__))",
              "#include <immintrin.h>", "#endif",
              "#if defined(__AVX__) && defined(__GNUC__) && !defined(__clang__)",
              "#define AXGRAPH_SHUFFLES 1", "#else", "#define AXGRAPH_SHUFFLES 0", "#endif", ""]
#: Elements of a square block that `TRANSPOSE_C` transposes (32 bytes a row).
TRANSPOSED_BLOCK = {"f32": 8, "f64": 4}
#: The block transposes: in three (f32) or two (f64) rounds of two-vector shuffles, each
#: one x86 instruction (unpack, shuffle, lane permute), where gcc targets AVX; element by
#: element elsewhere.
TRANSPOSE_C = {"f32": """\
/* to[q*to_row + t] = from[t*from_row + q] for t, q < 8: a block of floats transposed. */
static inline void axgraph_transpose_f32(float* to, int64_t to_row, const float* from,
                                         int64_t from_row)
{
#if AXGRAPH_SHUFFLES
    typedef float row __attribute__((vector_size(32)));
    typedef int32_t pick __attribute__((vector_size(32)));
    const pick low = {0, 8, 1, 9, 4, 12, 5, 13}, high = {2, 10, 3, 11, 6, 14, 7, 15};
    const pick low2 = {0, 1, 8, 9, 4, 5, 12, 13}, high2 = {2, 3, 10, 11, 6, 7, 14, 15};
    const pick first = {0, 1, 2, 3, 8, 9, 10, 11}, second = {4, 5, 6, 7, 12, 13, 14, 15};
    row r[8], t[8], u[8];
    for (int i = 0; i < 8; ++i) __builtin_memcpy(&r[i], from + i * from_row, sizeof r[i]);
    for (int i = 0; i < 8; i += 2) {  /* pairs of elements of rows i, i+1 */
        t[i] = __builtin_shuffle(r[i], r[i + 1], low);
        t[i + 1] = __builtin_shuffle(r[i], r[i + 1], high);
    }
    for (int i = 0; i < 8; i += 4) {  /* 4 rows' elements 0 | 4, 1 | 5, 2 | 6, 3 | 7 */
        u[i] = __builtin_shuffle(t[i], t[i + 2], low2);
        u[i + 1] = __builtin_shuffle(t[i], t[i + 2], high2);
        u[i + 2] = __builtin_shuffle(t[i + 1], t[i + 3], low2);
        u[i + 3] = __builtin_shuffle(t[i + 1], t[i + 3], high2);
    }
    for (int q = 0; q < 4; ++q) {  /* columns q and q + 4 of all 8 rows */
        const row x = __builtin_shuffle(u[q], u[q + 4], first);
        const row y = __builtin_shuffle(u[q], u[q + 4], second);
        __builtin_memcpy(to + q * to_row, &x, sizeof x);
        __builtin_memcpy(to + (q + 4) * to_row, &y, sizeof y);
    }
#else
    for (int q = 0; q < 8; ++q)
        for (int t = 0; t < 8; ++t) to[q * to_row + t] = from[t * from_row + q];
#endif
}
""", "f64": """\
/* to[q*to_row + t] = from[t*from_row + q] for t, q < 4: a block of doubles transposed. */
static inline void axgraph_transpose_f64(double* to, int64_t to_row, const double* from,
                                         int64_t from_row)
{
#if AXGRAPH_SHUFFLES
    typedef double row __attribute__((vector_size(32)));
    typedef int64_t pick __attribute__((vector_size(32)));
    const pick low = {0, 4, 2, 6}, high = {1, 5, 3, 7};
    const pick first = {0, 1, 4, 5}, second = {2, 3, 6, 7};
    row r[4], t[4];
    for (int i = 0; i < 4; ++i) __builtin_memcpy(&r[i], from + i * from_row, sizeof r[i]);
    for (int i = 0; i < 4; i += 2) {  /* elements 0 | 2 and 1 | 3 of rows i, i+1 */
        t[i] = __builtin_shuffle(r[i], r[i + 1], low);
        t[i + 1] = __builtin_shuffle(r[i], r[i + 1], high);
    }
    for (int q = 0; q < 2; ++q) {  /* columns q and q + 2 of all 4 rows */
        const row x = __builtin_shuffle(t[q], t[q + 2], first);
        const row y = __builtin_shuffle(t[q], t[q + 2], second);
        __builtin_memcpy(to + q * to_row, &x, sizeof x);
        __builtin_memcpy(to + (q + 2) * to_row, &y, sizeof y);
    }
#else
    for (int q = 0; q < 4; ++q)
        for (int t = 0; t < 4; ++t) to[q * to_row + t] = from[t * from_row + q];
#endif
}
"""}
#: The vector type and its helpers, once per element type a product computes: {T} the C
#: type, {S} its name here, {I} the intrinsics' suffix, {M} the intrinsics' type's suffix,
#: {F} libm's suffix, {U} the suffix of gcc's fast-FMA macro.
VECTOR_C = """\
/* Vectors of {T}: the lanes of a register tile's columns. */
typedef {T} axgraph_v{S} __attribute__((vector_size(AXGRAPH_VECTOR_BYTES)));
enum {{ AXGRAPH_LANES_{S} = AXGRAPH_VECTOR_BYTES / sizeof({T}) }};

/* a * b + c lane by lane: fused (rounded once) where the target has the instruction,
   else one multiply and one add (-ffp-contract=off keeps them apart). */
static inline AXGRAPH_INLINE axgraph_v{S} axgraph_muladd_{S}(axgraph_v{S} a,
                                                          axgraph_v{S} b, axgraph_v{S} c)
{{
#if defined(__AVX512F__)
    return (axgraph_v{S})_mm512_fmadd_p{I}((__m512{M})a, (__m512{M})b, (__m512{M})c);
#elif defined(__AVX__) && defined(__FMA__)
    return (axgraph_v{S})_mm256_fmadd_p{I}((__m256{M})a, (__m256{M})b, (__m256{M})c);
#elif defined(__FP_FAST_FMA{U})
    for (int t = 0; t < AXGRAPH_LANES_{S}; ++t) c[t] = __builtin_fma{F}(a[t], b[t], c[t]);
    return c;
#else
    return a * b + c;
#endif
}}

/* A vector from memory not necessarily aligned to it. */
static inline AXGRAPH_INLINE axgraph_v{S} axgraph_load_{S}(const {T}* from)
{{
    axgraph_v{S} v;
    __builtin_memcpy(&v, from, sizeof v);
    return v;
}}

/* x in every lane: x - 0 is x exactly (-0 too), and gcc makes it one broadcast. */
static inline AXGRAPH_INLINE axgraph_v{S} axgraph_splat_{S}({T} x)
{{
    return x - (axgraph_v{S}){{0}};
}}

/* The first `count` lanes of v (all of them at most) to to[0], to[stride], ... */
static inline AXGRAPH_INLINE void axgraph_put_{S}({T}* to, int64_t stride, int64_t count,
                                                axgraph_v{S} v)
{{
    if (stride == 1 && count >= AXGRAPH_LANES_{S}) __builtin_memcpy(to, &v, sizeof v);
    else for (int64_t t = 0; t < count && t < AXGRAPH_LANES_{S}; ++t) to[t * stride] = v[t];
}}
"""
#: NumPy's array flags C checks (numpy/ndarraytypes.h).
C_CONTIGUOUS, ALIGNED, WRITEABLE = 0x0001, 0x0100, 0x0400


class StructOffsets(NamedTuple):
    """Byte offsets of the fields C reads from CPython and NumPy objects."""

    #: an object's type (ob_type, after ob_refcnt)
    type: int
    #: an array's data pointer, rank, shape and strides pointers, dtype and flags
    data: int
    ndim: int
    dims: int
    strides: int
    descr: int
    flags: int
    #: a tuple's first item
    item: int


@functools.lru_cache(maxsize=None)
def struct_offsets() -> Optional[StructOffsets]:
    """Where C finds an array's fields and a tuple's items, or None when NumPy's array
    struct or CPython's tuple is not laid out as assumed here.

    Checked against NumPy's answers (`ctypes.data`, `ndim`, `shape`, `strides`,
    `dtype`, `flags.num`) and `id()` for arrays of several ranks, layouts and flags,
    so a build where the layout differs never runs a native step.
    """
    if platform.python_implementation() != "CPython":  # id() is an address only there
        return None
    pointer = ctypes.sizeof(ctypes.c_void_p)
    kind = ctypes.sizeof(ctypes.c_ssize_t)  # ob_type follows ob_refcnt
    head = object.__basicsize__  # PyObject_HEAD
    # PyArrayObject_fields: data, nd (int, padded), dimensions, strides, base, descr, flags
    found = StructOffsets(type=kind, data=head, ndim=head + pointer, dims=head + 2 * pointer,
                          strides=head + 3 * pointer, descr=head + 5 * pointer,
                          flags=head + 6 * pointer,
                          item=tuple.__basicsize__)  # PyObject_VAR_HEAD, then ob_item[]
    base = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    readonly = np.zeros(5)
    readonly.flags.writeable = False
    samples = [base, base.transpose(2, 0, 1), base[:, 1], base[:, ::-2], readonly,
               np.zeros(()), np.zeros((5, 1, 7)), np.zeros(7, np.int32)[::2]]

    def read(address: int, ctype: Any) -> Any:
        return ctype.from_address(address).value

    def read_sizes(address: int, rank: int) -> Tuple[int, ...]:
        start = read(address, ctypes.c_void_p)
        return tuple((ctypes.c_ssize_t * rank).from_address(start)) if rank else ()

    try:
        for array in samples:
            at = id(array)
            if read(at + found.type, ctypes.c_void_p) != id(np.ndarray) or \
                    read(at + found.data, ctypes.c_void_p) != array.ctypes.data or \
                    read(at + found.ndim, ctypes.c_int) != array.ndim or \
                    read_sizes(at + found.dims, array.ndim) != array.shape or \
                    read_sizes(at + found.strides, array.ndim) != array.strides or \
                    read(at + found.descr, ctypes.c_void_p) != id(array.dtype) or \
                    read(at + found.flags, ctypes.c_int) != array.flags.num:
                return None
        together = tuple(samples)
        for k, array in enumerate(together):
            if read(id(together) + found.item + k * pointer, ctypes.c_void_p) != id(array):
                return None
    except (AttributeError, TypeError, ValueError, OSError):
        return None
    return found


def checked_native(native: Optional[bool]) -> Optional[bool]:
    """`native` if it is True, False or None (see `CpuBackend.compile`).

    Raises
    ------
    AxgraphTypeError
        It is anything else.
    """
    if native is not None and not isinstance(native, bool):
        raise AxgraphTypeError(f"native is True (every small program runs as one C function), "
                               f"False (none does) or None (those that update stored values, "
                               f"the default); not {type(native).__name__} {native!r:.40}",
                               user_location())
    return native


# -- which programs qualify ------------------------------------------------------------------

def unsupported(program: "Program") -> Optional[str]:
    """Why `program` cannot run as one C function (None: it can)."""
    if struct_offsets() is None:
        return "NumPy's array struct is not laid out as this module reads it"
    schedule = program.schedule
    if program.copied:
        return "a result is copied out of the arena (a parameter, view or repeated result)"
    for node in schedule.nodes:
        kind = schedule.storage[node]
        shape = program.shapes[node]
        size = math.prod(shape)
        if size == 0:
            return f"{node.op} {node.name} has no elements"
        if kind in ("parameter", "view"):
            continue
        if kind == "constant":
            if node.attributes["value"].ndim and \
                    not program.namespace[program.names[node]].flags.c_contiguous:
                return f"constant {node.name} is broadcast from a smaller array"
            continue
        if kind not in ("buffer", "fresh"):
            return f"{node.op} {node.name} allocates its own array"
        if size > MAX_ELEMENTS:
            return f"{node.op} {node.name} has {size} elements (> {MAX_ELEMENTS})"
        why = _op_unsupported(program, node)
        if why:
            return f"{node.op} {node.name}: {why}"
    return None


def _op_unsupported(program: "Program", node: Node) -> Optional[str]:
    name = node.element_type.name
    if isinstance(node, core.Dot):
        if any(value for key, value in node.attributes.items()
               if key not in ("contract_a", "contract_b")):
            return "a product with batch dims"
        if name not in ("f32", "f64") or any(x.element_type.name != name for x in node.inputs):
            return "a product of other than f32/f64"
        for x in node.inputs:
            while x in program.schedule.alias:
                x = program.schedule.alias[x]
            if isinstance(x, core.Constant) and x.attributes["value"].ndim == 0:
                return "a product of a filled constant"
        operands = _dot_matrices(program, node)
        if operands is None:
            return "an operand is no strided matrix"
        (m, k, n), _, b, _ = operands
        if m * k * n > MAX_MACS:
            return f"a product of {m * k * n} multiply-adds (> {MAX_MACS})"
        itemsize = node.element_type.dtype.itemsize
        vector = WIDEST_VECTOR_BYTES
        row_bytes = -(-n * itemsize // vector) * vector if _packs(b, n) else vector
        if k * row_bytes > STACK_BYTES:
            return "a product whose packed operand would not fit the stack"
        return None
    if isinstance(node, core.OneHot):
        (x,) = node.inputs
        if program.schedule.storage[x] != "parameter":
            return "a one-hot of a computed value (its check must come first)"
        if name not in CTYPES or x.element_type.name not in CTYPES or \
                x.element_type.name == "boolean":
            return "one-hot types"
        return None
    if isinstance(node, (core.Softmax, core.SoftmaxBackprop)):
        if name not in ("f32", "f64") or any(x.element_type.name != name for x in node.inputs):
            return "a softmax of other than f32/f64"
        return None
    if isinstance(node, core.Reduction):
        reduction = type(node)
        if reduction.c_accumulate is None or reduction.c_start is None:
            return "a reduction without C accumulation"
        if name not in ("f32", "f64") or node.inputs[0].element_type.name != name:
            return "a reduction of other than f32/f64"
        return None
    if is_elementwise(type(node)) and EXPRESSIONS.lookup(type(node)) is not None:
        if name not in COMPUTED:
            return f"computes {name}"
        for x in node.inputs:
            if x.element_type.name not in COMPUTED and not isinstance(node, core.Convert):
                return f"reads {x.element_type.name}"
            if x.element_type.name not in CTYPES:
                return f"reads {x.element_type.name}"
        return None
    return "no C code for this op here"


# -- addresses and strides ---------------------------------------------------------------------

class _Storage:
    """Where a node's elements are: a C pointer expression, element strides and offset;
    or, for a scalar constant, its literal."""

    def __init__(self, pointer: Optional[str], strides: Tuple[int, ...], offset: int = 0,
                 literal: Optional[str] = None):
        self.pointer, self.strides, self.offset, self.literal = pointer, strides, offset, literal

    def at(self, index: Sequence[str]) -> str:
        """The C expression of the element at `index` (C expressions of the dims)."""
        if self.literal is not None:
            return self.literal
        terms = [str(self.offset)] if self.offset else []
        terms += [f"{i}*{s}" if s != 1 else i for i, s in zip(index, self.strides)
                  if s and i != "0"]
        return f"{self.pointer}[{' + '.join(terms) or '0'}]"


def _locate(program: "Program", constants: List[np.ndarray]) -> Dict[Node, _Storage]:
    """The storage of every node (views resolved to their root's memory); the arrays of
    constants read from memory are appended to `constants` (C's F[2], F[3], ...)."""
    schedule, places = program.schedule, {}
    parameters = {p: j for j, p in enumerate(schedule.parameters)}
    for node in schedule.nodes:
        kind = schedule.storage[node]
        ctype = CTYPES[node.element_type.name]
        layout = schedule.layout[node]
        if kind == "parameter":
            places[node] = _Storage(f"P{parameters[node]}", _row_major(program.shapes[node]))
        elif kind == "constant":
            value = node.attributes["value"]
            if value.ndim == 0:
                places[node] = _Storage(None, (), literal=c_literal(value, node.element_type))
            else:
                constants.append(program.namespace[program.names[node]])
                places[node] = _Storage(f"(({ctype}*)F[{len(constants) + 1}])",
                                        _row_major(program.shapes[node]))
        elif kind == "fresh":
            places[node] = _Storage(f"R{program.fresh[node]}", _row_major(program.shapes[node]))
        elif kind == "buffer":
            assert layout is not None  # every buffer has one
            offset = program.plan.buffers[node].offset
            places[node] = _Storage(f"(({ctype}*)(ARENA + {offset}))", layout.element_strides,
                                    layout.element_offset)
        else:  # a view: the root's memory, seen through the view's layout
            assert layout is not None  # a view is a layout of its root
            root = node
            while root in schedule.alias:
                root = schedule.alias[root]
            source = places[root]
            if source.literal is not None:
                places[node] = source
            else:  # (the view's offset counts from the root's first element)
                places[node] = _Storage(source.pointer, layout.element_strides,
                                        layout.element_offset)
    return places


def _row_major(shape: Sequence[int]) -> Tuple[int, ...]:
    return TensorDescription.row_major(tuple(shape), np.float32).element_strides


def _dot_matrices(program: "Program", node: core.Dot):
    """((m, k, n), a as (m, k), b as (k, n), out as (m, n)) layouts, or None."""
    a, b = node.inputs
    layouts = program.schedule.layout
    la, lb, lo = layouts.get(a), layouts.get(b), layouts.get(node)
    if la is None or lb is None or lo is None:
        return None
    shape_a, shape_b = program.shapes[a], program.shapes[b]
    ca, cb = tuple(node.contract_a), tuple(node.contract_b)
    rest_a = [i for i in range(len(shape_a)) if i not in ca]
    rest_b = [i for i in range(len(shape_b)) if i not in cb]
    m = math.prod(shape_a[i] for i in rest_a)
    k = math.prod(shape_a[i] for i in ca)
    n = math.prod(shape_b[i] for i in rest_b)
    pairs = list(zip(ca, cb))
    for order in [pairs] + [sorted(pairs, key=lambda p: -lay.element_strides[p[side]])
                            for side, lay in enumerate((la, lb))]:
        ma = la.transpose(tuple(rest_a + [i for i, _ in order])).reshape((m, k))
        mb = lb.transpose(tuple([j for _, j in order] + rest_b)).reshape((k, n))
        mo = lo.reshape((m, n))
        if ma is not None and mb is not None and mo is not None:
            return (m, k, n), ma, mb, mo
    return None


def tile_source(name: str) -> List[str]:
    """The C of one register tile of `name` (f32, f64) products, after its `VECTOR_C`.

    Up to TILE_ROWS_AVX512 x TILE_VECTORS sums, each a vector local of its own so that they
    stay in registers; the caller's constant `rows` and `vectors` remove the others.
    """
    ctype, vector = CTYPES[name], f"axgraph_v{name}"
    most = max(TILE_ROWS_AVX512, TILE_ROWS)

    def times(count: int, stride: str) -> str:
        return {0: "0", 1: stride}.get(count, f"{count} * {stride}")

    def plus(count: int, stride: str, sign: str = "+") -> str:
        return f" {sign} {times(count, stride)}" if count else ""

    lines = ["/* One register tile: the first `width` columns of rows 0..rows-1 of c = a b,",
             "   where a's rows have k elements (strides a_row, a_col) and b's k rows are",
             "   `vectors` whole vectors each (b_row elements apart); c's strides c_row, c_col.",
             f"   rows (<= {most}) and vectors (<= {TILE_VECTORS}) are constants where it is "
             "called.",
             "   Each sum runs over k in order, from 0. */",
             f"static inline AXGRAPH_INLINE void axgraph_tile_{name}(",
             "    const int rows, const int vectors, const int64_t k,",
             f"    const {ctype}* a, const int64_t a_row, const int64_t a_col,",
             f"    const {ctype}* b, const int64_t b_row,",
             f"    {ctype}* c, const int64_t c_row, const int64_t c_col, const int64_t width)",
             "{",
             f"    const int64_t lanes = AXGRAPH_LANES_{name};",
             *(f"    {vector} " + ", ".join(f"s{r}{v} = {{0}}" for v in range(TILE_VECTORS)) + ";"
               for r in range(most)),
             "    for (int64_t p = 0; p < k; ++p) {",
             f"        const {ctype}* x = a + p * a_col;",
             f"        const {vector} b0 = axgraph_load_{name}(b + p * b_row);",
             *(f"        const {vector} b{v} = vectors > {v} ? "
               f"axgraph_load_{name}(b + p * b_row{plus(v, 'lanes')}) : b0;"
               for v in range(1, TILE_VECTORS))]
    for r in range(most):
        lines += [f"        if (rows > {r}) {{" if r else "        {",
                  f"            const {vector} y = axgraph_splat_{name}(x[{times(r, 'a_row')}]);",
                  *(f"            {f'if (vectors > {v}) ' if v else ''}s{r}{v} = "
                    f"axgraph_muladd_{name}(y, b{v}, s{r}{v});" for v in range(TILE_VECTORS)),
                  "        }"]
    lines += ["    }"]
    for r in range(most):
        for v in range(TILE_VECTORS):
            test = " && ".join(([f"rows > {r}"] if r else []) + ([f"vectors > {v}"] if v else []))
            lines.append(f"    {f'if ({test}) ' if test else ''}axgraph_put_{name}("
                         f"c{plus(r, 'c_row')}{plus(v, 'lanes * c_col')}, c_col, "
                         f"width{plus(v, 'lanes', '-')}, s{r}{v});")
    return lines + ["}", ""]


# -- generating C ----------------------------------------------------------------------------

class _Terms:
    """What `CTerms` asks of the kernel emitter: math names, lets, no quotient forms."""

    def __init__(self):
        self.body: List[str] = []
        self.used_math: set = set()

    def _math(self, name: str, et: core.ElementType) -> str:
        full = name + ("f" if et.name == "f32" else "")
        self.used_math.add(full)
        return f"axgraph_{full}" if full in own_math.OWN_FUNCTIONS else full

    def quotient(self, node: Node) -> None:
        return None


def _loops(shape: Sequence[int], order: Sequence[int], body: List[str]) -> List[str]:
    """Nested for-loops over `shape` in `order` (outermost first, the index of dim d
    named i<d>) around `body`; the innermost one vectorized (`omp simd`)."""
    lines: List[str] = []
    for depth, dim in enumerate(order):
        pad = "    " * depth
        if depth == len(order) - 1:
            lines.append(pad + "#pragma omp simd")
        lines.append(f"{pad}for (int64_t i{dim} = 0; i{dim} < {shape[dim]}; ++i{dim}) {{")
    pad = "    " * len(order)
    lines += [pad + line for line in body]
    lines += ["    " * d + "}" for d in range(len(order) - 1, -1, -1)]
    return lines


def _memory_order(storage: _Storage, rank: int) -> List[int]:
    """Dims outermost first by stride (largest first), so the inner loop walks memory."""
    return sorted(range(rank), key=lambda d: -abs(storage.strides[d]) if storage.strides
                  else 0)


class _StepWriter:
    """Writes a program's C step: argument checks, value checks, one block per node."""

    def __init__(self, program: "Program"):
        self.program = program
        #: The arena (C's F[0]) and the constants read from memory (F[2], ...), then the
        #: dtypes of the arguments and results (`dtypes`: each array's descr object,
        #: checked by identity); F[1] is the array type, which every argument's must be.
        self.arena: np.ndarray = program.namespace["ARENA"]
        self.constants: List[np.ndarray] = []
        self.places = _locate(program, self.constants)
        self.terms = _Terms()
        self.checks: List[str] = []
        self.blocks: List[str] = []
        self.dtypes: List[np.dtype] = []
        #: The element types of the products (their vector helpers go in the head).
        self.tiled: set = set()

    def source(self) -> str:
        program = self.program
        schedule = program.schedule
        for node in schedule.nodes:
            if schedule.storage[node] in ("buffer", "fresh"):
                self.blocks.append(f"/* {node.op} {node.type_str()} */")
                self.blocks += ["{", *("    " + line for line in self._node(node)), "}"]
        at = struct_offsets()
        assert at is not None  # see unsupported
        own, _library = own_math.closure(self.terms.used_math)
        head = ["#include <stdint.h>", "#include <math.h>", "",
                f"#define TYPE(o) (*(void**)((char*)(o) + {at.type}))",
                f"#define DATA(o) (*(char**)((char*)(o) + {at.data}))",
                f"#define NDIM(o) (*(int*)((char*)(o) + {at.ndim}))",
                f"#define DIMS(o) (*(const intptr_t**)((char*)(o) + {at.dims}))",
                f"#define DESCR(o) (*(void**)((char*)(o) + {at.descr}))",
                f"#define FLAGS(o) (*(int*)((char*)(o) + {at.flags}))",
                f"#define ITEM(t, k) (((void**)((char*)(t) + {at.item}))[k])", ""]
        if own:
            head += [*(own_math.OWN_FUNCTIONS[name].code for name in own), ""]
        if self.tiled:
            head += TILES_HEAD
        for name in sorted(self.tiled):
            double = name == "f64"
            head += [VECTOR_C.format(T=CTYPES[name], S=name, I="d" if double else "s",
                                     M="d" if double else "", F="" if double else "f",
                                     U="" if double else "F"), TRANSPOSE_C[name],
                     *tile_source(name)]
        # The step by data pointers (the caller has checked every array: a C++ autograd
        # node reading tensors), and the checking entry that reads NumPy arrays and
        # calls it.
        count = len(schedule.parameters) + len(schedule.results)
        pointers: List[str] = []
        checking: List[str] = []
        for j, parameter in enumerate(schedule.parameters):
            ctype = CTYPES[parameter.element_type.name]
            pointers.append(f"    const {ctype}* P{j} = (const {ctype}*)D[{j}];")
            checking += self._checked(f"a{j}", j, parameter, C_CONTIGUOUS | ALIGNED)
            checking.append(f"    D[{j}] = DATA(a{j});")
        for k, result in enumerate(schedule.results):
            ctype = CTYPES[result.element_type.name]
            place = len(schedule.parameters) + k
            pointers.append(f"    {ctype}* R{k} = ({ctype}*)D[{place}];")
            checking += self._checked(f"r{k}", place, result, C_CONTIGUOUS | ALIGNED | WRITEABLE)
            checking.append(f"    D[{place}] = DATA(r{k});")
        body = [f"int {POINTERS_ENTRY}(void* const* F, void* const* D)", "{",
                "    char* ARENA = (char*)F[0];", *pointers,
                *("    " + line for line in self.checks),
                *("    " + line for line in self.blocks), "    return 0;", "}", "",
                f"int {ENTRY}(void* const* F, void* args)", "{",
                f"    void* D[{max(count, 1)}];", *checking,
                f"    return {POINTERS_ENTRY}(F, D);", "}", ""]
        return "\n".join(head + body)

    def _checked(self, name: str, at: int, node: Node, flags: int) -> List[str]:
        """C taking item `at` of the call's tuple as `name`, returning 1 unless it is an
        array of `node`'s dtype and shape with `flags` set: C then declines and the
        Python program runs (which converts, or raises the error the user should see)."""
        dtype = node.element_type.dtype
        if dtype not in self.dtypes:
            self.dtypes.append(dtype)
        shape = self.program.shapes[node]
        conditions = [f"TYPE({name}) != F[1]",
                      f"DESCR({name}) != F[{2 + len(self.constants) + self.dtypes.index(dtype)}]",
                      f"NDIM({name}) != {len(shape)}",
                      *(f"DIMS({name})[{d}] != {n}" for d, n in enumerate(shape)),
                      f"(FLAGS({name}) & {flags}) != {flags}"]
        return [f"    void* {name} = ITEM(args, {at});",
                f"    if ({' || '.join(conditions)}) return 1;"]

    def _node(self, node: Node) -> List[str]:
        if isinstance(node, core.Dot):
            return self._dot(node)
        if isinstance(node, core.OneHot):
            return self._one_hot(node)
        if isinstance(node, core.Reduction):
            return self._reduction(node)
        if isinstance(node, (core.Softmax, core.SoftmaxBackprop)):
            return self._row(node)
        return self._elementwise(node)

    def _elementwise(self, node: Node) -> List[str]:
        out = self.places[node]
        rank = len(self.program.shapes[node])
        index = [f"i{d}" for d in range(rank)]
        self.terms.body = []
        args = [self.places[x].at(index) for x in node.inputs]
        terms = CTerms(self.terms, node, args, f"v{len(self.blocks)}")  # type: ignore[arg-type]  # duck-typed emitter
        expression = EXPRESSIONS.lookup(type(node))(node, terms)  # type: ignore[misc]
        body = self.terms.body + [f"{out.at(index)} = ({CTYPES[node.element_type.name]})"
                                  f"({expression});"]
        return _loops(self.program.shapes[node], _memory_order(out, rank), body)

    def _reduction(self, node: core.Reduction) -> List[str]:
        (x,) = node.inputs
        source, out = self.places[x], self.places[node]
        shape = self.program.shapes[x]
        axes = tuple(node.axes)
        kept = [d for d in range(len(shape)) if d not in axes]
        ctype = VALUE_CTYPES[node.element_type.name]
        reduction = type(node)
        accumulate, start_value = reduction.c_accumulate, reduction.c_start
        assert accumulate is not None and start_value is not None  # see unsupported
        wide = "double" if reduction.wide_accumulator else ctype
        index = [f"i{d}" for d in range(len(shape))]
        out_index = [f"i{d}" for d in kept]
        order = _memory_order(source, len(shape))
        if order and order[-1] in kept:  # the inner loop walks kept dims: fold into out
            target = out.at(out_index)
            start = _loops(shape, [kept[p] for p in _memory_order(out, len(kept))],
                           [f"{target} = ({ctype}){start_value};"])
            step = accumulate.format(acc=target, x=source.at(index))
            return start + _loops(shape, order, [f"{target} = {step};"])
        # reduced dims innermost: one accumulator per output element
        inner = [d for d in order if d in axes]
        outer = [d for d in order if d not in axes]
        step = accumulate.format(acc="acc", x=f"({wide}){source.at(index)}")
        body = _loops(shape, inner, [f"acc = {step};"])
        body = [line for line in body if "omp simd" not in line]  # in order, not reassociated
        inner_body = [f"{wide} acc = {start_value};", *body,
                      f"{out.at(out_index)} = ({ctype})acc;"]
        return _loops(shape, outer, inner_body) if outer else inner_body

    def _row(self, node: Node) -> List[str]:
        """Softmax, LogSoftmax and their backprops, a row (the kept dims) at a time: the
        passes of the fused row kernels (kernel_c._row_entry) over the row's elements,
        the sums in order. Each pass reads and writes one element at a time, so the
        result may share its buffer with an operand."""
        shape = self.program.shapes[node]
        reduced = tuple(node.attributes["axes"])
        out = self.places[node]
        order = _memory_order(out, len(shape))
        inner = [d for d in order if d in reduced]
        outer = [d for d in order if d not in reduced]
        index = [f"i{d}" for d in range(len(shape))]
        et = node.element_type
        value, exp = CTYPES[et.name], self.terms._math("exp", et)
        o = out.at(index)
        a, b = self.places[node.inputs[0]].at(index), self.places[node.inputs[-1]].at(index)

        def pass_(body: List[str], summing: bool = False) -> List[str]:
            lines = _loops(shape, inner, body)
            return [line for line in lines if "omp simd" not in line] if summing else lines

        if isinstance(node, core.Softmax):  # a: x
            lines = [f"{value} m = -INFINITY;",
                     *pass_([f"const {value} v = {a};", "m = v > m ? v : m;"], True),
                     f"{value} s = 0;"]
            if isinstance(node, core.LogSoftmax):
                log = self.terms._math("log", et)
                lines += [*pass_([f"s += {exp}({a} - m);"], True),
                          f"const {value} ls = {log}(s);",
                          *pass_([f"{o} = ({a} - m) - ls;"])]
            else:
                lines += [*pass_([f"const {value} e = {exp}({a} - m);", f"{o} = e;", "s += e;"],
                                 True),
                          *pass_([f"{o} = {o} / s;"])]
        else:  # a: dy, b: y
            of_log = isinstance(node, core.LogSoftmaxBackprop)
            lines = [f"{value} s = 0;",
                     *pass_([f"s += {a};" if of_log else f"s += {a} * {b};"], True),
                     *pass_([f"{o} = {a} - {exp}({b}) * s;" if of_log
                             else f"{o} = {b} * ({a} - s);"])]
        lines = ["{", *("    " + line for line in lines), "}"]
        if not outer:
            return lines
        return [line for line in _loops(shape, outer, lines) if "omp simd" not in line]

    def _one_hot(self, node: core.OneHot) -> List[str]:
        (x,) = node.inputs
        shape = self.program.shapes[node]
        axis = node.one_hot_axis
        source, out = self.places[x], self.places[node]
        count = shape[axis]
        xs = _row_major(self.program.shapes[x])
        flat = [f"i{d}" for d in range(len(self.program.shapes[x]))]
        value = source.at(flat)
        condition = f"!({value} >= 0 && {value} < {count})"
        if x.element_type.is_float:
            condition = f"!({value} == floor({value})) || " + condition
        self.checks += [line for line in _loops(self.program.shapes[x], list(range(len(xs))),
                                                [f"if ({condition}) return 2;"])
                        if "omp simd" not in line]  # (no early return in a simd loop)
        index = [f"i{d}" for d in range(len(shape))]
        read = [f"i{d}" for d in range(len(shape)) if d != axis]
        reading = _Storage(source.pointer, source.strides, source.offset)
        body = [f"{out.at(index)} = ({CTYPES[node.element_type.name]})"
                f"({reading.at(read)} == i{axis});"]
        return _loops(shape, _memory_order(out, len(shape)), body)

    def _dot(self, node: core.Dot) -> List[str]:
        """C = A B in register tiles (`tile_source`): AXGRAPH_TILE_ROWS rows of C at a
        time (then the rows left), each by TILE_VECTORS vectors of columns (then one
        vector, then the columns left: B's zero-padded edge, or its packed rows' last
        vector)."""
        matrices = _dot_matrices(self.program, node)
        assert matrices is not None  # see unsupported
        (m, k, n), la, lb, lo = matrices
        a, b = node.inputs
        name = node.element_type.name
        self.tiled.add(name)
        ctype, lanes, tile = CTYPES[name], f"AXGRAPH_LANES_{name}", f"axgraph_tile_{name}"
        A = _Storage(self.places[a].pointer, la.element_strides, la.element_offset)
        B = _Storage(self.places[b].pointer, lb.element_strides, lb.element_offset)
        C = _Storage(self.places[node].pointer, lo.element_strides, lo.element_offset)
        (a_row, a_col), (b_row, b_col), (c_row, c_col) = \
            la.element_strides, lb.element_strides, lo.element_strides
        if _packs(lb, n):
            lines = [f"/* B ({k} x {n}, its columns strided) packed into rows of whole vectors, "
                     f"zero past column {n} */",
                     f"enum {{ WHOLE = ({n} + {lanes} - 1) / {lanes} * {lanes} }};",
                     f"{ctype} packed[{k} * WHOLE];"]
            block = TRANSPOSED_BLOCK[name]
            rows, cols = (k - k % block, n - n % block) if b_row == 1 else (0, 0)
            if rows and cols:  # B read transposed: blocks of it transposed in registers
                lines += [f"for (int64_t p = 0; p < {rows}; p += {block})",
                          f"    for (int64_t j = 0; j < {cols}; j += {block})",
                          f"        axgraph_transpose_{name}(packed + p*WHOLE + j, WHOLE, "
                          f"&{B.at(['p', 'j'])}, {b_col});",
                          "/* the rest element by element, then the zeros */"]
            start = "0" if not (rows and cols) else str(cols) if rows == k else \
                f"p < {rows} ? {cols} : 0"
            copy = [] if start == str(n) else [
                f"    for (int64_t j = {start}; j < {n}; ++j) packed[p*WHOLE + j] = "
                f"{B.at(['p', 'j'])};"]
            lines += [f"for (int64_t p = 0; p < {k}; ++p) {{", *copy,
                      f"    for (int64_t j = {n}; j < WHOLE; ++j) packed[p*WHOLE + j] = 0;",
                      "}"]
            whole, whole_row, edge = "packed + j", "WHOLE", False
        else:
            lines = [f"/* B's rows read in place as whole vectors, but for the last {n} % lanes "
                     "columns: packed, zero-padded to a vector */",
                     f"enum {{ WHOLE = {n} / {lanes} * {lanes} }};",
                     f"{ctype} edge[{k} * {lanes}];",
                     f"if (WHOLE < {n})",
                     f"    for (int64_t p = 0; p < {k}; ++p)",
                     f"        for (int64_t t = 0; t < {lanes}; ++t)",
                     f"            edge[p*{lanes} + t] = t < {n} - WHOLE ? "
                     f"{B.at(['p', '(WHOLE + t)'])} : 0;"]
            whole, whole_row, edge = f"&{B.at(['0', 'j'])}", str(b_row), True

        def columns(rows: str) -> List[str]:
            """One row block's tiles, left to right."""
            common = f"{k}, &{A.at(['i', '0'])}, {a_row}, {a_col}"
            stored = f"{c_row}, {c_col}"
            body = ["int64_t j = 0;",
                    f"for (; j + {TILE_VECTORS}*{lanes} <= WHOLE; j += {TILE_VECTORS}*{lanes})",
                    f"    {tile}({rows}, {TILE_VECTORS}, {common}, {whole}, {whole_row}, "
                    f"&{C.at(['i', 'j'])}, {stored}, {n} - j);",
                    f"for (; j < WHOLE; j += {lanes})",
                    f"    {tile}({rows}, 1, {common}, {whole}, {whole_row}, &{C.at(['i', 'j'])}, "
                    f"{stored}, {n} - j);"]
            if edge:
                body += [f"if (WHOLE < {n})",
                         f"    {tile}({rows}, 1, {common}, edge, {lanes}, "
                         f"&{C.at(['i', 'WHOLE'])}, {stored}, {n} - WHOLE);"]
            return body

        lines += ["enum { ROWS = AXGRAPH_TILE_ROWS };",
                  "/* rows of C ROWS at a time */",
                  f"for (int64_t i = 0; i < {m} - {m} % ROWS; i += ROWS) {{",
                  *("    " + line for line in columns("ROWS")), "}",
                  "/* the rows left, if any */",
                  f"if ({m} % ROWS) {{", f"    const int64_t i = {m} - {m} % ROWS;",
                  *("    " + line for line in columns(f"{m} % ROWS")), "}"]
        return lines


def _packs(b: TensorDescription, n: int) -> bool:
    """Whether a product packs its right operand `b` (k, n) whole: where its rows are
    not contiguous (else only the last columns that do not fill a vector)."""
    return b.element_strides[1] != 1 and n > 1


# -- the step --------------------------------------------------------------------------------

class NativeStep:
    """One program's step as a C function: `step(arrays, outs)` -> results, or None when
    C declined the call (an argument to convert, a value to reject: run the Python).

    Attributes
    ----------
    entry : ctypes function
        The C function: ``entry(fixed, arguments + results)`` returns 0 where it wrote
        the results, else nonzero, having written nothing. It checks every array's
        type, dtype, shape and flags itself, so a caller that makes the result arrays
        (`result_types`) may call it directly, with no check of its own.
    fixed : ctypes array
        Its first argument: the addresses of the arena, the constants and the dtypes.
    result_types : list of (shape, dtype)
        The arrays it writes the results into, in order.
    """

    def __init__(self, program: "Program"):
        chain = kernel_c.toolchain()
        if chain is None:
            raise kernel_c.KernelCompileError("no working C compiler")
        writer = _StepWriter(program)
        #: The generated C.
        self.source = writer.source()
        library = kernel_c.build(self.source, chain)
        entry = getattr(library.handle, ENTRY)
        entry.argtypes = [ctypes.c_void_p, ctypes.py_object]
        entry.restype = ctypes.c_int
        self.entry = entry
        #: The C function by data pointers: ``pointers_entry(fixed, addresses)``, the
        #: addresses of the arguments' then the results' data (an array of void*), with
        #: no check at all: the caller has checked each array's dtype, shape and
        #: layout (C-contiguous, aligned; results writeable) against `result_types` and
        #: the program's parameters.
        self.pointers_entry = getattr(library.handle, POINTERS_ENTRY)
        self.pointers_entry.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        self.pointers_entry.restype = ctypes.c_int
        # what the pointers point to
        self._keep = [writer.arena, *writer.constants, *writer.dtypes]
        pointers = [writer.arena.ctypes.data, id(np.ndarray),
                    *(array.ctypes.data for array in writer.constants),
                    *(id(dtype) for dtype in writer.dtypes)]
        self.fixed = (ctypes.c_void_p * len(pointers))(*pointers)
        self.result_types = [(program.shapes[r], r.element_type.dtype)
                             for r in program.function.results]

    def __call__(self, arrays: tuple, outs: tuple) -> Optional[tuple]:
        results = tuple(o if o is not None else np.empty(*e)
                        for o, e in zip(outs, self.result_types))
        if self.entry(self.fixed, arrays + results):
            return None
        return results
