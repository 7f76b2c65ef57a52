"""Fused groups as blocked NumPy: the engine that needs nothing but NumPy.

Why blocks: op-by-op NumPy makes one full-size temporary per op and streams
each through main memory. Running the group's ufuncs over one block of
`BLOCK` elements at a time, with ``out=`` into a few block-sized scratch
buffers reused for every block, keeps the working set in the L2 cache and the
extra memory at a few blocks whatever the array size. Large elementwise
groups split their blocks over worker threads (`parallel`: ufuncs release
the GIL), each with buffers of its own, in blocks small enough that all of
them together stay within a quarter of the output (`SCRATCH_SHARE`). An op
whose value is 1 / a denominator it declares (`numpy_denominator`: sigmoid's
``1 + exp(-x)``) is computed as that and one division, and ``x * sigmoid(y)``
divides by the denominator instead of multiplying by its reciprocal (one
pass fewer). Measured on the development machine (2 cores):
``tanh(a*b+c)*sigmoid(d)-e`` over 4M f32 in ~3.7 ms against ~7.8 ms for
naive NumPy (`python -m benchmarks.elementwise`), and ``sum((x-y)**2)``
with no full-size temporary at all.

The kernel is generated Python (`NumpyKernel.source`), one line per ufunc,
so it can be read and stepped through. Semantics are the interpreter's
kernels (axgraph/core/interpreter.py), op by op: the same ufuncs, integer
Divide truncating toward zero (and its error on a zero divisor),
NaN-propagating maximum/minimum and Max/Min. A group's reduction
reduces with the ufunc it declares (`reduce_ufunc`); float sums and products
accumulate each block in float64 and combine the block results in order (more
accurate than the reference's float32 sum, never less); integer ones wrap in
their own type, as the reference's do.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

import numpy as np

from ... import core
from ...core.node import Node
from ...core.traits import name_in, numpy_denominator, numpy_function, takes_out, ufunc_name
from ...dtypes import is_bfloat16
from ...errors import ExecutionError
from ...op_table import OpTable
from . import parallel, runtime
from .group import (FusedGroup, concrete_shape, group_shapes, is_scalar_constant, op_family,
                     prepare_call)

# Elements per block: 64K f32 = 256 KiB per scratch buffer. Measured here (chain over
# 4M f32, L2 over 10M f32), 4K..256K: 4K 33/12.9 ms, 16K 28/7.9, 64K 26.5/6.6, 256K
# 26.5/6.9: smaller blocks pay per-call overhead, larger ones spill the cache.
BLOCK = 65536
#: Elementwise groups this large split their blocks over the worker threads
#: (ufuncs release the GIL); below it one thread is faster than waking another.
PARALLEL_MIN = 1 << 18
#: The share of the output's bytes that all workers' block buffers together may take: with
#: 16 workers, blocks of BLOCK elements needed 3x the output of a 1M-element chain.
SCRATCH_SHARE = 0.25
#: Blocks never shrink below this many elements for SCRATCH_SHARE (the 4K row above: per-
#: call overhead starts to show).
MIN_BLOCK = 4096


def power_int(a, b, out: np.ndarray) -> None:
    """Integer a ** b into `out`; negative exponents are an error, as in the reference."""
    if np.any(np.asarray(b) < 0):
        raise ExecutionError("integers to negative integer powers are not allowed")
    np.power(a, b, out=out)


def _literal(value: np.ndarray, dtype: np.dtype) -> str:
    """Python text that rebuilds a scalar exactly (repr of a float round-trips)."""
    item = value.item()
    if isinstance(item, float):
        if item != item:
            text = "float('nan')"
        elif item in (float("inf"), float("-inf")):
            text = "float('inf')" if item > 0 else "-float('inf')"
        else:
            text = repr(item)
    else:
        text = repr(item)
    return f"np.asarray({text}, dtype={_dtype_text(dtype)})"


def _dtype_text(dtype: np.dtype) -> str:
    """Python text for `dtype` in a kernel: `np.float32`; bfloat16 (not a NumPy
    attribute) by its registered name."""
    return f'np.dtype("{dtype.name}")' if is_bfloat16(dtype) else f"np.{dtype.name}"


class _Writer:
    """Generates the Python of one group: a `block(start, stop, d)` function and drivers."""

    def __init__(self, group: FusedGroup):
        self.group = group
        self.constants: List[str] = []       # module-level literal definitions
        self.functions: Dict[str, Callable] = {}   # reference functions the kernel calls
        self.buffers: List[np.dtype] = []   # scratch buffer dtypes, by id
        self.free: Dict[np.dtype, List[int]] = {}
        self.lines: List[str] = []           # the block body
        self.values: Dict[Node, str] = {}
        self.temp: Dict[Node, Optional[int]] = {}   # node -> scratch buffer id
        self.indexed: set = set()
        members = group.elementwise_nodes
        self.last_use: Dict[Node, int] = {}
        users: Dict[Node, List[Node]] = {}
        for k, node in enumerate(members):
            for x in node.inputs:
                self.last_use[x] = k
                users.setdefault(x, []).append(node)
        #: Ops declaring their value as 1 / a denominator (`numpy_denominator`: sigmoid's
        #: 1 + exp(-x)) left as the denominator: their one user, a Multiply, divides by
        #: it instead (one pass fewer, one rounding fewer).
        self.denominators = {node for node in members
                             if numpy_denominator(type(node)) is not None
                             and node is not group.elementwise_output
                             and [type(u) for u in users.get(node, ())] == [core.Multiply]
                             and users[node][0].inputs[0] is not users[node][0].inputs[1]}
        final = group.elementwise_output
        self.last_use[final] = len(members)  # live until the block returns
        for j, x in enumerate(group.inputs):
            if is_scalar_constant(x):
                self.values[x] = self._constant(x)
            elif any(x in m.inputs for m in members if op_family(m) != "broadcast") or x is final:
                self.indexed.add(j)
                self.values[x] = f"a{j}"
            else:
                self.values[x] = f"in{j}"  # a 0-d array: only Broadcast reads it
        for k, node in enumerate(members):
            self._member(k, node, final)

    # -- helpers --------------------------------------------------------------------------
    def _constant(self, node: Node) -> str:
        name = f"k{len(self.constants)}"
        dtype = node.element_type.dtype
        self.constants.append(f"{name} = {_literal(node.attributes['value'], dtype)}")
        return name

    def _scalar(self, dtype: np.dtype, value: int) -> str:
        name = f"k{len(self.constants)}"
        self.constants.append(f"{name} = np.asarray({value}, dtype={_dtype_text(dtype)})")
        return name

    def _allocate(self, dtype: np.dtype) -> int:
        pool = self.free.setdefault(dtype, [])
        if pool:
            return pool.pop()
        self.buffers.append(dtype)
        return len(self.buffers) - 1

    def _release(self, k: int, node: Node) -> None:
        """Return the scratch of `node`'s operands that die at member k."""
        for x in dict.fromkeys(node.inputs):
            buffer = self.temp.get(x)
            if buffer is not None and self.last_use.get(x) == k:
                self.free[self.buffers[buffer]].append(buffer)
                self.temp[x] = None

    def _target(self, node: Node, final: Node) -> str:
        if node is final:
            return "d"
        buffer = self._allocate(node.element_type.dtype)
        self.temp[node] = buffer
        return f"buf{buffer}[:m]"

    # -- members ----------------------------------------------------------------------------
    def _member(self, k: int, node: Node, final: Node) -> None:
        family = op_family(node)
        if family == "constant":
            self.values[node] = self._constant(node)
            if node is final:
                self.lines.append(f"np.copyto(d, {self.values[node]})")
                self.values[node] = "d"
            return
        if family == "broadcast":
            self.values[node] = self.values[node.inputs[0]]
            if node is final:
                self.lines.append(f"np.copyto(d, {self.values[node]}.reshape(-1)[0])")
                self.values[node] = "d"
            return
        args = [self.values[x] for x in node.inputs]
        dtype = node.element_type.dtype
        found = self._ufunc(node)
        single_ufunc = found is not None
        if single_ufunc:  # a ufunc may write over an operand that dies here
            self._release(k, node)
        name = f"t{k}" if node is not final else "d"
        target = self._target(node, final)
        if node is not final:
            self.lines.append(f"{name} = {target}")
        self.values[node] = name
        if single_ufunc:
            assert found is not None
            ufunc, args = found
            self.lines.append(f"np.{ufunc}({', '.join(args)}, out={name})")
        else:
            self._composite(node, args, name, dtype)
            self._release(k, node)

    def _ufunc(self, node: Node) -> Optional[Tuple[str, List[str]]]:
        """(ufunc name, arguments) when one ufunc computes the node exactly."""
        args = [self.values[x] for x in node.inputs]
        if isinstance(node, core.Multiply):  # x * sigmoid(y) = x / (1 + exp(-y)), say
            for k, x in enumerate(node.inputs):
                if x in self.denominators:
                    return "divide", [args[1 - k], args[k]]
        special = UFUNCS.lookup(type(node))
        if special is not None:
            return special(node, args)
        name = ufunc_name(type(node))
        return None if name is None else (name, args)

    def _composite(self, node: Node, args: List[str], name: str, dtype: np.dtype) -> None:
        """Ops that take several NumPy calls (never writing over their operands early)."""
        write = COMPOSITES.lookup(type(node))
        if write is None:
            raise ExecutionError(f"the blocked NumPy engine has no code for {node.op}")
        write(self, node, args, name, dtype)

    # -- the whole text -----------------------------------------------------------------------
    def source(self) -> str:
        group = self.group
        final = group.elementwise_output
        n_in = len(group.inputs)
        lines = ['"""axgraph fused kernel (blocked NumPy): '
                 + " ".join(f"{n.op}:{n.element_type}" for n in group.nodes) + '"""']
        lines += self.constants
        lines.append("")
        lines.append("def kernel(ins, out, outer, inner, block_size, direct, lo, hi, scratch):")
        if n_in:
            lines.append(f"    {', '.join(f'in{j}' for j in range(n_in))}, = ins")
        lines.append(f"    {''.join(f'buf{b}, ' for b in range(len(self.buffers)))}fin, = scratch")
        lines.append("")
        lines.append("    def block(start, stop, d):")
        lines.append("        m = stop - start")
        for j in sorted(self.indexed):
            lines.append(f"        a{j} = in{j}[start:stop] if in{j}.ndim else in{j}")
        for line in self.lines:
            lines.append("        " + line)
        result = self.values[final]
        if result != "d" and result.startswith("a"):  # a lone reduction of an input
            lines.append(f"        return {result} if {result}.ndim else "
                         f"np.broadcast_to({result}, (m,))")
        elif result != "d":
            lines.append(f"        np.copyto(d, {result})")
            lines.append("        return d")
        else:
            lines.append("        return d")
        lines.append("")
        if group.reduction is None:
            lines += [
                "    o = out.reshape(-1)",
                "    for start in range(lo, hi, block_size):",
                "        stop = min(start + block_size, hi)",
                "        if direct:",
                "            block(start, stop, o[start:stop])",
                "        else:  # out is one of the inputs: compute aside, then copy",
                "            o[start:stop] = block(start, stop, fin[:stop - start])",
                "    return out"]
            return "\n".join(lines) + "\n"
        # the reduction's declared ufunc; float values accumulate in float64 where it
        # declares a wide accumulator, integers in their own type (wrapping as the
        # reference's do)
        reduction = group.reduction
        assert reduction.reduce_ufunc is not None  # a group's reduction declares one
        ufunc = reduction.reduce_ufunc.__name__
        element = final.element_type
        wide = reduction.wide_accumulator and element.is_float
        acc = "np.float64" if wide else _dtype_text(element.dtype)
        rows_reduce = f"np.{ufunc}.reduce(v, axis=1, dtype={acc}, out=part[:r1 - r0])"
        one_reduce = f"np.{ufunc}.reduce(v, dtype={acc})"
        combine = f"total = s if total is None else np.{ufunc}(total, s)"
        lines += [
            "    o = out.reshape(-1)",
            "    if inner <= block_size:  # whole rows per block",
            "        rows = max(1, block_size // inner)",
            f"        part = np.empty(rows, dtype={acc})",
            "        for r0 in range(0, outer, rows):",
            "            r1 = min(r0 + rows, outer)",
            "            v = block(r0 * inner, r1 * inner, fin[:(r1 - r0) * inner])",
            "            v = v.reshape(r1 - r0, inner)",
            f"            {rows_reduce}",
            "            o[r0:r1] = part[:r1 - r0]",
            "        return out",
            "    for r in range(outer):  # long rows: blocks of one row, block sums in order",
            "        total = None",
            "        for start in range(r * inner, (r + 1) * inner, block_size):",
            "            stop = min(start + block_size, (r + 1) * inner)",
            "            v = block(start, stop, fin[:stop - start])",
            f"            s = {one_reduce}",
            f"            {combine}",
            "        o[r] = total",
            "    return out"]
        return "\n".join(lines) + "\n"


# -- what each op becomes ---------------------------------------------------------------------
# Elementwise ops are computed with their declared reference (`numpy` trait: a ufunc in one
# call, another function with `out=`), or as 1 / the denominator they declare
# (`numpy_denominator`), or with the cpu's own function (`runtime.OWN_FUNCTIONS`); the
# tables below hold only this engine's own forms.

Ufunc = Callable[[Node, List[str]], Optional[Tuple[str, List[str]]]]
#: Ops computed by one ufunc other than their reference's, or by none (then a composite).
UFUNCS: OpTable[Ufunc] = OpTable("blocked NumPy ufunc")


@UFUNCS.register(core.Divide)
def _divide(node: Node, args: List[str]) -> Optional[Tuple[str, List[str]]]:
    return None if node.element_type.is_integral else ("divide", args)


@UFUNCS.register(core.Power)
def _power(node: Node, args: List[str]) -> Optional[Tuple[str, List[str]]]:
    if node.element_type.is_integral:
        return None
    exponent = node.inputs[1]
    if is_scalar_constant(exponent) and float(exponent.attributes["value"]) == 2.0:
        return "square", args[:1]   # exact, and far faster than pow
    return "power", args


Composite = Callable[[_Writer, Node, List[str], str, np.dtype], None]
#: Ops written as several NumPy calls into `name`, `write(writer, node, args, name, dtype)`.
COMPOSITES: OpTable[Composite] = OpTable("blocked NumPy composite")


@COMPOSITES.register(Node, when=lambda op_class: numpy_function(op_class) is not None)
def _reference(writer: _Writer, node: Node, args: List[str], name: str, dtype: np.dtype) -> None:
    """The op's declared denominator and one division (np.divide by the array:
    np.reciprocal is several times slower on float32), none where a Multiply divides by
    it; else its reference function."""
    denominator = numpy_denominator(type(node))
    if denominator is not None:
        writer.lines.append(f"{name_in(writer.functions, denominator)}({', '.join(args)}, "
                            f"out={name})")
        if node not in writer.denominators:
            writer.lines.append(f"np.divide({writer._scalar(dtype, 1)}, {name}, out={name})")
        return
    function = numpy_function(type(node))
    assert function is not None  # the entry's condition
    call = f"{name_in(writer.functions, function)}({', '.join(args)}"
    if takes_out(function):
        writer.lines.append(f"{call}, out={name})")
    else:
        writer.lines.append(f"np.copyto({name}, {call}))")


@COMPOSITES.register(*runtime.OWN_FUNCTIONS)
def _own_function(writer: _Writer, node: Node, args: List[str], name: str,
                  dtype: np.dtype) -> None:
    function = runtime.OWN_FUNCTIONS.lookup(type(node))
    assert function is not None  # registered for these ops
    writer.lines.append(f"{name_in(writer.functions, function)}({', '.join(args)}, {name})")


@COMPOSITES.register(core.Power)
def _power_int(writer: _Writer, node: Node, args: List[str], name: str, dtype: np.dtype) -> None:
    writer.lines.append(f"power_int({args[0]}, {args[1]}, {name})")


class NumpyKernel:
    """A fused group run as blocked NumPy: `kernel(*inputs, out=array)` fills `out`.

    Inputs may be any layout: C-contiguous ones are sliced in place, arrays
    broadcast with all-zero strides are used as one scalar, others are copied
    contiguous first. An elementwise group's `out` may be a transposed dense
    array: every operand is then walked in its memory order. `out` may be
    exactly one of the inputs.
    """

    engine = "numpy"

    def __init__(self, group: FusedGroup, shapes: Mapping[Node, Tuple[int, ...]],
                 block_size: int = BLOCK):
        self.group = group
        self.block_size = int(block_size)
        _, self.out_shape, self.outer, self.inner = group_shapes(group, shapes)
        # Elements per block for this kernel's size (fixed once the shapes are).
        self._call_block = max(1, min(self.block_size, self.outer * self.inner))
        self.in_shapes = [concrete_shape(x, shapes) for x in group.inputs]
        writer = _Writer(group)
        self._indexed = writer.indexed
        self._scratch_types = writer.buffers + [group.elementwise_output.element_type.dtype]
        # per worker: (buffers, their block size, whether the last is allocated), made once
        self._scratch: Dict[int, Tuple[tuple, int, bool]] = {}
        self._multi_step_final = (group.reduction is None
                                  and writer._ufunc(group.output) is None)
        self.source = writer.source()
        namespace: Dict[str, Any] = {"np": np, "power_int": power_int, **writer.functions}
        exec(compile(self.source, "<axgraph fused NumPy kernel>", "exec"), namespace)
        self._kernel = namespace["kernel"]

    def __call__(self, *arrays: np.ndarray, out: np.ndarray) -> np.ndarray:
        given, group = out, self.group
        walked = prepare_call("fused NumPy kernel", self, arrays, out)
        if walked is None:
            return out
        arrays, out = walked
        prepared = []
        direct = True
        for j, array in enumerate(arrays):  # prepare_call returned ndarrays
            if j not in self._indexed:
                prepared.append(array.reshape(()) if array.size == 1 else array)
                continue
            if array.size > 1 and not any(array.strides):
                prepared.append(np.array(array[(0,) * array.ndim]))  # broadcast: one value
                continue
            if not array.flags.c_contiguous:
                array = np.ascontiguousarray(array)
            if np.may_share_memory(array, out):
                if group.reduction is None and array.ctypes.data == out.ctypes.data:
                    direct = direct and not self._multi_step_final
                else:
                    array = array.copy()
            prepared.append(array.reshape(-1))
        total = self.outer if group.reduction is None else 0
        block = self._call_block
        spans = parallel.spans(total, block, PARALLEL_MIN)
        if len(spans) > 1:
            block = self._worker_block(len(spans))
            spans = parallel.spans(total, block, PARALLEL_MIN)
        run = functools.partial(self._kernel, tuple(prepared), out, self.outer, self.inner,
                                block, direct)
        # the last buffer holds a block aside: read only for reductions, or when out is an
        # input of a group whose last op takes several steps
        aside = group.reduction is not None or not direct
        parallel.run_spans(lambda worker, lo, hi: self._quiet(run, lo, hi, worker, block, aside),
                           spans or [(0, self.outer)])
        return given

    def _worker_block(self, workers: int) -> int:
        """Elements per block when `workers` threads share the call: all their buffers
        together at most SCRATCH_SHARE of the output's bytes, in blocks of MIN_BLOCK to
        `_call_block` elements."""
        budget = SCRATCH_SHARE * self.outer * self.inner * self.group.output.element_type.dtype\
            .itemsize
        per_element = sum(np.dtype(dtype).itemsize for dtype in self._scratch_types)
        return max(MIN_BLOCK, min(self._call_block, int(budget // (workers * per_element))))

    def _quiet(self, run, lo: int, hi: int, worker: int, block: int, aside: bool) -> None:
        """Blocks lo..hi with this worker's scratch; IEEE flags ignored (the state is
        per thread, so each worker sets it itself)."""
        scratch, size, has_aside = self._scratch.get(worker, ((), 0, False))
        if size != block or (aside and not has_aside):
            *buffers, last = self._scratch_types
            scratch = tuple(np.empty(block, dtype) for dtype in buffers) + (
                np.empty(block if aside else 0, last),)
            self._scratch[worker] = (scratch, block, aside)
        with np.errstate(all="ignore"):
            run(lo, hi, scratch)

    def __repr__(self) -> str:
        return f"<NumpyKernel {self.group!r}>"
