"""The reference transformer: interprets the axes graph op by op in NumPy.

Obviously correct rather than fast; every other backend is tested against
it. Ops run in the schedule order (creation order where free); stored
tensors are read when the op reading them runs, so assigns take effect in
program order, and results that are stored tensors are read at the end.
"""
from __future__ import annotations

from typing import Dict, List, Optional, cast

import numpy as np

from ..errors import AxgraphError, AxisLengthError, ExecutionError, OutOfMemoryError, ShapeError
from ..op_graph.op import Op
from ..op_graph.random import RandomOp
from ..op_graph.execution_order import schedule
from ..op_graph.tensors import AssignableTensorOp, initialization_order
from .base import Computation, LengthBindings, Transformer, check_readable, no_value_error
from . import reference_nn_kernels  # noqa: F401  (registers the nn kernels)
from .reference_kernels import find_kernel, run_kernel


class RunContext:
    """What kernels may ask during one call: lengths, stored values, RNGs."""

    def __init__(self, transformer: "NumPyTransformer", bindings: LengthBindings,
                 feeds: Dict[AssignableTensorOp, np.ndarray]):
        self.transformer = transformer
        self.bindings = bindings
        #: This call's placeholder values (and what assigns write into placeholders).
        self.feeds = feeds

    def length(self, axis, op: Optional[Op] = None) -> int:
        return self.bindings.length(axis, op)

    def lengths(self, axes, op: Optional[Op] = None):
        return self.bindings.lengths(axes, op)

    def read(self, tensor: AssignableTensorOp) -> np.ndarray:
        found = self.feeds.get(tensor)
        if found is not None:
            return found
        try:
            return self.transformer.state[tensor]
        except KeyError:
            raise no_value_error(tensor) from None

    def write(self, tensor: AssignableTensorOp, value: np.ndarray) -> None:
        check_shape(tensor, value, self.bindings)
        if tensor in self.feeds:  # a fed placeholder: the write lasts for this call
            self.feeds[tensor] = value
        else:
            self.transformer.state[tensor] = value

    def rng(self, op: RandomOp) -> np.random.Generator:
        rngs = self.transformer.rngs
        if op not in rngs:
            rngs[op] = np.random.default_rng(op.seed)
        return rngs[op]


def check_shape(op: Op, value: np.ndarray, bindings: LengthBindings) -> None:
    """Check a computed value against op's axes, binding lengths not yet known."""
    if value.ndim != len(op.axes):
        raise op.error(ExecutionError, f"computed a {value.ndim}-d value for axes {op.axes}")
    for axis, length in zip(op.axes, value.shape):
        known = bindings.get(axis)
        if known is None:
            try:
                bindings.bind(axis, length)
            except ShapeError as error:
                raise op.error(AxisLengthError, f"computed shape {value.shape} for axes "
                                                f"{op.axes}: {error.message}") from None
        elif known != length:
            raise op.error(AxisLengthError,
                           f"computed shape {value.shape} for axes {op.axes}: axis {axis.name} "
                           f"has length {known} (was a length changed after the op was built?)")


class NumPyTransformer(Transformer):
    """The reference transformer: runs axes graphs op by op with NumPy.

    Obviously correct rather than fast, one fresh array per op; every other
    backend is tested against it. Ops run in the schedule order, stored
    tensors are read when the op reading them runs (so assigns take effect
    in program order), and random ops draw from a stream per op seeded by
    the op's seed. Make it with ``ng.make_transformer("numpy")``; it takes
    no options.

    Examples
    --------
    >>> import numpy as np
    >>> import axgraph as ng
    >>> N = ng.make_axis(length=3, name="N")
    >>> x = ng.placeholder([N])
    >>> with ng.NumPyTransformer() as t:
    ...     print(t.computation(ng.exp(x * 0), x)(np.array([1.0, 2.0, 3.0])))
    [1. 1. 1.]
    """

    transformer_name = "numpy"

    def __init__(self) -> None:
        super().__init__()
        self.rngs: Dict[Op, np.random.Generator] = {}

    def _run(self, computation: Computation, feeds: Dict[AssignableTensorOp, np.ndarray],
             bindings: LengthBindings, out=None) -> List[Optional[np.ndarray]]:
        ctx = RunContext(self, bindings, dict(feeds))
        temporaries = computation.temporary_tensors
        try:
            with np.errstate(all="ignore"):
                self._initialize([t for t in computation.persistent_tensors
                                  if t not in self.initialized], ctx)
                self._initialize(temporaries, ctx)
                check_readable(computation.ops, computation.results, self.state)
                values = self._execute(computation.ops, ctx)
                return [self._output(result, values, ctx) for result in computation.results]
        finally:
            for tensor in temporaries:
                self.state.pop(tensor, None)

    def _prepare(self, computation: Computation) -> None:
        """Check that every op of `computation` has a kernel (each op runs directly)."""
        for op in computation.ops:
            if not op.is_assignable:
                find_kernel(op)

    def _initialize(self, tensors: List[AssignableTensorOp], ctx: RunContext) -> None:
        # An initial-value op reads stored tensors when it runs: those not initialized
        # yet come first in the order, and their initializers (made with them, so
        # earlier) run before it in the schedule.
        order = initialization_order(tensors, self.initialized)
        init_ops = [init for tensor in order for init in tensor.initializers]
        if init_ops:
            self._execute(schedule(init_ops), ctx)
        self.initialized.update(t for t in order if t.persistent)

    def _initialize_tensors(self, tensors: List[AssignableTensorOp],
                            bindings: LengthBindings) -> None:
        with np.errstate(all="ignore"):
            self._initialize(tensors, RunContext(self, bindings, {}))

    def _execute(self, ops: List[Op], ctx: RunContext) -> Dict[Op, np.ndarray]:
        values: Dict[Op, np.ndarray] = {}
        for op in ops:
            if op.is_assignable:
                continue  # read when a consumer runs
            args = [None if i < op.lvalue_args or not arg.is_tensor_op else
                    (ctx.read(cast(AssignableTensorOp, arg)) if arg.is_assignable else values[arg])
                    for i, arg in enumerate(op.args)]
            try:
                value = run_kernel(op, ctx, args)
            except AxgraphError:
                raise
            except MemoryError as error:
                raise op.error(OutOfMemoryError, f"{type(op).__name__} ran out of memory: "
                               f"{error}") from error
            except Exception as error:  # a NumPy failure: name the op and the user's line
                raise op.error(ExecutionError, f"{type(op).__name__} failed: {error}") from error
            if op.is_tensor_op:
                value = np.asarray(value).astype(op.dtype, copy=False)
                check_shape(op, value, ctx.bindings)
                values[op] = value
        return values

    def _output(self, result: Op, values: Dict[Op, np.ndarray],
                ctx: RunContext) -> Optional[np.ndarray]:
        if not result.is_tensor_op:
            return None
        if result.is_assignable:
            assert isinstance(result, AssignableTensorOp)
            return np.array(ctx.read(result), copy=True)
        value = values[result]
        if not (value.flags.owndata and value.flags.writeable):
            value = np.array(value, copy=True)
        return value

    def close(self) -> None:
        with self._lock:
            self.rngs.clear()
            super().close()
