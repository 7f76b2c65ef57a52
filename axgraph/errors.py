"""One exception hierarchy for the whole library.

Every error names what went wrong (the op, the axes or shapes) and where the
user built it, so a failure deep inside a computation points back at user code.
Each class also derives from the builtin exception a plain Python library would
raise (TypeError for an argument of the wrong kind, ValueError for one of the
right kind but an unusable value, ...), so existing `except` clauses keep working:
every TypeError-like error is an AxgraphTypeError, every ValueError-like one an
AxgraphValueError.
"""
from __future__ import annotations

from typing import Optional, Tuple, Type, TypeVar


class AxgraphError(Exception):
    """Root of every error axgraph raises on purpose."""

    def __init__(self, message: str, location: Optional[Tuple[str, int]] = None):
        self.message = message
        self.location = location
        if location is not None:
            message = f"{message}\n  (at {location[0]}:{location[1]})"
        super().__init__(message)


class AxgraphTypeError(AxgraphError, TypeError):
    """An argument of the wrong kind: a NumPy array where a tensor is needed, a non-Axis
    among axes, a length that is not an int."""


class AxgraphValueError(AxgraphError, ValueError):
    """An argument of the right kind whose value cannot be used (an unknown transformer
    name); the subclasses below say what kind of value."""


class AxesError(AxgraphValueError):
    """Axes that cannot be used the way they were asked to be."""


class DuplicateAxisError(AxesError):
    """An axis appears twice in one Axes: a tensor holds each axis at most once."""


class IncompatibleAxesError(AxesError):
    """Axes whose lengths or sets do not fit the operation."""


class UnmatchedAxesError(AxesError):
    """Axes that were required to pair with others and found no partner."""


class AmbiguousAxesError(AxesError):
    """An op or layer left to choose its axes by default found no single sensible choice
    (softmax over several axes that are neither batch nor recurrent): pass the axes
    explicitly, or flag a sequence axis with ``recurrent=True`` so defaults leave it alone."""


class AxisLengthError(AxesError):
    """An axis length is unset where a length is needed, or is invalid."""


class FeedError(AxgraphValueError):
    """A value passed to a computation does not fit its placeholder."""


class ShapeError(AxgraphValueError):
    """Shapes (or symbolic dims) that do not fit the operation."""


class LayoutError(ShapeError):
    """A memory layout that cannot exist or cannot express a view: strides, sizes or
    offsets that do not fit a buffer, or a flatten whose parts are not contiguous with
    respect to each other (a copy is needed)."""


class TensorIndexError(LayoutError, IndexError):
    """An index outside a tensor description's shape.

    It is also an ``IndexError`` so generic code that guards indexing keeps
    working, but its message always names the tensor, the index and the shape.
    """


class ShapeConflictError(ShapeError):
    """Sizes that cannot fit together whatever data is fed: the shape solver refuted a
    constraint. The message names every line of user code that contributed;
    `conflicts` holds each contradiction found (`axgraph.shapes.Conflict`)."""

    def __init__(self, message: str, location: Optional[Tuple[str, int]] = None,
                 conflicts: tuple = ()):
        super().__init__(message, location)
        self.conflicts = tuple(conflicts)


class ShapeCheckError(ShapeError, FeedError):
    """Fed data whose sizes break a constraint that could only be checked once they were
    known (a residual of the shape solver); the message names the lines behind the
    constraint, the line feeding the data and the sizes fed."""

    def __init__(self, message: str, location: Optional[Tuple[str, int]] = None,
                 conflicts: tuple = ()):
        super().__init__(message, location)
        self.conflicts = tuple(conflicts)


class DTypeError(AxgraphTypeError):
    """An element type that the operation does not accept."""


class GraphError(AxgraphValueError):
    """A malformed graph: assigning to a constant, a cycle, a missing value."""


class UnsupportedOperatorError(GraphError):
    """An operation of another framework (an ATen op, an ONNX operator, a TensorFlow op
    type) that axgraph has no rule for: each importer raises its own subclass, and this
    class catches them all."""


class ExecutionError(AxgraphError, RuntimeError):
    """A computation failed while running (bad label values, shapes fed late, ...)."""


class OutOfMemoryError(ExecutionError, MemoryError):
    """A computation needs more memory than the machine (or device) can give it."""


class NotDifferentiableError(AxgraphTypeError):
    """deriv() reached an op that has no derivative."""


class TransformerClosedError(AxgraphError, RuntimeError):
    """A closed transformer (or one of its computations) was used."""


class SerializationError(AxgraphValueError):
    """A file of saved variables cannot be written or is not one axgraph can read safely."""


class AxgraphIndexError(AxgraphError, IndexError, TypeError):
    """An index or slice NumPy would refuse too (a float, a step of zero).

    NumPy raises IndexError for a bad index and TypeError for a bad slice
    bound; this is both, so either `except` clause catches it.
    """


_E = TypeVar("_E", bound=AxgraphError)

#: Where the docs list everything an op needs to run on every transformer.
ADDING_AN_OP = 'docs/architecture.md, section "Adding an op"'


def no_kernel_error(error_class: Type[_E], op: str, location: Optional[Tuple[str, int]],
                    missing: str, how: str) -> _E:
    """The error of a transformer or backend that cannot run an op: which op, the user's
    line that built it, and how to add what is missing.

    Parameters
    ----------
    error_class : type
        The AxgraphError subclass to make.
    op : str
        The op, as the user knows it (its class, and its name where it has one).
    location : (str, int) or None
        The user's file and line that built it.
    missing : str
        What is missing ("numpy transformer kernel for it").
    how : str
        What to register, and where, to add it.

    Returns
    -------
    AxgraphError
        The error, of `error_class`, to raise.
    """
    return error_class(f"cannot run {op} (built at the line shown below): there is no "
                       f"{missing}. To add one, {how}; {ADDING_AN_OP}, lists each step",
                       location)
