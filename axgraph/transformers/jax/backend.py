"""The "jax" backend: each core Function traced into `jax.numpy` and compiled by `jax.jit`.

Arguments are checked and sizes bound as on every backend (`Function.bind`);
each distinct binding of the size variables gets its own jitted program,
traced from the kernels of axgraph/transformers/jax/kernels.py at those sizes
and kept in a least-recently-used cache of `cache_size` entries, as the cpu
backend keeps its programs (`cache_info()` shows them). A call may pass
NumPy arrays or `jax.Array` values; results come back as NumPy arrays
(`__call__`, the flag of the checks fetched with them) or stay on the device
(`run_on_device`). What a call decides for a program and a set of donated
arguments is made once (`ProgramCall`), so that a repeated call costs little
beyond `jax.jit`'s own dispatch (the jax transformer's planned calls,
call_plan.py, go straight to it). Donated arguments
(`donate=`, taken for arguments that are `jax.Array` values of a result's
shape and type) are given to XLA to write results over; in a program with
checks on the values each such result is the old value wherever a check failed,
so a failed call raises `FailedCheckError` holding the arguments' values intact.

Float64 and int64: JAX computes in 32 bits unless `jax_enable_x64` is set.
Every trace and call here runs inside the scoped `jax.enable_x64(True)`
context, so a graph's float64 and int64 values keep their types exactly, and
the setting of the user's own JAX code (outside these calls) is left alone.
"""
from __future__ import annotations

import contextlib
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from ... import core
from ...core.backend import Backend, CacheInfo, Capabilities, bind_arguments, checked_outs
from ...core.host import HostCall
from ...core.program_cache import CACHE_SIZE, ProgramCache
from ...core.node import Node
from ...debug_info import user_location
from ...errors import ExecutionError, FeedError, ShapeError, no_kernel_error
from .devices import find_device, memory_bytes
from .kernels import KERNELS, TraceContext, run_kernel


#: The most argument shapes remembered per function (beyond them the memory starts over).
KNOWN_ARGUMENTS = 64


class Cost(NamedTuple):
    """XLA's estimate of what one call of a compiled program costs.

    Attributes
    ----------
    flops : float
        Floating-point operations (a multiply-add counts two).
    bytes_accessed : float
        Bytes read and written in memory.
    transcendentals : float
        Transcendental function evaluations (exp, log, tanh, ...).
    """

    flops: float
    bytes_accessed: float
    transcendentals: float


class FailedCheckError(ExecutionError):
    """A check on the values failed during a call (a label out of range, an integer
    division by zero).

    Attributes
    ----------
    kept_arguments : dict of int to jax.Array
        By position, each argument the call donated, now held by this array with its
        value unchanged (the donated array itself is gone).
    """

    def __init__(self, message: str, location: Optional[Tuple[str, int]],
                 kept_arguments: Dict[int, Any]):
        super().__init__(message, location)
        self.kept_arguments = kept_arguments


class Program:
    """One binding's traced program: its jitted forms (one per set of donated arguments),
    the random nodes whose host draws it takes, and the checks its trace recorded."""

    def __init__(self, function: core.Function, bindings: Dict[str, int],
                 platform: str = "cpu", memory: Optional[int] = None):
        self.function = function
        self.bindings = bindings
        #: The device's platform ("cpu", "gpu", "tpu"): what its float arithmetic needs.
        self.platform = platform
        self.random_nodes = [n for n in function.nodes
                             if isinstance(n, (core.RandomUniform, core.RandomNormal))]
        #: The shape of each random node's draw at this binding.
        ctx = TraceContext(bindings, {})
        self.draw_shapes = [ctx.shape(n.shape) for n in self.random_nodes]
        #: (dtype, shape) of each result at this binding.
        self.result_types = [(r.element_type.dtype, ctx.shape(r.shape))
                             for r in function.results]
        if memory is not None:
            _refuse_results_beyond(self.result_types, memory)
        #: (node, message) of each check, in the order the trace made them.
        self.checks: List[Tuple[Node, str]] = []
        self.jitted: Dict[Tuple[Tuple[int, int], ...], Any] = {}
        #: The (result, argument) pairs donated, by the `donate=` items of a call that
        #: passes no array twice (the types and shapes are the binding's).
        self.donated: Dict[tuple, Tuple[Tuple[int, int], ...]] = {}
        self.has_host_calls = any(isinstance(n, HostCall) for n in function.nodes)
        #: The ready calls of this program, by the (result, argument) pairs they donate.
        self.calls: Dict[Tuple[Tuple[int, int], ...], "ProgramCall"] = {}
        self._check_values: Any = None

    def traced(self, guarded: Tuple[Tuple[int, int], ...] = ()):
        """The function to jit: `trace`'s results and the checks' flag alone (() without
        checks; the values the messages show cost outputs of their own, so a failed call
        computes them again, `check_values`), each result k of `guarded`'s (k, j) pairs
        keeping argument j's value when a check fails (so j may be donated: a failed call
        hands the stored value back unchanged)."""
        def run(*arguments):
            results, checks = self.trace(*arguments)
            if not checks:
                return results, ()
            failed = checks[0]
            if not guarded:
                return results, failed
            passed = failed == 0
            kept = list(results)
            for k, j in guarded:
                kept[k] = jnp.where(passed, results[k], arguments[j])
            return tuple(kept), failed
        return run

    def check_values(self, arguments: Sequence[Any]) -> tuple:
        """The values each check's message shows, for `arguments` (those of a call, the
        random draws last): computed again, only after a check failed."""
        if self._check_values is None:
            self._check_values = jax.jit(lambda *a: self.trace(*a)[1][1])
        return self._check_values(*arguments)

    def trace(self, *arguments):
        """The function's results from its arguments and the random draws (traced), and
        the checks: () when there are none, else (the failed one: 0 when all passed, else
        1 + the index of the first that failed; the values each message shows)."""
        count = len(self.function.parameters)
        ctx = TraceContext(self.bindings, dict(zip(self.random_nodes, arguments[count:])),
                           self.platform)
        values: Dict[Node, Any] = dict(zip(self.function.parameters, arguments[:count]))
        for node in self.function.nodes:
            if node not in values:
                values[node] = run_kernel(node, ctx, [values[i] for i in node.inputs])
        self.checks = [(check.node, check.message) for check in ctx.checks]
        results = tuple(values[r] for r in self.function.results)
        if not ctx.checks:
            return results, ()
        flags = jnp.stack([jnp.asarray(check.flag, bool) for check in ctx.checks])
        failed = jnp.where(jnp.any(flags), jnp.argmax(flags) + 1, 0).astype(np.int32)
        return results, (failed, tuple(check.values for check in ctx.checks))

    def argument_specs(self) -> List[Any]:
        """The shape and type of every argument at this binding (to lower without data)."""
        ctx = TraceContext(self.bindings, {})
        nodes = list(self.function.parameters) + self.random_nodes
        return [jax.ShapeDtypeStruct(ctx.shape(n.shape), n.element_type.dtype) for n in nodes]


def _refuse_results_beyond(result_types: Sequence[Tuple[Any, Tuple[int, ...]]],
                           memory: int) -> None:
    """MemoryError where the results alone need more than `memory` bytes (the device's)."""
    needed = sum(np.dtype(dtype).itemsize * int(np.prod(shape, dtype=np.float64))
                 for dtype, shape in result_types)
    if needed > memory:
        raise MemoryError(f"its results need {needed:.3g} bytes, more than the "
                          f"{memory:.3g} bytes the device holds")


def _jit(program: Program, guarded: Tuple[Tuple[int, int], ...], placement=None):
    """The one place programs are handed to `jax.jit` (placement options join here), the
    arguments j of `guarded`'s (result k, argument j) pairs donated."""
    donated = tuple(j for _, j in guarded)
    if placement is not None:  # a sharded transformer's: arguments and results on a mesh
        return placement.jit(program.traced(guarded), donated, len(program.random_nodes))
    return jax.jit(program.traced(guarded), donate_argnums=donated)


class ProgramCall:
    """A program's jitted form for one set of donated arguments, with everything a call of
    it needs (the random draws, where the arguments go, the JAX settings) decided once:
    repeated calls cost the jitted function's own dispatch and little more."""

    def __init__(self, function: "JaxFunction", program: Program,
                 guarded: Tuple[Tuple[int, int], ...]):
        self.function = function
        self.program = program
        #: The (result, argument) pairs donated; each such result keeps its argument's
        #: value where a check fails.
        self.guarded = guarded
        jitted = program.jitted.get(guarded)
        if jitted is None:
            jitted = program.jitted[guarded] = _jit(program, guarded, function.placement)
        self.jitted = jitted
        self._draws = [(node, function._generators[node], shape)
                       for node, shape in zip(program.random_nodes, program.draw_shapes)]
        self._donated = frozenset(j for _, j in guarded)
        #: The random draws of the last call (a failed check's values are computed again
        #: from them).
        self.drawn: List[Any] = []

    def __call__(self, arguments: Sequence[Any]) -> Tuple[tuple, Any]:
        """Launch the program on `arguments`: (its results, the checks' flag: 0 when all
        passed, else 1 + the index of the first that failed; () without checks), both on
        the device; nothing waits for the program to finish unless it prints."""
        drawn = self.drawn = [_draw(node, generator, shape)
                              for node, generator, shape in self._draws]
        function = self.function
        with function._call_scope():
            if function.placement is not None:  # on a mesh: each argument split by its axes
                arguments, drawn = function.placement.place(arguments, drawn)
            elif self._donated:  # the caller's NumPy arrays are copied to buffers XLA may
                arguments = tuple(  # write over
                    jax.device_put(np.array(a, copy=True), function.device)
                    if j in self._donated and not isinstance(a, jax.Array) else a
                    for j, a in enumerate(arguments))
            results, flag = self.jitted(*arguments, *drawn)
            if self.program.has_host_calls:  # the prints are done when the call returns
                jax.effects_barrier()
        return results, flag

    def on_device(self, arguments: Sequence[Any]) -> Tuple[tuple, Any]:
        """`__call__` for arguments already placed: no mesh, every donated argument a
        device array, no prints (the route of a planned call)."""
        with self.function._call_scope():
            if self._draws:
                drawn = self.drawn = [_draw(node, generator, shape)
                                      for node, generator, shape in self._draws]
                return self.jitted(*arguments, *drawn)
            return self.jitted(*arguments)

    def failure(self, flag: Any, arguments: Sequence[Any], results: Sequence[Any],
                drawn: Sequence[Any] = (), note: str = "") -> Optional[FailedCheckError]:
        """The error of the first check that failed in the call on `arguments` (with the
        random draws `drawn`) that gave `results` and `flag` (None when all passed), `note`
        added to its message: waits for the flag, one small copy to the host. Where one
        failed, its message's values are computed again from the arguments (each donated
        one now held, unchanged, by its result)."""
        if isinstance(flag, tuple):  # no checks
            return None
        failed = int(np.asarray(flag))
        if not failed:
            return None
        kept = list(arguments)
        for k, j in self.guarded:
            kept[j] = results[k]
        placement = self.function.placement
        with self.function._call_scope():
            if placement is not None:  # where the call had them
                kept, drawn = placement.place(kept, drawn)
            values = self.program.check_values([*kept, *drawn])
        node, message = self.program.checks[failed - 1]
        text = message.format(*[np.asarray(v).item() for v in values[failed - 1]])
        return FailedCheckError(f"{node.op} {node.name}: {text}{note}", node.location,
                                {j: results[k] for k, j in self.guarded})


def start_copies_to_host(arrays: Sequence[Any]) -> None:
    """Start copying `arrays` from an accelerator to the host together, so that reading
    them waits once, not once each (not needed on the CPU: host memory already)."""
    for array in arrays:
        array.copy_to_host_async()


class JaxFunction:
    """A core Function compiled with `jax.jit`: `fn(*arrays, out=None, donate=None)`."""

    def __init__(self, function: core.Function, cache_size: Optional[int] = CACHE_SIZE,
                 platform: Optional[str] = None):
        self.function = function
        for node in function.nodes:  # refused now, not at the first call
            if not isinstance(node, core.Parameter) and KERNELS.lookup(type(node)) is None:
                raise no_kernel_error(ExecutionError, f"the core op {node.op}", node.location,
                                      "jax kernel for it",
                                      f"register one with @axgraph.transformers.jax.kernels."
                                      f"kernel({node.op})")
        #: The programs per binding, least recently used dropped first.
        self._cache: ProgramCache[Program] = ProgramCache(
            lambda bindings: Program(self.function, bindings, self.device.platform,
                                     None if self.placement is not None else self._memory),
            cache_size)
        #: The most programs kept (None: no limit).
        self.cache_size = self._cache.maxsize
        #: Where programs run (and NumPy arguments are put).
        self.device = find_device(platform)
        #: The most bytes the device holds (results beyond it are refused, not run).
        self._memory = memory_bytes(self.device)
        #: Whether `device` is JAX's default when none is chosen (`_call_scope`).
        self._on_first_device = self.device == jax.devices()[0]
        self._generators = {node: np.random.default_rng(node.seed) for node in function.nodes
                            if isinstance(node, (core.RandomUniform, core.RandomNormal))}
        #: (type, dtype, shape) of each argument of calls whose arguments were taken as
        #: they are, to the sizes they bound.
        self._known_arguments: Dict[tuple, Dict[str, int]] = {}
        #: Where arguments and results live on a device mesh (`sharding.Placement`), set by
        #: a sharded transformer before the first call; None: on `device`.
        self.placement: Any = None

    # -- the cache of programs per binding ------------------------------------------------------
    def program(self, bindings: Dict[str, int]) -> Program:
        """The program for `bindings` (made on first use), now the most recently used."""
        last = self._cache.last
        if last is not None and last.bindings == bindings:  # the common case: as last time
            return self._cache.hit_last()
        return self._cache.get(bindings)

    @property
    def last_program(self) -> Optional[Program]:
        """The program of the last call (None before the first)."""
        return self._cache.last

    def cache_info(self) -> CacheInfo:
        """The programs kept per binding of the size variables, and how calls fared.

        Returns
        -------
        CacheInfo
            Calls that found their binding's program built (hits), calls that built
            one (misses), `cache_size`, and the bindings kept, least recently used
            first.
        """
        return self._cache.info()

    # -- calls ------------------------------------------------------------------------------------
    def __call__(self, *arrays, out=None, donate: Optional[Mapping[int, int]] = None
                 ) -> Tuple[np.ndarray, ...]:
        """Run on `arrays` (NumPy or jax arrays); the results as fresh NumPy arrays, or
        written into the caller's `out=` arrays (None entries: fresh ones)."""
        program, arguments = self._prepare(arrays)
        if out is not None:  # checked before anything runs
            ctx = TraceContext(program.bindings, {})
            out = checked_outs(self.function, out, arguments,
                               [ctx.shape(r.shape) for r in self.function.results])
        call = self._call_for(program, arguments, donate)
        results, flag = call(arguments)
        if self.device.platform != "cpu":  # the results and the checks' flag come to the
            start_copies_to_host([*results, *([] if isinstance(flag, tuple) else [flag])])
        error = call.failure(flag, arguments, results, call.drawn)  # host together
        if error is not None:
            raise error
        if out is None:
            return tuple(to_host(r) for r in results)
        returned = []
        for target, value in zip(out, results):
            if target is None:
                returned.append(to_host(value))
            else:
                np.copyto(target, np.asarray(value))
                returned.append(target)
        return tuple(returned)

    def run_on_device(self, *arrays, donate: Optional[Mapping[int, int]] = None
                      ) -> Tuple[Any, ...]:
        """Run on `arrays` (NumPy or jax arrays); the results as `jax.Array` values, left
        on the device for the next call to take as they are (waits for the checks' flag)."""
        program, arguments = self._prepare(arrays)
        call = self._call_for(program, arguments, donate)
        results, flag = call(arguments)
        error = call.failure(flag, arguments, results, call.drawn)
        if error is not None:
            raise error
        return tuple(results)

    def _prepare(self, arrays) -> Tuple[Program, Tuple]:
        # A call whose arguments have the types and shapes of an earlier call's, each
        # taken as it is (a jax.Array or C-ordered NumPy array of its parameter's exact
        # type), binds the same sizes: the checks that call passed hold.
        try:
            key: Optional[tuple] = tuple((type(a), a.dtype, a.shape) for a in arrays)
        except AttributeError:  # not an array: the full checks say so
            key = None
        bindings = self._known_arguments.get(key) if key is not None else None
        if bindings is not None and len(arrays) == len(self.function.parameters) \
                and all(type(a) is not np.ndarray or a.flags.c_contiguous for a in arrays):
            return self.program(bindings), tuple(arrays)
        arguments, bindings = bind_jax_arguments(self.function, arrays)
        if key is not None and all(a is b for a, b in zip(arguments, arrays)) \
                and all(type(a) is not np.ndarray or a.flags.c_contiguous for a in arrays):
            if len(self._known_arguments) >= KNOWN_ARGUMENTS:  # a stream of new shapes
                self._known_arguments.clear()
            self._known_arguments[key] = bindings
        return self.program(bindings), arguments

    def _call_for(self, program: Program, arguments: Tuple, donate) -> ProgramCall:
        """The ready call of `program` donating what `donate` allows for `arguments`."""
        guarded = self._donated(program, arguments, donate) if donate else ()
        call = program.calls.get(guarded)
        if call is None:
            call = program.calls[guarded] = ProgramCall(self, program, guarded)
        return call

    def _call_scope(self):
        """The JAX settings of a call: 64-bit types kept (NumPy float64 stays float64 on the
        device), and this device as the default one where it is not already (setting it
        costs jax.jit's dispatch several microseconds, and a call counts them)."""
        chosen = jax.config.jax_default_device
        if self._on_first_device if chosen is None else self.device == chosen:
            return jax.enable_x64(True)
        return self._scope()

    def _scope(self):
        """The context of every trace and call: 64-bit types on, on this device."""
        stack = contextlib.ExitStack()
        stack.enter_context(jax.enable_x64(True))
        stack.enter_context(jax.default_device(self.device))
        return stack

    def _donated(self, program: Program, arguments: Tuple, donate: Mapping[int, int]
                 ) -> Tuple[Tuple[int, int], ...]:
        """The (result, argument) pairs whose argument XLA may write the result over: an
        argument of the result's shape and type, passed once. The same whether an
        argument is a NumPy array (the first call, state fresh from its initializer) or a
        device array, so that one program serves both."""
        if len({id(a) for a in arguments}) == len(arguments):  # none passed twice
            key = tuple(donate.items())
            found = program.donated.get(key)
            if found is None:
                found = program.donated[key] = self._donated_pairs(program, arguments, donate)
            return found
        return self._donated_pairs(program, arguments, donate)

    @staticmethod
    def _donated_pairs(program: Program, arguments: Tuple, donate: Mapping[int, int]
                       ) -> Tuple[Tuple[int, int], ...]:
        taken = []
        for k, j in donate.items():
            array = arguments[j]
            result = program.result_types[k]
            if array.dtype == result[0] and tuple(array.shape) == result[1] \
                    and sum(a is array for a in arguments) == 1:
                taken.append((k, j))
        return tuple(sorted(taken, key=lambda pair: pair[1]))

    # -- inspection ---------------------------------------------------------------------------------
    def _lowered(self, bindings: Optional[Mapping[str, int]]):
        if bindings is None and self.last_program is not None:
            program = self.last_program
        elif bindings is not None or not self.function.free_symbols:
            # looked at, not run: the cache and its counts are left as they are
            bindings = dict(bindings or {})
            program = self._cache.peek(bindings) \
                or Program(self.function, bindings, self.device.platform)
        else:
            raise ExecutionError(f"nothing has run yet, and {self.function.name} has size "
                                 f"variables {sorted(self.function.free_symbols)}: call it "
                                 f"first, or give their values (bindings=)", user_location())
        jitted = program.jitted.get(()) or _jit(program, (), self.placement)
        with self._scope():
            return jitted.lower(*program.argument_specs())

    def lowered_text(self, bindings: Optional[Mapping[str, int]] = None) -> str:
        """The StableHLO module of the last call's program (or of `bindings`' program).

        Parameters
        ----------
        bindings : dict of str to int, optional
            The size variables' values; default: those of the last call (none needed
            for a function without size variables).

        Returns
        -------
        str
            The MLIR text JAX hands to XLA (``func.func public @main``, ``stablehlo.*``).

        Raises
        ------
        ExecutionError
            Nothing has run yet and the function has size variables.
        """
        return self._lowered(bindings).as_text()

    def cost(self, bindings: Optional[Mapping[str, int]] = None) -> Cost:
        """XLA's estimate of one call's cost (flops, bytes accessed, transcendentals).

        Parameters
        ----------
        bindings : dict of str to int, optional
            As for `lowered_text`.

        Returns
        -------
        Cost
            What XLA's cost analysis of the compiled program reports (0 where it
            reports nothing).
        """
        with self._scope():
            analysis = self._lowered(bindings).compile().cost_analysis()
        if isinstance(analysis, (list, tuple)):  # one entry per program in older versions
            analysis = analysis[0] if analysis else {}
        analysis = analysis or {}
        return Cost(flops=float(analysis.get("flops", 0.0)),
                    bytes_accessed=float(analysis.get("bytes accessed", 0.0)),
                    transcendentals=float(analysis.get("transcendentals", 0.0)))


def _draw(node: Node, generator: np.random.Generator, shape) -> np.ndarray:
    """The host's draw of a random node (the interpreter's, value for value)."""
    if isinstance(node, core.RandomNormal):
        draw = generator.normal(node.mean, node.stddev, shape)
    else:
        assert isinstance(node, core.RandomUniform)  # Program.random_nodes holds no other
        draw = generator.uniform(node.low, node.high, shape)
    return draw.astype(node.element_type.dtype)


def to_host(value) -> np.ndarray:
    """A result as a NumPy array of its own (writeable, not a view of device memory)."""
    return np.array(value, copy=True)


def bind_jax_arguments(function: core.Function, arrays) -> Tuple[Tuple, Dict[str, int]]:
    """`core.bind_arguments`, also taking `jax.Array` values (kept on their device).

    Raises
    ------
    FeedError
        As `core.bind_arguments`: a count, an element type or a shape that does not fit.
    """
    if not any(isinstance(a, jax.Array) for a in arrays):
        return bind_arguments(function, arrays)
    parameters = function.parameters
    if len(arrays) != len(parameters):
        return bind_arguments(function, arrays)  # its message
    checked: List[Any] = []
    for index, (array, parameter) in enumerate(zip(arrays, parameters)):
        if isinstance(array, jax.Array):
            if array.dtype != parameter.element_type.dtype:
                raise FeedError(f"{function.describe_parameter(index)} takes "
                                f"{parameter.type_str()}; got {array.dtype} {array.shape} "
                                f"(element types are never converted)", user_location())
            checked.append(array)
        else:
            checked.extend(bind_arguments(core.Function([parameter], [parameter]),
                                          [array])[0])
    try:
        bindings = function.bind([a.shape for a in checked])
    except ShapeError as error:
        raise FeedError(error.message, user_location()) from None
    return tuple(checked), bindings


class JaxBackend(Backend):
    """Compiles core Functions with `jax.jit`: a program per binding of the size variables,
    on the CPU, GPU or TPU that JAX finds."""

    capabilities = Capabilities(donation=True)

    def compile(self, function: core.Function, cache_size: Optional[int] = CACHE_SIZE,
                platform: Optional[str] = None) -> JaxFunction:
        """`function` ready to call; a program is traced and jitted per binding of its size
        variables.

        Parameters
        ----------
        function : core.Function
            The function to compile.
        cache_size : int or None, optional
            The most programs kept, one per binding of the size variables, the least
            recently used dropped first (default 8; None: no limit).
        platform : str, optional
            "cpu", "gpu" or "tpu": run on the first device of that platform. None
            (default): JAX's default device.

        Returns
        -------
        JaxFunction
            The executable; `cache_info()` reports its programs.

        Raises
        ------
        ExecutionError
            A node's op has no jax kernel.
        AxgraphTypeError, AxgraphValueError
            `cache_size` is not an int >= 1 or None.
        DeviceNotFoundError
            JAX sees no device of `platform`.
        """
        return JaxFunction(function, cache_size=cache_size, platform=platform)
