"""Fusion: which core nodes run together as one kernel, the pass that fuses them, and
compiling that kernel.

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
producers (`find_fusion_groups`); `FusionPass` replaces each group worth a
kernel with a `core.Fused` node carrying the group as its body, so fusion
shows in the printed IR and every later stage (schedule, memory plan,
codegen) sees one node. The cpu backend runs it per binding of the size
variables (`fuse`), in a PassManager like every pass: verified, traced with
AXGRAPH_TRACE_PASSES, each group it fuses counted as a rule that fired
("fuse-elementwise", "fuse-reduction"). `compile_fused` builds the kernel of one Fused node
with the engine chosen by measurement (see benchmarks/fusion_kernels.py):
generated C where a C compiler exists, blocked NumPy everywhere else.
"""
from __future__ import annotations

import heapq
import math
import warnings
from typing import Dict, List, Mapping, Optional, Set, Tuple

from ... import core
from ...core.node import Node, at_location
from ...passes.manager import Pass, PassManager
from ...passes.rewrite_log import record_rewrite
from ...traversal import post_order
from . import kernel_c, kernel_blocked_numpy, native_step, rows
from .group import (FusedGroup, c_accepts, is_row_op, is_scalar_constant, op_family,
                    reduces_in_groups, zeroed_rows_softmax)

#: A multi-pass row group (a normalization) replaces a dozen NumPy calls with one: it is
#: fused from this fraction of the pass's `min_elements` on.
ROW_PASSES_DISCOUNT = 16

# -- what may join a group ------------------------------------------------------------------

def reads_partial_broadcast(node: Node) -> bool:
    """Whether an input of `node` is a Broadcast (or one moved by other movement ops) of
    more than one element: the flat kernels would have to materialize it in full on
    every call, while a lone NumPy ufunc broadcasts it for free. A boolean one (a mask
    over every batch and head) is the exception: its copy costs a byte an element, less
    than the two passes of a lone Select (np.copyto twice) that reading it in saves."""
    for x in node.inputs:
        while x.movement and not isinstance(x, core.Broadcast):
            (x,) = x.inputs
        if (isinstance(x, core.Broadcast) and op_family(x) is None
                and x.element_type.name != "boolean"):
            return True
    return False


def is_fusible_reduction(node: Node) -> bool:
    """A reduction groups may end in (`reduces_in_groups`: one declaring its ufunc) over all
    dims or the trailing dims of its input.

    Trailing dims make each output element the reduction of one contiguous
    run of the (row-major) elementwise values, which both engines walk as a
    flat loop; other axes would need a transpose and are left unfused.
    """
    if not reduces_in_groups(type(node)):
        return False
    rank = node.inputs[0].rank
    axes = tuple(sorted(node.attributes["axes"]))
    return axes == tuple(range(rank - len(axes), rank))


def is_fusible_row_op(node: Node) -> bool:
    """A row op (`is_row_op`: softmax, log-softmax, their backprops) over the trailing
    dims: each row is one contiguous run that the kernel reads and writes in cache."""
    if not is_row_op(type(node)):
        return False
    rank = node.rank
    axes = tuple(sorted(node.attributes["axes"]))
    return axes == tuple(range(rank - len(axes), rank))


def row_broadcast(node: Node, shape) -> Optional[Tuple[str, int]]:
    """("row", k) where `node` is a Broadcast to `shape` of one value per row of the k
    trailing dims (a mean over the features, to each feature), ("column", k) where it
    is a Broadcast of one row's worth of values over the leading dims (a gain, a bias),
    else None."""
    if not isinstance(node, core.Broadcast) or node.shape != shape or \
            is_scalar_constant(node.inputs[0]):
        return None
    rank, axes = node.rank, tuple(sorted(node.attributes["axes"]))
    if not axes or len(axes) == rank:
        return None
    if axes == tuple(range(rank - len(axes), rank)):
        return "row", len(axes)
    if axes == tuple(range(len(axes))):
        return "column", rank - len(axes)
    return None


def _row_sum(node: Node, shape, dims: Optional[int]) -> bool:
    """Whether `node` is a float Sum over the trailing `dims` of a value of `shape`."""
    if type(node) is not core.Sum or node.element_type.name not in ("f32", "f64"):
        return False
    (x,) = node.inputs
    axes = tuple(sorted(node.attributes["axes"]))
    return x.shape == shape and dims == len(axes) and \
        axes == tuple(range(x.rank - len(axes), x.rank))


def find_row_groups(function: core.Function, taken: Set[Node]) -> List[FusedGroup]:
    """Multi-pass row groups (normalizations: `FusedGroup.row_dims`), each as large as
    the rule allows; their members are added to `taken`.

    From each elementwise node (latest first) of a float type, producers are
    absorbed latest-first as `find_fusion_groups` does, also taking Broadcasts
    of row values over the row and of per-column values over the rows, Sums over
    the row and elementwise ops on row values (one row structure per group: the
    first such Broadcast fixes how many trailing dims a row spans). A row value
    read outside the group (or a result) joins too, as an extra output, unless
    a path from one of its outside readers leads back into the group. A group
    without a Sum is none (the ordinary groups take its nodes).
    """
    nodes = function.nodes
    position = {node: index for index, node in enumerate(nodes)}
    users = function.users()
    results: Set[Node] = set(function.results)
    groups: List[FusedGroup] = []

    def leads_into(starts, members: Set[Node], last: int) -> bool:
        """Whether a path from `starts` reaches a member (none lies past position `last`)."""
        seen: Set[Node] = set()
        stack = list(starts)
        while stack:
            node = stack.pop()
            if node in members:
                return True
            if node not in seen and position[node] < last:
                seen.add(node)
                stack.extend(users[node])
        return False

    for root in reversed(nodes):
        if root in taken or op_family(root) in (None, "constant", "broadcast") or \
                root.rank < 2 or root.element_type.name not in ("f32", "f64"):
            continue
        shape, rank = root.shape, root.rank
        dims: Optional[int] = None
        members: Set[Node] = {root}
        extras: List[Node] = []
        pending: List[Tuple[int, str, Node]] = []
        queued: Set[Node] = set()

        def offer(node: Node, queued=queued, members=members, pending=pending) -> None:
            if node not in queued and node not in members and node not in taken:
                queued.add(node)
                heapq.heappush(pending, (-position[node], node.name, node))

        for x in root.inputs:
            offer(x)
        while pending:
            _, _, candidate = heapq.heappop(pending)
            outside = [user for user in users[candidate] if user not in members]
            kind = None
            if candidate.shape == shape:
                kind = row_broadcast(candidate, shape)
                if kind is not None:
                    if dims is not None and kind[1] != dims:
                        continue
                    dims = kind[1]
                elif op_family(candidate) is None or (op_family(candidate) == "broadcast" and
                                                      not is_scalar_constant(candidate.inputs[0])):
                    continue
                if candidate in results or outside:
                    continue
            elif dims is not None and candidate.rank == rank - dims and \
                    candidate.shape == core.Shape(tuple(shape)[:rank - dims]):
                if not (_row_sum(candidate, shape, dims) or op_family(candidate) not in
                        (None, "broadcast")):
                    continue
                if candidate in results or outside:
                    if is_scalar_constant(candidate) or leads_into(outside, members, position[root]):
                        continue
                    extras.append(candidate)
            else:
                continue
            members.add(candidate)
            if kind is not None and kind[0] == "column":
                continue  # its per-column values are an input
            for x in candidate.inputs:
                offer(x)
        if dims is None or not any(type(m) is core.Sum for m in members):
            continue
        ordered = tuple(sorted(members, key=position.__getitem__))
        group = FusedGroup(ordered, outside_inputs(ordered), root, row_dims=dims,
                           extras=tuple(sorted(extras, key=position.__getitem__)))
        if not (c_accepts(group) and kernel_c.has_code(group)):
            continue
        groups.append(group)
        taken.update(members)
    return groups


# -- finding groups ---------------------------------------------------------------------------

def find_fusion_groups(function: core.Function,
                       row_passes: Optional[bool] = None) -> List[FusedGroup]:
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
    broadcasts it for free, a flat kernel would copy it out in full. A softmax
    whose rows of nothing but -inf are set to a scalar (`zeroed_rows_softmax`)
    ends its group with that guard, when nothing else reads the guard's values.
    Multi-pass row groups (`find_row_groups`) are found first, where `row_passes`
    (default: where the C engine runs, the only one that makes them one loop).
    """
    nodes = function.nodes
    position = {node: index for index, node in enumerate(nodes)}
    users = function.users()
    results: Set[Node] = set(function.results)
    taken: Set[Node] = set()
    if row_passes is None:
        row_passes = kernel_c.c_available()
    groups: List[FusedGroup] = find_row_groups(function, taken) if row_passes else []

    for root in reversed(nodes):
        if root in taken:
            continue
        if reads_partial_broadcast(root):
            continue
        reduction: Optional[Node] = None
        row: Optional[Node] = None
        guard: Tuple[Node, ...] = ()
        guarded = zeroed_rows_softmax(root)
        if guarded is not None and all(
                n not in taken and (n is root or n not in results)
                and all(user in guarded[1] for user in users[n])
                for n in guarded[1][1:] + (guarded[0],)):
            row, guard = guarded
            shape = root.shape
        elif is_fusible_reduction(root):
            reduction = root
            shape = root.inputs[0].shape
        elif is_fusible_row_op(root):
            row = root
            shape = root.shape
        elif op_family(root) not in (None, "constant"):
            shape = root.shape
        else:
            continue
        members: Set[Node] = {root, *guard}
        if row is not None:
            members.add(row)
        pending: List[Tuple[int, str, Node]] = []
        queued: Set[Node] = set()

        # The defaults bind this iteration's collections (offer runs only within it).
        def offer(node: Node, queued=queued, members=members, taken=taken,
                  pending=pending) -> None:
            if node not in queued and node not in members and node not in taken:
                queued.add(node)
                heapq.heappush(pending, (-position[node], node.name, node))

        # a row op computes only its first operand per element (a backprop reads y as is)
        for x in row.inputs[:1] if row is not None else root.inputs:
            offer(x)
        for member in guard:  # their scalar constants
            for x in member.inputs:
                offer(x)
        while pending:
            _, _, candidate = heapq.heappop(pending)
            # A row kernel takes a partial broadcast (a mask over T and K for every N
            # and H) copied out, which costs less than the separate pass that the
            # member reading it would take otherwise.
            if (op_family(candidate) is None or candidate.shape != shape
                    or candidate in results
                    or (row is None and reads_partial_broadcast(candidate))
                    or any(user not in members for user in users[candidate])):
                continue
            members.add(candidate)
            for x in candidate.inputs:
                offer(x)

        final = reduction if reduction is not None else row
        computing = sum(1 for m in members if m is not final and op_family(m) != "constant")
        if final is None and computing < 2:
            continue
        ordered = tuple(sorted(members, key=position.__getitem__))
        groups.append(FusedGroup(ordered, outside_inputs(ordered), root, reduction, row,
                                 guard))
        taken |= members

    groups.sort(key=lambda g: position[g.output])
    return groups


def outside_inputs(members: Tuple[Node, ...]) -> Tuple[Node, ...]:
    """The nodes outside a group that its members (in order) read, in order of first
    use: the kernel's inputs."""
    inside = set(members)
    inputs: List[Node] = []
    for member in members:
        for x in member.inputs:
            if x not in inside and x not in inputs:
                inputs.append(x)
    return tuple(inputs)


# -- compiling a group --------------------------------------------------------------------------

ENGINES = ("auto", "c", "numpy")


def available_engines() -> List[str]:
    """'numpy' always; 'c' too when a working C compiler is found (checked once per compiler)."""
    return ["numpy", "c"] if kernel_c.c_available() else ["numpy"]


def compile_group(group: FusedGroup, shapes: Mapping[Node, Tuple[int, ...]],
                  engine: str = "auto", fast_math: bool = False,
                  bindings: Optional[Mapping[str, int]] = None):
    """A kernel for `group`: `kernel(*input_arrays, out=array)` writes the output into `out`.

    engine: "c" (generated C, compiled and cached on disk), "numpy" (blocked
    ufuncs) or "auto": C when a compiler works, every value is f32/f64/
    boolean and every op declares its C expression, else NumPy; a C kernel that
    fails to build falls back to NumPy with a warning under "auto" (and raises
    under "c").
    fast_math: let the C compiler reassociate and assume no NaN/inf
    (-ffast-math); off by default because NaN propagation is part of the
    semantics users rely on.
    bindings: the sizes of the size variables (for a multi-pass row group's NumPy
    kernel, which runs the members' reference kernels).
    The result has `.engine` ("c" or "numpy") and `.source` (the C or Python).
    """
    if engine not in ENGINES:
        raise ValueError(f"compile_group: engine must be one of {ENGINES}, not {engine!r}")
    if group.row_dims:
        def fallback(group, shapes):
            return rows.PassesNumpyKernel(group, shapes, bindings)
    else:
        fallback = rows.RowNumpyKernel if group.row is not None else \
            kernel_blocked_numpy.NumpyKernel
    if engine in ("auto", "c"):
        if engine == "c" or (c_accepts(group) and kernel_c.has_code(group)
                             and kernel_c.c_available()):
            try:
                return kernel_c.CKernel(group, shapes, fast_math=fast_math, bindings=bindings)
            except kernel_c.KernelCompileError as error:
                if engine == "c":
                    raise
                warnings.warn(f"fused C kernel unavailable, using NumPy: {error}",
                              RuntimeWarning, stacklevel=2)
    return fallback(group, shapes)




def compile_fused(node: core.Fused, bindings: Mapping[str, int], engine: str = "auto",
                  fast_math: bool = False):
    """The kernel of a Fused node at these sizes (see `compile_group`)."""
    shapes = {n: core.Shape(n.shape).evaluate(bindings) for n in node.function.nodes}
    return compile_group(FusedGroup.of(node), shapes, engine, fast_math, bindings)


# -- the pass -----------------------------------------------------------------------------------

class FusionPass(Pass):
    """Each group `find_fusion_groups` finds, if worth a kernel, as one `core.Fused` node.

    min_elements: a group whose largest member has fewer elements stays unfused
    (a kernel call costs more than separate NumPy calls on small arrays).
    Sizes come from `bindings` (the cpu backend runs the pass once per binding
    of the size variables); without bindings a group with a symbolic dim is
    fused, one with static shapes is measured as it is.
    row_passes: whether to form multi-pass row groups (`find_fusion_groups`; None:
    where the C engine runs; False for a program run by the NumPy engine, which would
    run such a group op by op).

    Scalar constants a group reads become literals in the body, not inputs.
    The Fused node takes the group's inputs in the order a depth-first walk
    from its output reaches them, so the fused function lists the remaining
    nodes in the same order as the unfused one (the schedule is unchanged).
    """

    name = "fusion"

    def __init__(self, min_elements: int = 0, bindings: Optional[Mapping[str, int]] = None,
                 row_passes: Optional[bool] = None):
        self.row_passes = row_passes
        self.min_elements = min_elements
        self.bindings = None if bindings is None else dict(bindings)

    def run(self, function: core.Function) -> core.Function:
        small = self._runs_natively(function)
        groups = {output: g for g in find_fusion_groups(function, self.row_passes)
                  if self.worth_fusing(g, small)
                  for output in g.outputs}
        if not groups:
            return function
        rebuilt: Dict[Node, Node] = {}
        made: Dict[Node, Tuple[core.Fused, ...]] = {}
        for original in inputs_first(function, groups):
            group = groups.get(original)
            if group is None:
                rebuilt[original] = original.with_inputs([rebuilt[x] for x in original.inputs])
                continue
            with at_location(original.location):
                if group.output not in made:  # the nodes of all its outputs, over one body
                    made[group.output] = fused_nodes(group, rebuilt, function.free_symbols)
                node = made[group.output][group.outputs.index(original)]
                record_rewrite("fuse-reduction" if group.reduction is not None
                               else "fuse-row" if group.row is not None
                               else "fuse-row-passes" if group.row_dims
                               else "fuse-elementwise", original, node)
            rebuilt[original] = node
        return core.Function([rebuilt[r] for r in function.results],
                             [rebuilt[p] for p in function.parameters], function.name)

    def _runs_natively(self, function: core.Function) -> bool:
        """Whether every node is small enough for the program to run as one C function
        (`native_step`), which keeps the unfused nodes (it runs no Fused node)."""
        for node in function.nodes:
            if self.bindings is not None:
                size = math.prod(node.shape.evaluate(self.bindings))
            elif not node.shape.is_static:
                return False
            else:
                size = math.prod(int(d) for d in node.shape)
            if size > native_step.MAX_ELEMENTS:
                return False
        return True

    def worth_fusing(self, group: FusedGroup, small_program: bool = False) -> bool:
        """Whether the group's largest member has at least `min_elements` elements (a
        multi-pass row group: `min_elements // ROW_PASSES_DISCOUNT`, as it replaces a
        dozen calls, unless the program is small enough to run natively)."""
        minimum = self.min_elements
        if group.row_dims:
            if small_program:
                return False
            minimum //= ROW_PASSES_DISCOUNT
        sizes = []
        for node in group.nodes:
            if self.bindings is not None:
                sizes.append(math.prod(node.shape.evaluate(self.bindings)))
            elif not node.shape.is_static:
                return True
            else:
                sizes.append(math.prod(int(d) for d in node.shape))
        return max(sizes) >= minimum


def fuse(function: core.Function, min_elements: int = 0,
         bindings: Optional[Mapping[str, int]] = None,
         row_passes: Optional[bool] = None) -> Tuple[core.Function, tuple]:
    """`function` with its groups fused (`FusionPass`), run by a PassManager as every pass
    is: the result verified, each fusion traced under AXGRAPH_TRACE_PASSES and counted.

    Parameters
    ----------
    function : core.Function
        The function to fuse (left unchanged).
    min_elements : int, optional
        A group whose largest member has fewer elements stays unfused.
    bindings : mapping of str to int, optional
        The sizes of the function's size variables, which decide the groups' sizes.
    row_passes : bool, optional
        Whether to form multi-pass row groups (normalizations); None: where the C
        engine runs.

    Returns
    -------
    tuple of (core.Function, tuple of PassRecord)
        The fused function and the pass's record (rules fired: "fuse-elementwise",
        "fuse-reduction", "fuse-row", "fuse-row-passes", one per Fused node made).

    Raises
    ------
    VerificationError
        The fused function is not well formed (a bug in the pass).
    """
    manager = PassManager([FusionPass(min_elements, bindings, row_passes)])
    return manager.run(function), tuple(manager.report)


def inputs_first(function: core.Function, groups: Mapping[Node, FusedGroup]) -> List[Node]:
    """The function's nodes but the groups' inner members, each group's inputs before any
    of its outputs (`groups`: the group of each output), else inputs before users.

    The function's own order may put a group's extra output (a mean) before an input
    that only a later member reads (a gain): the group's nodes, made together, need
    every input rebuilt first.
    """
    order: List[Node] = []
    done: Set[Node] = set()
    for start in (*function.parameters, *function.results):
        stack: List[Tuple[Node, bool]] = [(start, False)]
        while stack:
            node, ready = stack.pop()
            if node in done:
                continue
            if ready:
                done.add(node)
                order.append(node)
                continue
            stack.append((node, True))
            group = groups.get(node)
            stack.extend((x, False) for x in reversed(group.inputs if group is not None
                                                       else node.inputs) if x not in done)
    return order


def fused_nodes(group: FusedGroup, rebuilt: Mapping[Node, Node],
                bound_outside=frozenset()) -> Tuple[core.Fused, ...]:
    """The Fused nodes running `group`, over the rebuilt versions of its inputs: one per
    output (`FusedGroup.outputs`), all over one body."""
    members = set(group.nodes)
    reached = post_order(list(group.outputs), lambda n: n.inputs if n in members else ())
    inputs = [x for x in reached if x not in members and not is_scalar_constant(x)]
    body: Dict[Node, Node] = {x: core.Parameter(x.element_type, x.shape) for x in inputs}
    for member in group.nodes:
        body[member] = member.with_inputs([body.get(x, x) for x in member.inputs])
    function = core.Function([body[x] for x in group.outputs], [body[x] for x in inputs],
                             "fused", bound_outside=bound_outside)
    return tuple(core.Fused([rebuilt[x] for x in inputs], function,
                            name=output.name if output.has_user_name else None, result=k)
                 for k, output in enumerate(group.outputs))


def fused_node(group: FusedGroup, rebuilt: Mapping[Node, Node],
               bound_outside=frozenset()) -> core.Fused:
    """The Fused node running `group`'s output, over the rebuilt versions of its inputs."""
    return fused_nodes(group, rebuilt, bound_outside)[0]
