"""The Node base class of the core IR.

A node has inputs (other nodes, which must exist first, so no graph can be
cyclic), attributes fixed at construction, exactly one output with an element
type and a shape, a name, and the user's file and line. Construction checks
the inputs and computes the output type at once, raising an error that names
the op and the user's line. Nodes are immutable: a pass that needs a node with
other inputs calls `node.with_inputs(new_inputs)`, the single way to rebuild.
"""
from __future__ import annotations

import abc

import threading
from types import MappingProxyType
from typing import Any, ClassVar, FrozenSet, Mapping, Optional, Sequence, Tuple, Type

from ..debug_info import user_location
from ..errors import AxgraphError, GraphError
from ..names import next_serial
from .op_docs import compose as compose_docstring
from .traits import Traits
from .tensor_types import ElementType, Shape

Location = Tuple[str, int]

_state = threading.local()


class at_location:  # noqa: N801 - used like a function: `with at_location(...)`
    """Record `location` on every node built inside, instead of the caller's line.

    Lowering uses this so core nodes point at the user line that created the
    axes op they come from, not at the line that asked for compilation; every
    rewrite of a Function runs in one per node (a class, not a generator, as
    that is several times cheaper to enter). Blocks nest: leaving one restores
    the location of the block around it.

    Parameters
    ----------
    location : tuple of (str, int), or None
        The file name and line number that nodes built inside the ``with``
        block record (and that their errors name); None records the caller's
        own line again, as outside any block.

    Examples
    --------
    >>> from axgraph import core
    >>> with core.at_location(("model.py", 12)):
    ...     x = core.Parameter(core.f32, (3,))
    >>> x.location
    ('model.py', 12)
    """

    __slots__ = ("_location", "_previous")

    def __init__(self, location: Optional[Location]):
        self._location = location
        self._previous: Optional[Location] = None

    def __enter__(self) -> None:
        self._previous = getattr(_state, "location", None)
        _state.location = self._location

    def __exit__(self, *exception: object) -> None:
        _state.location = self._previous


def _current_location() -> Location:
    override = getattr(_state, "location", None)
    return override if override is not None else user_location()


class Node(Traits, abc.ABC):
    """One op of the core IR: inputs, attributes and one output (element_type, shape).

    A node checks its inputs and computes its output type when it is built, and
    raises at once, naming the op and the user's line; nodes are immutable.
    Subclasses list their attribute names in `_attributes`, normalize raw
    attribute values in `_normalize`, and check inputs and compute the output
    type in `_infer`. Those two run again on `with_inputs`, so a rebuilt node
    is checked exactly like a new one. What backends and passes need to
    know of an op is declared once, as class traits (axgraph/core/traits.py);
    the docstring entries an op class leaves out are its family's
    (axgraph/core/op_docs.py).

    Parameters
    ----------
    inputs : sequence of Node
        The nodes this one computes from. They exist before it, so no graph
        can be cyclic.
    attributes : mapping of str to object
        The op's attribute values by name (those `_attributes` lists), as the
        caller gave them; `_normalize` puts them in canonical form.
    name : str, optional
        A name for the node, shown when a Function is printed and in error
        messages (default: the op's name and a serial number, ``Add_12``).

    Raises
    ------
    GraphError
        An input is not a core node (nothing is converted implicitly: wrap an
        array in `Constant`), or `name` is not a non-empty string.
    """

    _attributes: ClassVar[Tuple[str, ...]] = ()
    # attributes the printed type already shows (e.g. a Reshape's shape)
    _hidden: ClassVar[FrozenSet[str]] = frozenset()
    # attributes printed only when not empty (a Dot's batch dims: most Dots have none)
    _shown_when_set: ClassVar[FrozenSet[str]] = frozenset()
    # docstring entries shared with ops of no common base (axgraph/core/op_docs.py)
    _doc_shared: ClassVar[Optional[str]] = None

    inputs: Tuple["Node", ...]
    element_type: ElementType
    shape: Shape
    name: str
    location: Location
    attributes: Mapping[str, Any]
    _user_name: Optional[str]

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        compose_docstring(cls, Node)

    def __init__(self, inputs: Sequence["Node"], attributes: Mapping[str, Any],
                 name: Optional[str] = None):
        self._init(tuple(inputs), dict(attributes), name, _current_location())

    def _init(self, inputs: Tuple["Node", ...], attributes: dict, name: Optional[str],
              location: Location) -> None:
        put = object.__setattr__
        put(self, "location", location)
        put(self, "_user_name", None)
        if name is not None and (not isinstance(name, str) or not name):
            raise self._fail(GraphError, f"a name must be a non-empty string, not {name!r}")
        put(self, "_user_name", name)
        put(self, "name", name if name is not None else f"{type(self).__name__}_{next_serial()}")
        for position, node in enumerate(inputs):
            if not isinstance(node, Node):
                raise self._fail(GraphError, f"input {position} is {type(node).__name__} "
                                 f"{node!r:.60}, not a core node (no implicit conversion: wrap "
                                 f"values in core.Constant)")
        put(self, "inputs", inputs)
        attributes = self._normalize(attributes)
        put(self, "attributes", MappingProxyType(attributes))
        for key in self._attributes:
            put(self, key, attributes[key])
        element_type, shape = self._infer()
        put(self, "element_type", element_type)
        put(self, "shape", Shape(shape))

    # -- what subclasses define ---------------------------------------------------------
    def _normalize(self, attributes: dict) -> dict:
        """Attribute values in canonical form; raise self._fail(...) on bad ones."""
        return attributes

    @abc.abstractmethod
    def _infer(self) -> Tuple[ElementType, Shape]:
        """Check inputs and attributes; return the output's element type and shape."""

    # -- helpers -------------------------------------------------------------------
    @property
    def op(self) -> str:
        """The op's name: its class name (`Add`, `Dot`, ...)."""
        return type(self).__name__

    @property
    def has_user_name(self) -> bool:
        """Whether `name` was given by the user (printing then shows it)."""
        return self._user_name is not None

    @property
    def rank(self) -> int:
        """The number of dims of the output."""
        return len(self.shape)

    def _fail(self, error_class: Type[AxgraphError], message: str) -> AxgraphError:
        """An error naming this op (and its user name) at the user's line."""
        who = self.op if self._user_name is None else f"{self.op} {self._user_name!r}"
        return error_class(f"{who}: {message}", self.location)

    def with_inputs(self, new_inputs: Sequence["Node"]) -> "Node":
        """This op, same attributes, name and location, over `new_inputs` (re-checked).

        Passes rebuild graphs through this alone, so every rebuilt node is
        checked like a new one.

        Parameters
        ----------
        new_inputs : sequence of Node
            One node per input of this one, in order.

        Returns
        -------
        Node
            `self` when `new_inputs` are this node's own inputs, else a new
            node of this op's class.

        Raises
        ------
        AxgraphError
            The subclass the op's own checks raise for the new inputs (for
            `Add`: DTypeError or ShapeError when they no longer agree).
        """
        new_inputs = tuple(new_inputs)
        if len(new_inputs) == len(self.inputs) and all(a is b for a, b in zip(new_inputs, self.inputs)):
            return self
        node = object.__new__(type(self))
        node._init(new_inputs, dict(self.attributes), self._user_name, self.location)
        return node

    def __setattr__(self, key, value):
        raise AttributeError(f"core nodes are immutable; use with_inputs() to rebuild "
                             f"{self.name} (setting {key!r})")

    def __delattr__(self, key):
        raise AttributeError("core nodes are immutable")

    def type_str(self) -> str:
        """`f32[32, 32]`: element type and shape."""
        return f"{self.element_type}{self.shape}"

    def __repr__(self) -> str:
        return f"<{self.op} {self.name}: {self.type_str()}>"
