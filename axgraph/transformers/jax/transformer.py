"""The "jax" transformer (and "gpu", the same on a GPU): axes graphs compiled by XLA.

    with ng.make_transformer("jax") as t:
        step = t.computation([loss, update], x, y)
        step(xv, yv)                        # NumPy results
        step(xv, yv, keep_on_device=True)   # jax.Array results, for the next call
        print(step.lowered_text())          # the StableHLO XLA compiles
        print(step.cost())                  # XLA's flop and byte estimate
        print(step.cache_info())            # its programs, one per binding of lengths

Variables and other stored tensors stay on the device between calls (as
`jax.Array` values in `transformer.state`; reading them, `op.value` or
serialization, copies them to the host), and the ones a computation replaces
are donated to XLA, which writes their new values over them.

A call like an earlier one (fed arrays of the same types and shapes) runs on the plan that
call left (call_plan.py): a few checks, then the jitted program. A call keeping its
results on the device does not wait for them, so a check on the values that fails in it
is raised by the transformer's next call, or by `wait()`.
"""
from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Sequence

import jax

from ...debug_info import user_location
from ...errors import ExecutionError, TransformerClosedError
from ..base import Computation, _checked_feed
from ...core.program_cache import CACHE_SIZE, checked_cache_size
from ..lowering_transformer import LoweringTransformer
from .backend import Cost, FailedCheckError, to_host
from .call_plan import MISS, PLANS_KEPT, CallPlan, PendingCheck, plan_key
from .devices import find_device
from .sharding import GlobalValue, Placement, ProcessLocalFeeds, sharding_of, stored


class JaxComputation(Computation):
    """A computation that can leave its results on the device and show what XLA runs.

    Its calls take a `keep_on_device` keyword (default: the transformer's): True
    returns `jax.Array` results, which a later call takes back as they are.
    """

    def __init__(self, transformer: "JaxTransformer", results: Any,
                 parameters: Sequence[Any]) -> None:
        super().__init__(transformer, results, parameters)
        #: The plans of repeated calls, by their arguments' types and shapes (`CallPlan`).
        self._plans: Dict[tuple, Optional[CallPlan]] = {}
        #: The plan of the last call that ran on one.
        self._last_plan: Optional[CallPlan] = None

    def __call__(self, *values, feed_dict=None, out=None, keep_on_device: Optional[bool] = None):
        """Run once, as `Computation.__call__`; `keep_on_device=True` returns jax arrays."""
        transformer: JaxTransformer = self.transformer  # type: ignore[assignment]
        try:
            with transformer._lock:
                if transformer._pending is not None:
                    transformer._settle("the next call, which did not run")
                keep = transformer._keep_on_device if keep_on_device is None \
                    else bool(keep_on_device)
                if feed_dict is None and out is None and not transformer.closed:
                    plan = self._last_plan
                    if plan is None or not plan.repeats(values):
                        return self._planned_call(values, keep)
                    returned = plan.run(values, keep, True)
                    # a plan that missed on the very arrays of its last call misses on any
                    return returned if returned is not MISS else self._planned_call(
                        values, keep, missed=plan)
                return self._general_call(values, feed_dict, out, keep)
        except jax.errors.JaxRuntimeError as error:
            raise self._runtime_error(error) from error

    def _runtime_error(self, error: Exception) -> ExecutionError:
        """XLA's failure while running a program, as axgraph's: `OutOfMemoryError` where it
        says it could not allocate, else `ExecutionError` naming this computation."""
        text = str(error)
        if "RESOURCE_EXHAUSTED" in text or "out of memory" in text.lower():
            return self.out_of_memory(MemoryError(text))
        file, line = self._location
        return ExecutionError(f"XLA failed running the computation made at {file}:{line} "
                              f"on the jax transformer: {text}", user_location())

    def _planned_call(self, values: tuple, keep: bool, missed: Optional[CallPlan] = None):
        """A call of plain positional arguments: on the plan of their types and shapes
        (unless it is `missed`, which just declined them), or the general route, which
        then leaves a plan for the next such call."""
        key = plan_key(values)
        plan = self._plans.get(key) if key is not None else None
        if plan is not None and plan is not missed:
            returned = plan.run(values, keep)
            if returned is not MISS:
                self._last_plan = plan
                return returned
        returned = self._general_call(values, None, None, keep)
        if key is not None and len(values) == len(self.parameters):
            if key not in self._plans and len(self._plans) >= PLANS_KEPT:
                self._plans.clear()  # a stream of new shapes
            self._plans[key] = CallPlan.make(self.transformer, self, values)  # type: ignore
            self._last_plan = None
        return returned

    def _general_call(self, values: tuple, feed_dict, out, keep: bool):
        """`Computation.__call__`'s route, results kept on the device or not as `keep` says."""
        transformer: JaxTransformer = self.transformer  # type: ignore[assignment]
        saved = transformer._keep_on_device
        transformer._keep_on_device = keep
        try:
            return super().__call__(*values, feed_dict=feed_dict, out=out)
        finally:
            transformer._keep_on_device = saved

    _direct_feeds = (jax.Array,)

    def _feed_value(self, placeholder, value):
        """A `jax.Array` of the placeholder's exact type is used as it is (no host round
        trip); anything else is converted and checked as on every transformer."""
        if isinstance(value, jax.Array) and value.dtype == placeholder.dtype:
            transformer = self.transformer
            assert isinstance(transformer, JaxTransformer)
            if transformer.sharding is None and value.devices() != {transformer.device}:
                return jax.device_put(value, transformer.device)  # XLA takes one device's
            return value
        return _checked_feed(placeholder, value)

    def _executable(self):
        if self.transformer.closed:
            raise TransformerClosedError(
                "this computation's jax transformer is closed; its compiled programs went "
                "with it", user_location())
        return self.transformer._compile(self)[1]

    def lowered_text(self, bindings: Optional[Mapping[str, int]] = None) -> str:
        """The StableHLO module XLA compiles for this computation (its last call's lengths).

        Parameters
        ----------
        bindings : dict of str to int, optional
            The lengths of the axes fed data sizes, by size variable (as
            `cache_info().keys` names them); default: those of the last call.

        Returns
        -------
        str
            The MLIR text (``func.func public @main(...)`` over ``stablehlo`` ops).

        Raises
        ------
        ExecutionError
            Nothing has run yet and some length comes from fed data.
        TransformerClosedError
            The transformer is closed.
        """
        return self._executable().lowered_text(bindings)

    def cost(self, bindings: Optional[Mapping[str, int]] = None) -> Cost:
        """XLA's estimate of one call: ``Cost(flops, bytes_accessed, transcendentals)``.

        Parameters
        ----------
        bindings : dict of str to int, optional
            As for `lowered_text`.

        Returns
        -------
        Cost
            The estimate of XLA's cost analysis of the compiled program.

        Raises
        ------
        ExecutionError
            Nothing has run yet and some length comes from fed data.
        TransformerClosedError
            The transformer is closed.
        """
        return self._executable().cost(bindings)

    @property
    def function(self):
        """The optimized core Function this computation runs."""
        return self.transformer.lowered(self).function


class ShardedJaxComputation(ProcessLocalFeeds, JaxComputation):
    """A computation of a transformer with a mesh: it also takes process-local batches
    (``process_local=True``, see `sharding.ProcessLocalFeeds`)."""


class JaxTransformer(LoweringTransformer):
    """The lowering transformer on the "jax" backend: programs compiled by `jax.jit`.

    Parameters
    ----------
    optimize : bool, optional
        Run the pass pipeline before compiling (default True).
    cache_size : int or None, optional
        The programs kept per computation, one per binding of the lengths fed
        data gives (default 8; None: no limit).
    platform : str, optional
        "cpu", "gpu" or "tpu": run on that platform's first device. None
        (default): JAX's default device (an accelerator when JAX finds one).
    keep_on_device : bool, optional
        Whether calls return `jax.Array` results by default (default False:
        NumPy arrays); each call may say otherwise.
    mesh : jax.sharding.Mesh, optional
        Run on the devices of this mesh (of every process, after
        `jax.distributed.initialize`), each tensor placed by its axes.
    axis_mapping : dict of Axis to str, optional
        With `mesh`: the mesh axis that splits each axis named (matched by
        identity); other axes are replicated (docs/distributed.md).

    Raises
    ------
    DeviceNotFoundError
        JAX sees no device of `platform`; the message lists those it sees.
    ShardingError
        A mapping the mesh cannot follow (a mesh axis it does not have, an axis
        length its mesh axis does not divide).
    """

    def __init__(self, optimize: bool = True, cache_size: Optional[int] = CACHE_SIZE,
                 platform: Optional[str] = None, keep_on_device: bool = False,
                 mesh: Any = None, axis_mapping: Optional[Mapping] = None):
        #: Where each tensor lives on the mesh (None: no mesh, on `device`).
        self.sharding = sharding_of(mesh, axis_mapping)
        #: The device computations run on (checked now: a missing GPU fails here).
        self.device = find_device(platform)
        super().__init__("jax", optimize=optimize, cache_size=checked_cache_size(cache_size),
                         platform=platform)
        self._keep_on_device = bool(keep_on_device)
        #: The checks of the last call if it kept its results on the device and nothing
        #: has read them yet (`wait`).
        self._pending: Optional[PendingCheck] = None

    def wait(self) -> None:
        """Wait for the calls made so far, and raise a check on the values that failed in
        one of them.

        A call with ``keep_on_device=True`` returns without waiting for its program, so a
        check on the values (an index out of range) is read later: by the next call of
        any of this transformer's computations (which then raises instead of running),
        or here. Stored values are left as they were before the call whose check failed.

        Raises
        ------
        FailedCheckError
            A check failed in a call made with ``keep_on_device=True``.
        """
        with self._lock:
            self._settle("transformer.wait()")

    def close(self) -> None:
        """Release stored tensors and compiled programs; the transformer cannot be used
        afterwards.

        Raises
        ------
        FailedCheckError
            A check failed in the last call, made with ``keep_on_device=True`` and not
            read since (raised after everything is released, so it is never lost).
        """
        with self._lock:
            pending, self._pending = self._pending, None
            for computation in self.computations:
                if isinstance(computation, JaxComputation):
                    computation._plans.clear()
                    computation._last_plan = None
            super().close()
        _raise_if_failed(pending, "transformer.close()")

    def __exit__(self, exc_type, *rest) -> None:
        if exc_type is not None:  # an error is on its way out: a pending check adds nothing
            with self._lock:
                self._pending = None
        self.close()

    def _settle(self, found_by: str) -> None:
        """Read the pending checks (if any) of the last call; raise the failed one."""
        pending, self._pending = self._pending, None
        _raise_if_failed(pending, found_by)

    def _make_computation(self, results, parameters) -> Computation:
        if self.sharding is not None:
            return ShardedJaxComputation(self, results, parameters)
        return JaxComputation(self, results, parameters)

    def _compile(self, computation: Computation):
        found = super()._compile(computation)
        if self.sharding is not None and found[1].placement is None:
            found[1].placement = Placement(self.sharding, found[0], computation.results)
        return found

    def _execute(self, run, arguments, targets, donate) -> tuple:
        given = arguments
        if self.sharding is not None:
            arguments = [a.array if isinstance(a, GlobalValue) else a for a in arguments]
        try:
            results = run.run_on_device(*arguments, donate=donate)
        except FailedCheckError as error:  # the stored values it donated, handed back
            self._restore({id(given[j]): value for j, value in error.kept_arguments.items()})
            raise
        if self.sharding is None:
            return results
        return tuple(stored(value) for value in results)

    def _restore(self, kept: Mapping[int, Any]) -> None:
        """Each stored value (by id) that a failed call donated replaced by the array
        holding it now."""
        for tensor, value in list(self.state.items()):
            if id(value) in kept:
                self.state[tensor] = kept[id(value)] if self.sharding is None \
                    else stored(kept[id(value)])

    def _returned(self, value: Any):
        if not self._keep_on_device:
            return to_host(value)
        if isinstance(value, GlobalValue):
            return value.array
        if any(value is stored for stored in self.state.values()):
            # the stored value is donated by a later call: the caller gets its own copy
            import jax.numpy as jnp

            return jnp.array(value, copy=True)
        return value


class GpuTransformer(JaxTransformer):
    """The "gpu" transformer (Nervana Graph v0.4's name): the jax transformer on a GPU.

    Parameters
    ----------
    optimize, cache_size, keep_on_device
        As for `JaxTransformer`.

    Raises
    ------
    DeviceNotFoundError
        JAX sees no GPU; the message lists the devices it sees.
    """

    def __init__(self, optimize: bool = True, cache_size: Optional[int] = CACHE_SIZE,
                 keep_on_device: bool = False):
        super().__init__(optimize=optimize, cache_size=cache_size, platform="gpu",
                         keep_on_device=keep_on_device)


def _raise_if_failed(pending: Optional[PendingCheck], found_by: str) -> None:
    """Raise the FailedCheckError of `pending` if its checks failed (`found_by` says who read
    them)."""
    if pending is not None and pending.failed():
        error = pending.error(found_by)
        assert error is not None  # failed() said so
        raise error
