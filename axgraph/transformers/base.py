"""Transformer and Computation: what every backend shares.

A transformer owns the stored tensors (persistent values live as long as it
does); a computation is a callable made from result ops and the placeholders
passed positionally to it. This module does the argument handling and the
checks of fed values; backends supply `_execute`.
"""
from __future__ import annotations

import abc
import functools
import threading
import weakref
from typing import (Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple,
                    TypeGuard, cast)

import numpy as np

from .. import dims
from ..axes import Axis, FlattenedAxis
from ..axis_dims import AxisDims, length_symbols
from ..core.backend import CacheInfo, unspecialized_cache_info
from ..core.function import KNOWN_SHAPES
from ..debug_info import user_location
from ..core.backend import check_out_arrays
from ..dims import bind_shapes
from ..dtypes import can_feed, kind_of, unfit_values
from ..errors import (AxgraphTypeError, FeedError, GraphError, OutOfMemoryError, ShapeError,
                      TransformerClosedError)
from ..op_graph.op import Op
from ..ordered_set import OrderedSet
from ..op_graph.execution_order import schedule
from ..op_graph.tensors import AssignableTensorOp
from ..serialization import get_values, set_values


class LengthBindings:
    """Axis lengths for one call: lengths set on the axes, the values of the size
    variables that fed data bound (`dims.bind_shapes`, as every backend binds them), and
    the lengths the shape solver infers from those (`inferred`): an axis that no fed
    array has, cast from a fed one or joined from fed ones, is as long here as the
    lowering transformers make it."""

    def __init__(self, sizes: Optional[AxisDims] = None,
                 values: Optional[Mapping[str, int]] = None,
                 inferred: Optional[Callable[[Axis], Optional[int]]] = None) -> None:
        #: The dim of each axis (its length, or a size variable standing for it).
        self.sizes = sizes if sizes is not None else AxisDims()
        #: Size variable -> value.
        self.values: Dict[str, int] = dict(values or {})
        #: The length the solver infers for an axis from the fed sizes (None: not known).
        self._inferred = inferred
        self._found: Dict[Axis, int] = {}

    def get(self, axis: Axis) -> Optional[int]:
        """The length of `axis` if known, else None."""
        if isinstance(axis, FlattenedAxis):
            parts = [self.get(a) for a in axis.axes]
            return None if None in parts else int(
                np.prod(parts, dtype=np.int64))  # type: ignore[arg-type]  # no None is left
        base = axis.base
        if isinstance(base.length, int):
            return base.length
        found = self._found.get(base)
        if found is None:
            value = dims.subs(self.sizes.dim(base), self.values)
            if isinstance(value, int):
                found = value
            elif self._inferred is not None:
                found = self._inferred(base)
            if found is None:
                return None
            self._found[base] = found
        return found

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
        """Record the length of an axis seen in a value (unified with its dim: ShapeError
        if it cannot be that long)."""
        solved = dims.unify(self.sizes.dim(axis), int(length), self.values)
        if solved is not None:
            self.values = cast(Dict[str, int], solved)  # unified with an int: all ints


class Computation:
    """A callable computing `results` from values of `parameters`.

    Call with the parameters' values positionally (each in its placeholder's
    axis order) or as ``feed_dict={placeholder: value}``. A single result op
    gives one array, a list or tuple gives a tuple, a set gives a dict, and an
    op without a value (an assign) gives None.

    A call runs the results, the assigns recorded in their ``user_deps``, and
    what those reach through args and other_deps: nothing else. Fed values
    live for that one call. Calls are safe from several threads: the
    transformer runs one call at a time (see `Transformer`).
    """

    #: Array types other than NumPy's that `_feed_value` takes as they are when of the
    #: placeholder's exact type (a device transformer's own arrays).
    _direct_feeds: Tuple[Any, ...] = ()

    def __init__(self, transformer: "Transformer", results,
                 parameters: Sequence[AssignableTensorOp]):
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
        #: The pending assigns of the results (as in Nervana Graph: `computation(w)` runs w's update).
        self.user_deps: Tuple[Op, ...] = tuple(
            dep for result in self.results for dep in result.user_deps)
        self.ops: List[Op] = schedule(list(self.results) + list(self.user_deps))
        stored = [op for op in self.ops if isinstance(op, AssignableTensorOp)]
        #: Stored tensors the computation touches: kept across calls (placeholders only
        #: for their initial values), or made per call.
        self.persistent_tensors = [t for t in stored if t.persistent and not _needs_feed(t)]
        self.temporary_tensors = [t for t in stored if not t.persistent]
        #: What feed_dict may name: the parameters and every placeholder reached.
        self._feedable = frozenset(t for t in stored if t.input) | frozenset(self.parameters)
        #: Placeholders read without an initial value, to the first op reading each:
        #: every call must feed them.
        self._needed_feeds = _needed_feeds(self.ops, self.results)
        #: Stored tensors whose axes take lengths from fed data: a call must feed the
        #: lengths their values were made with.
        self._sized_by_feeds = [t for t in self.persistent_tensors
                                if any(axis.length is None for axis in t.axes)]
        #: The dim of each axis: what fed shapes are unified with.
        self._sizes = AxisDims(length_symbols(
            a for op in self.ops + list(self.parameters) for a in op.axes))
        #: What fed sizes must satisfy beyond binding (lengths the graph infers or pins,
        #: residual checks), or None when every length is fixed; refuted lengths raise here.
        from ..shapes.inference import feed_checks  # shape inference loads on first use

        self._feed_checks = feed_checks(self.ops + list(self.parameters))
        #: (dtype, shape) of positional arrays that passed the checks as they are (exact
        #: type, C order), to the lengths they bound: a repeat call skips the checks.
        self._known_feeds: Dict[tuple, LengthBindings] = {}
        #: Calls whose feeds passed the checks (what a backend that never specialises
        #: reports as cache hits).
        self._calls = 0

    def __call__(self, *values, feed_dict: Optional[Dict[Op, Any]] = None, out=None):
        """Run once. `out` may give caller-owned arrays for the results (in result order;
        None for a result without value); they are filled and returned."""
        with self.transformer._lock:
            if self.transformer.closed:
                raise TransformerClosedError(
                    f"this computation's {self.transformer.transformer_name} transformer is "
                    f"closed; make a new transformer and computation", user_location())
            checked, bindings = self._checked_feeds(values, feed_dict)
            if self._sized_by_feeds:
                self._check_stored_lengths(checked, bindings)
            if out is not None:
                out = self._checked_out(out, list(checked.values()), bindings)
            self._calls += 1
            try:
                outputs = self.transformer._run(self, checked, bindings, out=out)
            except OutOfMemoryError:
                raise
            except MemoryError as error:
                raise self.out_of_memory(error) from error
        if out is not None:
            for target, value in zip(out, outputs):
                if target is not None:
                    _fill(target, value, self)
            outputs = [value if target is None or value is None else target
                       for target, value in zip(out, outputs)]
        return self._package(outputs)

    def out_of_memory(self, error: MemoryError) -> OutOfMemoryError:
        """`error` (NumPy's MemoryError, or a backend's) as an `OutOfMemoryError` naming this
        computation and the user's line that called it."""
        file, line = self._location
        return OutOfMemoryError(
            f"a call of the computation made at {file}:{line} ran out of memory on the "
            f"{self.transformer.transformer_name} transformer: {error}; give it smaller "
            f"inputs (a smaller batch) or split the computation", user_location())

    @property
    def executor(self) -> "Computation":
        """The callable that runs this computation: itself (Nervana Graph's name)."""
        return self

    @property
    def returns(self):
        """What the computation returns, as it was given (Nervana Graph v0.4).

        Returns
        -------
        Op, tuple of Op or set of Op
            The single result op; the results in order (a list or tuple was given); or
            the set of them (a set was given: a call returns a dict).
        """
        if self.result_kind == "single":
            return self.results[0]
        if self.result_kind == "dict":
            return set(self.results)
        return self.results

    def transform(self) -> None:
        """Prepare this computation to run now rather than at its first call (v0.4).

        The compiling transformers lower, optimize and compile it here, so an op
        that a backend cannot run is reported before any data is fed. It does not
        initialize stored tensors (`transformer.initialize()` does). Calling it
        again does nothing.

        Raises
        ------
        TransformerClosedError
            The transformer is closed.
        GraphError, ExecutionError
            An op of the computation cannot be lowered or has no kernel.
        """
        with self.transformer._lock:
            if self.transformer.closed:
                raise TransformerClosedError(
                    f"this computation's {self.transformer.transformer_name} transformer is "
                    f"closed; make a new transformer and computation", user_location())
            self.transformer._prepare(self)

    def cache_info(self) -> CacheInfo:
        """The programs this computation's backend built per binding of the sizes fed.

        A computation over axes without a length runs with whatever lengths the
        fed data gives them. The "cpu" transformer builds (compiles) a program
        per binding of those size variables and keeps the most recently used
        ones (`cache_size=`, 8 by default); "numpy" and "interpreter" evaluate
        the lengths per call and never build another. The lowering transformer
        of any core backend asks its executable (`core.Executable.cache_info`);
        it lowers and compiles the computation first if no call has.

        Returns
        -------
        core.CacheInfo
            `hits` (calls that ran a program already built), `misses` (calls
            that built one), `maxsize` (None: no limit; 0: the backend never
            specialises, one program serves every binding and each call is a
            hit), `currsize`, and `keys`: the binding of each program kept, by
            size variable (named after the axis), least recently used first.

        Raises
        ------
        TransformerClosedError
            The transformer is closed.
        AxgraphTypeError
            The backend's executable does not report its cache.

        Examples
        --------
        >>> import numpy as np
        >>> import axgraph as ng
        >>> N = ng.make_axis(name="N")  # no length: the fed data decides it
        >>> x = ng.placeholder([N])
        >>> with ng.make_transformer("cpu") as t:
        ...     double = t.computation(x * 2, x)
        ...     for n in (32, 64, 32):
        ...         _ = double(np.ones(n, np.float32))
        ...     print(double.cache_info())
        CacheInfo(hits=1, misses=2, maxsize=8, currsize=2, keys=({'N': 64}, {'N': 32}))
        """
        with self.transformer._lock:
            if self.transformer.closed:
                raise TransformerClosedError(
                    f"this computation's {self.transformer.transformer_name} transformer is "
                    f"closed, and its compiled programs with it", user_location())
            return self.transformer._cache_info(self)

    def _checked_feeds(self, values, feed_dict
                       ) -> Tuple[Dict[AssignableTensorOp, np.ndarray], LengthBindings]:
        """The fed arrays by placeholder, converted and checked, and the lengths they bind."""
        if not feed_dict and len(values) == len(self.parameters):
            try:
                direct = self._direct_feeds
                key = tuple((v.dtype, v.shape) for v in values
                            if (type(v) is np.ndarray and v.flags.c_contiguous)
                            or isinstance(v, direct))
                bindings = self._known_feeds.get(key) if len(key) == len(values) else None
            except TypeError:  # an unhashable dtype: no shortcut
                bindings = None
            if bindings is not None:
                return dict(zip(self.parameters, values)), bindings
        feeds = self._collect_feeds(values, feed_dict or {})
        checked = {placeholder: self._feed_value(placeholder, value)
                   for placeholder, value in feeds.items()}
        bindings = self._bind(checked)
        missing = [p for p in self._needed_feeds if p not in checked]
        if missing:
            raise _missing_feed_error(missing[0], self._needed_feeds[missing[0]])
        if not feed_dict and all(a is v for a, v in zip(checked.values(), values)):
            if len(self._known_feeds) >= KNOWN_SHAPES:  # a stream of new lengths
                self._known_feeds.clear()
            self._known_feeds[tuple((v.dtype, v.shape) for v in values)] = bindings
        return checked, bindings

    def _feed_value(self, placeholder: AssignableTensorOp, value) -> Any:
        """The value fed to `placeholder`, converted and checked (a transformer keeping
        values on a device takes its own arrays as they are)."""
        return _checked_feed(placeholder, value)

    def _bind(self, feeds: Dict[AssignableTensorOp, np.ndarray]) -> LengthBindings:
        """The lengths the fed arrays give the axes (FeedError where they conflict)."""
        placeholders = list(feeds)
        expected = [self._sizes.dims(p.axes) for p in placeholders]

        def describe(i: int) -> str:
            shown = ", ".join(str(d) for d in expected[i])
            return (f"{_Described(placeholders[i])} takes shape ({shown}); got "
                    f"{feeds[placeholders[i]].shape}")

        try:
            values = bind_shapes(expected, [a.shape for a in feeds.values()], describe)
        except ShapeError as error:
            raise FeedError(error.message, user_location()) from None
        if self._feed_checks is None:
            return LengthBindings(self._sizes, values)
        solution = self._feed_checks.check(feeds)
        return LengthBindings(self._sizes, values,
                              functools.partial(self._feed_checks.length, solution))

    def _check_stored_lengths(self, feeds: Dict[AssignableTensorOp, np.ndarray],
                              bindings: LengthBindings) -> None:
        """A stored value made with one batch length cannot be used with another."""
        state = self.transformer.state
        for tensor in self._sized_by_feeds:
            value = state.get(tensor)
            if value is None:
                continue
            for axis, length in zip(tensor.axes, value.shape):
                fed = bindings.get(axis)
                if fed is not None and fed != length:
                    source = next((p.name for p, array in feeds.items()
                                   if axis in p.axes
                                   and array.shape[p.axes.index(axis)] == fed), "the fed data")
                    raise FeedError(
                        f"{tensor._name_prefix()} {tensor.name} {tensor.axes} holds axis "
                        f"{axis.name} = {length} (its value was made with that length, at "
                        f"{tensor.location[0]}:{tensor.location[1]}), but this call feeds "
                        f"{axis.name} = {fed} through {source}; feed the same length, or give "
                        f"the axis a fixed length", user_location())

    def _checked_out(self, out, arguments: List[Any],
                     bindings: "LengthBindings") -> List[Optional[np.ndarray]]:
        """`out=` checked as every backend checks it (`core.backend.check_out_arrays`), each
        result's shape its axes' lengths where known."""
        results = [(f"{r.name} over {r.axes}", r.dtype if r.is_tensor_op else None,
                    tuple(bindings.get(a) for a in r.axes)) for r in self.results]
        return list(check_out_arrays(out, results, arguments, "fed value {}".format))

    def _collect_feeds(self, values, feed_dict) -> Dict[AssignableTensorOp, Any]:
        if len(values) > len(self.parameters):
            raise FeedError(f"computation takes {len(self.parameters)} placeholder values, got "
                            f"{len(values)}", user_location())
        feeds: Dict[AssignableTensorOp, Any] = dict(zip(self.parameters, values))
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

    def _package(self, outputs: Sequence[Any]):
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
    if isinstance(results, (set, frozenset, list, tuple)):
        for result in results:
            if not isinstance(result, Op):
                raise AxgraphTypeError(f"computation results must be ops, not {result!r}",
                                       user_location())
        if isinstance(results, (set, frozenset)):
            return "dict", tuple(sorted(results, key=lambda op: op._serial))
        return "sequence", tuple(results)
    raise AxgraphTypeError(f"computation results must be an op or a list, tuple or set of ops, "
                           f"not {type(results).__name__} {results!r}", user_location())


class _Described:
    """`placeholder X with axes (...)`, formatted only when an error message needs it."""

    def __init__(self, placeholder):
        self.placeholder = placeholder

    def __str__(self) -> str:
        return f"{self.placeholder.name} with axes {self.placeholder.axes}"

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


def _checked_feed(placeholder: AssignableTensorOp, value) -> np.ndarray:
    """The fed value as the placeholder's array, after `feeding_rule`'s checks (its shape
    is checked with the others', in `Computation._bind`)."""
    array = np.asarray(value)
    expected = _Described(placeholder)
    if kind_of(array.dtype) not in "biuf" or not can_feed(array.dtype, placeholder.dtype):
        raise FeedError(f"{expected} takes {placeholder.dtype} values; got {array.dtype} "
                        f"({FEEDING_RULE})", user_location())
    # Used in place when already of the right type and layout (no copy per call):
    # no backend ever writes into a fed array.
    if array.dtype == placeholder.dtype:
        return np.asarray(array, order="C")
    with np.errstate(all="ignore"):
        converted = np.asarray(array, dtype=placeholder.dtype, order="C")
    problem = unfit_values(array, converted)
    if problem is not None:
        raise FeedError(f"{expected} takes {placeholder.dtype} values; the fed {array.dtype} "
                        f"data holds {problem}, which does not fit", user_location())
    return converted


#: How fed data is converted, as the error messages and docs state it.
FEEDING_RULE = ("fed data is converted with NumPy's same_kind casting: bools and ints into "
                "float placeholders, wider into narrower of the same kind; floats into int "
                "placeholders are refused, and so are values the placeholder's type cannot hold")


def _needed_feeds(ops: List[Op], results: Sequence[Op]) -> Dict[AssignableTensorOp, Op]:
    """Placeholders that `ops` read and that have no initial value, each to its first reader."""
    needed: Dict[AssignableTensorOp, Op] = {}
    for op in ops:
        for i, arg in enumerate(op.args):
            if i >= op.lvalue_args and _needs_feed(arg) and arg not in needed:
                needed[arg] = op
    for result in results:
        if _needs_feed(result) and result not in needed:
            needed[result] = result
    return needed


def _needs_feed(op: Op) -> TypeGuard[AssignableTensorOp]:
    return isinstance(op, AssignableTensorOp) and op.input and op.initial_value is None


def _missing_feed_error(placeholder: AssignableTensorOp, reader: Op) -> FeedError:
    """Name the placeholder, what reads it and where, and how to feed it."""
    if reader is placeholder:
        return FeedError(f"placeholder {placeholder.name} {placeholder.axes} is a result of this "
                         f"computation but no value was fed for it: pass it as a parameter or in "
                         f"feed_dict", user_location())
    return FeedError(f"placeholder {placeholder.name} {placeholder.axes} has no value in this "
                     f"call, but {reader.name} reads it (at {reader.location[0]}:"
                     f"{reader.location[1]}; an update this computation runs, or an op of its "
                     f"results): pass it as a parameter or in feed_dict", reader.location)


def no_value_error(tensor: AssignableTensorOp) -> FeedError:
    if tensor.input:
        hint = "pass its value to the computation (as a parameter or in feed_dict)"
    else:
        hint = "give it an initial_value or assign it before it is read"
    return tensor.error(FeedError, f"{tensor.axes} has no value: {hint}")


def check_readable(ops: List[Op], results,
                   state: Dict[AssignableTensorOp, np.ndarray]) -> None:
    """Fail before running anything if a stored tensor is read before it has a value.

    Placeholders are checked per call by the computation (their values live
    for one call only); this covers the other stored tensors, whose values
    only accumulate, so one successful check holds for later calls.
    """
    written: set[Op] = set(state)
    for op in ops:
        for i, arg in enumerate(op.args):
            if i >= op.lvalue_args and isinstance(arg, AssignableTensorOp) and not arg.input \
                    and arg not in written:
                raise no_value_error(arg)
        if op.lvalue_args:
            written.add(op.args[0])
    for result in results:
        if isinstance(result, AssignableTensorOp) and not result.input \
                and result not in written:
            raise no_value_error(result)


class Transformer(abc.ABC):
    """Owns stored tensors and makes computations; use as a context manager.

    The values of variables, persistent tensors and constants live here, shared
    by all of this transformer's computations. Calls run one at a time (a lock
    per transformer): any thread may call any computation, and each call sees
    the state the previous one left. For calls in parallel, give each thread
    its own transformer.
    """

    #: The registry name (set by `register_transformer`).
    transformer_name = "abstract"

    def __init__(self) -> None:
        self.closed = False
        #: Stored values by tensor (placeholders' fed values are not kept here).
        self.state: Dict[AssignableTensorOp, np.ndarray] = {}
        #: Persistent tensors whose initializers have run.
        self.initialized: set = set()
        #: The computations made by this transformer, in order.
        self.computations: List[Computation] = []
        self._lock = threading.RLock()
        _open_transformers.add(self)

    @property
    def all_results(self) -> OrderedSet[Op]:
        """The ops this transformer's computations compute (Nervana Graph v0.4's root set):
        each computation's results, the assigns it runs and the placeholders it takes, in
        the order the computations were made.

        Returns
        -------
        OrderedSet of Op
            A new set; changing it changes nothing.
        """
        found: OrderedSet[Op] = OrderedSet()
        for computation in self.computations:
            found.update(computation.results)
            found.update(computation.user_deps)
            found.update(computation.parameters)
        return found

    @abc.abstractmethod
    def _prepare(self, computation: Computation) -> None:
        """Make `computation` ready to run (`Computation.transform`): compile it, or check
        that every op can run, so that an error comes before any data is fed."""

    def computation(self, results, *parameters) -> Computation:
        """A callable computing `results`; `parameters` are fed positionally."""
        with self._lock:
            if self.closed:
                raise TransformerClosedError(
                    f"this {self.transformer_name} transformer is closed; make a new one to "
                    f"build computations", user_location())
            computation = self._make_computation(results, parameters)
            self.computations.append(computation)
            return computation

    def _make_computation(self, results, parameters) -> Computation:
        return Computation(self, results, parameters)

    def _cache_info(self, computation: Computation) -> CacheInfo:
        """`computation.cache_info()`: by default, a transformer that evaluates lengths per
        call, so one program serves every binding and every call is a hit."""
        return unspecialized_cache_info(computation._calls)

    def initialize(self) -> None:
        """Give every stored tensor of this transformer's computations its initial value now.

        Nervana Graph v0.4 ran all initializers before the first computation;
        here each call initializes what it uses on first use, and `initialize()`
        does it ahead of time, for the computations made so far: each variable,
        persistent tensor, constant and placeholder default they use that has
        not been initialized yet (with the stored tensors its initial-value op
        reads, first). Tensors already initialized, or written by
        `serialization.set_values`, keep their values: it never resets. Tensors
        with an axis whose length comes from fed data wait for the first call
        that binds it; temporaries are made per call. With nothing left to do
        it does nothing.
        """
        with self._lock:
            if self.closed:
                raise TransformerClosedError(
                    f"this {self.transformer_name} transformer is closed; make a new one",
                    user_location())
            bindings = LengthBindings()
            pending = {tensor for computation in self.computations
                       for tensor in computation.persistent_tensors
                       if tensor not in self.initialized
                       and None not in (bindings.get(axis) for axis in tensor.axes)}
            if pending:
                self._initialize_tensors(sorted(pending, key=lambda t: t._serial), bindings)

    @abc.abstractmethod
    def _initialize_tensors(self, tensors: List[AssignableTensorOp],
                            bindings: LengthBindings) -> None:
        """Run the initializers of `tensors` (and of the stored tensors their initial
        values read, first) and mark the persistent ones initialized."""

    @abc.abstractmethod
    def _run(self, computation: Computation, feeds: Dict[AssignableTensorOp, np.ndarray],
             bindings: LengthBindings, out=None) -> List[Optional[np.ndarray]]:
        """Execute `computation` once; one output per result (None for no value).

        `feeds` holds this call's placeholder values (never stored). `out`
        (checked, one entry per result, None where not given) may be written
        directly; outputs that are not the given arrays are copied in.
        """

    def close(self) -> None:
        """Release stored tensors; the transformer cannot be used afterwards."""
        with self._lock:
            self.closed = True
            self.state.clear()
            self.initialized.clear()
            self.computations.clear()
            _open_transformers.discard(self)

    def __enter__(self) -> "Transformer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


#: Transformers not closed yet, for `Op.value` (weak: a dropped transformer leaves).
_open_transformers: "weakref.WeakSet[Transformer]" = weakref.WeakSet()


def _holds(transformer: Transformer, tensor: AssignableTensorOp) -> bool:
    return tensor in transformer.state or any(
        tensor in computation.persistent_tensors for computation in transformer.computations)


def stored_value(op: Op) -> "StoredValue":
    """The handle `op.value` gives: op's value in the one open transformer holding it.

    Parameters
    ----------
    op : Op
        A stored tensor (variable, persistent tensor, constant, or a placeholder's
        initial value).

    Returns
    -------
    StoredValue
        The handle.

    Raises
    ------
    GraphError
        `op` is not a stored tensor, or no open transformer (or more than one) holds it.
    """
    if not (isinstance(op, AssignableTensorOp) and op.persistent) or _needs_feed(op):
        raise op.error(GraphError, "only a stored tensor (a variable, persistent tensor or "
                                   "constant) keeps a value between calls; the storage of other "
                                   "values is reused within a call, so compute this one as a "
                                   "result of a computation instead")
    holders = [t for t in list(_open_transformers) if not t.closed and _holds(t, op)]
    if not holders:
        raise op.error(GraphError, "no open transformer holds this tensor: make a computation "
                                   "that uses it (transformer.computation(...)) first")
    if len(holders) > 1:
        raise op.error(GraphError, f"{len(holders)} open transformers hold this tensor, so "
                                   f"its value is ambiguous; read the one you mean with "
                                   f"axgraph.serialization.get_values(transformer, [tensor])")
    return StoredValue(holders[0], op)


class StoredValue:
    """A stored tensor's value in one transformer: Nervana Graph v0.4's device tensor.

    Reads give copies; writes are checked as `serialization.set_values` checks them
    and mark the tensor initialized. The tensor is initialized on first use.

    Parameters
    ----------
    transformer : Transformer
        The transformer holding the value.
    tensor : AssignableTensorOp
        The stored tensor.
    """

    def __init__(self, transformer: Transformer, tensor: AssignableTensorOp):
        self.transformer = transformer
        self.tensor = tensor

    @property
    def dtype(self) -> np.dtype:
        """The tensor's element type."""
        return self.tensor.dtype

    @property
    def axes(self):
        """The tensor's axes, in the order of the array's dimensions."""
        return self.tensor.axes

    def get(self, tensor: Optional[np.ndarray] = None) -> np.ndarray:
        """The current value (v0.4's `get`).

        Parameters
        ----------
        tensor : numpy.ndarray, optional
            An array of the value's shape and dtype to copy it into.

        Returns
        -------
        numpy.ndarray
            A copy of the value, or `tensor` holding it.

        Raises
        ------
        FeedError
            `tensor` has another shape or dtype.
        """
        with self.transformer._lock:
            value = get_values(self.transformer, [self.tensor])[self.tensor]
        if tensor is None:
            return value
        if not isinstance(tensor, np.ndarray) or tensor.shape != value.shape \
                or tensor.dtype != value.dtype:
            raise FeedError(f"get: {self.tensor.name} is {value.dtype}{list(value.shape)}; "
                            f"{_described(tensor)} cannot hold it", user_location())
        np.copyto(tensor, value)
        return tensor

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        value = self.get()
        return value if dtype is None else value.astype(dtype)

    def __getitem__(self, key):
        return self.get()[key]

    def __setitem__(self, key, value) -> None:
        name = self.tensor.name
        array = np.asarray(value)
        if kind_of(array.dtype) not in "biuf" or not can_feed(array.dtype, self.dtype):
            raise FeedError(f"{name} holds {self.dtype}; {array.dtype} values do not fit it "
                            f"({FEEDING_RULE})", user_location())
        with self.transformer._lock:
            current = self.get()
            with np.errstate(all="ignore"):
                converted = array.astype(self.dtype)
            problem = unfit_values(array, converted)
            if problem is not None:
                raise FeedError(f"{name} holds {self.dtype}; the value holds {problem}, which "
                                f"does not fit", user_location())
            try:
                current[key] = converted
            except (IndexError, ValueError, TypeError) as error:
                raise FeedError(f"{name}[{key!r}] = a value of shape {array.shape}: {error} "
                                f"({name} has axes {self.tensor.axes})",
                                user_location()) from None
            set_values(self.transformer, {self.tensor: current})

    def __repr__(self) -> str:
        return f"<value of {self.tensor.name} {self.tensor.axes} in a " \
               f"{self.transformer.transformer_name} transformer>"


def _described(array) -> str:
    if isinstance(array, np.ndarray):
        return f"an array {array.dtype}{list(array.shape)}"
    return f"{type(array).__name__} {array!r:.40}"
