"""Transformer and Computation: what every backend shares.

A transformer owns the stored tensors (persistent values live as long as it
does); a computation is a callable made from result ops and the placeholders
passed positionally to it. This module does the argument handling and the
checks of fed values; backends supply `_execute`.
"""
from __future__ import annotations

import abc
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..axes import Axis, FlattenedAxis
from ..debug_info import user_location
from ..dtypes import can_feed, cast
from ..errors import FeedError
from ..op_graph.op import Op, current_user_deps
from ..op_graph.schedule import schedule
from ..op_graph.tensors import AssignableTensorOp


class LengthBindings:
    """Axis lengths for one call: set lengths, plus lengths bound from fed data."""

    def __init__(self):
        self._bound: Dict[Axis, int] = {}

    def get(self, axis: Axis) -> Optional[int]:
        """The length of `axis` if known, else None."""
        if isinstance(axis, FlattenedAxis):
            parts = [self.get(a) for a in axis.axes]
            return None if None in parts else int(np.prod(parts, dtype=np.int64))
        base = axis.base
        return base.length if base.length is not None else self._bound.get(base)

    def length(self, axis: Axis, op: Optional[Op] = None) -> int:
        """The length of `axis`, or a FeedError saying how to provide it."""
        found = self.get(axis)
        if found is None:
            where = f" (needed by {op.name})" if op is not None else ""
            raise FeedError(
                f"axis {axis.name} has no length{where}: set {axis.name}.length or feed a "
                f"placeholder that has this axis", op.location if op is not None else None)
        return found

    def lengths(self, axes, op: Optional[Op] = None) -> Tuple[int, ...]:
        """Lengths of all `axes`."""
        return tuple(self.length(a, op) for a in axes)

    def bind(self, axis: Axis, length: int) -> None:
        """Record the length of an axis whose length is not set."""
        self._bound[axis.base] = int(length)


class Computation:
    """A callable computing `results` from values of `parameters`.

    Call with the parameters' values positionally (each in its placeholder's
    axis order) or as ``feed_dict={placeholder: value}``. A single result op
    gives one array, a list or tuple gives a tuple, a set gives a dict, and an
    op without a value (an assign) gives None.
    """

    def __init__(self, transformer: "Transformer", results, parameters: Sequence[Op]):
        self.transformer = transformer
        self._location = user_location()
        self.result_kind, self.results = _normalize_results(results)
        self.parameters: Tuple[AssignableTensorOp, ...] = tuple(parameters)
        for parameter in self.parameters:
            if not (isinstance(parameter, AssignableTensorOp) and parameter.input):
                raise FeedError(f"computation parameters must be placeholders; {parameter!r} "
                                f"is not", self._location)
        if len(set(self.parameters)) != len(self.parameters):
            raise FeedError("a placeholder is listed twice among the computation's parameters",
                            self._location)
        # Like every op made now, the computation follows the main-stream assigns.
        self.control_deps = current_user_deps()
        self.ops: List[Op] = schedule(list(self.results) + list(self.control_deps))
        stored = [op for op in self.ops if isinstance(op, AssignableTensorOp)]
        #: Stored tensors the computation touches: kept across calls, or made per call.
        self.persistent_tensors = [t for t in stored if t.persistent]
        self.temporary_tensors = [t for t in stored if not t.persistent]
        #: What feed_dict may name: the parameters and every placeholder reached.
        self._feedable = frozenset(t for t in stored if t.input) | frozenset(self.parameters)
        #: (dtype, shape) of positional arrays that passed the checks as they are (exact
        #: type, C order), to the lengths they bound: a repeat call skips the checks.
        self._known_feeds: Dict[tuple, LengthBindings] = {}

    def __call__(self, *values, feed_dict: Optional[Dict[Op, Any]] = None, out=None):
        """Run once. `out` may give caller-owned arrays for the results (in result order;
        None for a result without value); they are filled and returned."""
        bindings = None
        if not feed_dict and len(values) == len(self.parameters):
            try:
                key = tuple((v.dtype, v.shape) for v in values
                            if type(v) is np.ndarray and v.flags.c_contiguous)
                bindings = self._known_feeds.get(key) if len(key) == len(values) else None
            except TypeError:  # an unhashable dtype: no shortcut
                bindings = None
        if bindings is not None:
            checked = dict(zip(self.parameters, values))
        else:
            feeds = self._collect_feeds(values, feed_dict or {})
            bindings = LengthBindings()
            checked = {placeholder: _checked_feed(placeholder, value, bindings)
                       for placeholder, value in feeds.items()}
            if not feed_dict and all(a is v for a, v in zip(checked.values(), values)):
                self._known_feeds[tuple((v.dtype, v.shape) for v in values)] = bindings
        if out is not None:
            out = self._checked_out(out, list(feeds.values()), bindings)
        outputs = self.transformer._run(self, checked, bindings, out=out)
        if out is not None:
            for target, value in zip(out, outputs):
                if target is not None:
                    _fill(target, value, self)
            outputs = [value if target is None or value is None else target
                       for target, value in zip(out, outputs)]
        return self._package(outputs)

    def _checked_out(self, out, arguments: List[Any],
                     bindings: "LengthBindings") -> List[Optional[np.ndarray]]:
        out = [out] if isinstance(out, np.ndarray) else list(out)
        if len(out) != len(self.results):
            raise FeedError(f"out= has {len(out)} entries for {len(self.results)} results",
                            user_location())
        for k, (target, result) in enumerate(zip(out, self.results)):
            if target is None:
                continue
            if not isinstance(target, np.ndarray) or not target.flags.writeable:
                raise FeedError(f"out[{k}] for {result.name} must be a writeable NumPy array",
                                user_location())
            expected = tuple(bindings.get(a) for a in result.axes)
            if not result.is_tensor_op or target.dtype != result.dtype or (
                    None not in expected and target.shape != expected):
                raise FeedError(f"out[{k}] is {target.dtype}{list(target.shape)} but result "
                                f"{result.name} is {result.dtype}{list(expected)} (axes "
                                f"{result.axes})", user_location())
            if any(isinstance(value, np.ndarray) and np.may_share_memory(target, value)
                   for value in arguments) or any(
                    other is not None and np.may_share_memory(target, other)
                    for other in out[:k]):
                raise FeedError(f"out[{k}] for {result.name} shares memory with an argument or "
                                f"another result array: each result needs its own array",
                                user_location())
        return out

    def _collect_feeds(self, values, feed_dict) -> Dict[Op, Any]:
        if len(values) > len(self.parameters):
            raise FeedError(f"computation takes {len(self.parameters)} placeholder values, got "
                            f"{len(values)}", user_location())
        feeds: Dict[Op, Any] = dict(zip(self.parameters, values))
        for placeholder, value in feed_dict.items():
            if placeholder in feeds:
                raise FeedError(f"{placeholder.name} is given both positionally and in feed_dict",
                                user_location())
            if placeholder not in self._feedable:
                raise FeedError(f"feed_dict names {getattr(placeholder, 'name', placeholder)}, "
                                f"which this computation does not use", user_location())
            feeds[placeholder] = value
        missing = [p for p in self.parameters if p not in feeds]
        if missing:
            raise FeedError("missing values for placeholders "
                            + ", ".join(f"{p.name} {p.axes}" for p in missing), user_location())
        return feeds

    def _package(self, outputs: List[Optional[np.ndarray]]):
        if self.result_kind == "single":
            return outputs[0]
        if self.result_kind == "dict":
            return dict(zip(self.results, outputs))
        return tuple(outputs)


def _fill(target: np.ndarray, value: Optional[np.ndarray], computation: "Computation") -> None:
    if value is None or value is target:  # the backend wrote it in place
        return
    if target.shape != value.shape or target.dtype != value.dtype:
        raise FeedError(f"an out= array is {target.dtype}{list(target.shape)} but its result is "
                        f"{value.dtype}{list(value.shape)}", computation._location)
    np.copyto(target, value)


def _normalize_results(results) -> Tuple[str, Tuple[Op, ...]]:
    if isinstance(results, Op):
        return "single", (results,)
    if isinstance(results, (set, frozenset)):
        return "dict", tuple(sorted(results, key=lambda op: op._serial))
    if isinstance(results, (list, tuple)):
        for result in results:
            if not isinstance(result, Op):
                raise TypeError(f"computation results must be ops, not {result!r}")
        return "sequence", tuple(results)
    raise TypeError(f"computation results must be an op or a list, tuple or set of ops, "
                    f"not {results!r}")


class _Described:
    """`placeholder X with axes (...)`, formatted only when an error message needs it."""

    def __init__(self, placeholder):
        self.placeholder = placeholder

    def __str__(self) -> str:
        return f"{self.placeholder.name} with axes {self.placeholder.axes}"

    __format__ = lambda self, spec: format(str(self), spec)


def _checked_feed(placeholder: AssignableTensorOp, value, bindings: LengthBindings) -> np.ndarray:
    array = np.asarray(value)
    expected = _Described(placeholder)
    if array.dtype.kind not in "biuf" or not can_feed(array.dtype, placeholder.dtype):
        raise FeedError(f"{expected} takes {placeholder.dtype} values; got {array.dtype}",
                        user_location())
    if array.ndim != len(placeholder.axes):
        raise FeedError(f"{expected} takes a {len(placeholder.axes)}-d array; got shape "
                        f"{array.shape}", user_location())
    for axis, length in zip(placeholder.axes, array.shape):
        known = bindings.get(axis)
        if known is None:
            bindings.bind(axis, length)
        elif known != length:
            raise FeedError(f"{expected} takes shape {tuple(bindings.get(a) for a in placeholder.axes)}"
                            f"; got {array.shape} (axis {axis.name} is {known})", user_location())
    # Used in place when already of the right type and layout (no copy per call):
    # no backend ever writes into a fed array.
    return cast(np.asarray(array, order="C"), placeholder.dtype, copy=False)


def no_value_error(tensor: AssignableTensorOp) -> FeedError:
    if tensor.input:
        hint = "pass its value to the computation (as a parameter or in feed_dict)"
    else:
        hint = "give it an initial_value or assign it before it is read"
    return tensor.error(FeedError, f"{tensor.axes} has no value: {hint}")


def check_readable(ops: List[Op], results, state: Dict[Op, np.ndarray]) -> None:
    """Fail before running anything if a stored tensor is read before it has a value."""
    written = set(state)
    for op in ops:
        for i, arg in enumerate(op.args):
            if i >= op.lvalue_args and arg.is_assignable and arg not in written:
                raise no_value_error(arg)
        if op.lvalue_args:
            written.add(op.args[0])
    for result in results:
        if result.is_assignable and result not in written:
            raise no_value_error(result)


class Transformer(abc.ABC):
    """Owns stored tensors and makes computations; use as a context manager."""

    #: The registry name (set by `register_transformer`).
    transformer_name = "abstract"

    def __init__(self):
        self.closed = False

    def computation(self, results, *parameters) -> Computation:
        """A callable computing `results`; `parameters` are fed positionally."""
        if self.closed:
            raise RuntimeError("this transformer is closed")
        return self._make_computation(results, parameters)

    def _make_computation(self, results, parameters) -> Computation:
        return Computation(self, results, parameters)

    @abc.abstractmethod
    def _run(self, computation: Computation, feeds: Dict[Op, np.ndarray],
             bindings: LengthBindings, out=None) -> List[Optional[np.ndarray]]:
        """Execute `computation` once; one output per result (None for no value).

        `out` (checked, one entry per result, None where not given) may be
        written directly; outputs that are not the given arrays are copied in.
        """

    def close(self) -> None:
        """Release stored tensors; the transformer cannot be used afterwards."""
        self.closed = True

    def __enter__(self) -> "Transformer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
