"""The node of the axes graph.

An Op has three kinds of incoming edges:

- ``args``: the values it computes from (data dependencies);
- ``initializers``: ops that must run once before any computation uses it;
- ``other_deps``: ops that must run before it without feeding it data.

Assign ordering follows Nervana Graph v0.4: an assign records itself in the
``user_deps`` of the tensor it writes, and an op built afterwards that takes
that tensor as an argument gets those assigns in its ``other_deps``. Nothing
else is ordered: an op that never reads the tensor never runs the assign.
Inside ``with Op.saved_user_deps():`` the records go to a map of their own
that is dropped when the block ends, so updates built there (an optimizer's)
run only when a computation names them.
"""
from __future__ import annotations

import contextlib
import threading
from typing import (TYPE_CHECKING, Any, ClassVar, ContextManager, Dict, Iterable, Iterator, List,
                    Optional, Tuple, Type, TypeVar)

from ..axes import Axes, AxesLike
from ..debug_info import DebugInfo, user_location
from ..dtypes import as_dtype
from ..errors import AxgraphError, AxgraphTypeError, GraphError, IncompatibleAxesError
from ..names import NameableValue
from ..ordered_set import OrderedSet
from ..tensor_description import TensorDescription
from ..traversal import post_order

if TYPE_CHECKING:  # transformers build on op graphs: imported for annotations only
    from ..transformers.base import StoredValue

_E = TypeVar("_E", bound=AxgraphError)


UserDepsMap = Dict["Op", OrderedSet["Op"]]


#: What `with_args` may change besides the declared attributes.
_REBUILD_KEYWORDS = ("axes", "dtype", "name", "metadata")


class _SavedUserDeps(threading.local):
    """Per-thread stack of the maps opened by `Op.saved_user_deps()`."""

    def __init__(self) -> None:
        self.maps: List[UserDepsMap] = []


_saved = _SavedUserDeps()


class _Collectors(threading.local):
    """Per-thread lists collecting new ops: `Op.all_ops()` and `Op.captured_ops()` blocks."""

    def __init__(self) -> None:
        #: Open all_ops() lists: every op made goes into each of them.
        self.all_ops: List[List["Op"]] = []
        #: Open captured_ops() lists: an op made goes into the innermost only.
        self.captured: List[List["Op"]] = []


_collectors = _Collectors()

_Item = TypeVar("_Item")


@contextlib.contextmanager
def _pushed(stack: List[_Item], item: _Item) -> Iterator[_Item]:
    """`item` on top of a per-thread `stack` for the duration of a `with` block."""
    stack.append(item)
    try:
        yield item
    finally:
        stack.pop()


class Op(NameableValue, DebugInfo):
    """A node of the axes graph: a value (or an effect) computed from other ops.

    Create ops through the `ng.*` functions; an Op is a description of a
    computation, and only a transformer's computation gives it values. Its
    `axes` and `dtype` are known when it is built, and so are errors in them,
    which name the user's line. Python's operators build ops too (``x + y``,
    ``-x``, ``x < y``, ``x[1:3]``). Ops compare by identity: use `ng.equal`
    for values.

    Every op is built the same way, by a constructor or by `with_args`: its
    args, its declared `attributes`, the axes and dtype asked for (if any);
    then `infer_axes` and `infer_dtype` give the result's type, and `_finish`
    records what building it does to the graph (an assign on its tensor).
    Constructors only turn what the user passed into those parts; a subclass
    adding a kind of op declares its attributes and overrides those hooks.

    Parameters
    ----------
    *args : Op
        The ops whose values this op computes from.
    axes : Axes, Axis or iterable of Axis, optional
        The result's axes, if the op's kind does not infer them (None: inferred,
        or a scalar).
    dtype : dtype-like, optional
        The result's element type (None: inferred, else float32).
    name : str, optional
        A name for printing and saving; None gives an automatic ``Kind_<n>``.
    metadata : dict, optional
        Free-form facts for tools and frontends, kept with the op.
    **attributes
        One value for each name in the class's `attributes` declaration.

    Raises
    ------
    AxgraphTypeError
        If an arg is not an op, `name` is not a non-empty string, or the
        attributes given are not the declared ones.
    DTypeError
        If `dtype` is not a supported element type.
    AxesError
        If the axes do not fit the op (each kind raises its own subclass).
    """

    #: False for ops that have no value (assign): they are run for effect.
    is_tensor_op = True
    #: True for ops whose value is a stored tensor (constants, variables, ...).
    is_assignable = False
    #: True for ops that act when they run besides giving a value (a print, a check), so
    #: that `sequential` keeps them in their step (ops without a value act too).
    has_effect = False
    #: How many leading args are written rather than read (1 for assigns).
    lvalue_args = 0
    #: The constructor parameters that are facts of the op besides its args (the axes
    #: a reduction reduces, a slice's indices): each is a field of the same name, kept
    #: by `with_args` and shown by the graph printers (axgraph.op_graph.printing).
    attributes: ClassVar[Tuple[str, ...]] = ()
    #: The arg whose element type the result has when no dtype is asked for (None: the
    #: default type); for ops that move values (shape ops, max, print, ...).
    dtype_of_arg: ClassVar[Optional[int]] = None

    def __init__(
        self,
        *args,
        axes: AxesLike = None,
        dtype=None,
        name: Optional[str] = None,
        metadata: Optional[dict] = None,
        **attributes,
    ):
        self._build(args, attributes, axes, dtype, name, metadata,
                    user_location(2, constructing=self))

    def _build(self, args, attributes: dict, axes: AxesLike, dtype, name: Optional[str],
               metadata: Optional[dict], location: Tuple[str, int]) -> None:
        """The one way an op is made: parts in, type inferred, effects recorded."""
        self._location = location
        self._set_attributes(attributes)
        NameableValue.__init__(self, name)
        self.args: Tuple[Op, ...] = _checked_args(type(self).__name__, args)
        #: The axes and dtype the caller asked for (None: inferred); kept by with_args.
        self._asked_axes, self._asked_dtype = axes, dtype
        # What an op is built with never changes under it (Axes.append refuses these).
        made = f"the {type(self).__name__} op made at {location[0]}:{location[1]}"
        self._axes = Axes(self.infer_axes()).hold(f"the axes of {made}")
        for key, value in self.attribute_values.items():
            if isinstance(value, Axes):
                setattr(self, key, Axes(value).hold(f"the {key} of {made}"))
        self.dtype = as_dtype(self.infer_dtype())
        self.metadata = dict(metadata or {})
        self.initializers: OrderedSet[Op] = OrderedSet()
        self.other_deps: OrderedSet[Op] = OrderedSet()
        for arg in self.args:
            if arg.is_assignable:
                self.other_deps.update(arg.user_deps)
        self.schemas: list = []
        for collected in _collectors.all_ops:
            collected.append(self)
        if _collectors.captured:
            _collectors.captured[-1].append(self)
        self._finish()

    def _set_attributes(self, attributes: dict) -> None:
        declared = type(self).attributes
        if set(attributes) != set(declared):
            raise AxgraphTypeError(f"{type(self).__name__} has the attributes {declared}, not "
                                   f"{tuple(attributes)}", self._location)
        for key in declared:
            setattr(self, key, attributes[key])

    # -- what subclasses define ---------------------------------------------------
    def infer_axes(self) -> AxesLike:
        """The result's axes from the args and attributes; raises if they do not fit.

        May put attributes in canonical form (a default that depends on the args
        resolved), so that rebuilding from them gives the same op. The base
        gives the axes asked for (none: a scalar).
        """
        return self._asked_axes

    def infer_dtype(self):
        """The result's element type: the one asked for, else `dtype_of_arg`'s, else the
        default."""
        if self._asked_dtype is None and self.dtype_of_arg is not None:
            return self.args[self.dtype_of_arg].dtype
        return self._asked_dtype

    def _finish(self) -> None:
        """What building this op does beyond itself (an assign records itself on its
        tensor); runs after the type is known, for new and rebuilt ops alike."""

    # -- rebuilding -------------------------------------------------------------
    @property
    def attribute_values(self) -> Dict[str, Any]:
        """{name: value} of the declared attributes, in declaration order."""
        return {key: getattr(self, key) for key in self.attributes}

    @property
    def has_user_name(self) -> bool:
        """Whether the name was given (automatic names are `Kind_serial`)."""
        return self.name != f"{self._name_prefix()}_{self._serial}"

    def with_args(self, *args: "Op", **changed) -> "Op":
        """This op over `args`: same class, attributes (but those in `changed`), asked
        axes and dtype, metadata, other_deps, user location and user-given name.

        The result is checked and typed by the same hooks as a new op, so it is the
        op the constructor would build from these parts. `changed` may also give
        `axes`, `dtype` (the asked ones; None: inferred), `name` (None: an automatic
        one) and `metadata`. Args are taken as given: they must be ops.
        """
        op = self.sibling(type(self), *args, **changed)
        op.other_deps.update(self.other_deps)
        return op

    def sibling(self, op_class: Type["Op"], *args: "Op", **changed) -> "Op":
        """An op of `op_class`, a member of this op's family that declares the same
        attributes (a convolution and its transposes), built like `with_args` builds:
        a new value, so it orders itself only by its own args (no other_deps copied)."""
        if tuple(op_class.attributes) != self.attributes:
            raise self.error(GraphError, f"{op_class.__name__} declares the attributes "
                                         f"{op_class.attributes}, not {self.attributes}")
        unknown = set(changed) - set(self.attributes) - set(_REBUILD_KEYWORDS)
        if unknown:
            raise self.error(AxgraphTypeError,
                             f"{op_class.__name__} has no attribute {', '.join(sorted(unknown))} "
                             f"(its attributes: {self.attributes}; and {_REBUILD_KEYWORDS})")
        attributes = self.attribute_values
        attributes.update((key, changed[key]) for key in self.attributes if key in changed)
        op = op_class.__new__(op_class)
        op._build(args, attributes, changed.get("axes", self._asked_axes),
                  changed.get("dtype", self._asked_dtype),
                  changed.get("name", self.name if self.has_user_name else None),
                  changed.get("metadata", self.metadata), self._location)
        return op

    # -- graph edges ----------------------------------------------------------
    @property
    def user_deps(self) -> OrderedSet["Op"]:
        """The assigns that must run before this tensor is next read (see SetItem).

        Main-stream records live on the tensor itself (they die with it); inside
        `saved_user_deps` they live in that block's map.
        """
        if _saved.maps:
            return _saved.maps[-1].get(self, OrderedSet())
        return self.__dict__.get("_user_deps") or OrderedSet()

    @user_deps.setter
    def user_deps(self, value: Iterable["Op"]) -> None:
        if _saved.maps:
            _saved.maps[-1][self] = OrderedSet(value)
        else:
            self._user_deps = OrderedSet(value)

    def add_other_dep(self, op: "Op") -> None:
        """Make `op` run before this op (Nervana Graph's name for it)."""
        self.other_deps.add(op)

    @staticmethod
    def saved_user_deps(user_deps_map: Optional[UserDepsMap] = None,
                        ) -> ContextManager[UserDepsMap]:
        """Keep the assigns made inside out of the main stream.

        Ops built inside read and record `user_deps` in `user_deps_map` (a new,
        empty map unless one is given; it is yielded), so the assigns they make
        order nothing outside the block: a computation runs them only when it
        names them or reaches them through args.
        """
        return _pushed(_saved.maps, {} if user_deps_map is None else user_deps_map)

    @staticmethod
    def all_ops(ops: Optional[List["Op"]] = None) -> ContextManager[List["Op"]]:
        """Collect every op made inside the block (nested blocks see them too)."""
        return _pushed(_collectors.all_ops, [] if ops is None else ops)

    @staticmethod
    def captured_ops(ops: Optional[List["Op"]] = None) -> ContextManager[List["Op"]]:
        """Collect the ops made inside the block, hidden from enclosing captured_ops blocks."""
        return _pushed(_collectors.captured, [] if ops is None else ops)

    @staticmethod
    def ordered_ops(roots: Iterable["Op"]) -> List["Op"]:
        """The ops `roots` reach through args, each after its args (a topological order)."""
        return post_order(roots, lambda op: op.args)

    def named(self, name: str) -> "Op":
        """Set the name and return this op, for chaining: ``ng.exp(x).named("e")``."""
        self.name = name
        return self

    # -- value description ----------------------------------------------------
    @property
    def axes(self) -> Axes:
        """The axes of this op's value (their order is the result's order)."""
        return self._axes

    @property
    def shape(self) -> Axes:
        """The axes of this op's value: Nervana Graph v0.4's `shape` (its initializers
        and legacy neon code read a tensor's shape as its axes). `axes.lengths` gives
        the lengths."""
        return self._axes

    @property
    def is_scalar(self) -> bool:
        """True for a value without axes."""
        return not self._axes

    @property
    def has_axes(self) -> bool:
        """Whether this op has axes (Nervana Graph v0.4's property): every op with a value
        does, from the moment it is built (a scalar's are empty); an op without a value
        (an assign) does not."""
        return self.is_tensor_op

    def shape_dict(self) -> dict:
        """{short axis name: length} of this op's axes (Nervana Graph v0.4).

        Returns
        -------
        dict
            As `Axes.shape_dict`: each axis's name without a scope prefix, to its length.

        Raises
        ------
        AxesError
            Two of the axes share a short name.
        """
        return self._axes.shape_dict()

    @property
    def value(self) -> "StoredValue":
        """The value this op holds in the transformer that stores it (Nervana Graph v0.4's
        handle to the device tensor).

        A stored tensor (a variable, persistent tensor or constant) that one open
        transformer's computations use has a value there; the handle reads it
        (``x.value.get(None)``, ``np.asarray(x.value)``, ``x.value[0]``) and writes it
        (``x.value[()] = array``, checked like `serialization.set_values`). The tensor is
        initialized first if it was not yet.

        Returns
        -------
        StoredValue
            The handle (`axgraph.transformers.base.StoredValue`).

        Raises
        ------
        GraphError
            The op is not a stored tensor (values of other ops are not kept after a call:
            their storage is reused), or no open transformer, or several, hold it.
        """
        from ..transformers.base import stored_value  # transformers build on op graphs

        return stored_value(self)

    def generate_add_delta(self, adjoints: Dict["Op", "Op"], delta: "Op") -> None:
        """Add `delta` to this op's adjoint in `adjoints` (Nervana Graph v0.4's hook for
        adjoint rules): the first contribution is stored, later ones are summed.

        Parameters
        ----------
        adjoints : dict
            d(cost)/d(op) for the ops seen so far, by op.
        delta : Op
            A contribution to d(cost)/d(self); it must have this op's axes (any order).

        Raises
        ------
        IncompatibleAxesError
            `delta` has other axes than this op.
        """
        if not delta.axes.is_equal_set(self._axes):
            raise IncompatibleAxesError(
                f"generate_add_delta: the adjoint of {self.name} must have its axes "
                f"{self._axes}, but the contribution {delta.name} has {delta.axes}",
                user_location())
        previous = adjoints.get(self)
        adjoints[self] = delta if previous is None else previous + delta

    @property
    def short_name(self) -> str:
        """The name without any scope prefix (the part after the last '/')."""
        return self.name.rsplit("/", 1)[-1]

    @property
    def graph_label(self) -> str:
        """How pictures of the graph label this op: its kind and name."""
        return f"{type(self).__name__}[{self.name}]"

    def tensor_description(self) -> Optional[TensorDescription]:
        """The description of this op's value (Nervana Graph v0.4): its axes and dtype,
        laid out row-major in storage of its own, named after the op; the same object on
        every call. None for an op without a value (an assign).

        Every axis needs a length; one without raises AxisLengthError naming it.
        """
        if not self.is_tensor_op:
            return None
        found = self.__dict__.get("_tensor_description")
        if found is None:
            found = self._tensor_description = TensorDescription(self.axes, dtype=self.dtype,
                                                                 name=self.name)
        return found

    @property
    def location(self) -> Tuple[str, int]:
        """(file, line) of the user code that created this op."""
        return self._location

    def error(self, error_class: Type[_E], message: str) -> _E:
        """An `error_class` naming this op and where the user created it."""
        return error_class(f"{self.name}: {message}", self._location)

    def variables(self) -> List["Op"]:
        """The trainable variables this op's value depends on, in creation order."""
        found = {op for op in upstream_ops([self]) if getattr(op, "trainable", False)}
        return sorted(found, key=lambda op: op._serial)

    def __repr__(self) -> str:
        axes = ", ".join(f"{a.name}: {a.length}" for a in self._axes)
        return f"<{type(self).__name__} {self.name}({axes}) {self.dtype}>"

    # -- operators: bound by operators.py, which imports the op families (see there) ----
    if TYPE_CHECKING:
        def __neg__(self) -> "Op": ...
        def __abs__(self) -> "Op": ...
        def __add__(self, other) -> "Op": ...
        def __radd__(self, other) -> "Op": ...
        def __sub__(self, other) -> "Op": ...
        def __rsub__(self, other) -> "Op": ...
        def __mul__(self, other) -> "Op": ...
        def __rmul__(self, other) -> "Op": ...
        def __truediv__(self, other) -> "Op": ...
        def __rtruediv__(self, other) -> "Op": ...
        def __pow__(self, other) -> "Op": ...
        def __rpow__(self, other) -> "Op": ...
        def __lt__(self, other) -> "Op": ...
        def __le__(self, other) -> "Op": ...
        def __gt__(self, other) -> "Op": ...
        def __ge__(self, other) -> "Op": ...
        def __getitem__(self, item) -> "Op": ...
        def __setitem__(self, item, value) -> None: ...
        def __iadd__(self, other) -> "Op": ...
        def __isub__(self, other) -> "Op": ...
        def __imul__(self, other) -> "Op": ...
        def __itruediv__(self, other) -> "Op": ...
        def mean(self, reduction_axes: AxesLike = None, out_axes: AxesLike = None) -> "Op": ...
        def insert_axis(self, index: int, axis) -> "Op": ...

    def __pos__(self) -> "Op":
        return self

    # An op is not a sequence: `Axes(op)` or `list(op)` must fail clearly instead of
    # iterating through __getitem__ (slicing) until an IndexError.
    __iter__ = None

    # `array + op` must reach Op.__radd__ (and so as_op's clear error) instead of NumPy
    # broadcasting the op into an object array.
    __array_ufunc__ = None

    # Ops stay hashable and compare by identity: use ng.equal for values.
    __hash__ = object.__hash__

    def __eq__(self, other):
        return self is other

    def __ne__(self, other):
        return self is not other

    def __bool__(self) -> bool:
        return True


def _checked_args(kind: str, args) -> Tuple[Op, ...]:
    """`args` as a tuple, each an op: numbers become constants in the constructors
    (`as_op`, in tensors.py, where constants are made), never here."""
    for position, arg in enumerate(args):
        if not isinstance(arg, Op):
            raise AxgraphTypeError(f"{kind}: arg {position} is {type(arg).__name__} {arg!r:.60}, "
                                   f"not an op (ng.constant makes one)", user_location())
    return tuple(args)


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
            stack.extend(op.other_deps)
    return order
