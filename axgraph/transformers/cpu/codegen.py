"""Generate one straight-line Python function per core Function and binding.

Each node becomes one line: a NumPy call writing into its planned buffer
(`out=`), a view expression (transpose, reshape, broadcast, slice: no copy),
a fused kernel call, or (for the few ops without an `out=` form) a call to
the interpreter's kernel. Buffers are views into one arena made once per
binding of the size variables, so a steady-state call allocates only what
those few ops and the returned results need.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple

import numpy as np

from ... import core
from ...core import interpreter
from ...core.node import Node
from ...core.traits import name_in, reduction_ufunc, takes_out
from ...dtypes import is_bfloat16
from ...errors import AxgraphError, ExecutionError, GraphError
from ...op_table import OpTable
from ...tensor_description import TensorDescription
from . import epilogue, gemm, rows, runtime, windows
from .memory_plan import MemoryPlan
from .schedule import (ALLOCATING, MOVEMENT_OPS, Schedule, concrete, dense_layout_order,
                       elementwise_function)

Shapes = Dict[Node, Tuple[int, ...]]

# -- what each op becomes -------------------------------------------------------------------

#: Windowed ops: the `windows` kernel each calls, and the geometry it takes after its inputs.
WINDOWS: OpTable[Tuple[str, Tuple[str, ...]]] = OpTable("cpu window kernel", {
    core.Im2Col: ("win.im2col", ("window", "strides", "dilation", "padding_below",
                                 "padding_above")),
    core.Col2Im: ("win.col2im", ("window", "strides", "dilation", "padding_below",
                                 "padding_above")),
    core.MaxPool: ("win.max_pool", ("window", "strides", "padding_below", "padding_above")),
    core.AvgPool: ("win.avg_pool", ("window", "strides", "padding_below", "padding_above")),
    core.MaxPoolBackprop: ("win.max_pool_backprop", ("window", "strides", "padding_below",
                                                     "padding_above")),
    core.AvgPoolBackprop: ("win.avg_pool_backprop", ("window", "strides", "padding_below",
                                                     "padding_above"))})
#: A Col2Im computed with its product (Schedule.blocked_products) takes as many images
#: at a time as make columns of about this many bytes: they stay in the core's cache
#: between the product that writes them and the scatter-add that reads them.
COLUMN_BLOCK_BYTES = 1 << 20
#: Sums over the outermost axes of at least this many elements run as a BLAS product.
OUTER_SUM_MIN = 1 << 14
class Program:
    """The generated function for one binding, with its arena and source text."""

    def __init__(self, function: core.Function, schedule: Schedule, plan: MemoryPlan,
                 bindings: Mapping[str, int], generators,
                 kernels: Optional[Mapping[core.Fused, Callable]] = None,
                 fusion_report: tuple = ()):
        self.function, self.schedule, self.plan = function, schedule, plan
        #: The PassRecord of the fusion pass that made `function` (empty if none ran).
        self.fusion_report = fusion_report
        self.bindings = dict(bindings)
        ctx = interpreter.Context(self.bindings, generators)
        self.shapes, self.layout, self.fresh = schedule.shapes, schedule.layout, schedule.fresh
        #: The kernel of each Fused node.
        self.kernels = kernels or {}
        self._results = set(function.results)
        #: Result positions the program does not write into a fresh array (copied out).
        self.copied = [k for k, node in enumerate(function.results) if self.fresh.get(node) != k]
        self.no_outs: Tuple[Optional[np.ndarray], ...] = (None,) * len(function.results)
        #: (result, parameter) positions where the result may overwrite the argument.
        self.donatable = schedule.donatable
        self._users = function.users()
        #: Dots computed with the Col2Im that reads them, a block of images at a time.
        self.blocked_dots = frozenset(schedule.blocked_products.values())
        self.namespace: Dict[str, Any] = {"np": np, "rt": runtime, "win": windows, "rows": rows,
                                          "gemm": gemm, "epilogue": epilogue, "CTX": ctx}
        #: Bias Adds computed with their ReLU (Schedule.bias_relus): no line of their own.
        self.bias_adds = frozenset(schedule.bias_relus.values())
        #: Products computed with their bias Add (Schedule.biased_products): the same.
        self.biased_dots = frozenset(schedule.biased_products.values())
        #: Bias Adds computed with their product and ReLU (Schedule.product_relus): the same.
        self.clamped_adds = frozenset(schedule.product_relus.values())
        self.names: Dict[Node, str] = {}
        #: Names bound once in the namespace, not per call: buffers in the arena, constants,
        #: and the views of these (each made once, where `_movement` finds it fixed).
        self.fixed: Set[str] = set()
        #: Source line -> the node it computes, to say which op failed at run time.
        self.line_nodes: Dict[int, Node] = {}
        self.filename = f"<axgraph cpu {function.name}>"
        self.source = self._generate()
        exec(compile(self.source, self.filename, "exec"), self.namespace)
        self.run: Callable = self.namespace["run"]
        #: The whole step as one C function where it runs natively (native_step.py),
        #: decided before its first run (`native_tried`); else why not, in
        #: `native_declined`.
        self.native: Optional[Any] = None
        self.native_tried = False
        self.native_declined: Optional[str] = None

    def release(self) -> None:
        """Free the arena, buffers and kernels now; the program cannot run afterwards.

        Evicting a program must give its memory back at once: the generated code's
        globals are this namespace, which holds the code, a cycle that would
        otherwise keep the arena until the garbage collector next runs.
        """
        self.namespace.clear()
        self.kernels = {}
        self.native = None

    def attributed(self, error: Exception, traceback) -> Optional[ExecutionError]:
        """`error`, raised while running, as the interpreter words it: naming the op
        whose line failed, at the user's line that made it (None if no line did)."""
        node = None
        while traceback is not None:
            if traceback.tb_frame.f_code.co_filename == self.filename:
                node = self.line_nodes.get(traceback.tb_lineno)
            traceback = traceback.tb_next
        if node is None:
            return None
        message = error.message if isinstance(error, AxgraphError) else str(error)
        return ExecutionError(f"{node.op} {node.name}: {message}", node.location)

    def results_for_caller(self, results: tuple) -> tuple:
        """The run's results, each in an array of its own (arena views are copied)."""
        if not self.copied:
            return results
        arrays = list(results)
        for k in self.copied:
            arrays[k] = np.array(arrays[k], copy=True, order="C")
        return tuple(arrays)

    # -- code ----------------------------------------------------------------------------
    def _generate(self) -> str:
        try:
            arena = np.empty(max(self.plan.arena_bytes, 1), dtype=np.uint8)
        except MemoryError:
            raise MemoryError(f"its memory plan needs {self.plan.arena_bytes / 2 ** 30:.4g} "
                              f"GiB for the values it computes") from None
        self.namespace["ARENA"] = arena
        parameters: List[str] = []
        lines: List[str] = []
        for index, node in enumerate(self.function.nodes):
            kind = self.schedule.storage[node]
            # A buffer node's value is its buffer: the call writes it, nothing is rebound.
            name = self.names[node] = f"b{index}" if self.schedule.writes(node) else f"v{index}"
            if kind == "parameter":
                parameters.append(name)
            if kind == "fresh":
                position = self.fresh[node]
                self.namespace[f"S{index}"] = (self.shapes[node], node.element_type.dtype)
                lines.append(f"    {name} = outs[{position}] if outs[{position}] is not None "
                             f"else np.empty(*S{index})")
            elif kind == "buffer":
                buffer = self.plan.buffers[node]
                layout = self.layout[node]
                assert layout is not None  # every buffer has a layout
                self.namespace[name] = _as_array(layout, arena[
                    buffer.offset:buffer.offset + buffer.nbytes])
                self.fixed.add(name)
            statement = self._statement(node, index)
            if statement is None:
                continue
            lines.append(f"    {statement}  # {node.op} {node.type_str()}")
            self.line_nodes[len(lines) + 1] = node  # +1: the `def` line
        results = ", ".join(self.names[n] for n in self.function.results)
        return "\n".join([f"def run({', '.join(parameters + ['outs'])}):"] + lines
                         + [f"    return ({results},)", ""])

    def _args(self, node: Node) -> List[str]:
        return [self.names[i] for i in node.inputs]

    def _statement(self, node: Node, index: int) -> Optional[str]:
        """The line computing node (None for parameters and constants): its entry in CODE."""
        emit = CODE.lookup(type(node))
        if emit is None:
            raise GraphError(f"the cpu backend has no code for {node.op} {node.name}: lower it "
                             f"to core ops with a bridge rule (axgraph.passes.register_bridge)",
                             node.location)
        return emit(self, node, index)

    def _outer_sum(self, node: core.Reduction, x: str, out: str, index: int) -> Optional[str]:
        """A float Sum over the axes outermost in memory, as ones (R) x values (R, K).

        NumPy reduces such axes one K-wide row at a time (a bias gradient over an
        NHWC map: 36864 adds of 20 floats); BLAS's matrix-vector product runs the
        same sums at memory speed, accumulating no less accurately.
        """
        source = node.inputs[0]
        order = dense_layout_order(self.layout.get(source))
        reduced = len(node.axes)
        if node.reduce_ufunc is not np.add or order is None or node in self.fresh or \
                node.element_type.dtype.kind != "f" or set(order[:reduced]) != set(node.axes) \
                or list(order[reduced:]) != sorted(order[reduced:]):
            return None
        shape = self.shapes[source]
        rows = int(np.prod([shape[i] for i in order[:reduced]], dtype=np.int64))
        columns = int(np.prod(self.shapes[node], dtype=np.int64))
        if rows * columns < OUTER_SUM_MIN or columns == 0:
            return None
        self.namespace[f"ONES{index}"] = np.ones(rows, node.element_type.dtype)
        self.namespace[f"{out}_k"] = self.namespace[out].reshape(columns)
        return (f"np.matmul(ONES{index}, {x}.transpose({tuple(order)}).reshape({(rows, columns)}),"
                f" out={out}_k)")

    def _ufunc_users_only(self, node: Node) -> bool:
        """Whether every reader is a ufunc writing a planned buffer of node's shape."""
        if node in self._results:
            return False
        users = self._users.get(node, ())
        return bool(users) and all(
            self.schedule.writes(user) and elementwise_function(type(user)) is not None
            and self.shapes[user] == self.shapes[node]
            for user in users)

    def _dot(self, node: core.Dot, args: List[str], out: str) -> str:
        function, left, right, target = self._dot_parts(node, args, out)
        return f"{function}({left}, {right}, out={target})"

    def _dot_parts(self, node: core.Dot, args: List[str], out: str) -> Tuple[str, str, str, str]:
        """(function, left, right, target) of one matmul over (batch..., rest, contracted) x (batch..., contracted, rest) views.

        Transposed 2-d views reach BLAS as transposed operands, not copies;
        reshapes are only emitted where a dim group must be merged. Batch dims
        stay separate leading dims, never merged into a copy: rt.batched_matmul
        runs a stack of small products in one C call (batched.py, AVX-512 builds),
        else one single-threaded BLAS product per batch entry, the entries split
        over the worker threads (a batched GEMM).
        """
        a, b = node.inputs
        shape_a, shape_b = self.shapes[a], self.shapes[b]
        batch_a, batch_b = list(node.batch_a), list(node.batch_b)
        rest_a = [i for i in range(len(shape_a)) if i not in node.contract_a + node.batch_a]
        rest_b = [i for i in range(len(shape_b)) if i not in node.contract_b + node.batch_b]

        def size(shape, dims) -> int:
            return int(np.prod([shape[i] for i in dims], dtype=np.int64))

        m, k, n = size(shape_a, rest_a), size(shape_a, node.contract_a), size(shape_b, rest_b)
        batch = tuple(shape_a[i] for i in batch_a)
        layout_a, layout_b = self.layout.get(a), self.layout.get(b)

        def copied(pairs) -> int:
            """Elements NumPy would copy to hand BLAS the operands in this k order."""
            if batch:
                return 0  # np.matmul copies each batch entry as it needs: no order helps
            return (_copy_cost(layout_a, rest_a + [i for i, _ in pairs], (m, k))
                    + _copy_cost(layout_b, [j for _, j in pairs] + rest_b, (k, n)))

        # The contracted dims may be merged in any order both operands agree on: in
        # the order given, or in the memory order of either operand.
        pairs = list(zip(node.contract_a, node.contract_b))
        orders = [pairs] + [sorted(pairs, key=lambda p: -layout.element_strides[p[side]])
                            for side, layout in enumerate((layout_a, layout_b)) if layout]
        pairs = min(orders, key=copied)
        left = _operand(args[0], shape_a, layout_a, batch_a, rest_a, [i for i, _ in pairs],
                        batch)
        right = _operand(args[1], shape_b, layout_b, batch_b, [j for _, j in pairs], rest_b,
                         batch)
        product = batch + (m, n)
        target = out
        if self.shapes[node] != product and node in self.fresh:
            target = f"{out}.reshape({product})"  # a new array each call: view it each call
        elif self.shapes[node] != product:  # the buffer seen as the (m, n) matrices, made once
            target = f"{out}_mn"
            self.namespace[target] = self.namespace[out].reshape(product)
        if is_bfloat16(node.element_type.dtype):  # in float32, rounded once, as the reference
            left, right = f"{left}.astype(np.float32)", f"{right}.astype(np.float32)"
        if batch:
            return "rt.batched_matmul", left, right, target
        if gemm.takes(m, k, n, node.element_type.dtype):
            return "gemm.matmul", left, right, target
        return "np.matmul", left, right, target

    def _view(self, node: Node) -> str:
        """The expression of a movement op's result as a view of its input (VIEW_CODE)."""
        (x,) = self._args(node)
        view = VIEW_CODE.lookup(type(node))
        if view is None:
            raise GraphError(f"the cpu backend has no view code for {node.op} {node.name}",
                             node.location)
        return view(self, node, x)


# -- the code of each op ------------------------------------------------------------------------

Emitter = Callable[[Program, Node, int], Optional[str]]
#: The line computing each op: `emit(program, node, index)`. A buffer op's call writes its
#: planned buffer (`program.names[node]`), a view binds an expression over its input, an
#: ALLOCATING op calls the interpreter's kernel; parameters and constants have no line.
CODE: OpTable[Emitter] = OpTable("cpu code")


@CODE.register(core.Parameter)
def _parameter(p: Program, node: Node, index: int) -> None:
    return None  # an argument of `run`


@CODE.register(core.Constant)
def _constant(p: Program, node: Node, index: int) -> None:
    assert isinstance(node, core.Constant)
    p.namespace[p.names[node]] = np.broadcast_to(
        np.asarray(node.value, dtype=node.element_type.dtype), p.shapes[node])
    p.fixed.add(p.names[node])


@CODE.register(*MOVEMENT_OPS)
def _movement(p: Program, node: Node, index: int) -> Optional[str]:
    """A view of the input's storage, or where the schedule found none (a Reshape of a
    layout no strides show) the view's elements copied into the node's buffer.

    A view of a buffer, a constant or another such view is made once, here, not on every
    call (a view costs about half a microsecond: the transformer block's training step
    has about fifty)."""
    if p.schedule.storage[node] == "view":
        name, view = p.names[node], p._view(node)
        if p.names[node.inputs[0]] in p.fixed:
            p.namespace[name] = eval(view, p.namespace)  # noqa: S307 - our own expression
            p.fixed.add(name)
            return None
        return f"{name} = {view}"
    if isinstance(node, core.Reshape):  # row-major order kept: copy the input as it is
        return f"rt.copy({p.names[node.inputs[0]]}, out={p.names[node]})"
    return f"np.copyto({p.names[node]}, {p._view(node)})"


# -- movement ops as views: `view(program, node, input_name)` -> the view's expression -------

ViewCode = Callable[[Program, Node, str], str]
#: The expression of each movement op's result as a view of its input (no copy).
VIEW_CODE: OpTable[ViewCode] = OpTable("cpu view code")


@VIEW_CODE.register(core.Transpose)
def _transpose_view(p: Program, node: Node, x: str) -> str:
    return f"np.transpose({x}, {tuple(node.attributes['permutation'])})"


@VIEW_CODE.register(core.Reshape)
def _reshape_view(p: Program, node: Node, x: str) -> str:
    return f"{x}.reshape({p.shapes[node]})"


@VIEW_CODE.register(core.Broadcast)
def _broadcast_view(p: Program, node: Node, x: str) -> str:
    shape, axes = p.shapes[node], node.attributes["axes"]
    expanded = tuple(1 if i in axes else n for i, n in enumerate(shape))
    if p._ufunc_users_only(node):  # each user broadcasts into its full-shape out
        return f"{x}.reshape({expanded})"
    return f"np.broadcast_to({x}.reshape({expanded}), {shape})"


@VIEW_CODE.register(core.Slice)
def _slice_view(p: Program, node: Node, x: str) -> str:
    a = node.attributes
    items = ", ".join(f"{_int(lo)}:{_int(hi)}:{st}" for lo, hi, st in
                      zip(concrete(a["lower"], p.bindings), concrete(a["upper"], p.bindings),
                          a["strides"]))
    return f"{x}[{items},]"


@VIEW_CODE.register(core.Reverse)
def _reverse_view(p: Program, node: Node, x: str) -> str:
    axes = node.attributes["axes"]
    items = ", ".join("::-1" if i in axes else ":" for i in range(node.rank))
    return f"{x}[{items},]"


@CODE.register(*ALLOCATING)
def _allocating(p: Program, node: Node, index: int) -> str:
    p.namespace[f"N{index}"] = node
    p.namespace[f"K{index}"] = interpreter.find_kernel(type(node))
    args = "".join(", " + a for a in p._args(node))
    return f"{p.names[node]} = K{index}(N{index}, CTX{args})"


@CODE.register(Node, when=lambda op_class: elementwise_function(op_class) is not None)
def _elementwise(p: Program, node: Node, index: int) -> Optional[str]:
    if node in p.bias_adds or node in p.clamped_adds:
        return None  # computed with its ReLU (_bias_relu, or the product's kernel)
    if node in p.schedule.bias_relus:
        return _bias_relu(p, node)
    if node in p.schedule.product_relus:
        return _biased_product(p, p.schedule.product_relus[node], p.names[node], relu=True)
    if node in p.schedule.biased_products:
        return _biased_product(p, node, p.names[node])
    function = elementwise_function(type(node))
    args, out = ", ".join(p._args(node)), p.names[node]
    if isinstance(function, str):
        return f"{function}({args}, out={out})"
    assert function is not None  # the entry's condition
    name = name_in(p.namespace, function)
    if takes_out(function):
        return f"{name}({args}, out={out})"
    return f"np.copyto({out}, {name}({args}))"


def _bias_relu(p: Program, node: Node) -> str:
    """A ReLU and the bias Add it reads through transposes, as one epilogue.bias_relu
    call at the ReLU's step; its buffer is viewed in the Add's dim order once."""
    add = p.schedule.bias_relus[node]
    out = p.names[node]
    view = p.namespace[out]
    source = node.inputs[0]
    while source is not add:  # undo the transposes, the last one first
        view = view.transpose(tuple(int(i) for i in np.argsort(source.attributes["permutation"])))
        source = source.inputs[0]
    p.namespace[f"{out}_pre"] = view
    x, bias = p._args(add)
    if isinstance(add.inputs[0], core.Broadcast) and not isinstance(add.inputs[1], core.Broadcast):
        x, bias = bias, x
    return f"epilogue.bias_relu({x}, {bias}, out={out}_pre)"


def _biased_product(p: Program, node: Node, out: str, relu: bool = False) -> str:
    """A bias Add and the matrix product it adds to, as one gemm.matmul call writing
    `out`: the Add's array at its step, or, with `relu`, the ReLU's at the ReLU's step
    (the product's own array, and then the Add's, never written)."""
    product = p.schedule.biased_products[node]
    assert isinstance(product, core.Dot)
    _, left, right, target = p._dot_parts(product, p._args(product), out)
    term = p._args(node)[1 - node.inputs.index(product)]
    return f"gemm.matmul({left}, {right}, out={target}, addend={term}{', relu=True' * relu})"


@CODE.register(core.Fused)
def _fused(p: Program, node: Node, index: int) -> str:
    """The kernel's call; for a group of several results (one Fused node each, over one
    body), the first node in order calls it, the others' results going to buffers kept
    in the namespace (`R<index>_<result>`), which the later nodes copy."""
    assert isinstance(node, core.Fused)
    results = node.function.results
    if len(results) > 1:
        runner = next(k for k, n in enumerate(p.function.nodes)
                      if isinstance(n, core.Fused) and n.function is node.function)
        if runner != index:
            return f"np.copyto({p.names[node]}, R{runner}_{node.result})"
        names = []
        for k, result in enumerate(results):
            if k == node.result:
                names.append(p.names[node])
                continue
            names.append(f"R{index}_{k}")
            p.namespace[names[-1]] = np.empty(core.Shape(result.shape).evaluate(p.bindings),
                                              result.element_type.dtype)
        p.namespace[f"F{index}"] = p.kernels[node]
        inputs = "".join(name + ", " for name in p._args(node))
        return f"F{index}({inputs}out={names[0]}, extras=({', '.join(names[1:])},))"
    p.namespace[f"F{index}"] = p.kernels[node]
    inputs = "".join(name + ", " for name in p._args(node))
    return f"F{index}({inputs}out={p.names[node]})"


@CODE.register(core.Reduction, when=lambda op_class: reduction_ufunc(op_class) is not None)
def _reduce(p: Program, node: Node, index: int) -> str:
    """The declared ufunc's reduce (`reduce_ufunc` trait), called directly: the np.sum
    wrapper costs more than a small reduction itself."""
    assert isinstance(node, core.Reduction) and node.reduce_ufunc is not None
    (x,), out = p._args(node), p.names[node]
    reduce = f"np.{node.reduce_ufunc.__name__}.reduce({x}, axis={tuple(node.axes)}"
    if is_bfloat16(node.element_type.dtype):
        # NumPy would round every partial sum to bfloat16 (a long sum stalls); the
        # reference computes in float32 and rounds once
        return f"{out}[...] = {reduce}, dtype=np.float32)"
    return p._outer_sum(node, x, out, index) or f"{reduce}, out={out})"


@CODE.register(core.Dot)
def _dot(p: Program, node: Node, index: int) -> Optional[str]:
    assert isinstance(node, core.Dot)
    if node in p.blocked_dots:
        return None  # computed with its Col2Im, a block at a time (_window)
    if node in p.biased_dots:
        return None  # computed with its bias Add (_biased_product)
    return p._dot(node, p._args(node), p.names[node])


@CODE.register(core.ArgMax, core.ArgMin)
def _arg_reduce(p: Program, node: Node, index: int) -> str:
    (x,), out = p._args(node), p.names[node]
    return (f"rt.arg_reduce({x}, {tuple(node.attributes['axes'])}, "
            f"{isinstance(node, core.ArgMax)}, out={out})")


@CODE.register(core.Softmax)
def _softmax(p: Program, node: Node, index: int) -> str:
    (x,), out = p._args(node), p.names[node]
    return f"rt.softmax({x}, {tuple(node.attributes['axes'])}, out={out})"


@CODE.register(core.LogSoftmax)
def _log_softmax(p: Program, node: Node, index: int) -> str:
    (x,), out = p._args(node), p.names[node]
    return f"rows.log_softmax({x}, {tuple(node.attributes['axes'])}, out={out})"


@CODE.register(core.SoftmaxBackprop, core.LogSoftmaxBackprop)
def _softmax_backprop(p: Program, node: Node, index: int) -> str:
    dy, y = p._args(node)
    function = ("rows.log_softmax_backprop" if isinstance(node, core.LogSoftmaxBackprop)
                else "rows.softmax_backprop")
    return f"{function}({dy}, {y}, {tuple(node.attributes['axes'])}, out={p.names[node]})"


@CODE.register(core.Concat)
def _concat(p: Program, node: Node, index: int) -> str:
    return (f"np.concatenate(({', '.join(p._args(node))},), axis={node.attributes['axis']}, "
            f"out={p.names[node]})")


@CODE.register(core.Pad)
def _pad(p: Program, node: Node, index: int) -> str:
    assert isinstance(node, core.Pad)
    (x,), out = p._args(node), p.names[node]
    value = node.attributes["value"]
    literal = repr(value) if np.isfinite(value) else f"float({str(float(value))!r})"  # -inf
    return (f"rt.pad({x}, {tuple(node.below)}, {tuple(node.interior)}, {literal}, "
            f"out={out})")


@CODE.register(*WINDOWS)
def _window(p: Program, node: Node, index: int) -> str:
    function, geometry = WINDOWS.lookup(type(node))  # type: ignore[misc]  # registered
    values = ", ".join(str(tuple(node.attributes[name])) for name in geometry)
    product = p.schedule.blocked_products.get(node)
    if product is not None:
        assert isinstance(product, core.Dot)
        matmul, left, right, matrix = p._dot_parts(product, p._args(product),
                                                   p.names[product])
        per_image = int(np.prod(p.shapes[product][1:], dtype=np.int64)) * \
            product.element_type.dtype.itemsize  # the product's dim 0 is the images'
        block = max(1, COLUMN_BLOCK_BYTES // max(1, per_image))
        return (f"win.col2im_of_product({matmul}, {left}, {right}, {matrix}, "
                f"{', '.join(p._args(node))}, {values}, out={p.names[node]}, block={block})")
    return f"{function}({', '.join(p._args(node))}, {values}, out={p.names[node]})"


@CODE.register(core.Gather)
def _gather(p: Program, node: Node, index: int) -> str:
    params, indices = p._args(node)
    return f"rt.gather({params}, {indices}, {node.attributes['axis']}, out={p.names[node]})"


@CODE.register(core.ScatterAdd)
def _scatter_add(p: Program, node: Node, index: int) -> str:
    return (f"rt.scatter_add({', '.join(p._args(node))}, {node.attributes['axis']}, "
            f"out={p.names[node]})")


@CODE.register(core.OneHot)
def _one_hot(p: Program, node: Node, index: int) -> str:
    assert isinstance(node, core.OneHot)
    shape, axis = p.shapes[node], node.one_hot_axis
    p.namespace[f"P{index}"] = runtime.one_hot_positions(shape[axis], axis, len(shape))
    expanded = tuple(1 if i == axis else n for i, n in enumerate(shape))
    (x,) = p._args(node)
    return f"rt.one_hot({x}, P{index}, {expanded}, out={p.names[node]})"


def _as_array(layout: TensorDescription, memory: np.ndarray) -> np.ndarray:
    """The planned bytes of a buffer as an array of `layout` (a dense axis order)."""
    order = dense_layout_order(layout)
    assert order is not None  # the planner lays every buffer out densely
    physical = tuple(layout.shape[i] for i in order)
    array = memory.view(layout.dtype).reshape(physical)
    return array.transpose(tuple(int(i) for i in np.argsort(order)))


def _copy_cost(layout: Optional[TensorDescription], order: List[int],
               matrix: Tuple[int, int]) -> int:
    """0 if `layout` transposed to `order` is a BLAS-ready `matrix` view (one unit
    stride), else the elements copied to make it one."""
    if layout is None:
        return 0
    view = layout.transpose(order).reshape(matrix)
    if view is not None and any(stride == 1 or length == 1
                                for stride, length in zip(view.element_strides, view.shape)):
        return 0
    return matrix[0] * matrix[1]


def _operand(name: str, shape: Sequence[int], layout: Optional[TensorDescription],
             batch_dims: List[int], row_dims: List[int], column_dims: List[int],
             batch: Tuple[int, ...]) -> str:
    """Code for one matmul operand: `name` as a stack of (rows, columns) matrices.

    Where the matrix is no view of `name`, NumPy's reshape copies it in the order of
    the dims it is given. A copy whose innermost loop strides through memory is several
    times slower than one that reads it in runs, so an operand whose memory runs along
    its row dims is copied as the transposed (columns, rows) matrix and handed to BLAS
    as a transposed view of that copy.
    """
    rows = int(np.prod([shape[i] for i in row_dims], dtype=np.int64))
    columns = int(np.prod([shape[i] for i in column_dims], dtype=np.int64))
    order = batch_dims + row_dims + column_dims
    if (not batch and layout is not None and _copy_cost(layout, order, (rows, columns))
            and _reading(layout, column_dims + row_dims) > _reading(layout, order)):
        return _arranged(name, shape, column_dims + row_dims, (columns, rows)) + ".T"
    return _arranged(name, shape, order, batch + (rows, columns))


def _reading(layout: TensorDescription, order: List[int]) -> Tuple[int, int]:
    """How well a copy visiting `layout`'s dims in `order` (the last innermost) reads
    memory, larger is better: the elements it reads consecutively before it jumps, then
    how short its innermost jump is (nearby jumps stay in the cache lines just read)."""
    dims = [dim for dim in order if layout.shape[dim] != 1]
    run = 1
    for dim in reversed(dims):
        if abs(layout.element_strides[dim]) != run:
            break
        run *= layout.shape[dim]
    return run, -abs(layout.element_strides[dims[-1]]) if dims else 0


def _arranged(name: str, shape: Sequence[int], order: List[int], matrix: Tuple[int, ...]) -> str:
    """Code for `name` transposed to `order` and viewed as a `matrix` (m, k), or a stack of
    them (batch..., m, k)."""
    expression = name
    if order != list(range(len(shape))):
        expression = f"{expression}.transpose({tuple(order)})"
    if tuple(shape[i] for i in order) != matrix:
        expression = f"{expression}.reshape({matrix})"
    return expression


def _int(value: int) -> str:
    return str(int(value))
