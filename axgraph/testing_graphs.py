"""Random axes graphs, run on every backend and pass set against the NumPy reference.

    from axgraph.testing_graphs import RandomChoices, random_graph, configurations, compare

    graph = random_graph(RandomChoices(seed=7))
    print(graph)                                  # the program, one line per op
    for disagreement in compare(graph, configurations()):
        print(disagreement)

A graph draws axes of lengths 1 to 4 and builds a program over them: leaves
(placeholders, constants, variables) on random axis subsets in random orders,
dual axes, broadcasts, reorders, axis casts, reductions, dots (shared and
dual pairs), slices, concats, stacks, pads, flattens, softmax, elementwise
chains with Python numbers, comparisons, and assigns. Every backend but the
reference runs it, once per `Configuration` (default, unoptimized, each pass
left out in turn, fusion forced on small sizes with each fused engine), and
each result is compared with the reference's. A smooth graph (`smooth=True`)
also returns `deriv` of a weighted sum of its results, and `check_derivatives`
compares the reference's gradients with float64 central differences.

Assigns take a form whose meaning does not depend on how assigns are ordered
against unrelated ops: a fresh variable is written once (or twice) inside
``ng.sequential([assign, ..., read])`` where the read is created after the
assign, and a second computation reads the variable afterwards.

The random decisions come from `Choices`: `RandomChoices` (a seeded NumPy
generator, for long runs: `python benchmarks/fuzz.py`) or, with hypothesis
installed, the `graphs()` strategy (which shrinks a failing graph).
"""
from __future__ import annotations

import abc
import contextlib
import math
import warnings
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, TypeVar, Union

import numpy as np

import axgraph as ng

from .axes import Axes, Axis, DualAxis, FlattenedAxis, elementwise_axes
from .core.traits import NgFunction
from .errors import AxesError, IncompatibleAxesError
from .op_graph import elementwise as ew
from .op_graph.elementwise import Cos, Sin
from .op_graph.op import Op
from .op_graph.shape_ops import parts_of
from .testing import numeric_jacobian
from .transformers import Transformer, make_transformer, transformer_choices

T = TypeVar("T")

#: Bounds that keep a graph quick to run on every configuration.
MAX_RANK = 4
MAX_SIZE = 144
#: Large graphs: one axis longer than a fused kernel's block (64K) and, times 2 or
#: more, than the size from which C kernels use threads (256K).
LARGE_LENGTHS = (65537, 70001, 131075, 140003)
MAX_SIZE_LARGE = 1 << 19
MAX_RESULTS = 4
#: A reference value beyond this (or not finite) makes the graph unsuitable: near
#: overflow, backends legitimately differ.
MAX_MAGNITUDE = 1e6
#: The largest argument of sin or cos compared (see reference_values).
MAX_PERIODIC_ARGUMENT = 64.0


# -- where the random decisions come from -------------------------------------------------

class Choices(abc.ABC):
    """The decisions a graph is built from; every other draw derives from `integer`."""

    @abc.abstractmethod
    def integer(self, low: int, high: int) -> int:
        """An int in [low, high]."""

    def choice(self, options: Sequence[T]) -> T:
        return options[self.integer(0, len(options) - 1)]

    def chance(self, percent: int) -> bool:
        """True `percent` times in 100 (shrinks towards False: the simpler graph)."""
        return self.integer(0, 99) >= 100 - percent

    def permutation(self, items: Sequence[T]) -> List[T]:
        items = list(items)
        for i in range(len(items) - 1, 0, -1):
            j = self.integer(0, i)
            items[i], items[j] = items[j], items[i]
        return items

    def subset(self, items: Sequence[T], low: int = 0, high: Optional[int] = None) -> List[T]:
        """Between low and high of `items`, in a random order."""
        items = self.permutation(items)
        high = len(items) if high is None else min(high, len(items))
        return items[:self.integer(min(low, high), high)]


class RandomChoices(Choices):
    """Decisions from a seeded NumPy generator (reproducible by seed)."""

    def __init__(self, seed=None):
        self.rng = np.random.default_rng(seed)

    def integer(self, low: int, high: int) -> int:
        return int(self.rng.integers(low, high + 1))


class DrawChoices(Choices):
    """Decisions from hypothesis' `data.draw`, so that failing graphs shrink."""

    def __init__(self, draw: Callable):
        from hypothesis import strategies

        self._draw, self._integers = draw, strategies.integers

    def integer(self, low: int, high: int) -> int:
        return self._draw(self._integers(low, high))


# -- the graph --------------------------------------------------------------------------------

@dataclass(repr=False)
class RandomGraph:
    """A generated program: its result ops, what to feed, and its listing."""

    results: List[Op]
    labels: List[str]
    placeholders: List[Op]
    feeds: List[np.ndarray]
    #: Variables written by the results' assigns (read again by a second computation).
    assigned: List[Op]
    listing: List[str]
    dtype: np.dtype
    smooth: bool
    #: The kinds of construct used (e.g. "dot", "slice", "assign").
    constructs: set = field(default_factory=set)
    #: Smooth graphs: the scalar cost, and its gradient per placeholder (among the results).
    cost: Optional[Op] = None
    gradients: List[Op] = field(default_factory=list)
    #: The values computed before any assign (their magnitudes are checked, not compared).
    intermediates: List[Op] = field(default_factory=list)
    #: With an axis of unknown length: feeds of other lengths, for a third call.
    rebound_feeds: Optional[List[np.ndarray]] = None

    def __str__(self) -> str:
        return "\n".join(self.listing)

    def __repr__(self) -> str:  # hypothesis prints falsifying examples with repr
        return "RandomGraph:\n" + str(self)


@dataclass(frozen=True)
class Options:
    """What kind of graph to build (None: drawn at random)."""

    #: Only differentiable ops, float64, with gradients among the results.
    smooth: Optional[bool] = None
    #: A variable update among the results (never in smooth graphs).
    assigns: Optional[bool] = None
    #: An axis without a length, bound from the fed arrays; a third call feeds other lengths.
    unknown_length: Optional[bool] = None
    #: An axis long enough for the fused kernels' blocks and threads (never in smooth graphs).
    large: Optional[bool] = None
    dtype: Optional[type] = None

    def drawn(self, choices: Choices) -> "Options":
        smooth = self.smooth
        if smooth is None:
            smooth = not (self.assigns or self.large) and choices.chance(30)
        dtype = self.dtype or (np.float64 if smooth or choices.chance(70) else np.float32)
        assigns = (not smooth and choices.chance(35)) if self.assigns is None else self.assigns
        unknown = choices.chance(20) if self.unknown_length is None else self.unknown_length
        large = (not smooth and choices.chance(4)) if self.large is None else self.large
        return Options(smooth, assigns and not smooth, unknown, large and not smooth, dtype)


def random_graph(choices: Choices, **options) -> RandomGraph:
    """A random graph from `choices`; `options` are `Options` fields (unset ones are drawn)."""
    with _isolated_assigns():
        return _Builder(choices, Options(**options).drawn(choices)).build()


def graphs(**options):
    """A hypothesis strategy of `random_graph`s with `options` (needs hypothesis)."""
    from hypothesis import strategies

    @strategies.composite
    def strategy(draw):
        return random_graph(DrawChoices(draw), **options)

    return strategy()


def _isolated_assigns():
    """Keep a graph's assigns out of every later graph's ops (seed 001's main stream)."""
    isolate = getattr(Op, "saved_user_deps", None)
    return isolate() if isolate is not None else contextlib.nullcontext()


# Menus of ops by their ng.<name>. The elementwise ones follow from each op's declaration
# (`NgFunction`: its smoothness, domain and rounding), so a new op is drawn by the menu
# its declaration puts it in.

def _declared(base: type) -> Dict[str, NgFunction]:
    """ng name -> declaration, of the elementwise ops of `base`'s arity."""
    return {op.ng.name: op.ng for op in ew.OPS if issubclass(op, base) and op.ng}


UNARY_OPS, BINARY_OPS = _declared(ew.UnaryElementWiseOp), _declared(ew.BinaryElementWiseOp)
#: The order the menus had when they were written by hand, kept so that a seed draws the
#: graph it drew then; ops declared since follow these, in the order declared.
FIRST_ORDER = ("negative", "square", "exp", "tanh", "sigmoid", "sin", "cos", "erf", "absolute",
               "relu", "sign", "floor", "log", "sqrt", "reciprocal", "safelog", "rsqrt", "tan",
               "add", "subtract", "multiply", "divide", "power", "maximum", "minimum", "greater",
               "less", "equal", "not_equal", "greater_equal", "less_equal")


def _menu(declared: Dict[str, NgFunction], keep: Callable[[NgFunction], bool]
          ) -> Tuple[str, ...]:
    names = [name for name, ng_function in declared.items() if keep(ng_function)]
    return tuple(sorted(names, key=lambda name: FIRST_ORDER.index(name)
                        if name in FIRST_ORDER else len(FIRST_ORDER)))


def _smooth_on(domain: str) -> Callable[[NgFunction], bool]:
    return lambda d: d.smoothness == "smooth" and d.domain == domain


SMOOTH_UNARY = _menu(UNARY_OPS, _smooth_on("real"))
KINKED_UNARY = _menu(UNARY_OPS, lambda d: d.smoothness == "kinked")
#: Discontinuous: applied only to exactly known values, where backends cannot round apart.
STEP_UNARY = _menu(UNARY_OPS, lambda d: d.smoothness == "step")
POSITIVE_UNARY = _menu(UNARY_OPS, _smooth_on("positive"))
#: Smooth only away from poles: applied to tanh(x), inside (-1, 1).
BOUNDED_UNARY = _menu(UNARY_OPS, _smooth_on("unit"))
SMOOTH_BINARY = _menu(BINARY_OPS, lambda d: d.smoothness == "smooth" and d.rule.result != "bool")
KINKED_BINARY = _menu(BINARY_OPS, lambda d: d.smoothness == "kinked")
COMPARISONS = _menu(BINARY_OPS, lambda d: d.rule.result == "bool")
SMOOTH_REDUCTIONS = ("sum", "mean", "prod", "variance")
KINKED_REDUCTIONS = ("max", "min")
NUMBERS = (2.0, 0.5, -1.5, 1.0, 3.0)


class _Builder:
    """Builds one RandomGraph, recording each op as a line of the listing."""

    def __init__(self, choices: Choices, options: Options):
        self.c, self.options = choices, options
        self.smooth, self.dtype = bool(options.smooth), np.dtype(options.dtype)
        self.max_size = MAX_SIZE_LARGE if options.large else MAX_SIZE
        #: Axes without a length: id -> (length fed first, length fed in the third call).
        self.bound: Dict[int, Tuple[int, int]] = {}
        self.values = np.random.default_rng(choices.integer(0, 2**32 - 1))
        self.pool: List[Axis] = []
        self.nodes: List[Op] = []          # float tensors available as operands
        self.exact: set = set()           # nodes whose values every backend gets exactly
        self.terminals: List[Op] = []      # results not used further (argmax, comparisons)
        self.sequentials: List[Op] = []
        self.assigned: List[Op] = []
        self.placeholders: List[Op] = []
        self.feeds: List[np.ndarray] = []
        self.listing: List[str] = []
        self.constructs: set = set()
        self.label_of: Dict[int, str] = {}
        self.used: set = set()            # ids of recorded ops that later ops read
        self.axis_labels: Dict[int, str] = {}

    # -- bookkeeping ----------------------------------------------------------------------
    def label(self, op) -> str:
        if isinstance(op, (int, float)):
            return repr(op)
        return self.label_of.get(id(op), op.name)

    def axes_text(self, axes) -> str:
        return "[" + ", ".join(self.axis_label(a) for a in axes) + "]"

    def axis_label(self, axis: Axis) -> str:
        found = self.axis_labels.get(id(axis))
        if found is not None:
            return found
        if isinstance(axis, FlattenedAxis):
            text = "(" + "*".join(self.axis_label(a) for a in axis.axes) + ")"
        elif isinstance(axis, DualAxis):
            text = f"{self.axis_label(axis.base)}{axis.dual_level:+d}"
        else:
            taken = set(self.axis_labels.values())
            text, k = axis.name, 1
            while text in taken:
                text, k = f"{axis.name}'{k}", k + 1
            bound = self.bound.get(id(axis))
            length = f"length={axis.length}" if bound is None else "length=None"
            fed = "" if bound is None else f"  # fed lengths {bound[0]}, then {bound[1]}"
            self.listing.append(f"{text} = make_axis({length}, name={axis.name!r}){fed}")
        self.axis_labels[id(axis)] = text
        return text

    def record(self, op: Op, call: str, construct: str, exact: bool = False,
               operand: bool = True) -> Op:
        """Name `op`, list it as `label = call`, and make it available to later ops."""
        label = f"t{len(self.label_of)}"
        self.label_of[id(op)] = label
        if op.is_tensor_op:
            axes = self.axes_text(op.axes)  # lists any new axis first
            self.listing.append(f"{label} = {call}  # {axes} {op.dtype}")
        else:  # an assign: no value
            self.listing.append(f"{label} = {call}")
        self.constructs.add(construct)
        self.mark_used(op)
        if operand:
            self.nodes.append(op)
        if exact:
            self.exact.add(op)
        return op

    def mark_used(self, op: Op) -> None:
        """Note the recorded ops that `op` reads (through ops the library added between)."""
        stack = list(op.args)
        while stack:
            arg = stack.pop()
            if id(arg) in self.label_of:
                self.used.add(id(arg))
            else:
                stack.extend(arg.args)

    def call(self, function: str, *args, **kwargs) -> str:
        parts = [self.label(a) if isinstance(a, Op) else repr(a) for a in args]
        parts += [f"{k}={self.axes_text(v) if isinstance(v, (list, Axes)) else repr(v)}"
                  for k, v in kwargs.items()]
        return f"{function}({', '.join(parts)})"

    # -- axes ------------------------------------------------------------------------------
    def length(self, axis: Axis, call: int = 0) -> int:
        """The axis' length; for one without a length, the one fed in `call` (0 or 1)."""
        if isinstance(axis, FlattenedAxis):
            return math.prod(self.length(a, call) for a in axis.axes)
        bound = self.bound.get(id(axis.base))
        return axis.length if bound is None else bound[call]

    def unknown(self, axes) -> bool:
        return any(id(a.base) in self.bound for a in parts_of(axes))

    def fits(self, axes, times: int = 1) -> bool:
        """Whether a tensor with `axes` (`times` as many elements) is small enough."""
        return len(axes) <= MAX_RANK and all(
            times * math.prod(self.length(a, call) for a in axes) <= self.max_size
            for call in (0, 1))

    def some_axes(self, low: int = 0, high: int = 3) -> List[Axis]:
        axes = self.c.subset(self.pool, low, high)
        if axes and self.c.chance(10):  # a dual axis in a tensor's own axes
            axes[0] = axes[0] + self.c.choice((-1, 1))
        return axes

    def with_some_of(self, axes: Sequence[Axis]) -> List[Axis]:
        """Some of `axes` and some pool axes, in a random order: a broadcasting partner."""
        mine = self.c.subset([a for a in axes if not isinstance(a, FlattenedAxis)])
        others = self.c.subset([a for a in self.pool if a not in axes], 0, 2)
        return self.c.permutation(mine + others)

    def new_axis(self, length: int, name: str) -> Axis:
        axis = ng.make_axis(length=length, name=name)
        self.axis_label(axis)
        return axis

    # -- leaves -----------------------------------------------------------------------------
    def array(self, shape) -> np.ndarray:
        if self.smooth:  # continuous values: no ties, no kinks
            values = self.values.uniform(-1.5, 1.5, size=shape)
        else:  # halves: exact in every float type, with ties and zeros
            values = self.values.integers(-4, 5, size=shape) / 2.0
        return values.astype(self.dtype)

    def leaf(self, axes: Sequence[Axis], kind: Optional[str] = None) -> Op:
        axes = list(axes)
        while not self.fits(axes):  # a partner drawn around large axes may not fit
            axes.pop()
        axes = Axes(axes)
        kind = kind or self.c.choice(("placeholder", "placeholder", "constant", "variable"))
        if self.unknown(axes):  # only fed arrays give it a length
            kind = "placeholder"
        value = self.array(tuple(self.length(a) for a in axes))
        name = f"t{len(self.label_of)}"
        if kind == "placeholder":
            op = ng.placeholder(axes, dtype=self.dtype, name=name)
            self.placeholders.append(op)
            self.feeds.append(value)
            call = f"placeholder({self.axes_text(axes)})"
        elif kind == "constant":
            op = ng.constant(value, axes, dtype=self.dtype, name=name)
            call = f"constant(<{value.shape} array>, {self.axes_text(axes)})"
        else:
            op = ng.variable(axes, dtype=self.dtype, initial_value=value, name=name)
            call = f"variable({self.axes_text(axes)}, initial_value=<{value.shape} array>)"
        return self.record(op, call, kind, exact=not self.smooth)

    def operand(self) -> Op:
        """Mostly one of the newest nodes (so chains form), sometimes any."""
        if len(self.nodes) > 2 and self.c.chance(60):
            return self.c.choice(self.nodes[-2:])
        return self.c.choice(self.nodes)

    def exact_operand(self) -> Op:
        exact = [n for n in self.nodes if n in self.exact]
        return self.c.choice(exact) if exact else self.leaf(self.some_axes(1, 2))

    def combines(self, x: Op, y: Op) -> bool:
        """Whether an elementwise op of x and y is allowed (no two distinct axes that share a
        name, ng's same-name rule) and its result fits the size bound."""
        try:
            axes = elementwise_axes("combine", x, y)
        except IncompatibleAxesError:
            return False
        return self.fits(axes)

    def combines_all(self, *ops: Op) -> bool:
        """`combines` for an op of three or more args (axes joined left to right)."""
        try:
            return self.fits(elementwise_axes("combine", *ops))
        except IncompatibleAxesError:
            return False

    def partner(self, x: Op):
        """Something to combine with x: an existing node, a new leaf, or a Python number."""
        roll = self.c.integer(0, 9)
        if roll < 2:
            return self.c.choice(NUMBERS)
        if roll < 6:
            fitting = [n for n in self.nodes if self.combines(x, n)]
            if fitting:
                return self.c.choice(fitting)
        return self.leaf(self.with_some_of(x.axes))

    def apply(self, name: str, *args, construct: str = "elementwise", **kwargs) -> Op:
        op = getattr(ng, name)(*args, **kwargs)
        exact = name in EXACT and all(a in self.exact for a in args if isinstance(a, Op))
        return self.record(op, self.call(name, *args, **kwargs), construct, exact)

    def positive(self, x: Op) -> Op:
        """A positive function of x, for ops defined only there."""
        if self.c.chance(50):
            return self.apply("add", self.apply("sigmoid", x), 0.25)
        return self.apply("add", self.apply("square", x), 0.5)

    # -- one method per construct: each returns an op or None (not applicable here) -------
    def unary(self, x: Op) -> Optional[Op]:
        menu = SMOOTH_UNARY + POSITIVE_UNARY + BOUNDED_UNARY + (
            () if self.smooth else KINKED_UNARY + STEP_UNARY)
        name = self.c.choice(menu)
        if name in POSITIVE_UNARY:
            x = self.positive(x)
        elif name in BOUNDED_UNARY:
            x = self.apply("tanh", x)
        elif name in STEP_UNARY:
            x = self.exact_operand()
        return self.apply(name, x)

    def binary(self, x: Op) -> Optional[Op]:
        name = self.c.choice(SMOOTH_BINARY + (() if self.smooth else KINKED_BINARY))
        y = self.partner(x)
        if isinstance(y, Op) and not self.combines(x, y):
            return None
        if BINARY_OPS[name].domain == "positive":  # power: a positive base, any exponent
            return self.apply(name, self.positive(x), y)
        if name == "divide":
            # A divisor is kept from zero, where it would make inf. (At a zero divisor the
            # cpu backend also leaks NumPy's divide-by-zero RuntimeWarning, where the
            # reference returns inf silently: a known bug.)
            numerator, divisor = (y, x) if self.c.chance(50) else (x, y)
            if isinstance(divisor, Op):
                divisor = self.positive(divisor)
            return self.apply(name, numerator, divisor)
        if self.c.chance(50):
            x, y = y, x
        return self.apply(name, x, y)

    def compare(self, x: Op) -> Optional[Op]:
        """(a > b) * x: a mask from exactly known values, used as a number."""
        if self.smooth:
            return None
        a = self.exact_operand()
        b = self.c.choice([n for n in self.nodes if n in self.exact] + [1.0, 0.0])
        if isinstance(b, Op) and not self.combines(a, b):
            return None
        name = self.c.choice(COMPARISONS)
        mask = self.record(getattr(ng, name)(a, b), self.call(name, a, b), "comparison",
                           operand=False)
        if not self.combines(mask, x):
            self.terminals.append(mask)
            return mask
        if self.c.chance(50):  # x where the mask holds, else something else
            y = self.partner(x)
            if not isinstance(y, Op) or self.combines_all(mask, x, y):
                return self.apply("where", mask, x, y, construct="comparison")
        return self.apply("multiply", mask, x, construct="comparison")

    def broadcast(self, x: Op) -> Optional[Op]:
        extra = self.c.subset([a for a in self.pool if a not in x.axes], 1, 2)
        axes = self.c.permutation(list(x.axes) + extra)
        if not extra or not self.fits(axes):
            return None
        op = ng.broadcast(x, axes)
        return self.record(op, self.call("broadcast", x, axes=axes), "broadcast", x in self.exact)

    def reorder(self, x: Op) -> Optional[Op]:
        if len(x.axes) < 2:
            return None
        axes = self.c.permutation(x.axes)
        op = ng.axes_with_order(x, axes)
        op = self.record(op, self.call("axes_with_order", x, axes=axes), "reorder",
                         x in self.exact)
        if self.c.chance(40):  # transformed in that order, then put back (layout sinking)
            inner = self.apply(self.c.choice(SMOOTH_UNARY), op)
            back = ng.axes_with_order(inner, x.axes)
            op = self.record(back, self.call("axes_with_order", inner, axes=list(x.axes)),
                             "reorder")
        return op

    def cast(self, x: Op) -> Optional[Op]:
        """x relabelled with other axes of the same lengths (pool axes or new ones)."""
        if not x.axes or any(isinstance(a, FlattenedAxis) for a in x.axes) \
                or self.unknown(x.axes):
            return None
        axes = []
        for axis in x.axes:
            same = [a for a in self.pool if a.length == axis.length and a not in axes]
            if same and self.c.chance(60):
                axes.append(self.c.choice(same))
            else:
                axes.append(self.new_axis(axis.length, axis.name))
        op = ng.cast_axes(x, axes)
        return self.record(op, self.call("cast_axes", x, axes=axes), "cast", x in self.exact)

    def reduce(self, x: Op) -> Optional[Op]:
        if not x.axes:
            return None
        name = self.c.choice(SMOOTH_REDUCTIONS + (() if self.smooth else KINKED_REDUCTIONS))
        form = self.c.integer(0, 2)
        if form == 0:
            return self.apply(name, x, reduction_axes=self.c.subset(x.axes, 1),
                              construct="reduction")
        if form == 1 or not any(not a.is_batch for a in x.axes):
            return self.apply(name, x, out_axes=self.c.subset(x.axes, 0, len(x.axes) - 1),
                              construct="reduction")
        return self.apply(name, x, construct="reduction")  # all but the batch axis

    def argreduce(self, x: Op) -> Optional[Op]:
        """argmax/argmin of exactly known values (no near-ties to round apart); a result."""
        if self.smooth:
            return None
        x = self.exact_operand()
        if not x.axes:
            return None
        name = self.c.choice(("argmax", "argmin"))
        axes = self.c.subset(x.axes, 1)
        op = getattr(ng, name)(x, reduction_axes=axes)
        self.terminals.append(op)
        return self.record(op, self.call(name, x, reduction_axes=axes), "argreduce",
                           operand=False)

    def dot(self, x: Op) -> Optional[Op]:
        """x . y contracting shared axes and dual pairs (left A+k with right A+k+1)."""
        x_left = self.c.chance(50)
        if self.c.chance(25):  # with an existing node: whatever the two share
            y = self.c.choice(self.nodes)
            free = list(x.axes - y.axes) + list(y.axes - x.axes)
            if not self.fits(free):
                return None
            pair = (x, y) if x_left else (y, x)
            return self.record(ng.dot(*pair), self.call("dot", *pair), "dot")
        y_axes, bases = [], {id(getattr(a, "base", a)) for a in x.axes}
        for axis in x.axes:
            role = self.c.integer(0, 2)
            if role == 0:  # shared
                y_axes.append(axis)
            elif role == 1 and not isinstance(axis, FlattenedAxis):  # dual pair
                y_axes.append(axis + (1 if x_left else -1))
                self.constructs.add("dual")
        y_axes += self.c.subset([a for a in self.pool if id(a.base) not in bases], 0, 2)
        y_axes = list(dict.fromkeys(y_axes))  # x with both A and A+1 may offer A twice
        y = self.leaf(self.c.permutation(y_axes))
        pair = (x, y) if x_left else (y, x)
        op = ng.dot(*pair)
        if not self.fits(op.axes):
            return None
        return self.record(op, self.call("dot", *pair), "dot")

    def slice(self, x: Op) -> Optional[Op]:
        if not x.axes:
            return None
        items: List[Union[int, slice]] = []
        for axis in x.axes:
            kind = self.c.integer(0, 3)
            if kind == 0 or self.unknown([axis]):  # no length: sliced whole
                items.append(slice(None))
            elif kind == 1:
                items.append(self.c.integer(-axis.length, axis.length - 1))
            else:
                step = self.c.choice((1, 2, -1, -2))
                start = self.c.integer(-axis.length, axis.length - 1)
                stop = self.c.choice((None, self.c.integer(-axis.length - 1, axis.length)))
                item = slice(start, stop, step)
                items.append(item if len(range(*item.indices(axis.length))) else slice(None))
        op = ng.tensor_slice(x, tuple(items))
        text = ", ".join(_index_text(i) for i in items)
        return self.record(op, f"{self.label(x)}[{text}]", "slice", x in self.exact)

    def concat(self, x: Op) -> Optional[Op]:
        names = [a.root_name or a.name for a in x.axes]
        axes = [a for a in x.axes if names.count(a.root_name or a.name) == 1
                and not isinstance(a, (FlattenedAxis, DualAxis))]
        if not axes:
            return None
        axis = self.c.choice(axes)
        unknown = self.unknown([axis])
        if unknown and self.smooth:
            # Excluded: deriv of a concat along an axis without a length is refused
            # (NotDifferentiableError: its adjoint slices at the parts' lengths).
            return None
        if not unknown and axis.length >= 2 and self.c.chance(30):
            return self.rejoin(x, axis)
        parts = [x]
        for _ in range(self.c.integer(1, 2)):
            length, rest = self.c.integer(1, 3), [a for a in x.axes if a is not axis]
            if self.c.chance(50) and not unknown and self.fits(rest, length):
                # another tensor: its own axis of that name, its own length
                own = self.new_axis(length, axis.root_name or axis.name)
                parts.append(self.leaf(self.c.permutation(
                    [own if a is axis else a for a in x.axes])))
            else:
                parts.append(self.apply(self.c.choice(SMOOTH_UNARY), x))
        parts = self.c.permutation(parts)
        op = ng.concat_along_axis(parts, axis)
        if self.unknown([axis]):  # every part has the axis itself
            joined = next(a for a in op.axes if a.name == axis.name)
            low, high = self.bound[id(axis.base)]
            self.bound[id(joined)] = (len(parts) * low, len(parts) * high)
        if not self.fits(op.axes):
            return None
        text = "[" + ", ".join(self.label(p) for p in parts) + "]"
        return self.record(op, f"concat_along_axis({text}, {self.axis_label(axis)})", "concat")

    def rejoin(self, x: Op, axis: Axis) -> Op:
        """x cut into pieces along `axis`, joined again in another order."""
        cuts = sorted(self.c.subset(range(1, axis.length), 1, 2))
        bounds = [0] + cuts + [axis.length]
        pieces = []
        for low, high in zip(bounds, bounds[1:]):
            items = tuple(slice(low, high) if a is axis else slice(None) for a in x.axes)
            text = ", ".join(_index_text(i) for i in items)
            pieces.append(self.record(ng.tensor_slice(x, items),
                                      f"{self.label(x)}[{text}]", "slice", x in self.exact))
        pieces = self.c.permutation(pieces)
        op = ng.concat_along_axis(pieces, axis)
        text = "[" + ", ".join(self.label(p) for p in pieces) + "]"
        return self.record(op, f"concat_along_axis({text}, {self.axis_label(axis)})", "concat",
                           x in self.exact)

    def stack(self, x: Op) -> Optional[Op]:
        count = self.c.integer(1, 3)
        axis = self.new_axis(count, f"S{len(self.axis_labels)}")
        parts = [x] + [self.apply(self.c.choice(SMOOTH_UNARY), x) for _ in range(count - 1)]
        pos = self.c.integer(0, len(x.axes))
        op = ng.stack(parts, axis, pos=pos)
        if not self.fits(op.axes):
            return None
        text = "[" + ", ".join(self.label(p) for p in parts) + "]"
        return self.record(op, f"stack({text}, {self.axis_label(axis)}, pos={pos})", "stack")

    def pad(self, x: Op) -> Optional[Op]:
        if not x.axes or any(isinstance(a, FlattenedAxis) for a in x.axes) \
                or self.unknown(x.axes):
            return None
        paddings = [self.c.choice((0, 1, (0, 1), (2, 0), (1, 2))) for _ in x.axes]
        op = ng.pad(x, paddings)
        if not self.fits(op.axes):
            return None
        return self.record(op, self.call("pad", x, paddings), "pad", x in self.exact)

    def flatten(self, x: Op) -> Optional[Op]:
        if len(x.axes) < 2 or any(isinstance(a, FlattenedAxis) for a in x.axes):
            return None
        if self.c.chance(50):
            op, call = ng.flatten(x), self.call("flatten", x)
        else:
            at = self.c.integer(1, len(x.axes) - 1)
            op, call = ng.flatten_at(x, at), self.call("flatten_at", x, at)
        return self.record(op, call, "flatten", x in self.exact)

    def unflatten(self, x: Op) -> Optional[Op]:
        flat = [n for n in self.nodes if any(isinstance(a, FlattenedAxis) for a in n.axes)
                and len({id(a) for a in parts_of(n.axes)})
                == len(parts_of(n.axes))]
        if not flat:
            return None
        x = self.c.choice(flat)
        return self.record(ng.unflatten(x), self.call("unflatten", x), "unflatten",
                           x in self.exact)

    def softmax(self, x: Op) -> Optional[Op]:
        if not x.axes:
            return None
        axes = self.c.subset(x.axes, 1)
        op = ng.softmax(x, normalization_axes=axes)
        return self.record(op, self.call("softmax", x, normalization_axes=axes), "softmax")

    CONSTRUCTS = ("unary", "unary", "binary", "binary", "binary", "compare", "broadcast",
                  "reorder", "cast", "reduce", "reduce", "argreduce", "dot", "dot", "slice",
                  "slice", "concat", "stack", "pad", "flatten", "unflatten", "softmax")

    # -- assigns ---------------------------------------------------------------------------
    def update(self) -> None:
        """sequential([assign(v, value), (assign(v, value2),) read]) on a fresh variable v.

        v is read only by the assigns' values and by ops created after the
        assigns, so every ordering rule gives the same values.
        """
        candidates = [n for n in self.nodes if n.axes and not self.unknown(n.axes)
                      and not any(isinstance(a, FlattenedAxis) for a in n.axes)]
        if not candidates:
            return
        earlier = list(self.nodes)  # none of them reads v
        x = self.c.choice(candidates)
        axes = self.c.permutation(list(x.axes) + self.c.subset(
            [a for a in self.pool if a not in x.axes and not self.unknown([a])], 0, 1))
        if not self.fits(axes):
            axes = self.c.permutation(x.axes)
        v = self.leaf(axes, "variable")
        self.nodes.remove(v)  # read only below, after the assigns
        steps = [self.write(v, x)]
        if self.c.chance(40):  # a second write, reading the first one's result
            steps.append(self.write(v, self.apply("multiply", v, 0.5, construct="assign")))
        read = self.read_after(v, earlier)
        op = ng.sequential(steps + [read])
        text = ", ".join(self.label(s) for s in steps + [read])
        self.record(op, f"sequential([{text}])", "assign", operand=False)
        self.sequentials.append(op)
        self.assigned.append(v)

    def write(self, v: Op, value: Op) -> Op:
        if self.c.chance(35):  # a region: set_item(v, item, value of the region's shape)
            items: List[Union[int, slice]] = []
            for axis in v.axes:
                kind = self.c.integer(0, 2)
                if kind == 0:
                    items.append(self.c.integer(0, axis.length - 1))
                elif kind == 1 or axis.length == 1:
                    items.append(slice(None))
                else:
                    items.append(slice(self.c.integer(0, axis.length - 2), None))
            region = ng.tensor_slice(v, tuple(items)).axes
            source = self.leaf(region, "placeholder")
            op = ng.set_item(v, tuple(items), source)
            text = ", ".join(_index_text(i) for i in items)
            self.record(op, f"set_item({self.label(v)}, ({text},), {self.label(source)})",
                        "set_item", operand=False)
            return op
        if self.c.chance(50):  # the new value reads v's old one
            value = self.apply("add", value, self.apply("multiply", v, 0.5), construct="assign")
        op = ng.assign(v, value)
        self.record(op, self.call("assign", v, value), "assign", operand=False)
        return op

    def read_after(self, v: Op, earlier: List[Op]) -> Op:
        kind = self.c.integer(0, 3)
        if kind == 0:
            return v
        if kind == 1:
            return self.apply("tanh", v)
        if kind == 2:
            return self.apply("sum", v, reduction_axes=self.c.subset(v.axes, 1))
        others = [n for n in earlier if self.combines(v, n)]
        return self.apply("add", v, self.c.choice(others)) if others else v

    # -- the whole graph ---------------------------------------------------------------------
    def build(self) -> RandomGraph:
        for k in range(self.c.integer(2, 5)):
            length = self.c.integer(1, 4)
            if k == 0 and self.options.large:
                length = self.c.choice(LARGE_LENGTHS)
            unknown = k == 1 and self.options.unknown_length
            axis = ng.make_axis(length=None if unknown else length,
                             name="N" if k == 4 else "ABCD"[k])
            if unknown:
                self.bound[id(axis)] = (length, self.c.integer(1, 4))
            self.pool.append(axis)
            self.axis_label(axis)
        first = self.some_axes(1, 3)
        if self.bound and not self.unknown(first):  # a fed array binds the unknown length
            first.append(self.pool[1])
        self.leaf(first, "placeholder")
        for _ in range(self.c.integer(1, 12)):
            for _attempt in range(6):
                construct = self.c.choice(self.CONSTRUCTS)
                try:
                    made = getattr(self, construct)(self.operand())
                except AxesError:
                    # ng refused to build it (the same axis twice, two distinct axes with
                    # one name): not applicable here. Refusals are tested in test_errors.
                    made = None
                if made is not None:
                    break
        # The ops nothing reads are the results, so that (nearly) every op built is computed.
        sinks = [n for n in self.nodes if id(n) not in self.used]
        results = sinks[-MAX_RESULTS:] + self.terminals
        intermediates = [n for n in self.nodes if n.dtype.kind == "f"]
        if self.options.assigns:
            try:
                self.update()
            except AxesError:  # a region's axes clash (see the loop above): no assign
                pass
        results += self.sequentials
        graph = RandomGraph(results, [self.label(r) for r in results], self.placeholders,
                            self.feeds, self.assigned, self.listing, self.dtype, self.smooth,
                            self.constructs, intermediates=intermediates)
        if self.options.large:
            self.constructs.add("large")
        if self.bound:
            self.constructs.add("unknown length")
            graph.rebound_feeds = [value if not self.unknown(p.axes) else
                                   self.array(tuple(self.length(a, 1) for a in p.axes))
                                   for p, value in zip(self.placeholders, self.feeds)]
        if self.smooth and self.placeholders:
            self.add_gradients(graph)
        graph.listing.append("results: " + ", ".join(graph.labels))
        return graph

    def add_gradients(self, graph: RandomGraph) -> None:
        """cost = sum of each result times fixed random weights; its gradients become results."""
        terms = []
        for r in list(graph.results):
            if self.unknown(r.axes):  # no constant has such axes: weigh by r itself
                weights = r
            else:
                lengths = tuple(self.length(a) for a in r.axes)
                weights = ng.constant(self.values.uniform(0.5, 1.5, lengths), r.axes,
                                   dtype=self.dtype)
            terms.append(ng.sum(ng.multiply(r, weights), out_axes=()))
        cost = terms[0]
        for term in terms[1:]:
            cost = ng.add(cost, term)
        graph.cost = cost
        graph.listing.append("cost = " + " + ".join(f"sum({label} * <weights>)"
                                                    for label in graph.labels))
        for p in graph.placeholders:
            graph.gradients.append(ng.deriv(cost, p))
            graph.results.append(graph.gradients[-1])
            graph.labels.append(f"deriv(cost, {self.label(p)})")
        graph.constructs.add("deriv")


#: Ops whose result is exact when their inputs are (halves stay exact under them).
EXACT = {name for name, declared in {**UNARY_OPS, **BINARY_OPS}.items()
         if declared.rounding == "exact"} | {"max", "min"}


def _index_text(item) -> str:
    if not isinstance(item, slice):
        return str(item)
    parts = ["" if v is None else str(v) for v in (item.start, item.stop, item.step)]
    return ":".join(parts[:2]) + (f":{parts[2]}" if item.step is not None else "")


# -- ways to run a graph --------------------------------------------------------------------

@dataclass(frozen=True)
class Configuration:
    """One way to run a graph: a backend, its options, and a pass left out (or none)."""

    name: str
    backend: str
    options: Tuple[Tuple[str, object], ...] = ()
    without: Optional[str] = None
    #: cpu: fuse groups from this many elements (1: every group, even tiny ones).
    fuse_min_elements: Optional[int] = None
    #: Run the cpu fusion pass last (any backend runs the Fused nodes it makes).
    fused: bool = False

    def make(self) -> Transformer:
        transformer: Any = make_transformer(self.backend, **dict(self.options))
        if self.fuse_min_elements is not None:
            transformer.backend_options["fuse_min_elements"] = self.fuse_min_elements
        if self.fused:
            from .transformers.cpu.fusion import FusionPass

            unfused = transformer.passes
            transformer.passes = lambda: [*unfused(), FusionPass()]
        if self.without is not None:  # the pipeline is built by `passes()` per computation
            every = transformer.passes
            transformer.passes = lambda: [p for p in every() if type(p).__name__ != self.without]
        return transformer

    def __str__(self) -> str:
        return self.name


def configurations(backends: Optional[Sequence[str]] = None) -> List[Configuration]:
    """Every way to run a graph on `backends` (default: every one but the reference).

    Per backend: its default, optimize=False, and each pass of its pipeline
    left out in turn; the cpu backend also without fusion and with every group
    fused, on each engine available ("c" needs a C compiler). The passes are
    the same on every lowering backend, so "jax" (whose programs each cost a
    compilation by XLA) runs only its default and optimize=False; "gpu", the jax
    backend on a GPU, is left out unless asked for (the machine may have none).
    """
    found = []
    for backend in backends or [b for b in transformer_choices() if b not in ("numpy", "gpu")]:
        variants = [Configuration(backend, backend)]
        if backend == "cpu":
            from .transformers.cpu.fusion import available_engines

            # "auto" takes the C engine where it can, NumPy for the rest (integers).
            main = Configuration("cpu fused", "cpu", fuse_min_elements=1)
            variants += [Configuration("cpu fuse=False", "cpu", (("fuse", False),)), main]
            if available_engines() != ["numpy"]:
                variants.append(Configuration("cpu fused engine=numpy", "cpu",
                                              (("engine", "numpy"),), fuse_min_elements=1))
        else:
            main = variants[0]
        if backend == "interpreter":  # fused functions checked on the reference path too
            variants.append(Configuration("interpreter fused", backend, fused=True))
        with main.make() as transformer:
            passes = getattr(transformer, "passes", None)
            names = list(dict.fromkeys(type(p).__name__ for p in passes())) if passes else []
        if names:
            variants.append(Configuration(f"{backend} optimize=False", backend,
                                          (("optimize", False),)))
        if backend not in ("jax", "gpu"):
            variants += [replace(main, name=f"{main.name} without {n}", without=n)
                         for n in names]
        found += variants
    return found


# -- running and comparing --------------------------------------------------------------------

class UnsuitableGraph(Exception):
    """The reference's values cannot be compared: some are near overflow."""


@dataclass
class Disagreement:
    """A configuration's result that differs from the reference's."""

    configuration: str
    result: str
    problem: str
    max_abs: float = math.nan
    max_rel: float = math.nan

    def __str__(self) -> str:
        return f"{self.configuration}: {self.result}: {self.problem}"


def execute(graph: RandomGraph, transformer: Transformer) -> Dict[str, np.ndarray]:
    """Every value a graph defines on `transformer`, by label.

    The main computation runs twice when it assigns (the second call starts
    from the first's updates); a second computation then reads the variables.
    """
    fed = [np.array(f, copy=True) for f in graph.feeds]
    main = transformer.computation(graph.results, *graph.placeholders)
    values = dict(zip(graph.labels, main(*fed)))
    if graph.assigned:
        values.update((f"{label} (2nd call)", value)
                      for label, value in zip(graph.labels, main(*fed)))
    if graph.rebound_feeds is not None:
        values.update((f"{label} (other lengths)", value)
                      for label, value in zip(graph.labels, main(*graph.rebound_feeds)))
    if graph.assigned:
        read = transformer.computation(graph.assigned)()
        values.update((f"{v.name} read afterwards", value)
                      for v, value in zip(graph.assigned, read))
    for p, before, after in zip(graph.placeholders, graph.feeds, fed):
        if not np.array_equal(before, after):
            raise AssertionError(f"the fed array of {p.name} was modified")
    return {label: v for label, v in values.items() if v is not None}


def reference_values(graph: RandomGraph) -> Dict[str, np.ndarray]:
    """The reference's values; UnsuitableGraph where they cannot be trusted to compare.

    Every intermediate value must stay finite and within MAX_MAGNITUDE too: near
    overflow, backends legitimately round apart (a float32 exp that is inf in one
    and finite in another). This also keeps out a known bug: the cpu backend leaks
    NumPy's overflow RuntimeWarning where the reference gets inf silently.
    """
    with make_transformer("numpy") as transformer:
        values = execute(graph, transformer)
    with make_transformer("numpy") as transformer:
        computation = transformer.computation(graph.intermediates, *graph.placeholders)
        intermediates = computation(*graph.feeds) if graph.intermediates else ()
    for value in list(values.values()) + list(intermediates):
        if value.dtype.kind == "f" and not (np.all(np.isfinite(value))
                                            and np.all(np.abs(value) <= MAX_MAGNITUDE)):
            raise UnsuitableGraph("a value is too large for a comparison")
    # sin and cos of a large argument turn its last-ulp differences (NumPy's own loops
    # differ by an ulp between strided and contiguous arrays) into visible ones.
    periodic = [op.args[0] for op in Op.ordered_ops(graph.results)
                if isinstance(op, (Sin, Cos))
                and op.args[0] in graph.intermediates]
    if periodic:
        with make_transformer("numpy") as transformer:
            arguments = transformer.computation(periodic, *graph.placeholders)(*graph.feeds)
        if any(np.max(np.abs(value), initial=0.0) > MAX_PERIODIC_ARGUMENT
               for value in arguments):
            raise UnsuitableGraph("sin or cos of an argument too large to compare")
    return values


def tolerance(dtype: np.dtype) -> Tuple[float, float]:
    """(rtol, atol as a fraction of the result's largest magnitude) for `dtype`.

    Backends reassociate sums and use other math libraries (C vector exp),
    so agreement is to a few thousand ulps, relative to the result's scale:
    a wrong axis, slice or pass is off by far more.
    """
    return (1e-7, 1e-9) if np.dtype(dtype) == np.float64 else (2e-3, 2e-4)


def differences(label: str, expected: np.ndarray, actual) -> Optional[Disagreement]:
    """How `actual` differs from the reference's `expected` (None: it agrees)."""
    actual = np.asarray(actual)
    if actual.shape != expected.shape:
        return Disagreement("", label, f"shape {actual.shape}, expected {expected.shape}")
    if actual.dtype != expected.dtype:
        return Disagreement("", label, f"dtype {actual.dtype}, expected {expected.dtype}")
    if expected.dtype.kind != "f":
        wrong = int(np.count_nonzero(actual != expected))
        return Disagreement("", label, f"{wrong} of {expected.size} values differ") if wrong \
            else None
    rtol, atol = tolerance(expected.dtype)
    e, a = expected.astype(np.float64), actual.astype(np.float64)
    scale = max(1.0, float(np.max(np.abs(e), initial=0.0)))
    error = np.abs(a - e)
    error = np.where(np.isnan(error), np.inf, error)
    if np.all(error <= rtol * np.abs(e) + atol * scale):
        return None
    max_abs = float(np.max(error))
    max_rel = float(np.max(error / np.maximum(np.abs(e), 1e-300)))
    return Disagreement("", label, f"max abs error {max_abs:.3g}, max rel error {max_rel:.3g}",
                        max_abs, max_rel)


def compare(graph: RandomGraph, configs: Sequence[Configuration]) -> List[Disagreement]:
    """Disagreements of every configuration with the reference (raises UnsuitableGraph)."""
    expected = reference_values(graph)
    return [replace(problem, configuration=str(config))
            for config in configs for problem in _compare_one(graph, config, expected)]


def _compare_one(graph, config, expected) -> Iterator[Disagreement]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        try:
            with config.make() as transformer:
                actual = execute(graph, transformer)
        except Exception as error:  # noqa: BLE001 - any failure is the finding
            first = str(error).splitlines()[0] if str(error) else ""
            yield Disagreement("", "(run)", f"raised {type(error).__name__}: {first}")
            return
    for warning in caught:
        if issubclass(warning.category, RuntimeWarning):
            yield Disagreement("", "(run)", f"RuntimeWarning: {warning.message}")
            break
    for label in expected.keys() - actual.keys():
        yield Disagreement("", label, "missing")
    for label, value in expected.items():
        if label in actual:
            problem = differences(label, value, actual[label])
            if problem is not None:
                yield problem


# -- derivatives ------------------------------------------------------------------------------

#: Central-difference step, and the agreement asked of deriv: relative to the gradient's
#: scale, plus the finite differences' own error (estimated from a second, doubled step).
DERIV_STEP = 1e-6
DERIV_TOLERANCE = 1e-5
#: Relative rounding error of one cost evaluation, in float64 ulps: a central difference
#: of a cost of magnitude |c| carries up to about this * eps * |c| / step of noise (a cost
#: with exp(30) in it has no usable finite differences at this step, whatever the
#: second step size happens to give).
DERIV_ROUNDING_ULPS = 16


def check_derivatives(graph: RandomGraph) -> List[Disagreement]:
    """deriv(cost, p) on the reference against float64 central differences of the cost."""
    if graph.cost is None:
        return []
    try:
        return _check_derivatives(graph)
    except Exception as error:  # noqa: BLE001 - a deriv that cannot be built or run
        return [Disagreement("numpy deriv", "(run)", f"raised {type(error).__name__}: {error}")]


def _check_derivatives(graph: RandomGraph) -> List[Disagreement]:
    found = []
    with make_transformer("numpy") as transformer:
        cost = transformer.computation(graph.cost, *graph.placeholders)
        gradients = transformer.computation(graph.gradients, *graph.placeholders)(*graph.feeds)
        rounding = (DERIV_ROUNDING_ULPS * np.finfo(np.float64).eps
                    * abs(float(cost(*graph.feeds))) / DERIV_STEP)
        for k, (symbolic, gradient) in enumerate(zip(gradients, graph.gradients)):
            def cost_at(value, k=k):
                return cost(*graph.feeds[:k], value, *graph.feeds[k + 1:])

            numeric = numeric_jacobian(cost_at, graph.feeds[k], DERIV_STEP)
            coarse = numeric_jacobian(cost_at, graph.feeds[k], 2 * DERIV_STEP)
            label = graph.labels[graph.results.index(gradient)]
            symbolic = np.asarray(symbolic)
            if symbolic.shape != numeric.shape:
                found.append(Disagreement("numpy deriv", label,
                                          f"shape {symbolic.shape}, expected {numeric.shape}"))
                continue
            error = np.abs(symbolic - numeric)
            scale = max(1.0, float(np.max(np.abs(numeric), initial=0.0)))
            if np.all(error <= DERIV_TOLERANCE * scale + np.abs(coarse - numeric) + rounding):
                continue
            worst = float(np.max(error))
            found.append(Disagreement("numpy deriv", label,
                                      f"max abs error {worst:.3g} against finite differences "
                                      f"(scale {scale:.3g})", worst, worst / scale))
    return found
