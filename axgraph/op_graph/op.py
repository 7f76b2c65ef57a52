"""The node of the axes graph (seed 001).

An Op has three kinds of incoming edges:

- ``args``: the values it computes from (data dependencies);
- ``initializers``: ops that must run once before any computation uses it;
- ``other_deps``: ops that must run before it without feeding it data. Every op
  depends on the assigns created before it (graph creation order), unless
  those assigns were made inside ``with Op.saved_user_deps():``.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Iterable, Iterator, List, Optional, Tuple

import numpy as np

from ..axes import Axes, AxesLike
from ..debug_info import DebugInfo, user_location
from ..dtypes import as_dtype
from ..errors import AxgraphError
from ..names import NameableValue
from ..ordered_set import OrderedSet


class _DepsState(threading.local):
    """Per-thread stack of the assigns later ops must follow."""

    def __init__(self):
        self.stack: List[Tuple["Op", ...]] = [()]


_deps_state = _DepsState()


def current_user_deps() -> Tuple["Op", ...]:
    """The assigns that an op created now will depend on."""
    return _deps_state.stack[-1]


def add_user_dep(op: "Op") -> None:
    """Make every op created after now depend on `op` (used by assigns)."""
    _deps_state.stack[-1] = _deps_state.stack[-1] + (op,)


class Op(NameableValue, DebugInfo):
    """A node of the axes graph. Create ops through the `ng.*` functions."""

    #: False for ops that have no value (assign): they are run for effect.
    is_tensor_op = True
    #: True for ops whose value is a stored tensor (constants, variables, ...).
    is_assignable = False
    #: How many leading args are written rather than read (1 for assigns).
    lvalue_args = 0

    def __init__(
        self,
        *args,
        axes: AxesLike = None,
        dtype=None,
        name: Optional[str] = None,
        metadata: Optional[dict] = None,
    ):
        NameableValue.__init__(self, name)
        self._location = user_location(2)
        self.args: Tuple[Op, ...] = tuple(as_op(arg) for arg in args)
        self._axes = Axes(axes)
        self.dtype = as_dtype(dtype)
        self.metadata = dict(metadata or {})
        self.initializers: OrderedSet[Op] = OrderedSet()
        self._dep_snapshot = current_user_deps()
        self._other_deps: Optional[OrderedSet[Op]] = None
        self.schemas: list = []

    # -- graph edges ----------------------------------------------------------
    @property
    def other_deps(self) -> OrderedSet:
        """Ops that must run before this one though it does not read them."""
        if self._other_deps is None:
            self._other_deps = OrderedSet(self._dep_snapshot)
        return self._other_deps

    def control_deps(self) -> Iterable["Op"]:
        """other_deps without materializing a set when nobody changed them."""
        return self._other_deps if self._other_deps is not None else self._dep_snapshot

    @staticmethod
    @contextlib.contextmanager
    def saved_user_deps() -> Iterator[None]:
        """Keep assigns made inside out of the main stream (seed 001).

        Ops built inside do not make later ops depend on them; a computation
        runs them only when it names them (or reaches them through args).
        """
        _deps_state.stack.append(())
        try:
            yield
        finally:
            _deps_state.stack.pop()

    # -- value description ----------------------------------------------------
    @property
    def axes(self) -> Axes:
        """The axes of this op's value (their order is the result's order)."""
        return self._axes

    @property
    def shape(self) -> Tuple:
        """Lengths of `axes`, in order."""
        return self._axes.lengths

    @property
    def location(self) -> Tuple[str, int]:
        """(file, line) of the user code that created this op."""
        return self._location

    def error(self, error_class, message: str) -> AxgraphError:
        """An `error_class` naming this op and where the user created it."""
        return error_class(f"{self.name}: {message}", self._location)

    def variables(self) -> List["Op"]:
        """The trainable variables this op's value depends on, in creation order."""
        found = {op for op in upstream_ops([self]) if getattr(op, "trainable", False)}
        return sorted(found, key=lambda op: op._serial)

    def __repr__(self) -> str:
        axes = ", ".join(f"{a.name}: {a.length}" for a in self._axes)
        return f"<{type(self).__name__} {self.name}({axes}) {self.dtype}>"

    # -- operators: numbers become constants, results broadcast by axes -------
    def __neg__(self):
        return _functions().negative(self)

    def __pos__(self):
        return self

    def __abs__(self):
        return _functions().absolute(self)

    def __add__(self, other):
        return _functions().add(self, other)

    def __radd__(self, other):
        return _functions().add(other, self)

    def __sub__(self, other):
        return _functions().subtract(self, other)

    def __rsub__(self, other):
        return _functions().subtract(other, self)

    def __mul__(self, other):
        return _functions().multiply(self, other)

    def __rmul__(self, other):
        return _functions().multiply(other, self)

    def __truediv__(self, other):
        return _functions().divide(self, other)

    def __rtruediv__(self, other):
        return _functions().divide(other, self)

    def __pow__(self, other):
        return _functions().power(self, other)

    def __rpow__(self, other):
        return _functions().power(other, self)

    def __lt__(self, other):
        return _functions().less(self, other)

    def __le__(self, other):
        return _functions().less_equal(self, other)

    def __gt__(self, other):
        return _functions().greater(self, other)

    def __ge__(self, other):
        return _functions().greater_equal(self, other)

    def __getitem__(self, item):
        from .shape_ops import tensor_slice

        return tensor_slice(self, item)

    # Ops stay hashable and compare by identity: use ng.equal for values.
    __hash__ = object.__hash__

    def __eq__(self, other):
        return self is other

    def __ne__(self, other):
        return self is not other

    def __bool__(self) -> bool:
        return True


def _functions():
    from . import elementwise

    return elementwise


def as_op(value) -> Op:
    """An Op for `value`: ops pass through, numbers and arrays become constants."""
    if isinstance(value, Op):
        return value
    from ..errors import AxgraphTypeError
    from .tensors import scalar_constant

    if isinstance(value, (bool, int, float, np.number)) and not isinstance(value, np.ndarray):
        return scalar_constant(value)
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return scalar_constant(value.item())
    if isinstance(value, (np.ndarray, list, tuple)):
        what = (f"a NumPy array of shape {value.shape}" if isinstance(value, np.ndarray)
                else f"a {type(value).__name__} of {len(value)} items")
        raise AxgraphTypeError(
            f"{what} cannot be an operand: its dimensions have no axes to pair by. Wrap it "
            f"as ng.constant(value, axes), one axis per dimension", user_location())
    raise AxgraphTypeError(f"{type(value).__name__} {value!r:.60} cannot be an operand; ops "
                           f"take tensors (ops) and numbers", user_location())


def upstream_ops(roots: Iterable[Op], include_control: bool = False) -> List[Op]:
    """Every op reachable from `roots` through args (and other_deps if asked)."""
    seen, order, stack = set(), [], list(roots)
    while stack:
        op = stack.pop()
        if op in seen:
            continue
        seen.add(op)
        order.append(op)
        stack.extend(op.args)
        if include_control:
            stack.extend(op.control_deps())
    return order
