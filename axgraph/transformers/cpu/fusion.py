"""Fusion: which core nodes run together as one kernel, and compiling that kernel.

Why fuse: a chain such as ``tanh(a*b + c) * sigmoid(d) - e`` run op by op
writes and re-reads a full-size temporary per op, so it is bound by memory
traffic and allocation; ``sum((x - y)**2)`` even materialises a full-size
array only to reduce it to one number. A fused kernel reads each input once,
keeps the intermediates in registers (C) or in small cache-sized scratch
blocks (NumPy), and writes only the group's output.

A group (`FusedGroup`) is a convex set of elementwise nodes of one shape,
optionally ending in a reduction over all or the trailing dims. Only the
group's `output` is seen outside the group, so nothing inside needs a buffer
of its own. Groups are found greedily from the consumers back to their
producers (`find_fusion_groups`), and `compile_group` builds a kernel for one
group with the engine chosen by measurement (see benchmarks/fusion_kernels.py):
generated C where a C compiler exists, blocked NumPy everywhere else.
"""
from __future__ import annotations

import heapq
import warnings
from dataclasses import dataclass
from typing import List, Mapping, Optional, Sequence, Set, Tuple

from ... import core
from ...core.node import Node
from ...core.traits import is_elementwise
from ...errors import ExecutionError, ShapeError
from ...op_table import OpTable
from ...strides import dense_order

#: The reductions a group may end in, by the kind both engines accumulate.
REDUCTIONS: OpTable[str] = OpTable("fused reduction",
                                   {core.Sum: "sum", core.Max: "max", core.Min: "min"})


@dataclass(frozen=True)
class FusedGroup:
    """Nodes that run as one kernel.

    nodes: the members in topological order (the reduction, if any, is last).
    inputs: the external nodes the members read, in order of first use; the
        kernel takes one array per input, in this order.
    output: the member whose value leaves the group (the reduction if there
        is one). Every other member is used only by members and is not a
        function result, so it never needs memory of its own.
    reduction: None, or the final Sum/Max/Min, which reduces all dims or the
        trailing dims of its input (so each output element reduces one
        contiguous run of the elementwise values).
    """

    nodes: Tuple[Node, ...]
    inputs: Tuple[Node, ...]
    output: Node
    reduction: Optional[Node] = None

    @property
    def elementwise_output(self) -> Node:
        """The last elementwise value: the reduction's input, or the output."""
        return self.reduction.inputs[0] if self.reduction is not None else self.output

    @property
    def elementwise_nodes(self) -> Tuple[Node, ...]:
        """The members computed per element (every member but the reduction)."""
        return self.nodes[:-1] if self.reduction is not None else self.nodes

    def __repr__(self) -> str:
        ops = " ".join(n.op for n in self.nodes)
        return f"<FusedGroup [{ops}] -> {self.output.name} {self.output.type_str()}>"


# -- what may join a group ------------------------------------------------------------------

def op_family(node: Node) -> Optional[str]:
    """The elementwise family the op declares ('unary', 'binary', 'compare', 'logical',
    'select', 'convert': axgraph/core/traits.py), 'broadcast', 'constant' or None.

    None means the node cannot be a member. Broadcast joins only when it
    repeats a single element (a scalar, or a Constant with one fill value),
    because then the kernel reads one value instead of an indexed array;
    a Constant joins only when one scalar fills it (a literal in the kernel).
    """
    if is_elementwise(type(node)):
        return node.family
    if isinstance(node, core.Broadcast):
        (x,) = node.inputs
        if is_scalar_constant(x) or (x.shape.is_static and x.shape.size == 1):
            return "broadcast"
        return None
    if is_scalar_constant(node):
        return "constant"
    return None


def reads_partial_broadcast(node: Node) -> bool:
    """Whether an input of `node` is a Broadcast (or a view of one) of more than one
    element: the flat kernels would have to materialize it in full on every call,
    while a lone NumPy ufunc broadcasts it for free."""
    for x in node.inputs:
        while isinstance(x, (core.Transpose, core.Reshape, core.Slice, core.Reverse)):
            (x,) = x.inputs
        if isinstance(x, core.Broadcast) and op_family(x) is None:
            return True
    return False


def is_scalar_constant(node: Node) -> bool:
    """A Constant whose value is one scalar (a fill, or a rank-0 constant)."""
    return isinstance(node, core.Constant) and node.attributes["value"].ndim == 0


def is_fusible_reduction(node: Node) -> bool:
    """Sum/Max/Min over all dims or the trailing dims of its input.

    Trailing dims make each output element the reduction of one contiguous
    run of the (row-major) elementwise values, which both engines walk as a
    flat loop; other axes would need a transpose and are left unfused.
    """
    if REDUCTIONS.lookup(type(node)) is None:
        return False
    rank = node.inputs[0].rank
    axes = tuple(sorted(node.attributes["axes"]))
    return axes == tuple(range(rank - len(axes), rank))


def reduction_kind(node: Node) -> str:
    """'sum', 'max' or 'min'."""
    kind = REDUCTIONS.lookup(type(node))
    if kind is None:
        raise TypeError(f"{node.op} is not a fusible reduction")
    return kind


# -- finding groups ---------------------------------------------------------------------------

def find_fusion_groups(function: core.Function) -> List[FusedGroup]:
    """Disjoint groups worth fusing, in the function's node order.

    Greedy producer absorption, from the last node back: each node not yet in
    a group that can end a group (an elementwise member, or a fusible
    reduction) starts one, and absorbs a producer when the producer is a
    member op of the group's shape, is not a function result and all of its
    users are already in the group. Candidates are taken latest-first (a
    heap on node position), so when a producer is examined every one of its
    users has already been decided; the group is therefore the largest one
    this rule allows, and convex (no path leaves it and comes back). A group
    with a single computing member and no reduction saves nothing and is
    dropped (Constant members, being literals, do not count). A node reading
    a broadcast of more than one element (a bias) stays out: a lone ufunc
    broadcasts it for free, a flat kernel would copy it out in full.
    """
    nodes = function.nodes
    position = {node: index for index, node in enumerate(nodes)}
    users = function.users()
    results: Set[Node] = set(function.results)
    taken: Set[Node] = set()
    groups: List[FusedGroup] = []

    for root in reversed(nodes):
        if root in taken:
            continue
        if reads_partial_broadcast(root):
            continue
        if is_fusible_reduction(root):
            reduction: Optional[Node] = root
            shape = root.inputs[0].shape
        elif op_family(root) not in (None, "constant"):
            reduction = None
            shape = root.shape
        else:
            continue
        members: Set[Node] = {root}
        pending: List[Tuple[int, str, Node]] = []
        queued: Set[Node] = set()

        # The defaults bind this iteration's collections (offer runs only within it).
        def offer(node: Node, queued=queued, members=members, taken=taken,
                  pending=pending) -> None:
            if node not in queued and node not in members and node not in taken:
                queued.add(node)
                heapq.heappush(pending, (-position[node], node.name, node))

        for x in root.inputs:
            offer(x)
        while pending:
            _, _, candidate = heapq.heappop(pending)
            if (op_family(candidate) is None or candidate.shape != shape
                    or candidate in results or reads_partial_broadcast(candidate)
                    or any(user not in members for user in users[candidate])):
                continue
            members.add(candidate)
            for x in candidate.inputs:
                offer(x)

        computing = sum(1 for m in members if m is not reduction and op_family(m) != "constant")
        if reduction is None and computing < 2:
            continue
        ordered = tuple(sorted(members, key=position.__getitem__))
        inputs: List[Node] = []
        for member in ordered:
            for x in member.inputs:
                if x not in members and x not in inputs:
                    inputs.append(x)
        groups.append(FusedGroup(ordered, tuple(inputs), root, reduction))
        taken |= members

    groups.sort(key=lambda g: position[g.output])
    return groups


# -- compiling a group --------------------------------------------------------------------------

ENGINES = ("auto", "c", "numpy")
C_ELEMENT_TYPES = ("f32", "f64", "boolean")


def available_engines() -> List[str]:
    """'numpy' always; 'c' too when a working C compiler is found (checked once per compiler)."""
    from . import kernel_c

    return ["numpy", "c"] if kernel_c.c_available() else ["numpy"]


def c_accepts(group: FusedGroup) -> bool:
    """Whether the C engine handles the group: every value f32, f64 or boolean.

    Integer semantics (wrapping, truncating division, its division-by-zero
    error) and f16/bf16 stay with NumPy, which already matches the reference.
    """
    values = tuple(group.nodes) + tuple(group.inputs)
    return all(node.element_type.name in C_ELEMENT_TYPES for node in values)


def concrete_shape(node: Node, shapes: Mapping[Node, Tuple[int, ...]]) -> Tuple[int, ...]:
    """The node's shape as ints: from `shapes`, or from the node if static."""
    if node in shapes:
        return tuple(int(d) for d in shapes[node])
    if node.shape.is_static:
        return tuple(int(d) for d in node.shape)
    raise ShapeError(f"compile_group: no concrete shape given for {node.op} {node.name} "
                     f"{node.type_str()}")


def compile_group(group: FusedGroup, shapes: Mapping[Node, Tuple[int, ...]],
                  engine: str = "auto", fast_math: bool = False):
    """A kernel for `group`: `kernel(*input_arrays, out=array)` writes the output into `out`.

    engine: "c" (generated C, compiled and cached on disk), "numpy" (blocked
    ufuncs) or "auto": C when a compiler works, every value is f32/f64/
    boolean and every op declares its C expression, else NumPy; a C kernel that fails to build falls back to NumPy
    with a warning under "auto" (and raises under "c").
    fast_math: let the C compiler reassociate and assume no NaN/inf
    (-ffast-math); off by default because NaN propagation is part of the
    semantics users rely on.
    The result has `.engine` ("c" or "numpy") and `.source` (the C or Python).
    """
    if engine not in ENGINES:
        raise ValueError(f"compile_group: engine must be one of {ENGINES}, not {engine!r}")
    from . import kernel_numpy

    if engine in ("auto", "c"):
        from . import kernel_c

        if engine == "c" or (c_accepts(group) and kernel_c.has_code(group)
                             and kernel_c.c_available()):
            try:
                return kernel_c.CKernel(group, shapes, fast_math=fast_math)
            except kernel_c.KernelCompileError as error:
                if engine == "c":
                    raise
                warnings.warn(f"fused C kernel unavailable, using NumPy: {error}",
                              RuntimeWarning, stacklevel=2)
    return kernel_numpy.NumpyKernel(group, shapes)


def group_shapes(group: FusedGroup, shapes: Mapping[Node, Tuple[int, ...]]
                 ) -> Tuple[Tuple[int, ...], Tuple[int, ...], int, int]:
    """(elementwise shape, output shape, outer, inner) of a group, as ints.

    outer is the number of output elements, inner the number of elementwise
    values each one reduces (1 without a reduction).
    """
    element_shape = concrete_shape(group.elementwise_output, shapes)
    out_shape = concrete_shape(group.output, shapes)
    size = 1
    for d in element_shape:
        size *= d
    if group.reduction is None:
        return element_shape, out_shape, size, 1
    reduced = len(group.reduction.attributes["axes"])
    inner = 1
    for d in element_shape[len(element_shape) - reduced:]:
        inner *= d
    outer = 1
    for d in out_shape:
        outer *= d
    return element_shape, out_shape, outer, inner


def check_call(kernel_name: str, group: FusedGroup, in_shapes: Sequence[Tuple[int, ...]],
               out_shape: Tuple[int, ...], arrays: Sequence, out) -> list:
    """Argument checks shared by both engines (count, dtypes, shapes, `out`).

    Returns the input arrays, each of its node's shape: an array that only
    broadcasts to it (a size-1 stand-in for a broadcast value) becomes a
    zero-stride view, which the engines read as one element without copying.
    """
    import numpy as np

    if len(arrays) != len(group.inputs):
        raise ExecutionError(f"{kernel_name}: takes {len(group.inputs)} input array(s), got "
                             f"{len(arrays)}")
    checked = []
    for k, (array, node, shape) in enumerate(zip(arrays, group.inputs, in_shapes)):
        if not isinstance(array, (np.ndarray, np.generic)):
            raise ExecutionError(f"{kernel_name}: input {k} is {type(array).__name__}, not an "
                                 f"array")
        array = np.asarray(array)
        if array.shape != shape and array.dtype == node.element_type.dtype:
            try:
                array = np.broadcast_to(array, shape)
            except ValueError:
                pass
        if array.dtype != node.element_type.dtype or array.shape != shape:
            raise ExecutionError(f"{kernel_name}: input {k} ({node.name}) is {array.dtype}"
                                 f"{list(array.shape)}, expected "
                                 f"{node.element_type.dtype}{list(shape)}")
        checked.append(array)
    node = group.output
    if not isinstance(out, np.ndarray):
        raise ExecutionError(f"{kernel_name}: out= must be a NumPy array")
    if out.dtype != node.element_type.dtype or out.shape != out_shape:
        raise ExecutionError(f"{kernel_name}: out is {out.dtype}{list(out.shape)}, the output "
                             f"({node.name}) is {node.element_type.dtype}{list(out_shape)}")
    dense = out.flags.c_contiguous or (group.reduction is None and memory_order(out) is not None)
    if not dense or not out.flags.writeable:
        raise ExecutionError(f"{kernel_name}: out must be writeable and C-contiguous (an "
                             f"elementwise group also takes a transposed dense array)")
    return checked


def prepare_call(kernel_name: str, kernel, arrays: Sequence, out) -> Optional[tuple]:
    """What both engines do first: check the call (`check_call`), answer an empty one
    (`finish_empty`: None), else the operands and `out` in the order to walk them."""
    arrays = check_call(kernel_name, kernel.group, kernel.in_shapes, kernel.out_shape,
                        arrays, out)
    if finish_empty(kernel.group, kernel.outer, kernel.inner, out):
        return None
    return in_memory_order(arrays, out)


def memory_order(array) -> Optional[Tuple[int, ...]]:
    """Axes from outermost to innermost when `array` densely fills its bytes
    in some axis order (a transpose of a C-contiguous array), else None."""
    return dense_order(array.shape, array.strides, array.itemsize)


def in_memory_order(arrays: Sequence, out):
    """An elementwise group's operands transposed so that `out` is C-contiguous.

    Elementwise values do not depend on the axis order, so a kernel may walk a
    transposed output (a buffer the planner laid out like its inputs) in memory
    order, as long as every operand is walked in the same order.
    """
    if out.flags.c_contiguous:
        return arrays, out
    order = memory_order(out)
    return ([a.transpose(order) if a.shape == out.shape else a for a in arrays],
            out.transpose(order))


def finish_empty(group: FusedGroup, outer: int, inner: int, out) -> bool:
    """True when a call has no elements to visit; `out` then already holds the answer
    (an empty output, or a sum over nothing, filled with 0)."""
    if outer * inner:
        return False
    if group.reduction is not None and outer:
        if reduction_kind(group.reduction) != "sum":
            raise empty_reduction_error(group)
        out.fill(0)
    return True


def empty_reduction_error(group: FusedGroup) -> ExecutionError:
    """The interpreter's error for Max/Min over an empty dim."""
    node = group.reduction
    assert node is not None  # called only for a group with a reduction
    return ExecutionError(f"{node.op} {node.name}: {node.op.lower()} over an empty dim",
                          node.location)

