"""The repeated call of a jax computation, planned once: what it costs beyond `jax.jit`'s own
dispatch is a few argument checks.

A computation's first call with arguments of some types and shapes takes the general
route (feeds checked and converted, lengths bound, stored tensors initialized, the
program found or built). What that route decided then holds for every later call whose
arguments have the same types and shapes and whose stored values are the arrays the
last call left (or arrays of the same types and shapes): the order of the program's
arguments, which it donates, which results are stored and which are returned. A
`CallPlan` keeps those decisions, checks that they still hold (each fed array's type,
element type and shape; each stored value's identity), and runs the program.

Checks on the values (an index out of range) are read with the results when they come to
the host. Results kept on the device (``keep_on_device=True``) are not waited for: the
check is read by the transformer's next call, or `JaxTransformer.wait`. The program keeps
each stored value unchanged where a check fails, so the stored values are right either
way, and the error is raised before anything else runs. Checks that read fed device arrays
alone (labels in range) are not read again for the very arrays that last passed them: a
`jax.Array` never changes, and on an accelerator each read of the flag costs a transfer
and a wait (about 0.1 ms on a GPU, as much as a small training step).
"""
from __future__ import annotations

import functools
import operator
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Sequence, Tuple

import jax
import numpy as np

from ...op_graph.tensors import AssignableTensorOp
from .backend import FailedCheckError, JaxFunction, Program, ProgramCall
from .backend import start_copies_to_host, to_host

if TYPE_CHECKING:
    from .transformer import JaxComputation, JaxTransformer

#: What `CallPlan.run` returns when its decisions do not hold for a call.
MISS: Any = object()

#: The most plans a computation keeps (one per set of argument types and shapes).
PLANS_KEPT = 8


def plan_key(values: Sequence[Any]) -> Optional[tuple]:
    """What a plan is found by: each positional value's type, element type, shape and, for
    a device array, where it lives (None when a value is not an array)."""
    try:
        return tuple([(type(v), v.dtype, v.shape, getattr(v, "sharding", None))
                      for v in values])
    except AttributeError:
        return None


def _taken_as_is(value: Any, placeholder: AssignableTensorOp, device: Any) -> bool:
    """Whether the general route feeds `value` to the program unconverted (a C-ordered
    NumPy array, or a concrete jax array on `device`, of the placeholder's exact element
    type)."""
    if type(value) is np.ndarray:
        return bool(value.flags.c_contiguous) and value.dtype == placeholder.dtype
    return type(value) is concrete_array_type() and value.dtype == placeholder.dtype \
        and value.devices() == {device}


@functools.lru_cache(maxsize=None)
def concrete_array_type() -> Any:
    """The type of JAX's arrays holding values (a `jax.Array` may also be a tracer)."""
    return type(jax.device_put(np.zeros(())))


def _getter(keys: Sequence[Any]) -> Callable[[Any], tuple]:
    """A function taking the items at `keys` of a sequence or a dict, as a tuple (in C:
    `operator.itemgetter`, which gives a lone item rather than a tuple of one)."""
    if not keys:
        return lambda items: ()
    if len(keys) == 1:
        (only,) = keys
        return lambda items: (items[only],)
    return operator.itemgetter(*keys)


class PendingCheck:
    """The checks of a call whose results stayed on the device, not read yet."""

    __slots__ = ("call", "flag", "arguments", "results", "drawn", "location", "plan",
                 "checked")

    def __init__(self, call: ProgramCall, flag: Any, arguments: tuple, results: tuple,
                 location: Tuple[str, int], plan: Optional["CallPlan"] = None,
                 checked: Optional[tuple] = None):
        self.call, self.flag, self.arguments, self.results, self.location = \
            call, flag, arguments, results, location
        self.drawn = call.drawn
        #: The plan that made the call and the fed arrays its checks read alone (None
        #: where they read more): those arrays are the plan's verified ones once passed.
        self.plan, self.checked = plan, checked

    def failed(self) -> bool:
        """Whether a check failed: waits for the call (one small copy to the host)."""
        if np.asarray(self.flag):
            return True
        if self.plan is not None and self.checked is not None:
            self.plan._verified = self.checked
        return False

    def error(self, found_by: str) -> Optional[FailedCheckError]:
        """The failed check's error (None when all passed); `found_by` says what read it."""
        file, line = self.location
        return self.call.failure(
            self.flag, self.arguments, self.results, self.drawn,
            f" (in a call, kept on the device, of the computation made at {file}:{line}; "
            f"found by {found_by}: the stored values are as before that call)")


class CallPlan:
    """A computation's calls with arguments of one set of types and shapes: made by
    `CallPlan.make` after a call that took the general route, run by `run`."""

    def __init__(self, transformer: "JaxTransformer", computation: "JaxComputation",
                 run: JaxFunction, program: Program, call: ProgramCall, key: tuple,
                 stored_tensors: List[AssignableTensorOp], order: List[int],
                 written: List[Tuple[AssignableTensorOp, int]], compiled: Any = None):
        self.transformer, self.computation, self.program, self.call = \
            transformer, computation, program, call
        self._cache = run._cache
        self._cache_key = self._cache.key(program.bindings)
        #: The program compiled for exactly these arguments, called without JAX's settings
        #: or `jax.jit`'s lookup (None where NumPy arrays or random draws are fed: their
        #: 64-bit types need the settings of a call).
        self._compiled = compiled
        self._state = transformer.state
        #: Whether the program checks values (it then returns their flag).
        self._checked = bool(program.checks)
        #: Whether results and flags are copied from an accelerator (not host memory).
        self._remote = run.device.platform != "cpu"
        count = len(key)
        #: The fed positions holding NumPy arrays (each must still be C-ordered).
        self._numpy_feeds = [i for i, (kind, *_) in enumerate(key) if kind is np.ndarray]
        self._device_feeds = _getter([i for i, (kind, *_) in enumerate(key)
                                      if kind is not np.ndarray])
        self._read_stored = _getter(stored_tensors)
        #: (dtype, shape) of each stored value the program takes.
        self._stored_types = [(spec.dtype, tuple(spec.shape))
                              for spec in _stored_specs(program, order, count)]
        #: The program's arguments from (fed values + stored values).
        self._arrange = _getter(order)
        donated = {j for _, j in call.guarded}
        self._donated_stored = _getter([order[j] - count for j in sorted(donated)])
        self._written_tensors = [tensor for tensor, _ in written]
        self._written_outputs = _getter([k for _, k in written])
        #: Whether the stored values the program reads are those it writes, in one order
        #: (the new values are then the stored values the next call expects).
        self._reads_what_it_writes = self._written_tensors == list(stored_tensors)
        lowered = transformer.lowered(computation)
        self._result_positions = list(lowered.result_positions)
        written_outputs = {k for _, k in written}
        #: Result positions that are also stored: the caller gets a copy (the stored
        #: array is donated by a later call).
        self._copied = {p for p in self._result_positions if p in written_outputs}
        parameters = set(lowered.function.parameters)
        #: Result positions that are arguments passed through (JAX may return the argument
        #: itself: a stored one is copied too).
        self._parameter_results = {p for p in self._result_positions if p is not None
                                   and lowered.function.results[p] in parameters}
        self._package = computation._package
        #: Whether every result is returned as the program gives it (none absent, none a
        #: stored value or a parameter passed through, which the caller gets a copy of).
        self._plain_results = None not in self._result_positions and not self._copied \
            and not self._parameter_results
        self._results_of = _getter(self._result_positions)
        self._expected: tuple = ()
        #: The values of the last call, where all are device arrays (`repeats`).
        self._last_values: Optional[tuple] = None
        checked = _checked_feeds(program, order, count) if self._checked else None
        #: The fed device arrays the checks read, where they read nothing else (None:
        #: the flag of every call is read).
        self._checked_of = None if checked is None or any(
            key[i][0] is np.ndarray for i in checked) else _getter(checked)
        #: The last such arrays that passed the checks (they pass again: never changed).
        self._verified: Optional[tuple] = None

    @classmethod
    def make(cls, transformer: "JaxTransformer", computation: "JaxComputation",
             values: Sequence[Any]) -> Optional["CallPlan"]:
        """The plan of calls like the one just made with `values` (positional, no
        feed_dict, no out=), or None where the general route must stay (sharded
        transformers, temporaries, prints, values it converts, stored values written
        without their old value kept on a failed check)."""
        if transformer.sharding is not None or computation.temporary_tensors:
            return None
        key = plan_key(values)
        if key is None or not all(_taken_as_is(v, p, transformer.device)
                                  for v, p in zip(values, computation.parameters)):
            return None
        lowered, run = transformer._compile(computation)
        program = run.last_program
        if program is None or program.has_host_calls:
            return None
        feeds = {p: i for i, p in enumerate(computation.parameters)}
        state = transformer.state
        stored_tensors: List[AssignableTensorOp] = []
        order: List[int] = []
        for tensor in lowered.state_inputs:
            if tensor in feeds:
                order.append(feeds[tensor])
            elif tensor in state:
                order.append(len(values) + len(stored_tensors))
                stored_tensors.append(tensor)
            else:
                return None
        if len({id(state[t]) for t in stored_tensors}) != len(stored_tensors):
            return None  # a value stored twice is never donated: the general route
        # stored values still on the host (read, never written) go to the device once
        with run._call_scope():
            for tensor in stored_tensors:
                if type(state[tensor]) is not concrete_array_type():
                    state[tensor] = jax.device_put(state[tensor], run.device)
        arguments = tuple(values) + tuple(state[t] for t in stored_tensors)
        arguments = tuple(arguments[i] for i in order)
        donate = {k: j for k, j in lowered.replaced_state.items()
                  if lowered.state_inputs[j] not in feeds}
        call = run._call_for(program, arguments, donate or None)
        count = len(lowered.function.results) - len(lowered.state_outputs)
        written = [(tensor, count + i) for i, tensor in enumerate(lowered.state_outputs)
                   if tensor not in feeds]
        if program.checks and not {k for _, k in written} <= {k for k, _ in call.guarded}:
            return None  # a failed check would leave a new value stored
        compiled = None
        if not any(kind is np.ndarray for kind, *_ in key) and not program.random_nodes:
            with run._call_scope():
                compiled = call.jitted.lower(*arguments).compile()
        plan = cls(transformer, computation, run, program, call, key, stored_tensors, order,
                   written, compiled)
        plan._expected = plan._read_stored(state)
        return plan

    def _stored_fit(self, stored: tuple) -> bool:
        """Whether stored values other than those the last call left have the types the
        program takes (each a device array, none the same array as another)."""
        kind = concrete_array_type()
        for value, (dtype, shape) in zip(stored, self._stored_types):
            if type(value) is not kind or value.dtype != dtype or value.shape != shape:
                return False
        return len(set(map(id, stored))) == len(stored)

    def repeats(self, values: tuple) -> bool:
        """Whether `values` are the very arrays of this plan's last call, all device arrays
        (whose types and shapes never change): the plan's key holds without computing it."""
        last = self._last_values
        return last is not None and len(values) == len(last) \
            and all(map(operator.is_, values, last))

    def run(self, values: tuple, keep_on_device: bool, repeated: bool = False) -> Any:
        """One call on `values` (positional, of this plan's key; `repeated`: as `repeats`
        found): what the computation returns, or `MISS` where the plan does not hold (the
        general route then runs)."""
        for i in self._numpy_feeds:
            if not values[i].flags.c_contiguous:
                return MISS
        state = self._state
        try:
            stored = self._read_stored(state)
        except KeyError:
            return MISS
        if all(map(operator.is_, stored, self._expected)):
            # the stored values are the arrays the last call made: none can be a value fed
            # to it, nor one fed again now
            fresh = repeated
        elif self._stored_fit(stored):
            fresh = False
        else:
            return MISS
        if not fresh:
            donated = self._donated_stored(stored)
            if donated and not set(map(id, donated)).isdisjoint(
                    map(id, self._device_feeds(values))):
                return MISS  # a stored array fed as a value too: never donated
        cache, program = self._cache, self.program
        if cache.last is not program and cache.programs.get(self._cache_key) is not program:
            return MISS  # its program was dropped from the cache
        cache.hit(self._cache_key, program)
        self.computation._calls += 1
        arguments = self._arrange(values + stored)
        compiled = self._compiled
        results, flag = compiled(*arguments) if compiled is not None \
            else self.call.on_device(arguments)
        error = None
        checked = self._checked_of(values) if self._checked_of is not None else None
        if not self._checked or (checked is not None and self._verified is not None
                                 and all(map(operator.is_, checked, self._verified))):
            pass  # no checks, or the very arrays that passed them last
        elif keep_on_device:
            if self._remote:  # on its way to the host while the program runs
                flag.copy_to_host_async()
            self.transformer._pending = PendingCheck(self.call, flag, arguments, results,
                                                     self.computation._location, self,
                                                     checked)
        else:
            if self._remote:  # the results and the flag come to the host together
                start_copies_to_host([results[p] for p in self._result_positions
                                      if p is not None] + [flag])
            error = self.call.failure(flag, arguments, results, self.call.drawn)
            if error is None and checked is not None:
                self._verified = checked
        # stored: the new values, or the old ones where a check failed (the program kept them)
        written = self._written_outputs(results)
        state.update(zip(self._written_tensors, written))
        self._expected = written if self._reads_what_it_writes else self._read_stored(state)
        self._last_values = None if self._numpy_feeds else values
        if error is not None:
            raise error
        if keep_on_device:
            if self._plain_results:
                return self._package(self._results_of(results))
            outputs = [None if p is None else _copied(results[p])
                       if p in self._copied or (p in self._parameter_results
                                                and any(results[p] is s for s in stored))
                       else results[p] for p in self._result_positions]
        else:
            outputs = [None if p is None else to_host(results[p])
                       for p in self._result_positions]
        return self._package(outputs)


def _checked_feeds(program: Program, order: List[int], count: int) -> Optional[List[int]]:
    """The positions of the fed values the program's checks read, where they read nothing
    else that may change from call to call (a stored value, a random draw): None then."""
    source = {node: order[j] for j, node in enumerate(program.function.parameters)}
    drawn = set(program.random_nodes)
    stack = [node for node, _ in program.checks]
    seen, fed = set(), set()
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        if node in source:
            if source[node] >= count:
                return None
            fed.add(source[node])
        elif node in drawn:
            return None
        else:
            stack.extend(node.inputs)
    return sorted(fed)


def _stored_specs(program: Program, order: List[int], count: int) -> List[Any]:
    """The argument spec of each stored value, in the order the plan reads them."""
    specs = program.argument_specs()
    by_stored = {}
    for j, source in enumerate(order):
        if source >= count:
            by_stored[source - count] = specs[j]
    return [by_stored[i] for i in range(len(by_stored))]


def _copied(value: Any) -> Any:
    import jax.numpy as jnp

    return jnp.array(value, copy=True)
