"""The Schedule: how each node of a core Function gets its value, for one binding.

Code generation only renders; what it renders is decided here, once per
binding of the size variables: the order nodes run in (the Function's, which
lowering made a valid one), each node's concrete shape, its storage (a
parameter or constant; a view of another node's storage; a buffer in the
planned arena; a fresh array per call for a result; an array the op's kernel
allocates), the layout of everything with storage (seed 003 descriptions:
elementwise buffers follow their inputs' memory order), which inputs each
node's kernel may overwrite, and which arguments a result may be written
into (donation). Liveness and memory planning read a Schedule; `Program`
(codegen.py) renders one with its plan into Python source.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, FrozenSet, List, Mapping, Optional, Tuple, Union

import numpy as np

from ... import core
from ...core import interpreter
from ...core.host import HostCall
from ...core.node import Node
from ...core.traits import numpy_denominator, numpy_function, ops_with, ufunc_name
from ...op_table import OpTable
from ...passes.pattern import uniform_value
from ...strides import dense_order
from ...tensor_description import TensorDescription
from . import runtime

Shapes = Dict[Node, Tuple[int, ...]]
#: Storage kinds: how a node gets its value.
STORAGE = ("parameter", "constant", "view", "buffer", "fresh", "allocating")

#: The core ops that move elements without computing (their `movement` trait): each is a
#: view of its input's storage (a Reshape where the input's layout allows one).
MOVEMENT_OPS = ops_with("movement", core.CORE_OPS)
#: Ops computed by the interpreter's kernel into a fresh array (no `out=` form yet).
#: (Random draws keep the reference's exact stream: NumPy's Generator draws them anew.)
#: (Host calls, such as prints, run here too: in node order, never fused.)
ALLOCATING = (core.Convolution, core.ConvolutionBackpropData, core.ConvolutionBackpropFilters,
              core.RandomUniform, core.RandomNormal, core.DimValue, HostCall)
#: Ops besides the elementwise ones whose kernels write an `out` of any strides.
ANY_LAYOUT = (core.MaxPool, core.AvgPool, core.MaxPoolBackprop, core.AvgPoolBackprop)
#: Ops whose buffer is laid out as their one reader, a Transpose, reads it row-major (their
#: kernels write any dense layout in its memory order; runtime.gather).
LAID_OUT_FOR_READER = (core.Gather,)


def elementwise_function(op_class: type) -> Union[str, Callable, None]:
    """What writes an elementwise op's `out=` in generated code: a runtime function of the
    cpu's own or the op's ufunc, as text ("rt.erf", "np.exp"), 1 / its declared
    denominator (`runtime.reciprocal_of`, as for sigmoid), or the op's reference function
    itself. None for ops that are not elementwise or have no reference function."""
    own = runtime.OWN_FUNCTIONS.lookup(op_class)
    if own is not None:
        return f"rt.{own.__name__}"
    denominator = numpy_denominator(op_class)
    if denominator is not None:
        return runtime.reciprocal_of(denominator)
    name = ufunc_name(op_class)
    return numpy_function(op_class) if name is None else f"np.{name}"




@dataclass(frozen=True)
class Schedule:
    """Ordered nodes, and per node its shape, storage kind, layout and in-place options.

    storage: one of STORAGE per node. "buffer" nodes get arena space from the
    memory plan; "fresh" ones (results the program computes) get their own
    array per call; a "view" reads the storage of `alias[node]`.
    overwritable: per node, the inputs its kernel may write its output over
    (same shape, type and layout, an arena buffer, an op that reads each
    element before writing it); the planner does so where the input dies.
    """

    nodes: Tuple[Node, ...]
    results: Tuple[Node, ...]
    parameters: Tuple[Node, ...]
    shapes: Mapping[Node, Tuple[int, ...]]
    storage: Mapping[Node, str]
    alias: Mapping[Node, Node] = field(default_factory=dict)
    layout: Mapping[Node, Optional[TensorDescription]] = field(default_factory=dict)
    #: Result node -> the result position whose array it is written into.
    fresh: Mapping[Node, int] = field(default_factory=dict)
    overwritable: Mapping[Node, FrozenSet[Node]] = field(default_factory=dict)
    #: (result, parameter) positions where the result may overwrite the argument.
    donatable: FrozenSet[Tuple[int, int]] = frozenset()
    #: Display names as `print(function)` shows them.
    names: Mapping[Node, str] = field(default_factory=dict)
    #: Col2Im node -> the Dot whose columns it sums, computed with it a block of images
    #: at a time (the columns of a block stay in the cache between the two): the Dot runs
    #: at the Col2Im's step, so its inputs are read there too (`reads`).
    blocked_products: Mapping[Node, Node] = field(default_factory=dict)
    #: ReLU (Maximum with 0) -> the bias Add it reads through transposes, computed with
    #: it in one pass (`bias_relus`): the Add runs at the ReLU's step, so its inputs are
    #: read there too (`reads`), and its own buffer is never written.
    bias_relus: Mapping[Node, Node] = field(default_factory=dict)
    #: Add of a matrix product and a broadcast term (a dense layer's bias) -> that Dot,
    #: computed in one call at the Add's step (`biased_products`): the Dot's inputs are
    #: read there (`reads`), and its own buffer is never written.
    biased_products: Mapping[Node, Node] = field(default_factory=dict)
    #: ReLU (Maximum with 0) of a biased product's Add -> that Add, all three computed in
    #: one call at the ReLU's step (`product_relus`): the kernel writes the ReLU's array
    #: (neither the product's nor the Add's is written), reading the Add's term and the
    #: product's operands there (`reads`).
    product_relus: Mapping[Node, Node] = field(default_factory=dict)

    def reads(self, node: Node) -> Tuple[Node, ...]:
        """The nodes whose values node's step reads: its inputs, and those of a node
        computed with it (a blocked product, a bias Add, a biased product)."""
        return tuple(node.inputs) + computed_with(node, self.blocked_products,
                                                  self.bias_relus, self.biased_products,
                                                  self.product_relus)

    def needs_buffer(self, node: Node) -> bool:
        """Whether node gets space in the arena."""
        return self.storage.get(node) == "buffer"

    def alias_of(self, node: Node) -> Optional[Node]:
        """The node whose storage a view reads (None if node is no view)."""
        return self.alias.get(node)

    def can_run_in_place(self, node: Node, source: Node) -> bool:
        return source in self.overwritable.get(node, ())

    def writes(self, node: Node) -> bool:
        """Whether node's line writes its own array (an arena buffer or a fresh one)."""
        return self.storage.get(node) in ("buffer", "fresh")


def schedule_function(function: core.Function, bindings: Mapping[str, int]) -> Schedule:
    """The Schedule of `function` at these sizes."""
    return _Scheduler(function, bindings).schedule()


class _Scheduler:
    """Decides a Schedule's fields node by node (each decision reads earlier ones)."""

    def __init__(self, function: core.Function, bindings: Mapping[str, int]):
        self.function, self.bindings = function, dict(bindings)
        ctx = interpreter.Context(self.bindings, {})
        self.shapes: Shapes = {node: ctx.node_shape(node) for node in function.nodes}
        self._results = set(function.results)
        self._reduction_inputs = {x for node in function.nodes if fused_reduction(node)
                                  for x in node.inputs}
        self._users = function.users()
        self.kind: Dict[Node, str] = {}
        self.alias: Dict[Node, Node] = {}
        self.layout: Dict[Node, Optional[TensorDescription]] = {}
        for node in function.nodes:
            self._classify(node)
        # Results computed by the program get their own arrays (the caller's out= or a
        # new one per call) instead of arena space: no copy out of the arena afterwards.
        self.fresh: Dict[Node, int] = {}
        for position, node in enumerate(function.results):
            if self.kind[node] == "buffer" and node not in self.fresh:
                self.fresh[node] = position

    def schedule(self) -> Schedule:
        storage = {node: "fresh" if node in self.fresh else kind
                   for node, kind in self.kind.items()}
        blocked = self._blocked_products(storage)
        clamped = product_relus(self.function, storage, self.shapes,
                                biased_products(self.function, storage, self.shapes, {}))
        relus = bias_relus(self.function, storage, clamped)
        products = biased_products(self.function, storage, self.shapes, relus)
        #: (for `_donatable`) the inputs of a node computed at another node's step
        self._moved = {node: computed_with(node, blocked, relus, products, clamped)
                       for node in self.function.nodes}
        overwritable = {node: frozenset(x for x in node.inputs
                                        if self._can_run_in_place(node, x))
                        for node in self.function.nodes if storage[node] == "buffer"}
        return Schedule(nodes=self.function.nodes, results=self.function.results,
                        parameters=self.function.parameters, shapes=self.shapes,
                        storage=storage, alias=self.alias, layout=self.layout,
                        fresh=self.fresh, overwritable=overwritable,
                        donatable=self._donatable(), names=self.function.display_names(),
                        blocked_products=blocked, bias_relus=relus,
                        biased_products=products, product_relus=clamped)

    def _blocked_products(self, storage: Mapping[Node, str]) -> Dict[Node, Node]:
        """Each Col2Im that sums a Dot's output, seen through transposes that keep the
        images' dim first, where nothing else reads that Dot: the Dot's rows then start
        with the images, so a block of images is a block of its left operand's rows."""
        users = self.function.users()
        found: Dict[Node, Node] = {}
        for node in self.function.nodes:
            if not isinstance(node, core.Col2Im):
                continue
            source = node.inputs[0]
            while (isinstance(source, core.Transpose) and storage[source] == "view"
                   and source.attributes["permutation"][0] == 0
                   and len(users[source]) == 1):
                source = source.inputs[0]
            if (isinstance(source, core.Dot) and storage[source] == "buffer"
                    and not source.batch_a and len(users[source]) == 1
                    and source.inputs[0].rank > len(source.contract_a)
                    and self.shapes[source][0] == self.shapes[node][0]):
                found[node] = source
        return found

    def _classify(self, node: Node) -> None:
        """Decide how node gets its value, tracking its layout (seed 003 descriptions).

        Movement ops (transpose, slice, reverse, broadcast) are views; a reshape
        is a view when the input's layout allows one (NumPy's rule), else a copy
        into a planned buffer.
        """
        shape = self.shapes[node]
        dtype = node.element_type.dtype
        layout = None
        if isinstance(node, core.Parameter):
            kind = "parameter"
        elif isinstance(node, core.Constant):
            kind = "constant"
        elif isinstance(node, core.Fused):
            kind = "buffer"
        elif node.movement:
            layout = self._view_layout(node)
            kind = "view" if layout is not None else "buffer"
        elif isinstance(node, ALLOCATING):
            kind = "allocating"
        else:
            kind = "buffer"
        if kind == "view":
            self.alias[node] = node.inputs[0]
        elif kind == "buffer":
            layout = self._buffer_layout(node, shape, dtype)
        else:
            layout = TensorDescription.row_major(shape, dtype)
        self.kind[node] = kind
        self.layout[node] = layout

    def _buffer_layout(self, node: Node, shape: Tuple[int, ...], dtype) -> TensorDescription:
        """Row-major, or for an op that writes any layout, the axis order of its first
        dense input of the same rank (seed 003: compute in the inputs' layout).

        A ReLU of a transposed view then walks input and output in memory order
        instead of one of them with a large stride, and the transposes around
        it stay free views.
        """
        if isinstance(node, (core.Im2Col, core.Col2Im)) and node not in self._results:
            return _channels_innermost(node, shape, dtype)
        transposed = self._transposed_by_reader(node)
        if transposed is None:
            transposed = self._order_for_products(node)
        if transposed is not None:
            physical = tuple(shape[i] for i in transposed)
            return TensorDescription.row_major(physical, dtype).transpose(
                tuple(int(i) for i in np.argsort(transposed)))
        if node in self._results or not self._writes_any_layout(node) or \
                node in self._reduction_inputs:  # fused reductions walk rows: row-major
            return TensorDescription.row_major(shape, dtype)
        for x in node.inputs:
            order = dense_layout_order(self.layout.get(x)) if len(self.shapes[x]) == len(shape) \
                else None
            if order is not None:
                physical = tuple(shape[i] for i in order)
                return TensorDescription.row_major(physical, dtype).transpose(
                    tuple(int(i) for i in np.argsort(order)))
        return TensorDescription.row_major(shape, dtype)

    def _transposed_by_reader(self, node: Node) -> Optional[Tuple[int, ...]]:
        """The permutation of node's one reader, a Transpose, where node's buffer is laid
        out for it (`LAID_OUT_FOR_READER`): everything after an embedding's gather then
        reads its rows in the order the rest of the program keeps (the char
        transformer's (D, T, N)), not the gather's (T, N, D), which made every
        residual add walk one operand across the grain (~1 ms each instead of ~0.05)."""
        users = self._users.get(node, ())
        if not isinstance(node, LAID_OUT_FOR_READER) or node in self._results or \
                len(users) != 1 or not isinstance(users[0], core.Transpose):
            return None
        return tuple(int(i) for i in users[0].attributes["permutation"])

    def _order_for_products(self, node: Node) -> Optional[Tuple[int, ...]]:
        """The memory order (node's dims, outermost first) of a batched product's buffer
        that lets the first plain product reading it take it as a matrix view, or None
        (row-major).

        Attention's products over (heads, batch) give (H, N, T, Dh) per-(h, n) matrices;
        the projections after them read (T, N) x (H, Dh), which row-major (H, N, T, Dh)
        cannot show without a copy (~0.25 ms each, 14 of them in a char transformer step).
        Laid out (T, N, H, Dh), each product still writes BLAS matrices (Dh unit-stride)
        and the readers merge their dims as views. The readers are found through
        Transposes and through elementwise ops that lay their buffer out like it.
        """
        if not isinstance(node, core.Dot) or not node.attributes["batch_a"] or \
                node in self._results or node in self._reduction_inputs:
            return None
        rank = len(self.shapes[node])
        batch = len(node.attributes["batch_a"])
        if rank != batch + 2:  # one free dim on each side: the node is the matrices
            return None
        matrix_dims = (rank - 2, rank - 1)
        frontier: List[Tuple[Node, Tuple[int, ...]]] = [(node, tuple(range(rank)))]
        while frontier:
            value, dims = frontier.pop(0)  # dims[i]: the node's dim that value's dim i is
            for user in self._users.get(value, ()):
                if isinstance(user, core.Transpose):
                    permutation = user.attributes["permutation"]
                    frontier.append((user, tuple(dims[i] for i in permutation)))
                elif user.inputs[0] is value and self._writes_any_layout(user) and \
                        self.shapes[user] == self.shapes[value] and \
                        user not in self._results and user not in self._reduction_inputs:
                    frontier.append((user, dims))
                elif isinstance(user, core.Dot) and not user.attributes["batch_a"] and \
                        user.inputs.count(value) == 1:
                    for wish in self._operand_orders(user, value):
                        order = tuple(dims[i] for i in wish)
                        if order[-1] in matrix_dims:
                            return order
                    return None
        return None

    def _operand_orders(self, dot: Node, value: Node) -> List[Tuple[int, ...]]:
        """The memory orders of `value` (its dims, outermost first) in which `dot` reads it
        as a matrix or a transposed one without a copy: its kept dims in the order the
        product's result keeps them, its contracted dims in the order of their partners'
        memory (so the other operand needs no copy either), as (kept, contracted) and
        (contracted, kept)."""
        side = dot.inputs.index(value)
        mine = dot.attributes["contract_a" if side == 0 else "contract_b"]
        theirs = dot.attributes["contract_b" if side == 0 else "contract_a"]
        pairs = list(zip(mine, theirs))
        other_order = dense_layout_order(self.layout.get(dot.inputs[1 - side]))
        if other_order is not None:
            pairs.sort(key=lambda pair: other_order.index(pair[1]))
        contracted = [int(i) for i, _ in pairs]
        kept = [i for i in range(len(self.shapes[value])) if i not in contracted]
        return [tuple(kept + contracted), tuple(contracted + kept)]

    def _writes_any_layout(self, node: Node) -> bool:
        if isinstance(node, core.Fused):
            return not fused_reduction(node)
        return elementwise_function(type(node)) is not None or isinstance(node, ANY_LAYOUT)

    def _view_layout(self, node: Node) -> Optional[TensorDescription]:
        """The layout of node as a view of its input, or None if it must copy."""
        source = self.layout.get(node.inputs[0])
        view = VIEW_LAYOUTS.lookup(type(node))
        if source is None or view is None:  # no storage to view, or no view of this op
            return None
        return view(node, source, self.shapes[node], self.bindings)

    def _can_run_in_place(self, node: Node, source: Node) -> bool:
        if self.kind.get(source) != "buffer" or source in self.alias or source in self.fresh:
            return False
        layout, source_layout = self.layout[node], self.layout[source]
        assert layout is not None and source_layout is not None  # both are buffers
        if self.shapes[node] != self.shapes[source] or \
                node.element_type.dtype != source.element_type.dtype or \
                layout.element_strides != source_layout.element_strides:
            return False
        return self._overwrites_safely(node)

    def _overwrites_safely(self, node: Node) -> bool:
        """Whether node's kernel may write over an operand as it reads it (elementwise,
        each element read before it is written)."""
        if isinstance(node, core.Fused):
            return not fused_reduction(node)
        return type(node).in_place

    def _donatable(self) -> frozenset:
        """(result position, parameter position) pairs where the result may be written
        into the parameter's own array: nothing reads the parameter after the step
        that writes the result, or that step reads it elementwise, element by element.

        A variable's update `w - lr * g` then overwrites `w` (the caller donates the
        old value, as JAX's donate_argnums does) instead of allocating a new array.
        """
        steps = {node: step for step, node in enumerate(self.function.nodes)}
        end = len(self.function.nodes)

        def root(node: Node) -> Node:
            while node in self.alias:
                node = self.alias[node]
            return node

        last_read: Dict[Node, int] = {}
        through_view: Dict[Node, int] = {}
        for node in self.function.nodes:
            if self.kind[node] in ("parameter", "constant", "view"):
                continue  # views are read by their users
            for x in node.inputs + self._moved[node]:
                r = root(x)
                last_read[r] = max(last_read.get(r, -1), steps[node])
                if r is not x:
                    through_view[r] = max(through_view.get(r, -1), steps[node])
        for k, result in enumerate(self.function.results):
            if self.fresh.get(result) != k:  # copied out after the run: read at the end
                last_read[root(result)] = end
        pairs = set()
        for k, result in enumerate(self.function.results):
            if self.fresh.get(result) != k:
                continue
            step = steps[result]
            reads = result.inputs
            for j, parameter in enumerate(self.function.parameters):
                last = last_read.get(parameter, -1)
                same = (self.shapes[parameter] == self.shapes[result]
                        and parameter.element_type == result.element_type)
                if same and (last < step or (
                        last == step and parameter in reads and self._overwrites_safely(result)
                        and through_view.get(parameter, -1) < step)):
                    pairs.add((k, j))
        return frozenset(pairs)


# -- movement ops as views ----------------------------------------------------------------------

ViewLayout = Callable[[Node, TensorDescription, Tuple[int, ...], Mapping[str, int]],
                      Optional[TensorDescription]]
#: The layout of each movement op's result as a view of its input's layout `source`:
#: `view(node, source, shape, bindings)`, None where no strides show it (it copies).
VIEW_LAYOUTS: OpTable[ViewLayout] = OpTable("cpu view layout")


@VIEW_LAYOUTS.register(core.Transpose)
def _transposed(node: Node, source: TensorDescription, shape, bindings):
    return source.transpose(node.attributes["permutation"])


@VIEW_LAYOUTS.register(core.Reshape)
def _reshaped(node: Node, source: TensorDescription, shape, bindings):
    return source.reshape(shape)


@VIEW_LAYOUTS.register(core.Broadcast)
def _broadcast(node: Node, source: TensorDescription, shape, bindings):
    return source.broadcast(shape, node.attributes["axes"])


@VIEW_LAYOUTS.register(core.Slice)
def _sliced(node: Node, source: TensorDescription, shape, bindings):
    a = node.attributes
    return source.slice(tuple(slice(lo, hi, st) for lo, hi, st in zip(
        concrete(a["lower"], bindings), concrete(a["upper"], bindings), a["strides"])))


@VIEW_LAYOUTS.register(core.Reverse)
def _reversed(node: Node, source: TensorDescription, shape, bindings):
    axes = node.attributes["axes"]
    return source.slice(tuple(slice(None, None, -1) if i in axes else slice(None)
                              for i in range(node.rank)))


def _channels_innermost(node: Node, shape: Tuple[int, ...], dtype) -> TensorDescription:
    """Columns (N, P..., C, R...) laid out as (N, P..., R..., C), images (N, C, S...)
    as (N, S..., C): channels innermost.

    A window row then copies whole runs of an NHWC image's channels (im2col) and
    adds them back in runs into an NHWC image (col2im), instead of one element
    per channel at a stride of the window's size. The products over the columns
    merge their contracted dims in this memory order (the small filters are the
    operand copied).
    """
    if isinstance(node, core.Im2Col):
        nd = (len(shape) - 2) // 2
        channels = 1 + nd
    else:
        nd, channels = len(shape) - 2, 1
    order = tuple(i for i in range(len(shape)) if i != channels) + (channels,)
    physical = tuple(shape[i] for i in order)
    return TensorDescription.row_major(physical, dtype).transpose(
        tuple(int(i) for i in np.argsort(order)))


def relu_source(node: Node) -> Optional[Node]:
    """x of a float ReLU ``Maximum(x, 0)`` (the bound a uniform +0: max(-0.0, -0.0) is
    -0.0), else None."""
    if not isinstance(node, core.Maximum) or \
            node.element_type.dtype not in (np.float32, np.float64):
        return None
    source, bound = node.inputs
    zero = uniform_value(bound)
    if zero is None or zero != 0 or np.signbit(zero):
        return None
    return source


def product_relus(function: core.Function, storage: Mapping[Node, str], shapes: Shapes,
                  products: Mapping[Node, Node]) -> Dict[Node, Node]:
    """Each float ReLU whose x is directly a biased product's Add (`biased_products`)
    read by nothing else, in an arena buffer, of the ReLU's own shape: the product's
    kernel adds the bias and clamps as it stores its sums, writing the ReLU's array
    (`gemm.matmul(..., addend=, relu=True)`), which saves a pass over a dense layer's
    output and the sum in memory (the 784-512-512-10 MLP's forward: two 256 KB passes).
    The ReLU's array may be a result: a training step's forward hands its activations
    to the backward."""
    users = function.users()
    found: Dict[Node, Node] = {}
    for node in function.nodes:
        source = relu_source(node)
        if source is not None and source in products and storage[node] in ("buffer", "fresh") \
                and storage[source] == "buffer" and len(users[source]) == 1 \
                and shapes[source] == shapes[node] and source.element_type == node.element_type:
            found[node] = source
    return found


def bias_relus(function: core.Function, storage: Mapping[Node, str],
               taken: Mapping[Node, Node]) -> Dict[Node, Node]:
    """Each ReLU ``Maximum(x, 0)`` of floats whose x is, through transposes no one else
    reads, an ``Add`` of a Broadcast (a layer's bias) read by nothing else: both are
    computed in one pass at the ReLU's step (`epilogue.bias_relu`), which saves writing
    and reading back the sum (LeNet's first convolution: two passes over 2.9 MB).

    Both must write arena buffers (not results): the ReLU's buffer seen in the Add's
    dim order is made once, when the program is generated. A ReLU `taken` by its
    product's kernel (`product_relus`) is left to it.
    """
    users = function.users()
    found: Dict[Node, Node] = {}
    for node in function.nodes:
        source = relu_source(node)
        if source is None or storage[node] != "buffer" or node in taken:
            continue
        while isinstance(source, core.Transpose) and storage[source] == "view" and \
                len(users[source]) == 1:
            source = source.inputs[0]
        if (isinstance(source, core.Add) and storage[source] == "buffer"
                and len(users[source]) == 1
                and any(isinstance(x, core.Broadcast) for x in source.inputs)
                and source.element_type == node.element_type):
            found[node] = source
    return found


def biased_products(function: core.Function, storage: Mapping[Node, str], shapes: Shapes,
                    bias_relus: Mapping[Node, Node]) -> Dict[Node, Node]:
    """Each float ``Add`` of a matrix product (a 2-d Dot, one free dim per operand, read by
    nothing else, in an arena buffer) and a Broadcast (a dense layer's bias): the
    product's kernel adds the term as it stores its sums (`gemm.matmul(...,
    addend=)`), which saves writing and reading back the product (a transformer
    block's feed-forward layer: 256 KB). An Add computed with its ReLU is left to it.
    """
    users = function.users()
    found: Dict[Node, Node] = {}
    relu_adds = set(bias_relus.values())
    for node in function.nodes:
        if not isinstance(node, core.Add) or node in relu_adds or \
                storage[node] not in ("buffer", "fresh") or \
                node.element_type.dtype not in (np.float32, np.float64):
            continue
        for product, term in (node.inputs, node.inputs[::-1]):
            if (isinstance(product, core.Dot) and isinstance(term, core.Broadcast)
                    and storage[product] == "buffer" and len(users[product]) == 1
                    and product.element_type == node.element_type
                    and not product.batch_a and len(shapes[product]) == 2
                    and shapes[product] == shapes[node]
                    and product.inputs[0].rank - len(product.contract_a) == 1
                    and product.inputs[1].rank - len(product.contract_b) == 1):
                found[node] = product
                break
    return found


def computed_with(node: Node, *pairings: Mapping[Node, Node]) -> Tuple[Node, ...]:
    """The inputs of the nodes computed at `node`'s step besides its own (each pairing
    maps a node to the one it computes with it, which may compute another in turn: a
    ReLU its bias Add, the Add its product)."""
    return tuple(x for pairs in pairings if node in pairs
                 for x in pairs[node].inputs + computed_with(pairs[node], *pairings))


def fused_reduction(node: Node) -> bool:
    """Whether node is a Fused node ending in a reduction or a row op (softmax and its
    backprop), or summing rows on the way (a normalization): its kernel walks rows, so its
    operands and its output are row-major and it never overwrites an operand."""
    return isinstance(node, core.Fused) and (isinstance(
        node.output, (core.Reduction, core.Softmax, core.SoftmaxBackprop))
        or any(type(member) is core.Sum for member in node.body))


def dense_layout_order(layout: Optional[TensorDescription]) -> Optional[Tuple[int, ...]]:
    """Axes outermost-first when `layout` densely fills its elements in that order."""
    return None if layout is None else dense_order(layout.shape, layout.element_strides)


def concrete(values, bindings) -> List[int]:
    return [v if isinstance(v, int) else v.evaluate(bindings) for v in values]
