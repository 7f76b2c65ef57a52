"""The lowering transformer: lower to the core IR, optimize, run on a core backend.

The one way every optimizing backend runs an axes graph: each computation
becomes one core Function (axes become positions, assigns become data flow),
the pass pipeline (the default passes, then those the backend asks for)
rewrites it, and the backend compiles it. `ng.make_transformer(name)` makes
one for any backend registered in `core.backends()` ("interpreter": the core
interpreter, op by op, whose agreement with the NumPy reference on every test
graph checks the lowering; "cpu" has a subclass adding inspection).
"""
from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np

from .. import core
from ..core.backend import check_options
from ..debug_info import user_location
from ..errors import AxgraphTypeError
from ..lowering import LoweredComputation, lower
from ..passes import PassManager, default_passes
from ..op_graph.execution_order import schedule
from ..op_graph.tensors import AssignableTensorOp, initialization_order
from .base import Computation, LengthBindings, Transformer, check_readable


class LoweringTransformer(Transformer):
    """Runs computations as optimized core Functions on the core backend `backend`.

    `optimize=False` skips the passes; any other keyword is an option of the
    backend's `compile` (checked here, against its signature).
    """

    def __init__(self, backend: str = "interpreter", optimize: bool = True, **backend_options):
        super().__init__()
        self.backend = core.get_backend(backend)
        check_options(self.backend, backend_options,
                      f"make_transformer({backend!r}) (optimize= or the backend's options)")
        self.transformer_name = backend
        self.optimize = optimize
        #: Keyword arguments of every `backend.compile` call.
        self.backend_options: Dict = dict(backend_options)
        #: Per computation, the PassManager's records (node counts per pass).
        self.pass_reports: Dict[Computation, list] = {}
        self._compiled: Dict[Computation, tuple] = {}
        self._readable: set = set()
        #: (computation, fed placeholders...) -> the results written over stored tensors'
        #: arrays ({result: argument position}; None: none), as `_run` works it out.
        self._donations: Dict[tuple, Optional[Dict[int, int]]] = {}

    def lowered(self, computation: Computation) -> LoweredComputation:
        """The core Function of `computation` (lowered on first use)."""
        return self._compile(computation)[0]

    def _compile(self, computation: Computation):
        found = self._compiled.get(computation)
        if found is None:
            lowered = lower(computation.ops, computation.results, computation.parameters)
            if self.optimize:
                manager = PassManager(self.passes(), max_rounds=4)
                lowered.function = manager.run(lowered.function)
                self.pass_reports[computation] = manager.report
            executable = self.backend.compile(lowered.function, **self.backend_options)
            found = self._compiled[computation] = (lowered, executable)
        return found

    def _prepare(self, computation: Computation) -> None:
        self._compile(computation)

    def _cache_info(self, computation: Computation) -> core.CacheInfo:
        """The executable's own report: the backend knows what it built per binding."""
        executable = self._compile(computation)[1]
        try:
            report = executable.cache_info
        except AttributeError:
            raise AxgraphTypeError(
                f"the {self.transformer_name!r} backend's executables do not report their "
                f"programs per binding: give them a cache_info() method returning a "
                f"core.CacheInfo (see core.Executable)", user_location()) from None
        return report()

    def passes(self) -> list:
        """The pipeline run on every lowered computation (a fresh list per call): the
        default passes, then the backend's own."""
        return default_passes() + list(self.backend.passes())

    def _run(self, computation: Computation, feeds: Dict[AssignableTensorOp, np.ndarray],
             bindings: LengthBindings, out=None) -> List[Optional[np.ndarray]]:
        lowered, run = self._compile(computation)
        persistent, temporaries = computation.persistent_tensors, computation.temporary_tensors
        try:
            pending = [t for t in persistent if t not in self.initialized]
            if pending:
                self._initialize_tensors(pending, bindings)
            if temporaries:
                self._initialize_tensors(temporaries, bindings)
            if computation not in self._readable:
                # Stored values only accumulate, so one successful check holds for later calls.
                check_readable(computation.ops, computation.results, self.state)
                self._readable.add(computation)
            state = self.state
            arguments = [feeds[t] if t in feeds else state[t] for t in lowered.state_inputs]
            capabilities = self.backend.capabilities
            # Without caller_outputs the computation copies results into `out` itself.
            targets = _function_outs(lowered, out) if capabilities.caller_outputs else None
            donate = None
            if capabilities.donation:  # a fed array is the caller's: never written over
                fed = (computation, *feeds)  # the same placeholders call after call
                try:
                    donate = self._donations[fed]
                except KeyError:
                    donate = self._donations[fed] = {
                        k: j for k, j in lowered.replaced_state.items()
                        if lowered.state_inputs[j] not in feeds} or None
            outputs = self._execute(run, arguments, targets, donate)
            count = len(outputs) - len(lowered.state_outputs)
            for tensor, value in zip(lowered.state_outputs, outputs[count:]):
                if tensor not in feeds:  # a fed placeholder's value lasts for this call
                    state[tensor] = value
            return [None if position is None else self._returned(outputs[position])
                    for position in lowered.result_positions]
        finally:
            for tensor in temporaries:
                self.state.pop(tensor, None)

    def _execute(self, run: core.Executable, arguments: list, targets: Optional[list],
                 donate: Optional[Dict[int, int]]) -> tuple:
        """One call of the executable: every result, the stored tensors' new values last.
        A backend keeping values on a device overrides it (and `_returned`)."""
        return run(*arguments, out=targets, donate=donate)

    def _returned(self, value):
        """A result as the caller gets it (the executable's array, by default)."""
        return value

    def _initialize_tensors(self, tensors: List[AssignableTensorOp],
                            bindings: LengthBindings) -> None:
        """Run the init Function (one Constant result per tensor with a host initial
        value), then each initial-value op, lowered and run after what it reads."""
        order = initialization_order(tensors, self.initialized)
        valued = [t for t in order if t.initial_value is not None and t.initial_value_op is None]
        if valued:
            results = [_initial_node(t, bindings.lengths(t.axes, t)) for t in valued]
            values = core.compile(core.Function(results, []), "interpreter")()
            self.state.update(zip(valued, values))
        for tensor in order:
            if tensor.initial_value_op is not None:
                self.state[tensor] = self._computed_initial_value(tensor, bindings)
        self.initialized.update(t for t in order if t.persistent)

    def _computed_initial_value(self, tensor: AssignableTensorOp,
                                bindings: LengthBindings) -> np.ndarray:
        """The value of tensor's initial-value op, lowered and run on the core interpreter
        over the current values of the stored tensors it reads."""
        value_op = tensor.initial_value_op
        assert value_op is not None  # only tensors initialized by an op come here
        lowered = lower(schedule([value_op]), [value_op])
        (value,) = core.compile(lowered.function, "interpreter")(
            *[np.asarray(self.state[t]) for t in lowered.state_inputs])[:1]
        return tensor.array_from_initial_op(value, bindings.lengths(tensor.axes, tensor))

    def close(self) -> None:
        with self._lock:
            self._compiled.clear()
            self._readable.clear()
            self._donations.clear()
            self.pass_reports.clear()
            super().close()


def _function_outs(lowered: LoweredComputation, out) -> Optional[list]:
    """Per function result, the caller's array to write it into (None: a fresh one)."""
    if out is None:
        return None
    targets = [None] * len(lowered.function.results)
    for target, position in zip(out, lowered.result_positions):
        if target is not None and position is not None:
            targets[position] = target
    return targets


def _initial_node(tensor: AssignableTensorOp, lengths) -> core.Node:
    """A Constant with the tensor's initial value (a scalar fills, callables are called)."""
    value = tensor.initial_value
    dtype = core.element_type(tensor.dtype)
    with core.at_location(tensor.location):
        if not callable(value) and np.ndim(value) == 0:
            return core.Constant(dtype, lengths, np.asarray(value, dtype=tensor.dtype))
        return core.Constant(dtype, lengths, tensor.initial_array(lengths))

